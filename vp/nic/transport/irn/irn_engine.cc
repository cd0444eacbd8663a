#include "vp/nic/transport/irn/irn_engine.h"

#include <algorithm>
#include <stdexcept>

#include "vp/nic/transport/gbn/gbn_engine.h"

namespace mprdma::nic {

namespace {

// IRN in the message layer's terms: out of order, READ and atomics its own
// way (explicit READ acknowledgements when configured), WRITE packets
// placed by their RETH without a trailer, the BDP as the receive window.
EngineTraits traits_for(const IrnParams& p) {
  EngineTraits t;
  t.out_of_order = true;
  t.carries_read_atomic = true;
  t.write_trailer = false;
  t.rnr_nacks = true;
  t.explicit_read_acks = p.read_acks;
  t.rx_window = p.bdp_packets;
  return t;
}
// A golden model's counter and the NIC-wide statistic that sums it.
template <class Counters>
struct ModelStat {
  const char* name;
  uint64_t Counters::*field;
  const char* unit;
  const char* desc;
};
const ModelStat<IrnSender::Counters> kTxStats[] = {
    {"nacks", &IrnSender::Counters::nacks, "packets",
     "NACKs (and READ responses after a gap) received"},
    {"recoveries", &IrnSender::Counters::recoveries, "events", "Recovery mode entered"},
    {"retransmits", &IrnSender::Counters::retransmits, "packets",
     "Retransmissions of PSNs inferred lost"},
    {"rto_low", &IrnSender::Counters::rto_low, "events",
     "Timeouts with at most N packets in flight (RTO_low)"},
    {"rto_high", &IrnSender::Counters::rto_high, "events", "Timeouts otherwise (RTO_high)"},
    {"bdp_stalls", &IrnSender::Counters::bdp_stalls, "events",
     "Sends held by BDP-FC (packets in flight at the BDP cap)"},
};
const ModelStat<IrnReadResponder::Counters> kRdStats[] = {
    {"read_acks_rx", &IrnReadResponder::Counters::read_acks, "packets",
     "Responder: Read ACKs received (explicit READ acknowledgements)"},
    {"read_nacks_rx", &IrnReadResponder::Counters::read_nacks, "packets",
     "Responder: Read NACKs received (a response arrived after a gap)"},
    {"read_recoveries", &IrnReadResponder::Counters::recoveries, "events",
     "Responder: READ-response recovery entered"},
    {"read_retransmits", &IrnReadResponder::Counters::retransmits, "packets",
     "Responder: READ responses sent again"},
    {"read_rtos", &IrnReadResponder::Counters::rtos, "events", "Responder: READ-response timeouts"},
    {"reads_abandoned", &IrnReadResponder::Counters::abandoned, "READs",
     "Responder: READs given up after retry_cnt + 1 timeouts in a row without a Read ACK "
     "acknowledging anything (the requester stopped answering)"},
};
template <class Counters, size_t N>
void register_stats(core::StatsRegistry& stats, const std::string& prefix,
                    const ModelStat<Counters> (&table)[N], std::vector<core::Counter*>& out) {
  for (const ModelStat<Counters>& t : table)
    out.push_back(&stats.counter(prefix + t.name, t.unit, t.desc));
}

// Adds what a call changed in a model's counters to the NIC-wide sums.
template <class Counters, size_t N>
void add_deltas(const std::vector<core::Counter*>& sums, const ModelStat<Counters> (&table)[N],
                const Counters& before, const Counters& after) {
  for (size_t i = 0; i < sums.size(); ++i)
    sums[i]->add(after.*table[i].field - before.*table[i].field);
}
}  // namespace

IrnEngine::IrnEngine(const IrnParams& params, core::StatsRegistry* stats, const std::string& prefix)
    : TransportEngine(traits_for(params)),
      p_(params),
      log_(core::Log::channel(engine_log_channel(prefix, "irn.transport"))) {
  if (!stats) return;
  register_stats(*stats, prefix, kTxStats, tx_stats_);
  register_stats(*stats, prefix, kRdStats, rd_stats_);
  rx_placed_ = &stats->counter(prefix + "rx_placed", "packets", "Requests placed (new PSNs)");
  rx_duplicates_ = &stats->counter(prefix + "rx_duplicates", "packets",
                                   "Requests for PSNs already here (ACKed or answered again)");
  rx_drops_ =
      &stats->counter(prefix + "rx_drops", "packets", "Requests beyond the bitmap, dropped");
  rnr_waits_ = &stats->counter(prefix + "rnr_waits", "events",
                               "RNR NAKs that found no RNR wait running: each spends an RNR "
                               "retry and begins a wait (or fails the QP when none is left)");
}

void IrnEngine::account(const IrnSender::Counters& a, const IrnSender::Counters& b) {
  add_deltas(tx_stats_, kTxStats, a, b);
}

void IrnEngine::account(const IrnReadResponder::Counters& a, const IrnReadResponder::Counters& b) {
  add_deltas(rd_stats_, kRdStats, a, b);
}

void IrnEngine::log_sender(uint32_t qpn, const Conn& c, const IrnSender::Counters& b,
                           bool was_recovering, const char* cause) const {
  if (!log_.enabled(core::LogLevel::debug)) return;
  const IrnSender& tx = *c.tx;
  const IrnSender::Counters& a = tx.counters();
  if (a.recoveries != b.recoveries)
    MPR_LOG(log_, debug,
            "qp " << qpn << ": recovery on " << cause << ", snd_una " << tx.snd_una()
                  << ", snd_nxt " << tx.snd_nxt());
  else if (was_recovering && !tx.in_recovery())
    MPR_LOG(log_, debug, "qp " << qpn << ": recovery over, snd_una " << tx.snd_una());
  if (a.rto_low != b.rto_low || a.rto_high != b.rto_high)
    MPR_LOG(log_, debug,
            "qp " << qpn << ": timeout (" << (a.rto_low != b.rto_low ? "RTO_low" : "RTO_high")
                  << "), every un-SACKed packet in flight again from " << tx.snd_una() << " to "
                  << tx.snd_nxt());
}

void IrnEngine::log_reads(uint32_t qpn, const Conn& c, const IrnReadResponder::Counters& b,
                          bool was_recovering) const {
  if (!log_.enabled(core::LogLevel::debug)) return;
  const IrnReadResponder::Counters& a = c.rd->counters();
  if (a.recoveries != b.recoveries)
    MPR_LOG(log_, debug,
            "qp " << qpn << ": READ responses: recovery on a Read NACK, " << c.rd->in_flight()
                  << " in flight");
  else if (was_recovering && !c.rd->in_recovery())
    MPR_LOG(log_, debug, "qp " << qpn << ": READ responses: recovery over");
  if (a.rtos != b.rtos)
    MPR_LOG(log_, debug,
            "qp " << qpn << ": READ responses: timeout, " << c.rd->in_flight() << " sent again");
  if (a.abandoned != b.abandoned)
    MPR_LOG(log_, warn,
            "qp " << qpn << ": READ responses given up (" << (a.abandoned - b.abandoned)
                  << " READs): the requester stopped acknowledging them");
}

size_t IrnEngine::state_bytes() const {
  size_t n = GbnEngine::kStateBytes;
  for (const StateField& f : IrnSender::extra_state(p_.bdp_packets)) n += f.bytes;
  for (const StateField& f : IrnReceiver::extra_state(p_.bdp_packets)) n += f.bytes;
  return n;
}

void IrnEngine::open(const ConnParams& params) {
  Conn& c = conns_[params.qpn];
  c = Conn{};
  c.params = params;
  c.rx.emplace(p_.bdp_packets, params.rq_psn);
  if (p_.read_acks) c.rd.emplace(p_);
}

void IrnEngine::set_requester(const ConnParams& params) {
  Conn& c = conns_[params.qpn];
  c.params = params;
  c.tx.emplace(p_, params.sq_psn);
  c.granted.reset();
  c.retry_left = params.retry_cnt;
  c.rnr_left = params.rnr_retry;
  c.hold_until = 0;
  c.timed_out = false;
}

void IrnEngine::set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t) {
  conns_.at(qpn).tx->set_snd_max(snd_max);
}

