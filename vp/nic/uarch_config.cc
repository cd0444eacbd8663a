#include "vp/nic/uarch_config.h"

namespace mprdma::nic {

void CacheConfig::bind(core::Binder& b) {
  b.field("enabled", enabled,
          "Cache the table on chip with misses to ICM in host memory; off: every entry is on "
          "chip and free (an ideal NIC, no SRAM charged).");
  b.field("sets", sets, "Sets (a power of two; the set is the entry index's low bits).", 1, 1 << 20,
          "sets");
  if (sets & (sets - 1)) b.error("sets must be a power of two");
  b.field("ways", ways, "Lines per set.", 1, 64, "lines");
  b.choice("replacement", replacement,
           {{"lru", uarch::Replacement::lru}, {"random", uarch::Replacement::random}},
           "Victim of a miss in a full set: least recently used, or drawn from the seeded "
           "stream nic.<name>.cache.<cache>.replacement.");
}

void CachesConfig::bind(core::Binder& b) {
  b.section("qpc", qpc,
            "QP-context cache: one line per QP (struct mpr_qpc and the transport engine's "
            "per-connection state). Accessed for every packet received or sent and every "
            "doorbell; a miss stalls the receive pipeline.");
  b.section("cqc", cqc,
            "CQ-context cache: one line per CQ, accessed for every CQE; a miss delays the "
            "completion unit.");
  b.section("mpt", mpt,
            "Memory-region cache (MPT): one line per MR, accessed with the MTT cache when a "
            "WQE's SGEs are translated (requester) and when a request's RETH or atomic "
            "address is checked (responder).");
  b.section("wqe", wqe,
            "Send-WQE cache: filled by the WQE fetch (no extra read); a READ response or "
            "atomic ACK needs its WQE again (the scatter list), and a miss re-reads the WQE "
            "from the send ring and stalls the receive pipeline. WRITE and SEND never need "
            "it again.");
  b.section("mtt", mtt,
            "Page-translation cache (MTT): 8 page addresses per 64 B line, accessed with the "
            "MPT cache; a miss delays the WQE's parse or stalls the receive pipeline.");
}

void PuConfig::bind(core::Binder& b) {
  b.field("count", count,
          "Processing units. A QP's packets are built (latency.tx_packet) and processed "
          "(latency.rx_packet) on PU qpn % count, one operation at a time per PU, in order per "
          "QP; QPs on different PUs run in parallel.",
          1, 256, "PUs");
}

void AtomicsConfig::bind(core::Binder& b) {
  b.field("lock_buckets", lock_buckets,
          "Locks of the atomic unit (a power of two): an atomic holds the lock of bucket "
          "(address >> lock_low_bit) & (lock_buckets - 1) for its PCIe read-modify-write; 1 "
          "serialises all atomics (ConnectX-3), 4096 on bits 0-11 is Connect-IB-like.",
          1, 1 << 20, "locks");
  if (lock_buckets & (lock_buckets - 1)) b.error("lock_buckets must be a power of two");
  b.field("lock_low_bit", lock_low_bit, "Lowest address bit of the bucket index.", 0, 63, "bit");
  b.field("max_outstanding", max_outstanding,
          "Read-modify-write buffers of the atomic unit: atomics taken up at once, each "
          "holding one from when it is taken up (then waiting for its lock, if held) until "
          "its write is issued; further atomics wait in arrival order. With ~0.45 us per "
          "read-modify-write on PCIe 3.0 x16, N buffers allow ~N / 0.45 us atomics per "
          "second (the bottleneck's atomics.buffers).",
          1, 4096, "atomics");
}

void SramConfig::bind(core::Binder& b) {
  b.field("size", size,
          "On-chip SRAM holding the context caches (tags and data); a configuration that "
          "needs more is an error naming the region and the excess.",
          1024, uint64_t{1} << 32);
}

}  // namespace mprdma::nic
