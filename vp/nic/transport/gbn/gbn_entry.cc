// Go-back-N in the engine registry.
#include <mprdma/hw.h>

#include "vp/nic/nic_config.h"
#include "vp/nic/rtl/gbn_qp_nic.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/gbn/gbn_config.h"
#include "vp/nic/transport/gbn/gbn_engine.h"

namespace mprdma::nic {

EngineEntry gbn_entry() {
  EngineEntry e;
  e.name = GbnConfig::kName;
  e.kind = MPR_TRANSPORT_GBN;
  // The ABI's "dcqcn": go-back-N QPs the NIC's rate control paces (the
  // name predates the rate-control seam; any nic.congestion_control does).
  e.also_kinds = {MPR_TRANSPORT_DCQCN};
  e.always_offered = true;
  e.doc = "RoCEv2 go-back-N, the commodity baseline (always offered)";
  e.section_doc = "Go-back-N parameters (transport gbn, the RoCEv2 baseline).";
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<GbnConfig>>(); };
  e.impls.push_back({"model", "C++ golden model (vp/nic/transport/gbn/)",
                     [](const NicConfig& cfg, core::SimEnv&) -> std::unique_ptr<TransportEngine> {
                       return std::make_unique<GbnEngine>(
                           cfg.cycles(cfg.engines.get<GbnConfig>().go_back_delay));
                     }});
  e.impls.push_back({"rtl", "requester and responder on the Verilated RTL engine (vp/nic/rtl/)",
                     [](const NicConfig& cfg, core::SimEnv& env) {
                       return rtl::make_gbn_engine(
                           rtl::RxImplMode::rtl,
                           cfg.cycles(cfg.engines.get<GbnConfig>().go_back_delay), cfg.name, env,
                           cfg.period_ps());
                     }});
  e.impls.push_back({"lockstep",
                     "rtl, with every decision also made by the golden model and compared; the "
                     "first divergence stops the run with a report",
                     [](const NicConfig& cfg, core::SimEnv& env) {
                       return rtl::make_gbn_engine(
                           rtl::RxImplMode::lockstep,
                           cfg.cycles(cfg.engines.get<GbnConfig>().go_back_delay), cfg.name, env,
                           cfg.period_ps());
                     }});
  return e;
}

}  // namespace mprdma::nic