TxGrant IrnEngine::next_tx(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  TxGrant g;
  if (now < c.hold_until) return g;  // an RNR wait: nothing leaves
  IrnTx t;
  const IrnSender::Counters before = c.tx->counters();
  const bool any = c.tx->next(t);
  account(before, c.tx->counters());
  if (!any) return g;
  c.granted = t;
  g.send = true;
  g.psn = t.psn;
  g.udp_sport = c.params.udp_sport;
  g.retransmit = t.retx;
  return g;
}

void IrnEngine::on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  if (c.granted && c.granted->psn == psn) {
    const IrnSender::Counters before = c.tx->counters();
    c.tx->on_sent(*c.granted, now, npsn);
    account(before, c.tx->counters());
  }
  c.granted.reset();
}

void IrnEngine::note_progress(Conn& c, uint32_t una_before, AckResult& r) {
  // snd_una moved: the retry budget is whole again.
  r.progress = c.tx->snd_una() != una_before;
  if (r.progress) {
    c.retry_left = c.params.retry_cnt;
    c.rnr_left = c.params.rnr_retry;
    c.timed_out = false;
  }
}

AckResult IrnEngine::on_rnr(uint32_t qpn, Conn& c, const AckEvent& ev, uint64_t now) {
  // The receiver had no RECV for the message of packet ext.sack and dropped
  // it (rnr_nacks()); its AACK still acknowledges every PSN before rcv_nxt.
  // Nothing leaves until the RNR timer ends; then what is not SACKed goes
  // again from snd_una, as after a timeout. A new wait spends an RNR retry;
  // the NAKs of the message's other packets fall in it.
  AckResult r;
  if (!ev.has_ext) return r;
  const uint32_t una = c.tx->snd_una();
  IrnAck a;
  a.cum = psn_add(ev.ext.aack, 1);
  const IrnSender::Counters before = c.tx->counters();
  c.tx->on_ack(a, now);
  account(before, c.tx->counters());
  note_progress(c, una, r);
  if (psn_diff(ev.ext.sack, c.tx->snd_una()) < 0 || psn_diff(ev.ext.sack, c.tx->snd_nxt()) >= 0)
    return r;  // stale, or for nothing sent
  if (now >= c.hold_until) {
    if (rnr_waits_) ++*rnr_waits_;
    if (c.params.rnr_retry != 7) {
      if (c.rnr_left == 0) {
        r.error = AckResult::Error::rnr_exceeded;
        return r;
      }
      --c.rnr_left;
    }
    MPR_LOG(log_, debug,
            "qp " << qpn << ": RNR NAK for " << ev.ext.sack << ", waiting " << ev.rnr_delay_cycles
                  << " cycles, then again from snd_una " << c.tx->snd_una());
  }
  c.hold_until = std::max(c.hold_until, now + ev.rnr_delay_cycles);
  return r;
}

