// Fuzzing from a hostile peer: frames forged from nothing (forge.h), of
// every opcode (the 21 RC, the 2 UD, CNPs and bytes that are none of them),
// with and without each trailer (data, ACK, Read ACK, garbage), to QPs of
// every type and state (RC in RESET, INIT, RTR, RTS and ERR, UD in RTS, QP
// numbers nobody holds), on every engine, from the connected peer's address
// and from others, with PSNs near the expected one and anywhere, keys that
// are valid and keys that are not. Unlike the wire fuzz test (which corrupts
// a real exchange), nothing here is a well-formed conversation.
//
// Whatever arrives, the receiving NIC must:
//   - never let an exception out of a block (the harness, two_hosts.h,
//     fails the test with the exception's text if one reaches the kernel);
//   - never write outside a registered region (the guards around h1's
//     regions keep their pattern);
//   - keep working: a QP pair created after the storm moves data exactly.
// A forged frame from the peer's address with the right PSN and key may
// legitimately change a QP (a fatal NAK fails it, a WRITE lands in its
// region): that is the protocol, not a fault.
//
// MPRDMA_FUZZ_SEED and MPRDMA_FUZZ_ROUNDS for a longer hunt;
// MPRDMA_FUZZ_TRACE=1 prints every frame.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "support/fuzz_stream.h"
#include "tests/vp/host/forge.h"
#include "tests/vp/host/two_hosts.h"
#include "vp/net/cnp.h"

namespace mprdma::test {
namespace {

using fuzz::Rounds;
using fuzz::Stream;
using fuzz::Trace;

constexpr uint32_t kQkey = 0x11111111;
constexpr uint64_t kGuard = 64 << 10;  // bytes before and after each region

// A QP on h1 the frames aim at, with what a forger would try near it.
struct Target {
  std::string what;
  uint32_t qpn = 0;
  uint32_t psn = 0;  // the PSN its peer would send next
  uint32_t rkey = 0;
  uint64_t va = 0;
  uint64_t len = 0;
};

// An endpoint whose buffer is a region with guards on both sides.
struct Guarded {
  Endpoint e;
  std::vector<uint8_t> image;  // the whole buffer before the storm
};

class FrameFuzzTest : public TwoHostsTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TwoHostsTest::SetUp();
    TwoHosts::Options o;
    o.transport = GetParam();
    o.relay = true;
    Build(o);
  }

  // Endpoints on both hosts whose h1 side registers only the middle of its
  // buffer: the rest is the guard.
  QpPair GuardedPair(const PairOptions& base, bool connect) {
    PairOptions o = base;
    o.buf_bytes = 3 * kGuard;
    o.connect = false;
    QpPair p = bench->make_pair(o);
    p.b.ctx->dereg_mr(p.b.mr);
    p.b.mr = p.b.ctx->reg_mr(p.b.pd, p.b.va(kGuard), kGuard, kAllAccess);
    if (connect) bench->connect(p.a, p.b, o);
    return p;
  }

