#include "vp/nic/transport/gbn/gbn_engine.h"

namespace mprdma::nic {

size_t GbnEngine::state_bytes() const { return kStateBytes; }

std::vector<std::pair<const char*, std::string>> GbnContext::fields() const {
  auto t = [](uint64_t v) { return v == kNever ? std::string("never") : std::to_string(v); };
  return {{"requester", std::to_string(requester)},
          {"snd_una", std::to_string(una)},
          {"snd_nxt", std::to_string(nxt)},
          {"snd_max", std::to_string(max)},
          {"high", std::to_string(high)},
          {"retry_left", std::to_string(retry_left)},
          {"rnr_left", std::to_string(rnr_left)},
          {"deadline", t(deadline)},
          {"hold_until", t(hold_until)},
          {"rewound_for_una", std::to_string(rewound_for_una)},
          {"epsn", std::to_string(epsn)},
          {"nak_sent", std::to_string(nak_sent)},
          {"since_ack", std::to_string(since_ack)},
          {"retry_cnt", std::to_string(retry_cnt)},
          {"rnr_retry", std::to_string(rnr_retry)},
          {"ack_timeout", std::to_string(ack_timeout_cycles)},
          {"udp_sport", std::to_string(udp_sport)},
          {"ack_coalesce", std::to_string(ack_coalesce)}};
}

GbnContext GbnEngine::context(uint32_t qpn) const {
  const Conn& c = conns_.at(qpn);
  GbnContext x;
  x.requester = c.requester;
  x.una = c.una;
  x.nxt = c.nxt;
  x.max = c.max;
  x.high = c.high;
  x.retry_left = c.retry_left;
  x.rnr_left = c.rnr_left;
  x.deadline = c.deadline;
  x.hold_until = c.hold_until;
  x.rewound_for_una = c.rewound_for_una;
  x.epsn = c.epsn;
  x.nak_sent = c.nak_sent;
  x.since_ack = c.since_ack;
  x.retry_cnt = c.params.retry_cnt;
  x.rnr_retry = c.params.rnr_retry;
  x.ack_timeout_cycles = c.params.ack_timeout_cycles;
  x.udp_sport = c.params.udp_sport;
  x.ack_coalesce = c.params.ack_coalesce;
  return x;
}

void GbnEngine::open(const ConnParams& p) {
  Conn& c = conns_[p.qpn];
  c = Conn{};
  c.params = p;
  c.epsn = p.rq_psn & kPsnMask;
}

void GbnEngine::set_requester(const ConnParams& p) {
  Conn& c = conns_[p.qpn];
  c.params = p;
  c.requester = true;
  c.una = c.nxt = c.max = c.high = p.sq_psn & kPsnMask;
  c.retry_left = p.retry_cnt;
  c.rnr_left = p.rnr_retry;
  c.deadline = kNever;
  c.hold_until = 0;
}

void GbnEngine::close(uint32_t qpn) { conns_.erase(qpn); }

void GbnEngine::set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t) {
  conns_.at(qpn).max = snd_max & kPsnMask;
}

TxGrant GbnEngine::next_tx(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  TxGrant g;
  if (!c.requester || now < c.hold_until || psn_diff(c.nxt, c.max) >= 0) return g;
  g.send = true;
  g.psn = c.nxt;
  g.udp_sport = c.params.udp_sport;
  g.retransmit = psn_diff(c.nxt, c.high) < 0;
  return g;
}

void GbnEngine::arm(Conn& c, uint64_t now) {
  c.deadline =
      c.params.ack_timeout_cycles && c.una != c.nxt ? now + c.params.ack_timeout_cycles : kNever;
}

void GbnEngine::on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  c.nxt = psn_add(psn, npsn);
  if (psn_diff(c.nxt, c.high) > 0) c.high = c.nxt;
  if (c.deadline == kNever) arm(c, now);
}

void GbnEngine::advance(Conn& c, uint32_t new_una, uint64_t now, AckResult& r) {
  if (psn_diff(new_una, c.una) <= 0) return;
  c.una = new_una;
  if (psn_diff(c.nxt, c.una) < 0) c.nxt = c.una;
  r.progress = true;
  c.retry_left = c.params.retry_cnt;  // progress restores the retry budgets
  c.rnr_left = c.params.rnr_retry;
  c.rewound_for_una = false;
  arm(c, now);
}

void GbnEngine::rewind(Conn& c, uint32_t to, uint64_t now, AckResult& r) {
  if (psn_diff(c.nxt, to) > 0) c.nxt = to;
  r.rewound = true;
  if (go_back_delay_ && now + go_back_delay_ > c.hold_until) c.hold_until = now + go_back_delay_;
}

