// Host memory behind the root complex of a QEMU-backed host: the guest's
// RAM regions that QEMU's proxy hands over with SYNC_SYSMEM, mmap'd shared.
//
// Threads: replace() and clear() run on the proxy's I/O thread while the
// SystemC thread reads and writes. The current map is an immutable object
// behind a shared_ptr: an access takes a reference under a mutex and then
// copies without holding it, so a remap never tears an access and never
// unmaps memory under it. Maps replaced by a remap are not unmapped at once
// but parked until release_retired(), so a pointer returned by ptr() stays
// valid until the SystemC thread's next release point (QemuHost calls it
// between simulation slices; nothing keeps a ptr() across slices).
//
// Ordering: a DMA write is stored in ascending address order with 8-byte
// atomic stores where aligned, so a guest polling the last word of a
// record (an owner bit) never sees it before the bytes below it.
//
// An access that touches any byte outside every region fails as a whole
// (read: false, nothing copied; write: false, nothing stored) and is
// counted; the bridge never touches memory the guest does not own.
//
// Validation: SYNC_SYSMEM comes from another process, so every region is
// checked before it is mapped, and a region failing a check is left out
// with an error text naming it (the rest of the map still applies):
//   * size > 0, offset >= 0;
//   * gpa + size does not pass 2^64 (a region never wraps, so the map's
//     lookups can work on offsets into a region without overflow);
//   * offset + size, and size plus the offset's skew within its page (what
//     is mmap'd), fit off_t and size_t;
//   * the fd is a regular file (fstat) and [offset, offset + size) lies
//     inside it. Mapping past the end of a file succeeds, but the first
//     access there raises SIGBUS and kills the simulator. Guest RAM is a
//     memfd, or a file on tmpfs or hugetlbfs: all regular files with a
//     size. Anything else (a character device such as /dev/dax, a pipe) is
//     refused: fstat gives no size to check against, so the bridge could
//     not promise that every byte it accepts is backed.
// A file shrunk after the check (QEMU never does; it does not seal its
// memfds either) would still fault: that is the peer's own RAM breaking.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vp/pcie/host_memory_if.h"
#include "vp/qemu/qemu_fd.h"

namespace mprdma::pcie {

class GuestMemory : public HostMemoryIf {
 public:
  // One SYNC_SYSMEM region: guest-physical [gpa, gpa + size) at `offset`
  // inside `fd`.
  struct Region {
    uint64_t gpa = 0;
    uint64_t size = 0;
    int64_t offset = 0;
    UniqueFd fd;
  };
  // What a region became (for logs and tests).
  struct RegionInfo {
    uint64_t gpa, size;
  };

  GuestMemory() = default;
  ~GuestMemory() override;
  GuestMemory(const GuestMemory&) = delete;
  GuestMemory& operator=(const GuestMemory&) = delete;

  // Replaces the whole map with `regions` (any thread). Each fd is mapped
  // shared read/write and closed (the mapping keeps the memory alive).
  // Returns an error text per region that fails validation (see the file
  // comment) or could not be mapped; those regions are left out. Of
  // overlapping regions, the one with the lower gpa is kept (on equal gpas
  // the earlier in `regions`) and the other is left out likewise.
  std::vector<std::string> replace(std::vector<Region> regions);
  // No region is backed any more (QEMU is gone).
  void clear();
  // Unmaps maps retired by replace()/clear(). Call only from the thread
  // that uses ptr(), when none of its pointers are in use.
  void release_retired();

  bool read(uint64_t pa, void* dst, size_t len) override;
  bool write(uint64_t pa, const void* src, size_t len) override;
  uint8_t* ptr(uint64_t pa, size_t len) override;
  bool backed(uint64_t pa, uint64_t len) const override;

  std::vector<RegionInfo> regions() const;
  // Total bytes mapped now.
  uint64_t mapped_bytes() const;
  // Number of replace() calls so far.
  uint64_t generation() const { return generation_.load(); }
  // Accesses refused because some byte was not backed.
  uint64_t refused_reads() const { return refused_reads_.load(); }
  uint64_t refused_writes() const { return refused_writes_.load(); }

 private:
  struct Mapping {
    uint64_t gpa, size;
    uint8_t* host;  // address of gpa in this process
    void* map_addr;
    size_t map_len;
  };
  struct Map {
    // Sorted by gpa, disjoint, none wrapping past 2^64 (replace() checks).
    std::vector<Mapping> regions;
    ~Map();
    // The region holding pa, or nullptr.
    const Mapping* find(uint64_t pa) const;
    // True if [pa, pa + len) is wholly backed.
    bool covers(uint64_t pa, size_t len) const;
  };
  std::shared_ptr<const Map> snapshot() const;
  void install(std::shared_ptr<const Map> map);

  mutable std::mutex mu_;
  std::shared_ptr<const Map> map_;
  std::vector<std::shared_ptr<const Map>> retired_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> refused_reads_{0}, refused_writes_{0};
};

}  // namespace mprdma::pcie
