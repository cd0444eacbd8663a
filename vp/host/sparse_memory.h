// The modelled host's physical memory: one flat range of physical addresses
// backed by a single lazily-populated anonymous mapping.
//
// The mapping is MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, so a 64 GiB
// host costs address space only: a page takes RAM the first time it is
// written (reads of untouched pages see the shared zero page). Everything in
// [base_pa, base_pa + size) is backed; nothing outside is.
//
// A simple page-frame allocator hands out memory to the host model:
//   alloc_contiguous  physically contiguous, aligned blocks (what
//                     dma_alloc_coherent gives a driver: rings, doorbell
//                     records), carved upwards from the bottom;
//   alloc_pages       n separate 4 KiB frames (what pinning user memory for
//                     a memory region gives), carved downwards from the top
//                     and deliberately scattered: consecutive frames are
//                     never physically adjacent, so a NIC that skipped MTT
//                     translation would read the wrong bytes.
// Both are bump allocators: memory is never freed (the host model allocates
// at set-up and keeps it), which keeps the allocator trivial and
// deterministic. Exhaustion throws OutOfHostMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "vp/pcie/host_memory_if.h"

namespace mprdma::host {

// Thrown when an allocation does not fit; what() says what was asked for
// and what is left.
class OutOfHostMemory : public std::bad_alloc {
 public:
  explicit OutOfHostMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

class SparseMemory : public pcie::HostMemoryIf {
 public:
  static constexpr uint64_t kPageBytes = 4096;
  // Frames of alloc_pages are handed out in groups of this many, in a
  // scrambled order within the group.
  static constexpr uint64_t kScatterGroup = 16;

  // base_pa and size_bytes must be multiples of 4 KiB, size > 0, and the
  // range must not wrap. Throws std::invalid_argument for bad arguments and
  // std::system_error if the mapping fails.
  SparseMemory(uint64_t base_pa, uint64_t size_bytes);
  ~SparseMemory() override;
  SparseMemory(const SparseMemory&) = delete;
  SparseMemory& operator=(const SparseMemory&) = delete;

  bool read(uint64_t pa, void* dst, size_t len) override;
  bool write(uint64_t pa, const void* src, size_t len) override;
  uint8_t* ptr(uint64_t pa, size_t len) override;
  bool backed(uint64_t pa, uint64_t len) const override { return contains(pa, len); }

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  // True if [pa, pa + len) lies inside the backed range (len 0: pa inside).
  bool contains(uint64_t pa, uint64_t len) const;

  // A physically contiguous block of `bytes` (rounded up to whole pages),
  // aligned to `align` (a power of two, at least 4 KiB is applied). Never
  // returns physical address 0, so 0 can mean "none" to drivers.
  uint64_t alloc_contiguous(uint64_t bytes, uint64_t align = kPageBytes);
  // n distinct 4 KiB frames, none adjacent to the frame returned before it.
  std::vector<uint64_t> alloc_pages(size_t n);
  // Bytes still available to the allocators (pages already reserved in a
  // partly used scatter group are not counted).
  uint64_t free_bytes() const { return top_ - bottom_; }

 private:
  uint64_t base_;
  uint64_t size_;
  uint8_t* mem_ = nullptr;
  // Contiguous allocations grow up from bottom_; scattered frames are taken
  // in groups from top_ downwards. Both are physical addresses.
  uint64_t bottom_;
  uint64_t top_;
  uint64_t group_base_ = 0;              // physical address of the current scatter group
  uint64_t group_next_ = kScatterGroup;  // next index into the group's order
};

}  // namespace mprdma::host
