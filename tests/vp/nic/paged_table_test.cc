// PagedTable: a fixed-capacity table allocated a page at a time on first
// write, with zero reads for entries never written.
#include "vp/nic/paged_table.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace mprdma::nic {
namespace {

struct Entry {
  uint64_t a;
  uint32_t b;
};

using Table = PagedTable<Entry, 4>;  // 16 entries per page

TEST(PagedTable, StartsEmptyAndReadsZero) {
  Table t(100);
  EXPECT_EQ(t.capacity(), 100u);
  EXPECT_EQ(t.pages_allocated(), 0u);
  EXPECT_EQ(t.bytes_allocated(), 0u);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(99), nullptr);
  EXPECT_EQ(t.get(50).a, 0u);
  EXPECT_EQ(t.get(50).b, 0u);
  EXPECT_EQ(t.pages_allocated(), 0u) << "reads allocate nothing";
}

TEST(PagedTable, TouchAllocatesOneZeroedPage) {
  Table t(100);
  Entry* e = t.touch(37);  // page 2: entries 32..47
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->a, 0u);
  e->a = 7;
  e->b = 9;
  EXPECT_EQ(t.pages_allocated(), 1u);
  EXPECT_EQ(t.find(37), e);
  EXPECT_EQ(t.get(37).a, 7u);
  EXPECT_EQ(t.get(37).b, 9u);
  ASSERT_NE(t.find(32), nullptr) << "the rest of the page exists, zeroed";
  EXPECT_EQ(t.find(32)->a, 0u);
  ASSERT_NE(t.find(47), nullptr);
  EXPECT_EQ(t.find(48), nullptr) << "the next page does not";
  EXPECT_EQ(t.find(31), nullptr) << "nor the one before";
  EXPECT_GE(t.bytes_allocated(), 16 * sizeof(Entry));
}

TEST(PagedTable, CapacityIsEnforcedInsideTheLastPage) {
  Table t(100);  // the last page, 96..111, is only partly inside
  ASSERT_NE(t.touch(99), nullptr);
  EXPECT_EQ(t.touch(100), nullptr);
  EXPECT_EQ(t.find(100), nullptr);
  EXPECT_EQ(t.find(111), nullptr);
  EXPECT_EQ(t.get(100).a, 0u);
  EXPECT_EQ(t.touch(UINT64_MAX), nullptr);
  EXPECT_EQ(t.pages_allocated(), 1u);
  const PagedTable<uint64_t, 9> none(0);
  EXPECT_EQ(none.find(0), nullptr);
}

TEST(PagedTable, EntriesStayPutAsTheTableGrows) {
  Table t(1 << 20);
  Entry* low = t.touch(3);
  low->a = 1;
  for (uint64_t i = 0; i < (1 << 20); i += 4096) t.touch(i)->b = static_cast<uint32_t>(i);
  EXPECT_EQ(t.find(3), low) << "pages never move";
  EXPECT_EQ(low->a, 1u);
  EXPECT_EQ(t.get(4096 * 7).b, 4096u * 7);
  EXPECT_EQ(t.pages_allocated(), 256u);
}

TEST(PagedTable, ResetForgetsEverything) {
  Table t(100);
  t.touch(5)->a = 1;
  t.touch(90)->a = 2;
  t.reset(20);
  EXPECT_EQ(t.capacity(), 20u);
  EXPECT_EQ(t.pages_allocated(), 0u);
  EXPECT_EQ(t.bytes_allocated(), 0u);
  EXPECT_EQ(t.get(5).a, 0u);
  EXPECT_EQ(t.touch(90), nullptr);
}

}  // namespace
}  // namespace mprdma::nic
