#include "vp/nic/context_memory.h"

#include <cstring>

namespace mprdma::nic {

namespace {

// Releases a vector's memory, not only its elements.
template <typename V>
void release_all(V& v) {
  V().swap(v);
}

}  // namespace

ContextMemory::ContextMemory(const NicLimits& limits, uint64_t qpc_entry_bytes,
                             const HandlePolicy& handles)
    : limits_(limits),
      icm_(limits_, qpc_entry_bytes),
      key_bits_(handles.key_random_bits),
      random_qpn_(handles.random_qpn),
      qpn_index_bits_(qpn_index_bits_for(limits, handles.random_qpn)),
      qpn_index_mask_((1u << qpn_index_bits_) - 1),
      rng_(handles.seed) {
  clear();
}

uint32_t ContextMemory::draw(uint32_t bits, uint32_t avoid) {
  if (bits == 0) return 0;
  // splitmix64: small, and the same numbers on every platform.
  rng_ += 0x9e3779b97f4a7c15ull;
  uint64_t z = rng_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint32_t mask = bits >= 32 ? UINT32_MAX : (1u << bits) - 1;
  uint32_t v = static_cast<uint32_t>(z) & mask;
  if (v == avoid) v = (v + 1) & mask;
  return v;
}

std::vector<uint32_t> ContextMemory::qpns() const {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < qp_used_.used.size(); ++i)
    if (qp_used_.used[i])
      if (const mpr_qpc* q = qps_.find(i); q && q->valid) out.push_back(q->qpn);
  return out;
}

void ContextMemory::clear() {
  icm_.clear();
  pds_.reset(static_cast<uint64_t>(limits_.max_pd));
  eqs_.reset(static_cast<uint64_t>(limits_.max_eq));
  cqs_.reset(static_cast<uint64_t>(limits_.max_cq));
  srqs_.reset(static_cast<uint64_t>(limits_.max_srq));
  qps_.reset(static_cast<uint64_t>(limits_.max_qp));
  mpts_.reset(static_cast<uint64_t>(limits_.max_mr));
  mtt_.reset(static_cast<uint64_t>(limits_.max_mtt));
  pd_used_.reset();
  eq_used_.reset();
  cq_used_.reset();
  srq_used_.reset();
  qp_used_.reset();
  mr_used_.reset();
  release_all(mr_variant_);
  release_all(qp_variant_);
  pd_used_.take_lowest(limits_.max_pd);  // PD 0 is never handed out: a zeroed field is not a PD
  mtt_free_.clear();
  mtt_free_[0] = static_cast<uint32_t>(limits_.max_mtt);
  gids_.assign(limits_.max_gids, {});
  gid_set_.assign(limits_.max_gids, false);
  qps_in_use_ = 0;
  gsi_qpn_ = 0;
  ++mr_epoch_;
}

int64_t ContextMemory::Handles::take_lowest(int64_t limit) {
  for (size_t i = first_maybe_free; i < used.size(); ++i)
    if (!used[i]) {
      used[i] = true;
      first_maybe_free = i + 1;
      return static_cast<int64_t>(i);
    }
  first_maybe_free = used.size();
  if (static_cast<int64_t>(used.size()) >= limit) return -1;
  used.push_back(true);
  first_maybe_free = used.size();
  return static_cast<int64_t>(used.size() - 1);
}

void ContextMemory::Handles::release(uint32_t index) {
  if (index >= used.size()) return;
  used[index] = false;
  if (index < first_maybe_free) first_maybe_free = index;
}

void ContextMemory::Handles::reset() {
  release_all(used);
  first_maybe_free = 0;
}

size_t ContextMemory::bytes_allocated() const {
  // A red-black tree node of libstdc++: three pointers and the colour,
  // then the key and value.
  constexpr size_t kMapNodeBytes = 32 + sizeof(std::pair<const uint32_t, uint32_t>);
  return pds_.bytes_allocated() + eqs_.bytes_allocated() + cqs_.bytes_allocated() +
         srqs_.bytes_allocated() + srq_used_.bytes() + qps_.bytes_allocated() +
         mpts_.bytes_allocated() + mtt_.bytes_allocated() + pd_used_.bytes() + eq_used_.bytes() +
         cq_used_.bytes() + qp_used_.bytes() + mr_used_.bytes() +
         (mr_variant_.capacity() + qp_variant_.capacity()) * sizeof(uint32_t) +
         gids_.capacity() * sizeof(gids_[0]) + (gid_set_.capacity() + 7) / 8 +
         mtt_free_.size() * kMapNodeBytes;
}

int64_t ContextMemory::alloc_pd() {
  int64_t i = pd_used_.take_lowest(limits_.max_pd);
  if (i >= 0) *pds_.touch(static_cast<uint64_t>(i)) = Pd{true, 0};
  return i;
}

bool ContextMemory::pd_valid(uint32_t pdn) const {
  const Pd* p = pds_.find(pdn);
  return p && p->valid;
}

uint32_t ContextMemory::pd_refs(uint32_t pdn) const {
  const Pd* p = pds_.find(pdn);
  return p && p->valid ? p->refs : 0;
}

void ContextMemory::pd_ref(uint32_t pdn, int delta) {
  if (Pd* p = pds_.find(pdn)) p->refs += delta;
}

void ContextMemory::free_pd(uint32_t pdn) {
  if (Pd* p = pds_.find(pdn)) *p = Pd{};
  pd_used_.release(pdn);
}

