// Integration: the out-of-order transport engines (nic.transport mprdma and
// irn) on the MP-RDMA testbed fabric (2 leaves, 4 spines, 40 Gb/s, PFC on)
// with 1 % random loss on the t0 -> spine 1..3 uplinks (data direction), as
// in scenarios/mp-rdma/m2-lossy-paths.yaml. One connection t0h0 -> t1h0 runs
// a write_bw of 64 KiB messages, then a send_bw of a multi-MTU size and of a
// size that is not a multiple of the MTU. Every job must complete with its
// data checked byte for byte, and the loss must really have been recovered
// (retransmissions counted). READ and atomics on mprdma complete under loss
// (atomics exactly once); mprdma with dcqcn is rejected by validation;
// the same scenario twice gives the same counters.
//
// perftest offers no WRITE-with-immediate application, so the tail opcode
// RDMA_WRITE_ONLY_WITH_IMMEDIATE is not exercised here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mprdma/hw.h"
#include "support/files.h"
#include "support/log_capture.h"
#include "support/sim_test.h"
#include "vp/core/config.h"
#include "vp/platform/platform.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

constexpr uint64_t kMtu = 1024;

// Jobs: a (write_bw 64 KiB), then b (send_bw 8 KiB and 5000 B).
constexpr int64_t kWriteIters = 60;
constexpr int64_t kSendIters = 150;
const std::vector<uint64_t> kSendSizes = {8192, 5000};

const std::string kDefaultJobs =
    "\n  - {name: a, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], iterations: " +
    std::to_string(kWriteIters) +
    ", timeout: 10}\n"
    "  - {name: b, app: send_bw, client: t0h0, server: t1h0, sizes: [8KiB, 5000], iterations: " +
    std::to_string(kSendIters) + ", timeout: 10}\n";

std::string scenario_text(const std::string& transport, const std::string& jobs, int seed = 1,
                          const std::string& extra_nic = "") {
  return "name: ooo-transport\n"
         "seed: " +
         std::to_string(seed) +
         "\n"
         "end_time: 60ms\n"
         "nic:\n"
         "  mtu: 1024\n"
         "  transport: " +
         transport.substr(0, transport.find('_')) + "\n" +
         // "mprdma_lockstep": MP-RDMA with the RTL receiver in lockstep.
         (transport.find('_') == std::string::npos
              ? std::string()
              : "  transport_impl: " + transport.substr(transport.find('_') + 1) + "\n") +
         extra_nic +
         "fabric:\n"
         "  topology: mp_rdma_testbed\n"
         "  leaves: 2\n"
         "  spines: 4\n"
         "  hosts_per_leaf: 2\n"
         "  access_rate: 40Gbps\n"
         "  uplink_rate: 40Gbps\n"
         "  link: {delay: 200ns}\n"
         "  switch:\n"
         "    ecn: {enabled: true, kmin: 20KB, kmax: 20KB, pmax: 1.0}\n"
         "    pfc: {enabled: true, lossless_mask: 1}\n"
         "  events:\n"
         "    - {at: 0s, link: t0-s1, action: loss, value: \"0.01\", dir: a2b}\n"
         "    - {at: 0s, link: t0-s2, action: loss, value: \"0.01\", dir: a2b}\n"
         "    - {at: 0s, link: t0-s3, action: loss, value: \"0.01\", dir: a2b}\n"
         "jobs:" +
         jobs;
}

uint64_t packets_of(uint64_t size) { return (size + kMtu - 1) / kMtu; }

// fabric.events: 1 % loss on every ToR uplink, both ToRs, data direction
// (so requests, responses and ACKs are lost).
std::string lossy_uplinks() {
  std::string events;
  for (const char* t : {"t0", "t1"})
    for (int s = 0; s < 4; ++s)
      events += std::string("    - {at: 0s, link: ") + t + "-s" + std::to_string(s) +
                ", action: loss, value: \"0.01\", dir: a2b}\n";
  return events;
}

class OooTransport : public test::SimTest {
 protected:
  void TearDown() override { platform.reset(); }

  // Loads the scenario text and runs it to the end in a fresh kernel;
  // `edit` may change the loaded configuration first (what validation would
  // refuse in a file, a guest can still do).
  bool run(const std::string& text, const std::function<void(ScenarioConfig&)>& edit = {}) {
    ScenarioConfig cfg = load_scenario(test::write_temp("scenario.yaml", text));
    if (edit) edit(cfg);
    platform.reset();
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    platform = std::make_unique<Platform>(cfg, *env);
    return platform->run();
  }

  // A counter that must exist (0 for a missing one makes the test fail).
  uint64_t counter(const std::string& path) {
    const core::Counter* c = env->stats.find_counter(path);
    EXPECT_NE(c, nullptr) << "no counter " << path;
    return c ? c->value() : 0;
  }

