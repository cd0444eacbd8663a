// Mutation fuzzing of the send queue between two modeled hosts. Each round
// builds a valid WQE of a random kind (SEND, WRITE, READ, atomics, with or
// without immediate, inline, several SGEs, fence), lets the data-path
// library write it into the ring, then corrupts 0-4 of its bytes (a random
// byte, a flipped bit, 0x00 or 0xff) and hands it to the NIC by doorbell or
// by MMIO, sometimes naming another QP in the MMIO copy. A zero-length WRITE
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
// The rounds come from a fixed seed per transport; a failure names the
// round, the WQE and its corruption so that it can be replayed.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "tests/vp/host/two_hosts.h"

#include "support/log_capture.h"

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <map>

namespace mprdma::test {
namespace {

constexpr uint64_t kThird = 64 << 10;  // each endpoint's buffer: guard | MR | guard
constexpr uint64_t kMrOff = kThird;    // buffer offset of the MR
// Offsets in the peer's MR: WRITE/READ/atomic targets in [0, 32K), RECV
// buffers at 32K (16 KiB each, all the same bytes), the sentinel at 48K.
constexpr uint64_t kTargetSpan = 32 << 10;
constexpr uint64_t kRecvOff = 32 << 10;
constexpr uint32_t kRecvLen = 16 << 10;
constexpr uint64_t kSentinelOff = 48 << 10;
constexpr uint32_t kMaxInline = 128;
constexpr uint32_t kMaxSge = 4;

const char* OpName(uint8_t op) {
  switch (op) {
    case MPR_WQE_SEND: return "SEND";
    case MPR_WQE_SEND_IMM: return "SEND_IMM";
    case MPR_WQE_RDMA_WRITE: return "WRITE";
    case MPR_WQE_RDMA_WRITE_IMM: return "WRITE_IMM";
    case MPR_WQE_RDMA_READ: return "READ";
    case MPR_WQE_ATOMIC_CAS: return "CAS";
    case MPR_WQE_ATOMIC_FA: return "FETCH_ADD";
    default: return "?";
  }
}

bool ConsumesRecv(uint8_t op) {
  return op == MPR_WQE_SEND || op == MPR_WQE_SEND_IMM || op == MPR_WQE_RDMA_WRITE_IMM;
}

uint32_t CqeOpcode(uint8_t op) {
  switch (op) {
    case MPR_WQE_SEND:
    case MPR_WQE_SEND_IMM: return MPR_CQE_REQ_SEND;
    case MPR_WQE_RDMA_WRITE:
    case MPR_WQE_RDMA_WRITE_IMM: return MPR_CQE_REQ_RDMA_WRITE;
    case MPR_WQE_RDMA_READ: return MPR_CQE_REQ_RDMA_READ;
    case MPR_WQE_ATOMIC_CAS: return MPR_CQE_REQ_ATOMIC_CAS;
    default: return MPR_CQE_REQ_ATOMIC_FA;
  }
}

uint64_t Le64(const std::vector<uint8_t>& v, uint64_t off) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i) x = (x << 8) | v[off + i];
  return x;
}
void PutLe64(std::vector<uint8_t>& v, uint64_t off, uint64_t x) {
  for (int i = 0; i < 8; ++i) v[off + i] = static_cast<uint8_t>(x >> (8 * i));
}

// One round's WQE before corruption, and what it must do when uncorrupted.
struct Request {
  uint8_t op = 0;
  uint8_t flags = MPR_WQE_F_SIGNALED;
  uint32_t imm = 0;
  std::vector<int64_t> sge_offs;   // local SGEs: offsets from the MR's start
  std::vector<uint32_t> sge_lens;  // and lengths
  uint32_t len = 0;                // total bytes (8 for atomics)
  int64_t remote_off = 0;          // from the peer's MR's start
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // A well-formed WQE that breaks one rule, and the error it must get.
  enum class Violation { none, local_bounds, remote_bounds, bad_lkey, bad_rkey };
  Violation violation = Violation::none;
  uint32_t lkey_xor = 0, rkey_xor = 0;
  std::string describe() const {
    static const char* kViolation[] = {"", ", SGE across its MR's edge",
                                       ", remote range across the MR's edge",
                                       ", wrong lkey", ", wrong rkey"};
    std::ostringstream s;
    s << OpName(op) << " len " << len << " sges " << sge_lens.size() << " remote_off "
      << remote_off << " flags 0x" << std::hex << int(flags) << std::dec
      << kViolation[static_cast<int>(violation)];
    return s.str();
  }
  uint32_t expected_status() const {
    return violation == Violation::local_bounds || violation == Violation::bad_lkey
               ? MPR_CQE_LOC_PROT_ERR
               : MPR_CQE_REM_ACCESS_ERR;
  }
  uint32_t expected_syndrome() const {
    switch (violation) {
      case Violation::local_bounds: return MPR_SYN_LKEY_BOUNDS;
      case Violation::bad_lkey: return MPR_SYN_BAD_LKEY;
      default: return MPR_SYN_NAK_REM_ACCESS;
    }
  }
};

