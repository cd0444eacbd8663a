#include "vp/platform/job_group.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>

#include "vp/core/random.h"
#include "vp/core/units.h"

namespace mprdma::platform {
namespace {

std::string replace_all(std::string text, const std::string& what, const std::string& with) {
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += with.size())
    text.replace(at, what.size(), with);
  return text;
}

// At most this many names from one pattern: far more hosts than a scenario
// can model, and a typo such as {0..999999999} is an error, not a billion
// strings.
constexpr size_t kMaxPatternNames = 100000;

std::invalid_argument too_many(const std::string& pattern) {
  return std::invalid_argument("'" + pattern + "' expands to more than " +
                               std::to_string(kMaxPatternNames) + " names");
}

// The alternatives of one brace body: "3..5" -> 3 4 5, "a,b" -> a b.
std::vector<std::string> brace_alternatives(const std::string& body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots != std::string::npos && body.find(',') == std::string::npos) {
    const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    auto whole = [](const std::string& t) {
      return !t.empty() && t.size() <= 9 && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (!whole(a) || !whole(b))
      throw std::invalid_argument("'" + pattern + "': {" + body +
                                  "} is not a range of whole numbers {a..b}");
    const long from = std::stol(a), to = std::stol(b);
    if (static_cast<size_t>(std::labs(to - from)) >= kMaxPatternNames) throw too_many(pattern);
    std::vector<std::string> out;
    for (long i = from;; i += from <= to ? 1 : -1) {
      out.push_back(std::to_string(i));
      if (i == to) break;
    }
    return out;
  }
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t comma = body.find(',', at);
    out.push_back(body.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (out.back().empty())
      throw std::invalid_argument("'" + pattern + "': {" + body + "} has an empty alternative");
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// Group members named by `names` (brace patterns expanded). Unknown hosts
// and bad patterns go to `error`.
std::vector<std::string> expand_names(const std::vector<std::string>& names, const char* key,
                                      const std::vector<std::string>& modeled,
                                      const std::function<void(const std::string&)>& error) {
  std::vector<std::string> out;
  for (const std::string& pattern : names) {
    std::vector<std::string> expanded;
    try {
      expanded = expand_braces(pattern);
    } catch (const std::invalid_argument& e) {
      error(std::string(key) + ": " + e.what());
      continue;
    }
    // One error per pattern, however many of its names are unknown.
    std::string first_unknown;
    size_t unknown = 0;
    for (const std::string& h : expanded) {
      if (std::find(modeled.begin(), modeled.end(), h) != modeled.end()) {
        out.push_back(h);
      } else if (unknown++ == 0) {
        first_unknown = h;
      }
    }
    if (unknown)
      error(std::string(key) + " names '" + first_unknown + "'" +
            (unknown > 1 ? " and " + std::to_string(unknown - 1) + " more" : "") +
            (first_unknown == pattern ? "" : " (from '" + pattern + "')") +
            (unknown > 1 ? ", which are not modeled hosts" : ", which is not a modeled host") +
            " of the scenario");
  }
  return out;
}

void shuffle(std::vector<std::string>& v, core::RandomStream& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// servers reordered so that clients[i] -> servers[i] is a uniformly random
// one-to-one pairing without a host paired with itself (rejection: a
// shuffle is a derangement with probability ~1/e, and always when the two
// sets are disjoint). False when 1000 shuffles all paired a host with itself.
bool draw_pairing(const std::vector<std::string>& clients, std::vector<std::string>& servers,
                  core::RandomStream& rng) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    shuffle(servers, rng);
    bool self = false;
    for (size_t i = 0; i < clients.size() && !self; ++i) self = clients[i] == servers[i];
    if (!self) return true;
  }
  return false;
}

// expand_braces of `tail`, a suffix of `pattern` (which errors name).
std::vector<std::string> expand_tail(const std::string& tail, const std::string& pattern) {
  const size_t open = tail.find('{');
  const size_t close = tail.find('}');
  if (open == std::string::npos) {
    if (close != std::string::npos)
      throw std::invalid_argument("'" + pattern + "' has a '}' without its '{'");
    return {tail};
  }
  if (close < open) throw std::invalid_argument("'" + pattern + "' has a '}' without its '{'");
  if (close == std::string::npos)
    throw std::invalid_argument("'" + pattern + "' has a '{' without its '}'");
  const std::string body = tail.substr(open + 1, close - open - 1);
  if (body.find('{') != std::string::npos)
    throw std::invalid_argument("'" + pattern + "' nests braces");
  if (body.empty()) throw std::invalid_argument("'" + pattern + "' has an empty {}");
  const std::string prefix = tail.substr(0, open);
  std::vector<std::string> out;
  const std::vector<std::string> rests = expand_tail(tail.substr(close + 1), pattern);
  const std::vector<std::string> alts = brace_alternatives(body, pattern);
  if (alts.size() * rests.size() > kMaxPatternNames) throw too_many(pattern);
  for (const std::string& alt : alts)
    for (const std::string& rest : rests) out.push_back(prefix + alt + rest);
  return out;
}

}  // namespace

std::vector<std::string> expand_braces(const std::string& pattern) {
  return expand_tail(pattern, pattern);
}

void JobGroup::bind(core::Binder& b) {
  b.field("name", name,
          "Name of each job: {client} and {server} stand for its two hosts (all_to_all needs "
          "both, so that names differ; zip and permutation at least one).");
  b.choice("pairs", pairs, {"all_to_all", "zip", "permutation"},
           "Which host pairs get a job. all_to_all: every ordered pair of two different hosts "
           "(clients in host order, each client's servers in host order), e.g. one write_flows "
           "job per pair for an all-to-all flow workload. zip: clients[i] -> servers[i]. "
           "permutation: a random one-to-one pairing from the stream job_groups.<index>.pairs "
           "of the scenario seed (so each seed draws its own): every host of hosts sends to one "
           "other and receives from one other, or each of clients sends to a different one of "
           "servers (never to itself).");
  b.field("hosts", hosts,
          "all_to_all and permutation: hosts that take part (clients and servers), taken in "
          "the scenario's host order; empty: every modeled host. An entry may be a brace "
          "pattern, expanded as a shell does: l{0..3}h{0..9} (40 hosts), {t0,t1}h0.");
  b.field("clients", clients,
          "zip and permutation: the clients, in the order written (brace patterns expanded).");
  b.field("servers", servers,
          "zip and permutation: the servers, in the order written (brace patterns expanded); "
          "zip needs as many as clients.");
  b.section("job", job,
            "The job every pair runs: any key of jobs[] except name, client and server, which "
            "the group sets.");
  b.field("ideal_base_by_switches", ideal_base_by_switches,
          "write_flows: each pair's ideal_base by the number of switches on its shortest path "
          "(e.g. {1: 9.2us, 3: 16.5us} on a leaf-spine: the pair's unloaded one-packet "
          "completion time, measured with write_lat); a pair whose count has no entry is an "
          "error. Empty: every pair takes job.ideal_base.");
  b.field("job_metrics", job_metrics,
          "Metrics for each job of the group: prefix -> an expression (any form of metrics) in "
          "which {job}, {client} and {server} stand for the job's name and hosts; every job "
          "gets the metric <prefix>.<job>, e.g. conn_gbps: \"{job}.65536.bw_gbps\" for "
          "min(conn_gbps.*) and average(conn_gbps.*).");
  if (!b.reading()) return;
  const bool has_client = name.find("{client}") != std::string::npos;
  const bool has_server = name.find("{server}") != std::string::npos;
  if (pairs == "all_to_all" && !(has_client && has_server))
    b.error("name must contain {client} and {server}");
  if (!has_client && !has_server) b.error("name must contain {client} or {server}");
  if (!job.name.empty() || !job.client.empty() || !job.server.empty())
    b.error("job must not set name, client or server: the group sets them for each pair");
  if (!ideal_base_by_switches.empty() && job.app != host::JobConfig::App::write_flows)
    b.error("ideal_base_by_switches applies to write_flows jobs only");
  if (!ideal_base_by_switches.empty() && !job.ideal_rate.bps)
    b.error("ideal_base_by_switches needs job.ideal_rate (the slowdown's size term)");
  // (the durations are read, and a bad one reported, by expand_job_group)
  for (const auto& [count, base] : ideal_base_by_switches)
    if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos)
      b.error("ideal_base_by_switches: '" + count + "' is not a switch count");
  const bool lists = !clients.empty() || !servers.empty();
  if (pairs == "all_to_all" && lists)
    b.error("pairs all_to_all takes hosts, not clients and servers");
  if (pairs == "zip" && (clients.empty() || servers.empty() || !hosts.empty()))
    b.error("pairs zip needs clients and servers (and no hosts)");
  if (pairs == "permutation" && lists && (clients.empty() || servers.empty() || !hosts.empty()))
    b.error("pairs permutation takes either hosts or both clients and servers");
  for (const auto& [prefix, expr] : job_metrics) {
    if (prefix.empty() || prefix.find_first_of(" {}*") != std::string::npos)
      b.error("job_metrics: '" + prefix + "' is not a metric name prefix");
    if (expr.find("{job}") == std::string::npos && expr.find("{client}") == std::string::npos &&
        expr.find("{server}") == std::string::npos)
      b.error("job_metrics." + prefix +
              ": the expression names neither {job}, {client} nor "
              "{server}, so every job's metric would be the same");
  }
}