  // Frames the lossy links dropped.
  uint64_t fabric_drops() {
    uint64_t n = 0;
    for (int s = 1; s <= 3; ++s) n += counter("link.t0-s" + std::to_string(s) + ".a2b.drops");
    return n;
  }

  std::map<std::string, uint64_t> all_counters() const {
    std::map<std::string, uint64_t> m;
    for (const auto& [path, c] : env->stats.counters()) m[path] = c->value();
    return m;
  }

  // Every job finished, every size ran without error and with its data
  // checked.
  void expect_jobs_ok() {
    ASSERT_TRUE(platform);
    const auto& jobs = platform->outcomes();
    ASSERT_EQ(jobs.size(), platform->config().jobs.size());
    for (size_t j = 0; j < jobs.size(); ++j) {
      const JobOutcome& o = jobs[j];
      SCOPED_TRACE("job " + o.name);
      EXPECT_TRUE(o.finished);
      ASSERT_EQ(o.results.size(), platform->config().jobs[j].sizes.size());
      for (const host::SizeResult& r : o.results) {
        EXPECT_EQ(r.error, "") << "size " << r.bytes;
        EXPECT_TRUE(r.data_ok) << "size " << r.bytes;
        EXPECT_EQ(r.iterations, static_cast<uint64_t>(platform->config().jobs[j].iterations));
        EXPECT_GT(r.bw_gbps, 0.0) << "size " << r.bytes;
      }
    }
    EXPECT_TRUE(platform->all_ok());
  }

  std::unique_ptr<Platform> platform;
};

class OooTransportLoss : public OooTransport, public ::testing::WithParamInterface<std::string> {};

TEST_P(OooTransportLoss, WriteAndSendCompleteWithCorrectDataDespiteLoss) {
  const std::string transport = GetParam();
  test::LogCapture log("nic.t0h0.transport=debug");
  ASSERT_TRUE(run(scenario_text(transport, kDefaultJobs))) << "a job did not finish";
  expect_jobs_ok();

  const uint64_t messages = kWriteIters + kSendIters * kSendSizes.size();
  uint64_t packets = kWriteIters * packets_of(65536);
  for (uint64_t s : kSendSizes) packets += kSendIters * packets_of(s);

  // The receiving NIC completed every message once, and its requester side
  // sent nothing (the data flows one way).
  EXPECT_EQ(counter("nic.t1h0.responder.messages"), messages);
  EXPECT_EQ(counter("nic.t1h0.requester.packets"), 0u);
  // No RECV was ever missing: the server keeps rx_depth RECVs posted.
  EXPECT_EQ(counter("nic.t1h0.responder.rnr_drops"), 0u);
  // The fabric did drop packets of the connection (t0h0's data is the only
  // traffic on the t0 -> spine links)...
  const uint64_t drops = fabric_drops();
  ASSERT_GT(drops, 0u) << "no loss: the connection's paths missed the lossy links";
  const uint64_t sent = counter("nic.t0h0.requester.packets");
  const uint64_t retx = counter("nic.t0h0.requester.retransmits");
  EXPECT_GT(sent, packets);
  // ...and the sender recovered them by retransmission, each at least once.
  EXPECT_GE(retx, drops);
  EXPECT_EQ(sent, packets + retx) << "every packet beyond the first copies is a retransmission";
  RecordProperty("retransmits", std::to_string(retx));

  if (transport.rfind("mprdma", 0) == 0) {
    const std::string tx = "nic.t0h0.transport.";
    const std::string rx = "nic.t1h0.transport.";
    if (transport == "mprdma_lockstep") {
      // Every decision went through the RTL receiver (and matched the
      // golden model's, or the run would have stopped), which was clocked
      // only while an operation was in it: two cycles each.
      const uint64_t decided = counter(rx + "rx_placed") + counter(rx + "rx_duplicates") +
                               counter(rx + "rx_overflow_drops") + counter(rx + "rx_sync_drops");
      EXPECT_GT(counter(rx + "rtl.operations"), decided);
      EXPECT_EQ(counter(rx + "rtl.cycles"), 2 * counter(rx + "rtl.operations"));
    }
    EXPECT_GT(
        counter(tx + "retransmits") + counter(tx + "early_retransmits") + counter(tx + "rtos"), 0u);
    EXPECT_GT(counter(tx + "recoveries") + counter(tx + "rtos"), 0u);
    // The receiver placed each distinct packet once and completed every
    // message once.
    EXPECT_EQ(counter(rx + "rx_messages"), messages);
    EXPECT_EQ(counter(rx + "rx_placed"), packets);
    // Every overflow drop is NACKed (synchronise drops may share a NACK).
    const uint64_t overflow = counter(rx + "rx_overflow_drops");
    EXPECT_GE(counter(rx + "rx_nacks"), overflow);
    // The sender saw every NACK the receiver sent (ACKs cross no lossy
    // link), and only those.
    EXPECT_EQ(counter(tx + "nacks"), counter(rx + "rx_nacks"));
    // No synchronise flag is set by perftest.
    EXPECT_EQ(counter(rx + "rx_sync_drops"), 0u);
    EXPECT_EQ(counter(tx + "sync_waits"), 0u);
    // Each NIC runs one side of the connection.
    EXPECT_EQ(counter("nic.t0h0.transport.rx_placed"), 0u);
    EXPECT_EQ(counter("nic.t1h0.transport.acks"), 0u);
    // Loss recovery by NACK/SACK, not only by timeouts: at most a few RTOs.
    EXPECT_LT(counter(tx + "rtos"), retx);
    RecordProperty("overflow_drops", std::to_string(overflow));
  } else {
    // IRN's NIC-wide counters: the sender retransmitted what was lost (each
    // drop at least once), the receiver placed every packet once.
    const std::string tx = "nic.t0h0.transport.", rx = "nic.t1h0.transport.";
    EXPECT_GE(counter(tx + "retransmits"), drops);
    EXPECT_GT(counter(tx + "recoveries"), 0u);
    EXPECT_EQ(counter(rx + "rx_placed"), packets);
    EXPECT_EQ(counter(rx + "rx_drops"), 0u);  // BDP-FC keeps the sender within the bitmap
    EXPECT_EQ(counter("nic.t0h0.transport.rx_placed"), 0u);
  }
  // The engine's debug channel names each recovery and timeout.
  EXPECT_EQ(log.count(": recovery on "), counter("nic.t0h0.transport.recoveries"));
  EXPECT_GT(log.count(": recovery over"), 0u);
  if (transport == "irn")
    EXPECT_EQ(log.count(": timeout ("),
              counter("nic.t0h0.transport.rto_low") + counter("nic.t0h0.transport.rto_high"));
  else
    EXPECT_EQ(log.count(": RTO,"), counter("nic.t0h0.transport.rtos"));
}

