// Integration: receiver not ready on MP-RDMA connections between two modeled
// hosts (TransportEngine::rnr_nacks). A SEND (or WRITE with immediate) whose
// RECV is not posted is dropped and answered with an RNR NAK carrying the
// ACK trailer; the sender waits the QP's RNR timer (min_rnr_timer 12, 0.64
// ms, as connect sets it) and resends from snd_una, spending one RNR retry
// per wait: the verbs semantics of RoCEv2, without the retransmission
// timeout the drop alone would need.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

class MprdmaRnr : public TwoHostsTest {
 protected:
  void SetUp() override {
    TwoHostsTest::SetUp();
    TwoHosts::Options o;
    o.transport = "mprdma";
    Build(o);
  }
};

TEST_F(MprdmaRnr, SendWithoutRecvExhaustsRnrRetries) {
  Run([&] {
    for (const uint8_t rnr_retry : {uint8_t{0}, uint8_t{1}, uint8_t{3}}) {
      SCOPED_TRACE("rnr_retry " + std::to_string(rnr_retry));
      PairOptions o;
      o.rnr_retry = rnr_retry;
      QpPair p = bench->make_pair(o);
      const uint64_t naks = bench->counter("nic.h1.responder.rnr_naks");
      const uint64_t waits = bench->counter("nic.h0.transport.rnr_waits");
      const sc_core::sc_time t0 = sc_core::sc_time_stamp();
      mpr_sge s = p.a.sge(0, 500);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(31, MPR_WQE_SEND, &s, 1)), 0);
      const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(20));
      EXPECT_EQ(wc.wr_id, 31u);
      EXPECT_EQ(wc.status, MPR_CQE_RNR_RETRY_EXC_ERR);
      EXPECT_EQ(wc.syndrome, MPR_SYN_RNR_EXCEEDED);
      // One NAK per attempt (a one-packet message); a wait of min_rnr_timer
      // between attempts, each spending one retry.
      EXPECT_EQ(bench->counter("nic.h1.responder.rnr_naks") - naks, rnr_retry + 1u);
      EXPECT_EQ(bench->counter("nic.h0.transport.rnr_waits") - waits, rnr_retry + 1u);
      EXPECT_GE(sc_core::sc_time_stamp() - t0, Us(640) * rnr_retry);
      EXPECT_LT(sc_core::sc_time_stamp() - t0, Us(640) * (rnr_retry + 1)) << "no timeout";
      EXPECT_EQ(p.a.query().qp_state, MPR_QPS_ERR);
      EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS) << "the responder did nothing wrong";
    }
  });
  EXPECT_EQ(bench->counter("nic.h0.transport.rtos"), 0u);
}

TEST_F(MprdmaRnr, InfiniteRnrRetryWaitsForTheRecv) {
  Run([&] {
    for (const uint8_t op : {MPR_WQE_SEND_IMM, MPR_WQE_RDMA_WRITE_IMM}) {
      for (const uint32_t n : {500u, 8192u}) {
        SCOPED_TRACE(std::string(op == MPR_WQE_SEND_IMM ? "SEND_IMM" : "WRITE_IMM") + " of " +
                     std::to_string(n) + " bytes, RECV posted 3 ms late");
        PairOptions o;
        o.rnr_retry = 7;  // retry for ever
        o.retry_cnt = 0;  // no transport retries: nothing here is lost
        QpPair p = bench->make_pair(o);
        const std::vector<uint8_t> a0 = p.a.prefill(130), b0 = p.b.prefill(131);
        const uint64_t waits = bench->counter("nic.h0.transport.rnr_waits");
        mpr_sge s = p.a.sge(0, n);
        mpr_send_wr w = RemoteWrTo(41, op, &s, p.b, 20000);
        w.imm_data = 0x5a5a0001;
        ASSERT_EQ(p.a.ctx->post_send(p.a.qp, w), 0);
        sc_core::wait(Ms(3));
        // 3 ms of 0.64 ms waits: at least four.
        EXPECT_GE(bench->counter("nic.h0.transport.rnr_waits") - waits, 4u);
        mpr_sge r = p.b.sge(0, 16384);
        ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(42, &r, 1)), 0);
        const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(20));
        ASSERT_EQ(wc.status, MPR_CQE_SUCCESS) << "syndrome " << wc.syndrome;
        EXPECT_EQ(wc.byte_len, n);
        const mpr_wc rc = WaitWc(*p.b.ctx, p.b.rcq);
        EXPECT_EQ(rc.status, MPR_CQE_SUCCESS);
        EXPECT_EQ(rc.byte_len, n);
        EXPECT_EQ(rc.wr_id, 42u);
        EXPECT_EQ(rc.imm_data, 0x5a5a0001u);
        EXPECT_EQ(rc.opcode,
                  op == MPR_WQE_SEND_IMM ? MPR_CQE_RESP_RECV_IMM : MPR_CQE_RESP_WRITE_IMM);
        std::vector<uint8_t> want = b0;
        std::copy(a0.begin(), a0.begin() + n, want.begin() + (op == MPR_WQE_SEND_IMM ? 0 : 20000));
        EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
        EXPECT_EQ(p.a.query().qp_state, MPR_QPS_RTS);
      }
    }
  });
  EXPECT_EQ(bench->counter("nic.h0.transport.rtos"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.requester.timeouts"), 0u);
}

}  // namespace
}  // namespace mprdma::test
