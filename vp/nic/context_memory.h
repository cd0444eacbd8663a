// Context memory: the NIC's tables of QP, CQ and EQ contexts, protection
// domains, memory regions (MPT) and page translations (MTT), in the layouts
// of <mprdma/hw.h>.
//
// The command processor (firmware) allocates and fills entries; the data path
// reads them. In this version every context is on chip (no cache misses):
// the tables are sized by NicLimits and cost no time to access. The QPC cache
// and host-memory backing tables come with the microarchitecture work.
//
// The tables are sized by NicLimits but allocated lazily, a page of entries
// at a time when an entry of the page is first written (PagedTable), so a
// NIC with the default limits (4 Mi MTT entries, 64 Ki MPTs) costs the
// simulator kilobytes until it is used. Limits, handles and lookups behave
// as if the tables were allocated whole: an entry never written reads as
// zero (invalid), and an index beyond a limit is rejected.
#pragma once

#include <mprdma/hw.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "vp/nic/icm.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/paged_table.h"

namespace mprdma::nic {

// QP numbers 0 and 1 are the InfiniBand special QPs; ours start here.
constexpr uint32_t kFirstQpn = 2;

// How keys and QP numbers are made (NicConfig::handles): random bits from
// a generator seeded with `seed`.
struct HandlePolicy {
  uint32_t key_random_bits = 8;
  bool random_qpn = false;
  uint64_t seed = 0;
};

class ContextMemory {
 public:
  // `qpc_entry_bytes`: the ICM size of a QP context (Icm::qpc_entry_bytes).
  explicit ContextMemory(const NicLimits& limits, uint64_t qpc_entry_bytes = Icm::kQpcEntryBytes,
                         const HandlePolicy& handles = HandlePolicy{});

  // Every allocator takes the lowest free table entry, or returns -1 when
  // full. PD, EQ and CQ handles are the entry's index; memory keys and QP
  // numbers add the random bits of the HandlePolicy (drawn from its seeded
  // generator, so deterministic too). The new entry is zeroed except for
  // its handle and valid flag; the caller fills the rest.
  int64_t alloc_pd();
  bool pd_valid(uint32_t pdn) const;
  void free_pd(uint32_t pdn);
  uint32_t pd_refs(uint32_t pdn) const;
  void pd_ref(uint32_t pdn, int delta);

  int64_t alloc_eq();
  mpr_eqc* eq(uint32_t eqn);
  void free_eq(uint32_t eqn);

  int64_t alloc_cq();
  mpr_cqc* cq(uint32_t cqn);
  void free_cq(uint32_t cqn);

  // A QP number is (random bits << qpn_index_bits) | (index + kFirstQpn);
  // with lowest-free numbers there are no random bits. qp() finds the QP
  // only under its whole number.
  // Shared receive queues: handles are the entry's index.
  int64_t alloc_srq();
  mpr_srqc* srq(uint32_t srqn);
  void free_srq(uint32_t srqn);

  int64_t alloc_qp();  // returns a QPN
  mpr_qpc* qp(uint32_t qpn);
  const mpr_qpc* qp(uint32_t qpn) const;
  void free_qp(uint32_t qpn);
  // The table index of a QP number (its QPC entry and cache line), whether
  // or not such a QP exists; a value >= limits.max_qp for none.
  uint32_t qp_index(uint32_t qpn) const {
    const uint32_t low = qpn & qpn_index_mask_;
    return low < kFirstQpn ? UINT32_MAX : low - kFirstQpn;
  }
  uint32_t qpn_index_bits() const { return qpn_index_bits_; }
  // The low bits of a QP number that are its table index, for these limits.
  static uint32_t qpn_index_bits_for(const NicLimits& limits, bool random_qpn) {
    return random_qpn ? bits_for(static_cast<uint64_t>(limits.max_qp) + kFirstQpn) : 24;
  }
  // The GSI QP (MPR_QPT_GSI): the handle of the QP that stands for QPN 1 on
  // the wire, 0 for none.
  uint32_t gsi_qpn() const { return gsi_qpn_; }
  void set_gsi_qpn(uint32_t qpn) { gsi_qpn_ = qpn; }
  // Every QP that exists now, lowest index first.
  std::vector<uint32_t> qpns() const;

