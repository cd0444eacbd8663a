#include "vp/nic/transport/irn/irn_model.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::nic {

namespace {
void check_bdp(uint32_t bdp, const char* who) {
  // A power of two divides the PSN space: slot = PSN mod BDP stays
  // continuous across the 2^24 wrap.
  if (bdp == 0 || bdp > (1u << 20) || (bdp & (bdp - 1)))
    throw std::invalid_argument(std::string(who) +
                                ": the bitmap needs a power-of-two length up to 2^20, not " +
                                std::to_string(bdp));
}
}  // namespace

IrnSender::IrnSender(const IrnParams& params, uint32_t isn)
    : p_(params),
      una_(isn & kPsnMask),
      nxt_(isn & kPsnMask),
      max_(isn & kPsnMask),
      retx_(isn & kPsnMask),
      high_sack_(isn & kPsnMask) {
  check_bdp(params.bdp_packets, "IrnSender");
  sacked_.assign(params.bdp_packets, 0);
}

std::vector<StateField> IrnSender::extra_state(uint32_t bdp_packets) {
  return {{"SACK bitmap (1 bit per BDP packet)", (bdp_packets + 7) / 8},
          {"recovery", 3},
          {"retransmission pointer", 3},
          {"highest SACKed PSN", 3},
          {"flags: in recovery", 1}};
}

bool IrnSender::sacked(uint32_t psn) const {
  const int32_t d = psn_diff(psn, una_);
  if (d < 0) return true;
  if (static_cast<uint32_t>(d) >= sacked_.size()) return false;
  return sacked_[psn % sacked_.size()] != 0;
}

bool IrnSender::next(IrnTx& tx) {
  if (recovering_) {
    // Retransmit the PSNs inferred lost: not SACKed, below the highest
    // SACKed one, each once per recovery.
    if (psn_diff(retx_, una_) < 0) retx_ = una_;
    while (psn_diff(retx_, high_sack_) < 0 && sacked(retx_)) retx_ = psn_add(retx_, 1);
    if (psn_diff(retx_, high_sack_) < 0 && psn_diff(retx_, nxt_) < 0) {
      tx = {retx_, true};
      retx_ = psn_add(retx_, 1);
      return true;
    }
  }
  if (psn_diff(nxt_, max_) >= 0) return false;
  if (p_.bdp_fc && in_flight() >= p_.bdp_packets) {
    ++counters_.bdp_stalls;
    return false;
  }
  tx = {nxt_, false};
  return true;
}

void IrnSender::on_sent(const IrnTx& tx, uint64_t now, uint32_t npsn) {
  if (tx.retx) {
    ++counters_.retransmits;
  } else if (tx.psn == nxt_) {
    nxt_ = psn_add(nxt_, std::max<uint32_t>(npsn, 1));
  }
  arm(now);
}

void IrnSender::arm(uint64_t now) {
  if (una_ == nxt_) {
    rto_at_ = kNever;
    return;
  }
  rto_at_ = now + (in_flight() <= p_.rto_low_threshold ? p_.rto_low_cycles : p_.rto_high_cycles);
}

void IrnSender::on_ack(const IrnAck& a, uint64_t now) {
  // Nothing beyond what was sent can be acknowledged.
  if (psn_diff(a.cum, nxt_) > 0 || (a.nack && psn_diff(a.sack, nxt_) >= 0)) return;
  const int32_t moved = psn_diff(a.cum, una_);
  if (moved > 0) {
    for (int32_t i = 0; i < moved && static_cast<size_t>(i) < sacked_.size(); ++i)
      bit(psn_add(una_, i)) = 0;
    una_ = a.cum;
  }
  if (a.nack) {
    ++counters_.nacks;
    const int32_t d = psn_diff(a.sack, una_);
    if (d >= 0 && static_cast<uint32_t>(d) < sacked_.size()) bit(a.sack) = 1;
    const uint32_t above = psn_add(a.sack, 1);
    if (psn_diff(above, high_sack_) > 0) high_sack_ = above;
    if (!recovering_) {
      ++counters_.recoveries;
      recovering_ = true;
      recovery_ = nxt_;
      retx_ = una_;
    }
  }
  if (psn_diff(high_sack_, una_) < 0) high_sack_ = una_;
  if (recovering_ && psn_diff(una_, recovery_) >= 0) recovering_ = false;
  if (moved > 0) arm(now);
}

void IrnSender::on_timer(uint64_t now) {
  if (rto_at_ == kNever || now < rto_at_) return;
  if (una_ == nxt_) {
    rto_at_ = kNever;
    return;
  }
  if (in_flight() <= p_.rto_low_threshold)
    ++counters_.rto_low;
  else
    ++counters_.rto_high;
  resend_unacknowledged(now);
}