AckResult IrnEngine::on_ack(uint32_t qpn, const AckEvent& ev, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (ev.kind == AckEvent::Kind::nak_fatal) {
    r.error = AckResult::Error::fatal_nak;
    return r;
  }
  if (ev.kind == AckEvent::Kind::nak_rnr) return on_rnr(qpn, c, ev, now);
  if (p_.read_acks && ev.kind == AckEvent::Kind::read_response) return read_response(c, ev, now);
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
      // With explicit READ acknowledgements the responder sends lost READ
      // responses again itself: the other PSNs the ACK covers are SACKed,
      // without a recovery, as long as no atomic's answer is missing (the
      // requester asks again for those).
      if (p_.read_acks && !ev.missing_atomic) {
        const uint32_t end = a.cum;
        a.cum = ev.ack_limit;
        a.nack = false;
        const IrnSender::Counters before = c.tx->counters();
        c.tx->on_ack(a, now);
        for (uint32_t p = psn_add(ev.ack_limit, 1); p != end; p = psn_add(p, 1))
          if (std::find(ev.missing_responses.begin(), ev.missing_responses.end(), p) ==
              ev.missing_responses.end())
            c.tx->sack(p, now);
        account(before, c.tx->counters());
        note_progress(c, una, r);
        r.tx_ready = r.progress;
        return r;
      }
      // An atomic's answer is missing (or READ responses without explicit
      // READ acknowledgements): those requests must go again, so none of
      // their PSNs may count as SACKed. Acknowledge up to the first,
      // SACK the PSNs the ACK covers whose answers are here, and recover
      // from the first on, up to the ACK's own out-of-order PSN if it
      // names one. (Taking the ACK's last PSN as the SACK marked an
      // atomic whose answer was lost as arrived when it was that last PSN:
      // it was never sent again, and the QP failed on retries.)
      const uint32_t end = a.cum;
      const bool nacked = a.nack;
      const uint32_t nacked_psn = a.sack;
      auto missing = [&](uint32_t p) {
        return std::find(ev.missing_responses.begin(), ev.missing_responses.end(), p) !=
               ev.missing_responses.end();
      };
      const IrnSender::Counters before = c.tx->counters();
      IrnAck cum;
      cum.cum = ev.ack_limit;
      c.tx->on_ack(cum, now);
      bool arrived = false;
      uint32_t highest = 0;
      for (uint32_t p = psn_add(ev.ack_limit, 1); p != end; p = psn_add(p, 1))
        if (!missing(p)) {
          c.tx->sack(p, now);
          arrived = true;
          highest = p;
        }
      if (nacked && psn_diff(nacked_psn, end) >= 0 && !missing(nacked_psn)) {
        arrived = true;
        highest = nacked_psn;
      }
      if (arrived) {
        a.cum = ev.ack_limit;
        a.nack = true;
        a.sack = highest;
        c.tx->on_ack(a, now);
      }
      account(before, c.tx->counters());
      log_sender(qpn, c, before, recovering, "an ACK past a missing answer");
      note_progress(c, una, r);
      r.tx_ready = r.progress || (c.tx->in_recovery() && !recovering);
      return r;
    }
  } else {
    return r;
  }
  const IrnSender::Counters before = c.tx->counters();
  c.tx->on_ack(a, now);
  account(before, c.tx->counters());
  log_sender(qpn, c, before, recovering,
             ev.kind == AckEvent::Kind::ack ? "a NACK" : "a response after a gap");
  note_progress(c, una, r);
  // Recovery began (retransmissions are due) or the window opened.
  r.tx_ready = r.progress || (c.tx->in_recovery() && !recovering);
  return r;
}

