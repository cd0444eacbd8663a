#include "vp/nic/rate_control/dcqcn/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace mprdma::nic {

DcqcnRp::DcqcnRp(const DcqcnRpParams& p)
    : p_(p), rc_(p.line_rate_bps), rt_(p.line_rate_bps), alpha_(p.initial_alpha) {}

void DcqcnRp::advance(uint64_t now) {
  now = std::max(now, now_);
  now_ = now;
  if (alpha_running_ && p_.alpha_interval && now - alpha_ref_ >= p_.alpha_interval) {
    // One decay per whole interval K without a CNP: alpha <- (1-g) alpha.
    const uint64_t n = (now - alpha_ref_) / p_.alpha_interval;
    alpha_ *= std::pow(1.0 - p_.g, static_cast<double>(n));
    alpha_ref_ += n * p_.alpha_interval;
  }
  while (limited_ && p_.rate_timer && t_next_ <= now) {
    ++t_count_;
    increase();
    t_next_ += p_.rate_timer;
  }
}

void DcqcnRp::increase() {
  const uint32_t hi = std::max(t_count_, bc_count_);
  const uint32_t lo = std::min(t_count_, bc_count_);
  if (hi > p_.fast_recovery) {
    if (lo > p_.fast_recovery)
      rt_ += static_cast<double>(lo - p_.fast_recovery) * p_.rate_hai_bps;  // hyper increase
    else
      rt_ += p_.rate_ai_bps;  // additive increase
    rt_ = std::min(rt_, p_.line_rate_bps);
  }
  // Every stage, fast recovery included, halves the gap to the target.
  rc_ = std::min((rt_ + rc_) / 2.0, p_.line_rate_bps);
  // Within one additive step of line rate with the target there: the rate
  // limiter is released and the flow is unlimited again.
  if (rt_ >= p_.line_rate_bps && p_.line_rate_bps - rc_ < p_.rate_ai_bps) {
    rc_ = rt_ = p_.line_rate_bps;
    limited_ = false;
  }
}

void DcqcnRp::on_cnp(uint64_t now) {
  advance(now);
  rt_ = rc_;
  rc_ = std::max(p_.min_rate_bps, rc_ * (1.0 - alpha_ / 2.0));
  alpha_ = (1.0 - p_.g) * alpha_ + p_.g;
  alpha_running_ = true;
  alpha_ref_ = now_;
  limited_ = true;
  t_count_ = bc_count_ = 0;
  bytes_ = 0;
  t_next_ = now_ + p_.rate_timer;
  ++cuts_;
}

void DcqcnRp::on_sent(uint64_t wire_bytes, uint64_t now) {
  advance(now);
  if (!limited_) return;
  next_tx_ = static_cast<double>(now_) +
             static_cast<double>(wire_bytes) * 8.0 / rc_ * p_.cycles_per_second;
  bytes_ += wire_bytes;
  while (limited_ && p_.byte_counter && bytes_ >= p_.byte_counter) {
    bytes_ -= p_.byte_counter;
    ++bc_count_;
    increase();
  }
}

uint64_t DcqcnRp::tx_allowed_at() const {
  return limited_ ? static_cast<uint64_t>(std::ceil(next_tx_)) : 0;
}

DcqcnRp::Stage DcqcnRp::stage() const {
  if (!limited_) return Stage::unlimited;
  const uint32_t hi = std::max(t_count_, bc_count_);
  const uint32_t lo = std::min(t_count_, bc_count_);
  if (hi <= p_.fast_recovery) return Stage::fast_recovery;
  return lo > p_.fast_recovery ? Stage::hyper : Stage::additive;
}

bool DcqcnNp::on_ce(uint32_t flow, uint64_t now) {
  auto it = last_.find(flow);
  if (it != last_.end() && now - it->second < min_interval_) return false;
  last_[flow] = now;
  return true;
}

}  // namespace mprdma::nic
