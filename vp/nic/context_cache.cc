#include "vp/nic/context_cache.h"

#include <algorithm>
#include <systemc>
#include <utility>

#include "vp/nic/dma_engine.h"

namespace mprdma::nic {

namespace {

uarch::SetAssocCacheParams params(const std::string& name, const CacheConfig& cfg,
                                  uint32_t line_bytes, uint32_t key_bits) {
  uarch::SetAssocCacheParams p;
  p.name = name;
  p.sets = static_cast<uint32_t>(cfg.sets);
  p.ways = static_cast<uint32_t>(cfg.ways);
  p.line_bytes = line_bytes;
  uint32_t index_bits = 0;
  while ((uint32_t{1} << index_bits) < p.sets) ++index_bits;
  p.key_bits = std::max(key_bits, index_bits);
  p.replacement = cfg.replacement;
  return p;
}

uint64_t now_ps() { return sc_core::sc_time_stamp().value(); }

}  // namespace

ContextCache::ContextCache(const std::string& name, IcmTable table, uint32_t line_bytes,
                           const CacheConfig& cfg, const Icm& icm, DmaEngine& dma,
                           core::SimEnv& env, const std::string& nic_name,
                           uint32_t entries_per_line, const std::string& owner_label)
    // Keys are line numbers of the ICM table: tags as wide as the table needs.
    : ContextCache(
          name, line_bytes,
          std::max<uint32_t>(
              1, bits_for((icm.entries(table) + entries_per_line - 1) / entries_per_line)),
          cfg,
          [&icm, table, entries_per_line, line_bytes](uint64_t line) {
            return icm.pieces(table, line * entries_per_line, line_bytes);
          },
          dma, env, nic_name, owner_label) {}

ContextCache::ContextCache(const std::string& name, uint32_t line_bytes, uint32_t key_bits,
                           const CacheConfig& cfg, Locator locate, DmaEngine& dma,
                           core::SimEnv& env, const std::string& nic_name,
                           const std::string& owner_label, DmaPurpose purpose)
    : name_(name),
      line_bytes_(line_bytes),
      owner_label_(owner_label),
      locate_(std::move(locate)),
      purpose_(purpose),
      enabled_(cfg.enabled),
      dma_(dma),
      env_(env),
      prefix_("nic." + nic_name + ".cache." + name + "."),
      log_(core::Log::channel("nic." + nic_name + ".cache")),
      cache_(params(name, cfg, line_bytes, key_bits),
             cfg.replacement == uarch::Replacement::random
                 ? &env.random.stream(prefix_ + "replacement")
                 : nullptr),
      hits_(env.stats.counter(prefix_ + "hits", "accesses", "Accesses that found the entry")),
      misses_(env.stats.counter(prefix_ + "misses", "accesses",
                                "Accesses that had to fetch the entry from ICM")),
      evictions_(
          env.stats.counter(prefix_ + "evictions", "lines", "Valid lines replaced by a miss")),
      writebacks_(env.stats.counter(prefix_ + "writebacks", "lines",
                                    "Evicted lines that were modified: one DMA write each")),
      merged_(env.stats.counter(prefix_ + "fill_waits", "accesses",
                                "Accesses that waited for a fill another access started")),
      faults_(env.stats.counter(prefix_ + "icm_faults", "fills",
                                "Fills whose ICM page was unmapped or whose DMA read failed")),
      fill_ns_(env.stats.histogram(prefix_ + "fill_latency", "ns",
                                   "From a miss to its entry's arrival from host memory")) {}

ContextCache::OwnerStats& ContextCache::owner_stats(uint32_t owner) {
  auto it = owners_.find(owner);
  if (it != owners_.end()) return it->second;
  const std::string p = prefix_ + owner_label_ + std::to_string(owner) + ".";
  OwnerStats s{&env_.stats.counter(p + "hits", "accesses", "Hits of this owner's accesses"),
               &env_.stats.counter(p + "misses", "accesses", "Misses of this owner's accesses"),
               &env_.stats.counter(p + "evictions", "lines",
                                   "Times this owner's line was evicted by another")};
  return owners_.emplace(owner, s).first->second;
}

bool ContextCache::access(uint64_t index, uint32_t owner, bool write, Ready ready) {
  if (!enabled_) return true;
  const bool cached = cache_.contains(index);
  if (!cached && arrived_.erase(index) == 0) {
    // Not on chip: wait for the fill (starting it if nobody has).
    auto it = fills_.find(index);
    if (it == fills_.end()) {
      start_fill(index);
      it = fills_.find(index);
      if (it == fills_.end()) return access(index, owner, write, std::move(ready));  // fault
    } else {
      ++merged_;
    }
    it->second.waiters.push_back(std::move(ready));
    return false;
  }
  const uarch::CacheAccess a = cache_.lookup(index, write, owner);
  if (a.hit) {
    ++hits_;
    ++*owner_stats(owner).hits;
    return true;
  }
  ++misses_;
  ++*owner_stats(owner).misses;
  allocated(a);
  return true;
}

void ContextCache::install(uint64_t index, uint32_t owner) {
  if (!enabled_ || cache_.contains(index)) return;
  arrived_.erase(index);
  const uarch::CacheAccess a = cache_.lookup(index, false, owner);
  // The lookup counted a miss in the cache's own counters; the statistics
  // here do not: the line came with its data.
  allocated(a);
}

void ContextCache::allocated(const uarch::CacheAccess& a) {
  if (a.evicted) {
    ++evictions_;
    ++*owner_stats(a.evicted_owner).evictions;
    if (a.writeback) {
      ++writebacks_;
      // The functional copy is in ContextMemory: the write carries the
      // line's size in bytes, as the hardware's would.
      const std::vector<Icm::Piece> where = locate_(a.evicted_key);
      if (where.empty()) {
        ++faults_;
      } else {
        const std::vector<uint8_t> line(line_bytes_, 0);
        size_t at = 0;
        for (const Icm::Piece& p : where) {
          dma_.write(p.pa, line.data() + at, p.len, purpose_);
          at += p.len;
        }
      }
    }
  }
}

void ContextCache::start_fill(uint64_t index) {
  const std::vector<Icm::Piece> where = locate_(index);
  if (where.empty()) {
    ++faults_;
    MPR_LOG(log_, warn,
            name_ << " entry " << index << ": ICM page not mapped; the entry is used from chip");
    arrived_.insert(index);
    return;
  }
  fills_[index] = Fill{now_ps(), {}};
  const uint64_t gen = generation_;
  std::vector<Segment> segs;
  for (const Icm::Piece& p : where) segs.push_back(Segment{p.pa, p.len});
  dma_.gather(segs, purpose_, [this, index, gen](bool ok, std::vector<uint8_t>&&) {
    if (gen != generation_) return;  // a device reset forgot it
    auto it = fills_.find(index);
    if (it == fills_.end()) return;
    if (!ok) {
      ++faults_;
      MPR_LOG(log_, warn,
              name_ << " entry " << index << ": ICM read failed; the entry is used from chip");
    }
    fill_ns_.record(static_cast<double>(now_ps() - it->second.start_ps) / 1000.0);
    std::vector<Ready> waiters = std::move(it->second.waiters);
    fills_.erase(it);
    arrived_.insert(index);
    for (Ready& r : waiters)
      if (r) r();
  });
}

void ContextCache::invalidate(uint64_t index) {
  if (!enabled_) return;
  cache_.invalidate(index);
  arrived_.erase(index);
}

void ContextCache::reset() {
  if (!enabled_) return;
  ++generation_;
  cache_.invalidate_all();
  fills_.clear();
  arrived_.clear();
}

}  // namespace mprdma::nic
