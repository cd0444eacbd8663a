// The shipped fabric scenarios, run whole: the testbed permutation (paths
// loaded as the switches' ECMP hashes say, an idle path with some seeds),
// row D1 (a Clos with two failed links deadlocks under PFC and does not
// without it), row O1 (READs into one client: line rate at once, a fair
// share as soon as a second server joins, with every transport) and row
// M8's degraded path (under PFC it traps a connection that does not prune
// it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/sim_test.h"
#include "vp/core/results.h"
#include "vp/platform/platform.h"
#include "vp/platform/report.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

std::string scenario_path(const std::string& rel) {
  const char* src = std::getenv("MPRDMA_SOURCE_DIR");
  return std::string(src ? src : ".") + "/scenarios/" + rel;
}

class FabricScenarioRun : public test::SimTest {
 protected:
  void TearDown() override { platform.reset(); }
  // Elaborates `cfg` and runs it to its end; returns whether every job ended.
  bool run(const ScenarioConfig& cfg) {
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    platform = std::make_unique<Platform>(cfg, *env);
    return platform->run();
  }
  uint64_t counter(const std::string& name) const {
    const core::Counter* c = env->stats.find_counter(name);
    if (!c) ADD_FAILURE() << "no counter " << name;
    return c ? c->value() : 0;
  }
  int idle_paths_of_permutation(int64_t seed);
  std::unique_ptr<Platform> platform;
};

// --- the testbed permutation ---------------------------------------------

