#include "vp/nic/translation_cache.h"

#include <mprdma/hw.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace mprdma::nic {

TranslationCache::TranslationCache(const NicConfig& cfg, ContextMemory& contexts, DmaEngine& dma,
                                   core::SimEnv& env)
    : contexts_(contexts),
      mpt_("mpt", IcmTable::mpt, static_cast<uint32_t>(sizeof(mpr_mpt)), cfg.cache.mpt,
           contexts.icm(), dma, env, cfg.name),
      mtt_("mtt", IcmTable::mtt, kMttPerLine * 8, cfg.cache.mtt, contexts.icm(), dma, env, cfg.name,
           kMttPerLine),
      window_lines_(std::max<int64_t>(1, cfg.cache.mtt.sets * cfg.cache.mtt.ways / 2)) {}

bool TranslationCache::access(uint32_t key, uint64_t va, uint64_t len, uint32_t owner,
                              ContextCache::Ready ready, RangeProgress* progress) {
  if (!mpt_.enabled() && !mtt_.enabled()) return true;
  std::vector<std::pair<ContextCache*, uint64_t>> lines;
  const uint64_t mpt_index = contexts_.mr_index(key);
  if (mpt_index < contexts_.icm().entries(IcmTable::mpt)) lines.push_back({&mpt_, mpt_index});
  const mpr_mpt* m = contexts_.mr(key);
  uint64_t first_line = 0, end_line = 0;
  if (m && len > 0 && va >= m->iova && va + len > va && va + len <= m->iova + m->length) {
    const uint64_t first_page_va = m->iova & ~((uint64_t{1} << m->page_shift) - 1);
    const uint64_t first = m->mtt_base + ((va - first_page_va) >> m->page_shift);
    const uint64_t last = m->mtt_base + ((va + len - 1 - first_page_va) >> m->page_shift);
    first_line = first / kMttPerLine;
    end_line = last / kMttPerLine + 1;
  }
  // One window of the range's MTT lines at a time (all of them without a
  // RangeProgress); a window whose lines are all here moves the range on.
  uint64_t from = first_line + (progress ? progress->lines_done : 0);
  for (;;) {
    const uint64_t to =
        progress ? std::min(end_line, std::max(from, first_line) + window_lines_) : end_line;
    for (uint64_t l = from; l < to; ++l) lines.push_back({&mtt_, l});
    // Every line is looked up (hits refresh LRU); the misses are counted
    // down as their fills arrive.
    auto missing = std::make_shared<int>(0);
    for (auto& [cache, line] : lines)
      if (!cache->access(line, owner, false, [missing, ready] {
            if (--*missing == 0 && ready) ready();
          }))
        ++*missing;
    if (*missing > 0) return false;
    if (to >= end_line) {
      if (progress) progress->lines_done = 0;  // done: the next range starts afresh
      return true;
    }
    progress->lines_done = to - first_line;
    from = to;
    lines.clear();
  }
}

void TranslationCache::invalidate_mr(uint32_t key) { mpt_.invalidate(contexts_.mr_index(key)); }

void TranslationCache::reset() {
  mpt_.reset();
  mtt_.reset();
}

}  // namespace mprdma::nic
