// SetAssocCache: hits and misses, LRU order within a set, write-back of
// dirty lines, per-owner counters, random replacement from a seeded stream
// and the SRAM the array needs.
#include "vp/nic/uarch/set_assoc_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>

#include "vp/core/random.h"

namespace mprdma::nic::uarch {
namespace {

SetAssocCacheParams small(uint32_t sets, uint32_t ways) {
  SetAssocCacheParams p;
  p.name = "test";
  p.sets = sets;
  p.ways = ways;
  p.line_bytes = 64;
  return p;
}

TEST(SetAssocCache, MissThenHit) {
  SetAssocCache c(small(4, 2));
  EXPECT_FALSE(c.contains(7));
  const CacheAccess first = c.lookup(7, false);
  EXPECT_FALSE(first.hit);
  EXPECT_FALSE(first.evicted);
  EXPECT_TRUE(c.contains(7));
  EXPECT_TRUE(c.lookup(7, false).hit);
  EXPECT_TRUE(c.lookup(7, false).hit);
  EXPECT_EQ(c.counters().hits, 2u);
  EXPECT_EQ(c.counters().misses, 1u);
  EXPECT_EQ(c.counters().evictions, 0u);
  EXPECT_EQ(c.valid_lines(), 1u);
}

TEST(SetAssocCache, KeysMapToSetsByTheirLowBits) {
  SetAssocCache c(small(4, 1));  // direct-mapped: 4 lines
  EXPECT_EQ(c.set_of(0), 0u);
  EXPECT_EQ(c.set_of(5), 1u);
  EXPECT_EQ(c.set_of(0xFFFF), 3u);
  // Four keys in four different sets all stay.
  for (uint64_t k = 0; k < 4; ++k) EXPECT_FALSE(c.lookup(k, false).hit);
  for (uint64_t k = 0; k < 4; ++k) EXPECT_TRUE(c.lookup(k, false).hit) << k;
  // Key 4 shares set 0 with key 0 and, with one way, replaces it.
  const CacheAccess r = c.lookup(4, false);
  EXPECT_FALSE(r.hit);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 0u);
  EXPECT_FALSE(c.contains(0));
  EXPECT_TRUE(c.contains(1));
}

TEST(SetAssocCache, LruEvictsTheLeastRecentlyUsedWayOfTheSet) {
  SetAssocCache c(small(2, 3));  // set 0 holds keys 0, 2, 4, 6...
  c.lookup(0, false);
  c.lookup(2, false);
  c.lookup(4, false);
  c.lookup(1, false);  // set 1: must not disturb set 0's order
  // Touch 0: the order (oldest first) is now 2, 4, 0.
  EXPECT_TRUE(c.lookup(0, false).hit);
  CacheAccess r = c.lookup(6, false);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 2u);
  // Order 4, 0, 6: the next miss evicts 4, then 0.
  r = c.lookup(8, false);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 4u);
  r = c.lookup(10, false);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 0u);
  EXPECT_TRUE(c.contains(1)) << "the other set kept its line";
  EXPECT_EQ(c.counters().evictions, 3u);
}

TEST(SetAssocCache, CyclicAccessLargerThanTheCacheAlwaysMissesUnderLru) {
  // The M15/R1 effect in miniature: more live contexts than lines.
  SetAssocCache c(small(4, 2));  // 8 lines
  for (int round = 0; round < 3; ++round) {
    for (uint64_t k = 0; k < 12; ++k) c.lookup(k, false);
  }
  EXPECT_EQ(c.counters().hits, 0u);
  EXPECT_EQ(c.counters().misses, 36u);
  SetAssocCache fits(small(4, 2));
  for (int round = 0; round < 3; ++round) {
    for (uint64_t k = 0; k < 8; ++k) fits.lookup(k, false);
  }
  EXPECT_EQ(fits.counters().misses, 8u);
  EXPECT_EQ(fits.counters().hits, 16u);
}

TEST(SetAssocCache, DirtyLinesAreWrittenBackWhenEvicted) {
  SetAssocCache c(small(1, 2));
  c.lookup(10, true);   // write miss: allocated dirty
  c.lookup(11, false);  // clean
  EXPECT_TRUE(c.dirty(10));
  EXPECT_FALSE(c.dirty(11));
  // 10 is the LRU line and dirty: its eviction is a write-back.
  CacheAccess r = c.lookup(12, false);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 10u);
  EXPECT_TRUE(r.writeback);
  // 11 is clean: evicted without a write-back.
  r = c.lookup(13, false);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(r.evicted_key, 11u);
  EXPECT_FALSE(r.writeback);
  EXPECT_EQ(c.counters().evictions, 2u);
  EXPECT_EQ(c.counters().writebacks, 1u);
}