void IrnSender::resend_unacknowledged(uint64_t now) {
  if (una_ == nxt_) return;
  // Everything in flight not SACKed is presumed lost: recovery over all of
  // it.
  recovering_ = true;
  recovery_ = nxt_;
  retx_ = una_;
  high_sack_ = nxt_;
  arm(now);
}

void IrnSender::sack(uint32_t psn, uint64_t now) {
  const int32_t d = psn_diff(psn, una_);
  if (d < 0 || psn_diff(psn, nxt_) >= 0) return;
  if (static_cast<uint32_t>(d) < sacked_.size()) bit(psn) = 1;
  arm(now);
}

IrnReadResponder::IrnReadResponder(const IrnParams& params) : p_(params) {}

int32_t IrnReadResponder::order(uint32_t psn) const {
  return reads_.empty() ? 0 : psn_diff(psn, reads_.front().first);
}

IrnReadResponder::Read* IrnReadResponder::read_of(uint32_t psn) {
  for (Read& r : reads_) {
    const int32_t k = psn_diff(psn, r.first);
    if (k >= 0 && static_cast<uint32_t>(k) < r.n) return &r;
  }
  return nullptr;
}

void IrnReadResponder::add_read(uint32_t first, uint32_t n) {
  Read r;
  r.first = first & kPsnMask;
  r.n = std::max<uint32_t>(n, 1);
  // Keep the table in PSN order (a READ asked again after a loss may be
  // answered after later ones).
  auto it = reads_.begin();
  while (it != reads_.end() && order(it->first) < order(r.first)) ++it;
  reads_.insert(it, std::move(r));
}

void IrnReadResponder::set(Read& r, uint32_t k, uint8_t s) {
  if (k >= r.n || k < r.base) return;  // outside the READ, or acknowledged already
  if (s == kAcked && r.state.empty() && k == r.base) {
    ++r.base;  // the common case of a cumulative ACK: nothing in the window
    return;
  }
  while (r.window_end() <= k) {
    r.state.push_back(kQueued);
    r.resent.push_back(0);
  }
  uint8_t& cur = r.state[k - r.base];
  if (cur == kSent) --in_flight_;
  if (s == kSent) ++in_flight_;
  cur = s;
  // The window starts at the first response not acknowledged.
  while (!r.state.empty() && r.state.front() == kAcked) {
    r.state.pop_front();
    r.resent.pop_front();
    ++r.base;
  }
}

void IrnReadResponder::arm(uint64_t now) {
  const uint32_t n = in_flight();
  rto_at_ =
      n == 0 ? kNever : now + (n <= p_.rto_low_threshold ? p_.rto_low_cycles : p_.rto_high_cycles);
}

void IrnReadResponder::on_sent(uint32_t psn, uint64_t now) {
  Read* r = read_of(psn);
  if (!r) return;
  const uint32_t k = static_cast<uint32_t>(psn_diff(psn, r->first));
  const uint8_t cur = r->at(k);
  if (cur == kAcked) return;
  if (cur == kSent) ++counters_.retransmits;
  set(*r, k, kSent);
  arm(now);
}

void IrnReadResponder::acknowledge(uint32_t psn) {
  if (Read* r = read_of(psn)) set(*r, static_cast<uint32_t>(psn_diff(psn, r->first)), kAcked);
}

void IrnReadResponder::on_ack(const IrnAck& a, uint64_t now) {
  ++(a.nack ? counters_.read_nacks : counters_.read_acks);
  const uint32_t before = in_flight();
  // Cumulative: every response before `cum` (the table is in PSN order).
  const int32_t cum = order(a.cum);
  for (Read& r : reads_) {
    if (order(r.first) >= cum) break;
    const int64_t upto = std::min<int64_t>(r.n, int64_t{cum} - order(r.first));
    while (r.base < upto) set(r, r.base, kAcked);
  }
  acknowledge(a.sack);
  if (a.nack) {
    const uint32_t above = psn_add(a.sack, 1);
    if (!recovering_ || order(above) > order(high_sack_)) high_sack_ = above;
    if (!recovering_) {
      ++counters_.recoveries;
      recovering_ = true;
      for (Read& r : reads_) std::fill(r.resent.begin(), r.resent.end(), 0);
    }
  }
  // Recovery ends when nothing below the highest SACKed response is missing:
  // a READ with an unacknowledged response before it (the window's first,
  // or, with an empty window, the first never sent).
  if (recovering_) {
    bool missing = false;
    for (const Read& r : reads_) {
      if (r.base < r.n && order(psn_add(r.first, r.base)) < order(high_sack_)) missing = true;
      if (missing) break;
    }
    recovering_ = missing;
  }
  // Fully acknowledged READs leave the table. (high_sack_ is a PSN: order()
  // measures it from the new oldest READ as it did from the old one.)
  for (auto it = reads_.begin(); it != reads_.end();)
    it = it->base >= it->n ? reads_.erase(it) : it + 1;
  if (in_flight() != before) arm(now);
}

