// Shared by the fuzz tests of the modeled hosts (wqe_fuzz_test.cc,
// wire_fuzz_test.cc): random valid work requests from a seeded stream, the
// rule-breaking variants with the error each must get, and the shadow copy
// of both memory regions that says what an uncorrupted request must do.
//
// Memory layout of each endpoint: a 192 KiB buffer whose middle third is the
// MR; the outer thirds are guards that nothing may ever write. Offsets below
// are from the MR's start. The requester gathers from [0, 32K) and scatters
// READ and atomic results into [32K, 64K), so that requests posted together
// never race on local memory; on the responder, WRITE, READ and atomic
// targets lie in [0, 32K), RECV buffers at 32K, the sentinel at 48K.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/fuzz_stream.h"
#include "tests/vp/host/two_hosts.h"

namespace mprdma::test::fuzz {

constexpr uint64_t kThird = 64 << 10;
constexpr uint64_t kMrOff = kThird;  // buffer offset of the MR
constexpr uint64_t kSrcSpan = 32 << 10;
constexpr uint64_t kDstOff = 32 << 10;
constexpr uint64_t kTargetSpan = 32 << 10;
constexpr uint64_t kRecvOff = 32 << 10;
constexpr uint32_t kRecvLen = 16 << 10;
constexpr uint64_t kSentinelOff = 48 << 10;
constexpr uint32_t kMaxInline = 128;
constexpr uint32_t kMaxSge = 4;

// Stream, Rounds and Trace: tests/support/fuzz_stream.h. MPRDMA_FUZZ_TRACE=1
// also prints what the relay did to each frame; MPRDMA_FUZZ_LOG=<log spec>,
// e.g. "nic.h*=trace", prints the whole log of a failing wire fuzz run.

inline const char* OpName(uint8_t op) {
  switch (op) {
    case MPR_WQE_SEND:
      return "SEND";
    case MPR_WQE_SEND_IMM:
      return "SEND_IMM";
    case MPR_WQE_RDMA_WRITE:
      return "WRITE";
    case MPR_WQE_RDMA_WRITE_IMM:
      return "WRITE_IMM";
    case MPR_WQE_RDMA_READ:
      return "READ";
    case MPR_WQE_ATOMIC_CAS:
      return "CAS";
    case MPR_WQE_ATOMIC_FA:
      return "FETCH_ADD";
    default:
      return "?";
  }
}

inline bool ConsumesRecv(uint8_t op) {
  return op == MPR_WQE_SEND || op == MPR_WQE_SEND_IMM || op == MPR_WQE_RDMA_WRITE_IMM;
}
inline bool IsAtomic(uint8_t op) { return op == MPR_WQE_ATOMIC_CAS || op == MPR_WQE_ATOMIC_FA; }

inline uint32_t CqeOpcode(uint8_t op) {
  switch (op) {
    case MPR_WQE_SEND:
    case MPR_WQE_SEND_IMM:
      return MPR_CQE_REQ_SEND;
    case MPR_WQE_RDMA_WRITE:
    case MPR_WQE_RDMA_WRITE_IMM:
      return MPR_CQE_REQ_RDMA_WRITE;
    case MPR_WQE_RDMA_READ:
      return MPR_CQE_REQ_RDMA_READ;
    case MPR_WQE_ATOMIC_CAS:
      return MPR_CQE_REQ_ATOMIC_CAS;
    default:
      return MPR_CQE_REQ_ATOMIC_FA;
  }
}

// Any status the NIC defines for a send completion; anything else (a
// general error, an undefined value) is a finding.
inline bool AllowedStatus(uint32_t s) {
  switch (s) {
    case MPR_CQE_SUCCESS:
    case MPR_CQE_LOC_LEN_ERR:
    case MPR_CQE_LOC_QP_OP_ERR:
    case MPR_CQE_LOC_PROT_ERR:
    case MPR_CQE_WR_FLUSH_ERR:
    case MPR_CQE_BAD_RESP_ERR:
    case MPR_CQE_LOC_ACCESS_ERR:
    case MPR_CQE_REM_INV_REQ_ERR:
    case MPR_CQE_REM_ACCESS_ERR:
    case MPR_CQE_REM_OP_ERR:
    case MPR_CQE_RETRY_EXC_ERR:
    case MPR_CQE_RNR_RETRY_EXC_ERR:
      return true;
    default:
      return false;
  }
}

inline std::string Describe(const std::vector<mpr_wc>& wcs) {
  std::ostringstream s;
  for (const mpr_wc& wc : wcs)
    s << "[wr_id " << wc.wr_id << " index " << wc.wqe_index << " status " << wc.status
      << " syndrome " << wc.syndrome << " opcode " << wc.opcode << " len " << wc.byte_len << "] ";
  return s.str();
}

// One work request, and what it must do when nothing corrupts it.
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
  // A well-formed request that breaks one rule, and the error it must get.
  enum class Violation { none, local_bounds, remote_bounds, bad_lkey, bad_rkey };
  Violation violation = Violation::none;
  uint32_t lkey_xor = 0, rkey_xor = 0;

