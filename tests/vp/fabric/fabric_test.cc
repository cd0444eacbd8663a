// The fabric section of a scenario and the Fabric module: loading, the
// errors of bad input (each naming what is wrong), the hosts and links the
// platform gets, routes installed in the switches, ECMP seeds from the
// scenario seed, and metric expressions over links.
#include "vp/fabric/fabric.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/core/config.h"
#include "vp/platform/scenario.h"

namespace mprdma::fabric {
namespace {

using platform::ScenarioConfig;

std::string write_temp(const std::string& text) { return test::write_temp("fabric.yaml", text); }

ScenarioConfig load(const std::string& text) { return platform::load_scenario(write_temp(text)); }

// The scenario's errors, joined; "" if it loads.
std::string error_of(const std::string& text) {
  try {
    load(text);
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

const char* kTestbed = R"(name: t
fabric:
  topology: mp_rdma_testbed
hosts:
  - {name: t1h2, kind: modeled}
jobs:
  - {name: w, app: write_bw, client: t0h0, server: t1h2, sizes: [4KiB]}
metrics:
  up0: link.t0-s0.a2b.avg_gbps
  sum: w.4096.bw_gbps + link.t0-s1.a2b.avg_gbps+link.t1h2-t1.b2a.avg_gbps
)";

const char* kExplicit = R"(name: e
fabric:
  topology: explicit
  nodes:
    - {name: a}
    - {name: b, ip: 10.9.0.2}
    - {name: sw, kind: switch}
  links:
    - {a: a, b: sw}
    - {a: b, b: sw, b_port: 4, rate: 10Gbps, delay: 1us}
jobs:
  - {name: w, app: write_bw, client: a, server: b, sizes: [4KiB]}
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(FabricScenario, TestbedLoadsWithHostsInFabricOrder) {
  const ScenarioConfig cfg = load(kTestbed);
  ASSERT_TRUE(cfg.has_fabric());
  const std::vector<platform::HostEntry> hosts = cfg.effective_hosts();
  ASSERT_EQ(hosts.size(), 10u);
  EXPECT_EQ(hosts[0].name, "t0h0");
  EXPECT_EQ(hosts[7].name, "t1h2");
  EXPECT_EQ(hosts[3].kind, "modeled");  // unlisted: modeled
  EXPECT_EQ(cfg.link_names().size(), 18u);
}

TEST(FabricScenario, ExplicitTopologyTakesAddressesPortsRatesAndDelays) {
  const ScenarioConfig cfg = load(kExplicit);
  const Topology t = cfg.fabric.build_topology();
  EXPECT_EQ(ip_text(t.nodes()[t.find_node("a")].ip), "10.0.0.1");
  EXPECT_EQ(ip_text(t.nodes()[t.find_node("b")].ip), "10.9.0.2");
  const TopoLink& l = t.links()[t.find_link("b-sw")];
  EXPECT_EQ(l.port[1], 4);
  EXPECT_EQ(l.rate.bps, 10e9);
  EXPECT_EQ(l.delay.ps, 1000000u);
  EXPECT_EQ(t.links()[t.find_link("a-sw")].rate.bps, 40e9);  // access_rate
}

TEST(FabricScenario, BadTopologiesAreErrorsNamingTheProblem) {
  std::string err = error_of(replaced(kExplicit, "{a: a, b: sw}", "{a: a, b: sx}"));
  EXPECT_NE(err.find("link 'a-sx' names unknown node 'sx'"), std::string::npos) << err;
  // Two islands: the hosts cannot reach each other.
  err = error_of(replaced(replaced(kExplicit, "{name: sw, kind: switch}",
                                   "{name: sw, kind: switch}\n    - {name: sw2, kind: switch}"),
                          "{a: b, b: sw,", "{a: b, b: sw2,"));
  EXPECT_NE(err.find("host 'b' is unreachable from host 'a'"), std::string::npos) << err;
  err = error_of(replaced(kExplicit, "{name: a}", "{name: a, ip: 10.9.0.2}"));
  EXPECT_NE(err.find("duplicate address 10.9.0.2: hosts 'a' and 'b'"), std::string::npos) << err;
  err = error_of(replaced(kExplicit, "ip: 10.9.0.2", "ip: 10.9.0.300"));
  EXPECT_NE(err.find("'10.9.0.300' is not an IPv4 address"), std::string::npos) << err;
  err = error_of(replaced(kExplicit, "{a: a, b: sw}", "{a: a, b: sw, b_port: 4}"));
  EXPECT_NE(err.find("port 4 of switch 'sw' is used by links 'a-sw' and 'b-sw'"), std::string::npos)
      << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed", "topology: fat_tree\n  k: 5"));
  EXPECT_NE(err.find("k of a fat tree must be even"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                          "topology: leaf_spine\n  nodes: [{name: x}]"));
  EXPECT_NE(err.find("only for topology: explicit"), std::string::npos) << err;
}

TEST(FabricScenario, AThresholdAboveTheBufferNamesTheSwitchAndKey) {
  const std::string err = error_of(replaced(
      kTestbed, "topology: mp_rdma_testbed",
      "topology: mp_rdma_testbed\n  switch: {buffer: 1MiB, pfc: {xoff: 2MiB, xon: 64KiB}}"));
  EXPECT_NE(err.find("switch 't0'"), std::string::npos) << err;
  EXPECT_NE(err.find("switch.pfc.xoff"), std::string::npos) << err;
  EXPECT_NE(err.find("above the buffer size"), std::string::npos) << err;
  // The error points into the fabric section of the file.
  EXPECT_NE(err.find("fabric"), std::string::npos) << err;
  // Each below the buffer, but XOFF plus the headroom behind it is not.
  const std::string sum = error_of(replaced(
      kTestbed, "topology: mp_rdma_testbed",
      "topology: mp_rdma_testbed\n  switch: {buffer: 1MiB, pfc: {xoff: 900KiB, xon: 64KiB, "
      "headroom: 200KiB}}"));
  EXPECT_NE(sum.find("switch 't0' (and every other switch): switch.pfc.xoff + "
                     "switch.pfc.headroom"),
            std::string::npos)
      << sum;
}

TEST(FabricScenario, EventsAndTapsMustNameLinksAndValidValues) {
  std::string err = error_of(
      replaced(kTestbed, "topology: mp_rdma_testbed",
               "topology: mp_rdma_testbed\n  events: [{at: 1ms, link: t0-s9, action: down}]"));
  EXPECT_NE(err.find("events[0] names unknown link 't0-s9'"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                          "topology: mp_rdma_testbed\n  events: [{at: 1ms, link: t0-s1, action: "
                          "rate, value: fast}]"));
  EXPECT_NE(err.find("rate event on link 't0-s1'"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                          "topology: mp_rdma_testbed\n  events: [{at: 1ms, link: t0-s1, action: "
                          "loss, value: '1.5'}]"));
  EXPECT_NE(err.find("not a probability"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                          "topology: mp_rdma_testbed\n  events: [{at: 1ms, link: t0-s1, action: "
                          "down, value: '3'}]"));
  EXPECT_NE(err.find("takes no value"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                          "topology: mp_rdma_testbed\n  pcap: \"t0-s0, t0-s7\""));
  EXPECT_NE(err.find("pcap names unknown link 't0-s7'"), std::string::npos) << err;
  EXPECT_EQ(
      error_of(replaced(kTestbed, "topology: mp_rdma_testbed",
                        "topology: mp_rdma_testbed\n  pcap: \"*\"\n  events:\n"
                        "    - {at: 1ms, link: t0-s1, action: loss_ip_id, value: '16'}\n"
                        "    - {at: 2ms, link: t0-s1, action: rate, value: 1Gbps, dir: a2b}")),
      "");
}

TEST(FabricScenario, EcnOverridesLoadAndBadEntriesAreErrorsNamingTheEntry) {
  auto with = [](const std::string& entries) {
    return replaced(kTestbed, "topology: mp_rdma_testbed",
                    "topology: mp_rdma_testbed\n  ecn_overrides:\n" + entries);
  };
  const ScenarioConfig cfg =
      load(with("    - {link: t0-s3, dir: a2b, kmin: 240KB, kmax: 240KB, pmax: 1.0}\n"
                "    - {link: t1-s3, dir: b2a, enabled: false}\n"));
  ASSERT_EQ(cfg.fabric.ecn_overrides.size(), 2u);
  const EcnConfig e = cfg.fabric.ecn_overrides[0].apply(cfg.fabric.sw.ecn);
  EXPECT_EQ(e.kmin.n, 240000u);
  EXPECT_EQ(e.kmax.n, 240000u);
  EXPECT_EQ(e.queue, EcnConfig::Queue::instantaneous);  // not given: the switch's
  EXPECT_FALSE(cfg.fabric.ecn_overrides[1].apply(cfg.fabric.sw.ecn).enabled);

  std::string err = error_of(with("    - {link: t0-s9, dir: a2b, kmin: 1KB}\n"));
  EXPECT_NE(err.find("ecn_overrides[0] (link 't0-s9' a2b) names unknown link 't0-s9'"),
            std::string::npos)
      << err;
  // Host t0h0 sends a2b on its access link: a NIC, not a switch port.
  err =
      error_of(with("    - {link: t0-s0, dir: a2b}\n    - {link: t0h0-t0, dir: a2b, kmin: 1KB}\n"));
  EXPECT_NE(
      err.find("ecn_overrides[1] (link 't0h0-t0' a2b): that direction is sent by host 't0h0'"),
      std::string::npos)
      << err;
  err = error_of(with("    - {link: t0-s1, kmin: 1KB}\n"));
  EXPECT_NE(err.find("dir must be a2b or b2a"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: up}\n"));
  EXPECT_NE(err.find("dir must be a2b or b2a (got 'up')"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, kmin: lots}\n"));
  EXPECT_NE(err.find("ECN override of link 't0-s1' a2b: kmin 'lots'"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, pmax: 1.5}\n"));
  EXPECT_NE(err.find("pmax '1.5' is not a number in [0, 1]"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, enabled: maybe}\n"));
  EXPECT_NE(err.find("enabled 'maybe' is not true or false"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, queue: median}\n"));
  EXPECT_NE(err.find("queue 'median'"), std::string::npos) << err;
  // kmin above the switch's kmax (20 KiB) once merged.
  err = error_of(with("    - {link: t0-s1, dir: a2b, kmin: 30KB}\n"));
  EXPECT_NE(err.find("kmin (30000B) exceeds kmax (20KiB)"), std::string::npos) << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, kmax: 64MiB}\n"));
  EXPECT_NE(err.find("ecn_overrides[0] (link 't0-s1' a2b): kmax (64MiB) is above the buffer"),
            std::string::npos)
      << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b}\n    - {link: t0-s1, dir: a2b, kmin: 1KB}\n"));
  EXPECT_NE(err.find("ecn_overrides[1] (link 't0-s1' a2b): a second override of the same port"),
            std::string::npos)
      << err;
  err = error_of(with("    - {link: t0-s1, dir: a2b, colour: red}\n"));
  EXPECT_NE(err.find("colour"), std::string::npos) << err;
}

TEST(FabricScenario, EcnRatioCounterAndGoodputTermsParseAndAreChecked) {
  const std::vector<platform::MetricTerm> t = platform::parse_metric(
      "link.t0-s3.a2b.ecn_mark_ratio + 0.5*nic.t1h2.transport.rx_max_ood + jobs.goodput_gbps");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].kind, platform::MetricTerm::Kind::kEcnRatio);
  EXPECT_EQ(t[0].link, "t0-s3");
  EXPECT_EQ(t[0].dir, "a2b");
  EXPECT_EQ(t[1].kind, platform::MetricTerm::Kind::kCounter);
  EXPECT_EQ(t[1].counter, "nic.t1h2.transport.rx_max_ood");
  EXPECT_EQ(t[1].factor, 0.5);
  EXPECT_EQ(t[2].kind, platform::MetricTerm::Kind::kGoodput);
  EXPECT_THROW(platform::parse_metric("link.t0-s3.up.ecn_mark_ratio"), std::invalid_argument);
  EXPECT_THROW(platform::parse_metric("nic.t1h2"), std::invalid_argument);
  auto metric = [](const std::string& expr) {
    return std::string(kTestbed) + "  m: " + expr + "\n";
  };
  EXPECT_EQ(
      error_of(metric("link.t0-s3.a2b.ecn_mark_ratio + nic.t1h2.mac.ce_rx + jobs.goodput_gbps")),
      "");
  std::string err = error_of(metric("link.t0-s9.a2b.ecn_mark_ratio"));
  EXPECT_NE(err.find("unknown link 't0-s9'"), std::string::npos) << err;
  err = error_of(metric("link.t0h0-t0.a2b.ecn_mark_ratio"));
  EXPECT_NE(err.find("link 't0h0-t0' a2b is sent by host 't0h0'"), std::string::npos) << err;
  err = error_of(metric("nic.t9h9.mac.ce_rx"));
  EXPECT_NE(err.find("names unknown host 't9h9'"), std::string::npos) << err;
  // The windowed form is checked like the whole-run one, and reads sampled
  // counters inside the run.
  EXPECT_EQ(error_of(metric("ecn_mark_ratio(t0-s3.a2b,0s,1ms)")), "");
  err = error_of(metric("ecn_mark_ratio(t0-s9.a2b,0s,1ms)"));
  EXPECT_NE(err.find("unknown link 't0-s9'"), std::string::npos) << err;
  err = error_of(metric("ecn_mark_ratio(t0h0-t0.a2b,0s,1ms)"));
  EXPECT_NE(err.find("is sent by host 't0h0'"), std::string::npos) << err;
  err = error_of(metric("ecn_mark_ratio(t0-s3.a2b,0s,1ms)") + "sample_interval: 0s\n");
  EXPECT_NE(err.find("sample_interval is 0"), std::string::npos) << err;
  err = error_of(metric("ecn_mark_ratio(t0-s3.a2b,0s,100s)"));
  EXPECT_NE(err.find("ends after end_time"), std::string::npos) << err;
}

TEST(FabricScenario, HostsJobsLinksAndMetricsAreCheckedAgainstTheFabric) {
  std::string err = error_of(replaced(kTestbed, "{name: t1h2, kind: modeled}", "{name: h9}"));
  EXPECT_NE(err.find("host 'h9' is not a host of the fabric"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "server: t1h2", "server: t2h0"));
  EXPECT_NE(err.find("unknown host 't2h0'"), std::string::npos) << err;
  err = error_of(std::string(kTestbed) + "links:\n  - {name: wire, a: t0h0, b: t1h0}\n");
  EXPECT_NE(err.find("either 'links' or 'fabric'"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "link.t0-s0.a2b", "link.t0-s5.a2b"));
  EXPECT_NE(err.find("metric 'up0' names unknown link 't0-s5'"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "link.t0-s0.a2b", "link.t0-s0.up"));
  EXPECT_NE(err.find("link.<link>.<a2b|b2a>.avg_gbps"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "w.4096.bw_gbps +", "w.4096.bw_gbps + +"));
  EXPECT_NE(err.find("empty term"), std::string::npos) << err;
  err = error_of(replaced(kTestbed, "w.4096.bw_gbps +", "w.8192.bw_gbps +"));
  EXPECT_NE(err.find("job 'w' has no size 8192"), std::string::npos) << err;
}

TEST(FabricScenario, QemuHostsInAFabricMustShareOneSlash24) {
  // Guests reach each other on their own network with a /24 mask.
  const std::string guests = replaced(kExplicit, "jobs:", R"(hosts:
  - {name: a, kind: qemu, run: "true"}
  - {name: b, kind: qemu, run: "true"}
jobs:)");
  const std::string err = error_of(guests);
  EXPECT_NE(err.find("qemu hosts 'a' and 'b' are not in one /24 (10.9.0.2)"), std::string::npos)
      << err;
  const ScenarioConfig ok =
      load(replaced(replaced(guests, "ip: 10.9.0.2", "ip: 10.0.0.9"),
                    "  - {name: w, app: write_bw, client: a, server: b, sizes: [4KiB]}\n", ""));
  const auto hosts = ok.effective_hosts();
  ASSERT_EQ(hosts.size(), 2u);
  EXPECT_EQ(hosts[0].kind, "qemu");
  EXPECT_EQ(hosts[1].run, "true");
  EXPECT_TRUE(ok.has_qemu_hosts());
}

TEST(FabricScenario, MetricExpressionsParseIntoTerms) {
  const auto terms = platform::parse_metric(" a.64.bw_gbps +link.x-y.b2a.avg_gbps + b.c.1.t_p99 ");
  ASSERT_EQ(terms.size(), 3u);
  EXPECT_EQ(terms[0].kind, platform::MetricTerm::Kind::kJob);
  EXPECT_EQ(terms[0].job, "a");
  EXPECT_EQ(terms[0].size, "64");
  EXPECT_EQ(terms[1].kind, platform::MetricTerm::Kind::kLink);
  EXPECT_EQ(terms[1].link, "x-y");
  EXPECT_EQ(terms[1].dir, "b2a");
  EXPECT_EQ(terms[2].job, "b");
  EXPECT_EQ(terms[2].size, "c.1");  // sizes are checked against the job later
  EXPECT_THROW(platform::parse_metric("a.64 bw"), std::invalid_argument);
  EXPECT_THROW(platform::parse_metric("nodots"), std::invalid_argument);
  const auto model =
      platform::parse_metric("model.mprdma.extra_state_bytes + model.irn.extra_state_bytes");
  ASSERT_EQ(model.size(), 2u);
  EXPECT_EQ(model[0].kind, platform::MetricTerm::Kind::kModelState);
  EXPECT_EQ(model[0].engine, "mprdma");
  EXPECT_EQ(model[1].engine, "irn");
}

TEST(FabricScenario, ShippedFabricScenariosValidate) {
  const char* src = std::getenv("MPRDMA_SOURCE_DIR");
  const ScenarioConfig cfg = platform::load_scenario(std::string(src ? src : ".") +
                                                     "/scenarios/fabric/testbed-permutation.yaml");
  EXPECT_EQ(cfg.fabric.topology, FabricConfig::Kind::mp_rdma_testbed);
  for (const char* m : {"aggregate_goodput_gbps", "path_load_gbps.0", "path_load_gbps.1",
                        "path_load_gbps.2", "path_load_gbps.3"})
    EXPECT_TRUE(cfg.metrics.count(m)) << m;
  EXPECT_EQ(platform::parse_metric(cfg.metrics.at("aggregate_goodput_gbps")).size(), 5u);
  const ScenarioConfig d1 = platform::load_scenario(std::string(src ? src : ".") +
                                                    "/scenarios/fabric/clos-deadlock.yaml");
  EXPECT_EQ(d1.fabric.topology, FabricConfig::Kind::leaf_spine);
  EXPECT_EQ(d1.fabric.events.size(), 2u);
  EXPECT_TRUE(d1.fabric.reroute);
}

class FabricModule : public test::SimTest {
 protected:
  void TearDown() override { fabric.reset(); }
  void build(FabricConfig cfg, uint64_t seed = 1) {
    fabric.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(seed);
    fabric = std::make_unique<Fabric>("fabric", cfg, *env);
  }
  static FabricConfig testbed() {
    FabricConfig c;
    c.topology = FabricConfig::Kind::mp_rdma_testbed;
    return c;
  }
  // The spine each of the five permutation flows t0h<i> -> t1h<i> takes.
  std::vector<std::string> spines_of_permutation(uint16_t sport) const {
    std::vector<std::string> out;
    const Topology& t = fabric->topology();
    for (int i = 0; i < 5; ++i) {
      FiveTuple ft;
      ft.src_ip = fabric->hosts()[i].ip;
      ft.dst_ip = fabric->hosts()[5 + i].ip;
      ft.sport = sport;
      const std::vector<Hop> hops = fabric->path_of(ft);
      EXPECT_EQ(hops.size(), 4u);
      out.push_back(t.nodes()[t.links()[hops[1].link].node[1]].name);
    }
    return out;
  }
  std::unique_ptr<Fabric> fabric;
};

TEST_F(FabricModule, GivesThePlatformEveryHostsLinkSideAndAddress) {
  build(testbed());
  ASSERT_EQ(fabric->hosts().size(), 10u);
  const Fabric::HostPort& h = fabric->hosts()[6];
  EXPECT_EQ(h.name, "t1h1");
  EXPECT_EQ(ip_text(h.ip), "10.0.0.7");
  EXPECT_EQ(mac_text(h.mac), "02:00:00:00:00:07");
  EXPECT_EQ(h.link, fabric->link("t1h1-t1"));
  EXPECT_EQ(h.side, 0);
  EXPECT_EQ(h.rate.bps, 40e9);
  EXPECT_EQ(fabric->links().size(), 18u);
  ASSERT_NE(fabric->switch_named("t0"), nullptr);
  EXPECT_EQ(fabric->switch_named("t0")->ports(), 9);
  EXPECT_EQ(fabric->switch_named("s3")->ports(), 2);
  EXPECT_EQ(fabric->switch_named("t0h0"), nullptr);
  EXPECT_EQ(fabric->link("nope"), nullptr);
  ASSERT_EQ(fabric->paths().size(), 4u);
  const nlohmann::json d = fabric->describe(env->stats, 0);
  EXPECT_EQ(d["hosts"][6]["ip"], "10.0.0.7");
  EXPECT_EQ(d["switches"][0]["ports"][5]["peer"], "s0");
  EXPECT_EQ(d["paths"][2]["links"][0], "t0-s2");
}

TEST_F(FabricModule, PathOfAgreesWithTheSwitchesEcmpPick) {
  build(testbed());
  const Topology& t = fabric->topology();
  Switch* t0 = fabric->switch_named("t0");
  FiveTuple ft;
  ft.src_ip = fabric->hosts()[0].ip;
  ft.dst_ip = fabric->hosts()[9].ip;
  std::set<int> uplinks;
  for (uint16_t sport = 0xC000; sport < 0xC000 + 64; ++sport) {
    ft.sport = sport;
    const std::vector<Hop> hops = fabric->path_of(ft);
    ASSERT_EQ(hops.size(), 4u);
    const std::vector<int> group{5, 6, 7, 8};
    const int port = t0->ecmp_pick(ft.src_ip, ft.dst_ip, ft.proto, ft.sport, ft.dport, group);
    EXPECT_EQ(hops[1].link, t.nodes()[t.find_node("t0")].port_link[port]);
    uplinks.insert(hops[1].link);
  }
  EXPECT_EQ(uplinks.size(), 4u);  // 64 source ports reach every spine
}

TEST_F(FabricModule, TheScenarioSeedMovesPathChoicesAndFixesThem) {
  std::set<std::vector<std::string>> assignments;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    build(testbed(), seed);
    const auto a = spines_of_permutation(0xC123);
    build(testbed(), seed);
    EXPECT_EQ(spines_of_permutation(0xC123), a) << "seed " << seed << " is not repeatable";
    assignments.insert(a);
  }
  EXPECT_GT(assignments.size(), 4u);
}

TEST_F(FabricModule, EventsAreScheduledOnTheirLinks) {
  FabricConfig c = testbed();
  LinkEventConfig down;
  down.at = core::Duration::from_us(10);
  down.link = "t0-s2";
  down.action = LinkEventConfig::Action::down;
  down.dir = LinkEventConfig::Dir::a2b;
  LinkEventConfig slow;
  slow.at = core::Duration::from_us(20);
  slow.link = "t1-s3";
  slow.action = LinkEventConfig::Action::rate;
  slow.value = "1Gbps";
  c.events = {down, slow};
  build(c);
  sc_core::sc_start(sc_core::sc_time(15, sc_core::SC_US));
  EXPECT_FALSE(fabric->link("t0-s2")->is_up(0));
  EXPECT_TRUE(fabric->link("t0-s2")->is_up(1));
  EXPECT_EQ(fabric->link("t1-s3")->rate(0).bps, 40e9);
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_US));
  EXPECT_EQ(fabric->link("t1-s3")->rate(0).bps, 1e9);
  EXPECT_EQ(fabric->link("t1-s3")->rate(1).bps, 1e9);
}

TEST_F(FabricModule, EcnOverridesReachTheSwitchPortSendingIntoThatDirection) {
  FabricConfig c = testbed();
  EcnOverride up;
  up.link = "t0-s3";
  up.dir = "a2b";  // sent by t0 port 8 (hosts 0..4, spines 5..8)
  up.kmin = up.kmax = "240KB";
  EcnOverride down;
  down.link = "t1-s2";
  down.dir = "b2a";  // sent by spine s2 port 1 (leaf t1)
  down.pmax = "0.25";
  down.kmax = "200KB";
  c.ecn_overrides = {up, down};
  build(c);
  EXPECT_EQ(fabric->switch_named("t0")->port_ecn(8).kmin.n, 240000u);
  EXPECT_EQ(fabric->switch_named("t0")->port_ecn(7).kmin.n, 20u * 1024);
  EXPECT_EQ(fabric->switch_named("s3")->port_ecn(0).kmin.n, 20u * 1024);  // the other direction
  EXPECT_EQ(fabric->switch_named("s2")->port_ecn(1).pmax, 0.25);
  EXPECT_EQ(fabric->switch_named("s2")->port_ecn(1).kmax.n, 200000u);
  EXPECT_EQ(fabric->switch_named("s2")->port_ecn(1).kmin.n, 20u * 1024);
  EXPECT_EQ(fabric->switch_named("s2")->port_ecn(0).pmax, 1.0);
  const auto [sw, port] = fabric->egress_port("t0-s3", "a2b");
  EXPECT_EQ(sw, fabric->switch_named("t0"));
  EXPECT_EQ(port, 8);
  EXPECT_EQ(fabric->egress_port("t0h0-t0", "a2b").first, nullptr);  // a host sends
  EXPECT_EQ(fabric->egress_port("t0h0-t0", "b2a").second, 0);
  EXPECT_EQ(fabric->egress_port("nope", "a2b").first, nullptr);
}

TEST_F(FabricModule, BadConfigurationThrowsNamingTheProblem) {
  FabricConfig c = testbed();
  c.sw.pfc.xoff = core::Bytes{64 << 20};
  try {
    build(c);
    ADD_FAILURE() << "accepted xoff above the buffer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("switch.pfc.xoff"), std::string::npos) << e.what();
  }
  // What only the Switch checks still comes out naming the switch.
  c = testbed();
  c.sw.dt_alpha = 0;
  try {
    build(c);
    ADD_FAILURE() << "accepted dt_alpha 0";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("switch t0: dt_alpha"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mprdma::fabric
