// Integration: UC QPs between two modeled hosts (requester_uc.cc,
// responder_uc.cc). Multi-packet SENDs and WRITEs arrive intact with the UC
// opcodes and nothing is acknowledged; a WRITE with immediate consumes a
// RECV, a plain WRITE none; a lost middle packet drops the rest of its
// message, the next message arrives and a SEND's RECV is reused; a bad rkey
// or a missing RECV is dropped and counted, never answered; a SEND longer
// than its RECV fails that RECV and the QP; READ and atomics fail the WQE
// locally; MODIFY_QP refuses what UC does not have.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vp/host/two_hosts.h"
#include "vp/net/roce_codec.h"

namespace mprdma::test {
namespace {

class UcTest : public TwoHostsTest {
 protected:
  // UC endpoints on both hosts, connected, in RTS.
  void MakeUc(uint32_t max_inline = 0, uint32_t access = kAllAccess) {
    PairOptions o;
    o.caps.qp_type = MPR_QPT_UC;
    o.caps.max_inline = max_inline;
    o.access = access;
    o.connect = false;
    pair = bench->make_pair(o);
    const auto ai = pair.a.ctx->local_info(pair.a.qp, pair.a.psn);
    const auto bi = pair.b.ctx->local_info(pair.b.qp, pair.b.psn);
    pair.a.ctx->connect_uc(pair.a.qp, ai, bi, MPR_MTU_1024, access);
    pair.b.ctx->connect_uc(pair.b.qp, bi, ai, MPR_MTU_1024, access);
  }
  int Send(uint64_t id, uint64_t off, uint32_t len, uint8_t opcode = MPR_WQE_SEND) {
    const mpr_sge sge = pair.a.sge(off, len);
    mpr_send_wr wr = SendWr(id, opcode, &sge, 1);
    wr.imm_data = 0x78563412;
    return pair.a.ctx->post_send(pair.a.qp, wr);
  }
  int Write(uint64_t id, uint64_t off, uint32_t len, uint64_t remote_off,
            uint8_t opcode = MPR_WQE_RDMA_WRITE, uint32_t rkey_xor = 0) {
    const mpr_sge sge = pair.a.sge(off, len);
    mpr_send_wr wr = RemoteWrTo(id, opcode, &sge, pair.b, remote_off);
    wr.rkey ^= rkey_xor;
    wr.imm_data = 0x0df0adba;
    return pair.a.ctx->post_send(pair.a.qp, wr);
  }
  void Recv(uint64_t id, uint64_t off, uint32_t len) {
    const mpr_sge sge = pair.b.sge(off, len);
    ASSERT_EQ(pair.b.ctx->post_recv(pair.b.qp, RecvWr(id, &sge, 1)), 0);
  }
  // Drops (at the relay) the first frame from h0 whose BTH opcode is `op`.
  void DropFirst(net::Opcode op) {
    bench->relay().set_filter([op, done = false](net::Packet& frame, int from) mutable {
      net::RoceFields f;
      if (done || from != 0 || net::parse_roce(frame, f) != net::ParseStatus::ok || f.opcode != op)
        return Relay::Verdict::forward;
      done = true;
      return Relay::Verdict::drop;
    });
  }
  QpPair pair;
};

TEST_F(UcTest, MultiPacketSendAndWriteArriveIntactWithoutAcks) {
  Build();
  Run([&] {
    MakeUc();
    const std::vector<uint8_t> a0 = pair.a.prefill(1);
    const std::vector<uint8_t> b0 = pair.b.prefill(2);
    Recv(7, 100000, 8192);
    ASSERT_EQ(Send(1, 0, 5000), 0);              // 5 packets at MTU 1024
    ASSERT_EQ(Write(2, 8192, 10000, 20000), 0);  // 10 packets
    ASSERT_EQ(Write(3, 30000, 1024, 40000), 0);  // exactly one MTU: one ONLY
    const auto s = WaitWcs(*pair.a.ctx, pair.a.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(s[i].status, MPR_CQE_SUCCESS);
      EXPECT_EQ(s[i].wr_id, uint64_t(i + 1));  // in SQ order
    }
    EXPECT_EQ(s[0].opcode, MPR_CQE_REQ_SEND);
    EXPECT_EQ(s[1].opcode, MPR_CQE_REQ_RDMA_WRITE);
    EXPECT_EQ(s[1].byte_len, 10000u);
    const mpr_wc r = WaitWc(*pair.b.ctx, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.opcode, MPR_CQE_RESP_RECV);
    EXPECT_EQ(r.byte_len, 5000u);
    EXPECT_EQ(r.wr_id, 7u);
    // The requester completes once its packets are built, not when they
    // land: wait for the last WRITE's bytes.
    sc_core::wait(Us(20));
    std::vector<uint8_t> want = b0;
    std::copy(a0.begin(), a0.begin() + 5000, want.begin() + 100000);
    std::copy(a0.begin() + 8192, a0.begin() + 8192 + 10000, want.begin() + 20000);
    std::copy(a0.begin() + 30000, a0.begin() + 31024, want.begin() + 40000);
    EXPECT_TRUE(SameBytes(pair.b.get(0, pair.b.len), want));
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));  // plain WRITEs: no receive CQE
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_RTS);
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_RTS);
  });
  EXPECT_EQ(bench->counter("nic.h0.requester.uc_packets"), 16u);
  EXPECT_EQ(bench->counter("nic.h1.responder.packets"), 16u);
  EXPECT_EQ(bench->counter("nic.h1.responder.messages"), 3u);
  // Nothing is acknowledged: the receiver sent no packet at all.
  EXPECT_EQ(bench->counter("nic.h1.mac.tx_packets"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.requester.acks"), 0u);
}

TEST_F(UcTest, WriteWithImmediateCompletesARecvAndPlainWriteNone) {
  Build();
  Run([&] {
    MakeUc(64);
    const std::vector<uint8_t> a0 = pair.a.prefill(3);
    Recv(9, 0, 16);
    ASSERT_EQ(Write(1, 0, 2000, 50000), 0);  // plain: no receive CQE
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
    ASSERT_EQ(Write(2, 4096, 3000, 60000, MPR_WQE_RDMA_WRITE_IMM), 0);
    const mpr_wc r = WaitWc(*pair.b.ctx, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.opcode, MPR_CQE_RESP_WRITE_IMM);
    EXPECT_EQ(r.byte_len, 3000u);
    EXPECT_EQ(r.imm_data, 0x0df0adbau);
    EXPECT_EQ(r.flags & MPR_CQE_F_IMM, uint32_t{MPR_CQE_F_IMM});
    EXPECT_EQ(r.wr_id, 9u);
    // A multi-packet SEND with immediate: the immediate and SE come with
    // its last packet.
    Recv(10, 80000, 4096);
    const mpr_sge sge = pair.a.sge(8192, 2500);
    mpr_send_wr wr = SendWr(4, MPR_WQE_SEND_IMM, &sge, 1, MPR_WQE_F_SIGNALED | MPR_WQE_F_SOLICITED);
    wr.imm_data = 0x44332211;
    ASSERT_EQ(pair.a.ctx->post_send(pair.a.qp, wr), 0);
    const mpr_wc ri = WaitWc(*pair.b.ctx, pair.b.rcq);
    EXPECT_EQ(ri.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(ri.opcode, MPR_CQE_RESP_RECV_IMM);
    EXPECT_EQ(ri.byte_len, 2500u);
    EXPECT_EQ(ri.imm_data, 0x44332211u);
    EXPECT_EQ(ri.flags, uint32_t{MPR_CQE_F_IMM | MPR_CQE_F_SOLICITED});
    EXPECT_EQ(ri.wr_id, 10u);
    EXPECT_TRUE(SameBytes(pair.b.get(80000, 2500),
                          std::vector<uint8_t>(a0.begin() + 8192, a0.begin() + 10692)));
    EXPECT_TRUE(SameBytes(pair.b.get(60000, 3000),
                          std::vector<uint8_t>(a0.begin() + 4096, a0.begin() + 7096)));
    EXPECT_TRUE(
        SameBytes(pair.b.get(50000, 2000), std::vector<uint8_t>(a0.begin(), a0.begin() + 2000)));
    // A WRITE with immediate and no RECV posted: dropped, never answered.
    ASSERT_EQ(Write(3, 0, 100, 70000, MPR_WQE_RDMA_WRITE_IMM), 0);
    EXPECT_EQ(WaitWcs(*pair.a.ctx, pair.a.scq, 4).size(), 4u);
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_RTS);
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.no_recv"), 1u);
  EXPECT_EQ(bench->counter("nic.h1.mac.tx_packets"), 0u);
}

TEST_F(UcTest, LostMiddlePacketDropsTheRestAndTheNextMessageReusesTheRecv) {
  TwoHosts::Options o;
  o.relay = true;
  Build(o);
  Run([&] {
    MakeUc();
    const std::vector<uint8_t> a0 = pair.a.prefill(4);
    const std::vector<uint8_t> b0 = pair.b.prefill(5);
    DropFirst(net::Opcode::UC_SEND_MIDDLE);
    Recv(1, 100000, 8192);
    Recv(2, 120000, 8192);
    ASSERT_EQ(Send(1, 0, 3000), 0);                             // FIRST, MIDDLE (lost), LAST
    ASSERT_EQ(Send(2, 4096, 1500), 0);                          // FIRST, LAST
    EXPECT_EQ(WaitWcs(*pair.a.ctx, pair.a.scq, 2).size(), 2u);  // both "sent"
    // Only the second message completes, in the first RECV.
    const mpr_wc r = WaitWc(*pair.b.ctx, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(r.wr_id, 1u);
    EXPECT_EQ(r.byte_len, 1500u);
    EXPECT_TRUE(SameBytes(pair.b.get(100000, 1500),
                          std::vector<uint8_t>(a0.begin() + 4096, a0.begin() + 5596)));
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
    // The same for a WRITE: what landed before the loss stays, the rest of
    // the message is dropped, the next WRITE lands whole.
    DropFirst(net::Opcode::UC_RDMA_WRITE_MIDDLE);
    ASSERT_EQ(Write(3, 8192, 4096, 20000), 0);   // FIRST, MIDDLE (lost), MIDDLE, LAST
    ASSERT_EQ(Write(4, 16384, 2048, 40000), 0);  // FIRST, LAST
    EXPECT_EQ(WaitWcs(*pair.a.ctx, pair.a.scq, 2).size(), 2u);
    sc_core::wait(Us(20));
    std::vector<uint8_t> want = b0;
    std::copy(a0.begin() + 4096, a0.begin() + 5596, want.begin() + 100000);
    std::copy(a0.begin() + 8192, a0.begin() + 8192 + 1024, want.begin() + 20000);
    std::copy(a0.begin() + 16384, a0.begin() + 16384 + 2048, want.begin() + 40000);
    const std::vector<uint8_t> got = pair.b.get(0, pair.b.len);
    EXPECT_TRUE(SameBytes(std::vector<uint8_t>(got.begin() + 20000, got.begin() + 24096),
                          std::vector<uint8_t>(want.begin() + 20000, want.begin() + 24096)));
    EXPECT_TRUE(SameBytes(std::vector<uint8_t>(got.begin() + 40000, got.begin() + 42048),
                          std::vector<uint8_t>(want.begin() + 40000, want.begin() + 42048)));
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_RTS);
  });
  // Each message: the packet after the lost one has an unexpected PSN, the
  // ones after it are the rest of a message being dropped.
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.psn"), 2u);
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.discarding"), 1u);
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_partial"), 2u);
  EXPECT_EQ(bench->counter("nic.h1.responder.messages"), 2u);
}

TEST_F(UcTest, BadRkeyAndMissingRecvAreDroppedAndCountedNotAnswered) {
  Build();
  Run([&] {
    MakeUc();
    const std::vector<uint8_t> b0 = pair.b.prefill(6);
    pair.a.prefill(7);
    ASSERT_EQ(Write(1, 0, 3000, 1000, MPR_WQE_RDMA_WRITE, 0x100), 0);  // wrong key
    ASSERT_EQ(Write(2, 0, 100, pair.b.len - 50), 0);                   // beyond the region's end
    ASSERT_EQ(Send(3, 0, 200), 0);                                     // no RECV posted
    const auto s = WaitWcs(*pair.a.ctx, pair.a.scq, 3);
    ASSERT_EQ(s.size(), 3u);
    for (const mpr_wc& w : s) EXPECT_EQ(w.status, MPR_CQE_SUCCESS);  // nobody tells the sender
    sc_core::wait(Us(20));
    EXPECT_TRUE(SameBytes(pair.b.get(0, pair.b.len), b0));
    EXPECT_TRUE(StaysEmpty(*pair.b.ctx, pair.b.rcq));
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_RTS);
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_RTS);
    // The connection still works.
    Recv(4, 8192, 512);
    ASSERT_EQ(Send(4, 0, 300), 0);
    EXPECT_EQ(WaitWc(*pair.b.ctx, pair.b.rcq).byte_len, 300u);
  });
  // The 3000-byte WRITE: its FIRST fails the check, its 2 later packets
  // are the rest of a dropped message.
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.access"), 2u);
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.discarding"), 2u);
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.no_recv"), 1u);
  EXPECT_EQ(bench->counter("nic.h1.mac.tx_packets"), 0u);
}

TEST_F(UcTest, WriteWithoutRemoteWriteAccessIsDropped) {
  Build();
  Run([&] {
    MakeUc(0, MPR_ACCESS_LOCAL_WRITE);  // MR and QP without REMOTE_WRITE
    const std::vector<uint8_t> b0 = pair.b.prefill(8);
    ASSERT_EQ(Write(1, 0, 64, 0), 0);
    EXPECT_EQ(WaitWc(*pair.a.ctx, pair.a.scq).status, MPR_CQE_SUCCESS);
    sc_core::wait(Us(20));
    EXPECT_TRUE(SameBytes(pair.b.get(0, pair.b.len), b0));
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.access"), 1u);
}

TEST_F(UcTest, SendLongerThanItsRecvFailsTheRecvAndTheQp) {
  Build();
  Run([&] {
    MakeUc();
    Recv(1, 0, 1000);
    ASSERT_EQ(Send(1, 8192, 2500), 0);
    const mpr_wc r = WaitWc(*pair.b.ctx, pair.b.rcq);
    EXPECT_EQ(r.status, MPR_CQE_LOC_LEN_ERR);
    EXPECT_EQ(r.syndrome, MPR_SYN_RECV_TOO_SMALL);
    EXPECT_EQ(r.wr_id, 1u);
    EXPECT_EQ(pair.b.query().qp_state, MPR_QPS_ERR);
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_RTS);  // nobody told the sender
  });
  EXPECT_EQ(bench->counter("nic.h1.responder.uc_drops.length"), 1u);
  EXPECT_EQ(bench->counter("nic.h1.mac.tx_packets"), 0u);
}

TEST_F(UcTest, ReadAndAtomicsFailTheWqeWithALocalQpOperationError) {
  Build();
  Run([&] {
    MakeUc();
    const mpr_sge sge = pair.a.sge(0, 64);
    ASSERT_EQ(pair.a.ctx->post_send(pair.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &sge, pair.b, 0)),
              0);
    const mpr_wc w = WaitWc(*pair.a.ctx, pair.a.scq);
    EXPECT_EQ(w.status, MPR_CQE_LOC_QP_OP_ERR);
    EXPECT_EQ(w.syndrome, MPR_SYN_UNSUPPORTED);
    EXPECT_EQ(w.wr_id, 1u);
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_ERR);
  });
  EXPECT_EQ(bench->counter("nic.h0.requester.uc_packets"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.mac.tx_packets"), 0u);
  EXPECT_EQ(bench->counter("nic.h0.requester.wqe_errors"), 1u);
}

TEST_F(UcTest, AtomicFailsTheWqe) {
  Build();
  Run([&] {
    MakeUc();
    const mpr_sge sge = pair.a.sge(0, 8);
    mpr_send_wr wr = RemoteWrTo(5, MPR_WQE_ATOMIC_FA, &sge, pair.b, 0);
    wr.compare_add = 1;
    ASSERT_EQ(pair.a.ctx->post_send(pair.a.qp, wr), 0);
    const mpr_wc w = WaitWc(*pair.a.ctx, pair.a.scq);
    EXPECT_EQ(w.status, MPR_CQE_LOC_QP_OP_ERR);
    EXPECT_EQ(w.wr_id, 5u);
  });
  EXPECT_EQ(bench->counter("nic.h0.mac.tx_packets"), 0u);
}

TEST_F(UcTest, ModifyQpRefusesWhatUcDoesNotHave) {
  Build();
  Run([&] {
    PairOptions o;
    o.caps.qp_type = MPR_QPT_UC;
    o.connect = false;
    pair = bench->make_pair(o);
    host::VerbsContext& ctx = *pair.a.ctx;
    host::QueuePair* qp = pair.a.qp;
    mpr_qp_attr a{};
    // RESET -> RTR skips INIT.
    a.attr_mask = MPR_QP_ATTR_STATE;
    a.qp_state = MPR_QPS_RTR;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_STATE);
    // RESET -> INIT needs the access flags (as RC) and refuses a Q_Key (UD's).
    a = mpr_qp_attr{};
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT;
    a.qp_state = MPR_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask |= MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_QKEY;
    a.access_flags = MPR_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask &= ~uint32_t{MPR_QP_ATTR_QKEY};
    ASSERT_TRUE(ctx.modify_qp(qp, a).ok());
    // INIT -> RTR: the RC responder's min_rnr_timer and max_dest_rd_atomic
    // are refused.
    const auto bi = pair.b.ctx->local_info(pair.b.qp, pair.b.psn);
    a = mpr_qp_attr{};
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                  MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_MIN_RNR_TIMER;
    a.qp_state = MPR_QPS_RTR;
    a.path_mtu = MPR_MTU_1024;
    a.dest_qpn = bi.qpn;
    a.hop_limit = 64;
    // The peer's IPv4-mapped GID.
    a.dgid[10] = a.dgid[11] = 0xff;
    for (int i = 0; i < 4; ++i) a.dgid[12 + i] = static_cast<uint8_t>(bi.ip >> (24 - 8 * i));
    std::memcpy(a.dmac, bi.mac.data(), 6);
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask ^= MPR_QP_ATTR_MIN_RNR_TIMER | MPR_QP_ATTR_MAX_DEST_RD_ATOMIC;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask &= ~uint32_t{MPR_QP_ATTR_MAX_DEST_RD_ATOMIC};
    ASSERT_TRUE(ctx.modify_qp(qp, a).ok());
    // RTR -> RTS: the requester's timeout and retry counts are refused.
    a = mpr_qp_attr{};
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_TIMEOUT;
    a.qp_state = MPR_QPS_RTS;
    a.timeout = 14;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_RETRY_CNT;
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask = MPR_QP_ATTR_STATE;  // the SQ PSN is required
    EXPECT_EQ(ctx.modify_qp(qp, a).status, MPR_CMD_BAD_ATTR);
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_SQ_PSN;
    ASSERT_TRUE(ctx.modify_qp(qp, a).ok());
    EXPECT_EQ(pair.a.query().qp_state, MPR_QPS_RTS);
    // A UC QP has no transport engine to choose: only the default or
    // go-back-N's slot.
    host::QpCaps caps;
    caps.qp_type = MPR_QPT_UC;
    caps.transport = MPR_TRANSPORT_MP_RDMA;
    EXPECT_THROW(ctx.create_qp(pair.a.pd, pair.a.scq, pair.a.rcq, caps), host::VerbsError);
  });
}

}  // namespace
}  // namespace mprdma::test
