#include "vp/platform/scenario.h"

#include <mprdma/hw.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>

#include "vp/nic/transport/engine_registry.h"
#include "vp/platform/bottleneck.h"

namespace mprdma::platform {

const std::vector<std::string>& metric_fields() {
  static const std::vector<std::string> kFields = {
      "bw_gbps", "bw_MBps",    "msg_rate_mpps", "seconds",     "t_min",
      "t_max",   "t_typical",  "t_avg",         "t_stdev",     "t_p99",
      "t_p999",  "iterations", "sync_messages", "sync_wait_us"};
  return kFields;
}

void HostEntry::bind(core::Binder& b) {
  b.field("name", name, "Host name, unique; links and jobs refer to it.");
  b.choice("kind", kind, {"modeled", "qemu"},
           "modeled: a SystemC host running the driver model and perftest-like applications; "
           "qemu: a QEMU guest running Linux with our driver and provider.");
  b.field("run", run,
          "qemu hosts: shell script the guest runs after bring-up; its output is printed and "
          "kept in <out>/<host>.console.log. Empty: the guest starts a shell.");
  b.field("nic", nic,
          "NIC parameters of this host that differ from the scenario's nic section: key path "
          "below nic (dots for nested keys) -> value, e.g. {transport: gbn, "
          "congestion_control: dcqcn} or {mprdma.initial_window: 32}; checked like nic. The "
          "two hosts of a job must use the same transport.");
  if (b.reading() && name.empty()) b.error("every host needs a name");
  if (b.reading() && !run.empty() && kind != "qemu") b.error("only qemu hosts take 'run'");
}

void GuestMetric::bind(core::Binder& b) {
  b.field("name", name, "Metric name in results.json.");
  b.field("host", host, "qemu host whose console is searched.");
  b.field("pattern", pattern,
          "Regular expression (ECMAScript) with one capture group holding a number; the last "
          "matching console line counts.");
  if (b.reading()) {
    try {
      std::regex re(pattern);
      if (re.mark_count() != 1) b.error("pattern of '" + name + "' needs exactly one group");
    } catch (const std::regex_error& e) {
      b.error("pattern of '" + name + "' is not a valid regular expression: " + e.what());
    }
  }
}

namespace {

std::string trim(std::string t) {
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  return t;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// The window [from, to) of term `t`.
void parse_window(const std::string& t, const std::string& from, const std::string& to,
                  MetricTerm& m) {
  try {
    m.from = core::parse_duration(from);
    m.to = core::parse_duration(to);
  } catch (const std::exception& e) {
    throw std::invalid_argument("term '" + t + "': " + e.what());
  }
  if (m.to.ps <= m.from.ps)
    throw std::invalid_argument("term '" + t + "': the window ends before it starts");
}

// One bound of reach_us's or settle_us's band: a plain number.
double parse_band_bound(const std::string& t, const std::string& text) {
  char* endp = nullptr;
  const double v = std::strtod(text.c_str(), &endp);
  if (text.empty() || *endp || !std::isfinite(v))
    throw std::invalid_argument("term '" + t + "': the band bound '" + text + "' is not a number");
  return v;
}

// "avg(<series>,<from>,<to>)", "stdev(<series>,<from>,<to>)",
// "reach_us(<series>,<lo>,<hi>,<from>,<to>)", "settle_us(...)" (the same
// form; <series> may be "jain(<s>|<s>|...)", their Jain index sample by
// sample) or "jain(<s>|<s>|...,<from>,<to>)".
void parse_series_term(const std::string& t, const std::string& fn, MetricTerm& m) {
  const bool band = fn == "reach_us" || fn == "settle_us";
  const std::string form = fn == "jain" ? "jain(<series>|<series>|...,<from>,<to>)"
                           : band       ? fn + "(<series>|jain(<series>|...),<lo>,<hi>,<from>,<to>)"
                                        : fn + "(<series>,<from>,<to>)";
  const std::vector<std::string> args =
      split(t.substr(fn.size() + 1, t.size() - fn.size() - 2), ',');
  if (args.size() != (band ? 5u : 3u))
    throw std::invalid_argument("term '" + t + "' is not of the form " + form);
  m.kind = fn == "avg"        ? MetricTerm::Kind::kSeriesAvg
           : fn == "stdev"    ? MetricTerm::Kind::kSeriesStdev
           : fn == "reach_us" ? MetricTerm::Kind::kSeriesReach
           : band             ? MetricTerm::Kind::kSeriesSettle
                              : MetricTerm::Kind::kJain;
  std::string series = args[0];
  const std::string jain_head = "jain(";
  if (band && series.compare(0, jain_head.size(), jain_head) == 0 && series.back() == ')') {
    series = series.substr(jain_head.size(), series.size() - jain_head.size() - 1);
    m.band_of_jain = true;
  }
  m.series = split(series, '|');
  for (const std::string& s : m.series)
    if (s.empty()) throw std::invalid_argument("term '" + t + "' has an empty series name");
  if (m.band_of_jain && m.series.size() < 2)
    throw std::invalid_argument("term '" + t + "': jain(...) needs two series or more");
  if (fn != "jain" && !m.band_of_jain && m.series.size() != 1)
    throw std::invalid_argument("term '" + t + "': " + fn + " takes one series" +
                                (band ? " or jain(<series>|...)" : " (jain takes several)"));
  if (band) {
    m.band_lo = parse_band_bound(t, trim(args[1]));
    m.band_hi = parse_band_bound(t, trim(args[2]));
    if (m.band_lo > m.band_hi)
      throw std::invalid_argument("term '" + t + "': the band's low bound is above its high bound");
  }
  parse_window(t, args[args.size() - 2], args[args.size() - 1], m);
}

// "ecn_mark_ratio(<link>.<a2b|b2a>,<from>,<to>)".
void parse_windowed_ecn_term(const std::string& t, MetricTerm& m) {
  const std::string form = "ecn_mark_ratio(<link>.<a2b|b2a>,<from>,<to>)";
  const std::string head = "ecn_mark_ratio(";
  const std::vector<std::string> args =
      split(t.substr(head.size(), t.size() - head.size() - 1), ',');
  if (args.size() != 3) throw std::invalid_argument("term '" + t + "' is not of the form " + form);
  const size_t dot = args[0].rfind('.');
  m.kind = MetricTerm::Kind::kEcnRatio;
  m.windowed = true;
  m.link = dot == std::string::npos ? std::string() : args[0].substr(0, dot);
  m.dir = dot == std::string::npos ? args[0] : args[0].substr(dot + 1);
  if (m.link.empty() || (m.dir != "a2b" && m.dir != "b2a"))
    throw std::invalid_argument("term '" + t + "': '" + args[0] +
                                "' is not <link>.<a2b|b2a> (form " + form + ")");
  parse_window(t, args[1], args[2], m);
}

// "rate(nic.<host>.<counter>,<from>,<to>)".
void parse_rate_term(const std::string& t, MetricTerm& m) {
  const std::string form = "rate(nic.<host>.<counter>,<from>,<to>)";
  const std::vector<std::string> args = split(t.substr(5, t.size() - 6), ',');
  if (args.size() != 3) throw std::invalid_argument("term '" + t + "' is not of the form " + form);
  const std::string& path = args[0];
  const size_t host_end = path.compare(0, 4, "nic.") == 0 ? path.find('.', 4) : std::string::npos;
  if (host_end == std::string::npos || host_end == 4 || host_end + 1 >= path.size() ||
      path.find_first_of("()|*") != std::string::npos)
    throw std::invalid_argument("term '" + t + "': '" + path + "' is not a NIC counter (form " +
                                form + ")");
  m.kind = MetricTerm::Kind::kCounterRate;
  m.counter = path;
  m.link = path.substr(4, host_end - 4);  // the host
  parse_window(t, args[1], args[2], m);
}

// "pct(<histogram>,<p>)" or "pct(<histogram>,<p>,<from>,<to>)".
void parse_pct_term(const std::string& t, MetricTerm& m) {
  const std::string form = "pct(<histogram>,<percentile>[,<from>,<to>])";
  const std::vector<std::string> args = split(t.substr(4, t.size() - 5), ',');
  if (args.size() != 2 && args.size() != 4)
    throw std::invalid_argument("term '" + t + "' is not of the form " + form);
  const std::string& path = args[0];
  if (path.empty() || path.find_first_of("()|*") != std::string::npos ||
      path.find('.') == std::string::npos || path.front() == '.' || path.back() == '.')
    throw std::invalid_argument("term '" + t + "': '" + path +
                                "' is not a statistic path (e.g. nic.<host>.transport.rx_ood)");
  char* endp = nullptr;
  const double p = std::strtod(args[1].c_str(), &endp);
  if (args[1].empty() || *endp || !(p >= 0.0 && p <= 100.0))
    throw std::invalid_argument("term '" + t + "': the percentile '" + args[1] +
                                "' is not a number in [0, 100]");
  m.kind = MetricTerm::Kind::kHistPct;
  m.counter = path;
  m.pct = p;
  if (args.size() == 4) {
    m.windowed = true;
    parse_window(t, args[2], args[3], m);
  }
}

// "mean(<histogram>)": the mean of every sample of a histogram statistic.
void parse_mean_term(const std::string& t, MetricTerm& m) {
  const std::string path = t.substr(5, t.size() - 6);
  if (path.empty() || path.find_first_of("()|*,") != std::string::npos ||
      path.find('.') == std::string::npos || path.front() == '.' || path.back() == '.')
    throw std::invalid_argument("term '" + t +
                                "' is not of the form mean(<histogram>), e.g. "
                                "mean(flows.all.fct_us)");
  m.kind = MetricTerm::Kind::kHistPct;
  m.counter = path;
  m.mean = true;
}

// model.<engine>.extra_state_bytes of a registered engine that adds state
// over go-back-N: the engine's name, else "".
std::string model_state_engine(const std::string& t) {
  for (const nic::EngineEntry& e : nic::EngineRegistry::instance().entries())
    if (e.state_fields && t == "model." + e.name + ".extra_state_bytes") return e.name;
  return "";
}

// <engine>.base_rtt_us of a registered engine: the engine's name, else "".
std::string base_rtt_engine(const std::string& t) {
  for (const nic::EngineEntry& e : nic::EngineRegistry::instance().entries())
    if (t == e.name + ".base_rtt_us") return e.name;
  return "";
}

}  // namespace

std::optional<MetricAggregate> parse_metric_aggregate(const std::string& expr) {
  const std::string e = trim(expr);
  for (const char* op : {"min", "max", "average"}) {
    const std::string head = std::string(op) + "(";
    if (e.compare(0, head.size(), head) != 0) continue;
    if (e.back() != ')')
      throw std::invalid_argument("'" + e + "' is not of the form " + op + "(<metric>,...)");
    MetricAggregate a;
    a.op = op;
    for (std::string arg : split(e.substr(head.size(), e.size() - head.size() - 1), ',')) {
      arg = trim(arg);
      if (arg.empty()) throw std::invalid_argument("'" + e + "' has an empty argument");
      a.args.push_back(arg);
    }
    return a;
  }
  return std::nullopt;
}

std::vector<std::string> aggregate_arg_metrics(const std::string& arg,
                                               const std::vector<std::string>& sums) {
  std::vector<std::string> out;
  const bool prefix = !arg.empty() && arg.back() == '*';
  const std::string stem = prefix ? arg.substr(0, arg.size() - 1) : arg;
  for (const std::string& m : sums)
    if (prefix ? m.compare(0, stem.size(), stem) == 0 : m == arg) out.push_back(m);
  return out;
}

std::vector<MetricTerm> parse_metric(const std::string& expr) {
  if (parse_metric_aggregate(expr))
    throw std::invalid_argument("'" + expr + "' is a min/max of metrics, not a sum of terms");
  if (parse_bottleneck_metric(expr))
    throw std::invalid_argument("'" + expr + "' is a bottleneck (a name), not a sum of terms");
  std::vector<MetricTerm> terms;
  for (std::string t : split(expr, '+')) {
    t = trim(t);
    if (t.empty()) throw std::invalid_argument("'" + expr + "' has an empty term");
    if (t.find_first_of(" \t") != std::string::npos)
      throw std::invalid_argument("term '" + t + "' contains a space (terms are joined by '+')");
    MetricTerm m;
    const size_t star = t.find('*');
    if (star != std::string::npos) {
      const std::string num = t.substr(0, star);
      char* endp = nullptr;
      m.factor = std::strtod(num.c_str(), &endp);
      if (num.empty() || *endp)
        throw std::invalid_argument("term '" + t + "': '" + num +
                                    "' is not a number (a factor is <number>*term)");
      t = t.substr(star + 1);
    }
    if (const std::string engine = model_state_engine(t); !engine.empty()) {
      m.kind = MetricTerm::Kind::kModelState;
      m.engine = engine;
      terms.push_back(m);
      continue;
    }
    if (t == "fabric.deadlocks") {
      m.kind = MetricTerm::Kind::kDeadlocks;
      terms.push_back(m);
      continue;
    }
    if (t == "jobs.goodput_gbps") {
      m.kind = MetricTerm::Kind::kGoodput;
      terms.push_back(m);
      continue;
    }
    if (const std::string engine = base_rtt_engine(t); !engine.empty()) {
      m.kind = MetricTerm::Kind::kBaseRtt;
      m.engine = engine;
      terms.push_back(m);
      continue;
    }
    if (t.compare(0, 4, "nic.") == 0) {
      const size_t host_end = t.find('.', 4);
      if (host_end == std::string::npos || host_end == 4 || host_end + 1 >= t.size())
        throw std::invalid_argument("term '" + t + "' is not of the form nic.<host>.<counter>");
      m.kind = MetricTerm::Kind::kCounter;
      m.counter = t;
      m.link = t.substr(4, host_end - 4);  // the host
      terms.push_back(m);
      continue;
    }
    {
      const std::string kPre = "link.", kSuf = ".ecn_mark_ratio";
      if (t.size() > kPre.size() + kSuf.size() && t.compare(0, kPre.size(), kPre) == 0 &&
          t.compare(t.size() - kSuf.size(), kSuf.size(), kSuf) == 0) {
        const std::string mid = t.substr(kPre.size(), t.size() - kPre.size() - kSuf.size());
        const size_t dot = mid.rfind('.');
        m.kind = MetricTerm::Kind::kEcnRatio;
        m.link = dot == std::string::npos ? std::string() : mid.substr(0, dot);
        m.dir = dot == std::string::npos ? mid : mid.substr(dot + 1);
        if (m.link.empty() || (m.dir != "a2b" && m.dir != "b2a"))
          throw std::invalid_argument("term '" + t +
                                      "' is not of the form link.<link>.<a2b|b2a>.ecn_mark_ratio");
        terms.push_back(m);
        continue;
      }
    }
    if (t.compare(0, 15, "ecn_mark_ratio(") == 0 && t.back() == ')') {
      parse_windowed_ecn_term(t, m);
      terms.push_back(m);
      continue;
    }
    if (t.compare(0, 5, "rate(") == 0 && t.back() == ')') {
      parse_rate_term(t, m);
      terms.push_back(m);
      continue;
    }
    if (t.compare(0, 4, "pct(") == 0 && t.back() == ')') {
      parse_pct_term(t, m);
      terms.push_back(m);
      continue;
    }
    if (t.compare(0, 5, "mean(") == 0 && t.back() == ')') {
      parse_mean_term(t, m);
      terms.push_back(m);
      continue;
    }
    bool series_term = false;
    for (const char* fn : {"avg", "stdev", "reach_us", "settle_us", "jain"}) {
      const std::string head = std::string(fn) + "(";
      if (t.compare(0, head.size(), head) == 0 && t.back() == ')') {
        parse_series_term(t, fn, m);
        series_term = true;
      }
    }
    if (series_term) {
      terms.push_back(m);
      continue;
    }
    const std::string kPrefix = "link.", kSuffix = ".avg_gbps";
    if (t.size() > kPrefix.size() + kSuffix.size() && t.compare(0, kPrefix.size(), kPrefix) == 0 &&
        t.compare(t.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
      const std::string mid = t.substr(kPrefix.size(), t.size() - kPrefix.size() - kSuffix.size());
      const size_t dot = mid.rfind('.');
      m.kind = MetricTerm::Kind::kLink;
      m.link = dot == std::string::npos ? std::string() : mid.substr(0, dot);
      m.dir = dot == std::string::npos ? mid : mid.substr(dot + 1);
      if (m.link.empty() || (m.dir != "a2b" && m.dir != "b2a"))
        throw std::invalid_argument("term '" + t +
                                    "' is not of the form link.<link>.<a2b|b2a>.avg_gbps");
    } else {
      const size_t d1 = t.find('.'), d2 = t.rfind('.');
      if (d1 == std::string::npos || d1 == d2 || t.find_first_of("(),|") != std::string::npos)
        throw std::invalid_argument("term '" + t +
                                    "' is not of the form job.size.field, "
                                    "link.<link>.<dir>.avg_gbps, fabric.deadlocks, "
                                    "<engine>.base_rtt_us, "
                                    "model.<mprdma|irn>.extra_state_bytes, "
                                    "ecn_mark_ratio(<link>.<dir>,<from>,<to>), "
                                    "avg(<series>,<from>,<to>), stdev(<series>,<from>,<to>), "
                                    "reach_us(<series>,<lo>,<hi>,<from>,<to>), "
                                    "settle_us(<series>,<lo>,<hi>,<from>,<to>), "
                                    "jain(<series>|...,<from>,<to>), "
                                    "rate(nic.<host>.<counter>,<from>,<to>) or "
                                    "pct(<histogram>,<percentile>[,<from>,<to>]) or "
                                    "mean(<histogram>)");
      m.job = t.substr(0, d1);
      m.size = t.substr(d1 + 1, d2 - d1 - 1);
      m.field = t.substr(d2 + 1);
    }
    terms.push_back(m);
  }
  return terms;
}

std::vector<HostEntry> ScenarioConfig::effective_hosts() const {
  if (!has_fabric()) return hosts;
  const fabric::Topology topo = fabric.build_topology();
  std::vector<HostEntry> out;
  for (int n : topo.hosts()) {
    HostEntry e;
    e.name = topo.nodes()[n].name;
    for (const HostEntry& h : hosts)
      if (h.name == e.name) e = h;
    out.push_back(e);
  }
  return out;
}

std::vector<std::string> ScenarioConfig::link_names() const {
  std::vector<std::string> out;
  if (has_fabric()) {
    const fabric::Topology topo = fabric.build_topology();
    for (const fabric::TopoLink& l : topo.links()) out.push_back(l.name);
  } else {
    for (const LinkEntry& l : links) out.push_back(l.link.name);
  }
  return out;
}

const nic::NicConfig& ScenarioConfig::nic_of(const std::string& host_name) const {
  for (const HostEntry& h : hosts)
    if (h.name == host_name && h.nic_config) return *h.nic_config;
  return nic;
}

bool ScenarioConfig::has_qemu_hosts() const {
  for (const HostEntry& h : hosts)
    if (h.kind == "qemu") return true;
  return false;
}

void LinkEntry::bind(core::Binder& bb) {
  bb.field("a", a, "Host at side 0 of the link.");
  bb.field("b", b, "Host at side 1 of the link.");
  link.bind(bb);
  link.bind_loss_modes(bb);
}

void ScenarioConfig::check_nic_tables(core::Binder& b) const {
  // What each connection end of a job takes at set-up (PerfTest::end_tables).
  // Other objects (the driver's own) come on top: these sums are a lower bound.
  struct Need {
    uint64_t mtt = 0, mr = 0, qp = 0, cq = 0, srq = 0;
    std::string biggest;  // the job with the most MTT entries here
    uint64_t biggest_mtt = 0;
  };
  std::map<std::string, Need> need;
  for (const host::JobConfig& j : jobs) {
    if (!j.enabled) continue;  // never set up
    const uint64_t ends = static_cast<uint64_t>(std::max<int64_t>(j.qps, 1));
    const host::PerfTest::EndTables t = host::PerfTest::end_tables(j);
    for (const std::string* h : {&j.client, &j.server}) {
      Need& n = need[*h];
      n.mtt += ends * t.mtt_entries;
      n.mr += ends * t.mrs;
      n.qp += ends * t.qps;
      n.cq += ends * t.cqs;
      if (ends * t.mtt_entries > n.biggest_mtt)
        n.biggest_mtt = ends * t.mtt_entries, n.biggest = j.name;
    }
    need[j.server].srq += ends * t.server_srqs;
  }
  for (const auto& [host_name, n] : need) {
    const nic::NicLimits& l = nic_of(host_name).limits;
    auto over = [&](const char* what, uint64_t count, int64_t limit, const std::string& how) {
      if (count <= static_cast<uint64_t>(limit)) return;
      b.error("host '" + host_name + "': its jobs need at least " + std::to_string(count) + " " +
              what + ", more than nic.limits." + how + " " + std::to_string(limit) +
              " (each connection end takes one QP, two CQs and one MR over its buffer; the "
              "most MTT entries: job '" +
              n.biggest + "'): fewer connections (jobs, qps), smaller sizes, or larger limits");
    };
    over("MTT entries", n.mtt, l.max_mtt, "max_mtt");
    over("MRs", n.mr, l.max_mr, "max_mr");
    over("QPs", n.qp, l.max_qp, "max_qp");
    over("CQs", n.cq, l.max_cq, "max_cq");
    over("SRQs (use_srq: one per server end)", n.srq, l.max_srq, "max_srq");
  }
}

void ScenarioConfig::expand_job_groups(core::Binder& b) {
  if (job_groups.empty()) return;
  std::vector<std::string> modeled;
  for (const HostEntry& h : effective_hosts())
    if (h.kind == "modeled") modeled.push_back(h.name);
  std::optional<fabric::Topology> topo;
  if (has_fabric()) topo = fabric.build_topology();
  auto switches = [&](const std::string& a, const std::string& c) {
    if (topo) return topo->switches_between(topo->find_node(a), topo->find_node(c));
    for (const LinkEntry& l : links)
      if ((l.a == a && l.b == c) || (l.a == c && l.b == a)) return 0;
    return -1;
  };
  for (size_t i = 0; i < job_groups.size(); ++i) {
    const std::string where = "job_groups[" + std::to_string(i) + "]: ";
    JobGroupContext ctx;
    ctx.hosts = modeled;
    ctx.switches = switches;
    ctx.seed = static_cast<uint64_t>(seed);
    ctx.index = i;
    ctx.error = [&](const std::string& e) { b.error(where + e); };
    const std::vector<host::JobConfig> group_jobs = expand_job_group(job_groups[i], ctx);
    for (const auto& [name, expr] : job_group_metrics(job_groups[i], group_jobs))
      if (!metrics.emplace(name, expr).second)
        b.error(where + "job_metrics makes metric '" + name +
                "', which the scenario's "
                "metrics already define");
    jobs.insert(jobs.end(), group_jobs.begin(), group_jobs.end());
  }
}

void ScenarioConfig::resolve_flow_sizes(core::Binder& b) {
  std::set<std::string> cdf_names;
  for (const host::FlowSizeCdfConfig& c : flow_size_cdfs)
    if (!cdf_names.insert(c.name).second)
      b.error("flow_size_cdfs '" + c.name + "' is defined twice");
  const std::vector<std::string> builtin = host::FlowSizes::names();
  for (host::JobConfig& j : jobs) {
    j.flow_size_cdf.clear();
    if (j.app != host::JobConfig::App::write_flows) continue;
    auto own =
        std::find_if(flow_size_cdfs.begin(), flow_size_cdfs.end(),
                     [&](const host::FlowSizeCdfConfig& c) { return c.name == j.flow_sizes; });
    if (own != flow_size_cdfs.end()) {
      try {
        const host::FlowSizes dist = own->distribution();
        j.flow_size_cdf = dist.points();
        j.sizes = {core::Bytes{dist.max_bytes()}};
      } catch (const std::invalid_argument&) {
        // reported with the flow_size_cdfs entry
      }
    } else if (std::find(builtin.begin(), builtin.end(), j.flow_sizes) == builtin.end()) {
      std::string known;
      for (const std::string& n : builtin) known += (known.empty() ? "" : ", ") + n;
      for (const host::FlowSizeCdfConfig& c : flow_size_cdfs) known += ", " + c.name;
      b.error("job '" + j.name + "': flow_sizes '" + j.flow_sizes +
              "' is neither built in nor in flow_size_cdfs (known: " + known + ")");
    }
  }
}

void ScenarioConfig::bind(core::Binder& b) {
  b.field("include", include,
          "Files (relative to this one) merged beneath it before it is read, e.g. a testbed "
          "shared by several rows: their mappings merge key by key, and a scalar or list given "
          "here replaces theirs.");
  b.field("name", name, "Scenario name, written to the results.");
  b.field("description", description, "What the scenario shows.");
  b.field("seed", seed, "Seed of every random stream of the run.", 0, INT64_MAX);
  b.field("end_time", end_time,
          "Simulated time after which the run stops even if jobs are still running (they are "
          "then reported as unfinished).");
  b.field("log", log, "Log levels, e.g. \"*=warn,nic.*.requester=debug\".");
  b.field("sample_interval", sample_interval,
          "Period of the time series written as CSV beside results.json: throughput of links, "
          "NIC ports and PCIe directions, and the length of every switch egress queue and "
          "shared buffer; 0 disables them.");
  b.section("nic", nic, "NIC parameters, the same for every host's NIC.");
  b.section("pcie", pcie, "PCIe link between each host and its NIC.");
  b.section("host", host, "Modeled host parameters, the same for every host.");
  b.section("qemu", qemu,
            "QEMU host parameters, the same for every qemu host. Several of them name programs "
            "the simulator runs with your rights (qemu, plugin, netdev, extra_args, bios, "
            "kernel): treat a scenario file as you would a Makefile.");
  b.list("hosts", hosts,
         "The hosts; each has one NIC. With a fabric, the fabric makes the hosts and an entry "
         "sets the kind (and run script) of the fabric host it names; unlisted ones are modeled.");
  b.list("links", links,
         "Ethernet links between NICs (one per NIC in a back-to-back set-up); not with a fabric.");
  b.section("fabric", fabric,
            "The network: a topology of switches and links the hosts plug into (instead of "
            "links).");
  b.list("flow_size_cdfs", flow_size_cdfs,
         "Flow-size distributions of the scenario's own, by name, for the flow_sizes of its "
         "write_flows jobs (e.g. a Hadoop or data-mining workload given as CDF points).");
  b.list("jobs", jobs, "Applications to run.");
  b.list("job_groups", job_groups,
         "Jobs made from a template for many host pairs (e.g. a write_flows job per ordered "
         "pair: an all-to-all flow workload), appended to jobs; their names follow the "
         "group's name pattern and metrics see them as jobs; --set job_groups.<i>.job.KEY=V "
         "changes all of a group's jobs (--set jobs.* reaches listed jobs only).");
  b.field(
      "metrics", metrics,
      "Named figures for results.json: metric name -> a sum of terms \"t1 + t2 + ...\"; a "
      "term is \"job.size.field\", where field is one of bw_gbps, bw_MBps, msg_rate_mpps, "
      "seconds, t_min, t_max, t_typical, t_avg, t_stdev, t_p99, t_p999, iterations, "
      "sync_messages, sync_wait_us, or "
      "\"link.<link>.<a2b|b2a>.avg_gbps\": wire bits sent in that direction (frames with "
      "FCS, preamble and gap, lost ones included) over the run's active time (first job "
      "start, or its run_at if later, to last job end), in Gb/s, or \"fabric.deadlocks\": the "
      "number of PFC deadlocks the "
      "fabric's detector reported (0 with PFC or the detector off), or "
      "\"mprdma.base_rtt_us\": the base RTT the run measured, the smallest round-trip "
      "time (a packet built to its ACK, requester.rtt) any MP-RDMA NIC sampled, in us; no "
      "MP-RDMA NIC with a sample leaves the metric out, or "
      "\"model.<mprdma|irn>.extra_state_bytes\": the per-connection state that engine's "
      "golden model adds over RoCEv2, from its field table (vp/nic/transport/transport.md), or "
      "\"avg(<series>,<from>,<to>)\": the time-weighted mean of a time series (e.g. "
      "link.t0-s3.a2b.gbps, nic.t0h1.mac.tx_gbps) over simulated time [from, to), or "
      "\"stdev(<series>,<from>,<to>)\": its time-weighted standard deviation over [from, to) "
      "(e.g. of a queue, switch.<s>.port<p>.queue_bytes), or "
      "\"reach_us(<series>,<lo>,<hi>,<from>,<to>)\": microseconds from <from> to the start "
      "of the first sample interval whose sample lies in [lo, hi] (e.g. "
      "reach_us(link.t0-s1.a2b.gbps,9,11,250ms,310ms): when a restored path first carries 9-11 "
      "Gb/s; 0 if the first sample does; not reached by <to> leaves the metric out), or "
      "\"settle_us(<series>,<lo>,<hi>,<from>,<to>)\": the settling time, to the start of the "
      "first sample interval from which every sample up to <to> lies in [lo, hi] (0 if all "
      "do; the last sample outside the band leaves the metric out); for either, <series> may "
      "be jain(<series>|<series>|...): those series' Jain index sample by sample (e.g. "
      "settle_us(jain(link.s1-sw.a2b.gbps|link.s2-sw.a2b.gbps),0.99,1,600us,1ms): when two "
      "senders share fairly for good; a sample where all are 0 is outside any band), or "
      "\"jain(<series>|<series>|...,<from>,<to>)\": Jain's fairness index of those series' "
      "means over [from, to); a series window the run did not sample in full leaves the "
      "metric out. Further terms: \"link.<link>.<a2b|b2a>.ecn_mark_ratio\": ECN marks over the "
      "ECN-capable frames RED judged at the switch port sending into that direction, or "
      "\"ecn_mark_ratio(<link>.<a2b|b2a>,<from>,<to>)\": the same over the frames judged in "
      "[from, to) (e.g. after slow start), or \"nic.<host>.<counter>\": "
      "a NIC counter at the end of the run (e.g. nic.t1h0.transport.rx_max_ood), or "
      "\"rate(nic.<host>.<counter>,<from>,<to>)\": how fast that counter grew over [from, "
      "to), per second (e.g. 8e-9*rate(nic.t1h0.responder.bytes,2ms,12ms): payload placed "
      "in Gb/s while every flow runs; no such counter leaves the metric out), or "
      "\"pct(<histogram>,<p>)\": the p-th percentile (nearest rank, p in [0, 100]) of a "
      "histogram statistic at the end of the run (e.g. pct(nic.t1h0.transport.rx_ood,99.9); "
      "for nic.<host>., pcie.<host>. and flow.<job>. paths the host or job must exist; no "
      "such histogram or no samples leaves the metric out), or "
      "\"pct(<histogram>,<p>,<from>,<to>)\": the same over the samples recorded in [from, "
      "to) (e.g. in steady state, after the start-up; a window the run did not reach leaves "
      "the metric out), or \"mean(<histogram>)\": the mean of all its samples (e.g. "
      "mean(flows.all.fct_us), the average flow completion time of write_flows jobs), or "
      "\"jobs.goodput_gbps\": payload bytes of every job's messages over the active time. "
      "Any term may carry a factor, \"<number>*term\" (-1* subtracts). A metric "
      "may instead be \"min(<metric>,...)\", \"max(...)\" or \"average(...)\" (the "
      "arithmetic mean, each metric counted once) of other (sum) metrics; an "
      "argument \"prefix*\" stands for every metric whose name starts with prefix. A metric "
      "\"bottleneck(<host>,<from>,<to>)\" is a name, not a number: the host's NIC resource "
      "that was busiest over [from, to) (bottleneck(<host>): from the jobs' latest run_at to "
      "the end of the last job) (pcie.<downstream|upstream>.<TLP kind with the most "
      "bytes>, port.<tx|rx>, pu.<i>, tx_scheduler, rx_stage.<parse|qpc_miss|wqe_miss|"
      "mpt_mtt_miss>, completion_unit, atomics.lock, atomics.buffers; \"latency\" when none is 80 "
      "% busy: the rate "
      "is set by the "
      "operations outstanding; vp/platform/bottleneck.h), with every resource's utilisation under "
      "results.json \"bottlenecks\".");
  b.list("guest_metrics", guest_metrics, "Named figures read from guest consoles.");
  b.section("sweep", sweep,
            "Points and seeds for `mprdma-vp-sim reproduce` (`run` runs the base scenario "
            "only): parameters that set scenario keys, and sweep metrics reduced over seeds.");
  b.field("row", row,
          "Id of the reproduction row this scenario reproduces (e.g. M4, D1; see "
          "docs/reproduction.md); `reproduce ROW` finds the scenario by it.");
  b.field("differs", differs,
          "How this row's set-up differs from the paper's, one entry per difference with its "
          "reason (e.g. \"MTU 1024, not the ~1.4 KB of payload the paper's goodputs imply: ...\"); "
          "the reproduction report lists them in the row's section.");
  b.field("published", published,
          "The paper's figures: sweep metric -> published value or text, shown beside the "
          "measurement.");
  b.list("checks", checks, "Verdict rules over the sweep metrics (match, partial, mismatch).");
  b.section("sensitivity", sensitivity,
            "One parameter the paper does not state, moved to half and double its value: "
            "`reproduce` runs the chosen sweep points with each and reports the headline "
            "metrics (those of headline checks) beside the figures as run.");
  if (!b.reading()) return;

  // Per-host NIC overrides: the scenario's nic with the host's keys bound
  // over it, checked like the nic section.
  for (HostEntry& h : hosts) {
    h.nic_config.reset();
    if (h.nic.empty()) continue;
    const std::string where = "hosts[" + h.name + "].nic";
    try {
      YAML::Node node(YAML::NodeType::Map);
      for (const auto& [key, value] : h.nic) apply_override(node, key + "=" + value);
      nic::NicConfig n = nic;
      core::YamlBinder nb(node, where);
      nb.bind_root(n);
      h.nic_config = n;
    } catch (const core::ConfigError& e) {
      for (const std::string& line : e.errors()) b.error("host '" + h.name + "': nic: " + line);
    }
  }

  // Cross-references, checked once everything is read.
  std::set<std::string> host_names;
  for (const HostEntry& h : hosts)
    if (!h.name.empty() && !host_names.insert(h.name).second)
      b.error("host '" + h.name + "' is defined twice");
  std::set<std::string> link_set;
  if (has_fabric()) {
    if (!links.empty())
      b.error("a scenario cables its hosts with either 'links' or 'fabric', not both");
    // The fabric reported its own problems; without a topology the other
    // cross-references cannot be checked.
    std::vector<HostEntry> all;
    try {
      all = effective_hosts();
      for (const std::string& l : link_names()) link_set.insert(l);
    } catch (const std::invalid_argument&) {
      return;
    }
    std::set<std::string> fabric_hosts;
    for (const HostEntry& h : all) fabric_hosts.insert(h.name);
    for (const HostEntry& h : hosts)
      if (!h.name.empty() && !fabric_hosts.count(h.name))
        b.error("host '" + h.name + "' is not a host of the fabric (" +
                fabric::FabricConfig::topology_name(fabric.topology) +
                " names its hosts as in vp/fabric/fabric.md)");
    host_names = fabric_hosts;
    // QEMU guests reach each other over their own network (guest_netdevs)
    // with a /24 mask, so they must share one /24.
    const fabric::Topology topo = fabric.build_topology();
    std::optional<uint32_t> guest_net;
    std::string first_guest;
    for (const HostEntry& h : hosts) {
      if (h.kind != "qemu" || !fabric_hosts.count(h.name)) continue;
      const uint32_t ip = topo.nodes()[topo.find_node(h.name)].ip;
      if (!guest_net) {
        guest_net = ip & 0xFFFFFF00u;
        first_guest = h.name;
      } else if ((ip & 0xFFFFFF00u) != *guest_net) {
        b.error("qemu hosts '" + first_guest + "' and '" + h.name + "' are not in one /24 (" +
                fabric::ip_text(ip) + "); guests reach each other on their own /24 network");
      }
    }
  } else {
    for (const LinkEntry& l : links) link_set.insert(l.link.name);
  }
  std::set<std::string> cabled;
  for (const LinkEntry& l : links) {
    for (const std::string* end : {&l.a, &l.b}) {
      if (!host_names.count(*end))
        b.error("link '" + l.link.name + "' names unknown host '" + *end + "'");
      else if (!cabled.insert(*end).second)
        b.error("host '" + *end + "' is on two links, but its NIC has one port");
    }
    if (l.a == l.b) b.error("link '" + l.link.name + "' connects host '" + l.a + "' to itself");
  }
  for (const GuestMetric& m : guest_metrics) {
    auto it = std::find_if(hosts.begin(), hosts.end(),
                           [&](const HostEntry& h) { return h.name == m.host; });
    if (it == hosts.end() || it->kind != "qemu")
      b.error("guest metric '" + m.name + "' names '" + m.host + "', which is not a qemu host");
  }
  expand_job_groups(b);
  resolve_flow_sizes(b);
  std::set<std::string> job_names;
  for (const host::JobConfig& j : jobs) {
    if (j.name.empty()) b.error("every job needs a name");
    if (j.name.find_first_of(". ") != std::string::npos)
      b.error("job '" + j.name +
              "': a job name may not contain dots or spaces (metrics name "
              "a job's figures <job>.<size>.<field>)");
    if (!job_names.insert(j.name).second) b.error("job '" + j.name + "' is defined twice");
    for (const std::string* h : {&j.client, &j.server}) {
      if (!host_names.count(*h)) b.error("job '" + j.name + "' names unknown host '" + *h + "'");
      for (const HostEntry& he : hosts)
        if (he.name == *h && he.kind != "modeled")
          b.error("job '" + j.name + "': host '" + *h +
                  "' is a qemu host; its applications run from its 'run' script");
    }
    if (j.client == j.server) b.error("job '" + j.name + "': client and server are the same host");
    for (const std::string* h : {&j.client, &j.server})
      if (j.mtu.n > nic_of(*h).mtu.n)
        b.error("job '" + j.name + "': mtu " + std::to_string(j.mtu.n) + " exceeds the NIC's mtu " +
                std::to_string(nic_of(*h).mtu.n) + " (host '" + *h + "')");
    if (nic::NicConfig::qp_transport_kind(j.qp_transport) == MPR_TRANSPORT_DEFAULT) {
      if (nic_of(j.client).transport != nic_of(j.server).transport)
        b.error("job '" + j.name + "': client '" + j.client + "' uses transport " +
                nic_of(j.client).transport + " but server '" + j.server + "' uses " +
                nic_of(j.server).transport + " (the two ends of a QP need one transport)");
    } else {
      // Both ends' NICs must offer the job's engine (an id the ABI gives
      // an engine under rate control needs a NIC with one).
      const uint8_t kind = nic::NicConfig::qp_transport_kind(j.qp_transport);
      for (const std::string* h : {&j.client, &j.server}) {
        const nic::NicConfig& n = nic_of(*h);
        if (!(n.transport_kinds() >> kind & 1))
          b.error("job '" + j.name + "': qp_transport " + j.qp_transport + " is not offered by " +
                  "host '" + *h + "' (" +
                  (nic::EngineRegistry::instance().find(j.qp_transport)
                       ? "add it to nic.qp_transports"
                       : "its nic.congestion_control is none") +
                  ")");
      }
      if (j.transport == host::JobConfig::QpType::ud)
        b.error("job '" + j.name + "': qp_transport is for RC jobs (UD QPs have no engine)");
    }
    if (!j.via.empty()) {
      if (!has_fabric())
        b.error("job '" + j.name + "': via names a fabric link, but there is no fabric");
      else if (!link_set.count(j.via))
        b.error("job '" + j.name + "': via names unknown link '" + j.via + "'");
    }
  }
  check_nic_tables(b);
  // The series the platform samples (platform.cc), by name.
  auto series_known = [&](const std::string& sname) {
    auto has = [&](const std::string& prefix, const std::vector<std::string>& suffixes,
                   const std::set<std::string>& names) {
      if (sname.compare(0, prefix.size(), prefix) != 0) return false;
      for (const std::string& suf : suffixes)
        if (sname.size() > prefix.size() + suf.size() &&
            sname.compare(sname.size() - suf.size(), suf.size(), suf) == 0 &&
            names.count(sname.substr(prefix.size(), sname.size() - prefix.size() - suf.size())))
          return true;
      return false;
    };
    return has("link.", {".a2b.gbps", ".b2a.gbps"}, link_set) ||
           has("nic.", {".mac.tx_gbps", ".mac.rx_gbps"}, host_names) ||
           has("pcie.", {".upstream.gbps", ".downstream.gbps"}, host_names) ||
           (has_fabric() && sname.compare(0, 7, "switch.") == 0);
  };
  std::vector<std::string> sum_metrics;
  for (const auto& [metric, ref] : metrics) {
    try {
      if (!parse_metric_aggregate(ref) && !parse_bottleneck_metric(ref))
        sum_metrics.push_back(metric);
    } catch (const std::invalid_argument&) {
    }
  }
  for (const auto& [metric, ref] : metrics) {
    std::vector<MetricTerm> terms;
    try {
      if (const auto bn = parse_bottleneck_metric(ref)) {
        if (!host_names.count(bn->host))
          b.error("metric '" + metric + "' names unknown host '" + bn->host + "'");
        if (!bn->until_jobs_end && bn->to.ps > end_time.ps)
          b.error("metric '" + metric + "': its window ends after end_time");
        if (bn->until_jobs_end && jobs.empty())
          b.error("metric '" + metric +
                  "': bottleneck(<host>) needs jobs (its window ends with them)");
        continue;
      }
      if (const auto agg = parse_metric_aggregate(ref)) {
        for (const std::string& arg : agg->args)
          if (aggregate_arg_metrics(arg, sum_metrics).empty())
            b.error("metric '" + metric + "': '" + arg +
                    "' names no metric of the scenario that is a sum of terms");
        continue;
      }
      terms = parse_metric(ref);
    } catch (const std::invalid_argument& e) {
      b.error("metric '" + metric + "': " + e.what());
      continue;
    }
    for (const MetricTerm& t : terms) {
      if (t.kind == MetricTerm::Kind::kModelState) continue;
      if (t.kind == MetricTerm::Kind::kSeriesAvg || t.kind == MetricTerm::Kind::kSeriesStdev ||
          t.kind == MetricTerm::Kind::kSeriesReach || t.kind == MetricTerm::Kind::kSeriesSettle ||
          t.kind == MetricTerm::Kind::kJain) {
        if (!sample_interval.ps)
          b.error("metric '" + metric + "' reads time series, but sample_interval is 0");
        for (const std::string& sname : t.series)
          if (!series_known(sname))
            b.error("metric '" + metric + "' names unknown series '" + sname +
                    "' (link.<link>.<a2b|b2a>.gbps, nic.<host>.mac.<tx|rx>_gbps, "
                    "pcie.<host>.<upstream|downstream>.gbps or switch.*)");
        if (t.to.ps > end_time.ps)
          b.error("metric '" + metric + "': its window ends after end_time");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kCounterRate) {
        if (!sample_interval.ps)
          b.error("metric '" + metric + "' term rate(" + t.counter +
                  ",...) reads a sampled counter, but sample_interval is 0");
        if (!host_names.count(t.link))
          b.error("metric '" + metric + "' term rate(" + t.counter + ",...) names unknown host '" +
                  t.link + "'");
        if (t.to.ps > end_time.ps)
          b.error("metric '" + metric + "': its window ends after end_time");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kDeadlocks) {
        if (!has_fabric()) b.error("metric '" + metric + "': fabric.deadlocks needs a fabric");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kLink) {
        if (!link_set.count(t.link))
          b.error("metric '" + metric + "' names unknown link '" + t.link + "'");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kGoodput) {
        if (jobs.empty()) b.error("metric '" + metric + "': jobs.goodput_gbps needs jobs");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kBaseRtt) continue;  // absent when no NIC sampled
      if (t.kind == MetricTerm::Kind::kCounter) {
        if (!host_names.count(t.link))
          b.error("metric '" + metric + "' term '" + t.counter + "' names unknown host '" + t.link +
                  "'");
        if (std::any_of(jobs.begin(), jobs.end(),
                        [](const host::JobConfig& j) { return j.name == "nic"; }))
          b.error("metric '" + metric + "': a job named 'nic' makes '" + t.counter +
                  "' ambiguous (nic.<host>.<counter> is a NIC counter)");
        continue;
      }
      if (t.kind == MetricTerm::Kind::kHistPct) {
        // Which histograms a run registers is known only when it runs; the
        // owner named by the path's second part is checked here.
        const size_t d1 = t.counter.find('.');
        const size_t d2 = t.counter.find('.', d1 + 1);
        const std::string group = t.counter.substr(0, d1);
        const std::string owner =
            d2 == std::string::npos ? std::string() : t.counter.substr(d1 + 1, d2 - d1 - 1);
        if (group == "nic" || group == "pcie") {
          if (d2 == std::string::npos || !host_names.count(owner))
            b.error("metric '" + metric + "' term pct(" + t.counter + ",...) names unknown host '" +
                    owner + "'");
        } else if (group == "flows") {
          if (d2 == std::string::npos ||
              std::none_of(jobs.begin(), jobs.end(), [&](const host::JobConfig& j) {
                return j.app == host::JobConfig::App::write_flows && j.flow_group == owner;
              }))
            b.error("metric '" + metric + "' term names flow group '" + owner +
                    "', which no write_flows job has");
        } else if (group == "flow") {
          if (d2 == std::string::npos ||
              std::none_of(jobs.begin(), jobs.end(),
                           [&](const host::JobConfig& j) { return j.name == owner; }))
            b.error("metric '" + metric + "' term pct(" + t.counter + ",...) names unknown job '" +
                    owner + "'");
        }
        continue;
      }
      if (t.kind == MetricTerm::Kind::kEcnRatio) {
        if (!has_fabric()) {
          b.error("metric '" + metric + "': ecn_mark_ratio needs a fabric");
          continue;
        }
        if (t.windowed && !sample_interval.ps)
          b.error("metric '" + metric +
                  "': ecn_mark_ratio over a window reads sampled "
                  "counters, but sample_interval is 0");
        if (t.windowed && t.to.ps > end_time.ps)
          b.error("metric '" + metric + "': its window ends after end_time");
        if (!link_set.count(t.link)) {
          b.error("metric '" + metric + "' names unknown link '" + t.link + "'");
          continue;
        }
        try {
          const fabric::Topology topo = fabric.build_topology();
          const int l = topo.find_link(t.link);
          const int sender = topo.links()[l].node[t.dir == "a2b" ? 0 : 1];
          if (topo.nodes()[sender].kind != fabric::NodeKind::kSwitch)
            b.error("metric '" + metric + "': link '" + t.link + "' " + t.dir +
                    " is sent by host '" + topo.nodes()[sender].name +
                    "'; ecn_mark_ratio needs a switch port");
        } catch (const std::invalid_argument&) {
          // the fabric reported it
        }
        continue;
      }
      auto it = std::find_if(jobs.begin(), jobs.end(),
                             [&](const host::JobConfig& j) { return j.name == t.job; });
      if (it == jobs.end()) {
        b.error("metric '" + metric + "' names unknown job '" + t.job + "'");
        continue;
      }
      const bool size_known = std::any_of(it->sizes.begin(), it->sizes.end(), [&](core::Bytes s) {
        return std::to_string(s.n) == t.size;
      });
      if (!size_known)
        b.error("metric '" + metric + "': job '" + t.job + "' has no size " + t.size);
      const auto& fields = metric_fields();
      if (std::find(fields.begin(), fields.end(), t.field) == fields.end())
        b.error("metric '" + metric + "': unknown field '" + t.field + "'");
    }
  }

  // The sweep's metrics name per-run metrics; checks and published figures
  // name sweep metrics.
  std::set<std::string> run_metrics;
  for (const auto& [name, ref] : metrics) run_metrics.insert(name);
  for (const GuestMetric& m : guest_metrics) run_metrics.insert(m.name);
  for (const auto& [tmpl, src] : sweep.metrics) {
    try {
      const SweepMetricSource s = parse_sweep_metric(src);
      if (!run_metrics.count(s.metric))
        b.error("sweep metric '" + tmpl + "' names '" + s.metric +
                "', which is not a metric of the scenario (metrics: or guest_metrics:)");
    } catch (const std::invalid_argument&) {
      // reported by the sweep section
    }
  }
  std::set<std::string> sweep_names;
  try {
    for (const SweepMetricInstance& m : sweep_metric_instances(sweep)) sweep_names.insert(m.name);
  } catch (const std::exception&) {
    return;  // the sweep section reported its problems
  }
  for (const auto& [name, text] : published)
    if (!sweep_names.count(name)) b.error("published figure '" + name + "' is not a sweep metric");
  bool any_headline = false;
  for (const Check& c : checks) {
    any_headline |= c.headline();
    if (c.role.empty())
      b.error("check of '" + c.metric + "' (" + c.check +
              ") needs role: headline (the row's claim) or supporting (a detail)");
    if (!sweep_names.count(c.metric)) b.error("check names '" + c.metric + "', not a sweep metric");
    try {
      const CheckExpr e = parse_check(c.check);
      if (!e.ref.empty() && !sweep_names.count(e.ref))
        b.error("check of '" + c.metric + "' names '" + e.ref + "', not a sweep metric");
    } catch (const std::invalid_argument&) {
      // reported by the check
    }
  }
  if (sensitivity.enabled()) {
    std::set<std::string> ids;
    try {
      for (const SweepPoint& p : sweep_points(sweep)) ids.insert(p.id);
    } catch (const std::exception&) {
    }
    for (const std::string& id : sensitivity.points)
      if (!ids.count(id)) b.error("sensitivity: point '" + id + "' is not a point of the sweep");
    const std::vector<int64_t> row_seeds = sweep_seeds(sweep, seed);
    for (int64_t s : sensitivity_seeds(sensitivity, {}))
      if (std::find(row_seeds.begin(), row_seeds.end(), s) == row_seeds.end())
        b.error("sensitivity: seed " + std::to_string(s) +
                " is not one of the row's seeds (its as-run figure would have no run)");
  }
  // Without a headline check no outcome could make the row a mismatch.
  if (!checks.empty() && !any_headline)
    b.error("checks: none has role: headline, so the row's verdict could not fail");
}

namespace {

// Sets keys[i..] below `cur` to `value`; "*" in a list stands for every item.
void set_path(YAML::Node cur, const std::vector<std::string>& keys, size_t i,
              const YAML::Node& value, const std::function<void(const std::string&)>& fail) {
  // Walk with copies of node handles: yaml-cpp nodes are references, so a
  // write through the last handle changes the tree.
  for (; i < keys.size(); ++i) {
    const std::string& k = keys[i];
    const bool last = i + 1 == keys.size();
    if (cur.IsSequence()) {
      if (k == "*") {
        if (cur.size() == 0) fail("'*' stands for every item of the list, but it is empty");
        for (size_t n = 0; n < cur.size(); ++n) {
          if (last) {
            cur[n] = YAML::Clone(value);
            continue;
          }
          set_path(cur[n], keys, i + 1, value, fail);
        }
        return;
      }
      char* end = nullptr;
      const long idx = std::strtol(k.c_str(), &end, 10);
      if (*end || idx < 0 || static_cast<size_t>(idx) >= cur.size())
        fail("'" + k + "' is not an index of the list (0.." + std::to_string(cur.size()) +
             " exclusive, or * for every item)");
      if (last) {
        cur[static_cast<size_t>(idx)] = YAML::Clone(value);
        return;
      }
      YAML::Node next = cur[static_cast<size_t>(idx)];
      cur.reset(next);
      continue;
    }
    if (k == "*") fail("'*' stands for every item of a list, and this is not a list");
    if (!cur.IsMap() && !cur.IsNull()) fail("'" + k + "' is below a value that is not a map");
    if (last) {
      cur[k] = YAML::Clone(value);
      return;
    }
    if (!cur[k].IsDefined() || cur[k].IsNull()) cur[k] = YAML::Node(YAML::NodeType::Map);
    YAML::Node next = cur[k];
    cur.reset(next);
  }
}

}  // namespace

void apply_override(YAML::Node& root, const std::string& assignment) {
  auto fail = [&](const std::string& why) {
    throw core::ConfigError({"--set " + assignment + ": " + why});
  };
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) fail("expected KEY.PATH=VALUE");
  std::vector<std::string> keys;
  std::string key;
  for (char c : assignment.substr(0, eq)) {
    if (c == '.') {
      keys.push_back(key);
      key.clear();
    } else {
      key += c;
    }
  }
  keys.push_back(key);
  for (const std::string& k : keys)
    if (k.empty()) fail("empty key in the path");
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    fail("the value is not YAML: " + e.msg);
  }
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  set_path(root, keys, 0, value, fail);
}

ScenarioConfig load_scenario(const std::string& path) { return load_scenario(path, {}); }

ScenarioConfig load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  return load_scenario(path, overrides, nullptr);
}

