#include "vp/nic/context_memory.h"

#include <cstring>

namespace mprdma::nic {

ContextMemory::ContextMemory(const NicLimits& limits) : limits_(limits) { clear(); }

void ContextMemory::clear() {
  pds_.assign(limits_.max_pd, Pd{});
  pd_used_.assign(limits_.max_pd, false);
  pd_used_[0] = true;  // PD 0 is never handed out: a zeroed field is not a PD
  eq_used_.assign(limits_.max_eq, false);
  cq_used_.assign(limits_.max_cq, false);
  qp_used_.assign(limits_.max_qp, false);
  mr_used_.assign(limits_.max_mr, false);
  eqs_.assign(limits_.max_eq, mpr_eqc{});
  cqs_.assign(limits_.max_cq, mpr_cqc{});
  qps_.assign(limits_.max_qp, mpr_qpc{});
  mpts_.assign(limits_.max_mr, mpr_mpt{});
  mr_generation_.assign(limits_.max_mr, 0);
  mtt_.assign(static_cast<size_t>(limits_.max_mtt), 0);
  mtt_free_.clear();
  mtt_free_[0] = static_cast<uint32_t>(limits_.max_mtt);
  gids_.assign(limits_.max_gids, {});
  gid_set_.assign(limits_.max_gids, false);
  qps_in_use_ = 0;
}

int64_t ContextMemory::lowest_free(std::vector<bool>& used) {
  for (size_t i = 0; i < used.size(); ++i)
    if (!used[i]) {
      used[i] = true;
      return static_cast<int64_t>(i);
    }
  return -1;
}

int64_t ContextMemory::alloc_pd() {
  int64_t i = lowest_free(pd_used_);
  if (i >= 0) pds_[i] = Pd{true, 0};
  return i;
}

bool ContextMemory::pd_valid(uint32_t pdn) const { return pdn < pds_.size() && pds_[pdn].valid; }

void ContextMemory::free_pd(uint32_t pdn) {
  pds_[pdn] = Pd{};
  pd_used_[pdn] = false;
}

int64_t ContextMemory::alloc_eq() {
  int64_t i = lowest_free(eq_used_);
  if (i < 0) return -1;
  eqs_[i] = mpr_eqc{};
  eqs_[i].eqn = static_cast<uint32_t>(i);
  eqs_[i].valid = 1;
  return i;
}

mpr_eqc* ContextMemory::eq(uint32_t eqn) {
  return eqn < eqs_.size() && eqs_[eqn].valid ? &eqs_[eqn] : nullptr;
}

void ContextMemory::free_eq(uint32_t eqn) {
  eqs_[eqn] = mpr_eqc{};
  eq_used_[eqn] = false;
}

int64_t ContextMemory::alloc_cq() {
  int64_t i = lowest_free(cq_used_);
  if (i < 0) return -1;
  cqs_[i] = mpr_cqc{};
  cqs_[i].cqn = static_cast<uint32_t>(i);
  cqs_[i].valid = 1;
  return i;
}

mpr_cqc* ContextMemory::cq(uint32_t cqn) {
  return cqn < cqs_.size() && cqs_[cqn].valid ? &cqs_[cqn] : nullptr;
}

void ContextMemory::free_cq(uint32_t cqn) {
  cqs_[cqn] = mpr_cqc{};
  cq_used_[cqn] = false;
}

int64_t ContextMemory::alloc_qp() {
  int64_t i = lowest_free(qp_used_);
  if (i < 0) return -1;
  qps_[i] = mpr_qpc{};
  qps_[i].qpn = static_cast<uint32_t>(i + kFirstQpn);
  qps_[i].valid = 1;
  ++qps_in_use_;
  return i + kFirstQpn;
}

mpr_qpc* ContextMemory::qp(uint32_t qpn) {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
  mpr_qpc& q = qps_[qpn - kFirstQpn];
  return q.valid ? &q : nullptr;
}

const mpr_qpc* ContextMemory::qp(uint32_t qpn) const {
  return const_cast<ContextMemory*>(this)->qp(qpn);
}

void ContextMemory::free_qp(uint32_t qpn) {
  qps_[qpn - kFirstQpn] = mpr_qpc{};
  qp_used_[qpn - kFirstQpn] = false;
  --qps_in_use_;
}

int64_t ContextMemory::alloc_mr() {
  int64_t i = lowest_free(mr_used_);
  if (i < 0) return -1;
  mpts_[i] = mpr_mpt{};
  uint8_t gen = ++mr_generation_[i];
  uint32_t key = static_cast<uint32_t>((i << 8) | gen);
  // Valid at once: the caller fills the rest before anything can look it up.
  mpts_[i].key = key;
  mpts_[i].valid = 1;
  return key;
}

mpr_mpt* ContextMemory::mr(uint32_t key) {
  uint32_t index = key >> 8;
  if (index >= mpts_.size()) return nullptr;
  mpr_mpt& m = mpts_[index];
  return m.valid && m.key == key ? &m : nullptr;
}

void ContextMemory::free_mr(uint32_t key) {
  uint32_t index = key >> 8;
  mpts_[index] = mpr_mpt{};
  mr_used_[index] = false;
}

int64_t ContextMemory::alloc_mtt(uint32_t count) {
  if (count == 0) return -1;
  for (auto it = mtt_free_.begin(); it != mtt_free_.end(); ++it) {
    if (it->second < count) continue;
    uint32_t base = it->first;
    uint32_t rest = it->second - count;
    mtt_free_.erase(it);
    if (rest) mtt_free_[base + count] = rest;
    return base;
  }
  return -1;
}

void ContextMemory::free_mtt(uint32_t base, uint32_t count) {
  if (count == 0) return;
  auto [it, inserted] = mtt_free_.emplace(base, count);
  (void)inserted;
  // Merge with the following and the preceding free runs.
  auto next = std::next(it);
  if (next != mtt_free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    mtt_free_.erase(next);
  }
  if (it != mtt_free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      mtt_free_.erase(it);
    }
  }
}

bool ContextMemory::set_gid(uint32_t index, const uint8_t gid[16]) {
  if (index >= gids_.size()) return false;
  std::memcpy(gids_[index].data(), gid, 16);
  gid_set_[index] = true;
  return true;
}

bool ContextMemory::clear_gid(uint32_t index) {
  if (index >= gids_.size()) return false;
  gids_[index] = {};
  gid_set_[index] = false;
  return true;
}

const uint8_t* ContextMemory::gid(uint32_t index) const {
  return index < gids_.size() && gid_set_[index] ? gids_[index].data() : nullptr;
}

}  // namespace mprdma::nic
