// Parameters of the NIC's microarchitecture: the on-chip SRAM and the
// context caches that hold part of the ICM tables on chip (scenario keys
// nic.sram and nic.cache). See vp/nic/context_cache.h and nic.md.
#pragma once

#include <cstdint>
#include <string>

#include "vp/core/config.h"
#include "vp/core/units.h"
#include "vp/nic/uarch/set_assoc_cache.h"

namespace mprdma::nic {

// One set-associative context cache. A line holds one entry of its ICM
// table; the line size follows from the entry (nic.md, "Caches").
struct CacheConfig {
  bool enabled = true;
  int64_t sets = 64;  // power of two
  int64_t ways = 4;   // lines per set
  uarch::Replacement replacement = uarch::Replacement::lru;
  void bind(core::Binder& b);
};

struct CachesConfig {
  // 256 QP contexts on chip: the MP-RDMA paper's ConnectX-3 Pro loses
  // goodput beyond ~256 connections (Fig. 2); the vendor does not publish
  // the cache geometry, so this is our choice, calibrated to that figure.
  CacheConfig qpc;
  // Our choices, as large as the QPC cache in lines (vendors publish none):
  // CQ contexts (64 B), memory regions (MPT, 64 B) and page translations
  // (MTT, 8 entries of 8 B per 64 B line: 4096 pages = 16 MiB of 4 KiB
  // pages on chip).
  CacheConfig cqc;
  CacheConfig mpt;
  CacheConfig mtt{true, 128, 4, uarch::Replacement::lru};
  // Send WQEs on chip (NIC-wide, 64 B lines): filled by the WQE fetch, read
  // again when a READ response or atomic ACK arrives; a miss re-reads the
  // WQE from its send ring. Our choice: 256 WQEs, 16-way (with 4 ways the
  // windows of a few QPs already collide in a set long before 256 WQEs).
  CacheConfig wqe{true, 16, 16, uarch::Replacement::lru};
  void bind(core::Binder& b);
};

// The processing units (vp/nic/uarch/pu_array.h): per-QP work runs on PU
// qpn % count; operation costs are the nic.latency values.
struct PuConfig {
  // Our choice: vendors do not publish the number; the MP-RDMA paper only
  // assumes several, and Kalia et al. infer multiple PUs from how the
  // message rate scales with QPs (ATC'16, section 3.3).
  int64_t count = 8;
  void bind(core::Binder& b);
};

// The responder's atomics (vp/nic/uarch/atomic_lock_table.h): each atomic
// is a PCIe read-modify-write under the lock of its address's bucket.
struct AtomicsConfig {
  // Connect-IB-like: 4096 locks on address bits 0-11 (Kalia et al. ATC'16,
  // section 5.4); 1 bucket serialises every atomic like ConnectX-3.
  int64_t lock_buckets = 4096;
  int64_t lock_low_bit = 0;
  // Read-modify-write buffers: atomics under way at once (holding or
  // waiting for a lock). Default, our choice: the PCIe read tags (256), so
  // that the locks, not this number, decide how many run in parallel. Row
  // K5 sets Connect-IB's, calibrated (23: ~52 Mops, the NIC-processing
  // limit Kalia names, "the buffering and computation needed for PCIe
  // read-modify-write").
  int64_t max_outstanding = 256;
  void bind(core::Binder& b);
};

struct SramConfig {
  // "Only a few megabytes" of on-chip memory (MP-RDMA paper, section 1).
  core::Bytes size{uint64_t{2} << 20};
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
