// The MPT and MTT caches together: what translating a memory key and range
// needs on chip. Before the data path translates (Translation::translate,
// which stays synchronous and uses the functional copy), it asks
// `access(key, va, len, owner, ready)`: the memory region's MPT line and the
// MTT lines holding the page addresses of [va, va + len) must be cached. If
// they are, access() returns true; otherwise the missing lines are fetched
// from ICM (one DMA read each) and `ready` is called once all of them have
// arrived, after which the caller asks again.
//
// A range whose MTT lines could not all be on chip at once (more than the
// cache holds, as a multi-megabyte message with a small cache) is taken in
// windows of half the MTT cache's lines, one after the other: the caller
// keeps a RangeProgress for the range across its retries, and lines of
// windows already passed are not looked up again (the translation engine
// uses them as they come, it does not keep the whole message's pages).
// Ranges within one window behave as without it. A caller without a
// RangeProgress needs every line at once.
//
// A key or range that does not translate (no such MR, out of bounds) needs
// only the MPT line: the check that fails reads nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "vp/core/sim_env.h"
#include "vp/nic/context_cache.h"
#include "vp/nic/context_memory.h"

namespace mprdma::nic {

class TranslationCache {
 public:
  static constexpr uint32_t kMttPerLine = 8;  // 64 B lines of 8-byte page addresses

  TranslationCache(const NicConfig& cfg, ContextMemory& contexts, DmaEngine& dma,
                   core::SimEnv& env);

  // Where a retried access of one range has got to: MTT lines before
  // `lines_done` (from the range's first) were on chip once.
  struct RangeProgress {
    uint64_t lines_done = 0;
  };

  bool access(uint32_t key, uint64_t va, uint64_t len, uint32_t owner, ContextCache::Ready ready,
              RangeProgress* progress = nullptr);
  void invalidate_mr(uint32_t key);  // DEREG_MR: its MPT line
  void reset();

  const ContextCache& mpt() const { return mpt_; }
  const ContextCache& mtt() const { return mtt_; }

 private:
  ContextMemory& contexts_;
  ContextCache mpt_;
  ContextCache mtt_;
  uint64_t window_lines_;  // MTT lines looked up together (half the cache, at least 1)
};

}  // namespace mprdma::nic