INSTANTIATE_TEST_SUITE_P(Engines, OooTransportLoss,
                         ::testing::Values("mprdma", "irn", "mprdma_lockstep"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// SEND packets whose RECV is not posted yet are dropped and counted, and
// answered with an RNR NAK carrying the ACK trailer: the sender waits the
// QP's RNR timer (perftest's 0.64 ms) and resends from snd_una (MP-RDMA:
// its recovery walk; IRN: what is not SACKed), without a timeout.
TEST_P(OooTransportLoss, SendWithoutPostedRecvIsDroppedAndRecovered) {
  const std::string jobs = R"(
  - {name: s, app: send_bw, client: t0h0, server: t1h0, sizes: [3000], iterations: 200, rx_depth: 4, tx_depth: 64, timeout: 10}
)";
  ASSERT_TRUE(run(scenario_text(GetParam(), jobs))) << "the job did not finish";
  expect_jobs_ok();
  EXPECT_GT(counter("nic.t1h0.responder.rnr_drops"), 0u);
  EXPECT_EQ(counter("nic.t1h0.responder.messages"), 200u);
  EXPECT_EQ(counter("nic.t1h0.responder.rnr_naks"), counter("nic.t1h0.responder.rnr_drops"));
  EXPECT_GT(counter("nic.t0h0.transport.rnr_waits"), 0u);
  EXPECT_LT(counter("nic.t0h0.transport.rnr_waits"), counter("nic.t1h0.responder.rnr_naks"));
  if (GetParam() == "mprdma") {
    EXPECT_EQ(counter("nic.t0h0.transport.rnr_nacks"), counter("nic.t1h0.responder.rnr_naks"));
    EXPECT_EQ(counter("nic.t0h0.transport.rtos"), 0u);
    EXPECT_EQ(counter("nic.t0h0.requester.timeouts"), 0u);
  }
  EXPECT_GE(counter("nic.t0h0.requester.retransmits"), fabric_drops());
}

// With 1 % loss on three of the four paths, a hole at rcv_nxt makes the
// receiver drop and NACK what lands beyond rcv_nxt + L until the hole is
// filled. This pins the cost of recovery: once it cost 5730 overflow
// drops for 5790 packets placed and 9.7 Gb/s (a NACK storm on one virtual
// path), then 1777 drops and 24.6 Gb/s (the window grew without bound into
// the NIC's queue; see window validation in mp_rdma_sender.h).
TEST_F(OooTransport, MpRdmaRecoversLossWithoutOverflowStorm) {
  // IW one BDP of this fabric (16 packets at ~3.3 us), as the paper sets it
  // and scenarios/mp-rdma/m2-lossy-paths.yaml does.
  ASSERT_TRUE(run(
      scenario_text("mprdma", kDefaultJobs, 1, "  mprdma: {initial_window: 16, base_rtt: 3us}\n")));
  expect_jobs_ok();
  const uint64_t placed = counter("nic.t1h0.transport.rx_placed");
  std::string paths;
  for (int s = 0; s < 4; ++s)
    paths += " " + std::to_string(counter("link.t0-s" + std::to_string(s) + ".a2b.tx_packets"));
  SCOPED_TRACE("max OOO " + std::to_string(counter("nic.t1h0.transport.rx_max_ood")) +
               ", fabric drops " + std::to_string(fabric_drops()) + ", t0 -> s0..s3 packets" +
               paths);
  // Each loss costs about one window beyond the bitmap (overflow drops) and
  // the retransmissions of one RTT of NACKs plus those drops; measured at
  // 9be15c2: 56 fabric drops, 769 overflow drops (of 5790 placed), 1734
  // retransmissions, 26.2 Gb/s. The bounds leave room for small changes and
  // catch a return of the storms.
  EXPECT_LT(counter("nic.t1h0.transport.rx_overflow_drops"), 20 * fabric_drops());
  EXPECT_LT(counter("nic.t1h0.transport.rx_overflow_drops"), placed / 5);
  EXPECT_LT(counter("nic.t0h0.requester.retransmits"), 40 * fabric_drops());
  ASSERT_FALSE(platform->outcomes().at(0).results.empty());
  EXPECT_GT(platform->outcomes()[0].results[0].bw_gbps, 20.0);
}

// requester.rtt samples the path passively, from the requester building a
// packet (its payload read over PCIe included) to snd_una passing it. On
// this fabric (four 200 ns links each way) no sample can be below the 1.6
// us of propagation; with 1.2 us links instead the smallest sample grows by
// the 8 us of propagation added, whatever the NICs' own latency. Samples
// cross no retransmission, so the loss leaves the smallest alone. The
// server sends no data: nothing to time there.
TEST_F(OooTransport, RequesterRttSamplesMeasureThePath) {
  double smallest[3] = {0, 0, 0};
  const char* transports[3] = {"mprdma", "mprdma", "gbn"};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(std::string(transports[k]) + (k == 1 ? " with 1.2 us links" : ""));
    std::string text = scenario_text(transports[k], kDefaultJobs);
    if (k == 1) text.replace(text.find("delay: 200ns"), 12, "delay: 1200ns");
    ASSERT_TRUE(run(text));
    expect_jobs_ok();
    const core::Histogram* h = env->stats.find_histogram("nic.t0h0.requester.rtt");
    ASSERT_NE(h, nullptr);
    EXPECT_GT(h->count(), 10u);
    EXPECT_LT(h->count(), counter("nic.t0h0.requester.packets"));
    EXPECT_GE(h->min(), k == 1 ? 9600.0 : 1600.0);
    EXPECT_GE(h->max(), h->min());
    smallest[k] = h->min();
    const core::Histogram* s = env->stats.find_histogram("nic.t1h0.requester.rtt");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->count(), 0u);
  }
  // The histogram's buckets are within 1.6 % of the values they hold.
  EXPECT_NEAR(smallest[1] - smallest[0], 8000.0, 0.04 * smallest[1]);
  std::printf(
      "smallest RTT samples: MP-RDMA %.0f ns (%.0f ns with 1.2 us links), go-back-N %.0f ns\n",
      smallest[0], smallest[1], smallest[2]);
}

