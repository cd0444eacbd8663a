// Integration: UD QPs between two modeled hosts (requester_ud.cc,
// responder_ud.cc). A datagram SEND lands after 40 bytes of GRH (the IPv4
// header in the last 20) with a CQE naming the sender's QP; nothing is
// acknowledged; a SEND longer than the MTU fails with LOC_LEN_ERR; a wrong
// Q_Key is dropped and counted and leaves the RECV posted; a RECV too small
// fails alone; batched WQEs behind one doorbell are read by DMA, and WQEs by
// MMIO are not read at all.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;

class UdTest : public TwoHostsTest {
 protected:
  // UD endpoints on both hosts, in RTS, with Q_Key kQkey.
  void MakeUd(uint32_t max_inline = 0) {
    PairOptions o;
    o.caps.qp_type = MPR_QPT_UD;
    o.caps.max_inline = max_inline;
    o.connect = false;
    pair = bench->make_pair(o);
    pair.a.ctx->activate_ud(pair.a.qp, kQkey, pair.a.psn);
    pair.b.ctx->activate_ud(pair.b.qp, kQkey, pair.b.psn);
    to_b = host::VerbsContext::ud_dest(pair.b.ctx->local_info(pair.b.qp, 0), kQkey);
  }
  int Send(uint64_t id, uint64_t off, uint32_t len, uint8_t opcode = MPR_WQE_SEND,
           uint8_t flags = MPR_WQE_F_SIGNALED, const mpr_wqe_ud* dest = nullptr, int ring = 1) {
    const mpr_sge sge = pair.a.sge(off, len);
    mpr_send_wr wr = SendWr(id, opcode, &sge, 1, flags);
    wr.ud = dest ? dest : &to_b;
    wr.imm_data = 0x78563412;
    if (ring == 2) return pair.a.ctx->post_send_mmio(pair.a.qp, wr);
    return ring ? pair.a.ctx->post_send(pair.a.qp, wr)
                : pair.a.ctx->post_send_no_doorbell(pair.a.qp, wr);
  }
  void Recv(uint64_t id, uint64_t off, uint32_t len) {
    const mpr_sge sge = pair.b.sge(off, len);
    ASSERT_EQ(pair.b.ctx->post_recv(pair.b.qp, RecvWr(id, &sge, 1)), 0);
  }
  mpr_wc Poll(Endpoint& e, host::CompletionQueue* cq) {
    mpr_wc wc{};
    const sc_core::sc_time end = sc_core::sc_time_stamp() + Ms(5);
    while (e.ctx->poll_cq(cq, 1, &wc) == 0) {
      if (sc_core::sc_time_stamp() >= end) {
        ADD_FAILURE() << "no completion on CQ " << cq->cqn;
        wc.status = 0xffff;
        return wc;
      }
      sc_core::wait(end - sc_core::sc_time_stamp(), cq->written);
    }
    return wc;
  }
  QpPair pair;
  mpr_wqe_ud to_b{};
};

