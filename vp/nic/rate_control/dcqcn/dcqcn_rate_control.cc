#include "vp/nic/rate_control/dcqcn/dcqcn_rate_control.h"

#include <sstream>

#include "vp/nic/nic_config.h"
#include "vp/nic/rate_control/dcqcn/dcqcn.h"
#include "vp/nic/rate_control/dcqcn/dcqcn_config.h"

namespace mprdma::nic {

namespace {

class DcqcnRateControl final : public RateControl {
 public:
  explicit DcqcnRateControl(const DcqcnRpParams& p) : rp_(p) {}
  void on_sent(uint64_t wire_bytes, uint64_t now) override { rp_.on_sent(wire_bytes, now); }
  void on_cnp(uint64_t now) override { rp_.on_cnp(now); }
  uint64_t tx_allowed_at() const override { return rp_.tx_allowed_at(); }
  double rate_bps() const override { return rp_.rate_bps(); }
  uint64_t cuts() const override { return rp_.cuts(); }
  std::string state() const override {
    std::ostringstream s;
    s << "rate " << rp_.rate_bps() / 1e9 << " Gb/s, target " << rp_.target_bps() / 1e9
      << " Gb/s, alpha " << rp_.alpha();
    return s.str();
  }

 private:
  DcqcnRp rp_;
};

class DcqcnKind final : public RateControlKind {
 public:
  explicit DcqcnKind(const NicConfig& cfg) {
    const DcqcnConfig& d = cfg.rate_controls.get<DcqcnConfig>();
    auto cycles = [&cfg](const core::Duration& t) { return cfg.cycles(t); };
    p_.cycles_per_second = 1e12 / static_cast<double>(cfg.period_ps());
    p_.line_rate_bps = static_cast<double>(cfg.port_speed_mbps) * 1e6;
    p_.min_rate_bps = d.min_rate.bps;
    p_.g = d.g;
    p_.initial_alpha = d.initial_alpha;
    p_.alpha_interval = cycles(d.alpha_update_interval);
    p_.rate_timer = cycles(d.rate_increase_timer);
    p_.byte_counter = d.byte_counter.n;
    p_.fast_recovery = static_cast<uint32_t>(d.fast_recovery_stages);
    p_.rate_ai_bps = d.rate_ai.bps;
    p_.rate_hai_bps = d.rate_hai.bps;
    cnp_interval_ = cfg.cycles(d.min_cnp_interval, 0);
  }
  const char* name() const override { return DcqcnConfig::kName; }
  std::unique_ptr<RateControl> make() const override {
    return std::make_unique<DcqcnRateControl>(p_);
  }
  uint64_t cnp_interval_cycles() const override { return cnp_interval_; }

 private:
  DcqcnRpParams p_;
  uint64_t cnp_interval_ = 0;
};

}  // namespace

RateControlEntry dcqcn_entry() {
  RateControlEntry e;
  e.name = DcqcnConfig::kName;
  e.doc =
      "the receiver answers CE-marked requests with CNPs, the sender paces each QP at its DCQCN "
      "rate (Zhu et al., SIGCOMM'15)";
  e.section_doc = "DCQCN parameters (used with congestion_control: dcqcn).";
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<DcqcnConfig>>(); };
  e.make = [](const NicConfig& cfg) -> std::unique_ptr<RateControlKind> {
    return std::make_unique<DcqcnKind>(cfg);
  };
  return e;
}

}  // namespace mprdma::nic
