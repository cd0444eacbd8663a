// The NIC's context tables: deterministic lowest-free allocation, MR keys
// with generations, the MTT run allocator and the GID table.
#include "vp/nic/context_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "vp/nic/nic_config.h"

namespace mprdma::nic {
namespace {

NicLimits tiny() {
  NicLimits l;
  l.max_pd = 4;
  l.max_eq = 3;
  l.max_cq = 3;
  l.max_qp = 3;
  l.max_mr = 3;
  l.max_mtt = 16;
  l.max_gids = 4;
  return l;
}

TEST(ContextMemory, PdZeroIsNeverHandedOut) {
  ContextMemory m(tiny());
  EXPECT_FALSE(m.pd_valid(0));
  EXPECT_EQ(m.alloc_pd(), 1);
  EXPECT_EQ(m.alloc_pd(), 2);
  EXPECT_EQ(m.alloc_pd(), 3);
  EXPECT_EQ(m.alloc_pd(), -1);
  EXPECT_FALSE(m.pd_valid(0));
  EXPECT_TRUE(m.pd_valid(2));
  EXPECT_FALSE(m.pd_valid(4));
  m.free_pd(2);
  EXPECT_FALSE(m.pd_valid(2));
  EXPECT_EQ(m.alloc_pd(), 2);
}

TEST(ContextMemory, PdReferences) {
  ContextMemory m(tiny());
  const auto pdn = static_cast<uint32_t>(m.alloc_pd());
  EXPECT_EQ(m.pd_refs(pdn), 0u);
  m.pd_ref(pdn, +1);
  m.pd_ref(pdn, +1);
  EXPECT_EQ(m.pd_refs(pdn), 2u);
  m.pd_ref(pdn, -1);
  EXPECT_EQ(m.pd_refs(pdn), 1u);
  EXPECT_EQ(m.pd_refs(pdn + 1), 0u) << "an invalid PD has no references";
  m.free_pd(pdn);
  EXPECT_EQ(m.alloc_pd(), pdn);
  EXPECT_EQ(m.pd_refs(pdn), 0u) << "a reallocated PD starts with none";
}

TEST(ContextMemory, EqAndCqAllocationIsLowestFreeAndZeroed) {
  ContextMemory m(tiny());
  EXPECT_EQ(m.alloc_eq(), 0);
  EXPECT_EQ(m.alloc_eq(), 1);
  EXPECT_EQ(m.alloc_eq(), 2);
  EXPECT_EQ(m.alloc_eq(), -1);
  m.eq(1)->base = 0x1234;
  m.eq(1)->num_cqs = 7;
  m.free_eq(1);
  EXPECT_EQ(m.eq(1), nullptr);
  EXPECT_EQ(m.alloc_eq(), 1);
  ASSERT_NE(m.eq(1), nullptr);
  EXPECT_EQ(m.eq(1)->eqn, 1u);
  EXPECT_EQ(m.eq(1)->valid, 1);
  EXPECT_EQ(m.eq(1)->base, 0u);
  EXPECT_EQ(m.eq(1)->num_cqs, 0u);
  EXPECT_EQ(m.eq(3), nullptr);

  EXPECT_EQ(m.alloc_cq(), 0);
  EXPECT_EQ(m.alloc_cq(), 1);
  m.cq(0)->pi = 99;
  m.free_cq(0);
  EXPECT_EQ(m.cq(0), nullptr);
  EXPECT_EQ(m.alloc_cq(), 0);
  EXPECT_EQ(m.cq(0)->pi, 0u);
  EXPECT_EQ(m.cq(0)->cqn, 0u);
  EXPECT_EQ(m.alloc_cq(), 2);
  EXPECT_EQ(m.alloc_cq(), -1);
  EXPECT_EQ(m.cq(3), nullptr);
  EXPECT_EQ(m.cq(0xffffffff), nullptr);
}

TEST(ContextMemory, QpNumbersStartAtTheFirstQpn) {
  ContextMemory m(tiny());
  EXPECT_EQ(m.alloc_qp(), kFirstQpn);
  EXPECT_EQ(m.alloc_qp(), kFirstQpn + 1);
  EXPECT_EQ(m.alloc_qp(), kFirstQpn + 2);
  EXPECT_EQ(m.alloc_qp(), -1);
  EXPECT_EQ(m.qp_count(), 3u);
  EXPECT_EQ(m.qp(0), nullptr);
  EXPECT_EQ(m.qp(1), nullptr);
  EXPECT_EQ(m.qp(kFirstQpn + 3), nullptr);
  ASSERT_NE(m.qp(kFirstQpn + 1), nullptr);
  EXPECT_EQ(m.qp(kFirstQpn + 1)->qpn, kFirstQpn + 1);
  m.qp(kFirstQpn + 1)->state = MPR_QPS_RTS;
  m.free_qp(kFirstQpn + 1);
  EXPECT_EQ(m.qp_count(), 2u);
  EXPECT_EQ(m.qp(kFirstQpn + 1), nullptr);
  const ContextMemory& cm = m;
  EXPECT_EQ(cm.qp(kFirstQpn + 1), nullptr);
  EXPECT_NE(cm.qp(kFirstQpn), nullptr);
  EXPECT_EQ(m.alloc_qp(), kFirstQpn + 1);
  EXPECT_EQ(m.qp(kFirstQpn + 1)->state, MPR_QPS_RESET);
}

TEST(ContextMemory, MrKeysCarryRandomBitsBelowTheIndex) {
  ContextMemory m(tiny());
  const int64_t k0 = m.alloc_mr();
  const int64_t k1 = m.alloc_mr();
  EXPECT_EQ(k0 >> 8, 0);
  EXPECT_EQ(k1 >> 8, 1);
  EXPECT_EQ(m.mr_index(static_cast<uint32_t>(k1)), 1u);
  ASSERT_NE(m.mr(static_cast<uint32_t>(k0)), nullptr);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0))->key, k0);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0))->valid, 1);
  m.free_mr(static_cast<uint32_t>(k0));
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0)), nullptr);
  const int64_t k2 = m.alloc_mr();
  EXPECT_EQ(k2 >> 8, 0) << "same slot";
  EXPECT_NE(k2, k0) << "another key";
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0)), nullptr);
  EXPECT_NE(m.mr(static_cast<uint32_t>(k2)), nullptr);
  EXPECT_EQ(m.alloc_mr() >> 8, 2);
  EXPECT_EQ(m.alloc_mr(), -1);
  EXPECT_EQ(m.mr(3 << 8 | 1), nullptr) << "beyond the table";
  EXPECT_EQ(m.mr(MPR_LKEY_END), nullptr);
}

