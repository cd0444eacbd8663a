// Bottleneck analysis on hand-made counter increments: the parse of
// bottleneck(<host>,<from>,<to>), each resource's utilisation arithmetic
// and which one is named.
#include "vp/platform/bottleneck.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mprdma::platform {
namespace {

HostCapacity gen3x16_40g() {
  HostCapacity c;
  c.pcie_bytes_per_s = 15.754e9;
  c.port_tx_bps = c.port_rx_bps = 40e9;
  c.clock_hz = 250e6;
  c.pus = 4;
  c.tx_schedule_cycles = 1;
  c.rx_parse_cycles = 2;
  return c;
}

double use_of(const std::vector<ResourceUse>& r, const std::string& name) {
  for (const ResourceUse& u : r)
    if (u.resource == name) return u.utilisation;
  ADD_FAILURE() << "no resource " << name;
  return -1;
}

TEST(Bottleneck, ParsesTheMetricAndRejectsMalformedOnes) {
  const auto s = parse_bottleneck_metric(" bottleneck(s, 1050us, 1.15ms) ");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->host, "s");
  EXPECT_EQ(s->from.ps, 1'050'000'000u);
  EXPECT_EQ(s->to.ps, 1'150'000'000u);
  const auto whole = parse_bottleneck_metric("bottleneck(h1)");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->host, "h1");
  EXPECT_TRUE(whole->until_jobs_end);
  EXPECT_FALSE(s->until_jobs_end);
  EXPECT_FALSE(parse_bottleneck_metric("w.64.bw_gbps"));
  EXPECT_FALSE(parse_bottleneck_metric("max(a, b)"));
  for (const char* bad :
       {"bottleneck(s,1ms)", "bottleneck(,1ms,2ms)", "bottleneck(s,2ms,1ms)",
        "bottleneck(s,1ms,2ms", "bottleneck(s,x,2ms)", "bottleneck(s,1ms,2ms,3ms)"})
    EXPECT_THROW(parse_bottleneck_metric(bad), std::invalid_argument) << bad;
}

TEST(Bottleneck, PcieDirectionIsNamedAfterItsBusiestTlpKind) {
  // 100 us at 15.754 GB/s carry 1 575 400 B; DLLPs count, the direction's
  // total (.bytes) and deeper paths do not add twice.
  const std::map<std::string, uint64_t> d = {
      {"pcie.s.downstream.mmio_write.bytes", 1'000'000},
      {"pcie.s.downstream.dma_read_completion.bytes", 400'000},
      {"pcie.s.downstream.dllp.bytes", 175'400},
      {"pcie.s.downstream.bytes", 1'400'000},
      {"pcie.s.downstream.mmio_write.tlps", 9'999'999},
      {"pcie.s.upstream.dma_write.bytes", 157'540},
      {"pcie.other.downstream.dma_read_completion.bytes", 99'999'999},
  };
  const auto r = rank_resources(d, "s", gen3x16_40g(), 100e-6);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.front().resource, "pcie.downstream.mmio_write");
  EXPECT_NEAR(r.front().utilisation, 1.0, 1e-9);
  EXPECT_NEAR(use_of(r, "pcie.upstream.dma_write"), 0.1, 1e-9);

  // The same bytes, mostly read completions: the name follows.
  std::map<std::string, uint64_t> d2 = d;
  std::swap(d2["pcie.s.downstream.mmio_write.bytes"],
            d2["pcie.s.downstream.dma_read_completion.bytes"]);
  EXPECT_EQ(rank_resources(d2, "s", gen3x16_40g(), 100e-6).front().resource,
            "pcie.downstream.dma_read_completion");
}

TEST(Bottleneck, PcieCreditWaitsCountAsBusy) {
  // 100 us: MMIO lines fill 92 % of the link and the transmitter waited
  // 8 us for posted credits (link idle): the direction could send no more.
  const std::map<std::string, uint64_t> d = {
      {"pcie.s.downstream.mmio_write.bytes", 1'449'368},  // 0.92 x 1 575 400
      {"pcie.s.downstream.credit_wait_ps", 8'000'000},
      {"pcie.s.downstream.credit_waits", 1234},
      {"pcie.s.upstream.dma_write.bytes", 157'540},
  };
  const auto r = rank_resources(d, "s", gen3x16_40g(), 100e-6);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r.front().resource, "pcie.downstream.mmio_write");
  EXPECT_NEAR(r.front().utilisation, 1.0, 1e-9);
  EXPECT_NEAR(r.front().credit_stall, 0.08, 1e-12);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i].credit_stall, 0) << r[i].resource;
  EXPECT_EQ(bottleneck_name(r), "pcie.downstream.mmio_write");

  // Without the wait the same bytes leave the direction under-used.
  std::map<std::string, uint64_t> d2 = d;
  d2.erase("pcie.s.downstream.credit_wait_ps");
  EXPECT_NEAR(rank_resources(d2, "s", gen3x16_40g(), 100e-6).front().utilisation, 0.92, 1e-9);
}

TEST(Bottleneck, PortPuSchedulerAndReceiveStage) {
  // 10 us at 40 Gb/s: 50 000 wire bytes. 400 frames of 105 B + 20 B gap.
  std::map<std::string, uint64_t> d = {
      {"nic.h.mac.tx_bytes", 400 * 105},    {"nic.h.mac.tx_packets", 400},
      {"nic.h.pu.0.busy_cycles", 500},      {"nic.h.pu.1.busy_cycles", 1500},
      {"nic.h.pu.2.busy_cycles", 1500},     {"nic.h.tx.packets", 400},
      {"nic.h.mac.rx_packets", 100},        {"nic.h.rx.stall_ps.wqe", 3'000'000},
      {"nic.h.rx.stall_ps.qpc", 1'000'000},
  };
  const HostCapacity cap = gen3x16_40g();  // 2500 cycles in 10 us
  auto r = rank_resources(d, "h", cap, 10e-6);
  EXPECT_EQ(r.front().resource, "port.tx");
  EXPECT_NEAR(r.front().utilisation, 1.0, 1e-9);
  EXPECT_NEAR(use_of(r, "pu.1"), 0.6, 1e-9) << "the busiest PU, the lowest index on a tie";
  EXPECT_NEAR(use_of(r, "tx_scheduler"), 0.16, 1e-9);
  // Receive stage: 100 frames * 2 cycles (0.8 us) + 4 us of stalls, mostly
  // waiting for WQE fills.
  EXPECT_NEAR(use_of(r, "rx_stage.wqe_miss"), 0.48, 1e-9);
  // No frame bytes received, but each frame's 20 B of preamble and gap.
  EXPECT_NEAR(use_of(r, "port.rx"), 100.0 * 20 * 8 / 400e3, 1e-12);
  // Sorted busiest first.
  for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i - 1].utilisation, r[i].utilisation);

  // The receive stage and the completion unit doing equal work tie; the
  // stage, listed first, wins although rounding leaves the unit's quotient
  // an ulp larger (0.48 against the stage's 0.4799999999999999).
  std::map<std::string, uint64_t> tie = d;
  tie["nic.h.cq.cqes"] = 600;  // 600 x 2 cycles of 2500 = 0.48
  HostCapacity cap2 = cap;
  cap2.cqe_cycles = 2;
  r = rank_resources(tie, "h", cap2, 10e-6);
  EXPECT_NEAR(use_of(r, "completion_unit"), use_of(r, "rx_stage.wqe_miss"), 1e-12);
  size_t at_stage = 0, at_unit = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].resource == "rx_stage.wqe_miss") at_stage = i;
    if (r[i].resource == "completion_unit") at_unit = i;
  }
  EXPECT_LT(at_stage, at_unit);

  // Without stalls the stage is named after parsing.
  d.erase("nic.h.rx.stall_ps.wqe");
  d.erase("nic.h.rx.stall_ps.qpc");
  r = rank_resources(d, "h", cap, 10e-6);
  EXPECT_NEAR(use_of(r, "rx_stage.parse"), 0.08, 1e-9);
  EXPECT_TRUE(rank_resources(d, "h", cap, 0).empty()) << "an empty window names nothing";

  // Over 20 us the port is half busy; a lock bucket held 19 of the 20 us
  // is the busiest resource.
  r = rank_resources(d, "h", cap, 20e-6, 19e-6);
  EXPECT_EQ(r.front().resource, "atomics.lock");
  EXPECT_NEAR(r.front().utilisation, 0.95, 1e-9);
  EXPECT_NEAR(use_of(r, "port.tx"), 0.5, 1e-9);

  // Four read-modify-write buffers, taken 78 us in all over the 20 us: the
  // buffers are 97.5 % busy, ahead of the lock.
  cap2.atomic_buffers = 4;
  d["nic.h.atomics.buffer_busy_ps"] = 78'000'000;
  r = rank_resources(d, "h", cap2, 20e-6, 19e-6);
  EXPECT_EQ(r.front().resource, "atomics.buffers");
  EXPECT_NEAR(r.front().utilisation, 0.975, 1e-9);
  cap2.atomic_buffers = 0;  // unknown capacity: not ranked
  EXPECT_EQ(rank_resources(d, "h", cap2, 20e-6, 19e-6).front().resource, "atomics.lock");
}

TEST(Bottleneck, CompletionUnitBuildsEveryCqeAndEqe) {
  HostCapacity cap = gen3x16_40g();
  cap.cqe_cycles = 4;  // 2500 cycles in 10 us: 625 entries fill it
  const std::map<std::string, uint64_t> d = {{"nic.h.cq.cqes", 600}, {"nic.h.cq.eqes", 25}};
  const auto r = rank_resources(d, "h", cap, 10e-6);
  EXPECT_EQ(r.front().resource, "completion_unit");
  EXPECT_NEAR(r.front().utilisation, 1.0, 1e-9);
}

TEST(Bottleneck, NoSaturatedResourceIsNamedLatency) {
  EXPECT_EQ(bottleneck_name({{"port.rx", 0.97}, {"port.tx", 0.6}}), "port.rx");
  EXPECT_EQ(bottleneck_name({{"port.rx", kSaturated}, {"pu.0", 0.1}}), "port.rx");
  EXPECT_EQ(bottleneck_name({{"port.rx", 0.26}, {"port.tx", 0.17}}), "latency");
  EXPECT_EQ(bottleneck_name({}), "");
}

}  // namespace
}  // namespace mprdma::platform
