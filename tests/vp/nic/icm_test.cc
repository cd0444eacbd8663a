// The ICM layout (vp/nic/icm.h): table offsets, QP-context entry sizes that
// follow the engine's state, and the host pieces of an entry whose pages
// the driver mapped anywhere.
#include "vp/nic/icm.h"

#include <gtest/gtest.h>

#include <vector>

namespace mprdma::nic {
namespace {

NicLimits small_limits() {
  NicLimits l;
  l.max_qp = 8;
  l.max_cq = 64;
  l.max_mr = 64;
  l.max_mtt = 512;
  return l;
}

TEST(Icm, QpcEntryHoldsTheContextAndTheEngineState) {
  EXPECT_EQ(Icm::qpc_entry_bytes(0), 256u);
  EXPECT_EQ(Icm::qpc_entry_bytes(28), 256u);  // go-back-N
  EXPECT_EQ(Icm::qpc_entry_bytes(128), 256u);
  EXPECT_EQ(Icm::qpc_entry_bytes(129), 512u);
  EXPECT_EQ(Icm::qpc_entry_bytes(16453), 32768u);  // MP-RDMA with L = 65536
}

TEST(Icm, TablesStartOnPagesOneAfterTheOther) {
  const Icm icm(small_limits(), 8192);
  // QPC: 8 x 8 KiB = 16 pages; CQC 64 x 64 B = 1; MPT 64 x 64 B = 1; MTT 512 x 8 B = 1.
  EXPECT_EQ(icm.table_offset(IcmTable::qpc), 0u);
  EXPECT_EQ(icm.table_offset(IcmTable::cqc), 16u * 4096);
  EXPECT_EQ(icm.table_offset(IcmTable::mpt), 17u * 4096);
  EXPECT_EQ(icm.table_offset(IcmTable::mtt), 18u * 4096);
  EXPECT_EQ(icm.pages(), 19u);
  EXPECT_EQ(icm.entry_offset(IcmTable::qpc, 3), 3u * 8192);
}

TEST(Icm, PiecesFollowTheMappedPagesOfALargeEntry) {
  Icm icm(small_limits(), 8192);
  // QP entry 1 is ICM pages 2 and 3: map them apart, then together.
  ASSERT_TRUE(icm.map(2, 0x50000));
  EXPECT_TRUE(icm.pieces(IcmTable::qpc, 1, 8192).empty()) << "page 3 unmapped";
  ASSERT_TRUE(icm.map(3, 0x90000));
  std::vector<Icm::Piece> p = icm.pieces(IcmTable::qpc, 1, 5000);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].pa, 0x50000u);
  EXPECT_EQ(p[0].len, 4096u);
  EXPECT_EQ(p[1].pa, 0x90000u);
  EXPECT_EQ(p[1].len, 5000u - 4096u);
  ASSERT_TRUE(icm.map(3, 0x51000));  // now contiguous: one piece
  p = icm.pieces(IcmTable::qpc, 1, 8192);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].pa, 0x50000u);
  EXPECT_EQ(p[0].len, 8192u);
  // Small entries inside a page: one piece at the entry's offset.
  ASSERT_TRUE(icm.map(16, 0x7000));
  p = icm.pieces(IcmTable::cqc, 5, 64);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].pa, 0x7000u + 5 * 64);
  EXPECT_TRUE(icm.pieces(IcmTable::cqc, 64, 64).empty()) << "index beyond the table";
}

TEST(Icm, MapRefusesPagesBeyondTheIcmAndUnalignedAddresses) {
  Icm icm(small_limits());
  EXPECT_FALSE(icm.map(icm.pages(), 0x1000));
  EXPECT_FALSE(icm.map(0, 0x1008));
  EXPECT_EQ(icm.mapped_pages(), 0u);
  EXPECT_TRUE(icm.map(0, 0x1000));
  EXPECT_EQ(icm.mapped_pages(), 1u);
  icm.clear();
  EXPECT_EQ(icm.mapped_pages(), 0u);
}

}  // namespace
}  // namespace mprdma::nic