// Re-registering one entry never gives the key it had just before, and the
// keys are spread over the 8 random bits (not a counter a peer could
// follow); the same seed gives the same keys.
TEST(ContextMemory, ReRegistrationsDrawKeysAtRandom) {
  HandlePolicy h;
  h.seed = 42;
  ContextMemory m(tiny(), Icm::kQpcEntryBytes, h), again(tiny(), Icm::kQpcEntryBytes, h);
  std::set<int64_t> seen;
  int64_t last = -1;
  int ascending = 0;
  for (int i = 0; i < 255; ++i) {
    const int64_t k = m.alloc_mr();
    ASSERT_EQ(k >> 8, 0);
    EXPECT_NE(k, last) << "the entry's previous key again";
    EXPECT_EQ(again.alloc_mr(), k);
    ascending += k == last + 1;
    last = k;
    seen.insert(k);
    m.free_mr(static_cast<uint32_t>(k));
    again.free_mr(static_cast<uint32_t>(k));
  }
  EXPECT_GT(seen.size(), 140u);  // 255 draws of 255 values: ~160 distinct
  EXPECT_LT(ascending, 10);
}

// With no random bits the key is the index; lowest-free QP numbers are 2,
// 3, ...; random ones keep the table index in the low bits.
TEST(ContextMemory, HandlePoliciesShapeKeysAndQpNumbers) {
  HandlePolicy plain;
  plain.key_random_bits = 0;
  ContextMemory p(tiny(), Icm::kQpcEntryBytes, plain);
  EXPECT_EQ(p.alloc_mr(), 0);
  EXPECT_EQ(p.alloc_mr(), 1);
  EXPECT_EQ(p.alloc_qp(), 2);
  EXPECT_EQ(p.alloc_qp(), 3);
  HandlePolicy random;
  random.random_qpn = true;
  random.seed = 7;
  ContextMemory r(tiny(), Icm::kQpcEntryBytes, random);
  const uint32_t bits = r.qpn_index_bits();
  EXPECT_EQ(bits, ContextMemory::qpn_index_bits_for(tiny(), true));
  const auto q0 = static_cast<uint32_t>(r.alloc_qp());
  const auto q1 = static_cast<uint32_t>(r.alloc_qp());
  EXPECT_EQ(r.qp_index(q0), 0u);
  EXPECT_EQ(r.qp_index(q1), 1u);
  EXPECT_LT(q0, 1u << 24);
  EXPECT_NE(q0 >> bits, 0u) << "random bits above the index";
  ASSERT_NE(r.qp(q0), nullptr);
  EXPECT_EQ(r.qp(q0 ^ (1u << bits)), nullptr) << "the index alone does not find the QP";
  r.free_qp(q0);
  const auto q2 = static_cast<uint32_t>(r.alloc_qp());
  EXPECT_EQ(r.qp_index(q2), 0u);
  EXPECT_NE(q2, q0) << "a new QP in the entry gets another number";
  EXPECT_EQ(r.qp(q0), nullptr);
  EXPECT_EQ(r.qpns(), (std::vector<uint32_t>{q2, q1}));
}

