#include "vp/nic/uarch/atomic_lock_table.h"

#include <stdexcept>
#include <string>

namespace mprdma::nic::uarch {

AtomicLockTable::AtomicLockTable(const AtomicLockTableParams& p) : p_(p) {
  // The index is a bit field of the address, as in hardware: no modulo.
  if (p_.buckets == 0 || (p_.buckets & (p_.buckets - 1)) != 0) {
    throw std::invalid_argument("atomic lock table: buckets must be a power of two, got " +
                                std::to_string(p_.buckets));
  }
  if (p_.low_bit >= 64) {
    throw std::invalid_argument("atomic lock table: low_bit must be < 64, got " +
                                std::to_string(p_.low_bit));
  }
}

bool AtomicLockTable::acquire(uint64_t addr, uint64_t op) {
  ++counters_.acquires;
  const uint32_t b = bucket_of(addr);
  auto it = busy_.find(b);
  if (it == busy_.end()) {
    busy_[b].holder = op;
    return true;
  }
  ++counters_.conflicts;
  it->second.waiting.push_back(op);
  if (it->second.waiting.size() > counters_.max_waiters) {
    counters_.max_waiters = it->second.waiting.size();
  }
  return false;
}

std::optional<uint64_t> AtomicLockTable::release(uint64_t addr, uint64_t op) {
  const uint32_t b = bucket_of(addr);
  auto it = busy_.find(b);
  if (it == busy_.end() || it->second.holder != op) {
    throw std::logic_error("atomic lock table: op " + std::to_string(op) + " releases bucket " +
                           std::to_string(b) + " it does not hold");
  }
  ++counters_.releases;
  Bucket& bucket = it->second;
  if (bucket.waiting.empty()) {
    busy_.erase(it);
    return std::nullopt;
  }
  bucket.holder = bucket.waiting.front();
  bucket.waiting.pop_front();
  return bucket.holder;
}

std::optional<uint64_t> AtomicLockTable::holder(uint32_t bucket) const {
  auto it = busy_.find(bucket);
  if (it == busy_.end()) return std::nullopt;
  return it->second.holder;
}

size_t AtomicLockTable::waiters(uint32_t bucket) const {
  auto it = busy_.find(bucket);
  return it == busy_.end() ? 0 : it->second.waiting.size();
}

}  // namespace mprdma::nic::uarch