// MP-RDMA's counters per QP (nic.<host>.transport.qp<N>.<counter>): two
// connections on one NIC over the lossy paths; each QP's counters add up
// to the NIC-wide ones, and each connection has its own.
TEST_F(OooTransport, MpRdmaCountersPerQpAddUpToTheNicWideOnes) {
  const std::string jobs =
      "\n  - {name: a, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], "
      "iterations: 30, qps: 2, timeout: 10}\n";
  ASSERT_TRUE(run(scenario_text("mprdma", jobs)));
  ASSERT_EQ(platform->outcomes().size(), 1u);
  ASSERT_EQ(platform->outcomes()[0].results.size(), 1u);
  EXPECT_TRUE(platform->outcomes()[0].results[0].data_ok);
  EXPECT_TRUE(platform->all_ok());
  auto per_qp = [&](const std::string& host, const std::string& name) {
    // Sum and number of nic.<host>.transport.qp<N>.<name> counters.
    const std::string pre = "nic." + host + ".transport.qp";
    uint64_t sum = 0, n = 0;
    for (const auto& [path, c] : env->stats.counters()) {
      if (path.rfind(pre, 0) != 0) continue;
      const size_t dot = path.find('.', pre.size());
      if (dot == std::string::npos || path.substr(dot + 1) != name) continue;
      sum += c->value();
      ++n;
    }
    return std::make_pair(sum, n);
  };
  for (const char* name : {"acks", "ece_acks", "recoveries", "retransmits", "rtos"}) {
    SCOPED_TRACE(name);
    const auto [sum, n] = per_qp("t0h0", name);
    EXPECT_EQ(sum, counter(std::string("nic.t0h0.transport.") + name));
  }
  EXPECT_EQ(per_qp("t0h0", "acks").second, 2u) << "one per connection";
  EXPECT_GT(per_qp("t0h0", "recoveries").first, 0u) << "the loss was recovered";
  for (const char* name : {"rx_placed", "rx_overflow_drops"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(per_qp("t1h0", name).first, counter(std::string("nic.t1h0.transport.") + name));
  }
  EXPECT_EQ(per_qp("t1h0", "rx_placed").second, 2u);
  EXPECT_EQ(per_qp("t1h0", "acks").second, 0u) << "the server's QPs never sent";
}

// IRN carries READ and atomics: READ responses are placed in any order, a
// response that arrives after a gap (or an ACK beyond a missing response)
// starts recovery, and the requester asks again for just the missing
// responses; atomics are executed once and replayed. 1 % loss on every
// uplink in both directions, so requests, responses and ACKs are lost.
TEST_F(OooTransport, IrnReadAndAtomicsCompleteWithCorrectDataDespiteLoss) {
  const std::string events = lossy_uplinks();
  const std::string text =
      "name: irn-read\nseed: 3\nend_time: 200ms\n"
      "nic: {mtu: 1024, transport: irn}\n"
      "fabric:\n  topology: mp_rdma_testbed\n  leaves: 2\n  spines: 4\n  hosts_per_leaf: 2\n"
      "  access_rate: 40Gbps\n  uplink_rate: 40Gbps\n  link: {delay: 200ns}\n"
      "  switch: {pfc: {enabled: true, lossless_mask: 1}}\n  events:\n" +
      events +
      "jobs:\n"
      "  - {name: r, app: read_bw, client: t0h0, server: t1h0, sizes: [64KiB, 3000], "
      "iterations: 60, timeout: 10}\n"
      "  - {name: a, app: atomic_bw, client: t0h0, server: t1h0, sizes: [8], iterations: 200, "
      "timeout: 10}\n";
  ASSERT_TRUE(run(text));
  expect_jobs_ok();
  uint64_t drops = 0;
  for (const char* t : {"t0", "t1"})
    for (int s = 0; s < 4; ++s)
      drops += counter(std::string("link.") + t + "-s" + std::to_string(s) + ".a2b.drops");
  EXPECT_GT(drops, 0u);
  EXPECT_GT(counter("nic.t0h0.requester.retransmits"), 0u);
  // Missing responses were asked for again and answered again.
  EXPECT_GT(counter("nic.t1h0.responder.duplicates"), 0u);
  // Every atomic ran exactly once at the responder (the counter's final
  // value is what atomic_bw checks; this checks no replay re-executed one).
  EXPECT_EQ(counter("nic.t1h0.responder.atomics"), 200u);
  EXPECT_EQ(counter("nic.t1h0.responder.fatal_naks"), 0u);
}

// IRN's explicit READ acknowledgements (nic.irn.read_acks, on by
// default): the requester answers responses with Read (N)ACKs and the
// responder sends the lost ones again itself, one round trip after a
// later response reveals the gap; without them the requester asks again
// (one READ request per missing response). Same lossy fabric and READs
// both ways: both complete with their data checked, and the responder's
// recovery shows in its counters and in the goodput.
TEST_F(OooTransport, IrnReadAcksLetTheResponderResendLostResponses) {
  test::LogCapture log("nic.t1h0.transport=debug");
  const std::string events = lossy_uplinks();
  auto text = [&](const char* read_acks) {
    return std::string("name: irn-read-acks\nseed: 3\nend_time: 200ms\n") +
           "nic: {mtu: 1024, transport: irn, irn: {read_acks: " + read_acks +
           "}}\n"
           "fabric:\n  topology: mp_rdma_testbed\n  leaves: 2\n  spines: 4\n"
           "  hosts_per_leaf: 2\n  access_rate: 40Gbps\n  uplink_rate: 40Gbps\n"
           "  link: {delay: 200ns}\n  switch: {pfc: {enabled: true, lossless_mask: 1}}\n"
           "  events:\n" +
           events +
           "jobs:\n  - {name: r, app: read_bw, client: t0h0, server: t1h0, sizes: [64KiB], "
           "iterations: 100, timeout: 10}\n";
  };
  ASSERT_TRUE(run(text("true")));
  expect_jobs_ok();
  const double bw_acks = platform->outcomes().at(0).results.at(0).bw_gbps;
  const uint64_t resent = counter("nic.t1h0.responder.read_retransmits");
  EXPECT_GT(resent, 0u);
  EXPECT_EQ(resent, counter("nic.t1h0.transport.read_retransmits"));
  EXPECT_GT(counter("nic.t1h0.transport.read_nacks_rx"), 0u);
  // Every Read (N)ACK the responder's engine took came through its NIC's
  // requester, and was sent by the client's (some are lost on the way).
  const uint64_t sent = counter("nic.t0h0.requester.read_acks_tx");
  const uint64_t got = counter("nic.t1h0.requester.read_acks_rx");
  EXPECT_EQ(got, counter("nic.t1h0.transport.read_acks_rx") +
                     counter("nic.t1h0.transport.read_nacks_rx"));
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, sent);
  const uint64_t asked_acks = counter("nic.t1h0.responder.duplicates");
  // The responder's engine logs its READ-response recoveries and timeouts.
  EXPECT_EQ(log.count("READ responses: recovery on a Read NACK"),
            counter("nic.t1h0.transport.read_recoveries"));
  EXPECT_GT(counter("nic.t1h0.transport.read_recoveries"), 0u);
  EXPECT_EQ(log.count("READ responses: timeout"), counter("nic.t1h0.transport.read_rtos"));

  ASSERT_TRUE(run(text("false")));
  expect_jobs_ok();
  const double bw_no_acks = platform->outcomes().at(0).results.at(0).bw_gbps;
  EXPECT_EQ(counter("nic.t1h0.responder.read_retransmits"), 0u);
  EXPECT_EQ(counter("nic.t0h0.requester.read_acks_tx"), 0u);
  // The requester asked again for many more responses, and the run took
  // longer.
  EXPECT_GT(counter("nic.t1h0.responder.duplicates"), 2 * asked_acks);
  EXPECT_GT(bw_acks, 1.5 * bw_no_acks);
}

