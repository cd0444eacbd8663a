// Memory translation and protection (MPT/MTT lookups, page splitting,
// segment slicing) and the derived per-QP parameters (MTU, timers, UDP
// source port, packet addressing, the transport engine's ConnParams).
#include "vp/nic/translation.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "vp/nic/context_memory.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/qp_params.h"

namespace mprdma::nic {

bool operator==(const Segment& a, const Segment& b) { return a.pa == b.pa && a.len == b.len; }
std::ostream& operator<<(std::ostream& os, const Segment& s) {
  return os << "{0x" << std::hex << s.pa << ", " << std::dec << s.len << "}";
}

namespace {

using Segs = std::vector<Segment>;
constexpr uint64_t kPage = 4096;

NicLimits limits() {
  NicLimits l;
  l.max_mr = 16;
  l.max_mtt = 256;
  return l;
}

class TranslationTest : public ::testing::Test {
 protected:
  TranslationTest() : ctx_(limits()), tr_(ctx_) {}

  // Registers an MR directly in the context memory, as REG_MR does.
  uint32_t add_mr(uint32_t pdn, uint64_t iova, uint64_t length, uint32_t access,
                  const std::vector<uint64_t>& pages, uint8_t page_shift = 12) {
    const int64_t key = ctx_.alloc_mr();
    EXPECT_GE(key, 0);
    const int64_t base = ctx_.alloc_mtt(static_cast<uint32_t>(pages.size()));
    EXPECT_GE(base, 0);
    for (size_t i = 0; i < pages.size(); ++i)
      ctx_.set_mtt(static_cast<uint32_t>(base + static_cast<int64_t>(i)), pages[i]);
    mpr_mpt* m = ctx_.mr(static_cast<uint32_t>(key));
    m->iova = iova;
    m->length = length;
    m->pdn = pdn;
    m->access = access;
    m->mtt_base = static_cast<uint32_t>(base);
    m->num_pages = static_cast<uint32_t>(pages.size());
    m->page_shift = page_shift;
    return static_cast<uint32_t>(key);
  }

  AccessStatus tr(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len, uint32_t need, Segs& out) {
    return tr_.translate(key, pdn, va, len, need, out);
  }

  ContextMemory ctx_;
  Translation tr_;
};

constexpr uint32_t kPd = 3;
constexpr uint32_t kLw = MPR_ACCESS_LOCAL_WRITE;

TEST_F(TranslationTest, SplitsAtPageBoundariesOfScatteredPages) {
  // 0x100 into the first page, 3 pages long: 4 pages, scattered.
  const uint64_t iova = 0x7000100;
  const uint32_t key =
      add_mr(kPd, iova, 3 * kPage, kLw, {0x50000000, 0x30000000, 0x90000000, 0x10000000});
  Segs out;
  ASSERT_EQ(tr(key, kPd, iova + 0x10, 2 * kPage, 0, out), AccessStatus::ok);
  const Segs want = {{0x50000110, static_cast<uint32_t>(kPage - 0x110)},
                     {0x30000000, static_cast<uint32_t>(kPage)},
                     {0x90000000, 0x110}};
  EXPECT_EQ(out, want);

  // The whole MR.
  out.clear();
  ASSERT_EQ(tr(key, kPd, iova, 3 * kPage, kLw, out), AccessStatus::ok);
  const Segs whole = {{0x50000100, static_cast<uint32_t>(kPage - 0x100)},
                      {0x30000000, static_cast<uint32_t>(kPage)},
                      {0x90000000, static_cast<uint32_t>(kPage)},
                      {0x10000000, 0x100}};
  EXPECT_EQ(out, whole);

  // Within one page.
  out.clear();
  ASSERT_EQ(tr(key, kPd, 0x7002010, 8, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{0x90000010, 8}}));
}

TEST_F(TranslationTest, MergesPhysicallyContiguousPages) {
  const uint32_t key = add_mr(kPd, 0x10000, 4 * kPage, kLw, {0x1000, 0x2000, 0x3000, 0x8000});
  Segs out;
  ASSERT_EQ(tr(key, kPd, 0x10800, 4 * kPage - 0x800, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{0x1800, static_cast<uint32_t>(3 * kPage - 0x800)},
                       {0x8000, static_cast<uint32_t>(kPage)}}));
}