// Runs the permutation (shortened to 200 messages per flow) with `seed`;
// returns the number of idle paths and checks what holds for every seed.
int FabricScenarioRun::idle_paths_of_permutation(int64_t seed) {
  ScenarioConfig cfg = load_scenario(scenario_path("fabric/testbed-permutation.yaml"));
  cfg.seed = seed;
  for (host::JobConfig& j : cfg.jobs) j.iterations = 200;
  EXPECT_TRUE(run(cfg));
  const nlohmann::json doc = results_document(*platform, *env, "inline");
  const nlohmann::json& m = doc["metrics"];
  int idle = 0;
  for (int s = 0; s < 4; ++s) {
    const double load = m["path_load_gbps." + std::to_string(s)].get<double>();
    EXPECT_LE(load, 40.0 + 1e-9) << "path " << s;
    if (load == 0.0) ++idle;
    // The metric is the link's wire rate; the switch's counter agrees.
    EXPECT_EQ(load == 0.0,
              counter("switch.t0.port" + std::to_string(5 + s) + ".tx_data_bytes") == 0)
        << "path " << s;
    // results.json's path group s (every link through spine s) agrees.
    const nlohmann::json& g = doc["fabric"]["paths"][s];
    EXPECT_EQ(g["links"][0], "t0-s" + std::to_string(s));
    // Both directions count: an idle path may still carry some flows' ACKs.
    if (load == 0.0)
      EXPECT_LT(g["utilisation"].get<double>(), 0.05) << "path " << s;
    else
      EXPECT_GT(g["utilisation"].get<double>(), load / 40.0 / 4.0) << "path " << s;
    EXPECT_LE(g["utilisation"].get<double>(), 1.0);
  }
  // The per-port CSV: a header and one row per connected switch port (the
  // testbed: 2 ToRs of 9 ports, 4 spines of 2).
  std::ostringstream csv;
  platform->fabric()->write_port_table(csv, env->stats, platform->active_time_s());
  std::vector<std::string> rows;
  {
    std::istringstream in(csv.str());
    for (std::string line; std::getline(in, line);) rows.push_back(line);
  }
  EXPECT_EQ(rows.size(), 1u + 2 * 9 + 4 * 2);
  EXPECT_EQ(rows[0].rfind("switch,port,peer,link,dir,", 0), 0u);
  for (int s = 0; s < 4; ++s) {
    // Row of t0's uplink to spine s: its tx_gbps column is the path load.
    const std::string prefix = "t0," + std::to_string(5 + s) + ",s" + std::to_string(s) + ",";
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const std::string& r) { return r.rfind(prefix, 0) == 0; });
    EXPECT_NE(it, rows.end()) << prefix;
    if (it == rows.end()) continue;
    std::istringstream cells(*it);
    std::string cell;
    for (int c = 0; c < 7; ++c) std::getline(cells, cell, ',');
    EXPECT_NEAR(std::stod(cell), m["path_load_gbps." + std::to_string(s)].get<double>(), 1e-3);
  }

  // ECN: the NICs send ECT(0); a path shared by two 37 Gb/s flows queues
  // above Kmin and RED marks; every CE frame reaches a receiver (lossless,
  // marked once): the marks the switches made equal the CE frames received.
  uint64_t marks = 0, ce = 0;
  for (const auto& [sw, stats] : doc["switches"].items())
    for (const auto& [stat, value] : stats.items())
      if (stat.size() > 10 && stat.compare(stat.size() - 10, 10, ".ecn_marks") == 0)
        marks += value.get<uint64_t>();
  for (const auto& [nic, stats] : doc["nics"].items()) ce += stats["mac.ce_rx"].get<uint64_t>();
  EXPECT_EQ(ce, marks);
  for (int s = 0; s < 4; ++s)
    if (m["path_load_gbps." + std::to_string(s)].get<double>() > 39.0) {
      EXPECT_GT(counter("switch.t0.port" + std::to_string(5 + s) + ".ecn_marks"), 0u) << s;
    }

  double sum = 0;
  for (const JobOutcome& o : platform->outcomes()) {
    EXPECT_TRUE(o.finished) << o.name;
    EXPECT_EQ(o.results.size(), 1u);
    if (o.results.empty()) continue;
    EXPECT_TRUE(o.results[0].data_ok) << o.name;
    // A flow alone on its path reaches the 37 Gb/s of 64 KiB WRITEs at MTU
    // 1024; flows sharing a path split it.
    EXPECT_LT(o.results[0].bw_gbps, 37.1) << o.name;
    EXPECT_GT(o.results[0].bw_gbps, 37.0 / 5 * 0.9) << o.name;
    sum += o.results[0].bw_gbps;
  }
  EXPECT_NEAR(m["aggregate_goodput_gbps"].get<double>(), sum, 1e-9);
  // Busy paths bound the aggregate: the rates are over each flow's own
  // time, so a lone flow's early end lets its sharers exceed half a path,
  // but never the wire.
  EXPECT_LT(sum, (4 - idle) * 40.0);
  return idle;
}

TEST_F(FabricScenarioRun, TestbedPermutationLeavesAPathIdleWithSomeSeeds) {
  // Seed 2: two spines carry two flows each and one none (the paper's
  // observation); seed 1 hashes the five flows 2-1-1-1.
  EXPECT_EQ(idle_paths_of_permutation(2), 1);
  EXPECT_EQ(idle_paths_of_permutation(1), 0);
}

// Same scenario and seed: results.json, the time series, the per-port table
// and a pcap tap are byte-identical; another seed moves the flows.
TEST_F(FabricScenarioRun, SameSeedGivesByteIdenticalFabricResults) {
  ScenarioConfig cfg = load_scenario(scenario_path("fabric/testbed-permutation.yaml"));
  for (host::JobConfig& j : cfg.jobs) j.iterations = 40;
  cfg.fabric.pcap = "t0-s1 t0-s2";
  auto run_to = [&](const std::string& dir) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    env->out_dir = dir;
    platform = std::make_unique<Platform>(cfg, *env);
    EXPECT_TRUE(platform->run());
    core::write_results(dir, results_document(*platform, *env, "inline"), env->stats);
    std::ofstream ports(dir + "/fabric_ports.csv");
    platform->fabric()->write_port_table(ports, env->stats, platform->active_time_s());
    ports.close();
    platform.reset();  // closes the captures
  };
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << path;
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string base = testing::TempDir() + "fabric_det_" + std::to_string(getpid());
  run_to(base + "_a");
  run_to(base + "_b");
  for (const char* f : {"/results.json", "/fabric_ports.csv", "/t0-s1.pcap", "/t0-s2.pcap",
                        "/series/switch.t0.port6.queue_bytes.csv"})
    EXPECT_EQ(slurp(base + "_a" + f), slurp(base + "_b" + f)) << f;
  EXPECT_GT(slurp(base + "_a/t0-s1.pcap").size() + slurp(base + "_a/t0-s2.pcap").size(), 1000u);
  cfg.seed = 2;
  run_to(base + "_c");
  EXPECT_NE(slurp(base + "_a/fabric_ports.csv"), slurp(base + "_c/fabric_ports.csv"));
}

