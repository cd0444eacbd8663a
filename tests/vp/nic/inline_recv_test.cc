// Inline RECV (scatter to CQE; Kalia et al., ATC'16, §3.3) and CQE slots of
// 64 and 128 bytes, on two modeled hosts: a receive that fits the slot
// before the CQE travels inside it (one PCIe write per RECV) and the data
// path copies it to the RECV's buffer, byte for byte (perftest's data
// check); one that does not fit is placed by DMA as usual.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

constexpr uint64_t kMessages = 200;

std::string scenario(const std::string& job) {
  return "name: ir\nseed: 3\nend_time: 50ms\nnic: {mtu: 1024}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n  - {name: s, app: send_bw, client: h0, server: h1, tx_depth: 16, "
         "cq_mod: 4, inline_size: 64, iterations: " +
         std::to_string(kMessages) + ", " + job + "}\n";
}

class InlineRecv : public test::ScenarioRun {
 protected:
  void expect_ok() {
    EXPECT_EQ(result().error, "");
    EXPECT_TRUE(result().data_ok);
    EXPECT_EQ(result().iterations, kMessages);
  }
};

TEST_F(InlineRecv, RcSendOfUpTo32BytesTravelsInA64ByteCqe) {
  ASSERT_TRUE(run(scenario("sizes: [32], cqe_size: 64, inline_recv: true")));
  expect_ok();
  EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), kMessages);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.completion_write_bytes"), kMessages * 64)
      << "one 64-byte slot per RECV";
}

TEST_F(InlineRecv, UdDatagramAndGrhTravelInA128ByteCqe) {
  // 40 bytes of GRH + 56 of payload = the 96 bytes before the CQE.
  ASSERT_TRUE(run(scenario("sizes: [56], transport: ud, cqe_size: 128, inline_recv: true")));
  expect_ok();
  EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), kMessages);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), 0u);
}

// The out-of-order engines hold a single-packet SEND that fits the slot on
// chip until its message completes in order, then write it in the CQE; a
// multi-packet SEND is placed by DMA packet by packet as usual.
TEST_F(InlineRecv, OutOfOrderEnginesPutSmallSendsInTheCqeToo) {
  for (const std::string transport : {"mprdma", "irn"}) {
    SCOPED_TRACE(transport);
    std::string text = scenario("sizes: [32], cqe_size: 64, inline_recv: true");
    text.replace(text.find("nic: {mtu: 1024}"), 16,
                 "nic: {mtu: 1024, transport: " + transport + "}");
    ASSERT_TRUE(run(text));
    expect_ok();
    EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), kMessages);
    EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), 0u);
    EXPECT_EQ(counter("nic.h1.transport.rx_placed"), kMessages);
    text = scenario("sizes: [3000], cqe_size: 64, inline_recv: true");
    text.replace(text.find("nic: {mtu: 1024}"), 16,
                 "nic: {mtu: 1024, transport: " + transport + "}");
    ASSERT_TRUE(run(text));
    expect_ok();
    EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), 0u);
    EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), kMessages * 3000);
  }
}

TEST_F(InlineRecv, ReceivesThatDoNotFitArePlacedByDma) {
  ASSERT_TRUE(run(scenario("sizes: [33], cqe_size: 64, inline_recv: true")));
  expect_ok();
  EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), kMessages * 33);
  // UD: 40 + 57 > 96.
  ASSERT_TRUE(run(scenario("sizes: [57], transport: ud, cqe_size: 128, inline_recv: true")));
  expect_ok();
  EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), kMessages * (40 + 57));
}

TEST_F(InlineRecv, LargerCqeSlotsWithoutInlineCostTheirBytes) {
  ASSERT_TRUE(run(scenario("sizes: [32], cqe_size: 64")));
  expect_ok();
  EXPECT_EQ(counter("nic.h1.responder.inline_recvs"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), kMessages * 32);
  EXPECT_EQ(counter("nic.h1.dma.completion_write_bytes"), kMessages * 64);
}

TEST_F(InlineRecv, OptionsAreChecked) {
  std::string e = config_error(scenario("sizes: [8], inline_recv: true"));
  EXPECT_NE(e.find("inline_recv needs cqe_size 64 or 128"), std::string::npos) << e;
  e = config_error(scenario("sizes: [8], cqe_size: 48"));
  EXPECT_NE(e.find("cqe_size must be 32, 64 or 128 bytes"), std::string::npos) << e;
}

}  // namespace
}  // namespace mprdma::platform