TEST(ContextMemory, MttRunsAreFirstFitAndMergeWhenFreed) {
  ContextMemory m(tiny());  // 16 entries
  EXPECT_EQ(m.alloc_mtt(0), -1);
  EXPECT_EQ(m.alloc_mtt(17), -1);
  EXPECT_EQ(m.alloc_mtt(4), 0);
  EXPECT_EQ(m.alloc_mtt(4), 4);
  EXPECT_EQ(m.alloc_mtt(4), 8);
  EXPECT_EQ(m.alloc_mtt(4), 12);
  EXPECT_EQ(m.alloc_mtt(1), -1);
  // Free the middle two runs, in reverse order: they merge into 4..11.
  m.free_mtt(8, 4);
  m.free_mtt(4, 4);
  EXPECT_EQ(m.alloc_mtt(8), 4);
  m.free_mtt(4, 8);
  // Free the neighbours: everything merges back into one run of 16.
  m.free_mtt(0, 4);
  m.free_mtt(12, 4);
  EXPECT_EQ(m.alloc_mtt(16), 0);
  m.free_mtt(0, 16);
  // Holes: a request takes the first hole large enough.
  EXPECT_EQ(m.alloc_mtt(2), 0);
  EXPECT_EQ(m.alloc_mtt(3), 2);
  EXPECT_EQ(m.alloc_mtt(2), 5);
  m.free_mtt(0, 2);
  m.free_mtt(5, 2);
  EXPECT_EQ(m.alloc_mtt(3), 5) << "the 2-entry hole at 0 is too small";
  EXPECT_EQ(m.alloc_mtt(2), 0);
  m.free_mtt(0, 0);  // no-op
  EXPECT_EQ(m.alloc_mtt(1), 8);
}

TEST(ContextMemory, MttEntriesHoldPageAddresses) {
  ContextMemory m(tiny());
  m.set_mtt(3, 0xABCD000);
  m.set_mtt(15, 0x1000);
  EXPECT_EQ(m.mtt(3), 0xABCD000u);
  EXPECT_EQ(m.mtt(15), 0x1000u);
  EXPECT_EQ(m.mtt(4), 0u);
}

TEST(ContextMemory, GidTable) {
  ContextMemory m(tiny());
  uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  EXPECT_EQ(m.gid(0), nullptr);
  EXPECT_TRUE(m.set_gid(3, gid));
  EXPECT_FALSE(m.set_gid(4, gid));
  ASSERT_NE(m.gid(3), nullptr);
  EXPECT_EQ(std::memcmp(m.gid(3), gid, 16), 0);
  gid[15] = 2;
  EXPECT_NE(std::memcmp(m.gid(3), gid, 16), 0) << "the table holds a copy";
  EXPECT_EQ(m.gid(4), nullptr);
  EXPECT_EQ(m.gid(255), nullptr);
}

