// sw_stack's data-path library on its own: WQEs byte for byte (the layouts
// of docs/host-interface.md), doorbell values through a fake uar_write64,
// refused requests that leave the ring untouched, and CQ polling over a
// hand-written ring (phase bit, wrap-around, wr_id lookup, unsignaled
// retirement, the consumer-index record). No SystemC, no NIC.
#include <gtest/gtest.h>
#include <mprdma/dp.h>
#include <mprdma/hw.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mprdma::test {
namespace {

// Little-endian byte builder for expected WQE and CQE images.
class Bytes {
 public:
  Bytes& u8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  Bytes& u16(uint16_t v) { return put(v, 2); }
  Bytes& u32(uint32_t v) { return put(v, 4); }
  Bytes& u64(uint64_t v) { return put(v, 8); }
  Bytes& str(const std::string& s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    b_.insert(b_.end(), n, 0);
    return *this;
  }
  // Pads with zeros up to `n` bytes.
  Bytes& pad_to(size_t n) {
    if (b_.size() < n) b_.resize(n, 0);
    return *this;
  }
  const std::vector<uint8_t>& v() const { return b_; }

 private:
  Bytes& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> b_;
};

::testing::AssertionResult SameBytes(const uint8_t* got, const std::vector<uint8_t>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i])
      return ::testing::AssertionFailure() << "byte " << i << " (0x" << std::hex << i << "): got 0x"
                                           << int(got[i]) << ", want 0x" << int(want[i]);
  return ::testing::AssertionSuccess();
}

// The provider's environment: doorbells are recorded, "user memory" is one
// buffer at kUserBase, QPs are found by number.
struct Env {
  static constexpr uint64_t kUserBase = 0x7f0000001000ull;
  std::vector<std::pair<uint32_t, uint64_t>> doorbells;
  std::vector<uint8_t> user = std::vector<uint8_t>(4096);
  uint32_t largest_copy = 0;
  int copies = 0;
  std::map<uint32_t, mpr_dp_qp*> qps;
  mpr_dp_ops ops{};

  Env() {
    for (size_t i = 0; i < user.size(); ++i) user[i] = static_cast<uint8_t>(i * 7 + 1);
    ops.uar_write64 = [](void* ctx, uint32_t off, uint64_t value) {
      static_cast<Env*>(ctx)->doorbells.emplace_back(off, value);
    };
    ops.copy_from_user = [](void* ctx, void* dst, uint64_t addr, uint32_t len) {
      Env* self = static_cast<Env*>(ctx);
      ++self->copies;
      if (len > self->largest_copy) self->largest_copy = len;
      // Never write past what a provider's staging buffer could hold: a
      // request this large is refused here instead of corrupting the stack.
      if (len > (1u << MPR_SQ_LOG_STRIDE_MAX)) return -EFAULT;
      if (addr < kUserBase || addr + len > kUserBase + self->user.size()) return -EFAULT;
      std::memcpy(dst, self->user.data() + (addr - kUserBase), len);
      return 0;
    };
    ops.lookup_qp = [](void* ctx, uint32_t qpn) -> mpr_dp_qp* {
      Env* self = static_cast<Env*>(ctx);
      auto it = self->qps.find(qpn);
      return it == self->qps.end() ? nullptr : it->second;
    };
    ops.ctx = this;
  }
};

struct QpShape {
  uint32_t qpn = 0x123456;
  uint32_t sq_log = 4, sq_stride = 6;
  uint32_t rq_log = 3, rq_stride = 6;
  uint32_t max_send_sge = 2, max_recv_sge = 4;
  uint32_t max_inline = 0;
  int sig_all = 0;
  uint32_t state = MPR_DP_QPS_RTS;
};

// A QP's rings in plain memory, pre-filled with 0xEE so that every byte the
// library writes (and does not write) shows.
struct TestQp {
  std::vector<uint8_t> sq, rq;
  std::vector<uint64_t> sq_wrid, rq_wrid;
  mpr_dp_qp qp{};

  TestQp(Env& env, const QpShape& s)
      : sq(size_t{1} << (s.sq_log + s.sq_stride), 0xEE),
        rq(size_t{1} << (s.rq_log + s.rq_stride), 0xEE),
        sq_wrid(size_t{1} << s.sq_log, 0xAAAA),
        rq_wrid(size_t{1} << s.rq_log, 0xAAAA) {
    qp.qpn = s.qpn;
    qp.state = s.state;
    qp.max_inline = s.max_inline;
    qp.sq_sig_all = s.sig_all;
    qp.sq = mpr_dp_wq{sq.data(), sq_wrid.data(), s.sq_log, s.sq_stride, 0, 0, s.max_send_sge};
    qp.rq = mpr_dp_wq{rq.data(), rq_wrid.data(), s.rq_log, s.rq_stride, 0, 0, s.max_recv_sge};
    qp.ops = &env.ops;
    env.qps[s.qpn] = &qp;
  }
  const uint8_t* sq_slot(uint32_t idx) const {
    return sq.data() + (size_t(idx & ((1u << qp.sq.log_size) - 1)) << qp.sq.log_stride);
  }
  const uint8_t* rq_slot(uint32_t idx) const {
    return rq.data() + (size_t(idx & ((1u << qp.rq.log_size) - 1)) << qp.rq.log_stride);
  }
};

mpr_send_wr Wr(uint64_t wr_id, uint8_t opcode, const mpr_sge* sg, uint32_t n, uint8_t flags) {
  mpr_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.flags = flags;
  wr.sg_list = sg;
  wr.num_sge = n;
  return wr;
}