class WqeFuzzTest : public TwoHostsTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TwoHostsTest::SetUp();
    TwoHosts::Options o;
    o.transport = GetParam();
    Build(o);
  }

  PairOptions FuzzOptions() const {
    PairOptions o;
    o.caps.max_send_sge = kMaxSge;
    o.caps.max_inline = kMaxInline;
    o.caps.max_send_wr = 64;
    o.caps.max_recv_wr = 64;
    o.buf_bytes = 3 * kThird;
    o.timeout = 10;  // 4.2 ms: a lost request fails within ~10 ms
    o.retry_cnt = 1;
    o.rnr_retry = 1;
    return o;
  }

  // The pair's MRs shrink to the middle third of their buffers.
  void ShrinkMrs(QpPair& p) {
    for (Endpoint* e : {&p.a, &p.b}) {
      e->ctx->dereg_mr(e->mr);
      e->mr = e->ctx->reg_mr(e->pd, e->buf + kMrOff, kThird, kAllAccess);
    }
  }

  Request Generate(std::mt19937_64& rng) {
    auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
    Request r;
    static const uint8_t kOps[] = {MPR_WQE_SEND,      MPR_WQE_SEND_IMM,   MPR_WQE_RDMA_WRITE,
                                   MPR_WQE_RDMA_WRITE_IMM, MPR_WQE_RDMA_READ, MPR_WQE_ATOMIC_CAS,
                                   MPR_WQE_ATOMIC_FA};
    r.op = kOps[pick(sizeof kOps)];
    r.imm = static_cast<uint32_t>(rng());
    if (pick(4) == 0) r.flags |= MPR_WQE_F_FENCE;
    if (pick(4) == 0) r.flags |= MPR_WQE_F_SOLICITED;
    const bool atomic = r.op == MPR_WQE_ATOMIC_CAS || r.op == MPR_WQE_ATOMIC_FA;
    if (atomic) {
      r.len = 8;
      r.sge_offs = {int64_t(8 * pick(kThird / 8))};
      r.sge_lens = {8};
      r.remote_off = 8 * pick(kTargetSpan / 8);
      r.compare_add = rng();
      r.swap = rng();
      if (pick(2)) r.compare_add = 0;  // sometimes a CAS that matches nothing special
    } else {
      const uint64_t size_class = pick(4);
      r.len = size_class == 0 ? 0
              : size_class == 1 ? 1 + static_cast<uint32_t>(pick(64))
              : size_class == 2 ? 65 + static_cast<uint32_t>(pick(960))
                                : 1025 + static_cast<uint32_t>(pick(8000));
      const bool may_inline = r.op != MPR_WQE_RDMA_READ && r.len <= kMaxInline;
      if (may_inline && pick(2)) r.flags |= MPR_WQE_F_INLINE;
      const uint32_t nsge = r.len == 0 ? static_cast<uint32_t>(pick(2))
                                       : 1 + static_cast<uint32_t>(pick(kMaxSge));
      uint32_t left = r.len;
      for (uint32_t i = 0; i < nsge; ++i) {
        const uint32_t n = i + 1 == nsge ? left : static_cast<uint32_t>(pick(left + 1));
        left -= n;
        r.sge_lens.push_back(n);
        r.sge_offs.push_back(pick(kThird - n + 1));
      }
      r.remote_off = pick(kTargetSpan - r.len + 1);
    }
    if (r.len > 0 && pick(3) == 0) Violate(r, rng);
    return r;
  }

  // Turns `r` into a WQE that breaks one rule by a little: an SGE or the
  // remote range 1 byte to 4 KiB across an edge of its MR (the bytes beyond
  // are the guard thirds of the buffer, mapped and checked), or a key with
  // one bit flipped.
  static void Violate(Request& r, std::mt19937_64& rng) {
    auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
    using V = Request::Violation;
    const bool atomic = r.op == MPR_WQE_ATOMIC_CAS || r.op == MPR_WQE_ATOMIC_FA;
    const bool remote = r.op != MPR_WQE_SEND && r.op != MPR_WQE_SEND_IMM;
    const bool inline_data = r.flags & MPR_WQE_F_INLINE;
    const V kinds[] = {V::local_bounds, V::remote_bounds, V::bad_lkey, V::bad_rkey};
    const V v = kinds[pick(4)];
    if ((v == V::remote_bounds || v == V::bad_rkey) && !remote) return;
    if ((v == V::local_bounds || v == V::bad_lkey) && inline_data) return;
    r.violation = v;
    const int64_t d = atomic ? 8 * int64_t(1 + pick(512)) : int64_t(1 + pick(4096));
    const bool after = pick(2);
    if (v == V::local_bounds) {
      size_t i = pick(r.sge_lens.size());
      while (r.sge_lens[i] == 0) i = (i + 1) % r.sge_lens.size();
      const int64_t n = r.sge_lens[i];
      r.sge_offs[i] = after ? int64_t(kThird) - n + std::min(d, n) : -std::min(d, n);
    } else if (v == V::remote_bounds) {
      const int64_t n = r.len;
      if (atomic)
        r.remote_off = after ? int64_t(kThird) + 8 * int64_t(pick(512)) : -d;
      else
        r.remote_off = after ? int64_t(kThird) - n + std::min(d, n) : -std::min(d, n);
    } else if (v == V::bad_lkey) {
      r.lkey_xor = 1u << pick(32);
    } else {
      r.rkey_xor = 1u << pick(32);
    }
  }
};