TEST(SetAssocCache, AWriteHitMakesACleanLineDirtyAndAReadHitKeepsItDirty) {
  SetAssocCache c(small(1, 1));
  c.lookup(1, false);
  EXPECT_FALSE(c.dirty(1));
  EXPECT_TRUE(c.lookup(1, true).hit);
  EXPECT_TRUE(c.dirty(1));
  EXPECT_TRUE(c.lookup(1, false).hit);
  EXPECT_TRUE(c.dirty(1)) << "a read does not clean a line";
  const CacheAccess r = c.lookup(2, false);
  EXPECT_TRUE(r.writeback);
  EXPECT_EQ(r.evicted_key, 1u);
  EXPECT_FALSE(c.dirty(2)) << "the new line starts clean";
}

TEST(SetAssocCache, InvalidateReportsDirtinessAndFreesTheWay) {
  SetAssocCache c(small(1, 2));
  c.lookup(1, true);
  c.lookup(2, false);
  const CacheInvalidate inv = c.invalidate(1);
  EXPECT_TRUE(inv.present);
  EXPECT_TRUE(inv.dirty);
  EXPECT_FALSE(c.contains(1));
  const CacheInvalidate again = c.invalidate(1);
  EXPECT_FALSE(again.present);
  EXPECT_FALSE(again.dirty);
  // The freed way is used before any live line is evicted.
  const CacheAccess r = c.lookup(3, false);
  EXPECT_FALSE(r.evicted);
  EXPECT_TRUE(c.contains(2));
  EXPECT_EQ(c.counters().evictions, 0u) << "invalidation is not an eviction";
  EXPECT_EQ(c.counters().writebacks, 0u);
}

TEST(SetAssocCache, InvalidateAllReturnsTheDirtyKeys) {
  SetAssocCache c(small(2, 2));
  c.lookup(0, true);
  c.lookup(1, false);
  c.lookup(3, true);
  const std::vector<uint64_t> dirty = c.invalidate_all();
  EXPECT_EQ(std::set<uint64_t>(dirty.begin(), dirty.end()), (std::set<uint64_t>{0, 3}));
  EXPECT_EQ(c.valid_lines(), 0u);
}

TEST(SetAssocCache, PerOwnerCountersChargeEvictionsToTheVictimsOwner) {
  SetAssocCache c(small(1, 2));
  c.lookup(100, true, /*owner=*/1);
  c.lookup(100, false, 1);
  c.lookup(200, false, 2);
  c.lookup(300, false, 3);  // evicts 100, owner 1's dirty line
  EXPECT_EQ(c.counters(1).hits, 1u);
  EXPECT_EQ(c.counters(1).misses, 1u);
  EXPECT_EQ(c.counters(1).evictions, 1u);
  EXPECT_EQ(c.counters(1).writebacks, 1u);
  EXPECT_EQ(c.counters(2).misses, 1u);
  EXPECT_EQ(c.counters(2).evictions, 0u);
  EXPECT_EQ(c.counters(3).misses, 1u);
  EXPECT_EQ(c.counters(3).evictions, 0u) << "the evicting owner is not charged";
  EXPECT_EQ(c.counters(99).accesses(), 0u) << "an unseen owner reads as zero";
  // The per-owner counters add up to the totals.
  CacheCounters sum;
  for (const auto& [owner, n] : c.owners()) {
    sum.hits += n.hits;
    sum.misses += n.misses;
    sum.evictions += n.evictions;
    sum.writebacks += n.writebacks;
  }
  EXPECT_EQ(sum.hits, c.counters().hits);
  EXPECT_EQ(sum.misses, c.counters().misses);
  EXPECT_EQ(sum.evictions, c.counters().evictions);
  EXPECT_EQ(sum.writebacks, c.counters().writebacks);
  c.reset_counters();
  EXPECT_EQ(c.counters().accesses(), 0u);
  EXPECT_TRUE(c.owners().empty());
  EXPECT_TRUE(c.contains(300)) << "resetting counters keeps the contents";
}

