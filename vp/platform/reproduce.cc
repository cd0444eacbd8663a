#include "vp/platform/reproduce.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "vp/core/config.h"

namespace mprdma::platform {
namespace fs = std::filesystem;
namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.5g", v);
  return buf;
}

std::string percent(double fraction) { return fmt(fraction * 100) + " %"; }

}  // namespace

namespace {

// One sweep metric over the runs of `point` (the instance's own point, or a
// sensitivity variant of it).
AggregatedMetric aggregate_instance(const SweepMetricInstance& inst, const std::string& point,
                                    const std::vector<int64_t>& seeds,
                                    const std::vector<RunRecord>& runs) {
  AggregatedMetric a;
  a.name = inst.name;
  a.point = point;
  a.source = inst.source;
  for (int64_t seed : seeds) {
    const RunRecord* run = nullptr;
    for (const RunRecord& r : runs)
      if (r.point == point && r.seed == seed) run = &r;
    if (run && run->status != "failed" && run->labels.count(inst.source.metric)) {
      a.seeds.push_back(seed);
      a.labels.push_back(run->labels.at(inst.source.metric));
      continue;
    }
    if (!run || run->status == "failed" || !run->metrics.count(inst.source.metric)) {
      a.missing_seeds.push_back(seed);
      continue;
    }
    a.seeds.push_back(seed);
    a.values.push_back(run->metrics.at(inst.source.metric));
  }
  if (a.is_label()) {
    // The name most seeds gave; the earliest seed's on a tie.
    size_t best = 0;
    for (const std::string& l : a.labels) {
      const size_t n = static_cast<size_t>(std::count(a.labels.begin(), a.labels.end(), l));
      if (n > best) best = n, a.label = l;
    }
    if (!a.values.empty()) {  // some seeds gave numbers: not one metric
      a.missing_seeds.insert(a.missing_seeds.end(), a.seeds.begin(), a.seeds.end());
      a.seeds.clear();
      a.labels.clear();
      a.values.clear();
      a.label.clear();
    }
  } else if (a.measured()) {
    double sum = 0;
    a.min = a.max = a.values.front();
    for (double v : a.values) {
      sum += v;
      a.min = std::min(a.min, v);
      a.max = std::max(a.max, v);
    }
    const double n = static_cast<double>(a.values.size());
    a.mean = sum / n;
    if (a.values.size() > 1) {
      double ss = 0;
      for (double v : a.values) ss += (v - a.mean) * (v - a.mean);
      a.stddev = std::sqrt(ss / (n - 1));
    }
    a.value = a.source.stat == "min" ? a.min : a.source.stat == "max" ? a.max : a.mean;
  }
  return a;
}

}  // namespace

std::vector<AggregatedMetric> aggregate(const SweepConfig& sweep, const std::vector<int64_t>& seeds,
                                        const std::vector<RunRecord>& runs) {
  std::vector<AggregatedMetric> out;
  for (const SweepMetricInstance& inst : sweep_metric_instances(sweep))
    out.push_back(
        aggregate_instance(inst, inst.point, point_seeds(sweep, inst.point, seeds), runs));
  return out;
}