  std::string describe() const {
    static const char* kViolation[] = {"", ", SGE across its MR's edge",
                                       ", remote range across the MR's edge", ", wrong lkey",
                                       ", wrong rkey"};
    std::ostringstream s;
    s << OpName(op) << " len " << len << " sges " << sge_lens.size() << " remote_off " << remote_off
      << " flags 0x" << std::hex << int(flags) << std::dec
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
      case Violation::local_bounds:
        return MPR_SYN_LKEY_BOUNDS;
      case Violation::bad_lkey:
        return MPR_SYN_BAD_LKEY;
      default:
        return MPR_SYN_NAK_REM_ACCESS;
    }
  }

  // The work request on endpoints `a` (requester) and `b`; `sg` holds the
  // SGEs it points to.
  mpr_send_wr wr(uint64_t wr_id, const Endpoint& a, const Endpoint& b,
                 std::vector<mpr_sge>& sg) const {
    sg.clear();
    for (size_t i = 0; i < sge_lens.size(); ++i) {
      sg.push_back(a.sge(kMrOff + sge_offs[i], sge_lens[i]));
      if (sge_lens[i]) sg.back().lkey ^= lkey_xor;
    }
    mpr_send_wr w = SendWr(wr_id, op, sg.data(), static_cast<uint32_t>(sg.size()), flags);
    w.imm_data = imm;
    w.remote_addr = b.va(kMrOff + remote_off);
    w.rkey = b.mr.key ^ rkey_xor;
    w.compare_add = compare_add;
    w.swap = swap;
    return w;
  }
};

