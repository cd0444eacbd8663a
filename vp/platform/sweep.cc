#include "vp/platform/sweep.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <vector>

namespace mprdma::platform {
namespace {

bool is_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// The overrides of one 'with' entry, "key=value;key=value": each part with
// the blanks around it trimmed ("a=1; b=2" reads as written); an empty
// entry has none, and an empty part (";;", a trailing ';') stays, for the
// check to refuse.
std::vector<std::string> split_with(const std::string& w) {
  std::vector<std::string> parts;
  for (size_t start = 0; !w.empty() && start <= w.size();) {
    const size_t end = std::min(w.find(';', start), w.size());
    size_t a = start, z = end;
    while (a < z && std::isspace(static_cast<unsigned char>(w[a]))) ++a;
    while (z > a && std::isspace(static_cast<unsigned char>(w[z - 1]))) --z;
    parts.push_back(w.substr(a, z - a));
    start = end + 1;
  }
  return parts;
}

// Labels become parts of directory and metric names.
bool is_label(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          c == '+'))
      return false;
  return true;
}

bool parse_seed(const std::string& text, int64_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

bool parse_number(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end) return false;
  *out = v;
  return true;
}

}  // namespace

void SweepParameter::bind(core::Binder& b) {
  b.field("name", name,
          "Parameter name (letters, digits, _): {name} in a sweep metric template is replaced "
          "by the point's label.");
  b.field("key", key,
          "Scenario key path the parameter sets, as for --set: map keys by name, list entries "
          "by index or * for every entry (e.g. fabric.switch.pfc.enabled, jobs.0.iterations, "
          "jobs.*.post_list).");
  b.field("also", also,
          "Further keys set to the same value, for a parameter stated in two places (e.g. "
          "jobs.*.mtu beside nic.mtu).");
  b.field("values", values,
          "Values the key takes, each YAML as for --set (e.g. [true, false], [1%, 2%]); at "
          "least one.");
  b.field("labels", labels,
          "Optional labels, one per value, used in point and metric names (letters, digits, "
          "_ . - +); default: the values. Each once per parameter; with combine: zip a label "
          "may repeat (e.g. to run a subset of a product) as long as the zipped points "
          "differ.");
  b.field("also", also,
          "Optional further key paths that take the same value (e.g. the loss rate of "
          "several links).");
  b.field("with", with,
          "Optional, one per value: more overrides that go with that value, \"key=value\" "
          "separated by ';' (e.g. the transport that goes with a congestion control), "
          "\"\" for none.");
  if (!b.reading()) return;
  if (!with.empty() && with.size() != values.size())
    b.error("sweep parameter '" + name + "' has " + std::to_string(with.size()) +
            " 'with' entries for " + std::to_string(values.size()) + " values");
  for (const std::string& w : with) {
    for (const std::string& part : split_with(w))
      if (part.find('=') == std::string::npos || part.front() == '=') {
        b.error("sweep parameter '" + name + "': 'with' entry '" + w +
                "' is not key=value[;key=value]");
        break;
      }
  }
  if (!is_name(name)) b.error("sweep parameter name '" + name + "' must be letters, digits and _");
  if (key.empty()) b.error("sweep parameter '" + name + "' needs a key");
  if (values.empty()) b.error("sweep parameter '" + name + "' has no values");
  if (!labels.empty() && labels.size() != values.size())
    b.error("sweep parameter '" + name + "' has " + std::to_string(labels.size()) + " labels for " +
            std::to_string(values.size()) + " values");
  // Labels given twice are checked by Sweep::bind: an error for product
  // sweeps, allowed by zip as long as the zipped points differ.
  for (size_t i = 0; i < values.size() && (labels.empty() || i < labels.size()); ++i) {
    const std::string l = label(i);
    if (!is_label(l))
      b.error("sweep parameter '" + name + "': label '" + l +
              "' may hold only letters, digits and _ . - + (give labels:)");
  }
}