nlohmann::json sensitivity_document(const ScenarioConfig& cfg, const std::vector<int64_t>& seeds,
                                    const std::vector<RunRecord>& runs) {
  const SensitivityConfig& s = cfg.sensitivity;
  if (!s.enabled() || s.values.size() != 2) return nullptr;
  // The metrics the headline checks read, on either side.
  std::set<std::string> headline;
  for (const Check& c : cfg.checks) {
    if (!c.headline()) continue;
    headline.insert(c.metric);
    const CheckExpr e = parse_check(c.check);
    if (!e.ref.empty()) headline.insert(e.ref);
  }
  const std::vector<SweepPoint> variants = sensitivity_points(s, sweep_points(cfg.sweep));
  // A row without headline checks (one that reports, e.g. O1) shows every
  // metric of the chosen points.
  const bool all_metrics = headline.empty();
  const std::vector<int64_t> vseeds = sensitivity_seeds(s, seeds);
  std::set<std::string> chosen;
  for (const SweepPoint& v : variants) chosen.insert(v.id.substr(0, v.id.rfind('~')));
  nlohmann::json doc;
  doc["key"] = s.key;
  doc["why"] = s.why;
  doc["values"] = s.values;
  doc["seeds"] = vseeds;
  doc["metrics"] = nlohmann::json::object();
  auto value = [](const AggregatedMetric& a) -> nlohmann::json {
    if (a.is_label()) return a.label;
    if (a.measured()) return a.value;
    return nullptr;
  };
  for (const SweepMetricInstance& inst : sweep_metric_instances(cfg.sweep)) {
    if ((!all_metrics && !headline.count(inst.name)) || !chosen.count(inst.point)) continue;
    nlohmann::json j;
    j["as_run"] = value(aggregate_instance(inst, inst.point, vseeds, runs));
    j["half"] = value(aggregate_instance(inst, inst.point + "~half", vseeds, runs));
    j["double"] = value(aggregate_instance(inst, inst.point + "~double", vseeds, runs));
    doc["metrics"][inst.name] = j;
  }
  doc["runs"] = nlohmann::json::array();
  for (const RunRecord& r : runs) {
    if (r.point.find('~') == std::string::npos) continue;
    nlohmann::json rj;
    rj["point"] = r.point;
    rj["seed"] = r.seed;
    rj["dir"] = r.dir;
    rj["status"] = r.status;
    if (!r.error.empty()) rj["error"] = r.error;
    rj["wall_s"] = r.wall_s;
    doc["runs"].push_back(rj);
  }
  return doc;
}

CheckVerdict evaluate_check(const Check& c, const std::map<std::string, double>& measured,
                            const std::map<std::string, std::vector<std::string>>& labels) {
  CheckVerdict v;
  v.metric = c.metric;
  v.check = c.check;
  v.verdict = "not-run";
  v.headline = c.headline();
  v.calibrated = c.calibrated;
  const CheckExpr e = parse_check(c.check);
  const auto l_it = labels.find(c.metric);
  if (e.text || l_it != labels.end()) {
    if (!e.text) {
      v.reason = c.metric + " is a name; compare it with == '<name>'";
      return v;
    }
    if (l_it == labels.end() || l_it->second.empty()) {
      v.reason = measured.count(c.metric) ? c.metric + " is a number, not a name"
                                          : "no measurement of " + c.metric;
      return v;
    }
    const std::vector<std::string>& got = l_it->second;
    const size_t n = static_cast<size_t>(std::count(got.begin(), got.end(), *e.text));
    std::string seen;
    for (const std::string& g : got) seen += (seen.empty() ? "" : ", ") + g;
    const std::string head = c.metric + " = " + seen + ", wanted '" + *e.text + "'";
    if (n == got.size()) {
      v.verdict = "match";
      v.reason = head + ": every seed";
    } else if (2 * n > got.size()) {
      v.verdict = "partial";
      v.reason = head + ": " + std::to_string(n) + " of " + std::to_string(got.size()) + " seeds";
    } else {
      v.verdict = "mismatch";
      v.reason = head + ": " + std::to_string(n) + " of " + std::to_string(got.size()) + " seeds";
    }
    return v;
  }
  auto m_it = measured.find(c.metric);
  if (m_it == measured.end()) {
    v.reason = "no measurement of " + c.metric;
    return v;
  }
  double rhs = e.factor;
  std::string rhs_text = fmt(e.factor);
  if (!e.ref.empty()) {
    auto r_it = measured.find(e.ref);
    if (r_it == measured.end()) {
      v.reason = "no measurement of " + e.ref;
      return v;
    }
    rhs = e.factor * r_it->second;
    rhs_text = (e.factor == 1 ? "" : fmt(e.factor) + " * ") + e.ref + " = " + fmt(rhs);
  }
  const double m = m_it->second;
  const double slack = c.tolerance * std::fabs(rhs);
  const std::string head = c.metric + " = " + fmt(m) + ", wanted " + e.op + " " + rhs_text;
  if (e.op == "==") {
    const double d = std::fabs(m - rhs);
    const std::string off = rhs != 0 ? "off by " + percent(d / std::fabs(rhs)) : "off by " + fmt(d);
    if (d <= slack) {
      v.verdict = "match";
      v.reason = head + ": " + off + " (tolerance " + percent(c.tolerance) + ")";
    } else if (d <= 2 * slack) {
      v.verdict = "partial";
      v.reason = head + ": " + off + ", within twice the tolerance " + percent(c.tolerance);
    } else {
      v.verdict = "mismatch";
      v.reason = head + ": " + off + ", beyond twice the tolerance " + percent(c.tolerance);
    }
    return v;
  }
  auto holds = [&](double bound) {
    if (e.op == "<") return m < bound;
    if (e.op == "<=") return m <= bound;
    if (e.op == ">") return m > bound;
    return m >= bound;
  };
  const bool upper = e.op == "<" || e.op == "<=";
  if (holds(rhs)) {
    v.verdict = "match";
    v.reason = head + ": holds";
  } else if (slack > 0 && holds(upper ? rhs + slack : rhs - slack)) {
    v.verdict = "partial";
    v.reason = head + ": holds only within the tolerance " + percent(c.tolerance);
  } else {
    v.verdict = "mismatch";
    v.reason = head + ": does not hold" +
               (slack > 0 ? " (not even within " + percent(c.tolerance) + ")" : std::string());
  }
  return v;
}

