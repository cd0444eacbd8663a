// Parameters of one NIC instance: clock, port, table sizes and the cycle cost
// of every pipeline stage. Defaults are the values below; every field is
// documented in bind() and in docs/scenario-reference.md (generated).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/plugin_sections.h"
#include "vp/core/units.h"
#include "vp/nic/uarch_config.h"

namespace mprdma::nic {

// Bits that number `n` things (0 .. n - 1); 0 for n <= 1.
constexpr uint32_t bits_for(uint64_t n) {
  uint32_t b = 0;
  while (b < 64 && (uint64_t{1} << b) < n) ++b;
  return b;
}

// Cycle costs of the pipeline stages, in NIC core cycles.
struct NicLatencies {
  int64_t doorbell = 4;     // decode a doorbell and schedule the QP
  int64_t wqe_parse = 8;    // parse and validate one fetched WQE
  int64_t tx_schedule = 1;  // the TX scheduler picks the next QP
  int64_t tx_packet = 4;    // build one outgoing packet, on the QP's PU
  int64_t rx_parse = 2;     // the receive stage parses one frame's headers
  int64_t rx_packet = 8;    // look up and check one incoming packet, on the QP's PU
  int64_t ack_process = 4;  // process one ACK/NAK/response in the requester
  int64_t cqe = 4;          // build one CQE or EQE
  int64_t command = 500;    // firmware time per admin command, before its DMA
  int64_t reset = 1000;     // device reset until STATUS.READY
  void bind(core::Binder& b);
};

// Sizes of the NIC's object tables (what QUERY_DEVICE reports).
struct NicLimits {
  int64_t max_qp = 4096;
  int64_t max_cq = 4096;
  // Shared receive queues. Their contexts are on chip (no ICM), so each
  // costs SRAM (nic.sram: srq.contexts) whether or not it is in use.
  int64_t max_srq = 64;
  int64_t max_eq = 32;
  int64_t max_pd = 4096;
  int64_t max_mr = 65536;
  int64_t max_mtt = 1 << 22;  // page entries over all MRs
  int64_t max_qp_wr = 16384;  // WQEs per queue (16-bit indices)
  int64_t max_sge = 16;
  int64_t max_inline = 512;  // bytes
  int64_t max_cqe = 1 << 22;
  int64_t max_rd_atomic = 16;  // outstanding READ/atomics per QP
  int64_t max_gids = 16;
  int64_t num_uar_pages = 1024;
  void bind(core::Binder& b);
};

// How the NIC names the objects it hands to software: memory keys and QP
// numbers a peer must present. Random bits make them hard to guess for a
// peer that was never told them (the scenario's seed stream
// nic.<name>.handles, so runs stay reproducible).
enum class QpnPolicy { lowest_free, random };

struct HandlesConfig {
  // Bits of every lkey/rkey drawn at random at each registration, below the
  // MPT index (MPR_KEY_INDEX): a key kept after DEREG_MR never matches the
  // entry's next region. 0: the key is the index (a stale key then does).
  int64_t key_random_bits = 8;
  // lowest_free: QP numbers 2, 3, ... (readable traces; the default, see
  // nic.md); random: the QP's table index in the low bits, the rest of the
  // 24 drawn at random.
  QpnPolicy qpn = QpnPolicy::lowest_free;
  void bind(core::Binder& b);
};

// The registries' sections at their defaults (nic_config.cc).
core::PluginSections default_rate_control_sections();
core::PluginSections default_engine_sections();
std::string default_transport();

struct NicConfig {
  core::Frequency clock{250e6};
  core::Bytes mtu{1024};  // largest path MTU of the port
  // Send every RoCEv2 packet ECN-capable (ECT(0)), as a NIC with RoCE ECN
  // enabled does, so switches mark CE instead of ignoring it.
  bool ecn = true;
  // Engine of QPs that do not choose: a name in the engine registry
  // (vp/nic/transport/engine_registry.h); by default its always-offered one.
  std::string transport = default_transport();
  // How `transport` runs: one of its implementations in the registry
  // (model: the C++ golden model; rtl, lockstep: on the Verilated RTL,
  // where the engine has one). The other offered engines run as models.
  std::string transport_impl = "model";
  // With transport_impl rtl or lockstep: whether the NIC charges the cycles
  // the RTL engines take beyond the stage that issues each operation
  // ("charged": their outputs appear when the RTL produced them), or runs
  // on the golden model's timing ("model": every result is the model's, so
  // that a run compares value for value; vp/nic/rtl/rtl.md).
  std::string rtl_timing = "charged";
  // Further engines a QP may choose at CREATE_QP (mpr_cmd_create_qp.
  // transport). The always-offered engine and `transport` are offered too;
  // every QPC line holds the largest offered engine's state.
  std::vector<std::string> qp_transports;
  // True when a QP may run engine `name`.
  bool offers(const std::string& name) const;
  // enum mpr_transport of a registered engine (std::invalid_argument if none).
  static uint8_t transport_kind(const std::string& name);
  // The id a QP asks for by an ABI name (mpr_transport_name(), "default"
  // included); std::invalid_argument for another name.
  static uint8_t qp_transport_kind(const std::string& name);
  // Bit k set when a QP may choose id k: the offered engines, and the ids
  // they run under rate control (MPR_TRANSPORT_DCQCN) when the NIC has one.
  uint32_t transport_kinds() const;
  // Per-QP rate control beside the transport engine (vp/nic/rate_control/):
  // none, or a congestion control of RateControlRegistry.
  static constexpr const char* kNoCongestionControl = "none";
  std::string congestion_control = kNoCongestionControl;
  // Parameters of every registered congestion control (nic.<name>) and
  // transport engine (nic.<name>), at their defaults unless a scenario sets
  // them; get<DcqcnConfig>() and so on.
  core::PluginSections rate_controls = default_rate_control_sections();
  core::PluginSections engines = default_engine_sections();
  int64_t tx_pipeline_depth = 16;     // packets between scheduler and wire
  int64_t wqe_fetch_batch = 4;        // WQEs per DMA read of a send queue
  int64_t max_outstanding_wqes = 64;  // fetched, unacknowledged WQEs per QP
  int64_t rq_prefetch = 2;            // RECV WQEs fetched ahead per QP
  int64_t ack_coalesce = 8;           // responder ACKs every N packets...
  NicLatencies latency;
  NicLimits limits;
  HandlesConfig handles;
  PuConfig pu;            // processing units
  AtomicsConfig atomics;  // the responder's atomic unit
  SramConfig sram;        // on-chip memory budget
  CachesConfig cache;     // context caches over ICM

  // Set by the platform builder, not by scenarios.
  uint64_t bar0_base = 0xE0000000ull;
  uint64_t bar2_base = 0xE1000000ull;
  std::string name = "nic0";  // instance name: log channels and stats use it
  std::array<uint8_t, 6> mac{{0x02, 0, 0, 0, 0, 1}};
  uint32_t ip = 0x0A000001;          // 10.0.0.1
  uint32_t port_speed_mbps = 40000;  // the attached link's rate

  void bind(core::Binder& b);
  uint64_t period_ps() const { return clock.period_ps(); }
  // A configured duration in NIC cycles, rounded to the nearest, at least
  // `at_least` (timers of 0 cycles would fire at once).
  uint64_t cycles(const core::Duration& t, uint64_t at_least = 1) const {
    const uint64_t p = period_ps();
    const uint64_t c = (t.ps + p / 2) / p;
    return c < at_least ? at_least : c;
  }
};

}  // namespace mprdma::nic
