// Job groups: a template job expanded over host pairs. The expansion gives
// exactly the jobs a hand-written list would (names, order, every key), the
// per-distance ideal_base follows the switches between the two hosts, and
// each mistake is an error that names it.
#include "vp/platform/job_group.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support/files.h"
#include "vp/core/config.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

// A k = 4 fat-tree's 16 hosts: p<pod>e<edge>h<host>.
const char* kFatTree = R"(name: t
fabric: {topology: fat_tree, k: 4}
)";

const char* kGroup = R"(job_groups:
  - pairs: all_to_all
    job: {app: write_flows, rate: 1Gbps, duration: 1ms, ideal_rate: 36Gbps, qps: 2,
          after_previous: false}
    ideal_base_by_switches: {1: 11us, 3: 20us, 5: 29us}
)";

ScenarioConfig load(const std::string& text, const std::vector<std::string>& sets = {}) {
  return load_scenario(test::write_temp("group.yaml", text), sets);
}

std::string config_error(const std::string& text) {
  try {
    load(text);
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

nlohmann::json jobs_json(ScenarioConfig cfg) {
  core::JsonBinder jb;
  return jb.dump(cfg).at("jobs");
}

TEST(JobGroup, AllToAllIsEveryOrderedPairInHostOrder) {
  const ScenarioConfig cfg = load(std::string(kFatTree) + kGroup);
  ASSERT_EQ(cfg.jobs.size(), 16u * 15u);
  EXPECT_EQ(cfg.jobs[0].name, "p0e0h0_p0e0h1");
  EXPECT_EQ(cfg.jobs[0].client, "p0e0h0");
  EXPECT_EQ(cfg.jobs[0].server, "p0e0h1");
  EXPECT_EQ(cfg.jobs[14].name, "p0e0h0_p3e1h1") << "the first client's last server";
  EXPECT_EQ(cfg.jobs[15].name, "p0e0h1_p0e0h0") << "then the next client";
  EXPECT_EQ(cfg.jobs.back().name, "p3e1h1_p3e1h0");
  for (const host::JobConfig& j : cfg.jobs) {
    EXPECT_NE(j.client, j.server);
    EXPECT_EQ(j.qps, 2);
    EXPECT_EQ(j.rate.bps, 1e9);
    EXPECT_FALSE(j.after_previous);
    EXPECT_EQ(j.sizes.at(0).n, 30000000u) << "write_flows' largest web-search flow";
  }
  // ideal_base by distance: one edge switch, a pod (edge, aggregation,
  // edge), across a core (five switches).
  EXPECT_EQ(cfg.jobs[0].ideal_base.ps, core::Duration::from_us(11).ps);
  EXPECT_EQ(cfg.jobs[1].ideal_base.ps, core::Duration::from_us(20).ps) << cfg.jobs[1].name;
  EXPECT_EQ(cfg.jobs[14].ideal_base.ps, core::Duration::from_us(29).ps);
}

TEST(JobGroup, MakesTheSameJobsAsTheListItStandsFor) {
  // Two leaves of two hosts: the hand-written list of the 12 pairs.
  const std::string fabric =
      "name: t\nfabric: {topology: leaf_spine, spines: 2, leaves: 2, hosts_per_leaf: 2}\n";
  const std::vector<std::string> hosts = {"l0h0", "l0h1", "l1h0", "l1h1"};
  std::string list = fabric + "jobs:\n";
  for (const std::string& a : hosts)
    for (const std::string& b : hosts)
      if (a != b)
        list += "  - {name: " + a + "_" + b + ", app: write_flows, client: " + a +
                ", server: " + b + ", rate: 2Gbps, duration: 1ms, ideal_rate: 36Gbps, " +
                "ideal_base: " + (a.substr(0, 2) == b.substr(0, 2) ? "9us" : "16us") +
                ", tx_depth: 16, after_previous: false}\n";
  const std::string group = fabric + R"(job_groups:
  - job: {app: write_flows, rate: 2Gbps, duration: 1ms, ideal_rate: 36Gbps, tx_depth: 16,
          after_previous: false}
    ideal_base_by_switches: {1: 9us, 3: 16us}
)";
  const nlohmann::json a = jobs_json(load(list));
  const nlohmann::json b = jobs_json(load(group));
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
}

TEST(JobGroup, ListedJobsComeFirstAndHostsChooseTheMembers) {
  const ScenarioConfig cfg = load(std::string(kFatTree) + R"(jobs:
  - {name: lone, app: write_bw, client: p1e0h0, server: p2e0h0}
job_groups:
  - name: "g_{server}_from_{client}"
    hosts: [p3e1h1, p0e0h0, p1e1h0]
    job: {app: write_bw, iterations: 10}
metrics:
  one: g_p3e1h1_from_p0e0h0.65536.bw_gbps
)");
  ASSERT_EQ(cfg.jobs.size(), 7u);
  EXPECT_EQ(cfg.jobs[0].name, "lone");
  // Members in the scenario's host order, whatever order hosts lists.
  EXPECT_EQ(cfg.jobs[1].name, "g_p1e1h0_from_p0e0h0");
  EXPECT_EQ(cfg.jobs[2].name, "g_p3e1h1_from_p0e0h0");
  EXPECT_EQ(cfg.jobs[6].name, "g_p1e1h0_from_p3e1h1");
  EXPECT_EQ(cfg.jobs[3].iterations, 10);
  EXPECT_EQ(cfg.jobs[3].ideal_base.ps, 0) << "no ideal_base_by_switches: the template's";
}

TEST(JobGroup, SetReachesEveryJobThroughTheTemplate) {
  const ScenarioConfig cfg =
      load(std::string(kFatTree) + kGroup,
           {"job_groups.0.job.rate=3Gbps", "job_groups.0.ideal_base_by_switches.5=40us"});
  for (const host::JobConfig& j : cfg.jobs) EXPECT_EQ(j.rate.bps, 3e9) << j.name;
  EXPECT_EQ(cfg.jobs[14].ideal_base.ps, core::Duration::from_us(40).ps);
}

TEST(JobGroup, BackToBackHostsHaveNoSwitchBetweenThem) {
  const ScenarioConfig cfg = load(R"(name: t
hosts: [{name: h0}, {name: h1}]
links: [{name: w, a: h0, b: h1}]
job_groups:
  - job: {app: write_flows, rate: 1Gbps, duration: 1ms, ideal_rate: 36Gbps}
    ideal_base_by_switches: {0: 3us}
)");
  ASSERT_EQ(cfg.jobs.size(), 2u);
  EXPECT_EQ(cfg.jobs[1].name, "h1_h0");
  EXPECT_EQ(cfg.jobs[1].ideal_base.ps, core::Duration::from_us(3).ps);
}

TEST(JobGroup, MistakesAreErrorsThatNameThem) {
  const std::string ft = kFatTree;
  auto group = [&](const std::string& body) { return config_error(ft + "job_groups:\n" + body); };
  const std::string wf =
      "    job: {app: write_flows, rate: 1Gbps, duration: 1ms, ideal_rate: 36Gbps}\n";
  std::string e = group("  - {name: \"{client}\", job: {app: write_bw}}\n");
  EXPECT_NE(e.find("name must contain {client} and {server}"), std::string::npos) << e;
  e = group("  - {job: {app: write_bw, client: p0e0h0}}\n");
  EXPECT_NE(e.find("must not set name, client or server"), std::string::npos) << e;
  e = group("  - ideal_base_by_switches: {1: 11us, 3: 20us}\n" + wf);
  EXPECT_NE(e.find("job_groups[0]: ideal_base_by_switches has no entry for 5 switches "
                   "(p0e0h0 -> p1e0h0)"),
            std::string::npos)
      << e;
  e = group("  - ideal_base_by_switches: {one: 11us}\n" + wf);
  EXPECT_NE(e.find("'one' is not a switch count"), std::string::npos) << e;
  e = group("  - ideal_base_by_switches: {1: fast}\n" + wf);
  EXPECT_NE(e.find("ideal_base_by_switches.1: "), std::string::npos) << e;
  e = group("  - ideal_base_by_switches: {1: 1us}\n    job: {app: write_bw}\n");
  EXPECT_NE(e.find("applies to write_flows jobs only"), std::string::npos) << e;
  e = group(
      "  - ideal_base_by_switches: {1: 1us}\n"
      "    job: {app: write_flows, rate: 1Gbps, duration: 1ms}\n");
  EXPECT_NE(e.find("needs job.ideal_rate"), std::string::npos) << e;
  e = group("  - {hosts: [p0e0h0, nowhere], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("hosts names 'nowhere', which is not a modeled host"), std::string::npos) << e;
  e = group("  - {hosts: [p0e0h0, p0e0h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("hosts names 'p0e0h0' twice"), std::string::npos) << e;
  e = group("  - {hosts: [p0e0h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("needs at least two hosts"), std::string::npos) << e;
  e = group("  - {pairs: incast, job: {app: write_bw}}\n");
  EXPECT_NE(e.find("incast"), std::string::npos) << e;
  e = group("  - {job: {app: write_bw, color: red}}\n");
  EXPECT_NE(e.find("color"), std::string::npos) << e;
  e = group("  - {job: {app: write_flows}}\n");
  EXPECT_NE(e.find("write_flows needs rate"), std::string::npos) << e;
  // Generated names meet the scenario's checks like listed ones.
  e = group("  - {name: \"{client}.{server}\", job: {app: write_bw}}\n");
  EXPECT_NE(e.find("job 'p0e0h0.p0e0h1': a job name may not contain dots"), std::string::npos) << e;
  e = config_error(ft +
                   "jobs: [{name: p0e0h0_p0e0h1, app: write_bw, client: p0e0h0, "
                   "server: p1e0h0}]\njob_groups: [{job: {app: write_bw}}]\n");
  EXPECT_NE(e.find("job 'p0e0h0_p0e0h1' is defined twice"), std::string::npos) << e;
}

TEST(JobGroupBraces, ExpandAsAShellDoes) {
  EXPECT_EQ(expand_braces("h0"), std::vector<std::string>({"h0"}));
  EXPECT_EQ(expand_braces("l{0..2}h{0,1}"),
            std::vector<std::string>({"l0h0", "l0h1", "l1h0", "l1h1", "l2h0", "l2h1"}))
      << "the leftmost brace varies slowest";
  EXPECT_EQ(expand_braces("{t1,t0}h{9..10}"),
            std::vector<std::string>({"t1h9", "t1h10", "t0h9", "t0h10"}));
  EXPECT_EQ(expand_braces("h{3..1}"), std::vector<std::string>({"h3", "h2", "h1"}));
  EXPECT_EQ(expand_braces("l{16..31}h{0..9}").size(), 160u);
  for (const char* bad :
       {"h{0..2", "h0..2}", "h}{0", "h{}", "h{a..2}", "h{0,,1}", "h{{0,1}}", "h{-1..2}"})
    EXPECT_THROW(expand_braces(bad), std::invalid_argument) << bad;
  try {
    expand_braces("l{0,1}h{2");
    ADD_FAILURE() << "expanded";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "'l{0,1}h{2' has a '{' without its '}'")
        << "the error names the whole pattern";
  }
  // A typo that would make a billion names is an error that says so.
  EXPECT_EQ(expand_braces("h{0..99999}").size(), 100000u);
  for (const char* huge : {"h{0..999999999}", "h{0..999}{0..999}"}) {
    try {
      expand_braces(huge);
      ADD_FAILURE() << huge << " expanded";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expands to more than 100000 names"), std::string::npos)
          << e.what();
    }
  }
}

// Two leaf switches of four hosts each: l<leaf>h<host>.
const char* kLeaves = R"(name: t
fabric: {topology: leaf_spine, spines: 2, leaves: 2, hosts_per_leaf: 4}
)";

TEST(JobGroup, ZipPairsClientsWithServersInTheOrderWritten) {
  const ScenarioConfig cfg = load(std::string(kLeaves) + R"(job_groups:
  - name: "c_{client}"
    pairs: zip
    clients: ["l0h{0..3}"]
    servers: [l1h3, "l1h{0..2}"]
    job: {app: write_bw, iterations: 3}
)");
  ASSERT_EQ(cfg.jobs.size(), 4u);
  const char* want[][2] = {{"l0h0", "l1h3"}, {"l0h1", "l1h0"}, {"l0h2", "l1h1"}, {"l0h3", "l1h2"}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cfg.jobs[i].client, want[i][0]);
    EXPECT_EQ(cfg.jobs[i].server, want[i][1]);
    EXPECT_EQ(cfg.jobs[i].name, std::string("c_") + want[i][0]);
  }
}

// The (client, server) pairs of a load, in job order.
std::vector<std::pair<std::string, std::string>> pairs_of(const ScenarioConfig& cfg) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const host::JobConfig& j : cfg.jobs) out.emplace_back(j.client, j.server);
  return out;
}