std::string row_verdict(const std::vector<CheckVerdict>& verdicts) {
  int headline = 0, judged = 0, match = 0;
  bool calibrated = false;
  for (const CheckVerdict& v : verdicts) {
    if (!v.headline) continue;
    ++headline;
    if (v.verdict == "not-run") continue;
    ++judged;
    if (v.verdict == "mismatch") return "mismatch";
    if (v.verdict == "match") {
      ++match;
      calibrated |= !v.calibrated.empty();
    }
  }
  // A row without checks reports figures and claims nothing (O1: another
  // system's outcomes beside this NIC's transports): it ran, it is not judged.
  if (headline == 0) return "reported";
  if (judged == 0) return "not-run";
  if (match < headline) return "partial";
  return calibrated ? "match (calibrated)" : "match";
}

std::vector<std::string> failing_checks(const std::vector<CheckVerdict>& verdicts) {
  std::vector<std::string> out;
  for (bool headline : {true, false})
    for (const CheckVerdict& v : verdicts)
      if (v.headline == headline && v.verdict != "match")
        out.push_back(v.name() + " (" + v.verdict + ")" + (headline ? " [headline]" : ""));
  return out;
}

nlohmann::json reproduce_document(const ScenarioConfig& cfg, const std::string& scenario_file,
                                  const std::vector<SweepPoint>& points,
                                  const std::vector<int64_t>& seeds,
                                  const std::vector<RunRecord>& runs,
                                  const std::vector<AggregatedMetric>& metrics,
                                  const std::vector<CheckVerdict>& verdicts) {
  nlohmann::json doc;
  doc["schema"] = "mprdma-vp-reproduce-1";
  doc["row"] = cfg.row;
  doc["scenario"] = scenario_file;
  doc["name"] = cfg.name;
  doc["description"] = cfg.description;
  doc["differs"] = cfg.differs;
  doc["seeds"] = seeds;
  doc["parameters"] = nlohmann::json::array();
  for (const SweepParameter& p : cfg.sweep.parameters) {
    nlohmann::json j;
    j["name"] = p.name;
    j["key"] = p.key;
    j["values"] = p.values;
    std::vector<std::string> labels;
    for (size_t i = 0; i < p.values.size(); ++i) labels.push_back(p.label(i));
    j["labels"] = labels;
    doc["parameters"].push_back(j);
  }
  doc["points"] = nlohmann::json::array();
  nlohmann::json failed = nlohmann::json::array();
  for (const SweepPoint& p : points) {
    nlohmann::json j;
    j["id"] = p.id;
    j["labels"] = p.labels;
    j["overrides"] = p.overrides;
    j["runs"] = nlohmann::json::array();
    for (const RunRecord& r : runs) {
      if (r.point != p.id) continue;
      nlohmann::json rj;
      rj["seed"] = r.seed;
      rj["dir"] = r.dir;
      rj["exit_code"] = r.exit_code;
      rj["status"] = r.status;
      if (!r.error.empty()) rj["error"] = r.error;
      rj["wall_s"] = r.wall_s;
      rj["metrics"] = r.metrics;
      for (const auto& [k, l] : r.labels) rj["metrics"][k] = l;
      j["runs"].push_back(rj);
      if (r.status == "failed")
        failed.push_back(p.id + " seed " + std::to_string(r.seed) + ": " + r.error);
    }
    doc["points"].push_back(j);
  }
  doc["failed_runs"] = failed;
  doc["metrics"] = nlohmann::json::object();
  for (const AggregatedMetric& a : metrics) {
    nlohmann::json j;
    j["point"] = a.point;
    j["source"] = a.source.metric;
    j["stat"] = a.source.stat;
    j["measured"] = a.measured();
    if (a.is_label()) {
      j["value"] = a.label;
    } else if (a.measured()) {
      j["value"] = a.value;
      j["mean"] = a.mean;
      j["min"] = a.min;
      j["max"] = a.max;
      j["stddev"] = a.stddev;
    }
    j["seeds"] = a.seeds;
    if (a.is_label())
      j["values"] = a.labels;
    else
      j["values"] = a.values;
    j["missing_seeds"] = a.missing_seeds;
    doc["metrics"][a.name] = j;
  }
  doc["published"] = cfg.published;
  doc["checks"] = nlohmann::json::array();
  for (size_t i = 0; i < verdicts.size(); ++i) {
    nlohmann::json j;
    j["metric"] = verdicts[i].metric;
    j["check"] = verdicts[i].check;
    j["tolerance"] = i < cfg.checks.size() ? cfg.checks[i].tolerance : 0.0;
    j["role"] = verdicts[i].headline ? "headline" : "supporting";
    if (!verdicts[i].calibrated.empty()) j["calibrated"] = verdicts[i].calibrated;
    j["verdict"] = verdicts[i].verdict;
    j["reason"] = verdicts[i].reason;
    doc["checks"].push_back(j);
  }
  doc["verdict"] = row_verdict(verdicts);
  doc["failing_checks"] = failing_checks(verdicts);
  if (const nlohmann::json sens = sensitivity_document(cfg, seeds, runs); !sens.is_null())
    doc["sensitivity"] = sens;
  return doc;
}

