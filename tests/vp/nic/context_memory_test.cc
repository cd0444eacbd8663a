// The NIC's context tables: deterministic lowest-free allocation, MR keys
// with generations, the MTT run allocator and the GID table.
#include "vp/nic/context_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>

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

TEST(ContextMemory, MrKeysCarryAGeneration) {
  ContextMemory m(tiny());
  const int64_t k0 = m.alloc_mr();
  const int64_t k1 = m.alloc_mr();
  EXPECT_EQ(k0, (0 << 8) | 1);
  EXPECT_EQ(k1, (1 << 8) | 1);
  ASSERT_NE(m.mr(static_cast<uint32_t>(k0)), nullptr);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0))->key, k0);
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0))->valid, 1);
  m.free_mr(static_cast<uint32_t>(k0));
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0)), nullptr);
  const int64_t k2 = m.alloc_mr();
  EXPECT_EQ(k2, (0 << 8) | 2) << "same slot, next generation";
  EXPECT_EQ(m.mr(static_cast<uint32_t>(k0)), nullptr);
  EXPECT_NE(m.mr(static_cast<uint32_t>(k2)), nullptr);
  EXPECT_EQ(m.alloc_mr(), (2 << 8) | 1);
  EXPECT_EQ(m.alloc_mr(), -1);
  EXPECT_EQ(m.mr(3 << 8 | 1), nullptr) << "beyond the table";
  EXPECT_EQ(m.mr(MPR_LKEY_END), nullptr);
}

TEST(ContextMemory, ManyReRegistrationsNeverRepeatARecentKey) {
  ContextMemory m(tiny());
  std::set<int64_t> seen;
  for (int i = 0; i < 255; ++i) {
    const int64_t k = m.alloc_mr();
    ASSERT_EQ(k >> 8, 0);
    EXPECT_TRUE(seen.insert(k).second) << "key " << k << " repeated after " << i;
    m.free_mr(static_cast<uint32_t>(k));
  }
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

}  // namespace
}  // namespace mprdma::nic
