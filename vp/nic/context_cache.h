// A context cache: the on-chip copy of part of one ICM table (QP contexts,
// later CQ contexts, MPTs and MTT blocks), over a uarch::SetAssocCache.
//
// The data path asks `access(index, owner, write, ready)` before it uses an
// entry. A cached entry answers at once (a hit). Otherwise the cache reads
// the entry from its ICM address in host memory with a PCIe DMA read (the
// fill) and calls `ready` when the data has arrived; the caller then
// repeats its access, which allocates the line (a miss) and, if that
// evicts a modified line, writes the evicted entry back to ICM with a DMA
// write. Accesses to an entry whose fill is under way wait for that fill
// (merged: one DMA read per line, however many waiters).
//
// What is cached is timing and traffic: the functional copy of every entry
// stays in ContextMemory, so the bytes a fill returns are not used (they are
// what the last write-back wrote). A fill is never lost: if the entry's ICM
// page is not mapped (the firmware refuses to create such objects, so only
// a driver that remaps ICM under a live object gets here) or the DMA read
// fails, the access proceeds, counted in icm_faults and logged.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/icm.h"
#include "vp/nic/uarch/set_assoc_cache.h"
#include "vp/nic/uarch_config.h"

namespace mprdma::nic {

class DmaEngine;

class ContextCache {
 public:
  using Ready = std::function<void()>;
  // Where line `line` lives in host memory (empty: nowhere mapped).
  using Locator = std::function<std::vector<Icm::Piece>(uint64_t line)>;

  // `name` is the cache's name in statistics (nic.<nic>.cache.<name>.);
  // `line_bytes` what a fill reads and a write-back writes; a line holds
  // `entries_per_line` consecutive entries of the table (line index =
  // entry index / entries_per_line; 8 MTT entries in a 64 B line).
  // `owner_label` names the per-owner counters (qp<N>., cq<N>.).
  ContextCache(const std::string& name, IcmTable table, uint32_t line_bytes, const CacheConfig& cfg,
               const Icm& icm, DmaEngine& dma, core::SimEnv& env, const std::string& nic_name,
               uint32_t entries_per_line = 1, const std::string& owner_label = "qp");
  // A cache of lines that live elsewhere in host memory (e.g. WQEs in their
  // send rings): `locate` says where; keys are `key_bits` wide.
  // Its fills and write-backs are counted as DMA of `purpose`.
  ContextCache(const std::string& name, uint32_t line_bytes, uint32_t key_bits,
               const CacheConfig& cfg, Locator locate, DmaEngine& dma, core::SimEnv& env,
               const std::string& nic_name, const std::string& owner_label,
               DmaPurpose purpose = DmaPurpose::icm);

  // True if line `index` is on chip now: go ahead. False: a fill is under
  // way and `ready` is called when it is done (then access again). `owner`
  // (a QPN) is charged in the per-owner counters; `write` marks the line
  // modified. A disabled cache always answers true and counts nothing.
  bool access(uint64_t index, uint32_t owner, bool write, Ready ready);

  // Puts line `index` on chip without a fill: its data arrived another way
  // (a WQE fetched from its ring). Counts no hit or miss; may evict.
  void install(uint64_t index, uint32_t owner);
  // Drops an entry (its object was destroyed): no write-back.
  void invalidate(uint64_t index);
  // Device reset: every line and every fill under way is forgotten.
  void reset();

  bool enabled() const { return enabled_; }
  const uarch::SetAssocCache& lines() const { return cache_; }
  uint64_t sram_bytes() const { return enabled_ ? cache_.sram_bytes() : 0; }
  uint32_t line_bytes() const { return line_bytes_; }

 private:
  struct OwnerStats {
    core::Counter* hits;
    core::Counter* misses;
    core::Counter* evictions;
  };
  struct Fill {
    uint64_t start_ps;
    std::vector<Ready> waiters;
  };
  void start_fill(uint64_t index);
  OwnerStats& owner_stats(uint32_t owner);

  // The counting and write-back of one allocation (miss or install).
  void allocated(const uarch::CacheAccess& a);

  std::string name_;
  uint32_t line_bytes_;
  std::string owner_label_;
  Locator locate_;
  DmaPurpose purpose_;
  bool enabled_;
  DmaEngine& dma_;
  core::SimEnv& env_;
  std::string prefix_;  // nic.<nic>.cache.<name>.
  core::LogChannel& log_;
  uarch::SetAssocCache cache_;
  std::unordered_map<uint64_t, Fill> fills_;  // index -> fill under way
  std::unordered_set<uint64_t> arrived_;      // filled, line not allocated yet
  uint64_t generation_ = 0;                   // bumped by reset()
  std::map<uint32_t, OwnerStats> owners_;
  core::Counter& hits_;
  core::Counter& misses_;
  core::Counter& evictions_;
  core::Counter& writebacks_;
  core::Counter& merged_;
  core::Counter& faults_;
  core::Histogram& fill_ns_;
};

}  // namespace mprdma::nic