TEST(ContextMemory, ClearDestroysEverything) {
  ContextMemory m(tiny());
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  m.alloc_pd();
  m.alloc_eq();
  m.alloc_cq();
  m.alloc_qp();
  const int64_t key = m.alloc_mr();
  m.alloc_mtt(16);
  m.set_gid(0, gid);
  m.clear();
  EXPECT_FALSE(m.pd_valid(1));
  EXPECT_EQ(m.eq(0), nullptr);
  EXPECT_EQ(m.cq(0), nullptr);
  EXPECT_EQ(m.qp(kFirstQpn), nullptr);
  EXPECT_EQ(m.qp_count(), 0u);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(key)), nullptr);
  EXPECT_EQ(m.gid(0), nullptr);
  EXPECT_EQ(m.alloc_pd(), 1);
  EXPECT_EQ(m.alloc_qp(), kFirstQpn);
  EXPECT_EQ(m.alloc_mtt(16), 0);
  EXPECT_EQ(m.limits().max_mtt, 16);
}

// The tables are allocated a page at a time on first write: a NIC with the
// default limits (4 Mi MTT entries, 64 Ki MPTs, 4 Ki QPs and CQs) must not
// cost their full size (about 36 MiB) before it is used.
TEST(ContextMemory, DefaultLimitsCostLittleUntilUsed) {
  const NicLimits l;  // the defaults
  ASSERT_EQ(l.max_mtt, 1 << 22);
  ContextMemory m(l);
  const size_t empty = m.bytes_allocated();
  EXPECT_LT(empty, 4u * 1024) << "an unused NIC holds only its GID table and bitmaps";
  // A small working set: a PD, an EQ, a CQ, a QP, an MR of 16 pages.
  ASSERT_EQ(m.alloc_pd(), 1);
  ASSERT_EQ(m.alloc_eq(), 0);
  ASSERT_EQ(m.alloc_cq(), 0);
  ASSERT_EQ(m.alloc_qp(), kFirstQpn);
  ASSERT_GE(m.alloc_mr(), 0);
  ASSERT_EQ(m.alloc_mtt(16), 0);
  for (uint32_t i = 0; i < 16; ++i) ASSERT_TRUE(m.set_mtt(i, 0x1000u * (i + 1)));
  const size_t used = m.bytes_allocated();
  EXPECT_GT(used, empty);
  EXPECT_LT(used, 64u * 1024) << "one page per table touched";
}

