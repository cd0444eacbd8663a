// Job groups: one template job expanded over host pairs, so that a traffic
// matrix of hundreds or thousands of jobs (rows I1 and M6: a write_flows
// job per ordered pair of hosts; row M5: a permutation of 160 connections)
// is a few lines of a scenario, not a generated list.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/host/perftest.h"

namespace mprdma::platform {

struct JobGroup {
  // Name of each job, {client} and {server} replaced by its hosts
  // (all_to_all needs both, zip and permutation at least one).
  std::string name = "{client}_{server}";
  // all_to_all: every ordered pair of two different hosts of `hosts`, the
  // clients in host order and each client's servers in host order.
  // zip: clients[i] -> servers[i].
  // permutation: a random one-to-one pairing drawn from the stream
  // "job_groups.<index>.pairs" of the scenario seed: each of `hosts` sends
  // to one other and receives from one other (a random derangement), or
  // each of `clients` sends to a different one of `servers`, never itself.
  std::string pairs = "all_to_all";
  // The hosts taking part (all_to_all, permutation); empty: every modeled
  // host, in host order. Entries may hold brace patterns, expanded as a
  // shell does: "l{0..15}h{0..9}" (160 names, the first range slowest),
  // "{t0,t1}h0".
  std::vector<std::string> hosts;
  // zip and permutation: the clients and the servers, in the order written
  // (brace patterns expanded); zip needs as many of each.
  std::vector<std::string> clients;
  std::vector<std::string> servers;
  // Every key of a job except name, client and server.
  host::JobConfig job;
  // Switch count on the pair's shortest path -> that pair's ideal_base (the
  // fixed part of a write_flows slowdown); a pair whose count is missing is
  // an error. Empty: every pair takes job.ideal_base.
  std::map<std::string, std::string> ideal_base_by_switches;
  // Metrics per job: "<prefix>" -> an expression in which {job}, {client}
  // and {server} stand for each job's name and hosts; each job of the group
  // gets the metric "<prefix>.<job>" (e.g. conn_gbps: "{job}.65536.bw_gbps"
  // gives conn_gbps.<job> for every connection, for min(conn_gbps.*)).
  std::map<std::string, std::string> job_metrics;
  void bind(core::Binder& b);
};

// Expands the brace patterns of `pattern` as a shell does: "{a..b}" (whole
// numbers, counting up or down) and "{x,y,...}", several of them multiplied
// out with the leftmost varying slowest; text without braces is itself.
// Throws std::invalid_argument naming an unbalanced, nested or empty brace.
std::vector<std::string> expand_braces(const std::string& pattern);

// What a group expands against: the scenario's modeled hosts in host order,
// the switches between two of them, the scenario seed and the group's index
// (permutation's random stream), and where errors go (`error` may return:
// the expansion then goes on without that job).
struct JobGroupContext {
  std::vector<std::string> hosts;
  std::function<int(const std::string&, const std::string&)> switches;
  uint64_t seed = 1;
  size_t index = 0;
  std::function<void(const std::string&)> error;
};

// The jobs of `group`. Errors (an unknown host, a switch count without an
// ideal_base, clients and servers of different lengths) go to ctx.error.
std::vector<host::JobConfig> expand_job_group(const JobGroup& group, const JobGroupContext& ctx);

// The metrics group.job_metrics gives `jobs` (the group's expansion):
// "<prefix>.<job>" -> its expression with {job}, {client}, {server} filled.
std::map<std::string, std::string> job_group_metrics(const JobGroup& group,
                                                     const std::vector<host::JobConfig>& jobs);

}  // namespace mprdma::platform
