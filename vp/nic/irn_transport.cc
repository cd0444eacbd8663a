#include "vp/nic/irn_transport.h"

#include <stdexcept>

#include "vp/nic/gbn_transport.h"

namespace mprdma::nic {

size_t IrnTransport::state_bytes() const {
  size_t n = GbnTransport::kStateBytes;
  for (const StateField& f : IrnSender::extra_state(p_.bdp_packets)) n += f.bytes;
  for (const StateField& f : IrnReceiver::extra_state(p_.bdp_packets)) n += f.bytes;
  return n;
}

void IrnTransport::open(const ConnParams& params) {
  Conn& c = conns_[params.qpn];
  c = Conn{};
  c.params = params;
  c.rx.emplace(p_.bdp_packets, params.rq_psn);
}

void IrnTransport::set_requester(const ConnParams& params) {
  Conn& c = conns_[params.qpn];
  c.params = params;
  c.tx.emplace(p_, params.sq_psn);
  c.granted.reset();
  c.retry_left = params.retry_cnt;
  c.timed_out = false;
}

void IrnTransport::set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t) {
  conns_.at(qpn).tx->set_snd_max(snd_max);
}

TxGrant IrnTransport::next_tx(uint32_t qpn, uint64_t) {
  Conn& c = conns_.at(qpn);
  TxGrant g;
  IrnTx t;
  if (!c.tx->next(t)) return g;
  c.granted = t;
  g.send = true;
  g.psn = t.psn;
  g.udp_sport = c.params.udp_sport;
  g.retransmit = t.retx;
  return g;
}

void IrnTransport::on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  if (c.granted && c.granted->psn == psn) c.tx->on_sent(*c.granted, now, npsn);
  c.granted.reset();
}

AckResult IrnTransport::on_ack(uint32_t qpn, const AckEvent& ev, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (ev.kind == AckEvent::Kind::nak_fatal) {
    r.error = AckResult::Error::fatal_nak;
    return r;
  }
  const uint32_t una = c.tx->snd_una();
  const bool recovering = c.tx->in_recovery();
  IrnAck a;
  if (ev.kind == AckEvent::Kind::read_response || ev.kind == AckEvent::Kind::atomic_ack) {
    // A response acknowledges its own PSN, selectively: the requester is
    // the receiver of READ data. New ones are placed; a response that
    // arrives out of order is a NACK (the ones before it were lost, on one
    // path), and recovery asks again for just those (the message layer
    // re-requests one response per retransmitted PSN).
    const uint32_t k = ev.psn;
    if (psn_diff(k, una) < 0 || psn_diff(k, c.tx->snd_nxt()) >= 0 || c.tx->sacked(k)) return r;
    r.accept = true;
    if (k == una) {
      a.cum = psn_add(k, 1);
      while (a.cum != c.tx->snd_nxt() && c.tx->sacked(a.cum)) a.cum = psn_add(a.cum, 1);
    } else {
      a.cum = una;
      a.nack = true;
      a.sack = k;
    }
  } else if (ev.kind == AckEvent::Kind::ack && ev.has_ext) {
    a.cum = psn_add(ev.ext.aack, 1);
    a.nack = ev.ext.nack;
    a.sack = ev.ext.sack;
    if (psn_diff(a.cum, ev.ack_limit) > 0 && psn_diff(ev.ack_limit, una) >= 0) {
      // The ACK covers PSNs whose READ/atomic responses are missing: the
      // responder sent them before this ACK on the same path, so they were
      // lost. Acknowledge up to them, and what the ACK names selectively.
      a.nack = true;
      a.sack = psn_add(a.cum, -1);
      a.cum = ev.ack_limit;
    }
  } else {
    return r;
  }
  c.tx->on_ack(a, now);
  r.progress = c.tx->snd_una() != una;
  if (r.progress) {
    c.retry_left = c.params.retry_cnt;
    c.timed_out = false;
  }
  // Recovery began (retransmissions are due) or the window opened.
  r.tx_ready = r.progress || (c.tx->in_recovery() && !recovering);
  return r;
}

uint64_t IrnTransport::wake_at(uint32_t qpn) const {
  const Conn& c = conns_.at(qpn);
  return c.tx ? c.tx->wake_at() : kNever;
}

AckResult IrnTransport::on_timer(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (!c.tx || now < c.tx->wake_at()) return r;
  const uint32_t una = c.tx->snd_una();
  const bool due = una != c.tx->snd_nxt();
  c.tx->on_timer(now);
  if (!due) return r;
  // A timeout with no progress since the previous one spends a retry.
  if (c.timed_out && c.una_at_timeout == una) {
    if (c.retry_left == 0) {
      r.error = AckResult::Error::retry_exceeded;
      return r;
    }
    --c.retry_left;
  }
  c.timed_out = true;
  c.una_at_timeout = una;
  r.rewound = true;
  r.tx_ready = true;
  return r;
}

RxVerdict IrnTransport::classify(uint32_t, uint32_t, uint64_t) {
  throw std::logic_error("irn: classify() on an out-of-order engine");
}

AckDecision IrnTransport::commit(uint32_t, uint32_t, bool, bool, uint64_t) {
  throw std::logic_error("irn: commit() on an out-of-order engine");
}

RxOutcome IrnTransport::on_data(uint32_t qpn, const RxPacket& p, uint64_t) {
  Conn& c = conns_.at(qpn);
  IrnRxResult m = c.rx->on_data(p.psn, p.tail, p.npsn);
  RxOutcome o;
  o.verdict = m.verdict == IrnRxResult::Verdict::place       ? RxOutcome::Verdict::place
              : m.verdict == IrnRxResult::Verdict::duplicate ? RxOutcome::Verdict::duplicate
                                                             : RxOutcome::Verdict::drop;
  o.send_ack = m.send_ack;
  o.ack.echo_vp = p.vp;
  o.ack.aack = psn_add(m.ack.cum, -1);
  o.ack.sack = m.ack.nack ? m.ack.sack : p.psn;
  o.ack.nack = m.ack.nack;
  o.ack.ece = p.ce;
  o.ack.retx = p.retx;
  // The responder keeps which messages need a completion; IRN's bitmap
  // records only tails.
  for (uint32_t tail : m.completed) o.completed.emplace_back(tail, false);
  return o;
}

const IrnSender* IrnTransport::sender(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.tx ? nullptr : &*it->second.tx;
}

}  // namespace mprdma::nic