// ------------------------------------------------------------ send WQEs --

TEST(DpPostSend, RdmaWriteMatchesTheDocumentedByteDiagram) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  q.qp.sq.pi = q.qp.sq.ci = 5;
  const mpr_sge sge{0x200000, 4096, 0x201};
  mpr_send_wr wr = Wr(0xfeed, MPR_WQE_RDMA_WRITE, &sge, 1, MPR_WQE_F_SIGNALED);
  wr.remote_addr = 0x12345000;
  wr.rkey = 0x101;
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  // docs/host-interface.md, "Byte diagram: RDMA WRITE, one SGE".
  // clang-format off
  const std::vector<uint8_t> want = {
    0x03, 0x01, 0x02, 0x00, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x50, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x10, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00,
    // beyond num_ds: the slot is written whole, with zeros
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  // clang-format on
  EXPECT_TRUE(SameBytes(q.sq_slot(5), want));
  EXPECT_EQ(q.sq_wrid[5], 0xfeedu);
  EXPECT_EQ(q.qp.sq.pi, 6u);
  EXPECT_EQ(q.qp.sq.ci, 5u);
  // Other slots untouched.
  for (uint32_t i = 0; i < 16; ++i) {
    if (i != 5) {
      EXPECT_EQ(q.sq_slot(i)[0], 0xEE) << "slot " << i;
    }
  }
  ASSERT_EQ(env.doorbells.size(), 1u);
  EXPECT_EQ(env.doorbells[0].first, MPR_UAR_SQ_DB);
  EXPECT_EQ(env.doorbells[0].second, 0x0000000600123456ull);
}

TEST(DpPostSend, InlineSendMatchesTheDocumentedByteDiagram) {
  Env env;
  QpShape shape;
  shape.sq_stride = 7;
  shape.max_inline = 64;
  TestQp q(env, shape);
  q.qp.sq.pi = q.qp.sq.ci = 6;
  std::memcpy(env.user.data() + 100, "0123456789ab", 12);
  std::memcpy(env.user.data() + 300, "cdefghij", 8);
  // Two pieces gathered into one block; inline SGEs carry no usable lkey.
  const mpr_sge sg[2] = {{Env::kUserBase + 100, 12, 0xdead}, {Env::kUserBase + 300, 8, 0}};
  mpr_send_wr wr = Wr(1, MPR_WQE_SEND, sg, 2, MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE);
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  // docs/host-interface.md, "Byte diagram: inline SEND".
  const std::vector<uint8_t> want = Bytes()
                                        .u8(0x01)
                                        .u8(0x09)
                                        .u8(0x02)
                                        .u8(0x00)
                                        .u16(6)
                                        .u16(0)
                                        .u32(0)
                                        .u32(0)
                                        .u32(20)
                                        .str("0123456789ab")
                                        .str("cdefghij")
                                        .zeros(8)
                                        .pad_to(128)
                                        .v();
  EXPECT_TRUE(SameBytes(q.sq_slot(6), want));
}

struct LayoutCase {
  const char* name;
  uint8_t opcode;
  uint8_t flags;
  bool raddr;
  bool atomic;
};

class DpSendLayout : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(DpSendLayout, SegmentsInOrderAndLittleEndian) {
  const LayoutCase& c = GetParam();
  Env env;
  QpShape shape;
  shape.sq_stride = 7;
  TestQp q(env, shape);
  const bool atomic = c.atomic;
  const mpr_sge sg[2] = {{0x1122334455667788ull, atomic ? 8u : 0x01020304u, 0xa0b0c0d0},
                         {0x0000000012340000ull, 77, 0x0000beef}};
  const uint32_t nsge = atomic ? 1 : 2;
  mpr_send_wr wr = Wr(0x77, c.opcode, sg, nsge, c.flags);
  wr.imm_data = 0x44332211;  // network order, copied as is
  wr.remote_addr = 0x0badc0ffee000008ull;
  wr.rkey = 0x00abcdef;
  wr.compare_add = 0x1111222233334444ull;
  wr.swap = 0x5555666677778888ull;
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 0), 0);
  const uint8_t num_ds = static_cast<uint8_t>(c.raddr + atomic + nsge);
  Bytes want;
  want.u8(c.opcode).u8(c.flags).u8(num_ds).u8(0).u16(0).u16(0).u32(0x44332211).u32(0);
  if (c.raddr) want.u64(0x0badc0ffee000008ull).u32(0x00abcdef).u32(0);
  if (c.opcode == MPR_WQE_ATOMIC_CAS) want.u64(0x5555666677778888ull).u64(0x1111222233334444ull);
  if (c.opcode == MPR_WQE_ATOMIC_FA) want.u64(0x1111222233334444ull).u64(0);
  for (uint32_t i = 0; i < nsge; ++i) want.u32(sg[i].length).u32(sg[i].lkey).u64(sg[i].addr);
  want.pad_to(128);
  EXPECT_TRUE(SameBytes(q.sq_slot(0), want.v()));
  EXPECT_TRUE(env.doorbells.empty()) << "ring=0 must not ring";
  mpr_dp_ring_sq(&q.qp);
  ASSERT_EQ(env.doorbells.size(), 1u);
  EXPECT_EQ(env.doorbells[0].second, MPR_SQ_DB(0x123456, 1));
}

