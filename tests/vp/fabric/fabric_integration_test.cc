// Modeled hosts over a fabric, end to end: a link that fails and recovers
// carries traffic again, a rate change shows in transfer time, and the
// switches forward each flow over the path Fabric::path_of predicts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/files.h"
#include "support/sim_test.h"
#include "vp/core/results.h"
#include "vp/platform/platform.h"
#include "vp/platform/report.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

using test::temp_path;

ScenarioConfig load_text(const std::string& text) {
  const std::string path = temp_path(".yaml");
  std::ofstream(path) << text;
  return load_scenario(path);
}

uint64_t counter(const nlohmann::json& doc, const std::string& link, const std::string& stat) {
  return doc["links"][link][stat].get<uint64_t>();
}

class FabricRun : public test::SimTest {
 protected:
  // Runs `cfg`; returns the results document. Jobs must all finish.
  nlohmann::json run(const ScenarioConfig& cfg, const std::string& out_dir = "") {
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    env->out_dir = out_dir;
    if (!out_dir.empty()) std::filesystem::create_directories(out_dir);
    Platform p(cfg, *env);
    EXPECT_TRUE(p.run()) << "jobs did not finish before end_time";
    for (const JobOutcome& o : p.outcomes()) {
      EXPECT_TRUE(o.finished) << o.name;
      for (const host::SizeResult& r : o.results) {
        EXPECT_TRUE(r.error.empty()) << o.name << ": " << r.error;
        EXPECT_TRUE(r.data_ok) << o.name << ": data check failed";
      }
    }
    outcomes = p.outcomes();
    return results_document(p, *env, "inline");
  }
  double bw(const std::string& job) const {
    for (const JobOutcome& o : outcomes)
      if (o.name == job && !o.results.empty()) return o.results[0].bw_gbps;
    ADD_FAILURE() << "no result for " << job;
    return 0;
  }
  const JobOutcome& outcome(const std::string& job) const {
    for (const JobOutcome& o : outcomes)
      if (o.name == job) return o;
    throw std::out_of_range(job);
  }
  std::vector<JobOutcome> outcomes;
};

// Two modeled hosts through one switch. The link between the switch and
// h1 fails at 1 ms and comes back at 2 ms; "across" is writing when it
// fails, so its packets and ACKs are lost until the link returns and its
// go-back-N timeout (timeout 8: 1.05 ms) resends them; "after" starts once
// the link is back.
const char* kFailover = R"(name: failover
seed: 1
end_time: 50ms
fabric:
  topology: explicit
  nodes:
    - {name: h0}
    - {name: h1}
    - {name: sw, kind: switch}
  links:
    - {a: h0, b: sw}
    - {a: h1, b: sw}
  switch: {pfc: {lossless_mask: 1}}
  events:
    - {at: 1ms, link: h1-sw, action: down}
    - {at: 2ms, link: h1-sw, action: up}
jobs:
  - {name: before, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 200,
     after_previous: false}
  - {name: across, app: write_bw, client: h0, server: h1, sizes: [64KiB], iterations: 200,
     start: 900us, after_previous: false, timeout: 8}
  - {name: after, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 200,
     start: 8ms, after_previous: false}
metrics:
  down_link_b2a_gbps: link.h1-sw.b2a.avg_gbps
)";

TEST_F(FabricRun, ALinkThatFailsAndRecoversCarriesTrafficAgain) {
  const nlohmann::json doc = run(load_text(kFailover));
  // "before" ended before the failure, "after" started after the repair,
  // and "across" could only end after the repair.
  EXPECT_LT(outcome("before").end_s, 1e-3);
  EXPECT_GE(outcome("after").start_s, 8e-3);
  EXPECT_GT(outcome("across").end_s, 2e-3);
  // Frames were lost while the link was down, in flight or sent...
  const uint64_t lost = counter(doc, "h1-sw", "b2a.down_drops");
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(counter(doc, "h1-sw", "b2a.drops"), lost);
  // ... and the sender had to resend.
  EXPECT_GT(doc["nics"]["h0"]["requester.timeouts"].get<uint64_t>(), 0u);
  // Both full-speed jobs ran near the line rate over the switch.
  EXPECT_GT(bw("before"), 25.0);
  EXPECT_GT(bw("after"), 25.0);
  // The repaired link carried every byte of "after": at least its payload.
  EXPECT_GT(counter(doc, "h1-sw", "b2a.tx_bytes"), 3u * 200u * 4096u);
  ASSERT_TRUE(doc.contains("fabric"));
  EXPECT_EQ(doc["fabric"]["hosts"][1]["link"], "h1-sw");
  EXPECT_TRUE(doc["metrics"].contains("down_link_b2a_gbps"));
}