TEST(ContextMemory, HighIndicesGrowTheTablesAndRoundTrip) {
  const NicLimits l;
  ContextMemory m(l);
  const auto last = static_cast<uint32_t>(l.max_mtt - 1);
  const size_t before = m.bytes_allocated();
  EXPECT_EQ(m.mtt(last), 0u) << "never written: reads as zero";
  EXPECT_EQ(m.bytes_allocated(), before) << "a read allocates nothing";
  ASSERT_TRUE(m.set_mtt(last, 0xFEDCBA000));
  ASSERT_TRUE(m.set_mtt(last - 1, 0x5000));
  EXPECT_EQ(m.mtt(last), 0xFEDCBA000u);
  EXPECT_EQ(m.mtt(last - 1), 0x5000u);
  EXPECT_EQ(m.mtt(last - 2), 0u) << "an unwritten neighbour on an allocated page";
  EXPECT_EQ(m.mtt(0), 0u) << "an unwritten entry on a page never allocated";
  const size_t after = m.bytes_allocated();
  EXPECT_GT(after, before);
  // One page of entries and the page directory up to the last page; far
  // below the 32 MiB of the whole table.
  EXPECT_LT(after - before, 128u * 1024);

  // Fill the MR table: the last MPT index is handed out, its key works, and
  // the table then refuses one more.
  int64_t key = -1;
  for (int64_t i = 0; i < l.max_mr; ++i) ASSERT_GE(key = m.alloc_mr(), 0) << i;
  EXPECT_EQ(key >> 8, l.max_mr - 1);
  ASSERT_NE(m.mr(static_cast<uint32_t>(key)), nullptr);
  m.mr(static_cast<uint32_t>(key))->length = 12345;
  EXPECT_EQ(m.mr(static_cast<uint32_t>(key))->length, 12345u);
  EXPECT_EQ(m.alloc_mr(), -1);
  EXPECT_GT(m.bytes_allocated(), after + size_t(l.max_mr) * sizeof(mpr_mpt))
      << "a full table costs what it holds";
  // Freeing the last one and allocating again reuses it with a new generation.
  m.free_mr(static_cast<uint32_t>(key));
  EXPECT_EQ(m.mr(static_cast<uint32_t>(key)), nullptr);
  const int64_t again = m.alloc_mr();
  EXPECT_EQ(again, ((l.max_mr - 1) << 8) | 2);

  // The same for QPs: the highest QPN exists once every QP is allocated.
  int64_t qpn = -1;
  for (int64_t i = 0; i < l.max_qp; ++i) ASSERT_GE(qpn = m.alloc_qp(), 0) << i;
  EXPECT_EQ(qpn, l.max_qp - 1 + kFirstQpn);
  ASSERT_NE(m.qp(static_cast<uint32_t>(qpn)), nullptr);
  m.qp(static_cast<uint32_t>(qpn))->sq_base = 0xABC000;
  EXPECT_EQ(m.qp(static_cast<uint32_t>(qpn))->sq_base, 0xABC000u);
  EXPECT_EQ(m.qp(static_cast<uint32_t>(qpn))->qpn, static_cast<uint32_t>(qpn));
  EXPECT_EQ(m.alloc_qp(), -1);

  // A device reset gives everything back.
  m.clear();
  EXPECT_EQ(m.bytes_allocated(), before);
  EXPECT_EQ(m.mtt(last), 0u);
  EXPECT_EQ(m.qp(static_cast<uint32_t>(qpn)), nullptr);
}

TEST(ContextMemory, IndicesBeyondTheLimitsStillFail) {
  const NicLimits l;
  ContextMemory m(l);
  const size_t before = m.bytes_allocated();
  const auto max_mtt = static_cast<uint32_t>(l.max_mtt);
  EXPECT_FALSE(m.set_mtt(max_mtt, 0x1000));
  EXPECT_FALSE(m.set_mtt(0xFFFFFFFF, 0x1000));
  EXPECT_EQ(m.mtt(max_mtt), 0u);
  EXPECT_EQ(m.mtt(0xFFFFFFFF), 0u);
  EXPECT_EQ(m.alloc_mtt(max_mtt + 1), -1);
  EXPECT_FALSE(m.pd_valid(static_cast<uint32_t>(l.max_pd)));
  EXPECT_EQ(m.pd_refs(static_cast<uint32_t>(l.max_pd)), 0u);
  EXPECT_EQ(m.eq(static_cast<uint32_t>(l.max_eq)), nullptr);
  EXPECT_EQ(m.cq(static_cast<uint32_t>(l.max_cq)), nullptr);
  EXPECT_EQ(m.cq(0xFFFFFFFF), nullptr);
  EXPECT_EQ(m.qp(static_cast<uint32_t>(l.max_qp) + kFirstQpn), nullptr);
  EXPECT_EQ(m.qp(0xFFFFFFFF), nullptr);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(l.max_mr) << 8 | 1), nullptr);
  EXPECT_EQ(m.mr(0xFFFFFFFF), nullptr);
  EXPECT_EQ(m.bytes_allocated(), before) << "failed lookups allocate nothing";

  // The whole MTT can still be allocated as one run, and no more.
  EXPECT_EQ(m.alloc_mtt(max_mtt), 0);
  EXPECT_EQ(m.alloc_mtt(1), -1);
  EXPECT_LE(m.bytes_allocated(), before) << "an MTT run costs nothing until written";

  // Small limits: the last index works, the next one is refused.
  ContextMemory t(tiny());
  EXPECT_TRUE(t.set_mtt(15, 7));
  EXPECT_FALSE(t.set_mtt(16, 7));
  EXPECT_EQ(t.mtt(15), 7u);
  EXPECT_EQ(t.mtt(16), 0u);
}

}  // namespace
}  // namespace mprdma::nic