  // Memory regions. A key is (MPT index << key_random_bits) | random bits,
  // drawn anew (and different from the entry's last) at each registration:
  // a key kept after DEREG_MR never matches the entry's next region.
  int64_t alloc_mr();         // returns the new key; the entry is valid, the caller fills it
  mpr_mpt* mr(uint32_t key);  // nullptr unless valid and the key matches
  void free_mr(uint32_t key);
  uint32_t mr_index(uint32_t key) const { return key_bits_ >= 32 ? 0 : key >> key_bits_; }
  // Counts the regions freed so far (and device resets): a block holding
  // translations made at an earlier epoch checks its keys again before it
  // uses them, so nothing of a region that is gone is ever touched.
  uint64_t mr_epoch() const { return mr_epoch_; }

  // Page translation entries, allocated as contiguous runs.
  int64_t alloc_mtt(uint32_t count);
  void free_mtt(uint32_t base, uint32_t count);
  // Entries allocated now (of limits.max_mtt), for counters and tests.
  uint64_t mtt_in_use() const;
  // An entry never written (or beyond max_mtt) reads as 0. set_mtt() returns
  // false, and stores nothing, for an index beyond max_mtt.
  uint64_t mtt(uint32_t index) const { return mtt_.get(index); }
  bool set_mtt(uint32_t index, uint64_t pa);

  bool set_gid(uint32_t index, const uint8_t gid[16]);
  bool clear_gid(uint32_t index);
  const uint8_t* gid(uint32_t index) const;  // nullptr if unset

  // The host-memory layout of the tables and the driver's MAP_ICM pages.
  Icm& icm() { return icm_; }
  const Icm& icm() const { return icm_; }

  // Destroys every object and forgets the ICM map (device reset).
  void clear();

  const NicLimits& limits() const { return limits_; }
  size_t qp_count() const { return qps_in_use_; }

  // Simulator heap bytes the tables hold now: pages of entries, page
  // directories, allocation bitmaps, MR generations and the GID table, plus
  // an estimate for the nodes of the MTT free-run map. For tests and
  // memory reports; it is not a model of the NIC's on-chip memory.
  size_t bytes_allocated() const;

 private:
  struct Pd {
    bool valid = false;
    uint32_t refs = 0;
  };
  // Which indices of a table are in use: a bitmap grown up to the highest
  // index handed out, and the lowest index that may be free (every index
  // below it is in use), so that handing out handles in order is O(1).
  struct Handles {
    std::vector<bool> used;
    size_t first_maybe_free = 0;
    // Marks and returns the lowest index not in use below `limit`; -1 when
    // all `limit` are in use.
    int64_t take_lowest(int64_t limit);
    void release(uint32_t index);
    void reset();
    size_t bytes() const { return (used.capacity() + 7) / 8; }
  };

  NicLimits limits_;
  Icm icm_;
  // Entries per page: pages of 1 KiB (EQs) to 8 KiB (QPs).
  PagedTable<Pd, 8> pds_;
  Handles pd_used_, eq_used_, cq_used_, qp_used_, mr_used_, srq_used_;
  PagedTable<mpr_eqc, 5> eqs_;
  PagedTable<mpr_cqc, 6> cqs_;
  PagedTable<mpr_srqc, 6> srqs_;
  PagedTable<mpr_qpc, 6> qps_;  // index qpn - kFirstQpn
  PagedTable<mpr_mpt, 7> mpts_;
  std::vector<uint32_t> mr_variant_;             // random bits of each MPT index's last key
  std::vector<uint32_t> qp_variant_;             // likewise of each QP entry's last number
  uint32_t draw(uint32_t bits, uint32_t avoid);  // random bits, not `avoid` when there is a choice
  uint32_t key_bits_;
  bool random_qpn_;
  uint32_t qpn_index_bits_;
  uint32_t qpn_index_mask_;
  uint64_t rng_;  // splitmix64 state
  PagedTable<uint64_t, 9> mtt_;
  std::map<uint32_t, uint32_t> mtt_free_;  // start -> length
  // At most 256 entries (4 KiB): allocated whole.
  std::vector<std::array<uint8_t, 16>> gids_;
  std::vector<bool> gid_set_;
  uint32_t gsi_qpn_ = 0;
  size_t qps_in_use_ = 0;
  uint64_t mr_epoch_ = 0;
};

}  // namespace mprdma::nic
