// Integration: RDMA READ on MP-RDMA connections between two modeled hosts
// (READ as data, TransportEngine::read_as_data). The READ request is one
// data packet of the requester's stream; the responses are data packets of
// the responder's own send stream, interleaved there with the responder's
// own requests, placed out of order by the requester's receive side and
// completed in order. Checked: READs and WRITEs both ways on one QP pair,
// over a clean and a lossy cable, byte for byte, with each response placed
// exactly once; a responder in RTR answers too; the errors a READ can meet
// (rkey, an unreadable source) end as they do on RoCEv2; and atomics travel
// the same way and run exactly once under loss.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

constexpr uint64_t kMtu = 1024;
uint64_t packets_of(uint64_t bytes) { return bytes == 0 ? 1 : (bytes + kMtu - 1) / kMtu; }

// The READ `wr_id` of p.a failed with `status`/`syndrome`, its buffer
// (`a0` before) untouched, and the responder's QP went to ERR. In a thread.
void ExpectReadFailed(QpPair& p, const std::vector<uint8_t>& a0, uint64_t wr_id, uint32_t status,
                      uint32_t syndrome) {
  const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
  EXPECT_EQ(wc.wr_id, wr_id);
  EXPECT_EQ(wc.status, status);
  EXPECT_EQ(wc.syndrome, syndrome);
  EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), a0));
  EXPECT_EQ(p.b.query().qp_state, MPR_QPS_ERR);
}

class MpRdmaRead : public TwoHostsTest, public ::testing::WithParamInterface<double> {
 protected:
  void BuildMprdma(double loss = 0.0) {
    TwoHosts::Options o;
    o.transport = "mprdma";
    o.loss = loss;
    Build(o);
  }
};