// Observing a run does not change it: time series and deadlock checks
// look between kernel runs and add no events, so flows end at the same
// picosecond with any sample interval or none.
TEST_F(FabricScenarioRun, SamplingAndDeadlockChecksDoNotChangeTheRun) {
  ScenarioConfig cfg = load_scenario(scenario_path("fabric/testbed-permutation.yaml"));
  for (host::JobConfig& j : cfg.jobs) j.iterations = 60;
  std::vector<std::string> runs;
  for (const auto& [sample_us, check_us] :
       std::vector<std::pair<double, double>>{{0, 0}, {10, 100}, {7, 3}, {1, 0}}) {
    cfg.sample_interval = core::Duration::from_us(sample_us);
    cfg.fabric.deadlock_check = core::Duration::from_us(check_us);
    EXPECT_TRUE(run(cfg));
    const nlohmann::json doc = results_document(*platform, *env, "inline");
    // Flows, and every counter of the NICs, links and switches (series
    // entries differ by design: their number of points).
    std::string text = doc["flows"].dump();
    for (const char* group : {"nics", "links", "switches"})
      for (const auto& [name, stats] : doc[group].items())
        for (const auto& [stat, value] : stats.items())
          if (value.is_number()) text += name + "." + stat + "=" + value.dump() + "\n";
    runs.push_back(text);
  }
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_EQ(runs[i], runs[0]) << "run " << i;
}

// --- row D1: PFC deadlock ------------------------------------------------

// The four directions on the loop of clos-deadlock.yaml (see its header),
// as switch egress ports: every frame on the loop leaves through one.
std::vector<std::string> loop_ports(const fabric::Fabric& f) {
  std::vector<std::string> out;
  const fabric::Topology& t = f.topology();
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"s0", "l2"}, {"l2", "s1"}, {"s1", "l3"}, {"l3", "s0"}}) {
    const int n = t.find_node(from);
    const auto& pl = t.nodes()[n].port_link;
    for (size_t p = 0; p < pl.size(); ++p)
      if (pl[p] >= 0 && t.nodes()[t.peer(pl[p], n)].name == to)
        out.push_back("switch." + from + ".port" + std::to_string(p) + ".tx_data_bytes");
  }
  return out;
}

