// Job groups: one template job expanded over host pairs, so that a traffic
// matrix of hundreds or thousands of jobs (rows I1 and M6: a write_flows
// job per ordered pair of hosts) is a few lines of a scenario, not a
// generated list.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/host/perftest.h"

namespace mprdma::platform {

struct JobGroup {
  // Name of each job, {client} and {server} replaced by its hosts.
  std::string name = "{client}_{server}";
  // all_to_all: every ordered pair of two different hosts of `hosts`, the
  // clients in host order and each client's servers in host order.
  std::string pairs = "all_to_all";
  // The hosts taking part; empty: every modeled host, in host order.
  std::vector<std::string> hosts;
  // Every key of a job except name, client and server.
  host::JobConfig job;
  // Switch count on the pair's shortest path -> that pair's ideal_base (the
  // fixed part of a write_flows slowdown); a pair whose count is missing is
  // an error. Empty: every pair takes job.ideal_base.
  std::map<std::string, std::string> ideal_base_by_switches;
  void bind(core::Binder& b);
};

// The jobs of `group` over `hosts` (the scenario's modeled hosts, in host
// order); `switches(a, b)` counts the switches between two of them. Errors
// (an unknown host, a switch count without an ideal_base) go to `error`,
// which may return (expansion then goes on without that job).
std::vector<host::JobConfig> expand_job_group(
    const JobGroup& group, const std::vector<std::string>& hosts,
    const std::function<int(const std::string&, const std::string&)>& switches,
    const std::function<void(const std::string&)>& error);

}  // namespace mprdma::platform
