#include "vp/host/address_space.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace mprdma::host {
namespace {
constexpr uint64_t kPage = SparseMemory::kPageBytes;
}

AddressSpace::AddressSpace(SparseMemory& mem, uint64_t va_base) : mem_(mem), next_va_(va_base) {}

uint64_t AddressSpace::alloc(uint64_t bytes) {
  const uint64_t pages = std::max<uint64_t>(1, (bytes + kPage - 1) / kPage);
  const uint64_t va = next_va_;
  buffers_[va / kPage] = mem_.alloc_pages(pages);
  // A guard page between buffers catches overruns as unmapped accesses.
  next_va_ += (pages + 1) * kPage;
  return va;
}

const uint64_t* AddressSpace::frame_of(uint64_t vpage) const {
  auto it = buffers_.upper_bound(vpage);  // the first buffer starting after it
  if (it == buffers_.begin()) return nullptr;
  --it;
  const uint64_t index = vpage - it->first;
  return index < it->second.size() ? &it->second[index] : nullptr;
}

uint64_t AddressSpace::translate(uint64_t va) const {
  const uint64_t* frame = frame_of(va / kPage);
  if (!frame) throw std::out_of_range("virtual address not mapped");
  return *frame + va % kPage;
}

bool AddressSpace::mapped(uint64_t va, uint64_t len) const {
  for (uint64_t p = va / kPage; p <= (va + std::max<uint64_t>(len, 1) - 1) / kPage; ++p)
    if (!frame_of(p)) return false;
  return true;
}

std::vector<uint64_t> AddressSpace::frames(uint64_t va, uint64_t len) const {
  std::vector<uint64_t> out;
  for (uint64_t p = va / kPage; p <= (va + std::max<uint64_t>(len, 1) - 1) / kPage; ++p) {
    const uint64_t* frame = frame_of(p);
    if (!frame) throw std::out_of_range("virtual address not mapped");
    out.push_back(*frame);
  }
  return out;
}

void AddressSpace::read(uint64_t va, void* dst, uint64_t len) const {
  uint8_t* d = static_cast<uint8_t*>(dst);
  while (len) {
    const uint64_t chunk = std::min(len, kPage - va % kPage);
    if (!mem_.read(translate(va), d, chunk)) throw std::out_of_range("frame not backed");
    d += chunk;
    va += chunk;
    len -= chunk;
  }
}

void AddressSpace::write(uint64_t va, const void* src, uint64_t len) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  while (len) {
    const uint64_t chunk = std::min(len, kPage - va % kPage);
    if (!mem_.write(translate(va), s, chunk)) throw std::out_of_range("frame not backed");
    s += chunk;
    va += chunk;
    len -= chunk;
  }
}

void AddressSpace::fill(uint64_t va, uint8_t value, uint64_t len) {
  std::vector<uint8_t> buf(std::min<uint64_t>(len, kPage), value);
  while (len) {
    const uint64_t chunk = std::min<uint64_t>(len, buf.size());
    write(va, buf.data(), chunk);
    va += chunk;
    len -= chunk;
  }
}

}  // namespace mprdma::host