namespace {

// Copies `src` into `dst`: mappings key by key (recursively), anything else
// replaced; an empty value over a mapping leaves it.
void merge_yaml(YAML::Node dst, const YAML::Node& src) {
  for (const auto& kv : src) {
    const std::string key = kv.first.as<std::string>();
    YAML::Node d = dst[key];
    if (d.IsMap() && kv.second.IsMap())
      merge_yaml(d, kv.second);
    else if (d.IsMap() && kv.second.IsNull())
      continue;  // "fabric:" with nothing under it changes nothing
    else
      dst[key] = YAML::Clone(kv.second);
  }
}

YAML::Node load_with_includes(const std::string& path, std::vector<std::string>& chain) {
  if (std::find(chain.begin(), chain.end(), path) != chain.end())
    throw core::ConfigError(
        {path + ": include: the file includes itself (through " + chain.back() + ")"});
  YAML::Node root = core::load_yaml_file(path);
  if (!root.IsMap() || !root["include"]) return root;
  const YAML::Node inc = root["include"];
  std::vector<std::string> files;
  if (inc.IsScalar()) {
    files.push_back(inc.as<std::string>());
  } else if (inc.IsSequence()) {
    for (const auto& f : inc) {
      if (!f.IsScalar()) throw core::ConfigError({path + ": include: expected file names"});
      files.push_back(f.as<std::string>());
    }
  } else {
    throw core::ConfigError({path + ": include: expected a file name or a list of them"});
  }
  chain.push_back(path);
  YAML::Node merged(YAML::NodeType::Map);
  for (const std::string& f : files) {
    const std::string file =
        (std::filesystem::path(path).parent_path() / std::filesystem::path(f)).string();
    if (!std::filesystem::is_regular_file(file))
      throw core::ConfigError({path + ": include: no file '" + f + "' (" + file + ")"});
    YAML::Node part = load_with_includes(file, chain);
    if (!part.IsMap()) throw core::ConfigError({file + ": included file is not a mapping"});
    part.remove("include");
    merge_yaml(merged, part);
  }
  chain.pop_back();
  root.remove("include");
  merge_yaml(merged, root);
  // Kept as a list (one file may be given as a scalar) to say where the
  // set-up came from.
  YAML::Node names(YAML::NodeType::Sequence);
  for (const std::string& f : files) names.push_back(f);
  merged["include"] = names;
  return merged;
}

}  // namespace

