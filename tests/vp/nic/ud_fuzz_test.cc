// Seeded fuzzing of UD QPs between two modeled hosts: rounds of random
// datagram work requests (SEND or SEND_IMM, 0 B to a little over the MTU,
// inline or gathered, signaled or not; now and then an opcode UD does not
// take, a destination QP that does not exist or a wrong Q_Key) against a
// receiver with RECVs posted. What each round must show:
//   * the sender completes every signaled WQE once, in order, with the
//     status its WQE calls for (LOC_LEN_ERR beyond the MTU, LOC_QP_OP_ERR
//     for an opcode UD does not take); after the first error the QP is in
//     ERR and the rest are flushed;
//   * the receiver completes exactly the datagrams that were sent to its QP
//     with its Q_Key, in order, each with the GRH and the exact payload
//     (and the immediate of a SEND_IMM), and nothing else: datagrams for no
//     QP or with a wrong Q_Key are dropped, the RECVs they would have taken
//     stay posted;
//   * nothing outside the RECV buffers of the receiver changes.
// MPRDMA_FUZZ_SEED / MPRDMA_FUZZ_ROUNDS / MPRDMA_FUZZ_TRACE as for the
// other fuzz tests (tests/vp/host/fuzz_support.h).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <iostream>
#include <vector>

#include "vp/host/fuzz_support.h"
#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;
constexpr uint32_t kMtu = 1024;
constexpr uint32_t kGrh = 40;
constexpr uint64_t kBuf = 256 << 10;     // each endpoint's buffer
constexpr uint64_t kSrcOff = 128 << 10;  // sender: payloads gathered from here
constexpr uint32_t kRecvSlot = 2048;     // receiver: RECV k at k * kRecvSlot
constexpr int kRecvs = 16;

struct Datagram {
  uint64_t wr_id;
  uint8_t opcode;
  uint32_t len;
  uint32_t imm;
  bool signaled;
  bool to_receiver;  // its QP and Q_Key: the receiver must take it
  std::vector<uint8_t> payload;
};

class UdFuzzTest : public TwoHostsTest {
 protected:
  // One pair of processes (contexts, buffers, CQs) for the whole test; each
  // round gets new UD QPs in them (NewQps) and destroys them at its end, so
  // that thousands of rounds do not run out of UAR pages.
  QpPair MakeUd() {
    caps.qp_type = MPR_QPT_UD;
    caps.max_inline = 256;
    caps.max_send_wr = 64;
    caps.max_recv_wr = 64;
    PairOptions o;
    o.caps = caps;
    o.buf_bytes = kBuf;
    o.connect = false;
    QpPair p = bench->make_pair(o);
    p.a.ctx->destroy_qp(p.a.qp);
    p.b.ctx->destroy_qp(p.b.qp);
    return p;
  }
  void NewQps(QpPair& p) {
    for (Endpoint* e : {&p.a, &p.b}) {
      e->qp = e->ctx->create_qp(e->pd, e->scq, e->rcq, caps);
      e->ctx->activate_ud(e->qp, kQkey, e->psn);
    }
  }
  host::QpCaps caps;
};

