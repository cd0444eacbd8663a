#include "vp/nic/uarch/set_assoc_cache.h"

#include <stdexcept>

#include "vp/core/random.h"

namespace mprdma::nic::uarch {
namespace {

bool power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

uint32_t log2_ceil(uint64_t v) {
  uint32_t bits = 0;
  while ((uint64_t{1} << bits) < v) ++bits;
  return bits;
}

}  // namespace

SetAssocCache::SetAssocCache(const SetAssocCacheParams& p, core::RandomStream* rng)
    : p_(p), rng_(rng) {
  const std::string who = "cache '" + p_.name + "': ";
  if (!power_of_two(p_.sets)) {
    // The index is a bit field of the key, as in hardware: no modulo unit.
    throw std::invalid_argument(who + "sets must be a power of two, got " +
                                std::to_string(p_.sets));
  }
  if (p_.ways == 0) throw std::invalid_argument(who + "ways must be at least 1");
  if (p_.line_bytes == 0) throw std::invalid_argument(who + "line_bytes must be at least 1");
  index_bits_ = log2_ceil(p_.sets);
  if (p_.key_bits > 64 || p_.key_bits < index_bits_) {
    throw std::invalid_argument(who +
                                "key_bits must be in [log2(sets)=" + std::to_string(index_bits_) +
                                ", 64], got " + std::to_string(p_.key_bits));
  }
  if (p_.replacement == Replacement::random && rng_ == nullptr) {
    throw std::invalid_argument(who + "random replacement needs a random stream");
  }
  lines_.resize(static_cast<size_t>(p_.sets) * p_.ways);
}

SetAssocCache::Line* SetAssocCache::find(uint64_t key) {
  Line* set = &lines_[static_cast<size_t>(set_of(key)) * p_.ways];
  for (uint32_t w = 0; w < p_.ways; ++w) {
    if (set[w].valid && set[w].key == key) return &set[w];
  }
  return nullptr;
}

const SetAssocCache::Line* SetAssocCache::find(uint64_t key) const {
  return const_cast<SetAssocCache*>(this)->find(key);
}

uint32_t SetAssocCache::victim(uint32_t set) {
  const Line* s = &lines_[static_cast<size_t>(set) * p_.ways];
  // An invalid way is always taken first, under either policy: replacing a
  // live line while a free one exists would only cost a needless miss.
  for (uint32_t w = 0; w < p_.ways; ++w) {
    if (!s[w].valid) return w;
  }
  if (p_.replacement == Replacement::random) return static_cast<uint32_t>(rng_->below(p_.ways));
  uint32_t lru = 0;
  for (uint32_t w = 1; w < p_.ways; ++w) {
    if (s[w].last_use < s[lru].last_use) lru = w;
  }
  return lru;
}

CacheAccess SetAssocCache::lookup(uint64_t key, bool write, uint32_t owner) {
  if (p_.key_bits < 64 && (key >> p_.key_bits) != 0) {
    throw std::out_of_range("cache '" + p_.name + "': key " + std::to_string(key) +
                            " does not fit in " + std::to_string(p_.key_bits) + " bits");
  }
  CacheAccess r;
  CacheCounters& mine = per_owner_[owner];
  Line* line = find(key);
  if (line != nullptr) {
    r.hit = true;
    ++total_.hits;
    ++mine.hits;
  } else {
    ++total_.misses;
    ++mine.misses;
    const uint32_t set = set_of(key);
    line = &lines_[static_cast<size_t>(set) * p_.ways + victim(set)];
    if (line->valid) {
      r.evicted = true;
      r.evicted_key = line->key;
      r.evicted_owner = line->owner;
      r.writeback = line->dirty;
      CacheCounters& theirs = per_owner_[line->owner];
      ++total_.evictions;
      ++theirs.evictions;
      if (line->dirty) {
        ++total_.writebacks;
        ++theirs.writebacks;
      }
    }
    *line = Line{};
    line->valid = true;
    line->key = key;
  }
  line->owner = owner;
  line->dirty = line->dirty || write;
  line->last_use = ++stamp_;
  return r;
}

bool SetAssocCache::contains(uint64_t key) const { return find(key) != nullptr; }

bool SetAssocCache::dirty(uint64_t key) const {
  const Line* line = find(key);
  return line != nullptr && line->dirty;
}

CacheInvalidate SetAssocCache::invalidate(uint64_t key) {
  CacheInvalidate r;
  if (Line* line = find(key)) {
    r.present = true;
    r.dirty = line->dirty;
    *line = Line{};
  }
  return r;
}

std::vector<uint64_t> SetAssocCache::invalidate_all() {
  std::vector<uint64_t> dirty_keys;
  for (Line& line : lines_) {
    if (line.valid && line.dirty) dirty_keys.push_back(line.key);
    line = Line{};
  }
  return dirty_keys;
}

CacheCounters SetAssocCache::counters(uint32_t owner) const {
  auto it = per_owner_.find(owner);
  return it == per_owner_.end() ? CacheCounters{} : it->second;
}

void SetAssocCache::reset_counters() {
  total_ = CacheCounters{};
  per_owner_.clear();
}

uint32_t SetAssocCache::valid_lines() const {
  uint32_t n = 0;
  for (const Line& line : lines_) n += line.valid ? 1 : 0;
  return n;
}

uint32_t SetAssocCache::state_bits_per_line() const {
  // LRU as a per-line rank within the set: log2(ways) bits per line (a true
  // LRU order; tree pseudo-LRU would need ways - 1 bits per set instead).
  const uint32_t replacement_bits = p_.replacement == Replacement::lru ? log2_ceil(p_.ways) : 0;
  return tag_bits() + 2 + replacement_bits;
}

uint64_t SetAssocCache::tag_sram_bytes() const {
  const uint64_t bits = uint64_t{state_bits_per_line()} * p_.sets * p_.ways;
  return (bits + 7) / 8;
}

uint64_t SetAssocCache::data_sram_bytes() const {
  return uint64_t{p_.line_bytes} * p_.sets * p_.ways;
}

}  // namespace mprdma::nic::uarch
