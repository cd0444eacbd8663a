// Header-only SEND/RECV (Kalia et al., ATC'16, §3.3), RC and UD, on two
// modeled hosts: a SEND carrying only its 4-byte immediate makes no payload
// DMA read at the sender, and a RECV without scatter entries takes it with
// no DMA write but the CQE (16-byte RECV WQEs); the immediates arrive in
// order. A payload SEND needs RECVs with buffers.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

constexpr int kMessages = 300;

std::string scenario(const std::string& job) {
  return "name: ho\nseed: 1\nend_time: 50ms\nnic: {mtu: 1024}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n  - {name: s, app: send_bw, client: h0, server: h1, tx_depth: 16, "
         "cq_mod: 4, iterations: " +
         std::to_string(kMessages) + ", " + job + "}\n";
}

class HeaderOnly : public test::ScenarioRun {
 protected:
  void expect_header_only(const std::string& transport) {
    SCOPED_TRACE(transport);
    ASSERT_TRUE(run(scenario("sizes: [0], send_imm: true, recv_sges: 0, transport: " + transport)));
    const host::SizeResult& r = result();
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.iterations, uint64_t{kMessages});
    EXPECT_EQ(counter("nic.h1.responder.header_only_recvs"), uint64_t{kMessages});
    // No payload moved over either PCIe link; only the WQEs and CQEs.
    EXPECT_EQ(counter("nic.h0.dma.payload_read_bytes"), 0u);
    EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), 0u);
    // Every RECV WQE is one 16-byte slot.
    EXPECT_EQ(counter("nic.h1.dma.recv_wqe_read_bytes"), uint64_t{kMessages} * 16);
    EXPECT_EQ(counter("nic.h1.cq.cqes"), uint64_t{kMessages}) << "one CQE per RECV";
  }
};

TEST_F(HeaderOnly, RcSendOfOnlyAnImmediateMovesNoPayload) { expect_header_only("rc"); }

TEST_F(HeaderOnly, UdHeaderOnlyRecvPlacesNotEvenTheGrh) { expect_header_only("ud"); }

TEST_F(HeaderOnly, RegularSendsStillPlacePayloadAndGrh) {
  ASSERT_TRUE(run(scenario("sizes: [32], send_imm: true, inline_size: 32, transport: ud")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.h1.responder.header_only_recvs"), 0u);
  EXPECT_EQ(counter("nic.h1.dma.payload_write_bytes"), uint64_t{kMessages} * (40 + 32));
  EXPECT_EQ(counter("nic.h0.dma.payload_read_bytes"), 0u) << "inline";
}

TEST_F(HeaderOnly, OptionsAreChecked) {
  std::string e = config_error(scenario("sizes: [0, 8], recv_sges: 0"));
  EXPECT_NE(e.find("recv_sges 0 (header-only RECVs) needs sizes of 0 bytes"), std::string::npos)
      << e;
  e = config_error(scenario("sizes: [0], recv_sges: 2"));
  EXPECT_NE(e.find("recv_sges"), std::string::npos) << e;
  e = config_error(
      "name: x\nend_time: 1ms\nhosts: [{name: h0}, {name: h1}]\n"
      "links: [{name: wire, a: h0, b: h1}]\n"
      "jobs: [{name: w, app: write_bw, client: h0, server: h1, sizes: [8], send_imm: true}]\n");
  EXPECT_NE(e.find("send_imm and recv_sges apply to send_bw and rpc_bw only"), std::string::npos)
      << e;
}

}  // namespace
}  // namespace mprdma::platform
