#include "vp/nic/translation.h"

#include <algorithm>

namespace mprdma::nic {

const char* to_string(AccessStatus s) {
  switch (s) {
    case AccessStatus::ok:
      return "ok";
    case AccessStatus::bad_key:
      return "invalid key";
    case AccessStatus::pd_mismatch:
      return "key of another protection domain";
    case AccessStatus::bounds:
      return "range outside the memory region";
    case AccessStatus::access:
      return "memory region lacks the access right";
  }
  return "?";
}

AccessStatus Translation::check(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len,
                                uint32_t need) const {
  if (len == 0) return AccessStatus::ok;
  const mpr_mpt* m = contexts_.mr(key);
  if (!m) return AccessStatus::bad_key;
  if (m->pdn != pdn) return AccessStatus::pd_mismatch;
  if ((m->access & need) != need) return AccessStatus::access;
  if (va < m->iova || va + len < va || va + len > m->iova + m->length) return AccessStatus::bounds;
  return AccessStatus::ok;
}

AccessStatus Translation::translate(uint32_t key, uint32_t pdn, uint64_t va, uint64_t len,
                                    uint32_t need, std::vector<Segment>& out) const {
  if (len == 0) return AccessStatus::ok;
  const AccessStatus st = check(key, pdn, va, len, need);
  if (st != AccessStatus::ok) return st;
  const mpr_mpt* m = contexts_.mr(key);

  const uint64_t page = uint64_t{1} << m->page_shift;
  const uint64_t first_page_va = m->iova & ~(page - 1);
  uint64_t cur = va;
  uint64_t left = len;
  while (left) {
    const uint64_t index = (cur - first_page_va) >> m->page_shift;
    const uint64_t in_page = cur & (page - 1);
    const uint64_t chunk = std::min(left, page - in_page);
    const uint64_t pa = contexts_.mtt(m->mtt_base + static_cast<uint32_t>(index)) + in_page;
    // Merge physically contiguous pages into one segment: fewer DMA requests.
    if (!out.empty() && out.back().pa + out.back().len == pa &&
        uint64_t{out.back().len} + chunk <= UINT32_MAX)
      out.back().len += static_cast<uint32_t>(chunk);
    else
      out.push_back({pa, static_cast<uint32_t>(chunk)});
    cur += chunk;
    left -= chunk;
  }
  return AccessStatus::ok;
}

AccessStatus Translation::translate_sges(const std::vector<mpr_wqe_data>& sges, uint32_t pdn,
                                         uint64_t offset, uint64_t len, uint32_t need,
                                         std::vector<Segment>& out) const {
  for (const mpr_wqe_data& d : sges) {
    if (len == 0) break;
    if (offset >= d.byte_count) {
      offset -= d.byte_count;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(len, d.byte_count - offset);
    const AccessStatus st = translate(d.lkey, pdn, d.addr + offset, take, need, out);
    if (st != AccessStatus::ok) return st;
    len -= take;
    offset = 0;
  }
  return len == 0 ? AccessStatus::ok : AccessStatus::bounds;
}

void slice_segments(const std::vector<Segment>& segs, uint64_t offset, uint64_t len,
                    std::vector<Segment>& out) {
  for (const Segment& s : segs) {
    if (len == 0) break;
    if (offset >= s.len) {
      offset -= s.len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(len, s.len - offset);
    out.push_back({s.pa + offset, static_cast<uint32_t>(take)});
    len -= take;
    offset = 0;
  }
}

}  // namespace mprdma::nic
