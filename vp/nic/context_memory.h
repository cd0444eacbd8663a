// Context memory: the NIC's tables of QP, CQ and EQ contexts, protection
// domains, memory regions (MPT) and page translations (MTT), in the layouts
// of <mprdma/hw.h>.
//
// The command processor (firmware) allocates and fills entries; the data path
// reads them. In this version every context is on chip (no cache misses):
// the tables are sized by NicLimits and cost no time to access. The QPC cache
// and host-memory backing tables come with the microarchitecture work.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include <mprdma/hw.h>

#include "vp/nic/nic_config.h"

namespace mprdma::nic {

// QP numbers 0 and 1 are the InfiniBand special QPs; ours start here.
constexpr uint32_t kFirstQpn = 2;

class ContextMemory {
 public:
  explicit ContextMemory(const NicLimits& limits);

  // Every allocator returns the lowest free handle, or -1 when full, so that
  // handle assignment is deterministic. The new entry is zeroed except for
  // its handle and valid flag; the caller fills the rest.
  int64_t alloc_pd();
  bool pd_valid(uint32_t pdn) const;
  void free_pd(uint32_t pdn);
  uint32_t pd_refs(uint32_t pdn) const { return pd_valid(pdn) ? pds_[pdn].refs : 0; }
  void pd_ref(uint32_t pdn, int delta) { pds_[pdn].refs += delta; }

  int64_t alloc_eq();
  mpr_eqc* eq(uint32_t eqn);
  void free_eq(uint32_t eqn);

  int64_t alloc_cq();
  mpr_cqc* cq(uint32_t cqn);
  void free_cq(uint32_t cqn);

  int64_t alloc_qp();  // returns a QPN
  mpr_qpc* qp(uint32_t qpn);
  const mpr_qpc* qp(uint32_t qpn) const;
  void free_qp(uint32_t qpn);

  // Memory regions. A key is (index << 8) | generation: a key kept after
  // DEREG_MR stops matching once the entry is reused.
  int64_t alloc_mr();  // returns the new key; the entry is valid, the caller fills it
  mpr_mpt* mr(uint32_t key);  // nullptr unless valid and the key matches
  void free_mr(uint32_t key);

  // Page translation entries, allocated as contiguous runs.
  int64_t alloc_mtt(uint32_t count);
  void free_mtt(uint32_t base, uint32_t count);
  uint64_t mtt(uint32_t index) const { return mtt_[index]; }
  void set_mtt(uint32_t index, uint64_t pa) { mtt_[index] = pa; }

  bool set_gid(uint32_t index, const uint8_t gid[16]);
  bool clear_gid(uint32_t index);
  const uint8_t* gid(uint32_t index) const;  // nullptr if unset

  // Destroys every object (device reset).
  void clear();

  const NicLimits& limits() const { return limits_; }
  size_t qp_count() const { return qps_in_use_; }

 private:
  struct Pd {
    bool valid = false;
    uint32_t refs = 0;
  };
  static int64_t lowest_free(std::vector<bool>& used);

  NicLimits limits_;
  std::vector<Pd> pds_;
  std::vector<bool> pd_used_, eq_used_, cq_used_, qp_used_, mr_used_;
  std::vector<mpr_eqc> eqs_;
  std::vector<mpr_cqc> cqs_;
  std::vector<mpr_qpc> qps_;
  std::vector<mpr_mpt> mpts_;
  std::vector<uint8_t> mr_generation_;
  std::vector<uint64_t> mtt_;
  std::map<uint32_t, uint32_t> mtt_free_;  // start -> length
  std::vector<std::array<uint8_t, 16>> gids_;
  std::vector<bool> gid_set_;
  size_t qps_in_use_ = 0;
};

}  // namespace mprdma::nic
