// The transport engines the NIC can run, in one table: every place that
// names engines (the NIC's construction, its configuration's choices and
// sections, the job configuration, the platform's metrics and gauges, the
// generated docs and `describe`) iterates it. Adding an engine is one folder
// under transport/ plus one line in builtin_engines.cc, or, for an engine
// that lives elsewhere (a test's), one EngineRegistry::add() before the
// scenario is bound.
//
// An entry is a transport (what the wire and the peer see) with one or more
// implementations of it (the golden model today; an RTL implementation and a
// lockstep of both are meant to join as further implementations of the same
// entry, not as new transports).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vp/core/plugin_registry.h"
#include "vp/core/plugin_sections.h"
#include "vp/core/sim_env.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

struct NicConfig;

// A level of an engine sampled over time (RateSampler gauges), named
// nic.<host>.transport.<name>.
struct EngineGauge {
  std::string name;
  std::string unit;
  std::string doc;
  std::function<double()> read;
};

// One implementation of a transport: how to build the NIC's engine.
struct EngineImpl {
  std::string name;  // "model": the C++ golden model
  std::string doc;
  std::function<std::unique_ptr<TransportEngine>(const NicConfig&, core::SimEnv&)> make;
};

struct EngineEntry {
  // nic.transport's value, the key of its section (nic.<name>) and, for an
  // engine of the ABI, mpr_transport_name(kind).
  std::string name;
  // enum mpr_transport, or an id in MPR_TRANSPORT_EXPERIMENTAL_FIRST..LAST
  // for an engine the driver ABI does not name (it runs as a NIC's default).
  uint8_t kind = 0;
  // Further ids the ABI gives this engine under the NIC's rate control
  // (go-back-N: MPR_TRANSPORT_DCQCN), offered when nic.congestion_control is
  // not none.
  std::vector<uint8_t> also_kinds;
  // Offered by every NIC, whatever its nic.transport (go-back-N).
  bool always_offered = false;
  std::string doc;          // what it is, for --help and the docs
  std::string section_doc;  // its section's one line
  // The engine keeps its own window: the NIC's rate control must not pace
  // its QPs (EngineTraits::own_congestion_control of the engines it builds;
  // a test checks the two agree).
  bool own_congestion_control = false;
  // Its parameters' defaults (nic.<name>); null when it has none.
  std::function<std::unique_ptr<core::PluginSection>()> make_section;
  std::vector<EngineImpl> impls;
  // The per-connection fields beyond go-back-N's context at the section's
  // defaults (model.<name>.extra_state_bytes); empty when it adds none.
  std::function<std::vector<StateField>()> state_fields;
  // Levels to sample over time from the NIC's engine of this kind.
  std::function<std::vector<EngineGauge>(const TransportEngine&)> gauges;
};

class EngineRegistry : public core::PluginRegistry<EngineEntry> {
 public:
  // The registry, with the built-in engines (builtin_engines.cc) added on
  // first use.
  static EngineRegistry& instance();

  // Adds an engine; std::invalid_argument when its name or id is taken, or
  // an ABI id whose name in <mprdma/hw.h> differs, or it has no
  // implementation.
  void add(EngineEntry entry);
  // The engine of an id (its own or one of also_kinds); null if none.
  const EngineEntry* find_kind(uint8_t kind) const;
  // The names a QP may ask for (job qp_transport): "default", every engine
  // the ABI names, and the ABI's names of also_kinds.
  std::vector<std::string> qp_transport_names() const;

  // Builds the NIC's engine `name` (implementation `impl`).
  std::unique_ptr<TransportEngine> make(const std::string& name, const std::string& impl,
                                        const NicConfig& cfg, core::SimEnv& env) const;

 private:
  EngineRegistry() = default;
};

// builtin_engines.cc: the engines of this tree, one line each.
void add_builtin_engines(EngineRegistry& r);

}  // namespace mprdma::nic
