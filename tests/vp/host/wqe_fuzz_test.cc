// Mutation fuzzing of the send queue between two modeled hosts. Each round
// builds a valid WQE of a random kind (SEND, WRITE, READ, atomics, with or
// without immediate, inline, several SGEs, fence), lets the data-path
// library write it into the ring, then corrupts 0-4 of its bytes (a random
// byte, a flipped bit, 0x00 or 0xff) and hands it to the NIC by doorbell or
// by MMIO, sometimes naming another QP in the MMIO copy. One round in
// about nine instead sends a well-formed WQE that breaks one rule (an SGE or
// the remote range 1 B to 4 KiB across its MR's edge, a key with a bit
// flipped), which must fail with its exact status and syndrome; one RECV in
// four at the responder has a bit of its WQE flipped. A zero-length WRITE
// follows as a sentinel. Whatever the corruption, the NIC must:
//   - not crash the simulator, and complete every WQE exactly once, in
//     order: a failing WQE gets an error completion with a syndrome even
//     when its SIGNALED bit was cleared, the QP goes to ERR and the sentinel
//     is flushed; otherwise the sentinel succeeds;
//   - complete an uncorrupted WQE successfully, with the exact bytes moved
//     (checked against a shadow copy of both memory regions);
//   - never write outside the registered regions: each MR covers the middle
//     64 KiB of a 192 KiB buffer whose outer thirds must keep their pattern;
//   - keep receive completions in posting order, one per RECV at most;
//   - keep serving a healthy QP pair in another process afterwards.
// The rounds come from a fixed seed per transport (fuzz_support.h: how to
// run a longer hunt); a failure names the round, the WQE and its corruption.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <cstddef>
#include <map>

#include "support/log_capture.h"
#include "tests/vp/host/fuzz_support.h"