TEST_F(TranslationTest, AppendsToTheOutputList) {
  const uint32_t a = add_mr(kPd, 0x10000, kPage, kLw, {0x40000});
  const uint32_t b = add_mr(kPd, 0x90000, kPage, kLw, {0x70000});
  Segs out;
  ASSERT_EQ(tr(a, kPd, 0x10000, 100, 0, out), AccessStatus::ok);
  ASSERT_EQ(tr(b, kPd, 0x90010, 200, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{0x40000, 100}, {0x70010, 200}}));
}

TEST_F(TranslationTest, HugePages) {
  const uint64_t huge = uint64_t{1} << 21;
  const uint32_t key =
      add_mr(kPd, 10 * huge + 0x1000, 2 * huge, kLw, {40 * huge, 20 * huge, 60 * huge}, 21);
  Segs out;
  ASSERT_EQ(tr(key, kPd, 11 * huge - 16, 32, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{41 * huge - 16, 16}, {20 * huge, 16}}));
  out.clear();
  ASSERT_EQ(tr(key, kPd, 12 * huge, 0x1000, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{60 * huge, 0x1000}}));
}

TEST_F(TranslationTest, BadKey) {
  const uint32_t key = add_mr(kPd, 0x10000, kPage, kLw, {0x40000});
  Segs out;
  EXPECT_EQ(tr(key + 1, kPd, 0x10000, 8, 0, out), AccessStatus::bad_key) << "wrong generation";
  EXPECT_EQ(tr(key + (1 << 8), kPd, 0x10000, 8, 0, out), AccessStatus::bad_key) << "free slot";
  EXPECT_EQ(tr(MPR_LKEY_END, kPd, 0x10000, 8, 0, out), AccessStatus::bad_key);
  // A freed key, and then its slot reused.
  ctx_.free_mr(key);
  EXPECT_EQ(tr(key, kPd, 0x10000, 8, 0, out), AccessStatus::bad_key);
  const uint32_t again = add_mr(kPd, 0x10000, kPage, kLw, {0x40000});
  EXPECT_EQ(again >> 8, key >> 8);
  EXPECT_EQ(tr(key, kPd, 0x10000, 8, 0, out), AccessStatus::bad_key);
  EXPECT_EQ(tr(again, kPd, 0x10000, 8, 0, out), AccessStatus::ok);
  EXPECT_EQ(out.size(), 1u) << "failed lookups append nothing";
}

TEST_F(TranslationTest, PdMismatch) {
  const uint32_t key = add_mr(kPd, 0x10000, kPage, kLw, {0x40000});
  Segs out;
  EXPECT_EQ(tr(key, kPd + 1, 0x10000, 8, 0, out), AccessStatus::pd_mismatch);
  // Checked before bounds and access.
  EXPECT_EQ(tr(key, kPd + 1, 0x90000, 8, MPR_ACCESS_REMOTE_ATOMIC, out), AccessStatus::pd_mismatch);
  EXPECT_TRUE(out.empty());
}

TEST_F(TranslationTest, Bounds) {
  const uint64_t iova = 0x10100;
  const uint32_t key = add_mr(kPd, iova, 2 * kPage, kLw, {0x40000, 0x41000, 0x42000});
  Segs out;
  EXPECT_EQ(tr(key, kPd, iova - 1, 8, 0, out), AccessStatus::bounds) << "below";
  EXPECT_EQ(tr(key, kPd, iova - 1, 1, 0, out), AccessStatus::bounds) << "the byte before";
  EXPECT_EQ(tr(key, kPd, iova + 2 * kPage - 8, 9, 0, out), AccessStatus::bounds) << "above";
  EXPECT_EQ(tr(key, kPd, iova + 2 * kPage, 1, 0, out), AccessStatus::bounds) << "the byte after";
  EXPECT_EQ(tr(key, kPd, iova, 2 * kPage + 1, 0, out), AccessStatus::bounds) << "too long";
  EXPECT_EQ(tr(key, kPd, iova + 8, ~uint64_t{0} - 4, 0, out), AccessStatus::bounds)
      << "va + len overflows";
  EXPECT_EQ(tr(key, kPd, ~uint64_t{0} - 4, 16, 0, out), AccessStatus::bounds)
      << "va + len overflows";
  EXPECT_TRUE(out.empty());
  // Exactly the MR: first and last byte.
  ASSERT_EQ(tr(key, kPd, iova, 1, 0, out), AccessStatus::ok);
  ASSERT_EQ(tr(key, kPd, iova + 2 * kPage - 1, 1, 0, out), AccessStatus::ok);
  EXPECT_EQ(out, (Segs{{0x40100, 1}, {0x420ff, 1}}));
}