std::vector<host::JobConfig> expand_job_group(const JobGroup& group, const JobGroupContext& ctx) {
  const auto& error = ctx.error;
  // The hosts: clients and servers as written (zip, permutation with
  // lists), or the members in the scenario's host order.
  std::vector<std::string> clients, servers, members;
  if (!group.clients.empty() || group.pairs == "zip") {
    clients = expand_names(group.clients, "clients", ctx.hosts, error);
    servers = expand_names(group.servers, "servers", ctx.hosts, error);
  } else {
    if (group.hosts.empty()) {
      members = ctx.hosts;
    } else {
      std::set<std::string> seen;
      for (const std::string& h : expand_names(group.hosts, "hosts", ctx.hosts, error))
        if (!seen.insert(h).second) error("hosts names '" + h + "' twice");
      // The scenario's host order, whatever order the group lists them in.
      for (const std::string& h : ctx.hosts)
        if (seen.count(h)) members.push_back(h);
    }
    if (members.size() < 2) error("needs at least two hosts to pair");
    clients = servers = members;
  }

  // The (client, server) pairs, in job order.
  std::vector<std::pair<std::string, std::string>> pairs;
  if (group.pairs == "all_to_all") {
    for (const std::string& client : members)
      for (const std::string& server : members)
        if (client != server) pairs.emplace_back(client, server);
  } else if (group.pairs == "zip") {
    if (clients.size() != servers.size())
      error("zip pairs clients[i] with servers[i], but there are " +
            std::to_string(clients.size()) + " clients and " + std::to_string(servers.size()) +
            " servers");
    for (size_t i = 0; i < std::min(clients.size(), servers.size()); ++i) {
      if (clients[i] == servers[i])
        error("zip pairs '" + clients[i] + "' with itself (entry " + std::to_string(i) + ")");
      else
        pairs.emplace_back(clients[i], servers[i]);
    }
  } else {  // permutation
    if (std::set<std::string>(servers.begin(), servers.end()).size() != servers.size() ||
        std::set<std::string>(clients.begin(), clients.end()).size() != clients.size())
      error("permutation: clients and servers must each name a host once");
    if (clients.size() != servers.size())
      error("permutation pairs each client with a different server, but there are " +
            std::to_string(clients.size()) + " clients and " + std::to_string(servers.size()) +
            " servers");
    core::RandomStream rng(ctx.seed, "job_groups." + std::to_string(ctx.index) + ".pairs");
    // (one member alone is reported above)
    if (!clients.empty() && clients.size() == servers.size() && members.size() != 1) {
      if (!draw_pairing(clients, servers, rng))
        error(
            "permutation: no pairing of these clients and servers avoids pairing a host "
            "with itself");
      else
        for (size_t i = 0; i < clients.size(); ++i) pairs.emplace_back(clients[i], servers[i]);
    }
  }

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
  for (const auto& [client, server] : pairs) {
    host::JobConfig j = group.job;
    j.name = replace_all(replace_all(group.name, "{client}", client), "{server}", server);
    j.client = client;
    j.server = server;
    if (!group.ideal_base_by_switches.empty()) {
      const int n = ctx.switches(client, server);
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
  return jobs;
}

std::map<std::string, std::string> job_group_metrics(const JobGroup& group,
                                                     const std::vector<host::JobConfig>& jobs) {
  std::map<std::string, std::string> out;
  for (const auto& [prefix, expr] : group.job_metrics)
    for (const host::JobConfig& j : jobs)
      out[prefix + "." + j.name] =
          replace_all(replace_all(replace_all(expr, "{job}", j.name), "{client}", j.client),
                      "{server}", j.server);
  return out;
}

}  // namespace mprdma::platform
