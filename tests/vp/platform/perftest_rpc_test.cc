// perftest rpc_bw (Kalia et al.'s sequencer, §4.2): clients keep requests
// outstanding over UD, the server answers each with the next number of its
// host's counter, batched per poll; regular (8-byte answers) and
// header-only (the number in the immediate, no payload DMA anywhere).
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

constexpr uint64_t kRequests = 400;

std::string scenario(const std::string& job, int clients = 1) {
  std::string s =
      "name: rpc\nseed: 2\nend_time: 50ms\nnic: {mtu: 1024}\n"
      "hosts: [{name: s}, {name: c0}, {name: c1}]\n"
      "links: [{name: w0, a: c0, b: s, rate: 40Gbps, delay: 200ns}]\n"
      "jobs:\n";
  if (clients > 1) {
    // A switch for two clients.
    s = "name: rpc\nseed: 2\nend_time: 50ms\nnic: {mtu: 1024}\n"
        "fabric:\n  topology: explicit\n  link: {delay: 200ns}\n"
        "  nodes: [{name: s}, {name: c0}, {name: c1}, {name: sw, kind: switch}]\n"
        "  links: [{a: s, b: sw, rate: 40Gbps}, {a: c0, b: sw, rate: 40Gbps}, "
        "{a: c1, b: sw, rate: 40Gbps}]\njobs:\n";
  }
  for (int k = 0; k < clients; ++k)
    s += "  - {name: r" + std::to_string(k) + ", app: rpc_bw, transport: ud, client: c" +
         std::to_string(k) + ", server: s, iterations: " + std::to_string(kRequests) +
         ", tx_depth: 16, cq_mod: 8, rx_depth: 64, post_list: 8, after_previous: false, " + job +
         "}\n";
  return s;
}

class PerftestRpc : public test::ScenarioRun {};

TEST_F(PerftestRpc, RegularRequestsGetGrowingNumbers) {
  ASSERT_TRUE(run(scenario("sizes: [8], inline_size: 8")));
  const host::SizeResult& r = result();
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.data_ok);
  EXPECT_EQ(r.iterations, kRequests);
  EXPECT_GT(r.msg_rate_mpps, 0.0);
  EXPECT_EQ(counter("nic.s.requester.ud_sends"), kRequests) << "one answer per request";
  EXPECT_EQ(counter("nic.c0.requester.ud_sends"), kRequests);
  // Answers: 40 B of GRH + the 8-byte number at the client.
  EXPECT_EQ(counter("nic.c0.dma.payload_write_bytes"), kRequests * 48);
}

TEST_F(PerftestRpc, HeaderOnlyRpcsMoveNoPayload) {
  ASSERT_TRUE(run(scenario("sizes: [0], recv_sges: 0")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.s.responder.header_only_recvs"), kRequests);
  EXPECT_EQ(counter("nic.c0.responder.header_only_recvs"), kRequests);
  for (const std::string h : {"s", "c0"}) {
    EXPECT_EQ(counter("nic." + h + ".dma.payload_write_bytes"), 0u) << h;
    EXPECT_EQ(counter("nic." + h + ".dma.payload_read_bytes"), 0u) << h;
  }
}

TEST_F(PerftestRpc, TwoClientsShareTheServersSequencer) {
  ASSERT_TRUE(run(scenario("sizes: [0], recv_sges: 0", 2)));
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(result(j).error, "") << j;
    EXPECT_TRUE(result(j).data_ok) << j;
  }
  EXPECT_EQ(counter("nic.s.requester.ud_sends"), 2 * kRequests);
}

// HERD (request uc_write): requests are 8-byte UC WRITEs into the server's
// request ring, polled in memory: no RECV and no CQE at the server for them,
// no payload DMA read at the client (inline), one UC packet per request.
TEST_F(PerftestRpc, HerdRequestsByUcWriteNeedNoServerCqe) {
  ASSERT_TRUE(run(scenario("sizes: [8], inline_size: 8, request: uc_write", 2)));
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(result(j).error, "") << j;
    EXPECT_TRUE(result(j).data_ok) << j;
    EXPECT_EQ(result(j).iterations, kRequests) << j;
  }
  EXPECT_EQ(counter("nic.c0.requester.uc_packets"), kRequests);
  EXPECT_EQ(counter("nic.c1.requester.uc_packets"), kRequests);
  EXPECT_EQ(counter("nic.s.requester.ud_sends"), 2 * kRequests) << "one answer per request";
  // The server's only receive-side traffic: 8 bytes per request into its
  // ring, no receive CQE (its CQEs are the signalled answers' only).
  EXPECT_EQ(counter("nic.s.dma.payload_write_bytes"), 2 * kRequests * 8);
  EXPECT_EQ(counter("nic.s.responder.messages"), 2 * kRequests);
  EXPECT_EQ(counter("nic.s.dma.recv_wqe_read_bytes"), 0u) << "the server posts no RECV";
}

TEST_F(PerftestRpc, OptionsAreChecked) {
  {
    std::string e = config_error(scenario("sizes: [16], request: uc_write"));
    EXPECT_NE(e.find("request uc_write carries 8-byte requests"), std::string::npos) << e;
    e = config_error(scenario("sizes: [8], request: uc_read"));
    EXPECT_NE(e.find("request"), std::string::npos) << e;
    EXPECT_NE(e.find("uc_read"), std::string::npos) << e;
  }
  std::string e = config_error(scenario("sizes: [25]"));
  EXPECT_NE(e.find("rpc_bw requests carry at most 24 bytes"), std::string::npos) << e;
  std::string rc = scenario("sizes: [8]");
  rc.replace(rc.find("transport: ud"), 13, "transport: rc");
  e = config_error(rc);
  EXPECT_NE(e.find("rpc_bw needs transport ud"), std::string::npos) << e;
  e = config_error(scenario("sizes: [8], wqe_by_mmio: true, post_list: 1"));
  EXPECT_NE(e.find("rpc_bw posts by doorbell"), std::string::npos) << e;
}

}  // namespace
}  // namespace mprdma::platform