TEST_F(TranslationTest, AccessRights) {
  const uint32_t ro = add_mr(kPd, 0x10000, kPage, 0, {0x40000});
  const uint32_t rr = add_mr(kPd, 0x20000, kPage, MPR_ACCESS_REMOTE_READ, {0x50000});
  const uint32_t all = add_mr(kPd, 0x30000, kPage, MPR_ACCESS_ALL, {0x60000});
  Segs out;
  EXPECT_EQ(tr(ro, kPd, 0x10000, 8, 0, out), AccessStatus::ok) << "local read needs no right";
  EXPECT_EQ(tr(ro, kPd, 0x10000, 8, kLw, out), AccessStatus::access);
  EXPECT_EQ(tr(ro, kPd, 0x10000, 8, MPR_ACCESS_REMOTE_READ, out), AccessStatus::access);
  EXPECT_EQ(tr(rr, kPd, 0x20000, 8, MPR_ACCESS_REMOTE_READ, out), AccessStatus::ok);
  EXPECT_EQ(tr(rr, kPd, 0x20000, 8, MPR_ACCESS_REMOTE_WRITE, out), AccessStatus::access);
  EXPECT_EQ(tr(rr, kPd, 0x20000, 8, MPR_ACCESS_REMOTE_READ | kLw, out), AccessStatus::access)
      << "every needed bit must be present";
  EXPECT_EQ(tr(all, kPd, 0x30000, 8, MPR_ACCESS_REMOTE_ATOMIC | kLw, out), AccessStatus::ok);
  // Checked before bounds.
  EXPECT_EQ(tr(ro, kPd, 0x90000, 8, kLw, out), AccessStatus::access);
  EXPECT_EQ(out.size(), 3u);
}

TEST_F(TranslationTest, ZeroLengthNeedsNoKey) {
  Segs out;
  EXPECT_EQ(tr(0xdeadbeef, 99, 0x1234, 0, MPR_ACCESS_ALL, out), AccessStatus::ok);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(tr(0xdeadbeef, 99, 0x1234, 1, 0, out), AccessStatus::bad_key);
}

TEST(AccessStatusNames, AreDistinct) {
  std::set<std::string> names;
  for (AccessStatus s : {AccessStatus::ok, AccessStatus::bad_key, AccessStatus::pd_mismatch,
                         AccessStatus::bounds, AccessStatus::access})
    names.insert(to_string(s));
  EXPECT_EQ(names.size(), 5u);
  EXPECT_STREQ(to_string(AccessStatus::ok), "ok");
}

TEST(SliceSegments, TakesAByteRangeOfTheConcatenation) {
  const Segs segs = {{0x1000, 100}, {0x5000, 50}, {0x9000, 200}};
  Segs out;
  slice_segments(segs, 0, 350, out);
  EXPECT_EQ(out, segs);
  out.clear();
  slice_segments(segs, 90, 20, out);
  EXPECT_EQ(out, (Segs{{0x105a, 10}, {0x5000, 10}}));
  out.clear();
  slice_segments(segs, 100, 50, out);
  EXPECT_EQ(out, (Segs{{0x5000, 50}})) << "exactly the second segment";
  out.clear();
  slice_segments(segs, 120, 1000, out);
  EXPECT_EQ(out, (Segs{{0x5014, 30}, {0x9000, 200}})) << "clipped at the end";
  out.clear();
  slice_segments(segs, 349, 1, out);
  EXPECT_EQ(out, (Segs{{0x90c7, 1}}));
  out.clear();
  slice_segments(segs, 350, 10, out);
  EXPECT_TRUE(out.empty()) << "past the end";
  slice_segments(segs, 10, 0, out);
  EXPECT_TRUE(out.empty()) << "zero length";
  slice_segments({}, 0, 10, out);
  EXPECT_TRUE(out.empty());
  // Appends.
  out = {{0x77, 1}};
  slice_segments(segs, 0, 1, out);
  EXPECT_EQ(out, (Segs{{0x77, 1}, {0x1000, 1}}));
}

