// SramBudget: the arithmetic of fixed and per-connection regions, how many
// connections fit, and the message that names the overflowing region.
#include "vp/nic/uarch/sram_budget.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "vp/nic/uarch/set_assoc_cache.h"

namespace mprdma::nic::uarch {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(SramBudget, SumsFixedAndPerConnectionRegions) {
  SramBudget b(10000, /*connections=*/10);
  b.add_fixed("qpc_cache", 3000);
  b.add_per_connection("mprdma.bitmap", 100);
  b.add_fixed("wqe_cache", 1000);
  b.add_per_connection("mprdma.window", 50);
  EXPECT_EQ(b.fixed_bytes(), 4000u);
  EXPECT_EQ(b.bytes_per_connection(), 150u);
  EXPECT_EQ(b.used_bytes(), 4000u + 10 * 150);
  EXPECT_TRUE(b.fits());
  EXPECT_EQ(b.free_bytes(), 10000u - 5500);
  EXPECT_EQ(b.overflow_bytes(), 0u);
  EXPECT_EQ(b.max_connections(), (10000u - 4000) / 150);  // 40
  EXPECT_EQ(b.check(), "");
  EXPECT_NO_THROW(b.require_fits());
  ASSERT_EQ(b.regions().size(), 4u);
  EXPECT_EQ(b.region_bytes(b.regions()[1]), 1000u);
}

TEST(SramBudget, ExactlyFullFitsAndOneMoreConnectionDoesNot) {
  SramBudget b(1000, 8);
  b.add_fixed("cache", 200);
  b.add_per_connection("state", 100);
  EXPECT_TRUE(b.fits());
  EXPECT_EQ(b.free_bytes(), 0u);
  EXPECT_EQ(b.max_connections(), 8u);
  b.set_connections(9);
  EXPECT_FALSE(b.fits());
  EXPECT_EQ(b.overflow_bytes(), 100u);
  EXPECT_EQ(b.free_bytes(), 0u);
}

TEST(SramBudget, OverflowMessageNamesTheRegionAndTheExcess) {
  SramBudget b(4096, 100);
  b.add_fixed("qpc_cache", 1024);
  b.add_per_connection("mprdma.state", 40);  // 4000 B: ends at 5024
  b.add_fixed("cq_cache", 512);              // after the culprit
  EXPECT_FALSE(b.fits());
  EXPECT_EQ(b.overflow_bytes(), 1024u + 4000 + 512 - 4096);  // 1440
  const std::string msg = b.check();
  EXPECT_TRUE(has(msg, "exceeded by 1440 B")) << msg;
  EXPECT_TRUE(has(msg, "'mprdma.state'")) << msg;
  EXPECT_TRUE(has(msg, "100 connections x 40 B = 4000 B")) << msg;
  EXPECT_TRUE(has(msg, "ends at byte 5024")) << msg;
  EXPECT_TRUE(has(msg, "64 of the 100 connections would fit")) << msg;  // (4096-1536)/40
  EXPECT_FALSE(has(msg, "cq_cache")) << msg;
  try {
    b.require_fits();
    FAIL() << "an overflowing budget passed";
  } catch (const SramBudgetError& e) {
    EXPECT_EQ(std::string(e.what()), msg);
  }
}

TEST(SramBudget, AFixedRegionCanBeTheOneThatOverflows) {
  SramBudget b(1000, 1);
  b.add_fixed("a", 600);
  b.add_fixed("b", 600);
  b.add_per_connection("c", 10);
  const std::string msg = b.check();
  EXPECT_TRUE(has(msg, "region 'b' (600 B) ends at byte 1200")) << msg;
  EXPECT_TRUE(has(msg, "exceeded by 210 B")) << msg;
  EXPECT_EQ(b.max_connections(), 0u) << "the fixed regions alone do not fit";
}

TEST(SramBudget, HugeConnectionCountsSaturateInsteadOfWrapping) {
  SramBudget b(1 << 20, std::numeric_limits<uint64_t>::max() / 2);
  b.add_per_connection("state", 64);  // 64 * 2^63 would wrap to 0
  EXPECT_FALSE(b.fits());
  EXPECT_FALSE(b.check().empty());
}

TEST(SramBudget, NoPerConnectionStateMeansUnlimitedConnections) {
  SramBudget b(1000);
  b.add_fixed("cache", 10);
  EXPECT_EQ(b.max_connections(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(has(b.report(), "no per-connection state")) << b.report();
}

TEST(SramBudget, ReportListsRegionsWithOffsets) {
  SramBudget b(2048, 4);
  b.add_fixed("qpc_cache", 1024);
  b.add_per_connection("state", 100);
  const std::string r = b.report();
  EXPECT_TRUE(has(r, "SRAM 2048 B")) << r;
  EXPECT_TRUE(has(r, "qpc_cache: 1024 B at 0")) << r;
  EXPECT_TRUE(has(r, "state: 400 B at 1024 (100 B x 4 connections)")) << r;
  EXPECT_TRUE(has(r, "free 624 B")) << r;
  EXPECT_TRUE(has(r, "per connection 100 B; connections 4 configured, 10 fit")) << r;
  b.set_connections(20);
  EXPECT_TRUE(has(b.report(), "OVERFLOW 976 B")) << b.report();
}

TEST(SramBudget, CachesContributeTheirSramBytes) {
  // The intended use: a cache's sram_bytes() is a fixed region.
  SetAssocCacheParams p;
  p.sets = 64;
  p.ways = 4;
  p.line_bytes = 256;
  p.key_bits = 24;
  const SetAssocCache qpc(p);
  SramBudget b(128 * 1024, 0);
  b.add_fixed("qpc_cache", qpc.sram_bytes());
  EXPECT_EQ(b.fixed_bytes(), 65536u + 64 * 4 * (18 + 2 + 2) / 8);
}

TEST(SramBudget, BadArgumentsAreErrors) {
  EXPECT_THROW(SramBudget(0), std::invalid_argument);
  SramBudget b(100);
  b.add_fixed("x", 1);
  EXPECT_THROW(b.add_fixed("x", 1), std::invalid_argument);
  EXPECT_THROW(b.add_per_connection("x", 1), std::invalid_argument);
  EXPECT_THROW(b.add_fixed("", 1), std::invalid_argument);
}

}  // namespace
}  // namespace mprdma::nic::uarch
