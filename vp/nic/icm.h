// ICM: where the NIC's context tables live in host memory.
//
// The NIC keeps its QP contexts, CQ contexts, memory regions (MPT) and page
// translations (MTT) in host memory that the driver allocated and mapped
// with MAP_ICM, and caches entries on chip (context_cache.h). This block is
// the NIC's side of that arrangement: the layout of the four tables in one
// ICM address space (a table per region, each starting on a page), and the
// on-chip map from ICM pages to the host pages the driver gave.
//
// Entry sizes are powers of two. Entries up to a page never straddle two
// host pages; a larger QP-context entry (an engine with a large state, e.g.
// an MP-RDMA bitmap of thousands of slots) spans whole pages, and
// segments() lists the host pieces of any entry.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "vp/nic/nic_config.h"

namespace mprdma::nic {

enum class IcmTable { qpc, cqc, mpt, mtt, count_ };

const char* icm_table_name(IcmTable t);

class Icm {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // A QP context entry: struct mpr_qpc (128 B) and the transport engine's
  // per-connection state (TransportEngine::state_bytes()), rounded up to a
  // power of two, at least 256 B (qpc_entry_bytes()).
  static constexpr uint64_t kQpcEntryBytes = 256;
  static uint64_t qpc_entry_bytes(uint64_t engine_state_bytes);
  static constexpr uint64_t kCqcEntryBytes = 64;  // struct mpr_cqc
  static constexpr uint64_t kMptEntryBytes = 64;  // struct mpr_mpt (48 B), padded
  static constexpr uint64_t kMttEntryBytes = 8;   // one page address

  explicit Icm(const NicLimits& limits, uint64_t qpc_entry_bytes = kQpcEntryBytes);

  uint64_t entry_bytes(IcmTable t) const;
  uint64_t entries(IcmTable t) const;
  // Byte offset of the table in ICM (page aligned), and of one entry.
  uint64_t table_offset(IcmTable t) const;
  uint64_t entry_offset(IcmTable t, uint64_t index) const;
  // Pages the driver must map: every table, whole.
  uint32_t pages() const { return static_cast<uint32_t>(page_pa_.size()); }

  // Maps ICM page `page` to the host page at `pa` (4 KiB aligned). False,
  // and nothing changes, for a page beyond pages() or an unaligned address.
  bool map(uint32_t page, uint64_t pa);
  // True if every page holding entries [first, first + count) is mapped.
  bool mapped(IcmTable t, uint64_t first, uint64_t count) const;
  // Host address of an entry, if its page is mapped (and index in range).
  std::optional<uint64_t> pa(IcmTable t, uint64_t index) const;
  // The host pieces (address, bytes) of `bytes` bytes from the start of an
  // entry, one per ICM page touched; empty if any page is unmapped.
  struct Piece {
    uint64_t pa;
    uint32_t len;
  };
  std::vector<Piece> pieces(IcmTable t, uint64_t index, uint64_t bytes) const;
  uint32_t mapped_pages() const { return mapped_count_; }
  void clear();  // device reset: nothing mapped

 private:
  uint64_t qpc_entry_bytes_;
  uint64_t offset_[static_cast<int>(IcmTable::count_)] = {};
  uint64_t entries_[static_cast<int>(IcmTable::count_)] = {};
  std::vector<uint64_t> page_pa_;
  std::vector<bool> page_mapped_;
  uint32_t mapped_count_ = 0;
};

}  // namespace mprdma::nic