TEST_F(FabricScenarioRun, ClosWithTwoFailedLinksDeadlocksUnderPfc) {
  const ScenarioConfig cfg = load_scenario(scenario_path("fabric/clos-deadlock.yaml"));
  ASSERT_TRUE(cfg.fabric.sw.pfc.enabled);
  EXPECT_FALSE(run(cfg)) << "no job can finish on a deadlocked fabric";
  const fabric::DeadlockDetector* d = platform->fabric()->deadlock_detector();
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->deadlocks().size(), 1u);
  const fabric::DeadlockRecord& r = d->deadlocks()[0];
  // The cycle is s0 -> l2 -> s1 -> l3 -> s0 or its mirror through l3 first.
  ASSERT_EQ(r.cycle.size(), 4u);
  std::set<std::string> sw;
  for (const std::string& q : r.cycle) sw.insert(q.substr(0, q.find(' ')));
  EXPECT_EQ(sw, (std::set<std::string>{"l2", "l3", "s0", "s1"}));
  EXPECT_LT(r.at_s, 1e-3);
  EXPECT_EQ(counter("fabric.deadlocks"), 1u);
  EXPECT_EQ(counter("fabric.reroutes"), 2u);
  // It is reported in results.json with the switches and ports.
  const nlohmann::json doc = results_document(*platform, *env, "inline");
  ASSERT_EQ(doc["fabric"]["deadlocks"].size(), 1u);
  EXPECT_EQ(doc["fabric"]["deadlocks"][0]["cycle"].size(), 4u);

  // The loop is dead: another millisecond moves no data frame on it, and
  // no lossless frame was dropped.
  const std::vector<std::string> loop = loop_ports(*platform->fabric());
  ASSERT_EQ(loop.size(), 4u);
  std::vector<uint64_t> before;
  for (const std::string& c : loop) before.push_back(counter(c));
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_MS));
  for (size_t i = 0; i < loop.size(); ++i) {
    EXPECT_GT(before[i], 0u) << loop[i] << " carried traffic before the deadlock";
    EXPECT_EQ(counter(loop[i]), before[i]) << loop[i] << " moved data after the deadlock";
  }
  for (const char* s : {"l0", "l1", "l2", "l3", "s0", "s1"})
    EXPECT_EQ(counter(std::string("switch.") + s + ".pfc_headroom_drops"), 0u) << s;

  // The queue-length series show it: each loop queue stands still, full.
  for (const std::string& c : loop) {
    const std::string q = c.substr(0, c.rfind('.')) + ".queue_bytes";
    const core::TimeSeries* ts = env->stats.find_series(q);
    ASSERT_NE(ts, nullptr) << q;
    ASSERT_GT(ts->points().size(), 20u) << q;
    const double last = ts->points().back().value;
    EXPECT_GE(last, static_cast<double>(cfg.fabric.sw.pfc.xon.n)) << q;
    for (size_t i = ts->points().size() - 20; i < ts->points().size(); ++i)
      EXPECT_EQ(ts->points()[i].value, last) << q;
  }
}

TEST_F(FabricScenarioRun, TheSameClosWithoutPfcDropsButDoesNotDeadlock) {
  ScenarioConfig cfg = load_scenario(scenario_path("fabric/clos-deadlock.yaml"));
  cfg.fabric.sw.pfc.enabled = false;
  run(cfg);  // go-back-N without congestion control collapses; jobs may fail
  EXPECT_EQ(platform->fabric()->deadlock_detector(), nullptr);
  const std::vector<std::string> loop = loop_ports(*platform->fabric());
  ASSERT_EQ(loop.size(), 4u);
  // The loop keeps moving: over the last millisecond each loop direction
  // carries data at a good share of its 40 Gb/s (retransmissions included).
  std::vector<uint64_t> before;
  for (const std::string& c : loop) before.push_back(counter(c));
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_MS));
  for (size_t i = 0; i < loop.size(); ++i)
    EXPECT_GT((counter(loop[i]) - before[i]) * 8.0 / 1e-3 / 1e9, 10.0) << loop[i];
  uint64_t drops = 0;
  for (const char* s : {"l0", "l1", "l2", "l3", "s0", "s1"})
    for (int p = 0; p < platform->fabric()->switch_named(s)->ports(); ++p)
      drops += counter(std::string("switch.") + s + ".port" + std::to_string(p) + ".drops");
  EXPECT_GT(drops, 0u) << "a lossy fabric under this load drops";
}

// --- row O1: 4 MiB READs into one client, then from two servers ------------