// MP-RDMA under PFC (NSDI'18 §3.5): a 2:1 incast whose switches pause
// (XOFF 8 KiB, below the 20 KB ECN step, so PFC acts before ECN can keep
// the queues short). Paused paths return no ACKs and clock out nothing;
// when the pauses end the ACK clock resumes: the senders really were
// paused, yet nothing is retransmitted, no timer fires, the receiver's
// bitmap never overflows and the bottleneck stays nearly full.
TEST_F(OooTransport, MpRdmaKeepsItsAckClockThroughPfcPauses) {
  const std::string text =
      "name: mprdma-pfc\nseed: 1\nend_time: 100ms\n"
      "nic: {mtu: 1024, transport: mprdma, mprdma: {initial_window: 16, base_rtt: 3us, "
      "rto: 100us}}\n"
      "fabric:\n  topology: mp_rdma_testbed\n  leaves: 2\n  spines: 4\n  hosts_per_leaf: 2\n"
      "  access_rate: 40Gbps\n  uplink_rate: 40Gbps\n  link: {delay: 200ns}\n"
      "  switch:\n    ecn: {enabled: true, kmin: 20KB, kmax: 20KB, pmax: 1.0}\n"
      "    pfc: {enabled: true, lossless_mask: 1, xoff: 8KiB, xon: 4KiB}\n"
      "jobs:\n"
      "  - {name: a, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB], iterations: 300, "
      "after_previous: false}\n"
      "  - {name: b, app: write_bw, client: t0h1, server: t1h0, sizes: [64KiB], iterations: 300, "
      "after_previous: false}\n"
      "metrics:\n  goodput: jobs.goodput_gbps\n";
  ASSERT_TRUE(run(text));
  expect_jobs_ok();
  for (const char* h : {"t0h0", "t0h1"}) {
    const std::string n = std::string("nic.") + h + ".";
    EXPECT_GT(counter(n + "mac.pause_rx"), 100u) << h;
    EXPECT_EQ(counter(n + "transport.retransmits"), 0u) << h;
    EXPECT_EQ(counter(n + "transport.rtos"), 0u) << h;
  }
  EXPECT_EQ(counter("nic.t1h0.transport.rx_overflow_drops"), 0u);
  EXPECT_LT(counter("nic.t1h0.transport.rx_max_ood"), 64u);
  const std::map<std::string, double> m = platform->metrics();
  EXPECT_GT(m.at("goodput"), 33.0);  // of the 36.8 Gb/s payload limit
}

