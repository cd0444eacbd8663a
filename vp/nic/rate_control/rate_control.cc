#include "vp/nic/rate_control/rate_control.h"

#include <stdexcept>

#include "vp/nic/nic_config.h"
#include "vp/nic/rate_control/dcqcn/dcqcn_rate_control.h"
#include "vp/nic/rate_control/timely/timely_rate_control.h"

namespace mprdma::nic {

namespace {

using Factory = std::unique_ptr<RateControlKind> (*)(const NicConfig&);

// The table: a new congestion control is one folder and one line here.
const std::vector<std::pair<std::string, Factory>>& table() {
  static const std::vector<std::pair<std::string, Factory>> t = {
      {"dcqcn", make_dcqcn_kind},
      {"timely", make_timely_kind},
  };
  return t;
}

}  // namespace

const std::vector<std::string>& rate_control_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& [name, make] : table()) n.push_back(name);
    return n;
  }();
  return names;
}

std::unique_ptr<RateControlKind> make_rate_control(const NicConfig& cfg) {
  if (cfg.congestion_control == NicConfig::kNoCongestionControl) return nullptr;
  for (const auto& [name, make] : table())
    if (name == cfg.congestion_control) return make(cfg);
  throw std::invalid_argument("unknown congestion control '" + cfg.congestion_control + "'");
}

}  // namespace mprdma::nic
