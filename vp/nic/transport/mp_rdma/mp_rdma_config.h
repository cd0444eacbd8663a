// Scenario parameters of one plug-in of the NIC (nic.mprdma).
#pragma once

#include <cstdint>
#include <string>

#include "vp/core/config.h"
#include "vp/core/units.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"

namespace mprdma::nic {

// When new data may follow in recovery mode (nic.mprdma.recovery_new_data).
enum class MpRecoveryNewData {
  after_retransmissions,  // once the retransmissions have reached `recovery`
  after_recovery,         // only once snd_una passes `recovery` (section 3.4 read strictly)
};

// MP-RDMA (NSDI'18 §3) parameters; the paper's values where it gives one
// (Δ = 32, L = 64, at most two packets per ACK, restart after 3 idle RTTs),
// our choices documented in bind().
struct MpRdmaConfig {
  // Its section: nic.mprdma (the registry names the plug-in after it).
  static constexpr const char* kName = "mprdma";
  int64_t initial_window = 64;  // IW, packets (the paper: one BDP)
  int64_t delta = 32;           // Δ: target out-of-order degree, packets
  int64_t bitmap_slots = 64;    // L: receive bitmap slots (power of two)
  bool ooo_control = true;      // prune paths whose SACK is below snd_ool
  // Loss-recovery readings the paper leaves open (transport.md):
  MpOverflowNack overflow_nack = MpOverflowNack::every_drop;
  MpRecoveryNewData recovery_new_data = MpRecoveryNewData::after_retransmissions;
  bool window_reduction = true;     // use it or lose it (ablation: off)
  double probe_probability = 0.01;  // p: probe a new virtual path, per RTT
  int64_t max_packets_per_ack = 2;  // burst control
  core::Duration base_rtt = core::Duration::from_us(16);
  int64_t idle_rtts = 3;
  double sync_alpha = 1.0;  // α of the synchronise delay
  core::Duration rto = core::Duration::from_us(1000);
  int64_t virtual_paths = 16384;  // UDP source ports 0xC000 + [0, N), power of two
  void bind(core::Binder& b);
};

}  // namespace mprdma::nic
