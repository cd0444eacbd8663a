// IRN in the engine registry.
#include <mprdma/hw.h>

#include "vp/nic/nic_config.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/irn/irn_config.h"
#include "vp/nic/transport/irn/irn_engine.h"

namespace mprdma::nic {

namespace {

std::unique_ptr<TransportEngine> make_model(const NicConfig& cfg, core::SimEnv& env) {
  const IrnConfig& c = cfg.engines.get<IrnConfig>();
  IrnParams p;
  p.bdp_packets = static_cast<uint32_t>(c.bdp_packets);
  p.bdp_fc = c.bdp_fc;
  p.rto_low_cycles = cfg.cycles(c.rto_low);
  p.rto_high_cycles = cfg.cycles(c.rto_high);
  p.rto_low_threshold = static_cast<uint32_t>(c.rto_low_threshold);
  p.read_acks = c.read_acks;
  return std::make_unique<IrnEngine>(p, &env.stats, "nic." + cfg.name + ".transport.");
}

}  // namespace

EngineEntry irn_entry() {
  EngineEntry e;
  e.name = IrnConfig::kName;
  e.kind = MPR_TRANSPORT_IRN;
  e.doc = "IRN (SIGCOMM'18): selective retransmission, two RTOs and BDP-FC, made for lossy fabrics";
  e.section_doc = "IRN parameters (transport: irn).";
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<IrnConfig>>(); };
  e.impls.push_back({"model", "C++ golden model (vp/nic/transport/irn/)", make_model});
  e.state_fields = [] {
    const auto bdp = static_cast<uint32_t>(IrnConfig{}.bdp_packets);
    std::vector<StateField> f = IrnSender::extra_state(bdp);
    for (const StateField& r : IrnReceiver::extra_state(bdp)) f.push_back(r);
    return f;
  };
  return e;
}

}  // namespace mprdma::nic