// ---------------------------------------------------------------------------
// qp_params
// ---------------------------------------------------------------------------

TEST(QpParams, MtuBytes) {
  EXPECT_EQ(mtu_bytes(0), 0u);
  EXPECT_EQ(mtu_bytes(MPR_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(MPR_MTU_512), 512u);
  EXPECT_EQ(mtu_bytes(MPR_MTU_1024), 1024u);
  EXPECT_EQ(mtu_bytes(MPR_MTU_2048), 2048u);
  EXPECT_EQ(mtu_bytes(MPR_MTU_4096), 4096u);
  EXPECT_EQ(mtu_bytes(6), 0u);
  EXPECT_EQ(mtu_bytes(255), 0u);
}

TEST(QpParams, AckTimeout) {
  EXPECT_EQ(ack_timeout_ps(0), 0u) << "0 = no timeout";
  EXPECT_EQ(ack_timeout_ps(1), 8192000u);       // 4.096 us * 2
  EXPECT_EQ(ack_timeout_ps(14), 67108864000u);  // 4.096 us * 16384 = 67.1 ms
  EXPECT_EQ(ack_timeout_ps(31), uint64_t{4096000} << 31);
  for (uint8_t t = 1; t < 31; ++t) EXPECT_EQ(ack_timeout_ps(t + 1), 2 * ack_timeout_ps(t));
}

TEST(QpParams, RnrTimerTable) {
  // IB spec, RNR NAK timer field encoding (milliseconds).
  EXPECT_EQ(rnr_timer_ps(0), 655360000000u);   // 655.36 ms
  EXPECT_EQ(rnr_timer_ps(1), 10000000u);       // 0.01 ms
  EXPECT_EQ(rnr_timer_ps(2), 20000000u);       // 0.02 ms
  EXPECT_EQ(rnr_timer_ps(5), 60000000u);       // 0.06 ms
  EXPECT_EQ(rnr_timer_ps(12), 640000000u);     // 0.64 ms
  EXPECT_EQ(rnr_timer_ps(14), 1280000000u);    // 1.28 ms
  EXPECT_EQ(rnr_timer_ps(18), 5120000000u);    // 5.12 ms
  EXPECT_EQ(rnr_timer_ps(24), 40960000000u);   // 40.96 ms
  EXPECT_EQ(rnr_timer_ps(31), 491520000000u);  // 491.52 ms
  for (uint8_t c = 1; c < 31; ++c) EXPECT_LT(rnr_timer_ps(c), rnr_timer_ps(c + 1)) << int(c);
  EXPECT_GT(rnr_timer_ps(0), rnr_timer_ps(31)) << "code 0 is the longest";
}

TEST(QpParams, DefaultUdpSourcePort) {
  std::set<uint16_t> ports;
  for (uint32_t qpn = 2; qpn < 2000; ++qpn) {
    const uint16_t p = default_udp_sport(qpn, qpn ^ 0x55);
    EXPECT_GE(p, 0xC000);
    EXPECT_EQ(p, default_udp_sport(qpn, qpn ^ 0x55)) << "deterministic";
    ports.insert(p);
  }
  EXPECT_GT(ports.size(), 1500u) << "connections spread over the range";
}

// A QP context as MODIFY_QP leaves it, for addressing tests.
mpr_qpc rts_qpc() {
  mpr_qpc q{};
  q.qpn = 9;
  q.valid = 1;
  q.state = MPR_QPS_RTS;
  mpr_qp_attr& a = q.attr;
  a.sgid_index = 1;
  a.hop_limit = 5;
  a.traffic_class = 0x6A;  // DSCP 26, ECN bits 2
  a.udp_sport = 0;
  a.dest_qpn = 0x123456;
  const uint8_t dgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 9, 8, 7};
  std::memcpy(a.dgid, dgid, 16);
  const uint8_t dmac[6] = {0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee};
  std::memcpy(a.dmac, dmac, 6);
  a.sq_psn = 0xABCDEF;
  a.rq_psn = 0x123;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 5;
  return q;
}

