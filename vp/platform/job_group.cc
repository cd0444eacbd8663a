#include "vp/platform/job_group.h"

#include <algorithm>
#include <map>
#include <set>

#include "vp/core/units.h"

namespace mprdma::platform {
namespace {

std::string replace_all(std::string text, const std::string& what, const std::string& with) {
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += with.size())
    text.replace(at, what.size(), with);
  return text;
}

}  // namespace

void JobGroup::bind(core::Binder& b) {
  b.field("name", name,
          "Name of each job: {client} and {server} stand for its two hosts (both are needed, "
          "so that names differ).");
  b.choice("pairs", pairs, {"all_to_all"},
           "Which host pairs get a job. all_to_all: every ordered pair of two different hosts "
           "(clients in host order, each client's servers in host order), e.g. one write_flows "
           "job per pair for an all-to-all flow workload.");
  b.field("hosts", hosts,
          "Hosts that take part (clients and servers), in the scenario's host order; empty: "
          "every modeled host.");
  b.section("job", job,
            "The job every pair runs: any key of jobs[] except name, client and server, which "
            "the group sets.");
  b.field("ideal_base_by_switches", ideal_base_by_switches,
          "write_flows: each pair's ideal_base by the number of switches on its shortest path "
          "(e.g. {1: 9.2us, 3: 16.5us} on a leaf-spine: the pair's unloaded one-packet "
          "completion time, measured with write_lat); a pair whose count has no entry is an "
          "error. Empty: every pair takes job.ideal_base.");
  if (!b.reading()) return;
  if (name.find("{client}") == std::string::npos || name.find("{server}") == std::string::npos)
    b.error("name must contain {client} and {server}");
  if (!job.name.empty() || !job.client.empty() || !job.server.empty())
    b.error("job must not set name, client or server: the group sets them for each pair");
  if (!ideal_base_by_switches.empty() && job.app != "write_flows")
    b.error("ideal_base_by_switches applies to write_flows jobs only");
  if (!ideal_base_by_switches.empty() && !job.ideal_rate.bps)
    b.error("ideal_base_by_switches needs job.ideal_rate (the slowdown's size term)");
  // (the durations are read, and a bad one reported, by expand_job_group)
  for (const auto& [count, base] : ideal_base_by_switches)
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos)
      b.error("ideal_base_by_switches: '" + count + "' is not a switch count");
  std::set<std::string> seen;
  for (const std::string& h : hosts)
    if (!seen.insert(h).second) b.error("hosts names '" + h + "' twice");
}

std::vector<host::JobConfig> expand_job_group(
    const JobGroup& group, const std::vector<std::string>& hosts,
    const std::function<int(const std::string&, const std::string&)>& switches,
    const std::function<void(const std::string&)>& error) {
  std::vector<std::string> members;
  if (group.hosts.empty()) {
    members = hosts;
  } else {
    // The scenario's host order, whatever order the group lists them in.
    for (const std::string& h : group.hosts)
      if (std::find(hosts.begin(), hosts.end(), h) == hosts.end())
        error("hosts names '" + h + "', which is not a modeled host of the scenario");
    for (const std::string& h : hosts)
      if (std::find(group.hosts.begin(), group.hosts.end(), h) != group.hosts.end())
        members.push_back(h);
  }
  if (members.size() < 2) error("needs at least two hosts to pair");
  std::map<std::string, core::Duration> bases;
  for (const auto& [count, text] : group.ideal_base_by_switches) {
    try {
      bases[count] = core::parse_duration(text);
    } catch (const core::UnitError& e) {
      error("ideal_base_by_switches." + count + ": " + e.what());
    }
  }
  std::vector<host::JobConfig> jobs;
  std::set<int> missing;
  for (const std::string& client : members) {
    for (const std::string& server : members) {
      if (client == server) continue;
      host::JobConfig j = group.job;
      j.name = replace_all(replace_all(group.name, "{client}", client), "{server}", server);
      j.client = client;
      j.server = server;
      if (!group.ideal_base_by_switches.empty()) {
        const int n = switches(client, server);
        const std::string count = std::to_string(n);
        if (!group.ideal_base_by_switches.count(count)) {
          if (missing.insert(n).second)
            error("ideal_base_by_switches has no entry for " + count + " switches (" + client +
                  " -> " + server + ")");
          continue;
        }
        if (!bases.count(count)) continue;  // its bad duration is reported above
        j.ideal_base = bases[count];
      }
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

}  // namespace mprdma::platform
