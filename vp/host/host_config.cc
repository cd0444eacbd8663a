#include "vp/host/host_config.h"

namespace mprdma::host {

void HostConfig::bind(core::Binder& b) {
  b.field("memory", memory,
          "Physical memory of the host; sparse, so only what the software touches costs RAM.",
          uint64_t{64} << 20, uint64_t{1} << 46);
  b.field("post_overhead", post_overhead,
          "CPU time of one post_send/post_recv before its doorbell store.");
  b.field("poll_overhead", poll_overhead, "CPU time of one CQ poll that returns completions.");
  b.field("write_combining", write_combining,
          "WQE by MMIO: true, each 64-byte line of the WQE is one write-combined TLP; false, "
          "every 8-byte store is its own TLP, as from a QEMU guest (the NIC assembles the "
          "window either way).");
}

}  // namespace mprdma::host