AckResult IrnEngine::read_response(Conn& c, const AckEvent& ev, uint64_t now) {
  // The requester is the receiver of READ data: a response is placed and
  // acknowledged to the responder by a Read ACK (cumulative: every response
  // before the next missing one) or, after a gap in the responses, a Read
  // NACK naming it; the responder sends lost ones again. Here it only
  // counts for the requester's own window (BDP-FC) and timeout.
  AckResult r;
  const uint32_t k = ev.psn;
  const uint32_t una = c.tx->snd_una();
  r.send_read_ack = true;
  r.read_ack.echo_vp = c.params.udp_sport;
  r.read_ack.sack = k;
  if (psn_diff(k, una) < 0 || psn_diff(k, c.tx->snd_nxt()) >= 0 || c.tx->sacked(k)) {
    // Here already (the responder sent it again before our Read ACK
    // reached it): acknowledge again, no more.
    r.read_ack.aack = psn_add(ev.ack_limit, -1);
    return r;
  }
  r.accept = true;
  const bool in_order = k == ev.ack_limit;
  r.read_ack.nack = !in_order;
  r.read_ack.aack = in_order ? k : psn_add(ev.ack_limit, -1);
  const IrnSender::Counters before = c.tx->counters();
  if (k == una) {
    IrnAck a;
    a.cum = psn_add(k, 1);
    while (a.cum != c.tx->snd_nxt() && c.tx->sacked(a.cum)) a.cum = psn_add(a.cum, 1);
    c.tx->on_ack(a, now);
  } else {
    c.tx->sack(k, now);
  }
  account(before, c.tx->counters());
  note_progress(c, una, r);
  r.tx_ready = r.progress;
  return r;
}

void IrnEngine::read_queued(uint32_t qpn, uint32_t first_psn, uint32_t n, uint64_t) {
  Conn& c = conns_.at(qpn);
  if (c.rd) c.rd->add_read(first_psn, n);
}

void IrnEngine::read_response_sent(uint32_t qpn, uint32_t psn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  if (!c.rd) return;
  const IrnReadResponder::Counters before = c.rd->counters();
  c.rd->on_sent(psn, now);
  account(before, c.rd->counters());
}