  net::PacketPtr Frame(std::mt19937_64& rng, const std::vector<Target>& targets) {
    auto pick = [&](uint64_t n) { return rng() % n; };
    auto chance = [&](int percent) { return static_cast<int>(pick(100)) < percent; };
    const Target& t = targets[pick(targets.size())];
    net::RoceFields f = FromH0ToH1();
    // The QP: one of the targets, a neighbour of one, or any number.
    f.dest_qp = chance(80) ? t.qpn : chance(50) ? (t.qpn + 1) & 0xffffff : pick(1u << 24);
    if (chance(10)) f.src_ip = 0x0A000000u | static_cast<uint32_t>(pick(256));
    if (chance(5)) f.pkey = static_cast<uint16_t>(rng());
    f.ecn = static_cast<uint8_t>(pick(4));
    f.udp_sport = static_cast<uint16_t>(0xC000 | pick(0x4000));
    f.psn = (chance(70) ? t.psn + static_cast<uint32_t>(pick(129)) - 64 : rng()) & 0xffffff;
    f.ack_req = chance(50);
    f.solicited = chance(20);
    const bool valid_key = chance(60);
    f.reth_rkey = valid_key ? t.rkey : static_cast<uint32_t>(rng());
    f.reth_va = valid_key && t.len ? t.va + pick(t.len) : rng();
    f.reth_dma_len = chance(80) ? static_cast<uint32_t>(pick(3000))
                                : static_cast<uint32_t>(rng());  // huge ones too
    f.atomic_rkey = f.reth_rkey;
    f.atomic_va = chance(70) ? (f.reth_va & ~7ull) : f.reth_va;
    f.atomic_swap_add = rng();
    f.atomic_compare = rng();
    f.aeth_syndrome = static_cast<uint8_t>(rng());
    f.aeth_msn = static_cast<uint32_t>(rng()) & 0xffffff;
    f.atomic_ack_orig = rng();
    f.imm = static_cast<uint32_t>(rng());
    f.deth_qkey = chance(50) ? kQkey : static_cast<uint32_t>(rng());
    f.deth_src_qp = static_cast<uint32_t>(rng()) & 0xffffff;
    // The opcode: any RC or UD one, or a CNP.
    const uint32_t kinds = net::kNumOpcodes + 3;
    const uint32_t k = static_cast<uint32_t>(pick(kinds));
    if (k == kinds - 1) {
      f.ecn = 0;
      return net::build_cnp(f);
    }
    f.opcode = k < net::kNumOpcodes    ? static_cast<net::Opcode>(k)
               : k == net::kNumOpcodes ? net::Opcode::UD_SEND_ONLY
                                       : net::Opcode::UD_SEND_ONLY_WITH_IMMEDIATE;
    std::vector<uint8_t> payload;
    if (net::has_payload(f.opcode)) {
      const size_t n = chance(30) ? 1024 : pick(1100);
      payload.resize(n);
      for (uint8_t& b : payload) b = static_cast<uint8_t>(rng());
    }
    std::vector<uint8_t> trailer;
    switch (pick(5)) {
      case 0:
        break;  // none
      case 1: {
        net::MpDataExt x;
        x.msn = static_cast<uint32_t>(chance(50) ? pick(4) : rng() & 0xffffff);
        x.ipsn = static_cast<uint32_t>(chance(50) ? pick(4) : rng() & 0xffffff);
        x.retx = chance(30);
        x.sync = chance(10);
        x.tail = chance(50);
        trailer = DataTrailer(x);
        break;
      }
      case 2:
      case 3: {
        net::MpAckExt x;
        x.echo_vp = f.udp_sport;
        x.sack = (t.psn + static_cast<uint32_t>(pick(65)) - 32) & 0xffffff;
        x.aack = (x.sack - static_cast<uint32_t>(pick(8))) & 0xffffff;
        x.ece = chance(20);
        x.retx = chance(20);
        x.nack = chance(30);
        x.read = chance(40);
        trailer = AckTrailer(x);
        break;
      }
      default:
        trailer.resize(chance(50) ? net::kMpDataExtBytes : net::kMpAckExtBytes);
        for (uint8_t& b : trailer) b = static_cast<uint8_t>(rng());
    }
    // A trailer on an opcode without payload is what the MP-RDMA and IRN
    // ACKs and READ requests look like; on others the receiver must cope.
    if (Trace())
      std::cout << "[" << sc_core::sc_time_stamp() << "] " << t.what << ": "
                << net::to_string(f.opcode) << " qp " << f.dest_qp << " psn " << f.psn << " from "
                << net::ipv4_text(f.src_ip) << " payload " << payload.size() << " trailer "
                << trailer.size() << "\n";
    try {
      return Forge(f, payload, trailer);
    } catch (const std::invalid_argument&) {
      // build_roce refuses payload on opcodes that carry none: send the
      // trailer alone then (or nothing).
      return Forge(f, {}, trailer);
    }
  }
};