TEST(JobGroup, APermutationIsOneToOneAndFollowsTheSeed) {
  const std::string text =
      std::string(kLeaves) + "job_groups:\n  - {pairs: permutation, job: {app: write_bw}}\n";
  std::set<std::vector<std::pair<std::string, std::string>>> drawn;
  for (int seed = 1; seed <= 8; ++seed) {
    const ScenarioConfig cfg = load(text, {"seed=" + std::to_string(seed)});
    ASSERT_EQ(cfg.jobs.size(), 8u) << "every host sends once";
    std::set<std::string> clients, servers;
    for (const host::JobConfig& j : cfg.jobs) {
      EXPECT_NE(j.client, j.server) << "seed " << seed;
      clients.insert(j.client);
      servers.insert(j.server);
    }
    EXPECT_EQ(clients.size(), 8u);
    EXPECT_EQ(servers.size(), 8u) << "and every host receives once";
    EXPECT_EQ(pairs_of(cfg), pairs_of(load(text, {"seed=" + std::to_string(seed)})))
        << "the same seed draws the same pairs";
    drawn.insert(pairs_of(cfg));
  }
  EXPECT_GE(drawn.size(), 6u) << "seeds draw different permutations (14833 derangements of 8)";
}

TEST(JobGroup, APermutationOfClientsOntoServersCrossesBetweenTheTwo) {
  const std::string text = std::string(kLeaves) + R"(job_groups:
  - pairs: permutation
    clients: ["l0h{0..3}"]
    servers: ["l1h{0..3}"]
    job: {app: write_bw}
  - name: "b_{client}_{server}"
    pairs: permutation
    clients: ["l0h{0..3}"]
    servers: ["l1h{0..3}"]
    job: {app: write_bw}
)";
  const ScenarioConfig cfg = load(text);
  ASSERT_EQ(cfg.jobs.size(), 8u);
  std::set<std::string> servers;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(cfg.jobs[i].client, "l0h" + std::to_string(i)) << "clients in the order written";
    EXPECT_EQ(cfg.jobs[i].server.substr(0, 2), "l1");
    servers.insert(cfg.jobs[i].server);
  }
  EXPECT_EQ(servers.size(), 4u);
  // Each group draws from its own stream: over a few seeds the two groups'
  // pairings differ at least once.
  bool differ = false;
  for (int seed = 1; seed <= 6 && !differ; ++seed) {
    const ScenarioConfig c = load(text, {"seed=" + std::to_string(seed)});
    for (size_t i = 0; i < 4; ++i) differ |= c.jobs[i].server != c.jobs[i + 4].server;
  }
  EXPECT_TRUE(differ);
}

