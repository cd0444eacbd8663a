// The scenario: everything a run needs, bound from one YAML file by
// core::YamlBinder. Every key, its default, unit and limits are documented
// here (bind functions) and generated into docs/scenario-reference.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/fabric/eth_link.h"
#include "vp/host/host_config.h"
#include "vp/host/perftest.h"
#include "vp/host/qemu_host.h"
#include "vp/nic/nic_config.h"
#include "vp/pcie/pcie_config.h"

namespace mprdma::platform {

struct HostEntry {
  std::string name;
  std::string kind = "modeled";
  // qemu hosts: shell script the guest runs after bring-up (its output is
  // printed and kept); empty: the guest starts a shell on its console.
  std::string run;
  void bind(core::Binder& b);
};

// A figure a guest printed: the first capture group of `pattern` on the
// last matching line of `host`'s console.
struct GuestMetric {
  std::string name;
  std::string host;
  std::string pattern;
  void bind(core::Binder& b);
};

struct LinkEntry {
  std::string a, b;  // host names
  fabric::LinkConfig link;
  void bind(core::Binder& b);
};

struct ScenarioConfig {
  std::string name = "unnamed";
  std::string description;
  int64_t seed = 1;
  core::Duration end_time = core::Duration::from_us(10e6);  // 10 s
  std::string log;
  core::Duration sample_interval = core::Duration::from_us(10);
  nic::NicConfig nic;
  pcie::PcieConfig pcie;
  host::HostConfig host;
  host::QemuHostConfig qemu;
  std::vector<HostEntry> hosts;
  std::vector<LinkEntry> links;
  std::vector<host::JobConfig> jobs;
  std::map<std::string, std::string> metrics;  // metric name -> "job.size.field"
  std::vector<GuestMetric> guest_metrics;
  void bind(core::Binder& b);
  bool has_qemu_hosts() const;
};

// Result fields a metric may name ("job.size.field").
const std::vector<std::string>& metric_fields();

// Loads and validates a scenario file; throws core::ConfigError naming the
// file, line and key of every problem.
ScenarioConfig load_scenario(const std::string& path);

}  // namespace mprdma::platform