INSTANTIATE_TEST_SUITE_P(
    Opcodes, DpSendLayout,
    ::testing::Values(LayoutCase{"send", MPR_WQE_SEND, MPR_WQE_F_SIGNALED, false, false},
                      LayoutCase{"send_imm_solicited", MPR_WQE_SEND_IMM,
                                 MPR_WQE_F_SIGNALED | MPR_WQE_F_SOLICITED, false, false},
                      LayoutCase{"write_unsignaled", MPR_WQE_RDMA_WRITE, 0, true, false},
                      LayoutCase{"write_imm", MPR_WQE_RDMA_WRITE_IMM, MPR_WQE_F_SIGNALED, true,
                                 false},
                      LayoutCase{"read_fenced", MPR_WQE_RDMA_READ,
                                 MPR_WQE_F_SIGNALED | MPR_WQE_F_FENCE, true, false},
                      LayoutCase{"cas", MPR_WQE_ATOMIC_CAS, MPR_WQE_F_SIGNALED, true, true},
                      LayoutCase{"fetch_add_sync", MPR_WQE_ATOMIC_FA,
                                 MPR_WQE_F_SIGNALED | MPR_WQE_F_SYNC, true, true}),
    [](const ::testing::TestParamInfo<LayoutCase>& i) { return std::string(i.param.name); });

TEST(DpPostSend, InlineWriteAndZeroLengthMessages) {
  Env env;
  QpShape shape;
  shape.sq_stride = 7;
  shape.max_inline = 80;
  TestQp q(env, shape);
  const mpr_sge sg{Env::kUserBase, 33, 0};
  mpr_send_wr wr = Wr(1, MPR_WQE_RDMA_WRITE_IMM, &sg, 1, MPR_WQE_F_INLINE);
  wr.remote_addr = 0x1000;
  wr.rkey = 7;
  wr.imm_data = 0xcafef00d;
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  // raddr + (4 + 33 bytes -> 3 segments)
  Bytes want;
  want.u8(MPR_WQE_RDMA_WRITE_IMM)
      .u8(MPR_WQE_F_INLINE)
      .u8(4)
      .u8(0)
      .u16(0)
      .u16(0)
      .u32(0xcafef00d)
      .u32(0);
  want.u64(0x1000).u32(7).u32(0).u32(33);
  for (int i = 0; i < 33; ++i) want.u8(env.user[i]);
  want.pad_to(128);
  EXPECT_TRUE(SameBytes(q.sq_slot(0), want.v()));

  // Zero bytes: inline with an empty block (one segment for its header) ...
  const mpr_sge empty{Env::kUserBase, 0, 0};
  mpr_send_wr z = Wr(2, MPR_WQE_SEND, &empty, 1, MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE);
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &z, 1), 0);
  EXPECT_TRUE(SameBytes(q.sq_slot(1), Bytes()
                                          .u8(MPR_WQE_SEND)
                                          .u8(MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE)
                                          .u8(1)
                                          .u8(0)
                                          .u16(1)
                                          .u16(0)
                                          .u32(0)
                                          .u32(0)
                                          .u32(0)
                                          .pad_to(128)
                                          .v()));
  // ... and a SEND with no SGE at all.
  mpr_send_wr none = Wr(3, MPR_WQE_SEND, nullptr, 0, MPR_WQE_F_SIGNALED);
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &none, 1), 0);
  EXPECT_TRUE(SameBytes(q.sq_slot(2), Bytes()
                                          .u8(MPR_WQE_SEND)
                                          .u8(MPR_WQE_F_SIGNALED)
                                          .u8(0)
                                          .u8(0)
                                          .u16(2)
                                          .u16(0)
                                          .u32(0)
                                          .u32(0)
                                          .pad_to(128)
                                          .v()));
  ASSERT_EQ(env.doorbells.size(), 3u);
  EXPECT_EQ(env.doorbells[2].second, MPR_SQ_DB(0x123456, 3));
}

TEST(DpPostSend, SqSigAllSetsSignaledOnEveryWqe) {
  Env env;
  QpShape shape;
  shape.sig_all = 1;
  TestQp q(env, shape);
  const mpr_sge sg{0x1000, 8, 1};
  mpr_send_wr wr = Wr(1, MPR_WQE_SEND, &sg, 1, 0);
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  EXPECT_EQ(q.sq_slot(0)[1], MPR_WQE_F_SIGNALED);
  wr.flags = MPR_WQE_F_FENCE;
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  EXPECT_EQ(q.sq_slot(1)[1], MPR_WQE_F_SIGNALED | MPR_WQE_F_FENCE);

  QpShape plain;
  plain.qpn = 9;
  TestQp p(env, plain);
  mpr_send_wr u = Wr(1, MPR_WQE_SEND, &sg, 1, 0);
  ASSERT_EQ(mpr_dp_post_send(&p.qp, &u, 1), 0);
  EXPECT_EQ(p.sq_slot(0)[1], 0);
}