// What the row's metrics say of each transport, by their design: MP-RDMA's
// initial window (one BDP) and DCQCN's initial rate (line rate) put a READ
// stream at 100 Gb/s within the first two 10 us samples; once the second
// server joins, the two share the client's link fairly within two samples
// and for good, and keep it busy.
TEST_F(FabricScenarioRun, ReadIncastRampsAtOnceAndSharesFairlyWithEveryTransport) {
  for (const auto& [transport, cc] : std::vector<std::pair<std::string, std::string>>{
           {"mprdma", "none"}, {"gbn", "dcqcn"}, {"irn", "dcqcn"}}) {
    SCOPED_TRACE(transport + " + " + cc);
    ScenarioConfig cfg = load_scenario(scenario_path("mp-rdma/o1-ramp-and-share.yaml"));
    cfg.nic.transport = transport;
    cfg.nic.congestion_control = cc;
    ASSERT_TRUE(run(cfg));
    std::vector<std::string> missing;
    const auto m = platform->metrics(&missing);
    EXPECT_TRUE(missing.empty()) << missing.front();
    ASSERT_TRUE(m.count("ramp_us") && m.count("fair_us"));
    EXPECT_LE(m.at("ramp_us"), 10.0);
    EXPECT_LE(m.at("hold_us"), 10.0);
    EXPECT_GT(m.at("f1_alone_gbps"), 95.0);
    EXPECT_LE(m.at("fair_us"), 20.0);
    EXPECT_GE(m.at("jain"), 0.99);
    EXPECT_GT(m.at("client_gbps"), 90.0);
    EXPECT_NEAR(m.at("fair_rtts"), m.at("fair_us") / 5, 1e-9);
  }
}

// --- row M8: a 1 Gb/s spine link under PFC -----------------------------------

// Row M8's degradation case, 150 ms of its 1 s, seed 2: without OOO control
// the slow path is not pruned; its queue grows past the hosts' XOFF at t0,
// PFC pauses them (fast paths and all), and one connection (t0h4 with this
// seed, from ~100 ms) is trapped at a fraction of the 1 Gb/s link: what the
// row's 1 s figure rests on (m8-ooo-control.yaml, "Long runs"). With OOO
// control the same run traps nobody.
TEST_F(FabricScenarioRun, SlowPathTrapsAConnectionUnderPfcUnlessPruned) {
  for (const bool ooo_control : {false, true}) {
    SCOPED_TRACE(ooo_control ? "OOO control" : "no OOO control");
    std::vector<std::string> sets = {
        "sweep=null",
        "sensitivity=null",
        "checks=[]",
        "published={}",
        "seed=2",
        "end_time=600ms",
        "jobs.*.duration=150ms",
        "fabric.events.0.value=1Gbps",
        std::string("nic.mprdma.ooo_control=") + (ooo_control ? "true" : "false")};
    std::string metrics = "metrics={";
    for (int h = 0; h < 5; ++h)
      metrics += (h ? ", " : "") + std::string("late") + std::to_string(h) +
                 ": \"8e-9*rate(nic.t1h" + std::to_string(h) + ".responder.bytes,110ms,150ms)\"";
    sets.push_back(metrics + "}");
    ScenarioConfig cfg = load_scenario(scenario_path("mp-rdma/m8-ooo-control.yaml"), sets);
    ASSERT_TRUE(run(cfg));
    std::vector<std::string> missing;
    const auto m = platform->metrics(&missing);
    ASSERT_TRUE(missing.empty()) << missing.front();
    double slowest = 1e9;
    for (int h = 0; h < 5; ++h) slowest = std::min(slowest, m.at("late" + std::to_string(h)));
    uint64_t pauses = 0;
    for (int port = 0; port < 5; ++port)
      pauses += counter("switch.t0.port" + std::to_string(port) + ".pause_tx");
    const uint64_t slow_queue = counter("switch.t0.port8.queue_max_bytes");
    if (!ooo_control) {
      EXPECT_LT(slowest, 1.0);  // Gb/s: trapped behind the 1 Gb/s link
      EXPECT_GT(pauses, 100u);
      EXPECT_GT(slow_queue, 150000u);  // past 1.5 x XOFF (96 KiB); ~19 KB when pruned
    } else {
      EXPECT_GT(slowest, 5.0);
    }
  }
}

}  // namespace
}  // namespace mprdma::platform