TEST_F(UdFuzzTest, RandomDatagramsCompleteAsTheirWqesSayAndLandExactly) {
  Build();
  std::mt19937_64 rng = fuzz::Stream("ud_fuzz");
  const int rounds = fuzz::Rounds(150);
  auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
  int sent_ok = 0, received = 0, rejected = 0, dropped = 0;
  Run(
      [&] {
        QpPair p = MakeUd();
        for (int round = 0; round < rounds; ++round) {
          SCOPED_TRACE("round " + std::to_string(round));
          NewQps(p);
          const std::vector<uint8_t> a0 = p.a.prefill(1000 + round);
          const std::vector<uint8_t> b0 = p.b.prefill(2000 + round);
          for (int k = 0; k < kRecvs; ++k) {
            const mpr_sge s = p.b.sge(uint64_t(k) * kRecvSlot, kRecvSlot);
            ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(k, &s, 1)), 0);
          }
          const mpr_wqe_ud good =
              host::VerbsContext::ud_dest(p.b.ctx->local_info(p.b.qp, 0), kQkey);
          // The WQEs of the round; the last is signaled so that every one
          // is accounted for.
          const int n = 1 + int(below(12));
          std::vector<Datagram> d;
          bool posted_error = false;
          for (int i = 0; i < n; ++i) {
            Datagram g{};
            g.wr_id = uint64_t(i);
            const uint64_t r = below(100);
            g.opcode = r < 6    ? uint8_t(MPR_WQE_RDMA_WRITE + below(3))  // not for UD
                       : r < 30 ? uint8_t(MPR_WQE_SEND_IMM)
                                : uint8_t(MPR_WQE_SEND);
            g.len = below(8) == 0 ? kMtu + 1 + uint32_t(below(200)) : uint32_t(below(kMtu + 1));
            g.imm = uint32_t(rng());
            g.signaled = i == n - 1 || below(2) == 0;
            mpr_wqe_ud dest = good;
            const uint64_t w = below(100);
            if (w < 8)
              dest.remote_qpn = (good.remote_qpn + 1 + uint32_t(below(1000))) & 0xffffff;
            else if (w < 16)
              dest.qkey = kQkey ^ (1u + uint32_t(below(0x7fffffff)));
            else if (w < 24)
              dest.qkey = 0x80000000u;  // the sender's own Q_Key: kQkey too
            const bool valid =
                (g.opcode == MPR_WQE_SEND || g.opcode == MPR_WQE_SEND_IMM) && g.len <= kMtu;
            g.to_receiver = valid && !posted_error && w >= 16;
            if (!valid) posted_error = true;
            const uint64_t off = kSrcOff + below(64 << 10);
            g.payload.assign(a0.begin() + static_cast<std::ptrdiff_t>(off),
                             a0.begin() + static_cast<std::ptrdiff_t>(off + g.len));
            const mpr_sge sge = p.a.sge(off, g.len);
            uint8_t flags = g.signaled ? MPR_WQE_F_SIGNALED : 0;
            if (g.len <= 256 && below(2)) flags |= MPR_WQE_F_INLINE;
            // The library refuses opcodes UD does not take: post a SEND and
            // rewrite its opcode in the ring, as a faulty provider would.
            const bool forged = !(g.opcode == MPR_WQE_SEND || g.opcode == MPR_WQE_SEND_IMM);
            mpr_send_wr wr =
                SendWr(g.wr_id, forged ? uint8_t(MPR_WQE_SEND) : g.opcode, &sge, 1, flags);
            wr.ud = &dest;
            wr.imm_data = g.imm;
            if (fuzz::Trace())
              std::cerr << "round " << round << " wr " << i << " op " << int(g.opcode) << " len "
                        << g.len << (flags & MPR_WQE_F_INLINE ? " inline" : "")
                        << (g.signaled ? " signaled" : "") << " dest " << w << "\n";
            mpr_dp_wq& sq = p.a.qp->dp.sq;
            const uint32_t index = sq.pi;
            ASSERT_EQ(mpr_dp_post_send(&p.a.qp->dp, &wr, 0), 0);
            if (forged)
              sq.buf[size_t(index & ((1u << sq.log_size) - 1)) << sq.log_stride] = g.opcode;
            mpr_dp_ring_sq(&p.a.qp->dp);
            d.push_back(std::move(g));
          }
          // Sender: the signaled ones in order up to the first error, that
          // one with its status, then every later WQE flushed.
          std::vector<std::pair<uint64_t, uint32_t>> want;  // wr_id, status
          bool failed = false;
          for (const Datagram& g : d) {
            uint32_t st = MPR_CQE_SUCCESS;
            if (failed)
              st = MPR_CQE_WR_FLUSH_ERR;
            else if (g.opcode != MPR_WQE_SEND && g.opcode != MPR_WQE_SEND_IMM)
              st = MPR_CQE_LOC_QP_OP_ERR;
            else if (g.len > kMtu)
              st = MPR_CQE_LOC_LEN_ERR;
            if (st != MPR_CQE_SUCCESS || g.signaled) want.push_back({g.wr_id, st});
            if (st != MPR_CQE_SUCCESS && !failed) {
              failed = true;
              ++rejected;
            } else if (st == MPR_CQE_SUCCESS) {
              ++sent_ok;
            }
          }
          const std::vector<mpr_wc> sc = WaitWcs(*p.a.ctx, p.a.scq, int(want.size()), Ms(5), false);
          ASSERT_EQ(sc.size(), want.size()) << "sender completions";
          for (size_t i = 0; i < want.size(); ++i) {
            EXPECT_EQ(sc[i].wr_id, want[i].first) << "sender completion " << i;
            EXPECT_EQ(sc[i].status, want[i].second) << "sender completion " << i;
          }
          EXPECT_EQ(p.a.query().qp_state, failed ? MPR_QPS_ERR : MPR_QPS_RTS);
          // Receiver: exactly the datagrams for it, in order, then silence.
          std::vector<const Datagram*> arrive;
          for (const Datagram& g : d)
            if (g.to_receiver) arrive.push_back(&g);
          const std::vector<mpr_wc> rc =
              WaitWcs(*p.b.ctx, p.b.rcq, int(arrive.size()), Ms(5), false);
          ASSERT_EQ(rc.size(), arrive.size()) << "receiver completions";
          EXPECT_TRUE(StaysEmpty(*p.b.ctx, p.b.rcq, Us(20)));
          std::vector<uint8_t> b_want = b0;
          for (size_t k = 0; k < arrive.size(); ++k) {
            const Datagram& g = *arrive[k];
            EXPECT_EQ(rc[k].status, MPR_CQE_SUCCESS) << "receive " << k;
            EXPECT_EQ(rc[k].wr_id, k) << "receive " << k;
            EXPECT_EQ(rc[k].byte_len, kGrh + g.len) << "receive " << k;
            if (g.opcode == MPR_WQE_SEND_IMM) {
              EXPECT_EQ(rc[k].imm_data, g.imm) << "receive " << k;
            }
            // The GRH's first 40 bytes are the NIC's; the payload follows.
            const uint64_t at = uint64_t(k) * kRecvSlot;
            const std::vector<uint8_t> got = p.b.get(at, kGrh + g.len);
            std::copy(got.begin(), got.begin() + kGrh,
                      b_want.begin() + static_cast<std::ptrdiff_t>(at));
            std::copy(g.payload.begin(), g.payload.end(),
                      b_want.begin() + static_cast<std::ptrdiff_t>(at + kGrh));
          }
          received += int(arrive.size());
          dropped += int(d.size()) - int(arrive.size());
          EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b_want)) << "receiver memory";
          EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
          if (::testing::Test::HasFailure()) return;
          p.a.ctx->destroy_qp(p.a.qp);
          p.b.ctx->destroy_qp(p.b.qp);
        }
      },
      Ms(200 + 10 * rounds));
  std::cout << "UD fuzz: " << rounds << " rounds, " << sent_ok << " sent, " << received
            << " received, " << rejected << " rejected, " << dropped << " not received\n";
  EXPECT_GT(received, rounds);  // the fuzzing reached the receiver
  EXPECT_GT(rejected, rounds / 10);
}

}  // namespace
}  // namespace mprdma::test