std::string Describe(const std::vector<mpr_wc>& wcs) {
  std::ostringstream s;
  for (const mpr_wc& wc : wcs)
    s << "[wr_id " << wc.wr_id << " index " << wc.wqe_index << " status " << wc.status
      << " syndrome " << wc.syndrome << " opcode " << wc.opcode << " len " << wc.byte_len
      << "] ";
  return s.str();
}

// The status a fuzzed WQE may complete with; anything else (a general error,
// a status the NIC does not define) is a finding.
bool AllowedStatus(uint32_t s) {
  switch (s) {
    case MPR_CQE_SUCCESS:
    case MPR_CQE_LOC_LEN_ERR:
    case MPR_CQE_LOC_QP_OP_ERR:
    case MPR_CQE_LOC_PROT_ERR:
    case MPR_CQE_LOC_ACCESS_ERR:
    case MPR_CQE_REM_INV_REQ_ERR:
    case MPR_CQE_REM_ACCESS_ERR:
    case MPR_CQE_REM_OP_ERR:
    case MPR_CQE_RETRY_EXC_ERR:
    case MPR_CQE_RNR_RETRY_EXC_ERR: return true;
    default: return false;
  }
}

TEST_P(WqeFuzzTest, CorruptedWqesCompleteOnceInOrderAndTouchOnlyTheirRegions) {
  // A fixed seed per transport: the same rounds on every run. For a longer
  // hunt, MPRDMA_FUZZ_SEED (a number mixed into it) and MPRDMA_FUZZ_ROUNDS
  // change both; MPRDMA_FUZZ_TRACE=1 prints every round.
  std::string seed_text = GetParam();
  if (const char* extra = std::getenv("MPRDMA_FUZZ_SEED")) seed_text += extra;
  std::seed_seq seq(seed_text.begin(), seed_text.end());
  std::mt19937_64 rng(seq);
  const char* rounds_env = std::getenv("MPRDMA_FUZZ_ROUNDS");
  const int kRounds = rounds_env ? std::atoi(rounds_env) : 1000;
  std::map<std::string, int> outcomes;
  // The NIC warns about every refused doorbell and MMIO write: kept out of
  // the test's output, shown when it fails.
  LogCapture log("");
  Run(
      [&] {
        QpPair healthy = bench->make_pair();
        const PairOptions o = FuzzOptions();
        QpPair p = bench->make_pair(o);
        ShrinkMrs(p);
        std::vector<uint8_t> image_a = p.a.prefill(11), image_b = p.b.prefill(12);
        // The RECVs posted at b, oldest first: wr_id, and whether the test
        // corrupted the WQE in the receive ring.
        struct Recv {
          uint64_t wr_id;
          bool corrupted;
        };
        std::deque<Recv> recvs;
        uint64_t next_recv_id = 1000;
        uint32_t psn = 0x10;

        // One RECV in four has a byte of its WQE corrupted in the ring (its
        // length, lkey or address: a SEND that consumes it may fail at the
        // responder or land elsewhere in the MR).
        auto post_recvs = [&] {
          while (recvs.size() < 3) {
            mpr_sge r = p.b.sge(kMrOff + kRecvOff, kRecvLen);
            mpr_dp_wq& rq = p.b.qp->dp.rq;
            const uint32_t slot_index = rq.pi & ((1u << rq.log_size) - 1);
            const mpr_recv_wr rw = RecvWr(next_recv_id, &r, 1);
            ASSERT_EQ(mpr_dp_post_recv_db(&p.b.qp->dp, &rw, 0), 0);
            const bool corrupt = rng() % 4 == 0;
            if (corrupt) {
              uint8_t* slot = rq.buf + (size_t(slot_index) << rq.log_stride);
              slot[rng() % sizeof(mpr_wqe_data)] ^= static_cast<uint8_t>(1u << (rng() % 8));
            }
            mpr_dp_ring_rq(&p.b.qp->dp);
            recvs.push_back({next_recv_id++, corrupt});
          }
        };
        // Every receive completion must be the oldest RECV's, once.
        std::vector<mpr_wc> recv_wcs;
        auto drain_recvs = [&] {
          mpr_wc wc{};
          while (p.b.ctx->poll_cq(p.b.rcq, 1, &wc) == 1) {
            EXPECT_EQ(wc.is_recv, 1);
            EXPECT_EQ(wc.qpn, p.b.qpn());
            ASSERT_FALSE(recvs.empty()) << "a receive completion with no RECV posted";
            EXPECT_EQ(wc.wr_id, recvs.front().wr_id) << "receive completions out of order";
            EXPECT_TRUE(wc.status == MPR_CQE_SUCCESS || wc.status == MPR_CQE_WR_FLUSH_ERR ||
                        AllowedStatus(wc.status))
                << "receive status " << wc.status;
            recvs.pop_front();
            recv_wcs.push_back(wc);
          }
        };
        auto guards_intact = [&](const char* when) {
          for (auto [e, image] : {std::pair{&p.a, &image_a}, std::pair{&p.b, &image_b}}) {
            const std::vector<uint8_t> now = e->get(0, e->len);
            for (uint64_t off : {uint64_t{0}, 2 * kThird}) {
              const std::vector<uint8_t> got(now.begin() + off, now.begin() + off + kThird);
              const std::vector<uint8_t> want(image->begin() + off,
                                              image->begin() + off + kThird);
              EXPECT_TRUE(SameBytes(got, want))
                  << when << ": the NIC wrote outside the MR of "
                  << (e == &p.a ? "the requester" : "the responder") << " (guard at " << off
                  << ")";
            }
          }
        };

        post_recvs();
        for (int round = 0; round < kRounds && !::testing::Test::HasFailure(); ++round) {
          const Request r = Generate(rng);
          const std::vector<uint32_t>& lens = r.sge_lens;
          std::vector<mpr_sge> sg;
          for (size_t i = 0; i < lens.size(); ++i) {
            sg.push_back(p.a.sge(kMrOff + r.sge_offs[i], lens[i]));
            if (lens[i]) sg.back().lkey ^= r.lkey_xor;
          }
          mpr_send_wr wr = SendWr(round, r.op, sg.data(), static_cast<uint32_t>(sg.size()),
                                  r.flags);
          wr.imm_data = r.imm;
          wr.remote_addr = p.b.va(kMrOff + r.remote_off);
          wr.rkey = p.b.mr.key ^ r.rkey_xor;
          wr.compare_add = r.compare_add;
          wr.swap = r.swap;

          // Write the clean WQE into the ring, then corrupt it there.
          mpr_dp_wq& sq = p.a.qp->dp.sq;
          const uint32_t index = sq.pi;
          ASSERT_EQ(mpr_dp_post_send(&p.a.qp->dp, &wr, 0), 0) << r.describe();
          uint8_t* slot =
              sq.buf + (size_t(index & ((1u << sq.log_size) - 1)) << sq.log_stride);
          const uint32_t used =
              16u * (1u + reinterpret_cast<const mpr_wqe_ctrl*>(slot)->num_ds);
          static const int kMutations[] = {0, 0, 0, 1, 1, 1, 2, 2, 4};
          int mutations = kMutations[rng() % (sizeof kMutations / sizeof(int))];
          if (r.violation != Request::Violation::none) mutations = 0;
          std::ostringstream what;
          what << "round " << round << " (" << GetParam() << "): " << r.describe();
          for (int m = 0; m < mutations; ++m) {
            const uint32_t at = static_cast<uint32_t>(
                rng() % (rng() % 5 ? used : (1u << sq.log_stride)));
            const uint8_t before = slot[at];
            switch (rng() % 4) {
              case 0: slot[at] = static_cast<uint8_t>(rng()); break;
              case 1: slot[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
              case 2: slot[at] = 0; break;
              default: slot[at] = 0xff; break;
            }
            what << "; byte " << at << " 0x" << std::hex << int(before) << "->0x"
                 << int(slot[at]) << std::dec;
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
          const bool recv_ok = !ConsumesRecv(r.op) || !recvs.front().corrupted;
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
          if (std::getenv("MPRDMA_FUZZ_TRACE")) std::cout << what.str() << " -> " << Describe(wcs) << "\n";
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
          drain_recvs();
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
          guards_intact("after the round");
          if (clean) {
            ASSERT_TRUE(fuzz_completed);
            ASSERT_EQ(wcs[0].status, uint32_t{MPR_CQE_SUCCESS})
                << "an uncorrupted WQE failed, syndrome " << wcs[0].syndrome;
            EXPECT_EQ(wcs[0].opcode, CqeOpcode(r.op));
            if (r.op != MPR_WQE_ATOMIC_CAS && r.op != MPR_WQE_ATOMIC_FA) {
              EXPECT_EQ(wcs[0].byte_len, r.len);
            }
            // The bytes the WQE moved, on the shadow images.
            std::vector<uint8_t> gathered;
            for (size_t i = 0; i < lens.size(); ++i)
              gathered.insert(gathered.end(), image_a.begin() + kMrOff + r.sge_offs[i],
                              image_a.begin() + kMrOff + r.sge_offs[i] + lens[i]);
            const uint64_t remote = kMrOff + r.remote_off;
            switch (r.op) {
              case MPR_WQE_RDMA_WRITE:
              case MPR_WQE_RDMA_WRITE_IMM:
                std::copy(gathered.begin(), gathered.end(), image_b.begin() + remote);
                break;
              case MPR_WQE_SEND:
              case MPR_WQE_SEND_IMM:
                std::copy(gathered.begin(), gathered.end(),
                          image_b.begin() + kMrOff + kRecvOff);
                break;
              case MPR_WQE_RDMA_READ: {
                uint64_t at = remote;
                for (size_t i = 0; i < lens.size(); ++i) {
                  std::copy(image_b.begin() + at, image_b.begin() + at + lens[i],
                            image_a.begin() + kMrOff + r.sge_offs[i]);
                  at += lens[i];
                }
                break;
              }
              default: {  // atomics: the old value comes back, the new one stays
                const uint64_t old = Le64(image_b, remote);
                PutLe64(image_a, kMrOff + r.sge_offs[0], old);
                if (r.op == MPR_WQE_ATOMIC_FA)
                  PutLe64(image_b, remote, old + r.compare_add);
                else if (old == r.compare_add)
                  PutLe64(image_b, remote, r.swap);
                break;
              }
            }
            EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), image_a)) << "requester memory";
            EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), image_b)) << "responder memory";
            if (ConsumesRecv(r.op)) {
              ASSERT_FALSE(recv_wcs.empty()) << "no receive completion";
              const mpr_wc& rc = recv_wcs.back();
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
          recv_wcs.clear();

          // A QP in error (either side) is reset and connected again, with
          // new PSNs; its RECVs are gone with the reset.
          const uint8_t sa = p.a.query().qp_state, sb = p.b.query().qp_state;
          EXPECT_EQ(sa, failed ? MPR_QPS_ERR : MPR_QPS_RTS);
          if (!failed) {
            EXPECT_EQ(sb, MPR_QPS_RTS) << "the responder failed, the requester not";
          }
          if (sa != MPR_QPS_RTS || sb != MPR_QPS_RTS) {
            sc_core::wait(Us(30));
            drain_recvs();
            for (Endpoint* e : {&p.a, &p.b}) {
              mpr_qp_attr reset{};
              reset.attr_mask = MPR_QP_ATTR_STATE;
              reset.qp_state = MPR_QPS_RESET;
              ASSERT_TRUE(e->ctx->modify_qp(e->qp, reset).ok());
            }
            recvs.clear();
            p.a.psn = psn = (psn * 2654435761u + 0x9e37) & 0xffffff;
            p.b.psn = (psn ^ 0xabcdef) & 0xffffff;
            bench->connect(p.a, p.b, o);
          }
          post_recvs();
        }
        guards_intact("at the end");
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
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace mprdma::test