// One READ-heavy exchange on one QP pair, both sides requesting at once, so
// that each QP's stream carries its own WRITEs and READ requests between the
// responses to the peer's READs.
TEST_P(MpRdmaRead, ReadsAndWritesBothWaysShareEachQpsStream) {
  BuildMprdma(GetParam());
  Run([&] {
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(11), b0 = p.b.prefill(12);
    // a: READ 20000 B of b, WRITE 9000 B to b, READ 3000 B of b.
    mpr_sge ar1 = p.a.sge(64 << 10, 20000), aw = p.a.sge(0, 9000), ar2 = p.a.sge(100 << 10, 3000);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &ar1, p.b, 0)), 0);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(2, MPR_WQE_RDMA_WRITE, &aw, p.b, 128 << 10)),
              0);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(3, MPR_WQE_RDMA_READ, &ar2, p.b, 50000)), 0);
    // b: READ 12000 B of a, WRITE 5000 B to a, READ of 0 bytes.
    mpr_sge br = p.b.sge(64 << 10, 12000), bw = p.b.sge(10000, 5000), bz = p.b.sge(200 << 10, 0);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(4, MPR_WQE_RDMA_READ, &br, p.a, 1000)), 0);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(5, MPR_WQE_RDMA_WRITE, &bw, p.a, 160 << 10)),
              0);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(6, MPR_WQE_RDMA_READ, &bz, p.a, 0)), 0);

    const auto wa = WaitWcs(*p.a.ctx, p.a.scq, 3, Ms(200));
    const auto wb = WaitWcs(*p.b.ctx, p.b.scq, 3, Ms(200));
    ASSERT_EQ(wa.size(), 3u);
    ASSERT_EQ(wb.size(), 3u);
    const uint32_t read = MPR_CQE_REQ_RDMA_READ, write = MPR_CQE_REQ_RDMA_WRITE;
    ExpectWc(wa[0], {1, MPR_CQE_SUCCESS, read, 20000, 0, p.a.qpn(), 0, MPR_SYN_NONE, 0, 0});
    ExpectWc(wa[1], {2, MPR_CQE_SUCCESS, write, 9000, 0, p.a.qpn(), 0, MPR_SYN_NONE, 1, 0});
    ExpectWc(wa[2], {3, MPR_CQE_SUCCESS, read, 3000, 0, p.a.qpn(), 0, MPR_SYN_NONE, 2, 0});
    ExpectWc(wb[0], {4, MPR_CQE_SUCCESS, read, 12000, 0, p.b.qpn(), 0, MPR_SYN_NONE, 0, 0});
    ExpectWc(wb[1], {5, MPR_CQE_SUCCESS, write, 5000, 0, p.b.qpn(), 0, MPR_SYN_NONE, 1, 0});
    ExpectWc(wb[2], {6, MPR_CQE_SUCCESS, read, 0, 0, p.b.qpn(), 0, MPR_SYN_NONE, 2, 0});

    std::vector<uint8_t> want_a = a0, want_b = b0;
    std::copy(b0.begin(), b0.begin() + 20000, want_a.begin() + (64 << 10));
    std::copy(b0.begin() + 50000, b0.begin() + 53000, want_a.begin() + (100 << 10));
    std::copy(b0.begin() + 10000, b0.begin() + 15000, want_a.begin() + (160 << 10));
    std::copy(a0.begin(), a0.begin() + 9000, want_b.begin() + (128 << 10));
    std::copy(a0.begin() + 1000, a0.begin() + 13000, want_b.begin() + (64 << 10));
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), want_a));
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want_b));
    EXPECT_EQ(p.a.query().qp_state, MPR_QPS_RTS);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
  });
  // Every response was placed exactly once, whatever was lost and sent
  // again; the responses went out of the responders' own streams.
  const uint64_t to_a = packets_of(20000) + packets_of(3000);
  const uint64_t to_b = packets_of(12000) + packets_of(0);
  EXPECT_EQ(bench->counter("nic.h0.requester.read_data_rx"), to_a);
  EXPECT_EQ(bench->counter("nic.h1.requester.read_data_rx"), to_b);
  EXPECT_GE(bench->counter("nic.h1.requester.read_data_tx"), to_a);
  EXPECT_GE(bench->counter("nic.h0.requester.read_data_tx"), to_b);
  EXPECT_EQ(bench->counter("nic.h1.responder.read_data_requests"), 2u);
  EXPECT_EQ(bench->counter("nic.h0.responder.read_data_requests"), 2u);
  // A request packet per READ and per WRITE packet, plus retransmissions.
  EXPECT_GE(bench->counter("nic.h0.requester.packets"), 2 + packets_of(9000));
  EXPECT_EQ(bench->counter("nic.h0.requester.bad_responses"), 0u);
  EXPECT_EQ(bench->counter("nic.h1.requester.bad_responses"), 0u);
  if (GetParam() > 0) {
    EXPECT_GT(bench->counter("link.h0-h1.a2b.drops") + bench->counter("link.h0-h1.b2a.drops"), 0u);
    EXPECT_GT(bench->counter("nic.h0.transport.retransmits") +
                  bench->counter("nic.h1.transport.retransmits"),
              0u);
    // Lost responses were sent again by their responder's stream.
    EXPECT_GT(bench->counter("nic.h0.requester.read_data_tx") +
                  bench->counter("nic.h1.requester.read_data_tx"),
              to_a + to_b);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, MpRdmaRead, ::testing::Values(0.0, 0.1),
                         [](const ::testing::TestParamInfo<double>& i) {
                           return i.param > 0 ? std::string("Lossy") : std::string("Clean");
                         });

TEST_F(MpRdmaRead, ReadOutsideTheRkeyRegionIsARemoteAccessError) {
  BuildMprdma();
  Run([&] {
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(21);
    mpr_sge s = p.a.sge(0, 200);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(7, MPR_WQE_RDMA_READ, &s, p.b, p.b.len - 100)),
              0);
    ExpectReadFailed(p, a0, 7, MPR_CQE_REM_ACCESS_ERR, MPR_SYN_NAK_REM_ACCESS);
  });
  EXPECT_EQ(bench->counter("nic.h1.requester.read_data_tx"), 0u);
}

TEST_F(MpRdmaRead, UnreadableSourceIsARemoteOperationalError) {
  BuildMprdma();
  Run([&] {
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(31);
    // An MR of b over a page beyond its host's memory: the rkey check
    // passes, the DMA read of the responses fails.
    const UnbackedMr mr = RegisterUnbackedMr(p.b, MPR_ACCESS_REMOTE_READ, 1, 0x600000000000ull);
    ASSERT_NE(mr.key, 0u);
    mpr_sge s = p.a.sge(0, 2000);
    mpr_send_wr wr = SendWr(9, MPR_WQE_RDMA_READ, &s, 1);
    wr.remote_addr = mr.iova;
    wr.rkey = mr.key;
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, wr), 0);
    ExpectReadFailed(p, a0, 9, MPR_CQE_REM_OP_ERR, MPR_SYN_NAK_REM_OP);
    bool event = false;
    for (const host::AsyncEvent& e : p.b.host->driver().async_events())
      event |= e.type == MPR_EQE_QP_FATAL && e.data0 == p.b.qpn() && e.data1 == MPR_SYN_DMA_FAULT;
    EXPECT_TRUE(event) << "no QP_FATAL event with DMA_FAULT for the responder's QP";
  });
}