void Check::bind(core::Binder& b) {
  b.field("metric", metric, "Sweep metric the rule judges.");
  b.field("check", check,
          "\"<op> <rhs>\": op one of < <= > >= ==; rhs a number, a sweep metric, or "
          "\"<number> * <metric>\" (e.g. \">= 2 * goodput_gbps.dcqcn.loss_0.5\"); for a "
          "name-valued metric (a bottleneck) \"== '<name>'\", matched when the name most seeds "
          "gave is that name, partial when only some seeds gave it.");
  b.field("tolerance", tolerance,
          "Relative slack, a fraction of |rhs|: an inequality that holds only with the rhs "
          "relaxed by it is partial; == matches within it and is partial within twice it.",
          0.0, 10.0);
  b.choice("role", role, {"headline", "supporting"},
           "headline: the row's claim as the paper states it (the row is a match only when "
           "every headline check matches, a mismatch when one mismatches); supporting: a "
           "detail, listed when it fails but not deciding the row.");
  b.field("calibrated", calibrated,
          "The value, chosen because of this figure's outcome, that the figure rests on (as "
          "declared in docs/calibration.md), e.g. \"pcie.posted_header_credits 52\"; empty when "
          "none. A row matched through a calibrated headline check reads \"match (calibrated)\".");
  if (!b.reading()) return;
  try {
    parse_check(check);
  } catch (const std::invalid_argument& e) {
    b.error("check of '" + metric + "': " + e.what());
  }
}

void ExtraSeeds::bind(core::Binder& b) {
  b.field("points", points, "Sweep point ids (e.g. v-no_ooo_control_case-degradation).");
  b.field("seeds", seeds,
          "Seeds those points run with beyond the row's (non-negative integers, none of them "
          "the row's).");
  if (!b.reading()) return;
  if (points.empty()) b.error("extra_seeds: name the points that run them");
  for (const std::string& text : seeds) {
    int64_t v = 0;
    if (!parse_seed(text, &v))
      b.error("extra_seeds: seed '" + text + "' is not a non-negative integer");
  }
}

