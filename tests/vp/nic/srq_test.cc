// Integration: shared receive queues between two modeled hosts
// (responder_srq.cc, the SRQ list of sw_stack/dp). Two RC QPs on h1 take
// their RECVs from one SRQ: every SEND lands in the buffer of the RECV its
// completion names, whichever QP it came to; slots come back in any order
// and the ring wraps many times; an empty SRQ answers RNR NAK and a RECV
// posted later lets the retry through; the armed limit raises its event
// once; a bad lkey in an SRQ WQE fails only the QP that took it (which
// reports its last WQE), the SRQ and the other QP go on; a RECV posted to a
// QP of an SRQ and destroying an SRQ in use are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

constexpr uint64_t kSlotBytes = 4096;  // each RECV's buffer on h1

class SrqTest : public TwoHostsTest {
 protected:
  // Senders on h0 (one context each); on h1 one context with an SRQ of
  // `max_wr` WQEs and `nqps` RC QPs taking their RECVs from it.
  void MakeSrq(uint32_t max_wr, int nqps = 2, uint32_t limit = 0) {
    PairOptions o;
    o.connect = false;
    host::VerbsContext& c = bench->new_context(1);
    rx.ctx = &c;
    rx.pd = c.alloc_pd();
    rx.len = o.buf_bytes;
    rx.buf = rx.as().alloc(o.buf_bytes);
    rx.mr = c.reg_mr(rx.pd, rx.buf, o.buf_bytes, o.access);
    rx.scq = c.create_cq(256);
    rx.rcq = c.create_cq(256);
    srq = c.create_srq(rx.pd, max_wr, 1, limit);
    for (int i = 0; i < nqps; ++i) {
      Endpoint tx = bench->make_endpoint(0, o);
      host::QpCaps caps;
      caps.srq = srq;
      host::QueuePair* qp = c.create_qp(rx.pd, rx.scq, rx.rcq, caps);
      const auto ti = tx.ctx->local_info(tx.qp, tx.psn);
      const auto ri = c.local_info(qp, 0x3000 + i);
      tx.ctx->connect(tx.qp, ti, ri, o.path_mtu, o.access);
      c.connect(qp, ri, ti, o.path_mtu, o.access);
      senders.push_back(tx);
      qps.push_back(qp);
    }
  }
  // RECV `id` into slot `slot` of h1's buffer.
  int PostSrq(uint64_t id, uint32_t slot, uint32_t lkey_xor = 0) {
    mpr_sge sge = rx.sge(slot * kSlotBytes, kSlotBytes);
    sge.lkey ^= lkey_xor;
    return rx.ctx->post_srq_recv(srq, RecvWr(id, &sge, 1));
  }
  // A SEND of `len` bytes from offset `off` of sender i's buffer.
  void Send(int i, uint64_t id, uint64_t off, uint32_t len) {
    const mpr_sge sge = senders[i].sge(off, len);
    ASSERT_EQ(senders[i].ctx->post_send(senders[i].qp, SendWr(id, MPR_WQE_SEND, &sge, 1)), 0);
  }
  bool HasEvent(uint8_t type, uint32_t data0) const {
    for (const host::AsyncEvent& e : rx_driver().async_events())
      if (e.type == type && e.data0 == data0) return true;
    return false;
  }
  const host::Driver& rx_driver() const { return rx.ctx->driver(); }

  Endpoint rx;  // h1's context, PD, buffer and CQs (no QP of its own)
  host::SharedReceiveQueue* srq = nullptr;
  std::vector<Endpoint> senders;
  std::vector<host::QueuePair*> qps;
};

