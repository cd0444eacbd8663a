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
  const std::vector<uint64_t> f = mem_.alloc_pages(pages);
  for (uint64_t i = 0; i < pages; ++i) page_table_[va / kPage + i] = f[i];
  // A guard page between buffers catches overruns as unmapped accesses.
  next_va_ += (pages + 1) * kPage;
  return va;
}

uint64_t AddressSpace::translate(uint64_t va) const {
  auto it = page_table_.find(va / kPage);
  if (it == page_table_.end()) throw std::out_of_range("virtual address not mapped");
  return it->second + va % kPage;
}

bool AddressSpace::mapped(uint64_t va, uint64_t len) const {
  for (uint64_t p = va / kPage; p <= (va + std::max<uint64_t>(len, 1) - 1) / kPage; ++p)
    if (!page_table_.count(p)) return false;
  return true;
}

std::vector<uint64_t> AddressSpace::frames(uint64_t va, uint64_t len) const {
  std::vector<uint64_t> out;
  for (uint64_t p = va / kPage; p <= (va + std::max<uint64_t>(len, 1) - 1) / kPage; ++p) {
    auto it = page_table_.find(p);
    if (it == page_table_.end()) throw std::out_of_range("virtual address not mapped");
    out.push_back(it->second);
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