TEST(JobGroup, JobMetricsGiveEachJobItsOwnFigure) {
  const ScenarioConfig cfg = load(std::string(kLeaves) + R"(job_groups:
  - pairs: zip
    clients: ["l0h{0..1}"]
    servers: ["l1h{0..1}"]
    job: {app: write_bw}
    job_metrics:
      conn_gbps: "{job}.65536.bw_gbps"
      rx: "nic.{server}.responder.bytes + 0*nic.{client}.responder.bytes"
metrics:
  avg: average(conn_gbps.*)
)");
  EXPECT_EQ(cfg.metrics.at("conn_gbps.l0h0_l1h0"), "l0h0_l1h0.65536.bw_gbps");
  EXPECT_EQ(cfg.metrics.at("conn_gbps.l0h1_l1h1"), "l0h1_l1h1.65536.bw_gbps");
  EXPECT_EQ(cfg.metrics.at("rx.l0h1_l1h1"),
            "nic.l1h1.responder.bytes + 0*nic.l0h1.responder.bytes");
  EXPECT_EQ(cfg.metrics.size(), 5u);
}

TEST(JobGroup, PairingMistakesAreErrorsThatNameThem) {
  auto group = [&](const std::string& body) {
    return config_error(std::string(kLeaves) + "job_groups:\n" + body);
  };
  std::string e = group(
      "  - {pairs: zip, clients: [\"l0h{0..3}\"], servers: [l1h0],"
      " job: {app: write_bw}}\n");
  EXPECT_NE(e.find("there are 4 clients and 1 servers"), std::string::npos) << e;
  e = group(
      "  - {name: conn, pairs: zip, clients: [l0h0], servers: [l1h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("name must contain {client} or {server}"), std::string::npos) << e;
  e = group("  - {pairs: zip, hosts: [l0h0, l1h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("pairs zip needs clients and servers (and no hosts)"), std::string::npos) << e;
  e = group("  - {clients: [l0h0], servers: [l1h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("all_to_all takes hosts, not clients and servers"), std::string::npos) << e;
  e = group("  - {pairs: zip, clients: [l0h0], servers: [l0h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("zip pairs 'l0h0' with itself"), std::string::npos) << e;
  e = group(
      "  - {pairs: zip, clients: [\"l{0..2}h0\"], servers: [\"l1h{0..2}\"],"
      " job: {app: write_bw}}\n");
  EXPECT_NE(e.find("clients names 'l2h0' (from 'l{0..2}h0'), which is not a modeled host"),
            std::string::npos)
      << e;
  e = group(
      "  - {pairs: zip, clients: [\"l{5..9999}h0\"], servers: [\"l1h{0..2}\"],"
      " job: {app: write_bw}}\n");
  EXPECT_NE(e.find("clients names 'l5h0' and 9994 more (from 'l{5..9999}h0'), which are not "
                   "modeled hosts"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("l6h0"), std::string::npos) << "one error for the pattern, not 9995";
  e = group("  - {pairs: zip, clients: [\"l0h{0..1\"], servers: [l1h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("clients: 'l0h{0..1' has a '{' without its '}'"), std::string::npos) << e;
  e = group("  - {pairs: permutation, clients: [l0h0], servers: [l0h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("no pairing of these clients and servers avoids"), std::string::npos) << e;
  e = group(
      "  - {pairs: permutation, clients: [l0h0, l0h0], servers: [l1h0, l1h1],"
      " job: {app: write_bw}}\n");
  EXPECT_NE(e.find("must each name a host once"), std::string::npos) << e;
  e = group("  - {pairs: permutation, clients: [l0h0], job: {app: write_bw}}\n");
  EXPECT_NE(e.find("either hosts or both clients and servers"), std::string::npos) << e;
  e = group("  - {job: {app: write_bw}, job_metrics: {same: l0h0_l0h1.65536.bw_gbps}}\n");
  EXPECT_NE(e.find("job_metrics.same: the expression names neither"), std::string::npos) << e;
  e = config_error(std::string(kLeaves) +
                   "job_groups:\n  - {job: {app: write_bw}, "
                   "job_metrics: {g: \"{job}.65536.bw_gbps\"}}\n"
                   "metrics: {g.l0h0_l0h1: l0h0_l0h1.65536.bw_gbps}\n");
  EXPECT_NE(e.find("job_metrics makes metric 'g.l0h0_l0h1', which the scenario's metrics "
                   "already define"),
            std::string::npos)
      << e;
}

TEST(JobGroup, ConnectionsBeyondTheNicsTablesAreAnErrorBeforeTheRun) {
  // 15 pairs per host and direction, 2 connections each: 60 connection
  // ends per host, each with a 30 MB web-search buffer (7 325 pages: a
  // write_flows end has one half, the client's source or the server's
  // destination).
  const std::string base = std::string(kFatTree) + kGroup;
  EXPECT_EQ(config_error(base), "") << "the defaults hold 440k MTT entries";
  std::string e = config_error(base + "nic: {limits: {max_mtt: 400000, max_qp: 50}}\n");
  EXPECT_NE(e.find("host 'p0e0h0': its jobs need at least 439500 MTT entries, more than "
                   "nic.limits.max_mtt 400000"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("at least 60 QPs, more than nic.limits.max_qp 50"), std::string::npos) << e;
  // A host's own NIC limits count for it.
  e = config_error(base + "nic: {limits: {max_qp: 50}}\n" +
                   "hosts: [{name: p0e0h0, nic: {limits.max_qp: 1000}}]\n");
  EXPECT_EQ(e.find("host 'p0e0h0'"), std::string::npos) << e;
  EXPECT_NE(e.find("host 'p0e0h1': its jobs need at least 60 QPs"), std::string::npos) << e;
  // Disabled jobs take nothing.
  e = config_error(std::string(kFatTree) +
                   "jobs: [{name: off, app: write_bw, client: p0e0h0, server: p0e0h1, qps: 90, "
                   "enabled: false}]\nnic: {limits: {max_qp: 50}}\n");
  EXPECT_EQ(e, "") << e;
}

}  // namespace
}  // namespace mprdma::platform
