#include "vp/platform/scenario.h"

#include <algorithm>
#include <regex>
#include <set>

#include <yaml-cpp/yaml.h>

namespace mprdma::platform {

const std::vector<std::string>& metric_fields() {
  static const std::vector<std::string> kFields = {
      "bw_gbps", "bw_MBps", "msg_rate_mpps", "seconds", "t_min",  "t_max",
      "t_typical", "t_avg", "t_stdev",       "t_p99",   "t_p999", "iterations"};
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

bool ScenarioConfig::has_qemu_hosts() const {
  for (const HostEntry& h : hosts)
    if (h.kind == "qemu") return true;
  return false;
}

void LinkEntry::bind(core::Binder& bb) {
  bb.field("a", a, "Host at side 0 of the link.");
  bb.field("b", b, "Host at side 1 of the link.");
  link.bind(bb);
}

void ScenarioConfig::bind(core::Binder& b) {
  b.field("name", name, "Scenario name, written to the results.");
  b.field("description", description, "What the scenario shows.");
  b.field("seed", seed, "Seed of every random stream of the run.", 0, INT64_MAX);
  b.field("end_time", end_time,
          "Simulated time after which the run stops even if jobs are still running (they are "
          "then reported as unfinished).");
  b.field("log", log, "Log levels, e.g. \"*=warn,nic.*.requester=debug\".");
  b.field("sample_interval", sample_interval,
          "Period of the throughput time series (links, NIC ports, PCIe directions) written as "
          "CSV beside results.json; 0 disables them.");
  b.section("nic", nic, "NIC parameters, the same for every host's NIC.");
  b.section("pcie", pcie, "PCIe link between each host and its NIC.");
  b.section("host", host, "Modeled host parameters, the same for every host.");
  b.section("qemu", qemu, "QEMU host parameters, the same for every qemu host.");
  b.list("hosts", hosts, "The hosts; each has one NIC.");
  b.list("links", links, "Ethernet links between NICs (one per NIC in a back-to-back set-up).");
  b.list("jobs", jobs, "Applications to run.");
  b.field("metrics", metrics,
          "Named figures for results.json: metric name -> \"job.size.field\", where field is "
          "one of bw_gbps, bw_MBps, msg_rate_mpps, seconds, t_min, t_max, t_typical, t_avg, "
          "t_stdev, t_p99, t_p999, iterations.");
  b.list("guest_metrics", guest_metrics, "Named figures read from guest consoles.");
  if (!b.reading()) return;

  // Cross-references, checked once everything is read.
  std::set<std::string> host_names;
  for (const HostEntry& h : hosts)
    if (!h.name.empty() && !host_names.insert(h.name).second)
      b.error("host '" + h.name + "' is defined twice");
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
  std::set<std::string> job_names;
  for (const host::JobConfig& j : jobs) {
    if (j.name.empty()) b.error("every job needs a name");
    if (!job_names.insert(j.name).second) b.error("job '" + j.name + "' is defined twice");
    for (const std::string* h : {&j.client, &j.server}) {
      if (!host_names.count(*h)) b.error("job '" + j.name + "' names unknown host '" + *h + "'");
      for (const HostEntry& he : hosts)
        if (he.name == *h && he.kind != "modeled")
          b.error("job '" + j.name + "': host '" + *h +
                  "' is a qemu host; its applications run from its 'run' script");
    }
    if (j.client == j.server) b.error("job '" + j.name + "': client and server are the same host");
    if (j.mtu.n > nic.mtu.n)
      b.error("job '" + j.name + "': mtu " + std::to_string(j.mtu.n) +
              " exceeds the NIC's mtu " + std::to_string(nic.mtu.n));
  }
  for (const auto& [metric, ref] : metrics) {
    // "job.size.field"
    const size_t d1 = ref.find('.');
    const size_t d2 = ref.rfind('.');
    if (d1 == std::string::npos || d1 == d2) {
      b.error("metric '" + metric + "': '" + ref + "' is not of the form job.size.field");
      continue;
    }
    const std::string job = ref.substr(0, d1), size = ref.substr(d1 + 1, d2 - d1 - 1),
                      field = ref.substr(d2 + 1);
    auto it = std::find_if(jobs.begin(), jobs.end(),
                           [&](const host::JobConfig& j) { return j.name == job; });
    if (it == jobs.end()) {
      b.error("metric '" + metric + "' names unknown job '" + job + "'");
      continue;
    }
    const bool size_known = std::any_of(it->sizes.begin(), it->sizes.end(), [&](core::Bytes s) {
      return std::to_string(s.n) == size;
    });
    if (!size_known) b.error("metric '" + metric + "': job '" + job + "' has no size " + size);
    const auto& fields = metric_fields();
    if (std::find(fields.begin(), fields.end(), field) == fields.end())
      b.error("metric '" + metric + "': unknown field '" + field + "'");
  }
}

ScenarioConfig load_scenario(const std::string& path) {
  YAML::Node root = core::load_yaml_file(path);
  ScenarioConfig cfg;
  core::YamlBinder binder(root, path);
  binder.bind_root(cfg);
  return cfg;
}

}  // namespace mprdma::platform