// Back to back: the link drops from 40 to 1 Gb/s at 1 ms, between two
// otherwise identical transfers.
const char* kDegrade = R"(name: degrade
seed: 1
end_time: 100ms
fabric:
  topology: back_to_back
  events:
    - {at: 1ms, link: h0-h1, action: rate, value: 1Gbps}
jobs:
  - {name: fast, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 100}
  - {name: slow, app: write_bw, client: h0, server: h1, sizes: [4KiB], iterations: 100,
     start: 1500us}
metrics:
  both: fast.4096.bw_gbps + slow.4096.bw_gbps
  wire_a2b: link.h0-h1.a2b.avg_gbps
)";

TEST_F(FabricRun, ARateChangeShowsInTransferTime) {
  const nlohmann::json doc = run(load_text(kDegrade));
  EXPECT_LT(outcome("fast").end_s, 1e-3);
  // 4 KiB WRITEs carry ~93 % of the wire as payload.
  EXPECT_GT(bw("fast"), 30.0);
  EXPECT_LT(bw("fast"), 40.0);
  EXPECT_GT(bw("slow"), 0.85);
  EXPECT_LT(bw("slow"), 1.0);
  const double seconds_fast = outcome("fast").results[0].seconds;
  const double seconds_slow = outcome("slow").results[0].seconds;
  EXPECT_NEAR(seconds_slow / seconds_fast, 40.0, 4.0);
  // The sum metric adds its terms.
  EXPECT_NEAR(doc["metrics"]["both"].get<double>(), bw("fast") + bw("slow"), 1e-9);
  // Link average over the active time: all the WRITE traffic, first start
  // to last end.
  const double active = doc["fabric"]["active_time_s"].get<double>();
  EXPECT_NEAR(active, outcome("slow").end_s - outcome("fast").start_s, 1e-12);
  EXPECT_NEAR(doc["metrics"]["wire_a2b"].get<double>(),
              counter(doc, "h0-h1", "a2b.tx_bytes") * 8.0 / active / 1e9, 1e-9);
}

// Two senders into one receiver through one switch (an 80 Gb/s incast on
// a 40 Gb/s port; go-back-N without rate control keeps the queue standing
// under PFC): the switch's ECN is a step at 20 KB, so every frame joining
// the standing queue is marked; an override of the congested port (sw's
// egress into sw-r, b2a) moves the step to 240 KB, above anything PFC
// lets build up there (XOFF 96 KiB per ingress), so nothing is marked. The
// metric terms ecn_mark_ratio, nic.<host>.<counter> and jobs.goodput_gbps
// read the switch and NIC counters and the jobs' bytes.
const char* kIncastEcn = R"(name: incast-ecn
seed: 1
end_time: 50ms
fabric:
  topology: explicit
  nodes:
    - {name: a}
    - {name: b}
    - {name: r}
    - {name: sw, kind: switch}
  links:
    - {a: a, b: sw}
    - {a: b, b: sw}
    - {a: r, b: sw}
  switch: {ecn: {kmin: 20KB, kmax: 20KB}, pfc: {lossless_mask: 1}}
jobs:
  - {name: x, app: write_bw, client: a, server: r, sizes: [64KiB], iterations: 100, after_previous: false}
  - {name: y, app: write_bw, client: b, server: r, sizes: [64KiB], iterations: 100, after_previous: false}
metrics:
  ratio: link.r-sw.b2a.ecn_mark_ratio
  ce_rx: nic.r.mac.ce_rx
  goodput: jobs.goodput_gbps
)";

