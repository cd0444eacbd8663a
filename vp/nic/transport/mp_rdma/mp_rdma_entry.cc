// MP-RDMA in the engine registry.
#include <mprdma/hw.h>

#include <algorithm>
#include <optional>

#include "vp/nic/nic_config.h"
#include "vp/nic/rtl/mp_rdma_rx_nic.h"
#include "vp/nic/rtl/mp_rdma_tx_nic.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_config.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"

namespace mprdma::nic {

namespace {

// `rx`: the senders' and receivers' implementation (none: the golden
// models).
std::unique_ptr<TransportEngine> make_engine(const NicConfig& cfg, core::SimEnv& env,
                                             std::optional<rtl::RxImplMode> rx) {
  const MpRdmaConfig& m = cfg.engines.get<MpRdmaConfig>();
  auto cycles = [&cfg](const core::Duration& t) { return cfg.cycles(t); };
  MpRdmaEngineParams p;
  p.sender.iw = static_cast<uint32_t>(m.initial_window);
  p.sender.delta = static_cast<uint32_t>(m.delta);
  p.sender.ooo_control = m.ooo_control;
  p.sender.probe_ppm = static_cast<uint32_t>(m.probe_probability * 1e6 + 0.5);
  p.sender.max_per_ack = static_cast<uint32_t>(m.max_packets_per_ack);
  p.sender.rtt_cycles = cycles(m.base_rtt);
  p.sender.idle_rtts = static_cast<uint32_t>(m.idle_rtts);
  p.sender.sync_alpha_milli = static_cast<uint32_t>(m.sync_alpha * 1000 + 0.5);
  p.sender.rto_cycles = cycles(m.rto);
  p.sender.vp_base = 0xC000;
  p.sender.vp_mask = static_cast<uint16_t>(m.virtual_paths - 1);
  p.bitmap_slots = static_cast<uint32_t>(m.bitmap_slots);
  p.overflow_nack = m.overflow_nack;
  p.sender.strict_recovery = m.recovery_new_data == MpRecoveryNewData::after_recovery;
  p.sender.window_reduction = m.window_reduction;
  // The NIC's path LFSR is seeded from the scenario's stream of this name.
  p.rng_seed =
      static_cast<uint32_t>(env.random.stream("nic." + cfg.name + ".transport.paths").next_u64());
  std::unique_ptr<MpRxImpl> rx_impl;
  std::unique_ptr<MpTxImpl> tx_impl;
  if (rx) {
    rx_impl = rtl::make_rx_impl(*rx, MpRdmaConfig::kName, p.bitmap_slots, p.overflow_nack, cfg.name,
                                env, cfg.period_ps());
    rtl::TxTiming timing;
    timing.charged = cfg.rtl_timing == "charged";
    timing.ack_stage_cycles = static_cast<uint64_t>(std::max<int64_t>(cfg.latency.ack_process, 0));
    tx_impl = rtl::make_tx_impl(*rx, p.sender, p.rng_seed, cfg.name, env, timing, cfg.period_ps());
  }
  return std::make_unique<MpRdmaEngine>(p, &env.stats, "nic." + cfg.name + ".transport.",
                                        std::move(rx_impl), std::move(tx_impl));
}

}  // namespace

EngineEntry mp_rdma_entry() {
  EngineEntry e;
  e.name = MpRdmaConfig::kName;
  e.kind = MPR_TRANSPORT_MP_RDMA;
  e.doc =
      "MP-RDMA (NSDI'18): multi-path ACK clocking over virtual paths with its own "
      "congestion window; carries READ and atomics as data both ways (their responses in the "
      "responder's own stream)";
  e.section_doc = "MP-RDMA parameters (transport: mprdma).";
  e.own_congestion_control = true;
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<MpRdmaConfig>>(); };
  e.impls.push_back(
      {"model", "C++ golden model (vp/nic/transport/mp_rdma/)",
       [](const NicConfig& c, core::SimEnv& env) { return make_engine(c, env, std::nullopt); }});
  e.impls.push_back({"rtl", "senders and receivers on the Verilated RTL engines (vp/nic/rtl/)",
                     [](const NicConfig& c, core::SimEnv& env) {
                       return make_engine(c, env, rtl::RxImplMode::rtl);
                     }});
  e.impls.push_back({"lockstep",
                     "rtl, with every sender and receiver decision also made by the golden "
                     "models and compared; the first divergence stops the run with a report",
                     [](const NicConfig& c, core::SimEnv& env) {
                       return make_engine(c, env, rtl::RxImplMode::lockstep);
                     }});
  e.state_fields = [] {
    const MpRdmaConfig defaults;
    std::vector<StateField> f = MpSender::extra_state();
    for (const StateField& r :
         MpReceiver::extra_state(static_cast<uint32_t>(defaults.bitmap_slots)))
      f.push_back(r);
    return f;
  };
  // Windows over time: a window collapsing, or connections stuck in
  // recovery, show without a packet trace.
  e.gauges = [](const TransportEngine& engine) {
    std::vector<EngineGauge> g;
    const auto* mp = dynamic_cast<const MpRdmaEngine*>(&engine);
    if (!mp) return g;
    g.push_back({"cwnd", "packets", "Congestion windows of the NIC's MP-RDMA connections, summed",
                 [mp] { return mp->cwnd_sum(); }});
    g.push_back({"recovering", "connections", "The NIC's MP-RDMA connections in recovery mode",
                 [mp] { return double(mp->recovering()); }});
    return g;
  };
  return e;
}

}  // namespace mprdma::nic