TEST_F(UdTest, SendDeliversDataAfterTheGrhWithTheSourceQp) {
  Build();
  Run([&] {
    MakeUd(64);
    const std::vector<uint8_t> data = Pattern(512, 7);
    pair.a.put(0, data);
    Recv(11, 4096, 40 + 512);
    ASSERT_EQ(Send(1, 0, 512), 0);
    const mpr_wc s = Poll(pair.a, pair.a.scq);
    EXPECT_EQ(s.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(s.opcode, MPR_CQE_REQ_SEND);
    EXPECT_EQ(s.byte_len, 512u);
    EXPECT_EQ(s.wr_id, 1u);
    const mpr_wc r = Poll(pair.b, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.opcode, MPR_CQE_RESP_RECV);
    EXPECT_EQ(r.byte_len, 40u + 512u);
    EXPECT_EQ(r.src_qp, pair.a.qpn());
    EXPECT_EQ(r.qpn, pair.b.qpn());
    EXPECT_EQ(r.wr_id, 11u);
    EXPECT_EQ(r.flags, MPR_CQE_F_GRH);
    // GRH space: 20 zero bytes, then the IPv4 header (10.0.0.1 -> 10.0.0.2, UDP).
    const std::vector<uint8_t> grh = pair.b.get(4096, 40);
    EXPECT_EQ(std::vector<uint8_t>(grh.begin(), grh.begin() + 20), std::vector<uint8_t>(20, 0));
    EXPECT_EQ(grh[20], 0x45);
    EXPECT_EQ(grh[29], 17);
    EXPECT_EQ(std::vector<uint8_t>(grh.begin() + 32, grh.begin() + 40),
              (std::vector<uint8_t>{10, 0, 0, 1, 10, 0, 0, 2}));
    EXPECT_TRUE(SameBytes(pair.b.get(4096 + 40, 512), data));
    // Inline with immediate.
    Recv(12, 8192, 40 + 32);
    ASSERT_EQ(Send(2, 64, 32, MPR_WQE_SEND_IMM, MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE), 0);
    EXPECT_EQ(Poll(pair.a, pair.a.scq).status, MPR_CQE_SUCCESS);
    const mpr_wc ri = Poll(pair.b, pair.b.rcq);
    EXPECT_EQ(ri.opcode, MPR_CQE_RESP_RECV_IMM);
    EXPECT_EQ(ri.imm_data, 0x78563412u);
    EXPECT_EQ(ri.flags, MPR_CQE_F_GRH | MPR_CQE_F_IMM);
    EXPECT_EQ(ri.src_qp, pair.a.qpn());
    EXPECT_TRUE(SameBytes(pair.b.get(8192 + 40, 32), pair.a.get(64, 32)));
  });
  // Datagrams are never acknowledged: the receiver sent nothing.
  EXPECT_EQ(bench->counter("nic.h1.mac.tx_packets"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.requester.acks"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.requester.ud_sends"), 2u);
  EXPECT_EQ(bench->counter("nic.h1.responder.messages"), 2u);
}

TEST_F(UdTest, SendLongerThanTheMtuCompletesWithAnError) {
  Build();
  Run([&] {
    MakeUd();
    Recv(1, 0, 4096);
    ASSERT_EQ(Send(1, 8192, 1025), 0);  // NIC MTU 1024
    const mpr_wc s = Poll(pair.a, pair.a.scq);
    EXPECT_EQ(s.status, MPR_CQE_LOC_LEN_ERR);
    EXPECT_EQ(s.syndrome, MPR_SYN_MSG_TOO_LONG);
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_ERR);
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
  });
  EXPECT_EQ(bench->counter("nic.h0.requester.ud_sends"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.mac.tx_packets"), 0u);
}

TEST_F(UdTest, WrongQkeyIsDroppedAndCountedAndTheRecvStaysPosted) {
  Build();
  Run([&] {
    MakeUd();
    Recv(5, 0, 1024);
    mpr_wqe_ud bad = to_b;
    bad.qkey = 0x22222222;
    ASSERT_EQ(Send(1, 8192, 100, MPR_WQE_SEND, MPR_WQE_F_SIGNALED, &bad), 0);
    EXPECT_EQ(Poll(pair.a, pair.a.scq).status, MPR_CQE_SUCCESS);  // sent: UD has no ACK
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
    // Bit 31 of the WQE's Q_Key: the sending QP's own Q_Key (also kQkey).
    mpr_wqe_ud own = to_b;
    own.qkey = 0x80000000u;
    ASSERT_EQ(Send(2, 8192, 100, MPR_WQE_SEND, MPR_WQE_F_SIGNALED, &own), 0);
    const mpr_wc r = Poll(pair.b, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.wr_id, 5u);
    EXPECT_EQ(r.byte_len, 140u);
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.qkey_drops"), 1u);
  EXPECT_EQ(bench->counter("nic.h1.responder.messages"), 1u);
}

TEST_F(UdTest, RecvTooSmallFailsAloneAndNoRecvDrops) {
  Build();
  Run([&] {
    MakeUd();
    Recv(1, 0, 100);  // 40 + 100 needed
    Recv(2, 4096, 200);
    ASSERT_EQ(Send(1, 8192, 100), 0);
    const mpr_wc r1 = Poll(pair.b, pair.b.rcq);
    EXPECT_EQ(r1.status, MPR_CQE_LOC_LEN_ERR);
    EXPECT_EQ(r1.syndrome, MPR_SYN_MSG_TOO_LONG);
    EXPECT_EQ(r1.wr_id, 1u);
    ASSERT_EQ(Send(2, 8192, 100), 0);
    const mpr_wc r2 = Poll(pair.b, pair.b.rcq);
    EXPECT_EQ(r2.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r2.wr_id, 2u);
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_RTS);
    ASSERT_EQ(Send(3, 8192, 100), 0);  // no RECV left: lost
    EXPECT_EQ(Poll(pair.a, pair.a.scq).wr_id, 1u);
    EXPECT_EQ(Poll(pair.a, pair.a.scq).wr_id, 2u);
    EXPECT_EQ(Poll(pair.a, pair.a.scq).wr_id, 3u);
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.ud_drops"), 1u);
}

TEST_F(UdTest, BatchedWqesAreReadByDmaAndMmioWqesAreNot) {
  Build();
  Run([&] {
    MakeUd(64);
    for (int i = 0; i < 32; ++i) Recv(i, uint64_t(i) * 256, 256);
    const uint64_t writes0 = bench->counter("nic.h0.hostif.mmio_writes");
    for (int i = 0; i < 16; ++i)
      ASSERT_EQ(Send(i, 8192, 60, MPR_WQE_SEND, i == 15 ? MPR_WQE_F_SIGNALED : 0, nullptr, 0), 0);
    pair.a.ctx->ring_sq(pair.a.qp);
    EXPECT_EQ(Poll(pair.a, pair.a.scq).wr_id, 15u);
    EXPECT_EQ(bench->counter("nic.h0.hostif.mmio_writes") - writes0, 1u);  // one doorbell
    const uint64_t stride = uint64_t{1} << pair.a.qp->dp.sq.log_stride;
    EXPECT_EQ(bench->counter("nic.h0.dma.wqe_read_bytes"), 16 * stride);
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(
          Send(100 + i, 8192, 60, MPR_WQE_SEND, MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE, nullptr, 2),
          1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(Poll(pair.a, pair.a.scq).wr_id, 100u + i);
    EXPECT_EQ(bench->counter("nic.h0.dma.wqe_read_bytes"), 16 * stride);  // no more reads
    for (int i = 0; i < 20; ++i) EXPECT_EQ(Poll(pair.b, pair.b.rcq).status, MPR_CQE_SUCCESS);
  });
  EXPECT_EQ(bench->counter("nic.h0.requester.wqes_by_mmio"), 4u);
  EXPECT_EQ(bench->counter("nic.h1.responder.messages"), 20u);
}

}  // namespace
}  // namespace mprdma::test