// The windowed term reads the same counters through their sampled rates:
// two windows that split a span combine, weighted by the frames judged in
// each, to the ratio over the whole span, which (a queue standing above the
// step throughout) is close to the run's; a window the run did not sample
// in full (the jobs end at ~2.7 ms) leaves the metric out.
TEST_F(FabricRun, TheWindowedEcnRatioSplitsTheRatioByTime) {
  std::string text = kIncastEcn;
  text +=
      "  span: ecn_mark_ratio(r-sw.b2a,0s,2ms)\n"
      "  early: ecn_mark_ratio(r-sw.b2a,0s,500us)\n"
      "  late: ecn_mark_ratio(r-sw.b2a,500us,2ms)\n"
      "  early_judged: avg(switch.sw.port2.ecn_capable_mps,0s,500us)\n"
      "  late_judged: avg(switch.sw.port2.ecn_capable_mps,500us,2ms)\n"
      "  beyond: ecn_mark_ratio(r-sw.b2a,1ms,40ms)\n"
      "sample_interval: 100us\n";
  const nlohmann::json doc = run(load_text(text));
  const nlohmann::json& m = doc["metrics"];
  const double whole = m["ratio"].get<double>();
  ASSERT_GT(whole, 0.5);
  const double span = m["span"].get<double>();
  EXPECT_GT(span, 0.5);
  EXPECT_NEAR(span, whole, 0.05);
  // Rates in M/s averaged over the window: frames judged = rate * span.
  const double je = m["early_judged"].get<double>() * 1e6 * 500e-6;
  const double jl = m["late_judged"].get<double>() * 1e6 * 1.5e-3;
  ASSERT_GT(je, 0);
  ASSERT_GT(jl, 0);
  EXPECT_LT(je + jl, 2 * 100 * 64);  // the jobs run past 2 ms
  EXPECT_NEAR((m["early"].get<double>() * je + m["late"].get<double>() * jl) / (je + jl), span,
              1e-9);
  EXPECT_FALSE(m.contains("beyond"));
}

// With run_at the jobs are set up first and send from run_at: the active
// time (and so jobs.goodput_gbps) counts from there, not from the set-up.
TEST_F(FabricRun, ActiveTimeStartsAtRunAt) {
  std::string text = kIncastEcn;
  for (const char* job : {"name: x,", "name: y,"})
    text.replace(text.find(job), std::string(job).size(), std::string(job) + " run_at: 2ms,");
  const nlohmann::json doc = run(load_text(text));
  EXPECT_EQ(outcome("x").start_s, 0.0);
  EXPECT_NEAR(doc["flows"]["x"]["run_from_s"].get<double>(), 2e-3, 1e-15);
  const double end = std::max(outcome("x").end_s, outcome("y").end_s);
  const double active = doc["fabric"]["active_time_s"].get<double>();
  EXPECT_NEAR(active, end - 2e-3, 1e-12);
  // Two senders into one 40 Gb/s port: the payload rate over the active
  // time is near the port's, as without run_at.
  EXPECT_NEAR(doc["metrics"]["goodput"].get<double>(), 2 * 100 * 65536 * 8.0 / active / 1e9, 1e-9);
  EXPECT_GT(doc["metrics"]["goodput"].get<double>(), 30.0);
}

TEST_F(FabricRun, AnEcnOverrideSetsTheMarkingOfItsPortAndTheRatioTermReadsIt) {
  ScenarioConfig cfg = load_text(kIncastEcn);
  nlohmann::json doc = run(cfg);
  const nlohmann::json& sw = doc["switches"]["sw"];
  const double marks = sw["port2.ecn_marks"].get<double>();
  const double judged = sw["port2.ecn_capable"].get<double>();
  EXPECT_EQ(judged, 2 * 100 * 64);  // every data frame (and no ACK) goes out of port 2, once
  EXPECT_GT(marks / judged, 0.5);   // a standing queue above the 20 KB step
  EXPECT_NEAR(doc["metrics"]["ratio"].get<double>(), marks / judged, 1e-12);
  EXPECT_EQ(doc["metrics"]["ce_rx"].get<double>(), doc["nics"]["r"]["mac.ce_rx"].get<double>());
  EXPECT_EQ(doc["metrics"]["ce_rx"].get<double>(), marks);
  // Aggregate goodput: all payload over first start to last end, below the
  // 40 Gb/s port and at most the sum of the two jobs' own rates.
  const double active = doc["fabric"]["active_time_s"].get<double>();
  EXPECT_NEAR(doc["metrics"]["goodput"].get<double>(), 2 * 100 * 65536 * 8.0 / active / 1e9, 1e-9);
  EXPECT_LT(doc["metrics"]["goodput"].get<double>(), 40.0);
  EXPECT_LE(doc["metrics"]["goodput"].get<double>(), bw("x") + bw("y") + 1e-9);

  fabric::EcnOverride o;
  o.link = "r-sw";
  o.dir = "b2a";
  o.kmin = o.kmax = "240KB";
  cfg.fabric.ecn_overrides = {o};
  doc = run(cfg);
  EXPECT_EQ(doc["switches"]["sw"]["port2.ecn_marks"].get<double>(), 0);
  EXPECT_EQ(doc["switches"]["sw"]["port2.ecn_capable"].get<double>(), 2 * 100 * 64);
  EXPECT_EQ(doc["metrics"]["ratio"].get<double>(), 0.0);
  EXPECT_EQ(doc["metrics"]["ce_rx"].get<double>(), 0.0);
  // The other ports keep the switch's ECN (their queues are empty).
  EXPECT_EQ(doc["switches"]["sw"]["port0.ecn_marks"].get<double>(), 0);
}

