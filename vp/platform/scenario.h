// The scenario: everything a run needs, bound from one YAML file by
// core::YamlBinder. Every key, its default, unit and limits are documented
// here (bind functions) and generated into docs/scenario-reference.md.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/fabric/eth_link.h"
#include "vp/fabric/fabric.h"
#include "vp/host/host_config.h"
#include "vp/host/perftest.h"
#include "vp/host/qemu_host.h"
#include "vp/nic/nic_config.h"
#include "vp/pcie/pcie_config.h"
#include "vp/platform/job_group.h"
#include "vp/platform/sweep.h"

namespace mprdma::platform {

// A host: its kind and, for qemu hosts, the run script. With a fabric, the
// hosts come from the fabric and an entry only sets the kind/run of the
// fabric host it names (unlisted fabric hosts are modeled hosts).
struct HostEntry {
  std::string name;
  std::string kind = "modeled";
  // qemu hosts: shell script the guest runs after bring-up (its output is
  // printed and kept); empty: the guest starts a shell on its console.
  std::string run;
  // Per-host NIC parameters over the scenario's nic section: key path below
  // nic (dots for nested keys, e.g. mprdma.initial_window) -> value.
  std::map<std::string, std::string> nic;
  // The host's effective NIC configuration when `nic` is not empty; set by
  // ScenarioConfig::bind (the scenario's nic with these keys applied).
  std::optional<nic::NicConfig> nic_config;
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
  // Files merged beneath this one when it was loaded (load_scenario): a
  // shared testbed definition. Kept to say where the set-up came from.
  std::vector<std::string> include;
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
  fabric::FabricConfig fabric;  // used instead of links when its topology is not none
  std::vector<host::FlowSizeCdfConfig> flow_size_cdfs;  // write_flows jobs' own distributions
  std::vector<host::JobConfig> jobs;
  // Expanded into `jobs` (after the listed ones) when the scenario is read.
  std::vector<JobGroup> job_groups;
  std::map<std::string, std::string> metrics;  // metric name -> expression (see MetricTerm)
  std::vector<GuestMetric> guest_metrics;
  // Reproduction (sweep.h): the points and seeds `reproduce` runs, the row
  // of the reproduction table, the paper's figures and the verdict rules.
  SweepConfig sweep;
  std::string row;
  // How the row's set-up differs from the paper's, each with its reason
  // (the report's "differs from the paper" list).
  std::vector<std::string> differs;
  std::map<std::string, std::string> published;  // sweep metric -> published figure
  std::vector<Check> checks;
  SensitivityConfig sensitivity;  // the row's headline figures with one parameter moved
  void bind(core::Binder& b);
  // Gives each write_flows job the CDF its flow_sizes names (flow_size_cdfs
  // first, then the built-ins) and its largest flow as its one size.
  void resolve_flow_sizes(core::Binder& b);
  // Appends the jobs of job_groups to `jobs` and their job_metrics to
  // `metrics` (a permutation group draws its pairs from `seed`).
  void expand_job_groups(core::Binder& b);
  // Errors for a host whose jobs' connections need more MTT entries, MRs,
  // QPs or CQs than its NIC's limits (they would fail one by one at set-up).
  void check_nic_tables(core::Binder& b) const;
  bool has_qemu_hosts() const;
  bool has_fabric() const { return fabric.enabled(); }
  // Every host of the run, in host order (address order): the fabric's
  // hosts with the kind/run of their hosts: entry, or the hosts: list.
  // With a fabric, builds its topology (throws std::invalid_argument for a
  // bad one).
  std::vector<HostEntry> effective_hosts() const;
  // The NIC configuration of host `name`: its hosts: entry's, or nic.
  const nic::NicConfig& nic_of(const std::string& name) const;
  // Names of the links (the fabric's or the links: entries).
  std::vector<std::string> link_names() const;
};

// Result fields a metric may name ("job.size.field").
const std::vector<std::string>& metric_fields();

// A metric is a sum of terms, "term + term + ...", each either
//   <job>.<size>.<field>           a job's result for one message size, or
//   link.<link>.<dir>.avg_gbps     the average wire rate of one direction
//                                  (a2b or b2a) of a link over the run's
//                                  active time (first job start, or its
//                                  run_at if later, to last job end),
//                                  frame bytes plus FCS,
//                                  preamble and inter-frame gap, lost
//                                  frames included, in Gb/s.
//   model.<mprdma|irn>.extra_state_bytes  per-connection state the engine's
//                                  golden model adds over RoCEv2 (field table)
//   fabric.deadlocks               the number of PFC deadlocks the fabric's
//                                  detector reported (0 when PFC or the
//                                  detector is off); needs a fabric.
//   avg(<series>,<from>,<to>)      the time-weighted mean of a time series
//                                  (e.g. link.t0-s3.a2b.gbps,
//                                  nic.t0h1.mac.tx_gbps) over the simulated
//                                  time [from, to) (series_metrics.h);
//                                  needs sample_interval.
//   stdev(<series>,<from>,<to>)    the time-weighted standard deviation
//                                  of a time series over [from, to)
//                                  (series_metrics.h), e.g. a switch
//                                  queue's oscillation.
//   jain(<s1>|<s2>|...,<from>,<to>)  Jain's fairness index of those series'
//                                  means over [from, to).
//   link.<link>.<dir>.ecn_mark_ratio  ECN marks over the ECN-capable
//                                  frames RED judged at the switch port
//                                  sending into that direction (a switch
//                                  must send it); needs a fabric.
//   ecn_mark_ratio(<link>.<dir>,<from>,<to>)  the same over the frames
//                                  judged in simulated time [from, to)
//                                  (from the port's sampled counters:
//                                  needs sample_interval), e.g. once the
//                                  marking has converged after slow start.
//   nic.<host>.<counter>           a NIC counter's value at the end, e.g.
//                                  nic.t1h0.transport.rx_max_ood (a job
//                                  named "nic" is not allowed in terms).
//   pct(<histogram>,<p>)           the p-th percentile (nearest rank, p in
//                                  [0, 100], e.g. 99.9) of a histogram
//                                  statistic at the end of the run, e.g.
//                                  pct(nic.t1h0.transport.rx_ood,99.9);
//                                  missing if there is no such histogram or
//                                  it has no samples.
//   pct(<histogram>,<p>,<from>,<to>)  the same over the samples recorded in
//                                  simulated time [from, to) (tallies taken
//                                  at both ends), e.g. in steady state after
//                                  the start-up; missing if the run ended
//                                  before `to` or none was recorded.
//   rate(nic.<host>.<counter>,<from>,<to>)  how fast a NIC counter grew
//                                  over simulated time [from, to), per
//                                  second (e.g. 8e-9*rate(nic.t1h0.
//                                  responder.bytes,2ms,12ms): payload placed,
//                                  in Gb/s, while every flow runs); needs
//                                  sample_interval; missing if the NIC has
//                                  no such counter.
//   jobs.goodput_gbps              payload bytes of every job's completed
//                                  messages over the run's active time,
//                                  in Gb/s: the aggregate goodput when
//                                  jobs end at different times (a sum of
//                                  their bw_gbps would overstate it).
// Any term may carry a factor, "<number>*term" (e.g. "-1*avg(...)" to
// subtract). A series window the run did not sample in full leaves the
// metric out (missing), like a failed job.
//
// A metric may instead be "min(<metric>,<metric>,...)", "max(...)" or
// "average(...)" (their arithmetic mean, each metric counted once) of other
// metrics of the scenario (sums, not aggregates themselves); an argument
// "prefix*" stands for every such metric whose name starts with prefix.
struct MetricTerm {
  enum class Kind {
    kJob,
    kLink,
    kDeadlocks,
    kModelState,
    kSeriesAvg,
    kSeriesStdev,
    kSeriesReach,
    kSeriesSettle,
    kJain,
    kEcnRatio,
    kCounter,
    kGoodput,
    kHistPct,
    kCounterRate,
    kBaseRtt
  };
  Kind kind = Kind::kJob;
  double factor = 1;
  std::string job, size, field;     // kJob
  std::string link, dir;            // kLink, kEcnRatio
  bool windowed = false;            // kEcnRatio, kHistPct: over [from, to) rather than the run
  std::string counter;              // kCounter, kHistPct, kCounterRate: the statistic's full path
  double pct = 0;                   // kHistPct: the percentile, [0, 100]
  bool mean = false;                // kHistPct: the mean instead (mean(<histogram>))
  std::string engine;               // kModelState (mprdma | irn), kBaseRtt (any engine)
  std::vector<std::string> series;  // kSeriesAvg, kSeriesStdev, kSeriesReach, kSeriesSettle
                                    // (one), kJain (one or more)
  double band_lo = 0, band_hi = 0;  // kSeriesReach, kSeriesSettle: the band [lo, hi]
  bool band_of_jain = false;        // of the series' Jain index, sample by sample
  core::Duration from, to;          // kSeriesAvg, kSeriesStdev, kSeriesReach, kSeriesSettle, kJain,
                                    // kCounterRate and windowed kEcnRatio, kHistPct: the
                                    // window [from, to)
};
// Splits and classifies; throws std::invalid_argument naming a term that is
// no known form (it does not check that jobs, sizes, links or series exist).
// A min/max metric is not a sum: parse it with parse_metric_aggregate.
std::vector<MetricTerm> parse_metric(const std::string& expr);

// A "min(a,b,...)" / "max(...)" / "average(...)" metric; empty when `expr`
// is a sum.
struct MetricAggregate {
  std::string op;                 // min | max | average
  std::vector<std::string> args;  // metric names, or "prefix*"
};
std::optional<MetricAggregate> parse_metric_aggregate(const std::string& expr);
// The metrics (names in `sums`) an aggregate argument stands for.
std::vector<std::string> aggregate_arg_metrics(const std::string& arg,
                                               const std::vector<std::string>& sums);

// Loads and validates a scenario file; throws core::ConfigError naming the
// file, line and key of every problem. With a sweep, every point (the file
// with the point's overrides) is validated too; its errors name the point.
// `include:` (a file or a list, relative to the including file) merges the
// named files beneath this one first: mappings merge key by key, and
// anything else the including file gives (a scalar, a list) replaces what
// the included one has.
ScenarioConfig load_scenario(const std::string& path);
// The scenario file's YAML with its includes merged (see load_scenario);
// throws core::ConfigError naming a missing or circular include.
YAML::Node load_scenario_yaml(const std::string& path);
// The same with command-line overrides "a.b.c=value" applied to the YAML
// before it is checked (`--set`): map keys by name, list entries by index
// (jobs.0.iterations=10) or every entry (jobs.*.iterations=10); the value
// is YAML ("false", "25us", "[1, 2]").
// A malformed override throws core::ConfigError naming it; an unknown key
// is reported like one in the file.
ScenarioConfig load_scenario(const std::string& path, const std::vector<std::string>& overrides);
// The same for a caller that runs the base scenario only (`run`, `bench`):
// with `point_errors` given, the errors of sweep points go there instead of
// being thrown (an override such as nic.transport_impl=rtl may suit the
// base scenario and not a point that picks another transport).
ScenarioConfig load_scenario(const std::string& path, const std::vector<std::string>& overrides,
                             std::vector<std::string>* point_errors);
// Applies one override to `root`; throws core::ConfigError naming it.
void apply_override(YAML::Node& root, const std::string& assignment);

}  // namespace mprdma::platform