TEST(QpParams, BaseFieldsAddressThePacketFromTheQpc) {
  ContextMemory ctx(limits());
  const uint8_t sgid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3};
  ASSERT_TRUE(ctx.set_gid(1, sgid));
  NicConfig cfg;
  cfg.mac = {0x02, 0, 0, 0, 0, 0x42};
  cfg.ip = 0x0A000063;
  mpr_qpc q = rts_qpc();
  net::RoceFields f = qp_base_fields(q, cfg, ctx);
  EXPECT_EQ(f.src_mac.b, cfg.mac);
  EXPECT_EQ(f.dst_mac.b, (std::array<uint8_t, 6>{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}));
  EXPECT_EQ(f.src_ip, 0x0A010203u) << "from the source GID";
  EXPECT_EQ(f.dst_ip, 0x0A090807u);
  EXPECT_EQ(f.dscp, 26);
  EXPECT_EQ(f.ttl, 5);
  EXPECT_EQ(f.dest_qp, 0x123456u);
  EXPECT_EQ(f.udp_sport, default_udp_sport(9, 0x123456));

  // A chosen UDP port is kept; hop limit 0 means the default TTL; without a
  // source GID the NIC's own address is used.
  q.attr.udp_sport = 0xD001;
  q.attr.hop_limit = 0;
  q.attr.sgid_index = 2;
  f = qp_base_fields(q, cfg, ctx);
  EXPECT_EQ(f.udp_sport, 0xD001);
  EXPECT_EQ(f.ttl, 64);
  EXPECT_EQ(f.src_ip, 0x0A000063u);

  // A datagram QP has no address vector: it sends from the NIC's address,
  // whatever GID its (unused) sgid_index names. GID 0 of a guest is the
  // IPv6 link-local one (fe80::ff:fe00:1), whose last bytes once made the
  // source 254.0.0.1.
  const uint8_t link_local[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 1};
  ASSERT_TRUE(ctx.set_gid(0, link_local));
  q.qp_type = MPR_QPT_UD;
  q.attr.sgid_index = 0;
  EXPECT_EQ(qp_base_fields(q, cfg, ctx).src_ip, 0x0A000063u);
  q.attr.sgid_index = 1;
  EXPECT_EQ(qp_base_fields(q, cfg, ctx).src_ip, 0x0A000063u);
}

TEST(QpParams, ConnParamsFromTheQpc) {
  NicConfig cfg;  // 250 MHz: 4000 ps per cycle
  cfg.ack_coalesce = 5;
  const mpr_qpc q = rts_qpc();
  net::RoceFields base;
  base.udp_sport = 0xE123;
  ConnParams p = conn_params(q, cfg, base);
  EXPECT_EQ(p.qpn, 9u);
  EXPECT_EQ(p.dest_qpn, 0x123456u);
  EXPECT_EQ(p.sq_psn, 0xABCDEFu);
  EXPECT_EQ(p.rq_psn, 0x123u);
  EXPECT_EQ(p.ack_timeout_cycles, 67108864000u / 4000);
  EXPECT_EQ(p.retry_cnt, 6);
  EXPECT_EQ(p.rnr_retry, 5);
  EXPECT_EQ(p.udp_sport, 0xE123);
  EXPECT_EQ(p.ack_coalesce, 5u);

  mpr_qpc q0 = rts_qpc();
  q0.attr.timeout = 0;
  EXPECT_EQ(conn_params(q0, cfg, base).ack_timeout_cycles, 0u) << "no timeout";
  // Rounded up to whole cycles: never shorter than asked.
  cfg.clock = core::Frequency{3e8};  // 3333 ps per cycle
  q0.attr.timeout = 1;
  const uint64_t cycles = conn_params(q0, cfg, base).ack_timeout_cycles;
  EXPECT_GE(cycles * cfg.period_ps(), ack_timeout_ps(1));
  EXPECT_LT((cycles - 1) * cfg.period_ps(), ack_timeout_ps(1));
}

}  // namespace
}  // namespace mprdma::nic
