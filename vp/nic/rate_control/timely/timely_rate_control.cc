#include "vp/nic/rate_control/timely/timely_rate_control.h"

#include <sstream>

#include "vp/nic/nic_config.h"
#include "vp/nic/rate_control/timely/timely.h"
#include "vp/nic/rate_control/timely/timely_config.h"

namespace mprdma::nic {

namespace {

class TimelyRateControl final : public RateControl {
 public:
  explicit TimelyRateControl(const TimelyParams& p) : rp_(p) {}
  void on_sent(uint64_t wire_bytes, uint64_t now) override { rp_.on_sent(wire_bytes, now); }
  void on_rtt(uint64_t rtt_cycles, uint64_t now) override { rp_.on_rtt(rtt_cycles, now); }
  uint64_t tx_allowed_at() const override { return rp_.tx_allowed_at(); }
  double rate_bps() const override { return rp_.rate_bps(); }
  uint64_t cuts() const override { return rp_.cuts(); }
  std::string state() const override {
    std::ostringstream s;
    s << "rate " << rp_.rate_bps() / 1e9 << " Gb/s, gradient " << rp_.gradient()
      << (rp_.hai() ? ", HAI" : "");
    return s.str();
  }

 private:
  TimelyRp rp_;
};

class TimelyKind final : public RateControlKind {
 public:
  explicit TimelyKind(const NicConfig& cfg) {
    const TimelyConfig& t = cfg.rate_controls.get<TimelyConfig>();
    p_.cycles_per_second = 1e12 / static_cast<double>(cfg.period_ps());
    p_.line_rate_bps = static_cast<double>(cfg.port_speed_mbps) * 1e6;
    p_.min_rate_bps = t.min_rate.bps;
    p_.ewma_alpha = t.ewma_alpha;
    p_.beta = t.beta;
    p_.add_step_bps = t.add_step.bps;
    p_.t_low_cycles = cfg.cycles(t.t_low, 0);
    p_.t_high_cycles = cfg.cycles(t.t_high);
    p_.min_rtt_cycles = cfg.cycles(t.min_rtt);
    p_.hai_threshold = static_cast<uint32_t>(t.hai_threshold);
    p_.hai_multiplier = static_cast<uint32_t>(t.hai_multiplier);
  }
  const char* name() const override { return TimelyConfig::kName; }
  std::unique_ptr<RateControl> make() const override {
    return std::make_unique<TimelyRateControl>(p_);
  }
  bool rtt_samples() const override { return true; }

 private:
  TimelyParams p_;
};

}  // namespace

RateControlEntry timely_entry() {
  RateControlEntry e;
  e.name = TimelyConfig::kName;
  e.doc =
      "the sender paces each QP at a rate driven by the gradient of its RTT samples, no switch "
      "support (Mittal et al., SIGCOMM'15)";
  e.section_doc = "TIMELY parameters (used with congestion_control: timely).";
  e.make_section = [] { return std::make_unique<core::PluginSectionOf<TimelyConfig>>(); };
  e.make = [](const NicConfig& cfg) -> std::unique_ptr<RateControlKind> {
    return std::make_unique<TimelyKind>(cfg);
  };
  return e;
}

}  // namespace mprdma::nic
