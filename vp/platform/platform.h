// The platform builder and runner: turns a ScenarioConfig into modules
// (hosts with their NICs, links, jobs), runs the simulation until every job
// has finished (or end_time), and collects the results.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/observer.h"
#include "vp/core/rate_sampler.h"
#include "vp/core/sim_env.h"
#include "vp/fabric/eth_link.h"
#include "vp/fabric/fabric.h"
#include "vp/host/modeled_host.h"
#include "vp/host/perftest.h"
#include "vp/host/qemu_host.h"
#include "vp/platform/bottleneck.h"
#include "vp/platform/histogram_windows.h"
#include "vp/platform/scenario.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::platform {

// What a QEMU guest did in the run.
struct GuestOutcome {
  std::string name;
  bool ready = false;           // MPRDMA-READY seen
  std::optional<int> run_exit;  // exit status of its run script
  bool qemu_exited = false;
  std::string exit_report;              // how QEMU ended, if it did
  std::string console_log;              // path of the console copy ("" if none)
  std::vector<std::string> run_output;  // console lines of the run script
};

struct JobOutcome {
  std::string name;
  bool started = false;
  bool finished = false;
  double start_s = 0, end_s = 0;
  // When its measured part may begin: start_s, or the job's run_at if
  // later (set-up happens before it, no traffic flows).
  double run_from_s = 0;
  std::vector<host::SizeResult> results;
};

class Platform {
 public:
  // Elaborates every module. Without a fabric, host i (scenario order) gets
  // MAC 02:00:00:00:00:<i+1> and IPv4 address 10.0.0.<i+1>; with one, the
  // fabric gives the hosts, their order and addresses (fabric.md).
  Platform(const ScenarioConfig& cfg, core::SimEnv& env);
  // `shell_host` (a qemu host) gets an interactive console on this
  // process's terminal: no run script, its output on stdout, stdin typed
  // into it (Ctrl-] ends the session).
  Platform(const ScenarioConfig& cfg, core::SimEnv& env, const std::string& shell_host);
  ~Platform();

  // Runs the simulation in slices, calling `progress(sim_ps)` between
  // slices, until every job ended or end_time. Returns true if every job
  // finished (successfully or not).
  bool run(const std::function<void(uint64_t sim_ps)>& progress = {});

  const std::vector<JobOutcome>& outcomes() const { return outcomes_; }
  // Guests' outcomes (filled by run()).
  const std::vector<GuestOutcome>& guests() const { return guests_; }
  bool all_ok() const;
  // The scenario's declared metrics, computed from the job results
  // (a metric whose figure does not exist is left out and listed in
  // `missing`).
  std::map<std::string, double> metrics(std::vector<std::string>* missing = nullptr) const;
  // The scenario's name-valued metrics (bottleneck(...)), left out and
  // listed in `missing` when their window did not end.
  std::map<std::string, std::string> labels(std::vector<std::string>* missing = nullptr) const;
  // results.json "bottlenecks": per bottleneck metric, its host, window and
  // every resource's utilisation, busiest first (null without any).
  nlohmann::json bottlenecks_json() const;
  // Per-job results for results.json's "flows" section.
  nlohmann::json flows_json() const;
  // The "fabric" section of results.json (null without a fabric).
  nlohmann::json fabric_json() const;
  // Seconds from the first job's measured start (run_from_s: its start,
  // or its run_at if later) to the last job end (a job still running
  // counts until now); the whole run if no job started.
  double active_time_s() const;
  // nullptr without a fabric.
  const fabric::Fabric* fabric() const { return fabric_.get(); }

  // Any host by name; modeled_host() throws if it is not a modeled host.
  host::Host& host(const std::string& name);
  host::ModeledHost& modeled_host(const std::string& name);
  const ScenarioConfig& config() const { return cfg_; }
  uint64_t sim_time_ps() const;

 private:
  struct JobRunner;
  ScenarioConfig cfg_;
  core::SimEnv& env_;
  std::vector<HostEntry> host_list_;  // every host, in host order
  std::vector<nic::NicConfig> nic_cfgs_;
  std::map<std::string, std::unique_ptr<host::Host>> hosts_;
  std::unique_ptr<fabric::Fabric> fabric_;
  std::vector<std::unique_ptr<fabric::EthLink>> links_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<core::RateSampler> sampler_;
  core::ObserverSet observers_;                     // run between kernel runs (observer.h)
  std::unique_ptr<HistogramWindows> hist_windows_;  // pct(...) over [from, to)
  std::map<std::string, std::unique_ptr<BottleneckProbe>> bottlenecks_;  // by metric name
  std::vector<JobOutcome> outcomes_;
  std::vector<GuestOutcome> guests_;
  std::vector<host::QemuHost*> qemu_hosts_;
  std::vector<std::string> run_scripts_;  // per qemu host, in qemu_hosts_ order
  std::string shell_host_;
  host::QemuHost* shell_ = nullptr;
  void collect_guests();
  // The lowest UDP source port from 0xC000 whose ECMP path from `client`
  // to `server` crosses `link` (the switches' own hash); throws
  // std::invalid_argument when none does.
  uint16_t via_udp_sport(const std::string& client, const std::string& server,
                         const std::string& link) const;
};

}  // namespace mprdma::platform
