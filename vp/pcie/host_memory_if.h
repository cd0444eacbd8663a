// The root complex's view of host physical memory.
//
// The PCIe model only needs byte access by physical address; who owns the
// memory (a SparseMemory, a QEMU RAM block behind the bridge, a test buffer)
// is the platform's business. Keeping this interface free of SystemC lets
// host-side code implement it without depending on the simulator.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mprdma::pcie {

class HostMemoryIf {
 public:
  virtual ~HostMemoryIf() = default;
  // Copies `len` bytes at physical address `pa`. Returns false, and copies
  // nothing, if any byte of the range is not backed.
  virtual bool read(uint64_t pa, void* dst, size_t len) = 0;
  // Stores `len` bytes at `pa`. Returns false, and stores nothing, if any
  // byte of the range is not backed.
  virtual bool write(uint64_t pa, const void* src, size_t len) = 0;
  // A direct pointer to the range if it is wholly backed and contiguous in
  // the simulator's address space, else nullptr. Callers use it for speed
  // only and must fall back to read()/write() on nullptr.
  virtual uint8_t* ptr(uint64_t pa, size_t len) = 0;
  // True if every byte of [pa, pa + len) is backed (len 0: pa is), without
  // accessing it.
  virtual bool backed(uint64_t pa, uint64_t len) const = 0;
};

}  // namespace mprdma::pcie
