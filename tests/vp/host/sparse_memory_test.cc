// The host's sparse physical memory and its page-frame allocator.
#include "vp/host/sparse_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <vector>

#include "support/resident.h"

namespace mprdma::host {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

using test::resident_bytes;

TEST(SparseMemory, ReadWritePtrAcrossPages) {
  SparseMemory mem(0x100000, 1 << 20);
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i ^ (i >> 8));
  const uint64_t pa = 0x100000 + 4096 - 100;  // spans three pages
  ASSERT_TRUE(mem.write(pa, data.data(), data.size()));
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(mem.read(pa, back.data(), back.size()));
  EXPECT_EQ(back, data);
  uint8_t* p = mem.ptr(pa, data.size());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
  p[5] = 0x77;  // the pointer is the memory
  uint8_t b = 0;
  ASSERT_TRUE(mem.read(pa + 5, &b, 1));
  EXPECT_EQ(b, 0x77);
  // Untouched memory reads as zero.
  ASSERT_TRUE(mem.read(0x100000 + 0x80000, &b, 1));
  EXPECT_EQ(b, 0);
}

TEST(SparseMemory, OutsideTheRangeIsNotBacked) {
  SparseMemory mem(0x100000, 1 << 20);
  uint8_t buf[16] = {};
  EXPECT_FALSE(mem.read(0x0ff000, buf, 16));         // below
  EXPECT_FALSE(mem.read(0x200000, buf, 1));          // just past the end
  EXPECT_FALSE(mem.write(0x200000 - 8, buf, 16));    // straddles the end
  EXPECT_FALSE(mem.write(UINT64_MAX - 4, buf, 16));  // would wrap
  EXPECT_EQ(mem.ptr(0x200000 - 8, 16), nullptr);
  EXPECT_TRUE(mem.write(0x200000 - 16, buf, 16));  // last bytes
  EXPECT_NE(mem.ptr(0x100000, 1 << 20), nullptr);  // the whole range
  EXPECT_THROW(SparseMemory(0x1001, 4096), std::invalid_argument);
  EXPECT_THROW(SparseMemory(0, 0), std::invalid_argument);
}

// 64 GiB of host memory costs only the pages written.
TEST(SparseMemory, HugeRangeCostsOnlyTouchedPages) {
  const uint64_t before = resident_bytes();
  SparseMemory mem(0, 64 * kGiB);
  const uint64_t one = 1;
  for (uint64_t gib = 0; gib < 64; gib += 4) ASSERT_TRUE(mem.write(gib * kGiB + 8, &one, 8));
  ASSERT_TRUE(mem.write(64 * kGiB - 8, &one, 8));
  uint64_t got = 0;
  ASSERT_TRUE(mem.read(40 * kGiB + 8, &got, 8));
  EXPECT_EQ(got, 1u);
  ASSERT_TRUE(mem.read(41 * kGiB, &got, 8));  // never written: zero page
  EXPECT_EQ(got, 0u);
  const uint64_t after = resident_bytes();
  // 17 pages written; allow generous slack for page tables and the heap.
  EXPECT_LT(after - std::min(after, before), 16ull << 20);
}

TEST(SparseMemory, ContiguousAllocationsAreAlignedAndDisjoint) {
  SparseMemory mem(0, 1 << 20);
  const uint64_t a = mem.alloc_contiguous(100);
  EXPECT_NE(a, 0u);  // physical 0 is never handed out
  EXPECT_EQ(a % 4096, 0u);
  const uint64_t b = mem.alloc_contiguous(5000, 64 * 1024);
  EXPECT_EQ(b % (64 * 1024), 0u);
  EXPECT_GE(b, a + 4096);
  const uint64_t c = mem.alloc_contiguous(4096);
  EXPECT_GE(c, b + 8192);
  EXPECT_THROW(mem.alloc_contiguous(4096, 3000), std::invalid_argument);
  try {
    mem.alloc_contiguous(2 << 20);
    FAIL() << "allocation beyond the memory succeeded";
  } catch (const std::bad_alloc& e) {
    EXPECT_NE(std::string(e.what()).find("exhausted"), std::string::npos) << e.what();
  }
}

TEST(SparseMemory, PagesAreScatteredAndDistinct) {
  SparseMemory mem(0x40000000, 1 << 24);
  const uint64_t low = mem.alloc_contiguous(1 << 20);
  std::vector<uint64_t> frames = mem.alloc_pages(40);
  std::vector<uint64_t> more = mem.alloc_pages(30);
  frames.insert(frames.end(), more.begin(), more.end());
  ASSERT_EQ(frames.size(), 70u);
  std::set<uint64_t> distinct(frames.begin(), frames.end());
  EXPECT_EQ(distinct.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ(frames[i] % 4096, 0u);
    EXPECT_TRUE(mem.contains(frames[i], 4096));
    EXPECT_GE(frames[i], low + (1 << 20));  // no overlap with contiguous memory
    if (i > 0) {
      const uint64_t gap =
          frames[i] > frames[i - 1] ? frames[i] - frames[i - 1] : frames[i - 1] - frames[i];
      EXPECT_NE(gap, 4096u) << "frames " << i - 1 << " and " << i << " are adjacent";
    }
  }
  // Deterministic: a second memory hands out the same frames.
  SparseMemory again(0x40000000, 1 << 24);
  again.alloc_contiguous(1 << 20);
  EXPECT_EQ(again.alloc_pages(40), std::vector<uint64_t>(frames.begin(), frames.begin() + 40));
  // Exhaustion takes nothing and says so.
  const uint64_t free_before = mem.free_bytes();
  EXPECT_THROW(mem.alloc_pages(1 << 20), std::bad_alloc);
  EXPECT_EQ(mem.free_bytes(), free_before);
}

}  // namespace
}  // namespace mprdma::host