// A responder left in RTR (perftest's ib_read_bw server never goes to RTS)
// still answers: its stream starts where the requester's receiver expects
// it (the request says so). When it later goes to RTS with that PSN its
// stream goes on: its own WRITE and the next READ's responses follow.
TEST_F(MpRdmaRead, ResponderInRtrAnswersAndKeepsItsStreamWhenItGoesToRts) {
  BuildMprdma();
  Run([&] {
    PairOptions o;
    o.connect = false;
    QpPair p = bench->make_pair(o);
    const std::vector<uint8_t> a0 = p.a.prefill(41), b0 = p.b.prefill(42);
    const auto ai = p.a.ctx->local_info(p.a.qp, p.a.psn);
    const auto bi = p.b.ctx->local_info(p.b.qp, p.b.psn);
    p.a.ctx->connect(p.a.qp, ai, bi, o.path_mtu, o.access);
    p.b.ctx->connect(p.b.qp, bi, ai, o.path_mtu, o.access, 14, 7, 7, 16, 0, false);
    ASSERT_EQ(p.b.query().qp_state, MPR_QPS_RTR);
    mpr_sge s1 = p.a.sge(0, 5000);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &s1, p.b, 1000)), 0);
    const mpr_wc w1 = WaitWc(*p.a.ctx, p.a.scq);
    EXPECT_EQ(w1.wr_id, 1u);
    EXPECT_EQ(w1.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTR);

    mpr_qp_attr rts{};
    rts.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_TIMEOUT |
                    MPR_QP_ATTR_RETRY_CNT | MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_MAX_QP_RD_ATOMIC;
    rts.qp_state = MPR_QPS_RTS;
    rts.sq_psn = p.b.psn;
    rts.timeout = 14;
    rts.retry_cnt = 7;
    rts.rnr_retry = 7;
    rts.max_rd_atomic = 16;
    ASSERT_TRUE(p.b.ctx->modify_qp(p.b.qp, rts).ok());
    mpr_sge bw = p.b.sge(20000, 3000);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(2, MPR_WQE_RDMA_WRITE, &bw, p.a, 100000)), 0);
    mpr_sge s2 = p.a.sge(50000, 2500);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(3, MPR_WQE_RDMA_READ, &s2, p.b, 30000)), 0);
    const mpr_wc w2 = WaitWc(*p.b.ctx, p.b.scq);
    const mpr_wc w3 = WaitWc(*p.a.ctx, p.a.scq);
    EXPECT_EQ(w2.wr_id, 2u);
    EXPECT_EQ(w2.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(w3.wr_id, 3u);
    EXPECT_EQ(w3.status, MPR_CQE_SUCCESS);
    std::vector<uint8_t> want_a = a0;
    std::copy(b0.begin() + 1000, b0.begin() + 6000, want_a.begin());
    std::copy(b0.begin() + 30000, b0.begin() + 32500, want_a.begin() + 50000);
    std::copy(b0.begin() + 20000, b0.begin() + 23000, want_a.begin() + 100000);
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), want_a));
    EXPECT_EQ(p.a.query().qp_state, MPR_QPS_RTS);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
  });
  EXPECT_EQ(bench->counter("nic.h0.requester.read_data_rx"), packets_of(5000) + packets_of(2500));
  EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), 0u);
}