TEST_P(FrameFuzzTest, ForgedFramesOfEveryKindToEveryQpStateChangeNothingElse) {
  std::mt19937_64 rng = Stream("frames-" + GetParam());
  const int kFrames = Rounds(20000);
  Run(
      [&] {
        PairOptions o;
        std::vector<Guarded> guarded;
        std::vector<Target> targets;
        auto add = [&](const std::string& what, Endpoint& e, uint32_t psn) {
          targets.push_back(Target{what, e.qpn(), psn, e.mr.key, e.mr.va, e.mr.length});
        };
        // RC in RTS (and its peer on h0 in RTS), in RTR, INIT, RESET, ERR.
        QpPair rts = GuardedPair(o, true);
        add("rts", rts.b, rts.a.psn);
        QpPair rtr = GuardedPair(o, false);
        {
          const auto ai = rtr.a.ctx->local_info(rtr.a.qp, rtr.a.psn);
          const auto bi = rtr.b.ctx->local_info(rtr.b.qp, rtr.b.psn);
          rtr.b.ctx->connect(rtr.b.qp, bi, ai, o.path_mtu, o.access, o.timeout, o.retry_cnt,
                             o.rnr_retry, o.max_rd_atomic, 0, /*to_rts=*/false);
        }
        add("rtr", rtr.b, rtr.a.psn);
        QpPair reset = GuardedPair(o, false);
        add("reset", reset.b, 0);
        QpPair err = GuardedPair(o, true);
        mpr_qp_attr to_err{};
        to_err.attr_mask = MPR_QP_ATTR_STATE;
        to_err.qp_state = MPR_QPS_ERR;
        ASSERT_TRUE(err.b.ctx->modify_qp(err.b.qp, to_err).ok());
        add("err", err.b, err.a.psn);
        QpPair init = GuardedPair(o, false);
        mpr_qp_attr to_init{};
        to_init.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT |
                            MPR_QP_ATTR_ACCESS_FLAGS;
        to_init.qp_state = MPR_QPS_INIT;
        to_init.port_num = 1;
        to_init.access_flags = kAllAccess;
        ASSERT_TRUE(init.b.ctx->modify_qp(init.b.qp, to_init).ok());
        add("init", init.b, 0);
        PairOptions uo;
        uo.caps.qp_type = MPR_QPT_UD;
        QpPair ud = GuardedPair(uo, false);
        ud.a.ctx->activate_ud(ud.a.qp, kQkey, ud.a.psn);
        ud.b.ctx->activate_ud(ud.b.qp, kQkey, ud.b.psn);
        add("ud", ud.b, ud.a.psn);
        // RECVs posted, so that SENDs have somewhere to go.
        for (QpPair* p : {&rts, &rtr, &ud})
          for (uint64_t i = 0; i < 8; ++i) {
            const mpr_sge r = p->b.sge(kGuard + 4096 * i, 4096);
            ASSERT_EQ(p->b.ctx->post_recv(p->b.qp, RecvWr(i, &r, 1)), 0);
          }
        for (QpPair* p : {&rts, &rtr, &reset, &err, &init, &ud})
          guarded.push_back(Guarded{p->b, p->b.prefill(17 + guarded.size())});

        // A forged frame that is right enough (the peer's address, a PSN in
        // the window, a fatal NAK or a bad request) fails its QP, as IB
        // says: every batch the live QPs that failed are brought back
        // (RESET, then connected again with new PSNs), so that the storm
        // keeps reaching QPs in every state, and the RTS pair keeps real
        // requests of its own outstanding for the forged ACKs, NAKs and
        // responses to meet.
        uint32_t epoch = 0;
        auto revive = [&](QpPair& p, bool to_rts, size_t target) {
          const uint8_t want = to_rts ? MPR_QPS_RTS : MPR_QPS_RTR;
          if (p.b.query().qp_state == want && p.a.query().qp_state == MPR_QPS_RTS) return;
          mpr_qp_attr to_reset{};
          to_reset.attr_mask = MPR_QP_ATTR_STATE;
          to_reset.qp_state = MPR_QPS_RESET;
          ASSERT_TRUE(p.a.ctx->modify_qp(p.a.qp, to_reset).ok());
          ASSERT_TRUE(p.b.ctx->modify_qp(p.b.qp, to_reset).ok());
          ++epoch;
          p.a.psn = (0x1000 + epoch * 0x10000) & 0xffffff;
          p.b.psn = (0x2000 + epoch * 0x10000) & 0xffffff;
          const auto ai = p.a.ctx->local_info(p.a.qp, p.a.psn);
          const auto bi = p.b.ctx->local_info(p.b.qp, p.b.psn);
          p.a.ctx->connect(p.a.qp, ai, bi, o.path_mtu, o.access);
          p.b.ctx->connect(p.b.qp, bi, ai, o.path_mtu, o.access, o.timeout, o.retry_cnt,
                           o.rnr_retry, o.max_rd_atomic, 0, to_rts);
          targets[target].psn = p.a.psn;
          for (uint64_t i = 0; i < 8; ++i) {
            const mpr_sge r = p.b.sge(kGuard + 4096 * i, 4096);
            ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(i, &r, 1)), 0);
          }
        };
        for (int i = 0; i < kFrames; ++i) {
          if (i % 250 == 0) {
            revive(rts, true, 0);
            revive(rtr, false, 1);
            // b's own requests to a, whose answers the forged frames meet.
            for (uint8_t op : {MPR_WQE_RDMA_WRITE, MPR_WQE_RDMA_READ, MPR_WQE_ATOMIC_FA}) {
              const mpr_sge s = rts.b.sge(kGuard + 32768, op == MPR_WQE_ATOMIC_FA ? 8 : 3000);
              mpr_send_wr wr = RemoteWrTo(i + op, op, &s, rts.a, 64);
              wr.flags = 0;  // unsignaled: nothing to reap (errors still complete)
              rts.b.ctx->post_send(rts.b.qp, wr);
            }
            mpr_wc wc[16];
            while (rts.b.ctx->poll_cq(rts.b.scq, 16, wc) > 0) {
            }
            while (rts.b.ctx->poll_cq(rts.b.rcq, 16, wc) > 0) {
            }
          }
          bench->relay().inject(0, Frame(rng, targets));
          // A frame every 100 ns (about the wire time of a large one), so
          // the receive pipeline is busy and frames overlap in the NIC.
          sc_core::wait(sc_core::sc_time(100, sc_core::SC_NS));
        }
        sc_core::wait(Ms(2));  // let every answer and timer settle

        for (const Guarded& g : guarded) {
          SCOPED_TRACE("QP " + std::to_string(g.e.qpn()) + "'s guards");
          const std::vector<uint8_t> now = g.e.get(0, g.e.len);
          EXPECT_TRUE(SameBytes({now.begin(), now.begin() + kGuard},
                                {g.image.begin(), g.image.begin() + kGuard}));
          EXPECT_TRUE(
              SameBytes({now.end() - kGuard, now.end()}, {g.image.end() - kGuard, g.image.end()}));
        }
        // Where the frames went: the storm must reach the QPs' logic, not
        // only the MAC's checks.
        std::cout << "  " << kFrames << " frames to h1:";
        for (const char* c : {"mac.rx_drops", "rx.pkey_drops", "rx.foreign_drops",
                              "responder.packets", "responder.duplicates", "responder.dropped",
                              "responder.ooo_drops", "responder.fatal_naks", "responder.ud_drops",
                              "requester.bad_responses", "requester.acks", "requester.naks"})
          std::cout << " " << c << " " << bench->counter(std::string("nic.h1.") + c);
        std::cout << "\n";
        EXPECT_GT(bench->counter("nic.h1.responder.packets"), 0u) << "no forged request executed";
        // The NICs still work for a QP pair made now.
        QpPair after = bench->make_pair();
        ExpectHealthy(after, 99);
      },
      Ms(200));
}

INSTANTIATE_TEST_SUITE_P(Engines, FrameFuzzTest,
                         ::testing::Values("gbn", "dcqcn", "mprdma", "irn", "mprdma_lockstep",
                                           "gbn_lockstep"),
                         TransportName);

}  // namespace
}  // namespace mprdma::test