// READ on MP-RDMA over the multi-path testbed with 1 % loss on every ToR
// uplink (requests, responses and ACKs are lost): the responses travel in
// the responder's own stream over its virtual paths and recover from loss
// like any data; each is placed once.
TEST_F(OooTransport, MpRdmaReadCompletesWithCorrectDataDespiteLoss) {
  const std::string text =
      "name: mprdma-read\nseed: 3\nend_time: 200ms\n"
      "nic: {mtu: 1024, transport: mprdma}\n"
      "fabric:\n  topology: mp_rdma_testbed\n  leaves: 2\n  spines: 4\n  hosts_per_leaf: 2\n"
      "  access_rate: 40Gbps\n  uplink_rate: 40Gbps\n  link: {delay: 200ns}\n"
      "  switch: {pfc: {enabled: true, lossless_mask: 1}}\n  events:\n" +
      lossy_uplinks() +
      "jobs:\n"
      "  - {name: r, app: read_bw, client: t0h0, server: t1h0, sizes: [64KiB, 3000], "
      "iterations: 60, timeout: 10}\n";
  ASSERT_TRUE(run(text));
  expect_jobs_ok();
  const uint64_t responses = 60 * (packets_of(64 << 10) + packets_of(3000));
  EXPECT_EQ(counter("nic.t0h0.requester.read_data_rx"), responses);
  EXPECT_GT(counter("nic.t1h0.requester.read_data_tx"), responses);  // some sent again
  EXPECT_GT(counter("nic.t1h0.transport.retransmits"), 0u);
  EXPECT_EQ(counter("nic.t1h0.responder.read_data_requests"), 120u);
  // The responses took several virtual paths: every spine carried some.
  for (int s = 0; s < 4; ++s)
    EXPECT_GT(counter("link.t1-s" + std::to_string(s) + ".a2b.tx_packets"), 100u) << s;
}