TEST(DpPostSend, WqeIndexIsTheLow16BitsOfTheFreeRunningIndex) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  q.qp.sq.pi = q.qp.sq.ci = 0x1fffe;
  const mpr_sge sg{0x1000, 8, 1};
  for (uint32_t k = 0; k < 3; ++k) {
    mpr_send_wr wr = Wr(100 + k, MPR_WQE_SEND, &sg, 1, MPR_WQE_F_SIGNALED);
    ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  }
  // 0x1fffe, 0x1ffff, 0x20000 -> slots 14, 15, 0 of 16.
  uint16_t idx;
  std::memcpy(&idx, q.sq_slot(0x1fffe) + 4, 2);
  EXPECT_EQ(idx, 0xfffe);
  std::memcpy(&idx, q.sq_slot(0x1ffff) + 4, 2);
  EXPECT_EQ(idx, 0xffff);
  std::memcpy(&idx, q.sq_slot(0x20000) + 4, 2);
  EXPECT_EQ(idx, 0x0000);
  EXPECT_EQ(q.sq_wrid[14], 100u);
  EXPECT_EQ(q.sq_wrid[15], 101u);
  EXPECT_EQ(q.sq_wrid[0], 102u);
  EXPECT_EQ(q.qp.sq.pi, 0x20001u);
  ASSERT_EQ(env.doorbells.size(), 3u);
  // The doorbell carries 16 bits of the producer index.
  EXPECT_EQ(env.doorbells[0].second, 0x0000ffff00123456ull);
  EXPECT_EQ(env.doorbells[1].second, 0x0000000000123456ull);
  EXPECT_EQ(env.doorbells[2].second, 0x0000000100123456ull);
}

TEST(DpPostSend, MaxInlineIsBoundedByTheSlot) {
  Env env;
  QpShape shape;  // 64-byte slots: 64 - 16 ctrl - 16 raddr - 4 header = 28
  shape.max_inline = 100;
  TestQp q(env, shape);
  EXPECT_EQ(mpr_dp_max_inline(&q.qp), 28u);
  q.qp.max_inline = 10;
  EXPECT_EQ(mpr_dp_max_inline(&q.qp), 10u);
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 16u);
  q.qp.sq.pi = 20;
  q.qp.sq.ci = 9;
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 5u);
}

// ----------------------------------------------------- refused requests --

struct Snapshot {
  std::vector<uint8_t> sq, rq;
  std::vector<uint64_t> sq_wrid, rq_wrid;
  uint32_t sq_pi, rq_pi;
  size_t doorbells;
  explicit Snapshot(const TestQp& q, const Env& env)
      : sq(q.sq),
        rq(q.rq),
        sq_wrid(q.sq_wrid),
        rq_wrid(q.rq_wrid),
        sq_pi(q.qp.sq.pi),
        rq_pi(q.qp.rq.pi),
        doorbells(env.doorbells.size()) {}
  ::testing::AssertionResult Unchanged(const TestQp& q, const Env& env) const {
    if (q.sq != sq) return ::testing::AssertionFailure() << "the SQ ring changed";
    if (q.rq != rq) return ::testing::AssertionFailure() << "the RQ ring changed";
    if (q.sq_wrid != sq_wrid || q.rq_wrid != rq_wrid)
      return ::testing::AssertionFailure() << "a wr_id changed";
    if (q.qp.sq.pi != sq_pi || q.qp.rq.pi != rq_pi)
      return ::testing::AssertionFailure() << "a producer index moved";
    if (env.doorbells.size() != doorbells)
      return ::testing::AssertionFailure() << "a doorbell was rung";
    return ::testing::AssertionSuccess();
  }
};

TEST(DpPostSend, BadRequestsAreRefusedAndLeaveTheRingUntouched) {
  Env env;
  QpShape shape;
  shape.max_send_sge = 4;  // more than a 64-byte slot holds after a remote segment
  shape.max_inline = 16;
  TestQp q(env, shape);
  const mpr_sge one{0x1000, 8, 1};
  const mpr_sge four_bytes{0x1000, 4, 1};
  const mpr_sge sg5[5] = {one, one, one, one, one};
  const mpr_sge long_inline{Env::kUserBase, 17, 0};
  const mpr_sge bad_source{0x10, 8, 0};
  struct Case {
    const char* name;
    mpr_send_wr wr;
    int want;
  };
  auto with_raddr = [](mpr_send_wr w) {
    w.remote_addr = 0x1000;
    w.rkey = 5;
    return w;
  };
  const Case cases[] = {
      {"NOP opcode", Wr(1, MPR_WQE_NOP, &one, 1, 0), -EINVAL},
      {"opcode 8", Wr(1, 8, &one, 1, 0), -EINVAL},
      {"undefined flag", Wr(1, MPR_WQE_SEND, &one, 1, 0x20), -EINVAL},
      {"more SGEs than max_sge", Wr(1, MPR_WQE_SEND, sg5, 5, 0), -EINVAL},
      {"SGEs that do not fit the slot", with_raddr(Wr(1, MPR_WQE_RDMA_WRITE, sg5, 3, 0)), -EINVAL},
      {"inline longer than max_inline", Wr(1, MPR_WQE_SEND, &long_inline, 1, MPR_WQE_F_INLINE),
       -EINVAL},
      {"READ inline", with_raddr(Wr(1, MPR_WQE_RDMA_READ, &one, 1, MPR_WQE_F_INLINE)), -EINVAL},
      {"atomic with a 4-byte SGE", with_raddr(Wr(1, MPR_WQE_ATOMIC_FA, &four_bytes, 1, 0)),
       -EINVAL},
      {"atomic with two SGEs", with_raddr(Wr(1, MPR_WQE_ATOMIC_CAS, sg5, 2, 0)), -EINVAL},
      {"atomic without SGE", with_raddr(Wr(1, MPR_WQE_ATOMIC_CAS, nullptr, 0, 0)), -EINVAL},
      {"atomic inline", with_raddr(Wr(1, MPR_WQE_ATOMIC_FA, &one, 1, MPR_WQE_F_INLINE)), -EINVAL},
      {"inline source unreadable", Wr(1, MPR_WQE_SEND, &bad_source, 1, MPR_WQE_F_INLINE), -EFAULT},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Snapshot before(q, env);
    EXPECT_EQ(mpr_dp_post_send(&q.qp, &c.wr, 1), c.want);
    EXPECT_TRUE(before.Unchanged(q, env));
  }
  // The same QP still posts a good request afterwards, at index 0.
  mpr_send_wr good = Wr(9, MPR_WQE_SEND, &one, 1, MPR_WQE_F_SIGNALED);
  ASSERT_EQ(mpr_dp_post_send(&q.qp, &good, 1), 0);
  EXPECT_EQ(q.sq_wrid[0], 9u);
  EXPECT_EQ(q.sq_slot(0)[0], MPR_WQE_SEND);
}