void print_reproduce_table(std::ostream& os, const nlohmann::json& doc) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"metric", "measured (mean ± sd over seeds)", "published", "verdict"});
  for (const auto& [name, m] : doc["metrics"].items()) {
    std::string measured = "-";
    if (m.value("measured", false) && m["value"].is_string()) {
      const size_t n = m["values"].size();
      const std::string label = m["value"].get<std::string>();
      size_t same = 0;
      for (const auto& v : m["values"]) same += v == label;
      measured = label + " (" + std::to_string(same) + " of " + std::to_string(n) +
                 (n == 1 ? " seed)" : " seeds)");
    } else if (m.value("measured", false)) {
      const size_t n = m["values"].size();
      const std::string stat = m["stat"].get<std::string>();
      measured = fmt(m["value"].get<double>());
      if (stat == "mean")
        measured += " ± " + fmt(m["stddev"].get<double>());
      else
        measured += " (" + stat + "; mean " + fmt(m["mean"].get<double>()) + ")";
      measured += " over " + std::to_string(n) + (n == 1 ? " seed" : " seeds");
      if (!m["missing_seeds"].empty())
        measured += ", " + std::to_string(m["missing_seeds"].size()) + " missing";
    }
    std::string published = doc["published"].value(name, std::string("-"));
    std::string verdict;
    for (const auto& c : doc["checks"])
      if (c["metric"] == name)
        verdict += (verdict.empty() ? "" : ", ") + c["verdict"].get<std::string>();
    rows.push_back({name, measured, published, verdict.empty() ? "-" : verdict});
  }
  // Column widths in characters (the ± sign is two bytes, one column).
  auto width = [](const std::string& s) {
    size_t w = 0;
    for (unsigned char c : s) w += (c & 0xC0) != 0x80;
    return w;
  };
  std::vector<size_t> widths(4, 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < 4; ++i) widths[i] = std::max(widths[i], width(r[i]));
  const std::string row_name = doc.value("row", std::string());
  os << "row " << (row_name.empty() ? std::string("(none)") : row_name) << ": "
     << doc.value("scenario", std::string()) << "\n";
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t i = 0; i < 4; ++i) {
      os << rows[k][i];
      if (i < 3) os << std::string(widths[i] - width(rows[k][i]), ' ') << " | ";
    }
    os << "\n";
    if (k == 0) {
      for (size_t i = 0; i < 4; ++i) os << std::string(widths[i], '-') << (i < 3 ? "-|-" : "");
      os << "\n";
    }
  }
  for (const auto& c : doc["checks"]) {
    const bool headline = c.value("role", std::string()) == "headline";
    os << "  " << c["verdict"].get<std::string>() << (headline ? " [headline]" : "") << ": "
       << c["reason"].get<std::string>();
    if (c.contains("calibrated"))
      os << " (calibrated: " << c["calibrated"].get<std::string>() << ")";
    os << "\n";
  }
  if (doc.contains("sensitivity")) {
    const nlohmann::json& sens = doc["sensitivity"];
    os << "sensitivity to " << sens["key"].get<std::string>() << " (half "
       << sens["values"][0].get<std::string>() << ", double "
       << sens["values"][1].get<std::string>() << "):\n";
    auto text = [](const nlohmann::json& v) {
      return v.is_null()     ? std::string("-")
             : v.is_string() ? v.get<std::string>()
                             : fmt(v.get<double>());
    };
    for (const auto& [name, m] : sens["metrics"].items())
      os << "  " << name << ": " << text(m["half"]) << " | as run " << text(m["as_run"]) << " | "
         << text(m["double"]) << "\n";
  }
  for (const auto& f : doc["failed_runs"]) os << "  FAILED run " << f.get<std::string>() << "\n";
  os << "verdict: " << doc["verdict"].get<std::string>() << "\n";
}

