// A set-associative cache of fixed-size entries keyed by a 64-bit key: the
// building block of the NIC's QP-context, WQE, MPT/MTT and CQ-context caches
// (issue 6). Plain C++ with no notion of time: it only decides hit or miss,
// which line a miss replaces and whether that line must be written back. The
// caller turns a miss into a PCIe DMA read of the entry from the host-memory
// table and a write-back into a PCIe DMA write, with their real latency.
//
// One line holds one entry (a QP context, a 64 B WQE chunk, a block of MTT
// entries): the key names the line, so a caller caching several small entries
// per line passes key = index / entries_per_line. The set of a key is its low
// log2(sets) bits; the tag is the rest of the key.
//
// Lines are allocated on every miss (read or write: write-allocate), and a
// write marks the line dirty (write-back, never write-through).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mprdma::core {
class RandomStream;
}

namespace mprdma::nic::uarch {

enum class Replacement {
  lru,     // evict the least recently used valid line of the set
  random,  // evict a uniformly drawn way, from a caller-owned seeded stream
};

struct SetAssocCacheParams {
  std::string name = "cache";  // used in error messages only
  uint32_t sets = 64;          // number of sets; a power of two (the index is key bits)
  uint32_t ways = 8;           // lines per set, >= 1
  uint32_t line_bytes = 64;    // data bytes per line (one entry), >= 1
  // Width of the keys the cache is built for, in bits (24 for QPNs, 64 for
  // addresses). Sets the tag width, hence the tag SRAM; a key that does not
  // fit is an error. Must be >= log2(sets) and <= 64.
  uint32_t key_bits = 64;
  Replacement replacement = Replacement::lru;
};

// Counters of one cache or of one owner (e.g. one QP). Hits and misses are
// counted against the owner that accessed; evictions and write-backs
// against the owner of the line that was evicted (the QP that lost its
// context), so a thrashed QP can be told from the one that thrashed it.
struct CacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;   // valid lines replaced by a miss
  uint64_t writebacks = 0;  // of those, dirty ones (one PCIe write each)
  uint64_t accesses() const { return hits + misses; }
};

// What one lookup did.
struct CacheAccess {
  bool hit = false;
  bool evicted = false;        // a miss replaced a valid line
  uint64_t evicted_key = 0;    // its key (when evicted)
  uint32_t evicted_owner = 0;  // its owner (when evicted)
  bool writeback = false;      // the replaced line was dirty: write evicted_key back
};

// What invalidate() dropped.
struct CacheInvalidate {
  bool present = false;  // the key was cached
  bool dirty = false;    // and modified: the caller writes it back first
};

class SetAssocCache {
 public:
  // `rng` is the caller's seeded stream (core::RandomStreams), required for
  // Replacement::random and unused for LRU; it must outlive the cache.
  // Throws std::invalid_argument on a bad parameter, naming it.
  explicit SetAssocCache(const SetAssocCacheParams& p, core::RandomStream* rng = nullptr);

  // Looks `key` up on behalf of `owner`. A miss allocates the line (the
  // caller fetches the entry); `write` marks the line dirty. On a miss that
  // replaces a dirty line, the result names the key to write back. The line
  // then belongs to `owner` (its last accessor) for the eviction counters.
  // Throws std::out_of_range if the key does not fit in key_bits.
  CacheAccess lookup(uint64_t key, bool write, uint32_t owner = 0);
  // True if `key` is cached; changes no state and no counter.
  bool contains(uint64_t key) const;
  bool dirty(uint64_t key) const;
  // Drops `key` (a destroyed QP, a deregistered MR). Counts nothing: the
  // caller writes a dirty line back itself if the entry must survive.
  CacheInvalidate invalidate(uint64_t key);
  // Drops every line; returns the keys of the dirty ones, in set order.
  std::vector<uint64_t> invalidate_all();

  const CacheCounters& counters() const { return total_; }
  // Counters of one owner (all zero for an owner never seen).
  CacheCounters counters(uint32_t owner) const;
  const std::map<uint32_t, CacheCounters>& owners() const { return per_owner_; }
  void reset_counters();

  const SetAssocCacheParams& params() const { return p_; }
  uint32_t set_of(uint64_t key) const { return static_cast<uint32_t>(key & (p_.sets - 1)); }
  uint32_t valid_lines() const;

  // SRAM the cache needs. Per line: the tag (key_bits - log2(sets) bits),
  // a valid and a dirty bit, log2(ways) bits of LRU rank (0 for random),
  // and the data. Tag bits are summed over the whole array, then rounded up
  // to bytes once (tags sit in their own SRAM, not padded per line). The
  // owner id kept for the per-owner counters is bookkeeping, not hardware,
  // and is not counted.
  uint32_t index_bits() const { return index_bits_; }
  uint32_t tag_bits() const { return p_.key_bits - index_bits_; }
  uint32_t state_bits_per_line() const;  // tag + valid + dirty + replacement
  uint64_t tag_sram_bytes() const;
  uint64_t data_sram_bytes() const;
  uint64_t sram_bytes() const { return tag_sram_bytes() + data_sram_bytes(); }

 private:
  struct Line {
    bool valid = false;
    bool dirty = false;
    uint64_t key = 0;
    uint32_t owner = 0;
    uint64_t last_use = 0;  // access stamp: the smallest in a set is the LRU line
  };

  Line* find(uint64_t key);
  const Line* find(uint64_t key) const;
  uint32_t victim(uint32_t set);

  SetAssocCacheParams p_;
  core::RandomStream* rng_;
  uint32_t index_bits_ = 0;
  std::vector<Line> lines_;  // sets * ways, set-major
  uint64_t stamp_ = 0;
  CacheCounters total_;
  std::map<uint32_t, CacheCounters> per_owner_;
};

}  // namespace mprdma::nic::uarch