TEST(DpPostSend, QpInResetRefusesPosts) {
  Env env;
  QpShape shape;
  shape.state = MPR_DP_QPS_RESET;
  TestQp q(env, shape);
  const mpr_sge one{0x1000, 8, 1};
  const Snapshot before(q, env);
  mpr_send_wr wr = Wr(1, MPR_WQE_SEND, &one, 1, MPR_WQE_F_SIGNALED);
  EXPECT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), -EINVAL);
  mpr_recv_wr rw{1, &one, 1};
  EXPECT_EQ(mpr_dp_post_recv(&q.qp, &rw), -EINVAL);
  EXPECT_TRUE(before.Unchanged(q, env));
  // INIT accepts both (RECVs are normally posted before RTR).
  q.qp.state = MPR_DP_QPS_INIT;
  EXPECT_EQ(mpr_dp_post_recv(&q.qp, &rw), 0);
  EXPECT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
}

TEST(DpPostSend, FullSendQueueIsENomem) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  const mpr_sge one{0x1000, 8, 1};
  for (uint32_t i = 0; i < 16; ++i) {
    mpr_send_wr wr = Wr(i, MPR_WQE_SEND, &one, 1, 0);
    ASSERT_EQ(mpr_dp_post_send(&q.qp, &wr, 0), 0);
  }
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 0u);
  const Snapshot before(q, env);
  mpr_send_wr wr = Wr(99, MPR_WQE_SEND, &one, 1, 0);
  EXPECT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), -ENOMEM);
  EXPECT_TRUE(before.Unchanged(q, env));
  q.qp.sq.ci = 1;  // one retired
  EXPECT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), 0);
  EXPECT_EQ(q.sq_wrid[0], 99u);
}

TEST(DpPostSend, InlineLengthsThatWrapAroundAreRefused) {
  Env env;
  QpShape shape;
  shape.sq_stride = 7;
  shape.max_inline = 64;
  TestQp q(env, shape);
  // 0xfffffff8 + 0x10 = 8 in 32 bits: the total looks small, the first
  // piece alone is 4 GiB. The library must refuse it without asking the
  // provider to copy more than max_inline bytes into its staging buffer.
  const mpr_sge sg[2] = {{Env::kUserBase, 0xfffffff8u, 0}, {Env::kUserBase, 0x10, 0}};
  mpr_send_wr wr = Wr(1, MPR_WQE_SEND, sg, 2, MPR_WQE_F_INLINE);
  const Snapshot before(q, env);
  EXPECT_EQ(mpr_dp_post_send(&q.qp, &wr, 1), -EINVAL);
  EXPECT_LE(env.largest_copy, 64u) << "copy_from_user was asked for " << env.largest_copy
                                   << " bytes: an overflow of the 1 KiB staging buffer";
  EXPECT_TRUE(before.Unchanged(q, env));
}

// ------------------------------------------------------------ recv WQEs --

TEST(DpPostRecv, SgesTerminatorAndDoorbell) {
  Env env;
  QpShape shape;  // RQ: 8 slots of 64 bytes = 4 SGEs
  TestQp q(env, shape);
  const mpr_sge sg[4] = {{0x1111222233334444ull, 100, 0x11},
                         {0x5555666677778888ull, 0x10000, 0x22},
                         {0x10, 1, 0x33},
                         {0x20, 2, 0x44}};
  mpr_recv_wr two{0xabc, sg, 2};
  ASSERT_EQ(mpr_dp_post_recv(&q.qp, &two), 0);
  Bytes want;
  want.u32(100).u32(0x11).u64(0x1111222233334444ull);
  want.u32(0x10000).u32(0x22).u64(0x5555666677778888ull);
  want.u32(0).u32(MPR_LKEY_END).u64(0);        // terminator
  for (int i = 0; i < 16; ++i) want.u8(0xEE);  // not written
  EXPECT_TRUE(SameBytes(q.rq_slot(0), want.v()));
  EXPECT_EQ(q.rq_wrid[0], 0xabcu);
  ASSERT_EQ(env.doorbells.size(), 1u);
  EXPECT_EQ(env.doorbells[0].first, MPR_UAR_RQ_DB);
  EXPECT_EQ(env.doorbells[0].second, MPR_RQ_DB(0x123456, 1));

  // A full slot needs no terminator.
  mpr_recv_wr four{0xdef, sg, 4};
  ASSERT_EQ(mpr_dp_post_recv(&q.qp, &four), 0);
  Bytes full;
  for (const mpr_sge& s : sg) full.u32(s.length).u32(s.lkey).u64(s.addr);
  EXPECT_TRUE(SameBytes(q.rq_slot(1), full.v()));
  // No SGE at all: only the terminator.
  mpr_recv_wr none{0x1, nullptr, 0};
  ASSERT_EQ(mpr_dp_post_recv(&q.qp, &none), 0);
  EXPECT_TRUE(SameBytes(q.rq_slot(2), Bytes().u32(0).u32(MPR_LKEY_END).u64(0).v()));
  EXPECT_EQ(env.doorbells.back().second, MPR_RQ_DB(0x123456, 3));
  EXPECT_EQ(q.qp.rq.pi, 3u);
}