// atomic_bw over the lossy testbed on MP-RDMA: every atomic ran exactly
// once at the responder (atomic_bw checks the counter's final value).
TEST_F(OooTransport, MpRdmaAtomicsRunExactlyOnceDespiteLoss) {
  const std::string text =
      "name: mprdma-atomics\nseed: 3\nend_time: 200ms\n"
      "nic: {mtu: 1024, transport: mprdma}\n"
      "fabric:\n  topology: mp_rdma_testbed\n  leaves: 2\n  spines: 4\n  hosts_per_leaf: 2\n"
      "  access_rate: 40Gbps\n  uplink_rate: 40Gbps\n  link: {delay: 200ns}\n"
      "  switch: {pfc: {enabled: true, lossless_mask: 1}}\n  events:\n" +
      lossy_uplinks() +
      "jobs:\n"
      "  - {name: a, app: atomic_bw, client: t0h0, server: t1h0, sizes: [8], iterations: 400, "
      "timeout: 10}\n";
  ASSERT_TRUE(run(text));
  expect_jobs_ok();
  EXPECT_EQ(counter("nic.t1h0.responder.atomics"), 400u);
  EXPECT_EQ(counter("nic.t0h0.requester.read_data_rx"), 400u);  // each response placed once
  // Requests and responses were lost and sent again (early retransmissions:
  // there is no new data behind an atomic).
  EXPECT_GT(counter("nic.t0h0.requester.retransmits"), 0u);
  EXPECT_GT(counter("nic.t1h0.requester.read_data_tx"), 400u);
}

// The per-packet extension on the wire over RoCEv2 (row I2), exactly: IRN's
// WRITE packets carry a RETH each (16 bytes in every packet but the first of
// a message, which has it anyway) and nothing else, its SEND packets the
// 8-byte data trailer; MP-RDMA's WRITE packets both. Lossless, so the
// requester's transmitted bytes are its data packets only.
TEST_F(OooTransport, IrnWritesCarryTheirRethAndSendsTheTrailerNothingMore) {
  constexpr int64_t kMsgs = 8;
  constexpr uint64_t kSize = 16384;  // 16 packets of 1 KiB
  auto tx_bytes = [&](const std::string& transport, const std::string& app) {
    const std::string text =
        "name: ext\nseed: 1\nend_time: 20ms\nnic: {mtu: 1024, transport: " + transport +
        "}\n"
        "hosts: [{name: a}, {name: b}]\n"
        "links: [{name: w, a: a, b: b, rate: 40Gbps, delay: 200ns}]\n"
        "jobs:\n  - {name: j, app: " +
        app +
        ", client: a, server: b, sizes: [16KiB], "
        "iterations: " +
        std::to_string(kMsgs) + "}\n";
    EXPECT_TRUE(run(text)) << transport << " " << app;
    expect_jobs_ok();
    EXPECT_EQ(counter("nic.a.requester.retransmits"), 0u);
    EXPECT_EQ(counter("nic.a.mac.tx_packets"), kMsgs * packets_of(kSize)) << transport << app;
    return counter("nic.a.mac.tx_bytes");
  };
  const uint64_t packets = kMsgs * packets_of(kSize);
  const uint64_t gbn_write = tx_bytes("gbn", "write_bw");
  EXPECT_EQ(tx_bytes("irn", "write_bw"), gbn_write + 16 * (packets - kMsgs));
  EXPECT_EQ(tx_bytes("mprdma", "write_bw"), gbn_write + 16 * (packets - kMsgs) + 8 * packets);
  const uint64_t gbn_send = tx_bytes("gbn", "send_bw");
  EXPECT_EQ(tx_bytes("irn", "send_bw"), gbn_send + 8 * packets);
  // Message boundaries survive without the trailer: the responder completed
  // kMsgs WRITEs, not one per packet.
  tx_bytes("irn", "write_bw");
  EXPECT_EQ(counter("nic.b.responder.messages"), static_cast<uint64_t>(kMsgs));
}

