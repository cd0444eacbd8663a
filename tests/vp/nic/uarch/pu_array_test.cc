// PuArray: QP-to-PU mapping, FIFO order of one QP's operations, parallelism
// across PUs, per-PU counters and utilisation over an interval.
#include "vp/nic/uarch/pu_array.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "vp/core/random.h"

namespace mprdma::nic::uarch {
namespace {

PuArrayParams params(uint32_t pus) {
  PuArrayParams p;
  p.pus = pus;
  p.cycles = PuOpCycles{};
  p.cycles.tx_wqe = 10;
  p.cycles.tx_packet = 5;
  p.cycles.cqe = 3;
  return p;
}

TEST(PuArray, QpsMapToPusByQpnModuloN) {
  const PuArray a(params(4));
  EXPECT_EQ(a.pu_of(0), 0u);
  EXPECT_EQ(a.pu_of(3), 3u);
  EXPECT_EQ(a.pu_of(4), 0u);
  EXPECT_EQ(a.pu_of(0xFFFFFF), 3u);
  EXPECT_EQ(PuArray(params(1)).pu_of(12345), 0u);
}

TEST(PuArray, OpsOfOneQpRunBackToBackInSubmissionOrder) {
  PuArray a(params(4));
  // Three ops submitted in the same cycle queue in the QP's PU FIFO.
  EXPECT_EQ(a.submit(1, PuOp::tx_wqe, 100), 110u);
  EXPECT_EQ(a.submit(1, PuOp::tx_packet, 100), 115u);
  EXPECT_EQ(a.submit(1, PuOp::cqe, 100), 118u);
  EXPECT_EQ(a.free_at(1), 118u);
  EXPECT_EQ(a.backlog_cycles(1, 100), 18u);
  EXPECT_EQ(a.backlog_cycles(1, 118), 0u);
  // Submitted after the PU went idle: starts at once.
  EXPECT_EQ(a.submit(1, PuOp::cqe, 200), 203u);
  const PuCounters& c = a.counters(1);
  EXPECT_EQ(c.ops, 4u);
  EXPECT_EQ(c.busy_cycles, 10u + 5 + 3 + 3);
  EXPECT_EQ(c.wait_cycles, 0u + 10 + 15);
  EXPECT_EQ(c.max_wait_cycles, 15u);
  EXPECT_EQ(c.ops_by_type[static_cast<size_t>(PuOp::cqe)], 2u);
  EXPECT_EQ(c.ops_by_type[static_cast<size_t>(PuOp::tx_wqe)], 1u);
}

TEST(PuArray, QpsOnDifferentPusRunInParallelAndQpsOnOnePuDoNot) {
  PuArray a(params(4));
  EXPECT_EQ(a.submit(0, PuOp::tx_wqe, 0), 10u);
  EXPECT_EQ(a.submit(1, PuOp::tx_wqe, 0), 10u) << "PU 1 is free";
  EXPECT_EQ(a.submit(2, PuOp::tx_wqe, 0), 10u);
  EXPECT_EQ(a.submit(4, PuOp::tx_wqe, 0), 20u) << "QP 4 shares PU 0 with QP 0";
  EXPECT_EQ(a.submit(8, PuOp::tx_wqe, 0), 30u);
  EXPECT_EQ(a.counters(0).ops, 3u);
  EXPECT_EQ(a.counters(3).ops, 0u);
  // One PU: everything serialises.
  PuArray one(params(1));
  EXPECT_EQ(one.submit(0, PuOp::tx_wqe, 0), 10u);
  EXPECT_EQ(one.submit(1, PuOp::tx_wqe, 0), 20u);
}

TEST(PuArray, ExtraCyclesLengthenOneOperation) {
  PuArray a(params(2));
  EXPECT_EQ(a.submit(0, PuOp::tx_packet, 0, 7), 12u);
  EXPECT_EQ(a.submit(0, PuOp::tx_packet, 0), 17u);
  EXPECT_EQ(a.counters(0).busy_cycles, 17u);
}

TEST(PuArray, EveryQpCompletesInSubmissionOrderUnderRandomLoad) {
  core::RandomStream rng(7, "pu_array.test");
  PuArray a(params(3));
  std::map<uint32_t, uint64_t> last_done;  // per QP
  uint64_t now = 0;
  for (int i = 0; i < 5000; ++i) {
    now += rng.below(4);
    const uint32_t qpn = static_cast<uint32_t>(rng.below(10));
    const PuOp op = static_cast<PuOp>(rng.below(kPuOpCount));
    const uint64_t done = a.submit(qpn, op, now);
    EXPECT_GE(done, now + a.params().cycles.of(op));
    auto it = last_done.find(qpn);
    if (it != last_done.end()) {
      ASSERT_GT(done, it->second) << "QP " << qpn << " op " << i << " overtook its predecessor";
    }
    last_done[qpn] = done;
  }
  uint64_t ops = 0;
  for (uint32_t pu = 0; pu < 3; ++pu) ops += a.counters(pu).ops;
  EXPECT_EQ(ops, 5000u);
}

TEST(PuArray, UtilisationOverAnInterval) {
  PuArray a(params(2));
  a.submit(0, PuOp::tx_wqe, 10);  // PU 0 busy [10, 20)
  a.submit(0, PuOp::tx_wqe, 30);  // [30, 40)
  a.submit(0, PuOp::tx_wqe, 35);  // queued: [40, 50), merged with [30, 40)
  EXPECT_EQ(a.busy_cycles(0, 0, 100), 30u);
  EXPECT_DOUBLE_EQ(a.utilisation(0, 0, 100), 0.3);
  EXPECT_DOUBLE_EQ(a.utilisation(0, 10, 20), 1.0);
  EXPECT_DOUBLE_EQ(a.utilisation(0, 20, 30), 0.0);
  EXPECT_DOUBLE_EQ(a.utilisation(0, 15, 35), 0.5);  // [15,20) and [30,35)
  EXPECT_EQ(a.busy_cycles(0, 45, 60), 5u);
  EXPECT_DOUBLE_EQ(a.utilisation(1, 0, 100), 0.0) << "PU 1 never worked";
  EXPECT_DOUBLE_EQ(a.mean_utilisation(0, 100), 0.15);
  EXPECT_EQ(a.busiest(0, 100), 0u);
  a.submit(1, PuOp::tx_wqe, 60);
  a.submit(1, PuOp::tx_wqe, 60);
  a.submit(1, PuOp::tx_wqe, 60);
  a.submit(1, PuOp::tx_wqe, 60);  // [60, 100)
  EXPECT_EQ(a.busiest(0, 100), 1u) << "40 busy cycles beat 30";
  EXPECT_EQ(a.busiest(0, 50), 0u);
  EXPECT_THROW(a.utilisation(0, 50, 50), std::out_of_range);
  EXPECT_THROW(a.utilisation(0, 60, 50), std::out_of_range);
}

TEST(PuArray, ASaturatedPuIsFullyBusy) {
  // One QP offered more work than its PU can do: the PU runs at 100 % while
  // the other PUs idle, the single-QP ceiling of the multi-queue guideline.
  PuArray a(params(4));
  for (uint64_t t = 0; t < 1000; t += 4) a.submit(5, PuOp::tx_packet, t);  // 5 cycles every 4
  EXPECT_DOUBLE_EQ(a.utilisation(1, 0, 1000), 1.0);
  EXPECT_DOUBLE_EQ(a.utilisation(0, 0, 1000), 0.0);
  EXPECT_GT(a.backlog_cycles(1, 1000), 0u);
  EXPECT_EQ(a.busiest(0, 1000), 1u);
}

TEST(PuArray, ForgettingHistoryKeepsLaterQueriesExact) {
  PuArray a(params(1));
  for (uint64_t t = 0; t < 10000; t += 20) a.submit(0, PuOp::tx_wqe, t);  // 10 of every 20
  EXPECT_EQ(a.busy_cycles(0, 5000, 6000), 500u);
  a.forget_before(5000);
  EXPECT_EQ(a.busy_cycles(0, 5000, 6000), 500u);
  EXPECT_EQ(a.busy_cycles(0, 5005, 5025), 10u);
  EXPECT_THROW(a.busy_cycles(0, 4000, 6000), std::out_of_range);
  a.submit(0, PuOp::tx_wqe, 20000);
  EXPECT_EQ(a.busy_cycles(0, 19000, 21000), 10u);
  EXPECT_EQ(a.counters(0).busy_cycles, 5010u) << "counters are not forgotten";
}

TEST(PuArray, CostsAndNames) {
  const PuOpCycles c;
  EXPECT_EQ(c.of(PuOp::doorbell), 4u);
  EXPECT_EQ(c.of(PuOp::tx_wqe), 8u);
  EXPECT_EQ(c.of(PuOp::tx_packet), 4u);
  EXPECT_EQ(c.of(PuOp::rx_packet), 8u);
  EXPECT_EQ(c.of(PuOp::ack), 4u);
  EXPECT_EQ(c.of(PuOp::cqe), 4u);
  EXPECT_EQ(c.of(PuOp::atomic), 8u);
  EXPECT_STREQ(to_string(PuOp::rx_packet), "rx_packet");
  EXPECT_STREQ(to_string(PuOp::atomic), "atomic");
  EXPECT_THROW(PuArray(params(0)), std::invalid_argument);
  PuArrayParams p = params(2);
  p.cycles.ack = 0;
  try {
    PuArray bad(p);
    FAIL() << "a zero cost accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cycles.ack"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mprdma::nic::uarch