// A synchronise WRITE posted right after a READ of the same bytes updates
// them only after the READ completed (§3.3: "after all previous operations
// are completed"): the READ returns the old bytes. The responder's stream
// is busy with a WRITE of its own first, so the READ's responses (which
// read memory as they leave) wait there while the WRITE's packets arrive:
// without the wait the READ returns the WRITE's bytes. A WRITE without the
// flag may overtake, as on RoCEv2 without IBV_SEND_FENCE (also checked).
TEST_F(MpRdmaRead, SynchroniseWriteAfterAReadWaitsForItsData) {
  BuildMprdma();
  Run([&] {
    PairOptions o;
    o.buf_bytes = 1 << 20;
    QpPair p = bench->make_pair(o);
    const std::vector<uint8_t> a0 = p.a.prefill(61), b0 = p.b.prefill(62);
    constexpr uint32_t kLen = 100000;
    auto round = [&](uint64_t at, bool sync) {
      mpr_sge busy = p.b.sge(400000, 500000);
      ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(9, MPR_WQE_RDMA_WRITE, &busy, p.a, 400000)),
                0);
      mpr_sge r = p.a.sge(0, kLen), w = p.a.sge(200000, kLen);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &r, p.b, at)), 0);
      mpr_send_wr sw = RemoteWrTo(2, MPR_WQE_RDMA_WRITE, &w, p.b, at);
      if (sync) sw.flags |= MPR_WQE_F_SYNC;
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, sw), 0);
      const auto wa = WaitWcs(*p.a.ctx, p.a.scq, 2);
      const auto wb = WaitWcs(*p.b.ctx, p.b.scq, 1);
      ASSERT_EQ(wa.size(), 2u);
      ASSERT_EQ(wb.size(), 1u);
      EXPECT_EQ(wa[0].status, MPR_CQE_SUCCESS);
      EXPECT_EQ(wa[1].status, MPR_CQE_SUCCESS);
    };
    round(0, true);
    EXPECT_TRUE(SameBytes(p.a.get(0, kLen), std::vector<uint8_t>(b0.begin(), b0.begin() + kLen)))
        << "the READ saw the synchronise WRITE's bytes";
    // The same without the flag: the WRITE overtakes the responses (so the
    // check above is not vacuous).
    round(kLen, false);
    EXPECT_FALSE(
        SameBytes(p.a.get(0, kLen), std::vector<uint8_t>(b0.begin() + kLen, b0.begin() + 2 * kLen)))
        << "without the flag the READ did not see the WRITE: the set-up does not race";
  });
}

// Atomics as data: FETCH_ADDs and a COMPARE_SWAP over a 10 % lossy cable.
// Each atomic runs once (its request is placed once, its ATOMIC ACKNOWLEDGE
// is resent from the responder's stream, not recomputed): the counter ends
// at its start + the number of adds, and the original values returned are
// exactly start, start + 1, ... in posting order.
TEST_F(MpRdmaRead, AtomicsRunExactlyOnceDespiteLoss) {
  BuildMprdma(0.1);
  constexpr int kAdds = 96, kBatch = 16;
  uint64_t start = 0;
  Run([&] {
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> b0 = p.b.prefill(51);
    std::memcpy(&start, b0.data() + 64, 8);
    for (int i = 0; i < kAdds; i += kBatch) {
      for (int j = i; j < i + kBatch; ++j) {
        mpr_sge s = p.a.sge(4096 + 8 * uint64_t(j), 8);
        mpr_send_wr wr = RemoteWrTo(uint64_t(j), MPR_WQE_ATOMIC_FA, &s, p.b, 64);
        wr.compare_add = 1;
        ASSERT_EQ(p.a.ctx->post_send(p.a.qp, wr), 0);
      }
      const auto wcs = WaitWcs(*p.a.ctx, p.a.scq, kBatch, Ms(200));
      ASSERT_EQ(wcs.size(), size_t{kBatch});
      for (int j = 0; j < kBatch; ++j) {
        EXPECT_EQ(wcs[j].wr_id, uint64_t(i + j));
        EXPECT_EQ(wcs[j].status, MPR_CQE_SUCCESS);
        EXPECT_EQ(wcs[j].opcode, MPR_CQE_REQ_ATOMIC_FA);
      }
    }
    const std::vector<uint8_t> got = p.a.get(4096, 8 * kAdds);
    for (int j = 0; j < kAdds; ++j) {
      uint64_t orig = 0;
      std::memcpy(&orig, got.data() + 8 * j, 8);
      EXPECT_EQ(orig, start + uint64_t(j)) << "FETCH_ADD " << j;
    }
    // A COMPARE_SWAP that matches: the counter becomes 7, the old value comes back.
    mpr_sge s = p.a.sge(8192, 8);
    mpr_send_wr cas = RemoteWrTo(500, MPR_WQE_ATOMIC_CAS, &s, p.b, 64);
    cas.compare_add = start + kAdds;
    cas.swap = 7;
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, cas), 0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(200));
    EXPECT_EQ(wc.wr_id, 500u);
    EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
    uint64_t counter = 0, old = 0;
    const std::vector<uint8_t> c = p.b.get(64, 8), o = p.a.get(8192, 8);
    std::memcpy(&counter, c.data(), 8);
    std::memcpy(&old, o.data(), 8);
    EXPECT_EQ(counter, 7u);
    EXPECT_EQ(old, start + kAdds);
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.atomics"), uint64_t{kAdds} + 1);
  EXPECT_GT(bench->counter("link.h0-h1.a2b.drops") + bench->counter("link.h0-h1.b2a.drops"), 0u);
}

}  // namespace
}  // namespace mprdma::test
