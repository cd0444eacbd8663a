#include "vp/nic/transport/engine_registry.h"

#include <mprdma/hw.h>

#include <stdexcept>

namespace mprdma::nic {

EngineRegistry& EngineRegistry::instance() {
  static EngineRegistry* r = [] {
    auto* reg = new EngineRegistry;  // never destroyed: engines outlive static teardown
    add_builtin_engines(*reg);
    return reg;
  }();
  return *r;
}

namespace {

bool experimental(uint8_t kind) {
  return kind >= MPR_TRANSPORT_EXPERIMENTAL_FIRST && kind <= MPR_TRANSPORT_EXPERIMENTAL_LAST;
}

// An ABI id must carry the ABI's name; an experimental one, none of the ABI.
void check_kind(const std::string& engine, uint8_t kind, const char* abi_name) {
  if (experimental(kind)) return;
  if (!abi_name || kind == MPR_TRANSPORT_DEFAULT)
    throw std::invalid_argument("transport engine '" + engine + "': id " + std::to_string(kind) +
                                " is neither an engine of enum mpr_transport nor experimental");
}

}  // namespace

void EngineRegistry::add(EngineEntry e) {
  if (e.name.empty() || e.impls.empty())
    throw std::invalid_argument("transport engine '" + e.name +
                                "': an engine needs a name and an implementation");
  if (find(e.name)) throw std::invalid_argument("transport engine '" + e.name + "' exists");
  const char* abi = mpr_transport_name(e.kind);
  check_kind(e.name, e.kind, abi);
  if (abi && e.name != abi)
    throw std::invalid_argument("transport engine '" + e.name + "': id " + std::to_string(e.kind) +
                                " is '" + abi + "' in <mprdma/hw.h>");
  for (uint8_t k : e.also_kinds) check_kind(e.name, k, mpr_transport_name(k));
  std::vector<uint8_t> kinds = e.also_kinds;
  kinds.push_back(e.kind);
  for (uint8_t k : kinds)
    if (const EngineEntry* other = find_kind(k))
      throw std::invalid_argument("transport engine '" + e.name + "': id " + std::to_string(k) +
                                  " is taken by '" + other->name + "'");
  entries_.push_back(std::move(e));
}

const EngineEntry* EngineRegistry::find_kind(uint8_t kind) const {
  for (const EngineEntry& e : entries_) {
    if (e.kind == kind) return &e;
    for (uint8_t k : e.also_kinds)
      if (k == kind) return &e;
  }
  return nullptr;
}

std::vector<std::string> EngineRegistry::qp_transport_names() const {
  std::vector<std::string> n{mpr_transport_name(MPR_TRANSPORT_DEFAULT)};
  // In the ABI's order, so the list reads as enum mpr_transport does.
  for (unsigned k = MPR_TRANSPORT_DEFAULT + 1; k < MPR_TRANSPORT_EXPERIMENTAL_FIRST; ++k)
    if (mpr_transport_name(k) && find_kind(static_cast<uint8_t>(k)))
      n.emplace_back(mpr_transport_name(k));
  return n;
}

std::unique_ptr<TransportEngine> EngineRegistry::make(const std::string& name,
                                                      const std::string& impl, const NicConfig& cfg,
                                                      core::SimEnv& env) const {
  const EngineEntry* e = find(name);
  if (!e) throw std::invalid_argument("unknown transport engine '" + name + "'");
  for (const EngineImpl& i : e->impls)
    if (i.name == impl) return i.make(cfg, env);
  throw std::invalid_argument("transport engine '" + name + "' has no implementation '" + impl +
                              "'");
}

}  // namespace mprdma::nic