int64_t ContextMemory::alloc_eq() {
  int64_t i = eq_used_.take_lowest(limits_.max_eq);
  if (i < 0) return -1;
  mpr_eqc* e = eqs_.touch(static_cast<uint64_t>(i));
  *e = mpr_eqc{};
  e->eqn = static_cast<uint32_t>(i);
  e->valid = 1;
  return i;
}

mpr_eqc* ContextMemory::eq(uint32_t eqn) {
  mpr_eqc* e = eqs_.find(eqn);
  return e && e->valid ? e : nullptr;
}

void ContextMemory::free_eq(uint32_t eqn) {
  if (mpr_eqc* e = eqs_.find(eqn)) *e = mpr_eqc{};
  eq_used_.release(eqn);
}

int64_t ContextMemory::alloc_cq() {
  int64_t i = cq_used_.take_lowest(limits_.max_cq);
  if (i < 0) return -1;
  mpr_cqc* q = cqs_.touch(static_cast<uint64_t>(i));
  *q = mpr_cqc{};
  q->cqn = static_cast<uint32_t>(i);
  q->valid = 1;
  return i;
}

mpr_cqc* ContextMemory::cq(uint32_t cqn) {
  mpr_cqc* q = cqs_.find(cqn);
  return q && q->valid ? q : nullptr;
}

void ContextMemory::free_cq(uint32_t cqn) {
  if (mpr_cqc* q = cqs_.find(cqn)) *q = mpr_cqc{};
  cq_used_.release(cqn);
}

int64_t ContextMemory::alloc_srq() {
  int64_t i = srq_used_.take_lowest(limits_.max_srq);
  if (i < 0) return -1;
  mpr_srqc* q = srqs_.touch(static_cast<uint64_t>(i));
  *q = mpr_srqc{};
  q->srqn = static_cast<uint32_t>(i);
  q->valid = 1;
  return i;
}

mpr_srqc* ContextMemory::srq(uint32_t srqn) {
  mpr_srqc* q = srqs_.find(srqn);
  return q && q->valid ? q : nullptr;
}

void ContextMemory::free_srq(uint32_t srqn) {
  if (mpr_srqc* q = srqs_.find(srqn)) *q = mpr_srqc{};
  srq_used_.release(srqn);
}

int64_t ContextMemory::alloc_qp() {
  int64_t i = qp_used_.take_lowest(limits_.max_qp);
  if (i < 0) return -1;
  const auto index = static_cast<size_t>(i);
  uint32_t qpn = static_cast<uint32_t>(i + kFirstQpn);
  if (random_qpn_) {
    if (index >= qp_variant_.size()) qp_variant_.resize(index + 1, 0);
    qp_variant_[index] = draw(24 - qpn_index_bits_, qp_variant_[index]);
    qpn |= qp_variant_[index] << qpn_index_bits_;
  }
  mpr_qpc* q = qps_.touch(index);
  *q = mpr_qpc{};
  q->qpn = qpn;
  q->valid = 1;
  ++qps_in_use_;
  return qpn;
}

mpr_qpc* ContextMemory::qp(uint32_t qpn) {
  const uint32_t index = qp_index(qpn);
  if (index == UINT32_MAX) return nullptr;
  mpr_qpc* q = qps_.find(index);
  return q && q->valid && q->qpn == qpn ? q : nullptr;
}

const mpr_qpc* ContextMemory::qp(uint32_t qpn) const {
  return const_cast<ContextMemory*>(this)->qp(qpn);
}

void ContextMemory::free_qp(uint32_t qpn) {
  mpr_qpc* q = qp(qpn);
  if (!q) return;
  *q = mpr_qpc{};
  qp_used_.release(qp_index(qpn));
  if (qpn == gsi_qpn_) gsi_qpn_ = 0;
  --qps_in_use_;
}

int64_t ContextMemory::alloc_mr() {
  int64_t i = mr_used_.take_lowest(limits_.max_mr);
  if (i < 0) return -1;
  const auto index = static_cast<size_t>(i);
  if (index >= mr_variant_.size()) mr_variant_.resize(index + 1, 0);
  uint32_t key = 0;
  do {
    mr_variant_[index] = draw(key_bits_, mr_variant_[index]);
    key = static_cast<uint32_t>(uint64_t{index} << key_bits_) | mr_variant_[index];
    // MPR_LKEY_END ends a RECV's scatter list: never a key.
  } while (key == MPR_LKEY_END && key_bits_ > 0);
  // Valid at once: the caller fills the rest before anything can look it up.
  mpr_mpt* m = mpts_.touch(index);
  *m = mpr_mpt{};
  m->key = key;
  m->valid = 1;
  return key;
}

mpr_mpt* ContextMemory::mr(uint32_t key) {
  mpr_mpt* m = mpts_.find(mr_index(key));
  return m && m->valid && m->key == key ? m : nullptr;
}

void ContextMemory::free_mr(uint32_t key) {
  mpr_mpt* m = mr(key);
  if (!m) return;
  ++mr_epoch_;
  *m = mpr_mpt{};
  mr_used_.release(mr_index(key));
}

bool ContextMemory::set_mtt(uint32_t index, uint64_t pa) {
  uint64_t* e = mtt_.touch(index);
  if (!e) return false;
  *e = pa;
  return true;
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

uint64_t ContextMemory::mtt_in_use() const {
  uint64_t free = 0;
  for (const auto& [base, count] : mtt_free_) free += count;
  return static_cast<uint64_t>(limits_.max_mtt) - free;
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