TEST_F(SrqTest, TwoQpsShareOneSrqAndEverySendLandsInTheRecvItsCompletionNames) {
  Build();
  Run([&] {
    MakeSrq(15);
    const std::vector<uint8_t> a0 = senders[0].prefill(11);
    const std::vector<uint8_t> a1 = senders[1].prefill(12);
    for (uint32_t s = 0; s < 8; ++s) ASSERT_EQ(PostSrq(100 + s, s), 0);
    // Interleaved: 0, 1, 0, 1, ... each of a different length.
    for (int k = 0; k < 8; ++k) Send(k % 2, k, uint64_t(k) * 5000, 1000 + 300 * k);
    const auto wcs = WaitWcs(*rx.ctx, rx.rcq, 8);
    ASSERT_EQ(wcs.size(), 8u);
    std::map<uint64_t, int> used;
    int per_qp[2] = {0, 0};
    for (const mpr_wc& wc : wcs) {
      ASSERT_EQ(wc.status, MPR_CQE_SUCCESS);
      ASSERT_GE(wc.wr_id, 100u);
      ASSERT_LT(wc.wr_id, 108u);
      EXPECT_EQ(++used[wc.wr_id], 1) << "RECV " << wc.wr_id << " completed twice";
      const int q = wc.qpn == qps[0]->qpn ? 0 : 1;
      ASSERT_EQ(wc.qpn, qps[q]->qpn);
      // The k-th message of QP q is message 2 * k + q of the sequence: the
      // RECVs of one QP complete in its message order.
      const int k = 2 * per_qp[q]++ + q;
      ASSERT_EQ(wc.byte_len, uint32_t(1000 + 300 * k));
      const std::vector<uint8_t>& src = q ? a1 : a0;
      const std::vector<uint8_t> want(src.begin() + k * 5000, src.begin() + k * 5000 + wc.byte_len);
      EXPECT_TRUE(SameBytes(rx.get((wc.wr_id - 100) * kSlotBytes, wc.byte_len), want))
          << "message " << k << " in RECV " << wc.wr_id;
    }
    EXPECT_EQ(per_qp[0], 4);
    EXPECT_EQ(per_qp[1], 4);
    const host::CommandResult q = rx.ctx->query_srq(srq);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q.out1, 0u) << "every posted WQE was taken";
    EXPECT_EQ(q.out2, 2u) << "two QPs attached";
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.srq.taken"), 8u);
  EXPECT_EQ(bench->counter("nic.h1.responder.srq.list_breaks"), 0u) << "a fresh list is in order";
}

TEST_F(SrqTest, SlotsComeBackInAnyOrderAndTheRingWrapsManyTimes) {
  Build();
  Run([&] {
    MakeSrq(3);  // a ring of 4 slots: 3 WQEs at a time
    const std::vector<uint8_t> a0 = senders[0].prefill(21);
    const std::vector<uint8_t> a1 = senders[1].prefill(22);
    uint32_t next_id = 0;
    for (; next_id < 3; ++next_id) ASSERT_EQ(PostSrq(next_id, next_id % 8), 0);
    EXPECT_EQ(PostSrq(99, 7), -ENOMEM) << "3 WQEs fill a ring of 4";
    int sent = 0, got = 0;
    std::vector<int> per_qp(2, 0);
    // 40 messages, two at a time on alternating QPs; every completion gives
    // its slot back and one more RECV goes in.
    while (got < 40) {
      while (sent < 40 && sent - got < 2) {
        Send(sent % 2, sent, uint64_t(sent % 20) * 3000, 500 + 37 * sent);
        ++sent;
      }
      const mpr_wc wc = WaitWc(*rx.ctx, rx.rcq);
      ASSERT_EQ(wc.status, MPR_CQE_SUCCESS) << "completion " << got;
      const int q = wc.qpn == qps[0]->qpn ? 0 : 1;
      const int k = 2 * per_qp[q]++ + q;
      const std::vector<uint8_t>& src = q ? a1 : a0;
      const uint64_t off = uint64_t(k % 20) * 3000;
      ASSERT_EQ(wc.byte_len, uint32_t(500 + 37 * k));
      EXPECT_TRUE(
          SameBytes(rx.get((wc.wr_id % 8) * kSlotBytes, wc.byte_len),
                    std::vector<uint8_t>(src.begin() + off, src.begin() + off + wc.byte_len)))
          << "message " << k;
      ++got;
      ASSERT_EQ(PostSrq(next_id, next_id % 8), 0) << "a freed slot is postable again";
      ++next_id;
    }
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.srq.taken"), 40u);
  EXPECT_EQ(bench->counter("nic.h0.requester.retransmits"), 0u);
}

TEST_F(SrqTest, AnEmptySrqAnswersRnrNakAndALaterRecvLetsTheRetryThrough) {
  Build();
  Run([&] {
    MakeSrq(7, 1);
    senders[0].prefill(31);
    Send(0, 1, 0, 2000);
    // The SEND meets an empty SRQ: RNR NAK, the requester waits and retries.
    sc_core::wait(Us(30));
    EXPECT_TRUE(StaysEmpty(*rx.ctx, rx.rcq, Us(1)));
    ASSERT_EQ(PostSrq(5, 2), 0);
    const mpr_wc r = WaitWc(*rx.ctx, rx.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.wr_id, 5u);
    EXPECT_EQ(r.byte_len, 2000u);
    const mpr_wc s = WaitWc(*senders[0].ctx, senders[0].scq);
    EXPECT_EQ(s.status, MPR_CQE_SUCCESS);
  });
  EXPECT_GE(bench->counter("nic.h1.responder.rnr_naks"), 1u);
}

TEST_F(SrqTest, TheArmedLimitRaisesItsEventOnceAndDisarms) {
  Build();
  Run([&] {
    MakeSrq(15, 1);
    senders[0].prefill(41);
    ASSERT_TRUE(rx.ctx->modify_srq(srq, MPR_SRQ_ATTR_LIMIT, 3).ok());
    for (uint32_t s = 0; s < 5; ++s) ASSERT_EQ(PostSrq(s, s), 0);
    Send(0, 1, 0, 100);
    Send(0, 2, 0, 100);  // 3 left: not below the limit
    WaitWcs(*rx.ctx, rx.rcq, 2);
    EXPECT_FALSE(HasEvent(MPR_EQE_SRQ_LIMIT, srq->srqn));
    EXPECT_EQ(rx.ctx->query_srq(srq).out0, 3u) << "still armed";
    Send(0, 3, 0, 100);  // 2 left: below 3
    WaitWcs(*rx.ctx, rx.rcq, 1);
    sc_core::wait(Us(5));  // the event's EQE write and interrupt
    EXPECT_TRUE(HasEvent(MPR_EQE_SRQ_LIMIT, srq->srqn));
    const host::CommandResult q = rx.ctx->query_srq(srq);
    EXPECT_EQ(q.out0, 0u) << "disarmed by the event";
    EXPECT_EQ(q.out1, 2u) << "WQEs left";
    Send(0, 4, 0, 100);
    WaitWcs(*rx.ctx, rx.rcq, 1);
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.srq.limit_events"), 1u);
}

TEST_F(SrqTest, ABadLkeyFailsOnlyTheQpThatTookItsWqe) {
  Build();
  Run([&] {
    MakeSrq(15);
    senders[1].prefill(52);
    ASSERT_EQ(PostSrq(1, 1, 0xff), 0);  // lkey not registered
    ASSERT_EQ(PostSrq(2, 2), 0);
    Send(0, 10, 0, 1000);  // QP 0 takes the bad one
    const mpr_wc bad = WaitWc(*rx.ctx, rx.rcq);
    EXPECT_EQ(bad.status, MPR_CQE_LOC_PROT_ERR);
    EXPECT_EQ(bad.wr_id, 1u);
    EXPECT_EQ(bad.qpn, qps[0]->qpn);
    // The requester learns it by a NAK and fails too.
    const mpr_wc sbad = WaitWc(*senders[0].ctx, senders[0].scq);
    EXPECT_NE(sbad.status, MPR_CQE_SUCCESS);
    sc_core::wait(Us(5));
    EXPECT_TRUE(HasEvent(MPR_EQE_QP_LAST_WQE, qps[0]->qpn)) << "the failed QP's last WQE";
    mpr_qp_attr a{};
    ASSERT_TRUE(rx.ctx->query_qp(qps[0], a).ok());
    EXPECT_EQ(a.qp_state, MPR_QPS_ERR);
    // The other QP and the SRQ go on.
    Send(1, 11, 0, 1500);
    const mpr_wc ok = WaitWc(*rx.ctx, rx.rcq);
    EXPECT_EQ(ok.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(ok.wr_id, 2u);
    EXPECT_EQ(ok.qpn, qps[1]->qpn);
    EXPECT_TRUE(SameBytes(rx.get(2 * kSlotBytes, 1500), senders[1].get(0, 1500)));
    ASSERT_TRUE(rx.ctx->query_qp(qps[1], a).ok());
    EXPECT_EQ(a.qp_state, MPR_QPS_RTS);
  });
}

TEST_F(SrqTest, ARecvToAQpOfAnSrqAndDestroyingAnSrqInUseAreRefused) {
  Build();
  Run([&] {
    MakeSrq(7, 1);
    const mpr_sge sge = rx.sge(0, 64);
    EXPECT_EQ(rx.ctx->post_recv(qps[0], RecvWr(1, &sge, 1)), -EINVAL);
    const host::CommandResult busy = rx.ctx->destroy_srq(srq);
    EXPECT_EQ(busy.status, MPR_CMD_BUSY);
    rx.ctx->destroy_qp(qps[0]);
    EXPECT_TRUE(rx.ctx->destroy_srq(srq).ok());
  });
}

}  // namespace
}  // namespace mprdma::test