std::string find_row_scenario(const std::string& scenarios_dir, const std::string& row) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(scenarios_dir, ec), end; !ec && it != end;
       it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".yaml")
      files.push_back(it->path().string());
  std::sort(files.begin(), files.end());
  std::string found;
  for (const std::string& f : files) {
    YAML::Node root;
    try {
      root = YAML::LoadFile(f);
    } catch (const YAML::Exception&) {
      continue;  // a broken file is reported when it is used
    }
    if (!root.IsMap() || !root["row"] || !root["row"].IsScalar() || root["row"].Scalar() != row)
      continue;
    if (!found.empty())
      throw std::runtime_error("row " + row + " is claimed by " + found + " and " + f);
    found = f;
  }
  return found;
}

namespace {

struct Child {
  pid_t pid = 0;
  size_t run = 0;
  std::chrono::steady_clock::time_point start;
};

// Starts `argv` with stdout and stderr into `log`; returns the pid, or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    if (fd > STDERR_FILENO) ::close(fd);
  }
  const int null_in = ::open("/dev/null", O_RDONLY);
  if (null_in >= 0) dup2(null_in, STDIN_FILENO);
  execv(args[0], args.data());
  std::fprintf(stderr, "cannot execute %s\n", args[0]);
  _exit(127);
}

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