TEST(DpPostRecv, BadRequestsAreRefused) {
  Env env;
  QpShape shape;
  shape.max_recv_sge = 8;  // more than a 64-byte slot holds (4)
  TestQp q(env, shape);
  const mpr_sge one{0x1000, 8, 1};
  const mpr_sge sg5[5] = {one, one, one, one, one};
  const mpr_sge sg9[9] = {one, one, one, one, one, one, one, one, one};
  Snapshot before(q, env);
  mpr_recv_wr too_many_for_slot{1, sg5, 5};
  EXPECT_EQ(mpr_dp_post_recv(&q.qp, &too_many_for_slot), -EINVAL);
  mpr_recv_wr too_many{1, sg9, 9};
  EXPECT_EQ(mpr_dp_post_recv(&q.qp, &too_many), -EINVAL);
  EXPECT_TRUE(before.Unchanged(q, env));
  mpr_recv_wr ok{2, &one, 1};
  for (int i = 0; i < 8; ++i) ASSERT_EQ(mpr_dp_post_recv(&q.qp, &ok), 0);
  const Snapshot full(q, env);
  EXPECT_EQ(mpr_dp_post_recv(&q.qp, &ok), -ENOMEM);
  EXPECT_TRUE(full.Unchanged(q, env));
}

// ---------------------------------------------------------------- CQ --

struct TestCq {
  static constexpr uint32_t kLog = 2;  // 4 entries
  std::vector<uint8_t> ring = std::vector<uint8_t>(sizeof(mpr_cqe) << kLog, 0);
  uint32_t dbrec = 0xdeadbeef;
  mpr_dp_cq cq{};
  explicit TestCq(Env& env) {
    cq.buf = ring.data();
    cq.dbrec = &dbrec;
    cq.cqn = 0x00abcd;
    cq.log_size = kLog;
    cq.ops = &env.ops;
  }
  // Writes the CQE the NIC would write at free-running position `pos`.
  void put(uint32_t pos, mpr_cqe c, bool valid = true) {
    const uint8_t phase = MPR_PHASE(pos, kLog);
    c.owner = valid ? phase : static_cast<uint8_t>(phase ^ 1);
    std::memcpy(ring.data() + size_t(pos & ((1u << kLog) - 1)) * sizeof(mpr_cqe), &c, sizeof c);
  }
};

mpr_cqe Cqe(uint32_t qpn, uint8_t opcode, uint16_t wqe_index, uint32_t byte_len = 0) {
  mpr_cqe c{};
  c.qpn = qpn;
  c.opcode = opcode;
  c.wqe_index = wqe_index;
  c.byte_len = byte_len;
  return c;
}

TEST(DpPollCq, EmptyRingReturnsNothingAndLeavesTheRecord) {
  Env env;
  TestCq c(env);
  mpr_wc wc[4];
  EXPECT_EQ(mpr_dp_poll_cq(&c.cq, 4, wc), 0);
  EXPECT_EQ(c.dbrec, 0xdeadbeefu);
  EXPECT_EQ(c.cq.ci, 0u);
  // An entry with the wrong phase is not valid yet.
  c.put(0, Cqe(1, MPR_CQE_REQ_SEND, 0), /*valid=*/false);
  EXPECT_EQ(mpr_dp_poll_cq(&c.cq, 4, wc), 0);
}

TEST(DpPollCq, EveryFieldAndTheWrIdOfItsQueue) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  for (uint32_t i = 0; i < 16; ++i) q.sq_wrid[i] = 1000 + i;
  for (uint32_t i = 0; i < 8; ++i) q.rq_wrid[i] = 2000 + i;
  q.qp.sq.pi = 3;
  q.qp.rq.pi = 3;
  TestCq c(env);
  mpr_cqe send = Cqe(0xff000000u | 0x123456, MPR_CQE_REQ_RDMA_READ, 0, 0x01020304);
  send.status = MPR_CQE_REM_ACCESS_ERR;
  send.syndrome = MPR_SYN_NAK_REM_ACCESS;
  c.put(0, send);
  mpr_cqe recv = Cqe(0x123456, MPR_CQE_RESP_RECV_IMM, 1, 77);
  recv.imm_data = 0xa1b2c3d4;
  recv.flags = MPR_CQE_F_IMM | MPR_CQE_F_SOLICITED;
  c.put(1, recv);
  c.put(2, Cqe(0x123456, MPR_CQE_RESP_WRITE_IMM, 2, 5));
  mpr_wc wc[3];
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 3, wc), 3);

  EXPECT_EQ(wc[0].wr_id, 1000u);
  EXPECT_EQ(wc[0].status, MPR_CQE_REM_ACCESS_ERR);
  EXPECT_EQ(wc[0].opcode, MPR_CQE_REQ_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 0x01020304u);
  EXPECT_EQ(wc[0].imm_data, 0u);
  EXPECT_EQ(wc[0].qpn, 0x123456u) << "bits 31:24 of the CQE's qpn are reserved";
  EXPECT_EQ(wc[0].flags, 0u);
  EXPECT_EQ(wc[0].syndrome, MPR_SYN_NAK_REM_ACCESS);
  EXPECT_EQ(wc[0].wqe_index, 0u);
  EXPECT_EQ(wc[0].is_recv, 0);

  EXPECT_EQ(wc[1].wr_id, 2001u);  // the RQ's table, not the SQ's
  EXPECT_EQ(wc[1].status, MPR_CQE_SUCCESS);
  EXPECT_EQ(wc[1].opcode, MPR_CQE_RESP_RECV_IMM);
  EXPECT_EQ(wc[1].byte_len, 77u);
  EXPECT_EQ(wc[1].imm_data, 0xa1b2c3d4u);
  EXPECT_EQ(wc[1].flags, MPR_CQE_F_IMM | MPR_CQE_F_SOLICITED);
  EXPECT_EQ(wc[1].wqe_index, 1u);
  EXPECT_EQ(wc[1].is_recv, 1);

  EXPECT_EQ(wc[2].wr_id, 2002u);
  EXPECT_EQ(wc[2].opcode, MPR_CQE_RESP_WRITE_IMM);
  EXPECT_EQ(wc[2].byte_len, 5u);
  EXPECT_EQ(wc[2].wqe_index, 2u);
  EXPECT_EQ(wc[2].is_recv, 1);

  EXPECT_EQ(q.qp.sq.ci, 1u);
  EXPECT_EQ(q.qp.rq.ci, 3u);
  EXPECT_EQ(c.cq.ci, 3u);
  EXPECT_EQ(c.dbrec, 3u);
}