TEST(SetAssocCache, RandomReplacementIsSeededAndStaysInTheSet) {
  auto run = [](uint64_t seed) {
    core::RandomStream rng(seed, "cache.replacement");
    SetAssocCacheParams p = small(2, 4);
    p.replacement = Replacement::random;
    SetAssocCache c(p, &rng);
    std::vector<uint64_t> victims;
    for (uint64_t k = 0; k < 64; k += 2) {  // all in set 0
      const CacheAccess r = c.lookup(k, false);
      if (r.evicted) victims.push_back(r.evicted_key);
    }
    EXPECT_EQ(c.valid_lines(), 4u);
    return victims;
  };
  const std::vector<uint64_t> a = run(1), b = run(1), other = run(2);
  EXPECT_EQ(a.size(), 28u);  // 32 misses into 4 ways
  EXPECT_EQ(a, b) << "same seed, same victims";
  EXPECT_NE(a, other) << "another seed draws other victims";
  for (uint64_t k : a) EXPECT_EQ(k % 2, 0u);
  // Not LRU: LRU would evict 0, 2, 4, ... in order.
  std::vector<uint64_t> lru_order;
  for (uint64_t k = 0; k < 56; k += 2) lru_order.push_back(k);
  EXPECT_NE(a, lru_order);
}

TEST(SetAssocCache, RandomReplacementFillsFreeWaysBeforeEvicting) {
  // Under either policy a miss takes a free way while the set has one:
  // evicting a live line then would only cost a needless miss later.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    core::RandomStream rng(seed, "cache.replacement");
    SetAssocCacheParams p = small(4, 8);
    p.replacement = Replacement::random;
    SetAssocCache c(p, &rng);
    for (uint64_t k = 0; k < 32; ++k) EXPECT_FALSE(c.lookup(k, false).evicted) << k;
    EXPECT_EQ(c.valid_lines(), 32u);
    EXPECT_EQ(c.counters().evictions, 0u);
    // Freed ways are taken again before anything live goes.
    c.invalidate(5);
    c.invalidate(13);
    EXPECT_FALSE(c.lookup(101, false).evicted);  // set 1, like 5 and 13
    EXPECT_FALSE(c.lookup(109, false).evicted);
    EXPECT_TRUE(c.lookup(117, false).evicted);  // set 1 is full now
  }
}

TEST(SetAssocCache, SramBytesCountTagsStateAndData) {
  // 256 sets x 4 ways of 256 B QP contexts keyed by 24-bit QPNs:
  // tag 24 - 8 = 16 bits, + valid + dirty + 2 LRU bits = 20 bits per line.
  SetAssocCacheParams p = small(256, 4);
  p.line_bytes = 256;
  p.key_bits = 24;
  const SetAssocCache c(p);
  EXPECT_EQ(c.index_bits(), 8u);
  EXPECT_EQ(c.tag_bits(), 16u);
  EXPECT_EQ(c.state_bits_per_line(), 20u);
  EXPECT_EQ(c.data_sram_bytes(), 256u * 4 * 256);
  EXPECT_EQ(c.tag_sram_bytes(), 256u * 4 * 20 / 8);
  EXPECT_EQ(c.sram_bytes(), 262144u + 2560u);
  // Rounded up once over the array: 1 set x 3 ways x (64 + 2 + 2) bits.
  SetAssocCacheParams q = small(1, 3);
  const SetAssocCache d(q);
  EXPECT_EQ(d.state_bits_per_line(), 68u);
  EXPECT_EQ(d.tag_sram_bytes(), (3u * 68 + 7) / 8);
  // Random replacement keeps no rank bits.
  core::RandomStream rng(1, "x");
  p.replacement = Replacement::random;
  EXPECT_EQ(SetAssocCache(p, &rng).state_bits_per_line(), 18u);
}

TEST(SetAssocCache, BadParametersAndKeysAreErrors) {
  EXPECT_THROW(SetAssocCache(small(3, 2)), std::invalid_argument);
  EXPECT_THROW(SetAssocCache(small(0, 2)), std::invalid_argument);
  EXPECT_THROW(SetAssocCache(small(4, 0)), std::invalid_argument);
  SetAssocCacheParams p = small(4, 2);
  p.line_bytes = 0;
  EXPECT_THROW(SetAssocCache{p}, std::invalid_argument);
  p = small(256, 2);
  p.key_bits = 7;  // fewer bits than the index
  EXPECT_THROW(SetAssocCache{p}, std::invalid_argument);
  p.key_bits = 65;
  EXPECT_THROW(SetAssocCache{p}, std::invalid_argument);
  p = small(4, 2);
  p.replacement = Replacement::random;
  EXPECT_THROW(SetAssocCache{p}, std::invalid_argument) << "random needs a stream";
  try {
    SetAssocCache bad(small(6, 2));
    FAIL() << "6 sets accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'test'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sets"), std::string::npos) << e.what();
  }
  p = small(4, 2);
  p.key_bits = 24;
  SetAssocCache c(p);
  EXPECT_NO_THROW(c.lookup(0xFFFFFF, false));
  EXPECT_THROW(c.lookup(0x1000000, false), std::out_of_range);
}

}  // namespace
}  // namespace mprdma::nic::uarch