YAML::Node load_scenario_yaml(const std::string& path) {
  std::vector<std::string> chain;
  return load_with_includes(path, chain);
}

ScenarioConfig load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* point_errors) {
  YAML::Node root = load_scenario_yaml(path);
  for (const std::string& o : overrides) apply_override(root, o);
  ScenarioConfig cfg;
  core::YamlBinder binder(root, path);
  binder.bind_root(cfg);
  if (!cfg.sweep.parameters.empty() || cfg.sensitivity.enabled()) {
    // Every point must be a valid scenario: its overrides name known keys
    // and give them acceptable values.
    std::vector<std::string> errors;
    std::vector<SweepPoint> all = sweep_points(cfg.sweep);
    const std::vector<SweepPoint> variants = sensitivity_points(cfg.sensitivity, all);
    all.insert(all.end(), variants.begin(), variants.end());
    for (const SweepPoint& p : all) {
      std::string what = "sweep point " + p.id + " (";
      for (size_t i = 0; i < p.overrides.size(); ++i) what += (i ? ", " : "") + p.overrides[i];
      what += "): ";
      try {
        YAML::Node point = YAML::Clone(root);
        for (const std::string& o : p.overrides) apply_override(point, o);
        ScenarioConfig point_cfg;
        core::YamlBinder point_binder(point, path);
        point_binder.bind_root(point_cfg);
      } catch (const core::ConfigError& e) {
        for (const std::string& line : e.errors()) errors.push_back(what + line);
      }
    }
    if (point_errors)
      *point_errors = std::move(errors);
    else if (!errors.empty())
      throw core::ConfigError(errors);
  }
  // Disabled jobs were checked with the rest; the run never sees them.
  cfg.jobs.erase(std::remove_if(cfg.jobs.begin(), cfg.jobs.end(),
                                [](const host::JobConfig& j) { return !j.enabled; }),
                 cfg.jobs.end());
  return cfg;
}

}  // namespace mprdma::platform