namespace mprdma::test {
namespace {

using namespace fuzz;  // NOLINT: the fuzz helpers are this file's vocabulary

class WqeFuzzTest : public PerTransportTest {};

TEST_P(WqeFuzzTest, CorruptedWqesCompleteOnceInOrderAndTouchOnlyTheirRegions) {
  std::mt19937_64 rng = Stream("wqe-" + GetParam());
  const int kRounds = Rounds(1000);
  std::map<std::string, int> outcomes;
  // The NIC warns about every refused doorbell and MMIO write: kept out of
  // the test's output, shown when it fails.
  LogCapture log("");
  Run(
      [&] {
        QpPair healthy = bench->make_pair();
        const PairOptions o = Options();
        QpPair p = bench->make_pair(o);
        ShrinkMrs(p);
        std::vector<uint8_t> image_a = p.a.prefill(11), image_b = p.b.prefill(12);
        Recvs recvs;
        uint32_t psn = 0x10;
        recvs.fill(p.b, 3, rng, 4);
        for (int round = 0; round < kRounds && !::testing::Test::HasFailure(); ++round) {
          const Request r = Generate(rng, /*violations=*/true);
          std::vector<mpr_sge> sg;
          const mpr_send_wr wr = r.wr(round, p.a, p.b, sg);

          // Write the clean WQE into the ring, then corrupt it there.
          mpr_dp_wq& sq = p.a.qp->dp.sq;
          const uint32_t index = sq.pi;
          ASSERT_EQ(mpr_dp_post_send(&p.a.qp->dp, &wr, 0), 0) << r.describe();
          uint8_t* slot = sq.buf + (size_t(index & ((1u << sq.log_size) - 1)) << sq.log_stride);
          const uint32_t used = 16u * (1u + reinterpret_cast<const mpr_wqe_ctrl*>(slot)->num_ds);
          static const int kMutations[] = {0, 0, 0, 1, 1, 1, 2, 2, 4};
          int mutations = kMutations[rng() % (sizeof kMutations / sizeof(int))];
          if (r.violation != Request::Violation::none) mutations = 0;
          std::ostringstream what;
          what << "round " << round << " (" << GetParam() << "): " << r.describe();
          for (int m = 0; m < mutations; ++m) {
            const uint32_t at =
                static_cast<uint32_t>(rng() % (rng() % 5 ? used : (1u << sq.log_stride)));
            const uint8_t before = slot[at];
            switch (rng() % 4) {
              case 0:
                slot[at] = static_cast<uint8_t>(rng());
                break;
              case 1:
                slot[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
                break;
              case 2:
                slot[at] = 0;
                break;
              default:
                slot[at] = 0xff;
                break;
            }
            what << "; byte " << at << " 0x" << std::hex << int(before) << "->0x" << int(slot[at])
                 << std::dec;
          }
          // Doorbell, or the MMIO window (sometimes naming another QP).
          bool foreign_bf = false;
          uint64_t expect_refused = 0;  // MMIO writes the host interface must refuse
          const uint64_t refused = bench->counter("nic.h0.hostif.bad_doorbells");
          if (rng() % 3 == 0 && used <= MPR_UAR_BF_SIZE) {
            // (A foreign QP only on a corrupted round: the rule-breaking and
            // clean rounds check exact outcomes.)
            uint8_t chunk[MPR_UAR_BF_SIZE] = {};
            const uint32_t len = (used + 63u) & ~63u;
            std::memcpy(chunk, slot, std::min<uint32_t>(len, 1u << sq.log_stride));
            uint32_t bf_qpn = p.a.qpn();
            if (rng() % 4 == 0 && mutations > 0) {
              bf_qpn = rng() % 2 ? healthy.a.qpn() : static_cast<uint32_t>(rng());
              foreign_bf = true;
            }
            std::memcpy(chunk + offsetof(mpr_wqe_ctrl, bf_qpn), &bf_qpn, 4);
            p.a.qp->dp.ops->uar_write_wc(p.a.qp->dp.ops->ctx, MPR_UAR_BF, chunk, len);
            // What the window makes of it: a WQE claiming more than the
            // window is refused; one claiming more lines than were written
            // waits for the rest (abandoned: the sentinel's doorbell hands
            // the ring slot over instead); a whole one naming a QP that is
            // not the writer's is refused.
            const uint32_t claimed = 16u * (1u + chunk[offsetof(mpr_wqe_ctrl, num_ds)]);
            if (claimed > MPR_UAR_BF_SIZE)
              expect_refused = 1;
            else if (((claimed + 63u) & ~63u) <= len)
              expect_refused = foreign_bf ? 1 : 0;
            what << "; by MMIO" << (foreign_bf ? " naming QP " + std::to_string(bf_qpn) : "");
          } else {
            mpr_dp_ring_sq(&p.a.qp->dp);
          }
          // A WQE that consumes a corrupted RECV has no predicted outcome.
          const bool recv_ok = !ConsumesRecv(r.op) || !recvs.front_corrupted();
          if (!recv_ok) what << "; consumes a corrupted RECV";
          SCOPED_TRACE(what.str());
          const bool violation = r.violation != Request::Violation::none && recv_ok;
          const bool clean = mutations == 0 && !foreign_bf && !violation && recv_ok;

          // The sentinel: a signaled zero-length WRITE, by doorbell.
          uint32_t sentinel = sq.pi;
          mpr_send_wr sw = SendWr(100000 + round, MPR_WQE_RDMA_WRITE, nullptr, 0);
          sw.remote_addr = p.b.va(kMrOff + kSentinelOff);
          sw.rkey = p.b.mr.key;
          ASSERT_EQ(mpr_dp_post_send(&p.a.qp->dp, &sw, 1), 0);

          // Completions up to the sentinel's.
          std::vector<mpr_wc> wcs;
          while (wcs.empty() || wcs.back().wqe_index != (sentinel & 0xffff)) {
            const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(40));
            ASSERT_NE(wc.status, 0xffffu) << "no completion for the sentinel";
            wcs.push_back(wc);
            ASSERT_LE(wcs.size(), 2u) << "more completions than WQEs: " << Describe(wcs);
          }
          if (Trace()) std::cout << what.str() << " -> " << Describe(wcs) << "\n";
          const bool fuzz_completed = wcs.size() == 2;
          if (fuzz_completed) {
            EXPECT_EQ(wcs[0].wqe_index, index & 0xffff);
            EXPECT_EQ(wcs[0].wr_id, uint64_t(round));
          }
          for (const mpr_wc& wc : wcs) {
            EXPECT_EQ(wc.qpn, p.a.qpn());
            EXPECT_EQ(wc.is_recv, 0);
          }
          const mpr_wc& last = wcs.back();
          const bool failed = fuzz_completed && wcs[0].status != MPR_CQE_SUCCESS;
          if (failed) {
            EXPECT_TRUE(AllowedStatus(wcs[0].status)) << "status " << wcs[0].status;
            EXPECT_NE(wcs[0].syndrome, uint32_t{MPR_SYN_NONE}) << "an error names its cause";
            EXPECT_EQ(last.status, uint32_t{MPR_CQE_WR_FLUSH_ERR}) << "the sentinel is flushed";
            ++outcomes["error status " + std::to_string(wcs[0].status) + " syndrome " +
                       std::to_string(wcs[0].syndrome)];
          } else {
            EXPECT_EQ(last.status, uint32_t{MPR_CQE_SUCCESS})
                << "the sentinel fails (syndrome " << last.syndrome << ") after a WQE that "
                << (fuzz_completed ? "succeeded" : "reported nothing");
            ++outcomes[clean ? "clean success" : "corrupted, success"];
          }

          if (violation) {
            ASSERT_TRUE(fuzz_completed) << "a WQE that breaks a rule completed silently";
            EXPECT_EQ(wcs[0].status, r.expected_status()) << "syndrome " << wcs[0].syndrome;
            EXPECT_EQ(wcs[0].syndrome, r.expected_syndrome());
          }

          // Let every packet of the round settle, then check memory.
          sc_core::wait(Us(30));
          recvs.drain(p.b);
          EXPECT_EQ(bench->counter("nic.h0.hostif.bad_doorbells") - refused, expect_refused)
              << "MMIO writes refused by the host interface";
          // A corrupted wqe_index given by MMIO claims that the ring holds
          // WQEs up to it (the window hands over "the newest WQE and, by its
          // index, every one before it"): once the QP is in error the NIC
          // flushes those slots too, stale ones included. Nothing else may
          // complete after the sentinel.
          for (mpr_wc extra{}; p.a.ctx->poll_cq(p.a.scq, 1, &extra) == 1;) {
            ++outcomes["flushed slot a corrupted index claimed"];
            EXPECT_TRUE(failed && mutations > 0)
                << "a completion after the sentinel's: " << Describe({extra});
            EXPECT_EQ(extra.status, uint32_t{MPR_CQE_WR_FLUSH_ERR});
            EXPECT_EQ(extra.wqe_index, (sentinel + 1) & 0xffff) << "out of order";
            ++sentinel;
          }
          ExpectGuardsIntact(p, image_a, image_b, "after the round");
          if (clean) {
            ASSERT_TRUE(fuzz_completed);
            ASSERT_EQ(wcs[0].status, uint32_t{MPR_CQE_SUCCESS})
                << "an uncorrupted WQE failed, syndrome " << wcs[0].syndrome;
            EXPECT_EQ(wcs[0].opcode, CqeOpcode(r.op));
            if (!IsAtomic(r.op)) {
              EXPECT_EQ(wcs[0].byte_len, r.len);
            }
            ApplyClean(r, image_a, image_b);
            EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), image_a)) << "requester memory";
            EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), image_b)) << "responder memory";
            if (ConsumesRecv(r.op)) {
              ASSERT_FALSE(recvs.completed().empty()) << "no receive completion";
              const mpr_wc& rc = recvs.completed().back();
              EXPECT_EQ(rc.status, uint32_t{MPR_CQE_SUCCESS});
              EXPECT_EQ(rc.byte_len, r.len);
              EXPECT_EQ(rc.imm_data, r.op == MPR_WQE_SEND ? 0u : r.imm);
            }
          } else {
            // What a corrupted WQE did inside the MRs is not predicted: take
            // it as the new reference.
            image_a = p.a.get(0, p.a.len);
            image_b = p.b.get(0, p.b.len);
          }
          recvs.completed().clear();

          // A QP in error (either side) is reset and connected again, with
          // new PSNs; its RECVs are gone with the reset.
          const uint8_t sa = p.a.query().qp_state, sb = p.b.query().qp_state;
          EXPECT_EQ(sa, failed ? MPR_QPS_ERR : MPR_QPS_RTS);
          if (!failed) {
            EXPECT_EQ(sb, MPR_QPS_RTS) << "the responder failed, the requester not";
          }
          if (sa != MPR_QPS_RTS || sb != MPR_QPS_RTS) {
            sc_core::wait(Us(30));
            recvs.drain(p.b);
            Reconnect(*bench, p, o, psn);
            recvs.clear();
          }
          recvs.fill(p.b, 3, rng, 4);
        }
        ExpectGuardsIntact(p, image_a, image_b, "at the end");
        ExpectHealthy(healthy, 77);
      },
      Ms(50.0 * kRounds));
  if (::testing::Test::HasFailure()) {
    const std::string text = log.text();
    std::cout << "last of the log:\n" << text.substr(text.size() > 4000 ? text.size() - 4000 : 0);
  }
  // The rounds must have exercised both sides of the NIC's checks.
  int errors = 0;
  for (const auto& [what, n] : outcomes) {
    std::cout << "  " << GetParam() << ": " << n << " x " << what << "\n";
    if (what.rfind("error", 0) == 0) errors += n;
  }
  EXPECT_GE(outcomes["clean success"], kRounds / 5);
  EXPECT_GE(errors, kRounds / 10);
}

INSTANTIATE_TEST_SUITE_P(Transport, WqeFuzzTest, ::testing::Values("gbn", "mprdma", "irn"),
                         TransportName);

}  // namespace
}  // namespace mprdma::test