AckResult GbnEngine::on_ack(uint32_t qpn, const AckEvent& a, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  // A response for a PSN never sent is a protocol violation: ignore it. A NAK
  // names the PSN it expects, which may be the next one to send.
  const bool nak = a.kind == AckEvent::Kind::nak_sequence || a.kind == AckEvent::Kind::nak_rnr ||
                   a.kind == AckEvent::Kind::nak_fatal;
  if (psn_diff(a.psn, c.high) >= (nak ? 1 : 0)) return r;
  // Like an ACK, a NAK acknowledges nothing past a READ/atomic whose response
  // is missing: that response was lost, the request must be resent.
  const uint32_t nak_una = psn_diff(a.psn, a.ack_limit) > 0 ? a.ack_limit : a.psn;
  switch (a.kind) {
    case AckEvent::Kind::ack: {
      uint32_t new_una = psn_add(a.psn, 1);
      if (psn_diff(new_una, a.ack_limit) > 0) {
        // Acknowledged beyond a READ/atomic whose response is missing: that
        // response was lost. Resend from it (once per loss).
        new_una = a.ack_limit;
        advance(c, new_una, now, r);
        if (!c.rewound_for_una) {
          c.rewound_for_una = true;
          rewind(c, c.una, now, r);
        }
        return r;
      }
      advance(c, new_una, now, r);
      return r;
    }
    case AckEvent::Kind::nak_sequence: {
      const bool before = psn_diff(nak_una, c.una) > 0;
      advance(c, nak_una, now, r);
      if (!before) {
        // No progress: this retransmission spends one retry.
        if (c.retry_left == 0) {
          r.error = AckResult::Error::retry_exceeded;
          return r;
        }
        --c.retry_left;
      }
      rewind(c, c.una, now, r);
      return r;
    }
    case AckEvent::Kind::nak_rnr:
      advance(c, nak_una, now, r);
      if (c.params.rnr_retry != 7) {
        if (c.rnr_left == 0) {
          r.error = AckResult::Error::rnr_exceeded;
          return r;
        }
        --c.rnr_left;
      }
      c.hold_until = now + a.rnr_delay_cycles;
      rewind(c, c.una, now, r);
      return r;
    case AckEvent::Kind::nak_fatal:
      advance(c, nak_una, now, r);
      r.error = AckResult::Error::fatal_nak;
      return r;
    case AckEvent::Kind::read_response:
    case AckEvent::Kind::atomic_ack: {
      const int32_t d = psn_diff(a.psn, c.una);
      if (d == 0) {
        r.accept = true;
        advance(c, psn_add(a.psn, 1), now, r);
      } else if (d > 0 && !c.rewound_for_una) {
        // A response is missing before this one: go back to it.
        c.rewound_for_una = true;
        rewind(c, c.una, now, r);
      }
      return r;
    }
  }
  return r;
}

uint64_t GbnEngine::wake_at(uint32_t qpn) const {
  const Conn& c = conns_.at(qpn);
  uint64_t t = c.deadline;
  if (c.hold_until && c.hold_until < t) t = c.hold_until;
  return t;
}

AckResult GbnEngine::on_timer(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (c.hold_until && now >= c.hold_until) c.hold_until = 0;
  if (c.deadline == kNever || now < c.deadline) return r;
  if (c.una == c.nxt && c.una == c.high) {
    c.deadline = kNever;
    return r;
  }
  if (c.retry_left == 0) {
    r.error = AckResult::Error::retry_exceeded;
    c.deadline = kNever;
    return r;
  }
  --c.retry_left;
  c.rewound_for_una = false;
  rewind(c, c.una, now, r);
  c.deadline = now + c.params.ack_timeout_cycles;
  return r;
}

RxVerdict GbnEngine::classify(uint32_t qpn, uint32_t psn, uint64_t) {
  Conn& c = conns_.at(qpn);
  const int32_t d = psn_diff(psn, c.epsn);
  if (d == 0) return RxVerdict::accept;
  if (d < 0) return RxVerdict::duplicate;
  if (c.nak_sent) return RxVerdict::drop;
  c.nak_sent = true;
  return RxVerdict::nak_sequence;
}

AckDecision GbnEngine::commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                              uint64_t) {
  Conn& c = conns_.at(qpn);
  c.epsn = psn_add(c.epsn, npsn);
  c.nak_sent = false;
  AckDecision d;
  if (implicit_ack) {
    c.since_ack = 0;
    return d;
  }
  ++c.since_ack;
  if (ack_req || c.since_ack >= c.params.ack_coalesce) {
    c.since_ack = 0;
    d.send = true;
    d.psn = psn_add(c.epsn, -1);
  }
  return d;
}

}  // namespace mprdma::nic