TEST(DpPollCq, PhaseBitAcrossManyWrapArounds) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  TestCq c(env);
  uint32_t pos = 0;
  for (int lap = 0; lap < 10; ++lap) {
    // Three new entries per round: positions wrap the 4-entry ring.
    for (int k = 0; k < 3; ++k) {
      q.sq_wrid[(pos + k) & 15] = 50000 + pos + k;
      c.put(pos + k, Cqe(0x123456, MPR_CQE_REQ_SEND, static_cast<uint16_t>(pos + k)));
    }
    q.qp.sq.pi = pos + 3;
    mpr_wc wc[8];
    ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 2, wc), 2) << "lap " << lap;  // at most n
    ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 8, wc + 2), 1) << "lap " << lap;
    for (int k = 0; k < 3; ++k) EXPECT_EQ(wc[k].wr_id, 50000u + pos + k);
    // The next slot still holds an entry of the previous lap: not valid.
    EXPECT_EQ(mpr_dp_poll_cq(&c.cq, 8, wc), 0) << "lap " << lap;
    pos += 3;
    EXPECT_EQ(c.cq.ci, pos);
    EXPECT_EQ(c.dbrec, pos);
  }
}

TEST(DpPollCq, SignaledCqeRetiresTheUnsignaledWqesBeforeIt) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  for (uint32_t i = 0; i < 16; ++i) q.sq_wrid[i] = 700 + i;
  q.qp.sq.pi = 6;
  TestCq c(env);
  c.put(0, Cqe(0x123456, MPR_CQE_REQ_RDMA_WRITE, 4));
  mpr_wc wc;
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 704u);
  EXPECT_EQ(q.qp.sq.ci, 5u);
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 15u);
  c.put(1, Cqe(0x123456, MPR_CQE_REQ_RDMA_WRITE, 5));
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 705u);
  EXPECT_EQ(q.qp.sq.ci, 6u);
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 16u);
}

TEST(DpPollCq, CqeForASlotNeverPostedRetiresNothing) {
  // A raw doorbell ahead of the ring makes the NIC complete (with an error)
  // a slot the provider never filled: the consumer index must not pass pi.
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  q.qp.sq.pi = 2;
  TestCq c(env);
  c.put(0, Cqe(0x123456, MPR_CQE_REQ_RDMA_WRITE, 7));
  mpr_wc wc;
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 1, &wc), 1);
  EXPECT_EQ(q.qp.sq.ci, 0u);
  EXPECT_EQ(mpr_dp_sq_space(&q.qp), 14u);
}

TEST(DpPollCq, SixteenBitIndexIsWidenedAcrossItsWrap) {
  Env env;
  QpShape shape;
  TestQp q(env, shape);
  q.qp.sq.ci = 0xfffe;
  q.qp.sq.pi = 0x10003;
  q.sq_wrid[0x10001 & 15] = 4242;
  TestCq c(env);
  c.put(0, Cqe(0x123456, MPR_CQE_REQ_SEND, 0x0001));
  mpr_wc wc;
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 4242u);
  EXPECT_EQ(wc.wqe_index, 1u);
  EXPECT_EQ(q.qp.sq.ci, 0x10002u);
}

TEST(DpPollCq, UnknownQpStillCompletesAndNullRecordIsFine) {
  Env env;
  TestCq c(env);
  c.cq.dbrec = nullptr;
  c.put(0, Cqe(0x000777, MPR_CQE_REQ_SEND, 3, 9));
  mpr_wc wc;
  wc.wr_id = 12345;
  ASSERT_EQ(mpr_dp_poll_cq(&c.cq, 1, &wc), 1);
  EXPECT_EQ(wc.wr_id, 0u);
  EXPECT_EQ(wc.qpn, 0x777u);
  EXPECT_EQ(wc.byte_len, 9u);
  EXPECT_EQ(c.cq.ci, 1u);
}

