// A process's virtual address space on a modeled host: virtually contiguous
// buffers backed by physical frames that are deliberately scattered, so that
// memory registration and the NIC's MTT translation are really exercised.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "vp/host/sparse_memory.h"

namespace mprdma::host {

class AddressSpace {
 public:
  explicit AddressSpace(SparseMemory& mem, uint64_t va_base = 0x7f0000000000ull);

  // A page-aligned buffer of `bytes`; returns its virtual address.
  uint64_t alloc(uint64_t bytes);
  // Physical frames backing [va, va + len), one per page, in order.
  std::vector<uint64_t> frames(uint64_t va, uint64_t len) const;
  uint64_t translate(uint64_t va) const;  // throws std::out_of_range if unmapped
  bool mapped(uint64_t va, uint64_t len) const;

  void read(uint64_t va, void* dst, uint64_t len) const;
  void write(uint64_t va, const void* src, uint64_t len);
  void fill(uint64_t va, uint8_t value, uint64_t len);

  SparseMemory& memory() { return mem_; }

 private:
  // The frame of virtual page `vpage`, or nullptr if it is not mapped.
  const uint64_t* frame_of(uint64_t vpage) const;

  SparseMemory& mem_;
  uint64_t next_va_;
  // First virtual page of each buffer -> the frames of its pages, in order:
  // 8 bytes per page (a node per page cost ~64, and a workload of thousands
  // of connections with 60 MB buffers each, rows I1 and M6, holds millions
  // of pages of which it touches few).
  std::map<uint64_t, std::vector<uint64_t>> buffers_;
};

}  // namespace mprdma::host