AckResult IrnEngine::on_read_ack(uint32_t qpn, const AckExt& ack, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (!c.rd) return r;
  const IrnReadResponder::Counters before = c.rd->counters();
  const uint32_t in_flight = c.rd->in_flight();
  const bool recovering = c.rd->in_recovery();
  c.rd->on_ack(IrnAck{psn_add(ack.aack, 1), ack.nack, ack.sack}, now);
  account(before, c.rd->counters());
  log_reads(qpn, c, before, recovering);
  if (c.rd->in_flight() < in_flight) c.read_stalls = 0;
  r.tx_ready = c.rd->in_recovery();
  return r;
}

bool IrnEngine::next_read_retx(uint32_t qpn, uint32_t& psn) {
  Conn& c = conns_.at(qpn);
  return c.rd && c.rd->next_retx(psn);
}

bool IrnEngine::read_pending(uint32_t qpn, uint32_t first_psn) const {
  const Conn& c = conns_.at(qpn);
  return c.rd && c.rd->pending(first_psn);
}

uint64_t IrnEngine::read_wake_at(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.rd ? kNever : it->second.rd->wake_at();
}

AckResult IrnEngine::on_read_timer(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (!c.rd) return r;
  const IrnReadResponder::Counters before = c.rd->counters();
  const bool recovering = c.rd->in_recovery();
  c.rd->on_timer(now);
  // As the requester's retry budget: a requester that no longer answers
  // (its QP gone, or it does not send Read ACKs) must not be sent the
  // responses again for ever.
  if (c.rd->counters().rtos != before.rtos && ++c.read_stalls > c.params.retry_cnt) {
    c.rd->abandon();
    c.read_stalls = 0;
  }
  account(before, c.rd->counters());
  log_reads(qpn, c, before, recovering);
  r.tx_ready = c.rd->in_recovery();
  return r;
}

uint64_t IrnEngine::wake_at(uint32_t qpn) const {
  const Conn& c = conns_.at(qpn);
  if (c.tx && c.hold_until) return c.hold_until;
  return c.tx ? c.tx->wake_at() : kNever;
}

AckResult IrnEngine::on_timer(uint32_t qpn, uint64_t now) {
  Conn& c = conns_.at(qpn);
  AckResult r;
  if (c.tx && c.hold_until) {
    // An RNR wait: no timeout runs during it; at its end, resend.
    if (now < c.hold_until) return r;
    c.hold_until = 0;
    const IrnSender::Counters before = c.tx->counters();
    c.tx->resend_unacknowledged(now);
    account(before, c.tx->counters());
    r.tx_ready = true;
    return r;
  }
  if (!c.tx || now < c.tx->wake_at()) return r;
  const uint32_t una = c.tx->snd_una();
  const bool due = una != c.tx->snd_nxt();
  const IrnSender::Counters before = c.tx->counters();
  const bool recovering = c.tx->in_recovery();
  c.tx->on_timer(now);
  account(before, c.tx->counters());
  log_sender(qpn, c, before, recovering, "a timeout");
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

RxVerdict IrnEngine::classify(uint32_t, uint32_t, uint64_t) {
  throw std::logic_error("irn: classify() on an out-of-order engine");
}

AckDecision IrnEngine::commit(uint32_t, uint32_t, bool, bool, uint64_t) {
  throw std::logic_error("irn: commit() on an out-of-order engine");
}

RxOutcome IrnEngine::on_data(uint32_t qpn, const RxPacket& p, uint64_t) {
  Conn& c = conns_.at(qpn);
  IrnRxResult m = c.rx->on_data(p.psn, p.tail, p.npsn);
  if (rx_placed_) {
    if (m.verdict == IrnRxResult::Verdict::place) ++*rx_placed_;
    if (m.verdict == IrnRxResult::Verdict::duplicate) ++*rx_duplicates_;
    if (m.verdict == IrnRxResult::Verdict::drop) ++*rx_drops_;
  }
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

const IrnSender* IrnEngine::sender(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.tx ? nullptr : &*it->second.tx;
}

const IrnReadResponder* IrnEngine::read_responder(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.rd ? nullptr : &*it->second.rd;
}

}  // namespace mprdma::nic