bool IrnReadResponder::next_retx(uint32_t& psn) {
  if (!recovering_) return false;
  for (Read& r : reads_)
    for (size_t i = 0; i < r.state.size(); ++i) {
      const uint32_t q = psn_add(r.first, int64_t{r.base} + static_cast<int64_t>(i));
      if (order(q) >= order(high_sack_)) return false;
      if (r.state[i] == kSent && !r.resent[i]) {
        r.resent[i] = 1;
        psn = q;
        return true;
      }
    }
  return false;
}

void IrnReadResponder::on_timer(uint64_t now) {
  if (rto_at_ == kNever || now < rto_at_) return;
  if (in_flight() == 0) {
    rto_at_ = kNever;
    return;
  }
  ++counters_.rtos;
  // Every response in flight is presumed lost: a recovery over all of them.
  recovering_ = true;
  high_sack_ = reads_.front().first;
  for (Read& r : reads_) {
    std::fill(r.resent.begin(), r.resent.end(), 0);
    for (size_t i = 0; i < r.state.size(); ++i)
      if (r.state[i] == kSent) {
        const uint32_t above = psn_add(r.first, int64_t{r.base} + static_cast<int64_t>(i) + 1);
        if (order(above) > order(high_sack_)) high_sack_ = above;
      }
  }
  arm(now);
}

void IrnReadResponder::abandon() {
  counters_.abandoned += reads_.size();
  reads_.clear();
  in_flight_ = 0;
  recovering_ = false;
  rto_at_ = kNever;
}

bool IrnReadResponder::pending(uint32_t first) const {
  for (const Read& r : reads_)
    if (r.first == (first & kPsnMask)) return true;  // fully acknowledged ones are erased
  return false;
}

IrnReceiver::IrnReceiver(uint32_t bdp_packets, uint32_t epsn) : nxt_(epsn & kPsnMask) {
  check_bdp(bdp_packets, "IrnReceiver");
  got_.assign(bdp_packets, 0);
}

std::vector<StateField> IrnReceiver::extra_state(uint32_t bdp_packets) {
  return {{"received bitmap (1 bit per BDP packet)", (bdp_packets + 7) / 8},
          {"message-tail bitmap (1 bit per BDP packet)", (bdp_packets + 7) / 8}};
}

IrnRxResult IrnReceiver::on_data(uint32_t psn, bool tail, uint32_t npsn) {
  IrnRxResult r;
  psn &= kPsnMask;
  npsn = std::max<uint32_t>(npsn, 1);
  const int32_t d = psn_diff(psn, nxt_);
  const size_t n = got_.size();
  if (d < 0 || (static_cast<size_t>(d) < n && got_[psn % n])) {
    r.verdict = IrnRxResult::Verdict::duplicate;
    r.send_ack = true;
    r.ack = {nxt_, false, 0};
    return r;
  }
  if (static_cast<size_t>(d) >= n || (d > 0 && static_cast<size_t>(d) + npsn > n)) {
    // BDP-FC keeps a sender within the bitmap; a packet beyond it is a
    // protocol violation (or a sender without BDP-FC): dropped. So is an
    // early READ whose responses' PSNs would not fit: its requester asks
    // again.
    r.verdict = IrnRxResult::Verdict::drop;
    return r;
  }
  r.verdict = IrnRxResult::Verdict::place;
  const bool in_order = d == 0;
  if (in_order && npsn > 1) {
    // A READ at the head: its PSNs need no slots, the head moves past them.
    for (uint32_t i = 0; i + 1 < npsn && i < n; ++i) got_[psn_add(psn, i) % n] = 0;
    nxt_ = psn_add(psn, npsn - 1);
    psn = nxt_;
  } else {
    for (uint32_t i = 0; i + 1 < npsn; ++i) got_[psn_add(psn, i) % n] = 1;
    psn = psn_add(psn, npsn - 1);
  }
  got_[psn % n] = tail ? 2 : 1;
  // Advance over everything now contiguous, completing messages in order.
  while (got_[nxt_ % n]) {
    const bool t = got_[nxt_ % n] == 2;
    got_[nxt_ % n] = 0;
    if (t) r.completed.push_back(nxt_);
    nxt_ = psn_add(nxt_, 1);
  }
  r.send_ack = true;
  r.ack = {nxt_, !in_order, in_order ? 0u : psn};
  return r;
}

}  // namespace mprdma::nic