void SweepConfig::bind(core::Binder& b) {
  b.field("seeds", seeds,
          "Seeds every point runs with (non-negative integers, each once); empty: see "
          "seed_count.");
  b.field("seed_count", seed_count,
          "Without seeds: run seeds seed .. seed + seed_count - 1 (the scenario's seed first); "
          "0 and no seeds: the scenario's seed only.",
          0, 1000);
  b.choice("combine", combine, {"product", "zip"},
           "product: every combination of the parameters' values; zip: the i-th values of "
           "every parameter together (all need as many values).");
  b.list("parameters", parameters, "Scenario keys the sweep varies.");
  b.list("extra_seeds", extra_seeds,
         "More seeds for some points, whose figures spread widely from seed to seed (each "
         "point's metrics are reduced over all its seeds; the report gives each metric's "
         "count).");
  b.field("metrics", metrics,
          "Sweep metrics: name template -> per-run metric, reduced over a point's seeds: "
          "\"m\" or \"mean(m)\" (mean; min, max, stddev and every seed's value are reported "
          "too), \"min(m)\", \"max(m)\". {name} in the template is the point's label of "
          "parameter name; every point must give a different name.");
  if (!b.reading()) return;
  if (!seeds.empty() && seed_count > 0) b.error("give seeds or seed_count, not both");
  std::set<int64_t> seen_seeds;
  for (const std::string& s : seeds) {
    int64_t v = 0;
    if (!parse_seed(s, &v))
      b.error("seed '" + s + "' is not a non-negative integer");
    else if (!seen_seeds.insert(v).second)
      b.error("seed " + s + " is given twice");
  }
  std::set<std::string> names;
  bool params_ok = true;
  for (const SweepParameter& p : parameters) {
    if (!names.insert(p.name).second) b.error("sweep parameter '" + p.name + "' is defined twice");
    if (p.values.empty() || (!p.labels.empty() && p.labels.size() != p.values.size()))
      params_ok = false;
  }
  if (combine == "zip")
    for (const SweepParameter& p : parameters)
      if (p.values.size() != parameters.front().values.size()) {
        b.error("combine: zip needs as many values in every parameter; '" + p.name + "' has " +
                std::to_string(p.values.size()) + ", '" + parameters.front().name + "' has " +
                std::to_string(parameters.front().values.size()));
        params_ok = false;
      }
  for (const auto& [tmpl, src] : metrics) {
    try {
      parse_sweep_metric(src);
    } catch (const std::invalid_argument& e) {
      b.error("sweep metric '" + tmpl + "': " + e.what());
    }
  }
  if (!params_ok) return;
  if (combine == "product") {
    for (const SweepParameter& p : parameters) {
      std::set<std::string> seen;
      for (size_t i = 0; i < p.values.size(); ++i)
        if (!seen.insert(p.label(i)).second) {
          b.error("sweep parameter '" + p.name + "': label '" + p.label(i) + "' is given twice");
          params_ok = false;
          break;
        }
    }
    if (!params_ok) return;
  }
  std::map<std::string, std::string> owner;  // metric name -> "template @ point"
  const std::vector<SweepPoint> points = sweep_points(*this);
  // Product points differ once labels do (checked above); zipped ones need
  // this check.
  std::set<std::string> ids;
  for (const SweepPoint& p : points)
    if (!ids.insert(p.id).second) {
      b.error("combine: zip gives point '" + p.id + "' twice (its labels repeat another's)");
      return;
    }
  for (const ExtraSeeds& e : extra_seeds) {
    for (const std::string& id : e.points)
      if (!ids.count(id)) b.error("extra_seeds: point '" + id + "' is not a point of the sweep");
    for (const std::string& text : e.seeds) {
      int64_t v = 0;
      if (parse_seed(text, &v) && seen_seeds.count(v))
        b.error("extra_seeds: seed " + text + " is already one of the row's seeds");
    }
  }
  for (const auto& [tmpl, src] : metrics) {
    for (const SweepPoint& p : points) {
      std::string name;
      try {
        name = expand_template(tmpl, p.labels);
      } catch (const std::invalid_argument& e) {
        b.error("sweep metric '" + tmpl + "': " + e.what());
        break;
      }
      const std::string who = "'" + tmpl + "' at point " + p.id;
      auto [it, fresh] = owner.emplace(name, who);
      if (!fresh) {
        b.error("sweep metric name '" + name + "' is made by " + it->second + " and by " + who +
                " (add a {parameter} to the template)");
        break;
      }
    }
  }
}

std::vector<SweepPoint> sweep_points(const SweepConfig& s) {
  std::vector<SweepPoint> out;
  if (s.parameters.empty()) {
    out.push_back(SweepPoint{"base", {}, {}});
    return out;
  }
  size_t shortest = SIZE_MAX;
  for (const SweepParameter& par : s.parameters) shortest = std::min(shortest, par.values.size());
  if (shortest == 0) return out;
  auto add = [&](const std::vector<size_t>& pick) {
    SweepPoint p;
    for (size_t k = 0; k < s.parameters.size(); ++k) {
      const SweepParameter& par = s.parameters[k];
      const std::string label = par.label(pick[k]);
      if (!p.id.empty()) p.id += "_";
      p.id += par.name + "-" + label;
      p.overrides.push_back(par.key + "=" + par.values[pick[k]]);
      for (const std::string& key : par.also)
        p.overrides.push_back(key + "=" + par.values[pick[k]]);
      if (pick[k] < par.with.size()) {  // (a size mismatch is reported by bind)
        for (std::string& part : split_with(par.with[pick[k]]))
          p.overrides.push_back(std::move(part));
      }
      p.labels[par.name] = label;
    }
    out.push_back(std::move(p));
  };
  if (s.combine == "zip") {
    for (size_t i = 0; i < shortest; ++i) add(std::vector<size_t>(s.parameters.size(), i));
    return out;
  }
  std::vector<size_t> pick(s.parameters.size(), 0);
  while (true) {
    add(pick);
    size_t k = s.parameters.size();
    while (k > 0) {
      --k;
      if (++pick[k] < s.parameters[k].values.size()) break;
      pick[k] = 0;
      if (k == 0) return out;
    }
  }
}