// Turns `r` into a request that breaks one rule by a little: an SGE or the
// remote range 1 byte to 4 KiB across an edge of its MR (the bytes beyond
// are the guard thirds of the buffer, mapped and checked), or a key with one
// bit flipped. Leaves `r` alone when the rule drawn does not apply to it.
inline void Violate(Request& r, std::mt19937_64& rng) {
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  using V = Request::Violation;
  const bool atomic = IsAtomic(r.op);
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

// Where a request's bytes may go, as offsets from the MRs' starts: local
// gathers come from [0, src_span), local results (READ, atomics) go to
// [dst_off, dst_off + span), remote accesses to [target_off, target_off +
// span); at most max_len bytes.
struct Layout {
  uint64_t src_span = kSrcSpan;
  uint64_t dst_off = kDstOff;
  uint64_t target_off = 0;
  uint64_t span = kTargetSpan;
  uint32_t max_len = 9024;
};

// A random valid request: any opcode, 0 to max_len bytes over 1-4 SGEs (or
// one 8-byte SGE for atomics), inline up to 128 bytes, FENCE and SOLICITED
// now and then; with `violations`, one in three breaks a rule (Violate).
inline Request Generate(std::mt19937_64& rng, bool violations, const Layout& at = Layout()) {
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  Request r;
  static const uint8_t kOps[] = {MPR_WQE_SEND,           MPR_WQE_SEND_IMM,  MPR_WQE_RDMA_WRITE,
                                 MPR_WQE_RDMA_WRITE_IMM, MPR_WQE_RDMA_READ, MPR_WQE_ATOMIC_CAS,
                                 MPR_WQE_ATOMIC_FA};
  r.op = kOps[pick(sizeof kOps)];
  r.imm = static_cast<uint32_t>(rng());
  if (pick(4) == 0) r.flags |= MPR_WQE_F_FENCE;
  if (pick(4) == 0) r.flags |= MPR_WQE_F_SOLICITED;
  const bool scatters = r.op == MPR_WQE_RDMA_READ || IsAtomic(r.op);
  if (IsAtomic(r.op)) {
    r.len = 8;
    r.sge_offs = {int64_t(at.dst_off + 8 * pick(at.span / 8))};
    r.sge_lens = {8};
    r.remote_off = int64_t(at.target_off + 8 * pick(at.span / 8));
    r.compare_add = pick(2) ? 0 : rng();
    r.swap = rng();
  } else {
    const uint64_t size_class = pick(4);
    r.len = size_class == 0   ? 0
            : size_class == 1 ? 1 + static_cast<uint32_t>(pick(64))
            : size_class == 2 ? 65 + static_cast<uint32_t>(pick(960))
                              : 1025 + static_cast<uint32_t>(pick(at.max_len - 1024));
    const bool may_inline = r.op != MPR_WQE_RDMA_READ && r.len <= kMaxInline;
    if (may_inline && pick(2)) r.flags |= MPR_WQE_F_INLINE;
    const uint32_t nsge =
        r.len == 0 ? static_cast<uint32_t>(pick(2)) : 1 + static_cast<uint32_t>(pick(kMaxSge));
    const uint64_t base = scatters ? at.dst_off : 0;
    const uint64_t span = scatters ? at.span : at.src_span;
    // Gathers may overlap; scatters may not: which bytes land last in an
    // overlap depends on the order packets are placed in, which only an
    // in-order transport fixes. A READ's SGEs take disjoint pieces, in
    // order, with random gaps.
    uint32_t left = r.len;
    uint64_t slack = span - r.len, next = base;
    for (uint32_t i = 0; i < nsge; ++i) {
      const uint32_t n = i + 1 == nsge ? left : static_cast<uint32_t>(pick(left + 1));
      left -= n;
      r.sge_lens.push_back(n);
      if (scatters) {
        const uint64_t gap = pick(slack + 1);
        slack -= gap;
        r.sge_offs.push_back(int64_t(next + gap));
        next += gap + n;
      } else {
        r.sge_offs.push_back(int64_t(base + pick(span - n + 1)));
      }
    }
    r.remote_off = int64_t(at.target_off + pick(at.span - r.len + 1));
  }
  if (violations && r.len > 0 && pick(3) == 0) Violate(r, rng);
  return r;
}

inline uint64_t Le64(const std::vector<uint8_t>& v, uint64_t off) {
  uint64_t x = 0;
  for (int i = 7; i >= 0; --i) x = (x << 8) | v[off + i];
  return x;
}
inline void PutLe64(std::vector<uint8_t>& v, uint64_t off, uint64_t x) {
  for (int i = 0; i < 8; ++i) v[off + i] = static_cast<uint8_t>(x >> (8 * i));
}

// What a successful, uncorrupted `r` did, applied to the images of the
// requester's and the responder's buffers; a SEND lands at `recv_off` (from
// the MR's start), the buffer of the RECV it consumed.
inline void ApplyClean(const Request& r, std::vector<uint8_t>& image_a,
                       std::vector<uint8_t>& image_b, uint64_t recv_off = kRecvOff) {
  std::vector<uint8_t> gathered;
  for (size_t i = 0; i < r.sge_lens.size(); ++i) {
    const auto from = image_a.begin() + int64_t(kMrOff) + r.sge_offs[i];
    gathered.insert(gathered.end(), from, from + r.sge_lens[i]);
  }
  const uint64_t remote = kMrOff + uint64_t(r.remote_off);
  switch (r.op) {
    case MPR_WQE_RDMA_WRITE:
    case MPR_WQE_RDMA_WRITE_IMM:
      std::copy(gathered.begin(), gathered.end(), image_b.begin() + int64_t(remote));
      break;
    case MPR_WQE_SEND:
    case MPR_WQE_SEND_IMM:
      std::copy(gathered.begin(), gathered.end(), image_b.begin() + int64_t(kMrOff + recv_off));
      break;
    case MPR_WQE_RDMA_READ: {
      uint64_t at = remote;
      for (size_t i = 0; i < r.sge_lens.size(); ++i) {
        std::copy(image_b.begin() + int64_t(at), image_b.begin() + int64_t(at + r.sge_lens[i]),
                  image_a.begin() + int64_t(kMrOff) + r.sge_offs[i]);
        at += r.sge_lens[i];
      }
      break;
    }
    default: {  // atomics: the old value comes back, the new one stays
      const uint64_t old = Le64(image_b, remote);
      PutLe64(image_a, kMrOff + uint64_t(r.sge_offs[0]), old);
      if (r.op == MPR_WQE_ATOMIC_FA)
        PutLe64(image_b, remote, old + r.compare_add);
      else if (old == r.compare_add)
        PutLe64(image_b, remote, r.swap);
      break;
    }
  }
}

// Options of the fuzzed pair: four SGEs, 128 bytes inline, 192 KiB buffers,
// and retries bounded so that a lost or refused request fails within ~10 ms.
inline PairOptions Options() {
  PairOptions o;
  o.caps.max_send_sge = kMaxSge;
  o.caps.max_inline = kMaxInline;
  o.caps.max_send_wr = 64;
  o.caps.max_recv_wr = 64;
  o.buf_bytes = 3 * kThird;
  o.timeout = 10;  // 4.2 ms
  o.retry_cnt = 1;
  o.rnr_retry = 1;
  return o;
}

// The pair's MRs shrink to the middle third of their buffers.
inline void ShrinkMrs(QpPair& p) {
  for (Endpoint* e : {&p.a, &p.b}) {
    e->ctx->dereg_mr(e->mr);
    e->mr = e->ctx->reg_mr(e->pd, e->buf + kMrOff, kThird, kAllAccess);
  }
}

// Nothing written outside the MRs: the guard thirds of both buffers still
// equal their images.
inline void ExpectGuardsIntact(const QpPair& p, const std::vector<uint8_t>& image_a,
                               const std::vector<uint8_t>& image_b, const char* when) {
  for (int side = 0; side < 2; ++side) {
    const Endpoint& e = side ? p.b : p.a;
    const std::vector<uint8_t>& image = side ? image_b : image_a;
    const std::vector<uint8_t> now = e.get(0, e.len);
    for (uint64_t off : {uint64_t{0}, 2 * kThird}) {
      const std::vector<uint8_t> got(now.begin() + int64_t(off),
                                     now.begin() + int64_t(off + kThird));
      const std::vector<uint8_t> want(image.begin() + int64_t(off),
                                      image.begin() + int64_t(off + kThird));
      EXPECT_TRUE(SameBytes(got, want))
          << when << ": the NIC wrote outside the MR of the " << (side ? "responder" : "requester")
          << " (guard at " << off << ")";
    }
  }
}

// ERR or not, both QPs back to RESET and connected again with new PSNs.
inline void Reconnect(TwoHosts& bench, QpPair& p, const PairOptions& o, uint32_t& psn) {
  for (Endpoint* e : {&p.a, &p.b}) {
    mpr_qp_attr reset{};
    reset.attr_mask = MPR_QP_ATTR_STATE;
    reset.qp_state = MPR_QPS_RESET;
    ASSERT_TRUE(e->ctx->modify_qp(e->qp, reset).ok());
  }
  psn = (psn * 2654435761u + 0x9e37) & 0xffffff;
  p.a.psn = psn;
  p.b.psn = (psn ^ 0xabcdef) & 0xffffff;
  bench.connect(p.a, p.b, o);
}

// The RECVs posted at the responder, oldest first, and the receive
// completions they produced: each must be the oldest outstanding RECV's.
class Recvs {
 public:
  // RECV i gets buffer i mod `buffers` of `buffer_len` bytes from
  // kRecvOff on (one 16 KiB buffer unless told otherwise).
  explicit Recvs(uint32_t buffer_len = kRecvLen, unsigned buffers = 1)
      : buffer_len_(buffer_len), buffers_(buffers) {}

  // Posts RECVs until `depth` are outstanding. With `corrupt_one_in` > 0,
  // that share of them has one bit of its WQE (length, lkey or address)
  // flipped in the ring before the doorbell: a message that consumes one
  // may fail at the responder or land elsewhere in the MR.
  void fill(Endpoint& b, size_t depth, std::mt19937_64& rng, unsigned corrupt_one_in) {
    while (q_.size() < depth) {
      mpr_sge r = b.sge(kMrOff + buffer(next_), buffer_len_);
      mpr_dp_wq& rq = b.qp->dp.rq;
      const uint32_t slot = rq.pi & ((1u << rq.log_size) - 1);
      const mpr_recv_wr rw = RecvWr(next_, &r, 1);
      ASSERT_EQ(mpr_dp_post_recv_db(&b.qp->dp, &rw, 0), 0);
      const bool corrupt = corrupt_one_in && rng() % corrupt_one_in == 0;
      if (corrupt) {
        uint8_t* wqe = rq.buf + (size_t(slot) << rq.log_stride);
        wqe[rng() % sizeof(mpr_wqe_data)] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      mpr_dp_ring_rq(&b.qp->dp);
      q_.push_back({next_++, corrupt});
    }
  }
  // Takes every receive completion there is.
  void drain(Endpoint& b) {
    mpr_wc wc{};
    while (b.ctx->poll_cq(b.rcq, 1, &wc) == 1) {
      EXPECT_EQ(wc.is_recv, 1);
      EXPECT_EQ(wc.qpn, b.qpn());
      ASSERT_FALSE(q_.empty()) << "a receive completion with no RECV posted";
      EXPECT_EQ(wc.wr_id, q_.front().wr_id) << "receive completions out of order";
      EXPECT_TRUE(AllowedStatus(wc.status)) << "receive status " << wc.status;
      q_.pop_front();
      done_.push_back(wc);
    }
  }
  bool front_corrupted(size_t skip = 0) const { return q_.size() > skip && q_[skip].corrupted; }
  // The buffer (offset from the MR's start) of the RECV `skip` places
  // behind the oldest outstanding one.
  uint64_t front_buffer(size_t skip = 0) const { return buffer(q_.at(skip).wr_id); }
  void clear() { q_.clear(); }  // the QP was reset: its RECVs are gone
  std::vector<mpr_wc>& completed() { return done_; }

 private:
  struct Recv {
    uint64_t wr_id;
    bool corrupted;
  };
  uint64_t buffer(uint64_t wr_id) const { return kRecvOff + (wr_id % buffers_) * buffer_len_; }

  uint32_t buffer_len_;
  unsigned buffers_;
  std::deque<Recv> q_;
  uint64_t next_ = 1000;
  std::vector<mpr_wc> done_;
};

}  // namespace mprdma::test::fuzz
