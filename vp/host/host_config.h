// Parameters of a modeled host: memory size and the CPU costs of the
// software on it (the driver and the applications).
#pragma once

#include "vp/core/config.h"
#include "vp/core/units.h"

namespace mprdma::host {

struct HostConfig {
  core::Bytes memory{uint64_t{64} << 30};
  // CPU time to build one WQE and reach the doorbell store (the verbs call
  // of a provider on a modern core is 30-60 ns).
  core::Duration post_overhead = core::Duration::from_ns(40);
  // CPU time of one successful CQ poll that returns completions.
  core::Duration poll_overhead = core::Duration::from_ns(20);
  // WQE by MMIO: true, the CPU's write-combining buffers send each 64-byte
  // line as one TLP; false, every 8-byte store is its own TLP (a CPU or
  // mapping without write combining, or a QEMU guest, whose stores QEMU
  // forwards one at a time).
  bool write_combining = true;
  // Base physical address of RAM.
  uint64_t memory_base = uint64_t{1} << 32;
  void bind(core::Binder& b);
};

}  // namespace mprdma::host