// A CQ of 64-byte slots: the CQE is the slot's last 32 bytes; an inline
// receive's bytes (the slot's first byte_len) go to the RECV's buffers,
// across its scatter entries, when the CQE is polled.
TEST(DpPollCq, InlineReceiveIsCopiedFromTheSlotIntoTheRecvBuffers) {
  Env env;
  env.ops.copy_to_user = [](void* ctx, uint64_t addr, const void* src, uint32_t len) {
    Env* self = static_cast<Env*>(ctx);
    if (addr < Env::kUserBase || addr + len > Env::kUserBase + self->user.size()) return -EFAULT;
    std::memcpy(self->user.data() + (addr - Env::kUserBase), src, len);
    return 0;
  };
  QpShape shape;
  TestQp q(env, shape);
  // A RECV of two entries: 5 bytes at +100, 64 at +200.
  const mpr_sge sg[2] = {{Env::kUserBase + 100, 5, 1}, {Env::kUserBase + 200, 64, 1}};
  mpr_recv_wr rwr{77, sg, 2};
  ASSERT_EQ(mpr_dp_post_recv(&q.qp, &rwr), 0);
  ASSERT_EQ(mpr_dp_post_recv(&q.qp, &rwr), 0);

  constexpr uint32_t kLog = 2, kSlot = 64;
  std::vector<uint8_t> ring(kSlot << kLog, 0);
  mpr_dp_cq cq{};
  cq.buf = ring.data();
  cq.cqn = 1;
  cq.log_size = kLog;
  cq.ops = &env.ops;
  cq.log_cqe_size = 6;
  auto put = [&](uint32_t pos, mpr_cqe c, const std::vector<uint8_t>& data) {
    c.owner = MPR_PHASE(pos, kLog);
    uint8_t* slot = ring.data() + size_t(pos) * kSlot;
    std::memcpy(slot, data.data(), data.size());
    std::memcpy(slot + kSlot - sizeof c, &c, sizeof c);
  };
  std::vector<uint8_t> data(12);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(0xA0 + i);
  mpr_cqe c = Cqe(shape.qpn, MPR_CQE_RESP_RECV, 0, 12);
  c.flags = MPR_CQE_F_INLINE;
  put(0, c, data);
  mpr_wc wc;
  ASSERT_EQ(mpr_dp_poll_cq(&cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.byte_len, 12u);
  EXPECT_TRUE(std::equal(data.begin(), data.begin() + 5, env.user.begin() + 100));
  EXPECT_TRUE(std::equal(data.begin() + 5, data.end(), env.user.begin() + 200));

  // Without a copy_to_user op the data cannot be placed: a local
  // protection error, not silent loss.
  env.ops.copy_to_user = nullptr;
  c.wqe_index = 1;
  put(1, c, data);
  ASSERT_EQ(mpr_dp_poll_cq(&cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, MPR_CQE_LOC_PROT_ERR);
  EXPECT_EQ(wc.syndrome, MPR_SYN_DMA_FAULT);
  // More inline bytes than the slot holds before the CQE: refused too.
  c.wqe_index = 2;
  c.byte_len = 33;
  put(2, c, data);
  ASSERT_EQ(mpr_dp_poll_cq(&cq, 1, &wc), 1);
  EXPECT_EQ(wc.status, MPR_CQE_LOC_PROT_ERR);
}

TEST(DpArmCq, DoorbellCarriesCommandAndConsumerIndex) {
  Env env;
  TestCq c(env);
  c.cq.ci = 5;
  mpr_dp_arm_cq(&c.cq, 0);
  c.cq.ci = 0x1000007;  // only 24 bits travel
  mpr_dp_arm_cq(&c.cq, 1);
  ASSERT_EQ(env.doorbells.size(), 2u);
  EXPECT_EQ(env.doorbells[0].first, MPR_UAR_CQ_DB);
  EXPECT_EQ(env.doorbells[0].second, 0x000000050100abcdull);
  EXPECT_EQ(env.doorbells[1].first, MPR_UAR_CQ_DB);
  EXPECT_EQ(env.doorbells[1].second, 0x000000070200abcdull);
  EXPECT_EQ(env.doorbells[0].second, MPR_CQ_DB(0xabcd, MPR_CQ_DB_ARM_NEXT, 5));
  EXPECT_EQ(env.doorbells[1].second, MPR_CQ_DB(0xabcd, MPR_CQ_DB_ARM_SOLICITED, 7));
}

// Transport names (MPRDMA_QP_TRANSPORT, the perftest key qp_transport):
// anything else, case included, is refused, not defaulted.
TEST(DpTransportName, NamesMapToEnginesAndOthersAreRefused) {
  EXPECT_EQ(mpr_transport_of_name(nullptr), MPR_TRANSPORT_DEFAULT);
  EXPECT_EQ(mpr_transport_of_name(""), MPR_TRANSPORT_DEFAULT);
  EXPECT_EQ(mpr_transport_of_name("default"), MPR_TRANSPORT_DEFAULT);
  EXPECT_EQ(mpr_transport_of_name("gbn"), MPR_TRANSPORT_GBN);
  EXPECT_EQ(mpr_transport_of_name("dcqcn"), MPR_TRANSPORT_DCQCN);
  EXPECT_EQ(mpr_transport_of_name("mprdma"), MPR_TRANSPORT_MP_RDMA);
  EXPECT_EQ(mpr_transport_of_name("irn"), MPR_TRANSPORT_IRN);
  for (const char* bad : {"MPRDMA", "mp-rdma", "irn ", "tcp", "1"})
    EXPECT_EQ(mpr_transport_of_name(bad), -1) << bad;
}

}  // namespace
}  // namespace mprdma::test
