#include "vp/nic/rate_control/rate_control.h"

#include <stdexcept>

#include "vp/nic/nic_config.h"

namespace mprdma::nic {

RateControlEntry dcqcn_entry();   // dcqcn/dcqcn_rate_control.cc
RateControlEntry timely_entry();  // timely/timely_rate_control.cc

namespace {

// The table: a new congestion control is one folder and one line here.
void add_builtin_rate_controls(RateControlRegistry& r) {
  r.add(dcqcn_entry());
  r.add(timely_entry());
}

}  // namespace

RateControlRegistry& RateControlRegistry::instance() {
  static RateControlRegistry* r = [] {
    auto* reg = new RateControlRegistry;  // never destroyed, as the engine registry
    add_builtin_rate_controls(*reg);
    return reg;
  }();
  return *r;
}

void RateControlRegistry::add(RateControlEntry e) {
  if (e.name.empty() || !e.make)
    throw std::invalid_argument("congestion control '" + e.name + "' needs a name and a factory");
  if (e.name == NicConfig::kNoCongestionControl || find(e.name))
    throw std::invalid_argument("congestion control '" + e.name + "' exists");
  entries_.push_back(std::move(e));
}

std::unique_ptr<RateControlKind> make_rate_control(const NicConfig& cfg) {
  if (cfg.congestion_control == NicConfig::kNoCongestionControl) return nullptr;
  if (const RateControlEntry* e = RateControlRegistry::instance().find(cfg.congestion_control))
    return e->make(cfg);
  throw std::invalid_argument("unknown congestion control '" + cfg.congestion_control + "'");
}

}  // namespace mprdma::nic