int run_reproduce(const ReproduceOptions& o, std::ostream& os) {
  ScenarioConfig cfg;
  try {
    cfg = load_scenario(o.scenario, o.overrides);
  } catch (const core::ConfigError& e) {
    for (const std::string& line : e.errors()) os << "error: " << line << "\n";
    return 2;
  }
  const std::string out =
      o.out.empty() ? "out/reproduce/" + (cfg.row.empty() ? cfg.name : cfg.row) : o.out;
  const std::vector<SweepPoint> points = sweep_points(cfg.sweep);
  const std::vector<int64_t> seeds = sweep_seeds(cfg.sweep, cfg.seed);
  // The sensitivity's variant points run after the sweep's own.
  std::vector<SweepPoint> all = points;
  for (const SweepPoint& v : sensitivity_points(cfg.sensitivity, points)) all.push_back(v);
  const std::vector<int64_t> variant_seeds = sensitivity_seeds(cfg.sensitivity, seeds);
  std::vector<RunRecord> runs;
  for (size_t i = 0; i < all.size(); ++i)
    for (int64_t s : i < points.size() ? point_seeds(cfg.sweep, all[i].id, seeds) : variant_seeds) {
      const SweepPoint& p = all[i];
      RunRecord r;
      r.point = p.id;
      r.seed = s;
      r.dir = "runs/" + p.id + "/" + std::to_string(s);
      runs.push_back(r);
    }
  os << "reproduce " << (cfg.row.empty() ? cfg.name : "row " + cfg.row) << ": " << points.size()
     << (points.size() == 1 ? " point" : " points")
     << (all.size() > points.size()
             ? " (+" + std::to_string(all.size() - points.size()) + " for the sensitivity)"
             : std::string())
     << " x " << seeds.size() << (seeds.size() == 1 ? " seed" : " seeds")
     << (runs.size() != all.size() * seeds.size() ? " (" + std::to_string(runs.size()) + " runs)"
                                                  : std::string())
     << ", " << std::max(1, o.jobs) << " at a time, into " << out << "\n";

  std::vector<Child> active;
  size_t next = 0;
  auto launch = [&](size_t i) {
    RunRecord& r = runs[i];
    const fs::path dir = fs::path(out) / r.dir;
    std::error_code ec;
    fs::remove_all(dir, ec);  // never read a stale results.json
    fs::create_directories(dir, ec);
    if (ec) {
      r.error = "cannot create " + dir.string() + ": " + ec.message();
      os << "  " << r.point << " seed " << r.seed << ": FAILED (" << r.error << ")\n";
      return;
    }
    std::vector<std::string> argv = {o.sim, "run", o.scenario};
    for (const std::string& s : o.overrides) argv.insert(argv.end(), {"--set", s});
    const SweepPoint& p =
        *std::find_if(all.begin(), all.end(), [&](const SweepPoint& q) { return q.id == r.point; });
    for (const std::string& s : p.overrides) argv.insert(argv.end(), {"--set", s});
    argv.insert(argv.end(), {"--seed", std::to_string(r.seed), "--out", dir.string(), "--quiet"});
    Child c;
    c.pid = spawn(argv, (dir / "sim.log").string());
    c.run = i;
    c.start = std::chrono::steady_clock::now();
    if (c.pid < 0) {
      r.error = "fork failed";
      return;
    }
    active.push_back(c);
  };
  auto finish = [&](const Child& c, int status) {
    RunRecord& r = runs[c.run];
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
    const fs::path dir = fs::path(out) / r.dir;
    const fs::path results = dir / "results.json";
    const bool has_results = fs::exists(results);
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
      if (r.exit_code == 0 && has_results)
        r.status = "ok";
      else if (r.exit_code == 1 && has_results)
        r.status = "incomplete";
      else
        r.error = "exit " + std::to_string(r.exit_code) + (has_results ? "" : ", no results.json");
    } else if (WIFSIGNALED(status)) {
      r.error = "killed by signal " + std::to_string(WTERMSIG(status));
    }
    if (r.status != "failed") {
      std::ifstream in(results);
      const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
      if (doc.is_discarded()) {
        r.status = "failed";
        r.error = "results.json does not parse";
      } else if (doc.contains("metrics")) {
        for (const auto& [k, v] : doc["metrics"].items())
          if (v.is_number())
            r.metrics[k] = v.get<double>();
          else if (v.is_string())
            r.labels[k] = v.get<std::string>();
      }
    }
    if (r.status == "failed") {
      const std::string why = last_line((dir / "sim.log").string());
      if (!why.empty()) r.error += ": " + why;
      r.error += " (log: " + (dir / "sim.log").string() + ")";
    }
    os << "  " << r.point << " seed " << r.seed << ": "
       << (r.status == "failed" ? "FAILED, " + r.error : r.status) << " (" << fmt(r.wall_s)
       << " s)\n";
    os.flush();
  };
  const size_t limit = static_cast<size_t>(std::max(1, o.jobs));
  while (next < runs.size() || !active.empty()) {
    while (next < runs.size() && active.size() < limit) launch(next++);
    if (active.empty()) continue;
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it =
        std::find_if(active.begin(), active.end(), [&](const Child& c) { return c.pid == pid; });
    if (it == active.end()) continue;
    const Child c = *it;
    active.erase(it);
    finish(c, status);
  }

  const std::vector<AggregatedMetric> metrics = aggregate(cfg.sweep, seeds, runs);
  std::map<std::string, double> measured;
  std::map<std::string, std::vector<std::string>> labels;
  for (const AggregatedMetric& a : metrics)
    if (a.is_label())
      labels[a.name] = a.labels;
    else if (a.measured())
      measured[a.name] = a.value;
  std::vector<CheckVerdict> verdicts;
  for (const Check& c : cfg.checks) verdicts.push_back(evaluate_check(c, measured, labels));
  const nlohmann::json doc =
      reproduce_document(cfg, o.scenario, points, seeds, runs, metrics, verdicts);
  std::error_code ec;
  fs::create_directories(out, ec);
  std::ofstream(fs::path(out) / "results.json") << doc.dump(2) << "\n";
  print_reproduce_table(os, doc);
  os << "results: " << (fs::path(out) / "results.json").string() << "\n";
  return doc["failed_runs"].empty() ? 0 : 1;
}

}  // namespace mprdma::platform