// The testbed permutation, shortened: every data frame captured on a
// ToR0 uplink belongs to a flow whose predicted path (Fabric::path_of, the
// switches' own ECMP picks) uses that uplink.
TEST_F(FabricRun, SwitchesForwardEachFlowOnItsPredictedPath) {
  const char* src = std::getenv("MPRDMA_SOURCE_DIR");
  ScenarioConfig cfg =
      load_scenario(std::string(src ? src : ".") + "/scenarios/fabric/testbed-permutation.yaml");
  for (host::JobConfig& j : cfg.jobs) j.iterations = 20;
  cfg.fabric.pcap = "t0-s0, t0-s1, t0-s2, t0-s3";
  cfg.fabric.link.pcap_snaplen = core::Bytes{64};
  const std::string dir = temp_path("_out");
  run(cfg, dir);  // the captures are complete once the links are destroyed

  // What each uplink carried up (a2b): frames from t0's hosts.
  std::map<std::string, std::vector<fabric::FiveTuple>> captured;
  size_t frames = 0;
  for (int s = 0; s < 4; ++s) {
    const std::string link = "t0-s" + std::to_string(s);
    std::ifstream in(dir + "/" + link + ".pcap", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    size_t off = 24;
    while (off + 16 <= bytes.size()) {
      uint32_t incl;
      std::memcpy(&incl, bytes.data() + off + 8, 4);
      const auto* fr = reinterpret_cast<const unsigned char*>(bytes.data() + off + 16);
      off += 16 + incl;
      if (incl < 38 || fr[12] != 0x08 || fr[13] != 0x00) continue;  // IPv4 only
      fabric::FiveTuple ft;
      ft.src_ip = uint32_t(fr[26]) << 24 | uint32_t(fr[27]) << 16 | uint32_t(fr[28]) << 8 | fr[29];
      ft.dst_ip = uint32_t(fr[30]) << 24 | uint32_t(fr[31]) << 16 | uint32_t(fr[32]) << 8 | fr[33];
      ft.proto = fr[23];
      ft.sport = static_cast<uint16_t>(fr[34] << 8 | fr[35]);
      ft.dport = static_cast<uint16_t>(fr[36] << 8 | fr[37]);
      if ((ft.src_ip & 0xff) > 5) continue;  // from t1: the downward direction
      captured[link].push_back(ft);
      ++frames;
    }
  }
  EXPECT_GE(frames, 5u * 20u * 64u);  // every WRITE packet crossed an uplink

  // The same fabric and seed again: the switches' hash seeds repeat.
  core::reset_kernel();
  env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
  fabric::Fabric f("fabric", cfg.fabric, *env);
  std::set<std::string> flows;
  for (const auto& [link, tuples] : captured)
    for (const fabric::FiveTuple& ft : tuples) {
      const std::vector<fabric::Hop> hops = f.path_of(ft);
      ASSERT_EQ(hops.size(), 4u);
      EXPECT_EQ(f.topology().links()[hops[1].link].name, link)
          << fabric::ip_text(ft.src_ip) << " sport " << ft.sport;
      flows.insert(fabric::ip_text(ft.src_ip) + " " + link);
    }
  EXPECT_EQ(flows.size(), 5u);  // each flow on exactly one uplink
}

}  // namespace
}  // namespace mprdma::platform
