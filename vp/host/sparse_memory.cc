#include "vp/host/sparse_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace mprdma::host {
namespace {

// Position within a scatter group of the i-th frame handed out: i * 7 mod 16
// visits all 16 frames and consecutive picks are 7 or 9 frames apart, so no
// two consecutive frames are adjacent (also across groups: the last pick of
// a group is frame 9, the first of the next, lower, group is 16 frames
// below its base).
constexpr uint64_t kScatterStride = 7;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

SparseMemory::SparseMemory(uint64_t base_pa, uint64_t size_bytes)
    : base_(base_pa), size_(size_bytes) {
  if (size_bytes == 0 || size_bytes % kPageBytes != 0 || base_pa % kPageBytes != 0)
    throw std::invalid_argument("SparseMemory: base " + hex(base_pa) + " and size " +
                                hex(size_bytes) + " must be non-zero multiples of 4 KiB");
  if (base_pa + size_bytes < base_pa)
    throw std::invalid_argument("SparseMemory: range wraps the 64-bit address space");
  void* p = ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            "SparseMemory: mmap of " + std::to_string(size_bytes) + " bytes");
  mem_ = static_cast<uint8_t*>(p);
  // Physical address 0 stays unallocated so that 0 can mean "no buffer".
  bottom_ = base_ == 0 ? kPageBytes : base_;
  top_ = base_ + size_;
  if (bottom_ > top_) bottom_ = top_;
}

SparseMemory::~SparseMemory() {
  if (mem_ != nullptr) ::munmap(mem_, size_);
}

bool SparseMemory::contains(uint64_t pa, uint64_t len) const {
  if (pa < base_) return false;
  const uint64_t off = pa - base_;
  if (off >= size_) return false;
  return len <= size_ - off;
}

bool SparseMemory::read(uint64_t pa, void* dst, size_t len) {
  if (!contains(pa, len)) return false;
  std::memcpy(dst, mem_ + (pa - base_), len);
  return true;
}

bool SparseMemory::write(uint64_t pa, const void* src, size_t len) {
  if (!contains(pa, len)) return false;
  std::memcpy(mem_ + (pa - base_), src, len);
  return true;
}

uint8_t* SparseMemory::ptr(uint64_t pa, size_t len) {
  if (!contains(pa, len)) return nullptr;
  return mem_ + (pa - base_);
}

uint64_t SparseMemory::alloc_contiguous(uint64_t bytes, uint64_t align) {
  if (bytes == 0) throw std::invalid_argument("SparseMemory::alloc_contiguous of zero bytes");
  if (align == 0 || (align & (align - 1)) != 0)
    throw std::invalid_argument("SparseMemory::alloc_contiguous: alignment " + hex(align) +
                                " is not a power of two");
  if (align < kPageBytes) align = kPageBytes;
  const uint64_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  const uint64_t start = (bottom_ + align - 1) & ~(align - 1);
  if (rounded < bytes || start < bottom_ || start > top_ || rounded > top_ - start)
    throw OutOfHostMemory("host memory exhausted: " + std::to_string(bytes) +
                          " contiguous bytes aligned to " + hex(align) + " requested, " +
                          std::to_string(free_bytes()) + " bytes free");
  bottom_ = start + rounded;
  return start;
}

std::vector<uint64_t> SparseMemory::alloc_pages(size_t n) {
  // Check first so that a failed call takes nothing.
  const uint64_t left_in_group = kScatterGroup - group_next_;
  if (n > left_in_group) {
    const uint64_t groups = (n - left_in_group + kScatterGroup - 1) / kScatterGroup;
    const uint64_t group_bytes = kScatterGroup * kPageBytes;
    if (groups > (top_ - bottom_) / group_bytes)
      throw OutOfHostMemory("host memory exhausted: " + std::to_string(n) +
                            " page frames requested, " + std::to_string(free_bytes()) +
                            " bytes free");
  }
  std::vector<uint64_t> frames;
  frames.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (group_next_ == kScatterGroup) {
      top_ -= kScatterGroup * kPageBytes;
      group_base_ = top_;
      group_next_ = 0;
    }
    const uint64_t slot = (group_next_ * kScatterStride) % kScatterGroup;
    frames.push_back(group_base_ + slot * kPageBytes);
    ++group_next_;
  }
  return frames;
}

}  // namespace mprdma::host
