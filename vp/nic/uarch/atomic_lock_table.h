// The NIC's internal lock table for RDMA atomics (issue 6, item 4; Kalia et
// al., ATC'16, §3.4 and §5.4). A PU serving an atomic takes the lock of the
// target address's bucket, issues the PCIe read-modify-write, and releases
// the lock when the write is posted. Two atomics whose addresses map to one
// bucket are serialised even when the addresses differ, because the table
// is small (it sits in scarce SRAM): that false sharing is what the paper
// measured.
//
//   bucket = (addr >> low_bit) & (buckets - 1),  buckets a power of two.
//
// One bucket serialises every atomic, as ConnectX-3 does (2.7 Mops flat in
// the number of counters Z); 4096 buckets on address bits 0-11 match the
// paper's inference for Connect-IB (rate rising with Z, and two addresses
// with the same low 12 bits serialised).
//
// Waiters of a bucket are granted in FIFO order. Plain C++ with no timing:
// the caller holds the lock across its PCIe round trip and calls release().
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

namespace mprdma::nic::uarch {

struct AtomicLockTableParams {
  uint32_t buckets = 4096;  // number of locks, a power of two (1 = one global lock)
  uint32_t low_bit = 0;     // lowest address bit of the bucket index, < 64
};

struct AtomicLockCounters {
  uint64_t acquires = 0;   // acquire() calls
  uint64_t conflicts = 0;  // of those, found the bucket held and queued
  uint64_t releases = 0;
  uint64_t max_waiters = 0;  // longest queue seen behind one holder
};

class AtomicLockTable {
 public:
  // Throws std::invalid_argument unless buckets is a power of two and
  // low_bit < 64 (the message names the bad parameter).
  explicit AtomicLockTable(const AtomicLockTableParams& p);

  uint32_t bucket_of(uint64_t addr) const {
    return static_cast<uint32_t>((addr >> p_.low_bit) & (p_.buckets - 1));
  }
  // Operation `op` (a caller's id, unique among ops in flight) asks for the
  // lock of `addr`'s bucket. True: granted now. False: queued behind the
  // holder and earlier waiters; release() grants it later.
  bool acquire(uint64_t addr, uint64_t op);
  // `op` releases the bucket of `addr`, which it must hold
  // (std::logic_error otherwise). Returns the op granted next, if any.
  std::optional<uint64_t> release(uint64_t addr, uint64_t op);

  bool held(uint32_t bucket) const { return busy_.count(bucket) != 0; }
  std::optional<uint64_t> holder(uint32_t bucket) const;
  size_t waiters(uint32_t bucket) const;
  size_t held_buckets() const { return busy_.size(); }

  const AtomicLockCounters& counters() const { return counters_; }
  const AtomicLockTableParams& params() const { return p_; }
  // SRAM of the table: a busy bit per bucket. The waiter queues are the
  // PUs' own (a PU stalls on its atomic), so they are not counted here.
  uint64_t sram_bytes() const { return (uint64_t{p_.buckets} + 7) / 8; }

 private:
  struct Bucket {
    uint64_t holder = 0;
    std::deque<uint64_t> waiting;  // FIFO: front is granted next
  };

  AtomicLockTableParams p_;
  // Only held buckets have an entry, so 4096 idle buckets cost nothing.
  std::unordered_map<uint32_t, Bucket> busy_;
  AtomicLockCounters counters_;
};

}  // namespace mprdma::nic::uarch