// Bad input: the two ends of a connection on different out-of-order engines
// (one frames WRITE packets with the data trailer, the other without), as a
// guest can make them (MPRDMA_QP_TRANSPORT on one side; a scenario file is
// refused). The responder sees a RETH that does not cover the payload,
// places nothing and answers a fatal NAK; the requester ends with an error
// completion. Nothing hangs or crashes.
TEST_F(OooTransport, WritesBetweenIrnAndMprdmaEndsFailCleanly) {
  for (const auto& [client, server] :
       {std::pair<std::string, std::string>{"irn", "mprdma"}, {"mprdma", "irn"}}) {
    SCOPED_TRACE(client + " -> " + server);
    const std::string text =
        "name: mix\nseed: 1\nend_time: 20ms\nnic: {mtu: 1024}\n"
        "hosts: [{name: a, nic: {transport: " +
        client + "}}, {name: b, nic: {transport: " + client +
        "}}]\n"
        "links: [{name: w, a: a, b: b, rate: 40Gbps, delay: 200ns}]\n"
        "jobs:\n  - {name: j, app: write_bw, client: a, server: b, sizes: [100], "
        "iterations: 4, timeout: 8}\n";
    ASSERT_TRUE(run(text, [&](ScenarioConfig& c) {
      ASSERT_TRUE(c.hosts.at(1).nic_config.has_value());
      c.hosts.at(1).nic_config->transport = server;
    }));
    EXPECT_EQ(platform->host("b").nic().config().transport, server);
    const auto& out = platform->outcomes();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].results.size(), 1u);
    EXPECT_FALSE(out[0].results[0].data_ok);
    // An invalid request, whichever end frames with the trailer: not, say,
    // a remote access error because the trailer made the payload longer
    // than the RETH (and than the MR, by luck).
    EXPECT_NE(out[0].results[0].error.find("remote invalid request"), std::string::npos)
        << out[0].results[0].error;
    EXPECT_FALSE(platform->all_ok());
    EXPECT_EQ(counter("nic.b.responder.bytes"), 0u) << "nothing placed";
    EXPECT_GE(counter("nic.b.responder.fatal_naks"), 1u);
  }
}

TEST_F(OooTransport, MpRdmaWithDcqcnIsRejected) {
  const std::string text =
      scenario_text("mprdma", kDefaultJobs, 1, "  congestion_control: dcqcn\n");
  std::string error;
  try {
    load_scenario(test::write_temp("scenario.yaml", text));
  } catch (const core::ConfigError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("nic"), std::string::npos) << error;
  EXPECT_NE(error.find("congestion_control must be none"), std::string::npos) << error;
  // The same scenario with gbn, or with mprdma and none, is valid.
  EXPECT_NO_THROW(load_scenario(test::write_temp(
      "gbn.yaml", scenario_text("gbn", kDefaultJobs, 1, "  congestion_control: dcqcn\n"))));
  EXPECT_NO_THROW(load_scenario(test::write_temp(
      "none.yaml", scenario_text("mprdma", kDefaultJobs, 1, "  congestion_control: none\n"))));
}

TEST_F(OooTransport, MpRdmaRunsAreDeterministic) {
  // WRITE and SEND, then READ and atomics (responses in the server's stream).
  const std::string jobs =
      kDefaultJobs +
      "  - {name: r, app: read_bw, client: t0h0, server: t1h0, sizes: [16KiB], iterations: 40, "
      "timeout: 10}\n"
      "  - {name: c, app: atomic_bw, client: t0h0, server: t1h0, sizes: [8], iterations: 100, "
      "timeout: 10}\n";
  const std::string text = scenario_text("mprdma", jobs);
  ASSERT_TRUE(run(text));
  expect_jobs_ok();
  const auto first = all_counters();
  const uint64_t t1 = platform->sim_time_ps();
  ASSERT_GT(first.at("nic.t0h0.transport.retransmits") + first.at("nic.t0h0.transport.rtos"), 0u);

  ASSERT_TRUE(run(text));
  EXPECT_EQ(platform->sim_time_ps(), t1);
  const auto second = all_counters();
  EXPECT_EQ(first, second);
  // The comparison sees a change: another seed gives other counters.
  ASSERT_TRUE(run(scenario_text("mprdma", jobs, 2)));
  EXPECT_NE(all_counters(), first);
  EXPECT_GT(first.at("nic.t1h0.requester.read_data_tx"), 0u);
}

}  // namespace
}  // namespace mprdma::platform
