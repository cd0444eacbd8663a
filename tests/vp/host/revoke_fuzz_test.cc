// Fuzzing what software takes back while the NIC uses it: in each round a
// fresh QP pair moves random requests (WRITE, READ, SEND, atomics, up to
// 48 KiB) and, at a random moment, one side deregisters its region, destroys
// its QP, or the host's IOMMU takes away the memory of a ring, a completion
// queue, its record or a region's pages (RootComplex::revoke_dma), on every
// engine. Whatever happens to the round's requests (they may fail, or never
// complete when their CQ's memory is gone), the NICs must:
//   - never let an exception out of a block (the harness fails the test);
//   - never touch a deregistered region once DEREG_MR has completed (its
//     bytes do not change after it, besides writes already on the PCIe link);
//   - keep working: the next round's pair, and a pair made at the end, move
//     data exactly.
// MPRDMA_FUZZ_SEED / MPRDMA_FUZZ_ROUNDS for a longer hunt; MPRDMA_FUZZ_TRACE=1
// prints every round.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>

#include <array>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/fuzz_stream.h"
#include "tests/vp/host/two_hosts.h"
#include "vp/nic/context_memory.h"

namespace mprdma::test {
namespace {

using fuzz::Rounds;
using fuzz::Stream;
using fuzz::Trace;

constexpr uint64_t kSlice = 48 << 10;  // each request's part of both buffers

enum class Take {
  nothing,
  dereg_local,   // the requester's region
  dereg_remote,  // the responder's region
  destroy_local,
  destroy_remote,
  sq_ring,       // the requester's send ring (IOMMU)
  rq_ring,       // the responder's receive ring
  cq_ring,       // the requester's send CQ ring and its record
  remote_pages,  // the responder region's pages
  count
};

const char* Name(Take t) {
  static const std::array<const char*, static_cast<size_t>(Take::count)> kNames = {
      "nothing", "dereg_local", "dereg_remote", "destroy_local", "destroy_remote",
      "sq_ring", "rq_ring",     "cq_ring",      "remote_pages"};
  return kNames[static_cast<size_t>(t)];
}

class RevokeFuzzTest : public PerTransportTest {};

TEST_P(RevokeFuzzTest, TakingThingsAwayMidTransferNeverCorruptsOrStopsTheNic) {
  std::mt19937_64 rng = Stream("revoke-" + GetParam());
  const int kRounds = Rounds(200);
  std::map<std::string, int> outcomes;
  Run(
      [&] {
        for (int round = 0; round < kRounds && !::testing::Test::HasFailure(); ++round) {
          PairOptions o;
          o.buf_bytes = 6 * kSlice;
          o.timeout = 8;  // 1 ms: a destroyed peer is given up on quickly
          o.retry_cnt = 2;
          o.rnr_retry = 1;
          QpPair p = bench->make_pair(o);
          p.a.prefill(round * 2);
          p.b.prefill(round * 2 + 1);
          const Take take = static_cast<Take>(rng() % static_cast<uint64_t>(Take::count));
          const int n = 1 + static_cast<int>(rng() % 5);
          for (int i = 0; i < n; ++i) {
            const mpr_sge r = p.b.sge(kSlice * i, static_cast<uint32_t>(kSlice));
            ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(i, &r, 1)), 0);
          }
          for (int i = 0; i < n; ++i) {
            static const uint8_t kOps[] = {MPR_WQE_RDMA_WRITE, MPR_WQE_RDMA_READ, MPR_WQE_SEND,
                                           MPR_WQE_ATOMIC_FA};
            const uint8_t op = kOps[rng() % 4];
            const uint32_t len = op == MPR_WQE_ATOMIC_FA ? 8 : 1 + rng() % kSlice;
            const mpr_sge s = p.a.sge(kSlice * i, len);
            mpr_send_wr wr = RemoteWrTo(i, op, &s, p.b, kSlice * i);
            wr.compare_add = 1;
            ASSERT_EQ(p.a.ctx->post_send(p.a.qp, wr), 0);
          }
          sc_core::wait(sc_core::sc_time(static_cast<double>(rng() % 40000), sc_core::SC_NS));
          // Take something away. A deregistered region must not change from
          // 5 us after DEREG_MR returns (writes already posted on the link
          // land within that).
          const Endpoint* frozen = nullptr;
          pcie::RootComplex& rc0 = bench->h0().root_complex();
          pcie::RootComplex& rc1 = bench->h1().root_complex();
          const mpr_qpc* qa = bench->h0().nic().contexts().qp(p.a.qpn());
          const mpr_qpc* qb = bench->h1().nic().contexts().qp(p.b.qpn());
          switch (take) {
            case Take::nothing:
              break;
            case Take::dereg_local:
              p.a.ctx->dereg_mr(p.a.mr);
              frozen = &p.a;
              break;
            case Take::dereg_remote:
              p.b.ctx->dereg_mr(p.b.mr);
              frozen = &p.b;
              break;
            case Take::destroy_local:
              p.a.ctx->destroy_qp(p.a.qp);
              break;
            case Take::destroy_remote:
              p.b.ctx->destroy_qp(p.b.qp);
              break;
            case Take::sq_ring:
              rc0.revoke_dma(qa->sq_base, uint64_t{1} << (qa->sq_log_size + qa->sq_log_stride));
              break;
            case Take::rq_ring:
              rc1.revoke_dma(qb->rq_base, uint64_t{1} << (qb->rq_log_size + qb->rq_log_stride));
              break;
            case Take::cq_ring:
              rc0.revoke_dma(p.a.scq->ring_pa, sizeof(mpr_cqe) << p.a.scq->dp.log_size);
              rc0.revoke_dma(p.a.scq->dbrec_pa, 4);
              break;
            case Take::remote_pages:
              for (uint64_t off = 0; off < p.b.len; off += 4096)
                rc1.revoke_dma(p.b.as().translate(p.b.va(off)), 4096);
              break;
            case Take::count:
              break;
          }
          sc_core::wait(Us(5));
          const std::vector<uint8_t> snapshot =
              frozen ? frozen->get(0, frozen->len) : std::vector<uint8_t>{};
          // The round's completions, as many as come (bounded wait).
          int done = 0, errors = 0;
          const sc_core::sc_time end = sc_core::sc_time_stamp() + Ms(12);
          while (done < n && sc_core::sc_time_stamp() < end) {
            mpr_wc wc{};
            if (p.a.ctx->poll_cq(p.a.scq, 1, &wc) == 1) {
              ++done;
              errors += wc.status != MPR_CQE_SUCCESS;
              continue;
            }
            sc_core::wait(end - sc_core::sc_time_stamp(), p.a.scq->written);
          }
          sc_core::wait(Ms(1));
          if (frozen) {
            SCOPED_TRACE(std::string("round ") + std::to_string(round) + ": " + Name(take));
            EXPECT_TRUE(SameBytes(frozen->get(0, frozen->len), snapshot))
                << "the NIC wrote into a region after DEREG_MR completed";
          }
          const std::string outcome = std::string(Name(take)) + ": " + std::to_string(done) + "/" +
                                      std::to_string(n) + " completed, " + std::to_string(errors) +
                                      " with errors";
          if (Trace()) std::cout << "round " << round << " " << outcome << "\n";
          ++outcomes[std::string(Name(take)) + (done == n ? " all completed" : " some lost")];
          rc0.restore_dma();
          rc1.restore_dma();
        }
        QpPair after = bench->make_pair();
        ExpectHealthy(after, 77);
      },
      Ms(2000));
  for (const auto& [what, count] : outcomes) std::cout << "  " << what << ": " << count << "\n";
}

INSTANTIATE_TEST_SUITE_P(Engines, RevokeFuzzTest,
                         ::testing::Values("gbn", "dcqcn", "mprdma", "irn"), TransportName);

}  // namespace
}  // namespace mprdma::test