std::vector<int64_t> sweep_seeds(const SweepConfig& s, int64_t scenario_seed) {
  std::vector<int64_t> out;
  for (const std::string& text : s.seeds) {
    int64_t v = 0;
    if (parse_seed(text, &v)) out.push_back(v);
  }
  if (!out.empty()) return out;
  const int64_t n = s.seed_count > 0 ? s.seed_count : 1;
  for (int64_t i = 0; i < n; ++i) out.push_back(scenario_seed + i);
  return out;
}

std::vector<int64_t> point_seeds(const SweepConfig& s, const std::string& id,
                                 const std::vector<int64_t>& row_seeds) {
  std::vector<int64_t> out = row_seeds;
  for (const ExtraSeeds& e : s.extra_seeds) {
    if (std::find(e.points.begin(), e.points.end(), id) == e.points.end()) continue;
    for (const std::string& text : e.seeds) {
      int64_t v = 0;
      if (parse_seed(text, &v) && std::find(out.begin(), out.end(), v) == out.end())
        out.push_back(v);
    }
  }
  return out;
}

SweepMetricSource parse_sweep_metric(const std::string& expr) {
  const std::string t = trim(expr);
  SweepMetricSource src;
  const size_t open = t.find('(');
  if (open == std::string::npos) {
    src.metric = t;
  } else {
    src.stat = trim(t.substr(0, open));
    if (t.back() != ')')
      throw std::invalid_argument("'" + expr + "' is not of the form stat(metric)");
    src.metric = trim(t.substr(open + 1, t.size() - open - 2));
    if (src.stat != "mean" && src.stat != "min" && src.stat != "max")
      throw std::invalid_argument("'" + src.stat + "' is not mean, min or max");
  }
  if (src.metric.empty() || src.metric.find_first_of(" \t()") != std::string::npos)
    throw std::invalid_argument("'" + expr + "' does not name one per-run metric");
  return src;
}

std::string expand_template(const std::string& tmpl,
                            const std::map<std::string, std::string>& labels) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '}') throw std::invalid_argument("'}' without '{' in '" + tmpl + "'");
    if (tmpl[i] != '{') {
      out += tmpl[i];
      continue;
    }
    const size_t close = tmpl.find('}', i);
    if (close == std::string::npos) throw std::invalid_argument("unclosed '{' in '" + tmpl + "'");
    const std::string name = tmpl.substr(i + 1, close - i - 1);
    auto it = labels.find(name);
    if (it == labels.end())
      throw std::invalid_argument("'{" + name + "}' is not a sweep parameter");
    out += it->second;
    i = close;
  }
  return out;
}

std::vector<SweepMetricInstance> sweep_metric_instances(const SweepConfig& s) {
  std::vector<SweepMetricInstance> out;
  const std::vector<SweepPoint> points = sweep_points(s);
  for (const SweepPoint& p : points)
    for (const auto& [tmpl, src] : s.metrics)
      out.push_back(
          SweepMetricInstance{expand_template(tmpl, p.labels), p.id, parse_sweep_metric(src)});
  return out;
}

