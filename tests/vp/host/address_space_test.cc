// A process's address space on a modeled host: buffers map to scattered
// frames, a guard page separates them, accesses cross pages, and a mapped
// page costs a few bytes of bookkeeping whether or not it is touched.
#include "vp/host/address_space.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include "support/resident.h"

namespace mprdma::host {
namespace {

constexpr uint64_t kPage = SparseMemory::kPageBytes;

using test::resident_bytes;

TEST(AddressSpace, BuffersArePageAlignedWithAGuardPageBetween) {
  SparseMemory mem(0x100000, 64 << 20);
  AddressSpace as(mem);
  const uint64_t a = as.alloc(3 * kPage + 1);  // four pages
  const uint64_t b = as.alloc(100);
  EXPECT_EQ(a % kPage, 0u);
  EXPECT_EQ(b, a + 5 * kPage) << "four pages, then the guard page";
  EXPECT_TRUE(as.mapped(a, 4 * kPage));
  EXPECT_FALSE(as.mapped(a, 4 * kPage + 1)) << "the guard page";
  EXPECT_FALSE(as.mapped(a - 1, 1)) << "below the first buffer";
  EXPECT_THROW(as.translate(a + 4 * kPage), std::out_of_range);
  EXPECT_THROW(as.translate(b + kPage), std::out_of_range);
  EXPECT_TRUE(as.mapped(b, 1));
}

TEST(AddressSpace, FramesAreScatteredAndTranslateAgrees) {
  SparseMemory mem(0x100000, 64 << 20);
  AddressSpace as(mem);
  const uint64_t a = as.alloc(40 * kPage);
  const uint64_t b = as.alloc(8 * kPage);
  const std::vector<uint64_t> fa = as.frames(a, 40 * kPage);
  const std::vector<uint64_t> fb = as.frames(b + 10, 3 * kPage);  // pages 0..3 of b
  ASSERT_EQ(fa.size(), 40u);
  ASSERT_EQ(fb.size(), 4u);
  std::set<uint64_t> all(fa.begin(), fa.end());
  all.insert(fb.begin(), fb.end());
  EXPECT_EQ(all.size(), 44u) << "no frame twice";
  for (size_t i = 0; i < fa.size(); ++i) {
    EXPECT_EQ(as.translate(a + i * kPage + 123), fa[i] + 123);
    if (i) {
      EXPECT_NE(fa[i], fa[i - 1] + kPage) << "consecutive pages are not adjacent frames";
    }
  }
  EXPECT_THROW(as.frames(a + 39 * kPage, kPage + 1), std::out_of_range) << "into the guard page";
}

TEST(AddressSpace, AccessesCrossPagesAndBuffersStaySeparate) {
  SparseMemory mem(0x100000, 64 << 20);
  AddressSpace as(mem);
  const uint64_t a = as.alloc(5 * kPage);
  const uint64_t b = as.alloc(5 * kPage);
  std::vector<uint8_t> data(3 * kPage + 77);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
  as.fill(b, 0xEE, 5 * kPage);
  as.write(a + kPage - 50, data.data(), data.size());
  std::vector<uint8_t> back(data.size());
  as.read(a + kPage - 50, back.data(), back.size());
  EXPECT_EQ(back, data);
  std::vector<uint8_t> other(5 * kPage);
  as.read(b, other.data(), other.size());
  for (uint8_t v : other) ASSERT_EQ(v, 0xEE);
  EXPECT_THROW(as.write(a + 5 * kPage - 10, data.data(), 20), std::out_of_range);
}

TEST(AddressSpace, AnUntouchedPageCostsAFewBytes) {
  // 64 buffers of 60 MB, the two halves of a write_flows connection's
  // buffers: ~1M pages mapped, none touched. A node per page (~64 bytes)
  // would take ~60 MB; the bookkeeping of frame numbers takes 8 MB.
  SparseMemory mem(0x100000, 8ull << 30);
  AddressSpace as(mem);
  const uint64_t before = resident_bytes();
  std::vector<uint64_t> va;
  for (int i = 0; i < 64; ++i) va.push_back(as.alloc(60ull << 20));
  const uint64_t pages = 64 * ((60ull << 20) / kPage);
  EXPECT_LT(resident_bytes() - before, 16 * pages) << "bytes per mapped page";
  EXPECT_TRUE(as.mapped(va.back(), 60ull << 20));
}

}  // namespace
}  // namespace mprdma::host