CheckExpr parse_check(const std::string& text) {
  const std::string t = trim(text);
  CheckExpr c;
  for (const char* op : {"<=", ">=", "==", "<", ">"}) {
    const std::string o = op;
    if (t.compare(0, o.size(), o) == 0) {
      c.op = o;
      break;
    }
  }
  if (c.op.empty())
    throw std::invalid_argument("'" + text + "' does not start with < <= > >= or ==");
  const std::string rhs = trim(t.substr(c.op.size()));
  if (rhs.empty()) throw std::invalid_argument("'" + text + "' has nothing after " + c.op);
  if (rhs.front() == '\'') {
    if (rhs.size() < 3 || rhs.back() != '\'' || rhs.find('\'', 1) != rhs.size() - 1)
      throw std::invalid_argument("'" + rhs + "' is not a quoted name ('text')");
    if (c.op != "==")
      throw std::invalid_argument("'" + text + "': a quoted name is compared with == only");
    c.text = rhs.substr(1, rhs.size() - 2);
    return c;
  }
  const size_t star = rhs.find('*');
  auto is_ref = [](const std::string& s) {
    double unused = 0;
    return !s.empty() && !parse_number(s, &unused) && s.find_first_of(" \t*") == std::string::npos;
  };
  if (star == std::string::npos) {
    if (parse_number(rhs, &c.factor)) return c;
    if (!is_ref(rhs)) throw std::invalid_argument("'" + rhs + "' is neither a number nor a metric");
    c.ref = rhs;
    return c;
  }
  const std::string a = trim(rhs.substr(0, star)), b = trim(rhs.substr(star + 1));
  if (parse_number(a, &c.factor) && is_ref(b))
    c.ref = b;
  else if (parse_number(b, &c.factor) && is_ref(a))
    c.ref = a;
  else
    throw std::invalid_argument("'" + rhs + "' is not <number> * <metric>");
  return c;
}

}  // namespace mprdma::platform

namespace mprdma::platform {

void SensitivityConfig::bind(core::Binder& b) {
  b.field("key", key,
          "Scenario key of a parameter the paper does not state, the row's most influential "
          "one (e.g. nic.mprdma.rto), set as --set would.");
  b.field("also", also,
          "Further keys set to the same value, for a parameter stated in two places (e.g. "
          "jobs.*.mtu beside nic.mtu).");
  b.field("values", values,
          "Its value halved and doubled, in that order (YAML text, e.g. [160us, 640us]).");
  b.field("points", points,
          "Sweep point ids (e.g. t-mprdma) run with each value and every seed; empty: every "
          "point.");
  b.field("seeds", seeds,
          "Seeds of the variant runs, each one of the row's; empty: every seed of the row. "
          "The as-run figure beside them is reduced over the same seeds (for rows whose runs "
          "are long: the variants then cost less than the row).");
  b.field("why", why, "Why this parameter: what the paper leaves open and what it drives.");
  if (!b.reading() || key.empty()) return;
  if (values.size() != 2) b.error("sensitivity: values must be two, the half and the double");
  for (const std::string& text : seeds) {
    int64_t v = 0;
    if (!parse_seed(text, &v))
      b.error("sensitivity: seed '" + text + "' is not a non-negative integer");
  }
}

std::vector<SweepPoint> sensitivity_points(const SensitivityConfig& s,
                                           const std::vector<SweepPoint>& points) {
  std::vector<SweepPoint> out;
  if (!s.enabled() || s.values.size() != 2) return out;
  static const char* const kNames[] = {"half", "double"};
  for (const SweepPoint& p : points) {
    if (!s.points.empty() && std::find(s.points.begin(), s.points.end(), p.id) == s.points.end())
      continue;
    for (size_t i = 0; i < 2; ++i) {
      SweepPoint q = p;
      q.id = p.id + "~" + kNames[i];
      q.overrides.push_back(s.key + "=" + s.values[i]);
      for (const std::string& k : s.also) q.overrides.push_back(k + "=" + s.values[i]);
      out.push_back(q);
    }
  }
  return out;
}

std::vector<int64_t> sensitivity_seeds(const SensitivityConfig& s,
                                       const std::vector<int64_t>& row_seeds) {
  std::vector<int64_t> out;
  for (const std::string& text : s.seeds) {
    int64_t v = 0;
    if (parse_seed(text, &v)) out.push_back(v);
  }
  return out.empty() ? row_seeds : out;
}

}  // namespace mprdma::platform
