#include "vp/nic/transport/mp_rdma/mp_rdma_engine.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "vp/nic/transport/gbn/gbn_engine.h"

namespace mprdma::nic {

namespace {

// MP-RDMA in the message layer's terms: out of order, READ and atomics as
// data, its own window (no external rate control), RNR NAKs with the ACK
// trailer, the receive bitmap as the window of new requests.
EngineTraits traits_for(const MpRdmaEngineParams& p) {
  EngineTraits t;
  t.out_of_order = true;
  t.carries_read_atomic = false;
  t.read_as_data = true;
  t.write_trailer = true;
  t.rnr_nacks = true;
  t.own_congestion_control = true;
  t.rx_window = p.bitmap_slots;
  return t;
}

struct TxStat {
  const char* name;
  uint64_t MpSender::Counters::*field;
  const char* unit;
  const char* desc;
};
const TxStat kTxStats[] = {
    {"acks", &MpSender::Counters::acks, "packets", "ACKs and NACKs received"},
    {"ece_acks", &MpSender::Counters::ece_acks, "packets", "ACKs with ECE: cwnd - 1/2"},
    {"pruned_acks", &MpSender::Counters::pruned_acks, "packets",
     "ACKs with SACK below snd_ool: cwnd - 1, nothing sent on their path"},
    {"nacks", &MpSender::Counters::nacks, "packets", "NACKs received"},
    {"recoveries", &MpSender::Counters::recoveries, "events", "Recovery mode entered"},
    {"retransmits", &MpSender::Counters::retransmits, "packets",
     "Retransmissions in recovery mode"},
    {"early_retransmits", &MpSender::Counters::early_retransmits, "packets",
     "Early (FUSO) retransmissions"},
    {"rtos", &MpSender::Counters::rtos, "events", "Retransmission timeouts"},
    {"probes", &MpSender::Counters::probes, "packets", "Packets sent to probe a new path"},
    {"burst_timer_sends", &MpSender::Counters::burst_timer_sends, "packets",
     "Packets sent by the burst timer or a restart, on random paths"},
    {"window_reductions", &MpSender::Counters::window_reductions, "events",
     "Use it or lose it: an ACK found nothing to send, cwnd - 1"},
    {"restarts", &MpSender::Counters::restarts, "events", "Restarts from IW after idle"},
    {"sync_waits", &MpSender::Counters::sync_waits, "events",
     "Sends held for a synchronise message's delay"},
    {"rnr_nacks", &MpSender::Counters::rnr_nacks, "packets",
     "RNR NACKs received (the receiver had no RECV posted for the packet's message)"},
    {"rnr_waits", &MpSender::Counters::rnr_waits, "events",
     "RNR NACKs that found no RNR wait running: each spends an RNR retry and begins a wait "
     "(or fails the QP when none is left)"},
};

struct RxStat {
  const char* name;
  uint64_t MpReceiver::Counters::*field;
  const char* unit;
  const char* desc;
};
const RxStat kRxStats[] = {
    {"rx_placed", &MpReceiver::Counters::placed, "packets", "Data packets placed"},
    {"rx_duplicates", &MpReceiver::Counters::duplicates, "packets", "Duplicate data packets"},
    {"rx_overflow_drops", &MpReceiver::Counters::overflow_drops, "packets",
     "Data packets beyond rcv_nxt + L, dropped"},
    {"rx_sync_drops", &MpReceiver::Counters::sync_drops, "packets",
     "Synchronise packets that overtook an earlier message, dropped"},
    {"rx_nacks", &MpReceiver::Counters::nacks, "packets", "NACKs sent"},
    {"rx_messages", &MpReceiver::Counters::messages, "messages", "Messages completed"},
};

// The counters also kept per QP: the ones that tell which connection of
// many lost, recovered or was pruned.
struct QpStat {
  const char* name;
  const char* unit;
  const char* desc;
};
const QpStat kQpStats[] = {
    {"acks", "packets", "ACKs and NACKs this QP's sender received"},
    {"ece_acks", "packets", "ACKs with ECE this QP's sender received"},
    {"pruned_acks", "packets", "ACKs of this QP pruned by OOO-aware path selection"},
    {"recoveries", "events", "Recovery mode entered by this QP's sender"},
    {"retransmits", "packets", "Retransmissions of this QP in recovery mode"},
    {"rtos", "events", "Retransmission timeouts of this QP"},
    {"rx_placed", "packets", "Data packets this QP's receiver placed"},
    {"rx_overflow_drops", "packets", "Data packets this QP's receiver dropped beyond rcv_nxt + L"},
};
enum QpStatIndex : size_t {
  kQpAcks,
  kQpEceAcks,
  kQpPruned,
  kQpRecoveries,
  kQpRetransmits,
  kQpRtos,
  kQpPlaced,
  kQpOverflow,
  kQpStatCount
};
static_assert(sizeof kQpStats / sizeof kQpStats[0] == kQpStatCount, "one row per index");

// "[12@0xc0a1 4r@0xc0b7]": the packets an event clocked out.
std::string packets(const std::vector<MpTx>& txs) {
  std::ostringstream o;
  o << '[' << std::hex;
  for (size_t i = 0; i < txs.size(); ++i)
    o << (i ? " " : "") << std::dec << txs[i].psn << (txs[i].retx ? "r" : "") << "@0x" << std::hex
      << txs[i].vp;
  o << ']';
  return o.str();
}
}  // namespace

MpRdmaEngine::MpRdmaEngine(const MpRdmaEngineParams& params, core::StatsRegistry* stats,
                           const std::string& prefix, std::unique_ptr<MpRxImpl> rx_impl,
                           std::unique_ptr<MpTxImpl> tx_impl)
    : TransportEngine(traits_for(params)),
      p_(params),
      rx_impl_(std::move(rx_impl)),
      tx_impl_(std::move(tx_impl)),
      stats_(stats),
      prefix_(prefix),
      log_(core::Log::channel(engine_log_channel(prefix, "mprdma.transport"))),
      rng_(params.rng_seed) {
  if (p_.bitmap_slots == 0 || (p_.bitmap_slots & (p_.bitmap_slots - 1)))
    throw std::invalid_argument("mprdma: bitmap_slots must be a power of two");
  if (!stats) return;
  for (const TxStat& t : kTxStats)
    tx_stats_.push_back(&stats->counter(prefix + t.name, t.unit, t.desc));
  for (const RxStat& t : kRxStats)
    rx_stats_.push_back(&stats->counter(prefix + t.name, t.unit, t.desc));
  max_ood_ = &stats->counter(prefix + "rx_max_ood", "packets",
                             "Largest out-of-order degree (PSN - rcv_nxt) seen by a receiver");
  ood_ = &stats->histogram(prefix + "rx_ood", "packets",
                           "Out-of-order degree (PSN - rcv_nxt) of each arriving data packet, "
                           "0 in order; duplicates left out");
  // One count per integer OOD up to the largest bitmap (2^20 slots): exact
  // percentiles. Only PSNs beyond that (overflow drops) share log buckets.
  if (ood_->count() == 0 && ood_->exact_below() == 0.0) ood_->set_exact_below(double(1u << 20));
}

void MpRdmaEngine::add_qp(uint32_t qpn, Conn& c, size_t stat, uint64_t delta) {
  if (!delta || !stats_) return;
  if (c.qp_stats.empty()) c.qp_stats.assign(kQpStatCount, nullptr);
  core::Counter*& ctr = c.qp_stats[stat];
  if (!ctr) {
    const QpStat& s = kQpStats[stat];
    ctr = &stats_->counter(prefix_ + "qp" + std::to_string(qpn) + "." + s.name, s.unit, s.desc);
  }
  ctr->add(delta);
}

void MpRdmaEngine::recount(Conn& c) {
  const uint64_t cwnd = c.tx && c.tx->ever_sent() ? c.tx->cwnd_q16() : 0;
  const bool recovering = c.tx && c.tx->in_recovery();
  cwnd_q_total_ = cwnd_q_total_ - c.cwnd_counted + cwnd;
  recovering_total_ = recovering_total_ - c.recovering_counted + recovering;
  c.cwnd_counted = cwnd;
  c.recovering_counted = recovering;
}

void MpRdmaEngine::uncount(Conn& c) {
  cwnd_q_total_ -= c.cwnd_counted;
  recovering_total_ -= c.recovering_counted;
  c.cwnd_counted = 0;
  c.recovering_counted = false;
}

// Every sender event (set_snd_max, on_ack, on_rnr, on_timer) ends here, so
// the window totals follow the model.
void MpRdmaEngine::account(uint32_t qpn, Conn& c, const MpSender::Counters& a,
                           const MpSender::Counters& b) {
  recount(c);
  for (size_t i = 0; i < tx_stats_.size(); ++i)
    tx_stats_[i]->add(b.*kTxStats[i].field - a.*kTxStats[i].field);
  add_qp(qpn, c, kQpAcks, b.acks - a.acks);
  add_qp(qpn, c, kQpEceAcks, b.ece_acks - a.ece_acks);
  add_qp(qpn, c, kQpPruned, b.pruned_acks - a.pruned_acks);
  add_qp(qpn, c, kQpRecoveries, b.recoveries - a.recoveries);
  add_qp(qpn, c, kQpRetransmits, b.retransmits - a.retransmits);
  add_qp(qpn, c, kQpRtos, b.rtos - a.rtos);
}

void MpRdmaEngine::account(uint32_t qpn, Conn& c, const MpReceiver::Counters& a,
                           const MpReceiver::Counters& b) {
  for (size_t i = 0; i < rx_stats_.size(); ++i)
    rx_stats_[i]->add(b.*kRxStats[i].field - a.*kRxStats[i].field);
  add_qp(qpn, c, kQpPlaced, b.placed - a.placed);
  add_qp(qpn, c, kQpOverflow, b.overflow_drops - a.overflow_drops);
  if (max_ood_ && b.max_ood > max_ood_->value()) max_ood_->set(b.max_ood);
}

void MpRdmaEngine::log_tx(uint32_t qpn, const Conn& c, const char* what,
                          const MpSender::Counters& before, bool was_recovering,
                          const std::string& detail) const {
  const MpSender& tx = *c.tx;
  const MpSender::Counters& after = tx.counters();
  if (log_.enabled(core::LogLevel::debug)) {
    if (after.rtos != before.rtos)
      MPR_LOG(log_, debug,
              "qp " << qpn << ": RTO, every unacknowledged packet again from " << tx.snd_una()
                    << " to " << tx.recovery() << ", cwnd back to " << tx.cwnd());
    else if (after.recoveries != before.recoveries)
      MPR_LOG(log_, debug,
              "qp " << qpn << ": recovery on" << detail << ": resends until snd_una passes "
                    << tx.recovery() << ", cwnd " << tx.cwnd());
    if (after.restarts != before.restarts)
      MPR_LOG(log_, debug, "qp " << qpn << ": restart from IW after idle, cwnd " << tx.cwnd());
    if (was_recovering && !tx.in_recovery())
      MPR_LOG(log_, debug,
              "qp " << qpn << ": recovery over, snd_una " << tx.snd_una() << " passed "
                    << tx.recovery());
  }
  if (!log_.enabled(core::LogLevel::trace)) return;
  std::ostringstream o;
  o << "qp " << qpn << " " << what << detail;
  if (after.pruned_acks != before.pruned_acks) o << " pruned";
  if (after.window_reductions != before.window_reductions) o << " unused";
  o << " -> cwnd " << std::fixed << std::setprecision(2) << tx.cwnd() << " inflate " << tx.inflate()
    << " una " << tx.snd_una() << " nxt " << tx.snd_nxt() << " ooh " << tx.snd_ooh() << " awnd "
    << tx.awnd();
  if (tx.in_recovery()) o << " recovering(retx " << tx.snd_retx() << " to " << tx.recovery() << ")";
  o << " sent " << packets(c.scratch);
  log_.write(core::LogLevel::trace, o.str());
}

size_t MpRdmaEngine::state_bytes() const {
  size_t n = GbnEngine::kStateBytes;
  for (const StateField& f : MpSender::extra_state()) n += f.bytes;
  for (const StateField& f : MpReceiver::extra_state(p_.bitmap_slots, p_.overflow_nack))
    n += f.bytes;
  return n;
}

void MpRdmaEngine::open(const ConnParams& params) {
  close(params.qpn);
  Conn& c = conns_[params.qpn];
  c.params = params;
  if (rx_impl_ || tx_impl_) {
    try {
      if (tx_impl_) tx_impl_->reserve(params.qpn);
      if (rx_impl_) rx_impl_->open(params.qpn, params.rq_psn);
    } catch (...) {
      if (tx_impl_) tx_impl_->release(params.qpn);
      conns_.erase(params.qpn);  // no half-open connection left behind
      throw;
    }
    c.rx_open = rx_impl_ != nullptr;
  }
  if (!rx_impl_) {
    c.rx.emplace(p_.bitmap_slots, params.rq_psn, p_.overflow_nack);
  }
}

void MpRdmaEngine::set_requester(const ConnParams& params) {
  Conn& c = conns_[params.qpn];
  c.params = params;
  MpSenderParams sp = p_.sender;
  // One virtual path: the QP's own UDP source port (its RoCEv2 entropy, e.g.
  // what a job's `via` chose), so the connection is a single-path MP-RDMA
  // flow, the paper's "SP-RDMA" (Fig. 15), on a path of its choice.
  if (sp.vp_mask == 0) sp.vp_base = params.udp_sport;
  c.tx.emplace(sp, params.sq_psn, rng_);
  if (tx_impl_) tx_impl_->start(params.qpn, *c.tx, sp, params.sq_psn);
  recount(c);
  c.fifo.clear();
  c.hold_at = kNever;
  c.retry_left = params.retry_cnt;
  c.rnr_left = params.rnr_retry;
  c.rtos_seen = 0;
}

void MpRdmaEngine::close(uint32_t qpn) {
  auto it = conns_.find(qpn);
  if (it == conns_.end()) return;
  uncount(it->second);
  if (it->second.rx_open) rx_impl_->close(qpn);
  if (tx_impl_) tx_impl_->release(qpn);
  conns_.erase(it);
}

void MpRdmaEngine::take(Conn& c) {
  for (const MpTx& t : c.scratch) c.fifo.push_back(t);
  c.scratch.clear();
}

void MpRdmaEngine::set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) {
  Conn& c = conn(qpn);
  const MpSender::Counters before = c.tx->counters();
  const bool was_recovering = c.tx->in_recovery();
  if (tx_impl_)
    tx_impl_->set_snd_max(qpn, *c.tx, snd_max, now, c.scratch);
  else
    c.tx->set_snd_max(snd_max, now, c.scratch);
  account(qpn, c, before, c.tx->counters());
  if (!c.scratch.empty() && log_.enabled(core::LogLevel::debug))
    log_tx(qpn, c, "start", before, was_recovering, " snd_max " + std::to_string(snd_max));
  take(c);
}

void MpRdmaEngine::mark_sync(uint32_t qpn, uint32_t psn) {
  Conn& c = conn(qpn);
  if (tx_impl_)
    tx_impl_->add_sync(qpn, *c.tx, psn);
  else
    c.tx->add_sync(psn);
}

TxGrant MpRdmaEngine::next_tx(uint32_t qpn, uint64_t now) {
  Conn& c = conn(qpn);
  TxGrant g;
  while (!c.fifo.empty()) {
    const MpTx t = c.fifo.front();
    if (t.at > now) {
      // Still in the RTL engine (nic.rtl_timing charged): ask again then.
      c.hold_at = t.at;
      g.held_until = t.at;
      break;
    }
    c.fifo.pop_front();
    // Acknowledged while it waited (a retransmission overtaken by an ACK):
    // the message may be gone, and the receiver has it.
    if (psn_diff(t.psn, c.tx->snd_una()) < 0) continue;
    g.send = true;
    g.psn = t.psn;
    g.udp_sport = t.vp;
    g.retransmit = t.retx;
    break;
  }
  return g;
}

void MpRdmaEngine::on_sent(uint32_t, uint32_t, uint32_t, uint64_t) {
  // The sender counted the packet as sent when it clocked it out.
}

AckResult MpRdmaEngine::on_ack(uint32_t qpn, const AckEvent& ev, uint64_t now) {
  Conn& c = conn(qpn);
  AckResult r;
  const uint32_t una = c.tx->snd_una();
  switch (ev.kind) {
    case AckEvent::Kind::nak_fatal:
      r.error = AckResult::Error::fatal_nak;
      return r;
    case AckEvent::Kind::ack:
    case AckEvent::Kind::nak_rnr:
      if (ev.has_ext) break;
      [[fallthrough]];
    default:
      // Sequence NAKs, NAKs without the trailer and READ/atomic responses
      // have no meaning here: an out-of-order responder sends extended ACKs,
      // extended RNR NAKs (rnr_nacks()) and fatal NAKs.
      return r;
  }
  MpAck a;
  a.vp = ev.ext.echo_vp;
  a.sack = ev.ext.sack;
  a.aack = ev.ext.aack;
  a.ece = ev.ext.ece;
  a.retx = ev.ext.retx;
  a.nack = ev.ext.nack;
  const MpSender::Counters before = c.tx->counters();
  const bool was_recovering = c.tx->in_recovery();
  const bool rnr = ev.kind == AckEvent::Kind::nak_rnr;
  const uint32_t backlog = static_cast<uint32_t>(c.fifo.size()) + ev.egress_backlog;
  auto ack = [&] {
    if (tx_impl_)
      tx_impl_->on_ack(qpn, *c.tx, a, now, c.scratch, backlog);
    else
      c.tx->on_ack(a, now, c.scratch, backlog);
  };
  auto rnr_wait = [&] {
    const uint64_t until = now + ev.rnr_delay_cycles;
    return tx_impl_ ? tx_impl_->on_rnr(qpn, *c.tx, a, until, now) : c.tx->on_rnr(a, until, now);
  };
  if (!rnr) {
    ack();
  } else if (rnr_wait() && c.params.rnr_retry != 7) {
    // A new wait spends one RNR retry (7: retry for ever), as on RoCEv2.
    if (c.rnr_left == 0) {
      account(qpn, c, before, c.tx->counters());
      r.error = AckResult::Error::rnr_exceeded;
      return r;
    }
    --c.rnr_left;
  }
  account(qpn, c, before, c.tx->counters());
  if (log_.enabled(core::LogLevel::debug)) {
    std::ostringstream d;
    d << (rnr ? " RNR" : "") << (a.nack ? " NACK" : "") << " vp 0x" << std::hex << a.vp << std::dec
      << " sack " << a.sack << " aack " << a.aack << (a.ece ? " ECE" : "")
      << (a.retx ? " ReTx" : "");
    log_tx(qpn, c, "ack", before, was_recovering, d.str());
  }
  take(c);
  r.progress = c.tx->snd_una() != una;
  if (r.progress) {
    c.retry_left = c.params.retry_cnt;
    c.rnr_left = c.params.rnr_retry;
  }
  r.tx_ready = !c.fifo.empty();
  return r;
}

uint64_t MpRdmaEngine::wake_at(uint32_t qpn) const {
  const Conn& c = conn(qpn);
  return c.tx ? std::min(c.tx->wake_at(), c.hold_at) : kNever;
}

AckResult MpRdmaEngine::on_timer(uint32_t qpn, uint64_t now) {
  Conn& c = conn(qpn);
  AckResult r;
  if (!c.tx) return r;
  if (c.hold_at <= now) {
    // The wake-up for a held packet, not a deadline of the sender's: no
    // operation for it (the golden model gets none either).
    c.hold_at = kNever;
    if (c.tx->wake_at() > now) {
      r.tx_ready = !c.fifo.empty();
      return r;
    }
  }
  const MpSender::Counters before = c.tx->counters();
  const bool was_recovering = c.tx->in_recovery();
  if (tx_impl_)
    tx_impl_->on_timer(qpn, *c.tx, now, c.scratch);
  else
    c.tx->on_timer(now, c.scratch);
  account(qpn, c, before, c.tx->counters());
  if (log_.enabled(core::LogLevel::debug) &&
      (!c.scratch.empty() || c.tx->counters().rtos != before.rtos))
    log_tx(qpn, c, "timer", before, was_recovering, "");
  take(c);
  const uint64_t rtos = c.tx->counters().rtos;
  if (rtos != c.rtos_seen) {
    // A retransmission timeout (not a burst or synchronise timer): spend one
    // retry; progress (an ACK moving snd_una) restores the budget.
    c.rtos_seen = rtos;
    r.rewound = true;
    if (c.retry_left == 0) {
      r.error = AckResult::Error::retry_exceeded;
      return r;
    }
    --c.retry_left;
  }
  r.tx_ready = !c.fifo.empty();
  return r;
}

uint32_t MpRdmaEngine::snd_una(uint32_t qpn) const { return conn(qpn).tx->snd_una(); }
uint32_t MpRdmaEngine::snd_nxt(uint32_t qpn) const { return conn(qpn).tx->snd_nxt(); }

RxVerdict MpRdmaEngine::classify(uint32_t, uint32_t, uint64_t) {
  throw std::logic_error("mprdma: classify() on an out-of-order engine");
}

AckDecision MpRdmaEngine::commit(uint32_t, uint32_t, bool, bool, uint64_t) {
  throw std::logic_error("mprdma: commit() on an out-of-order engine");
}

uint32_t MpRdmaEngine::epsn(uint32_t qpn) const {
  const Conn& c = conn(qpn);
  return c.rx_open ? rx_impl_->rcv_nxt(qpn) : c.rx->rcv_nxt();
}

RxOutcome MpRdmaEngine::on_data(uint32_t qpn, const RxPacket& p, uint64_t now) {
  Conn& c = conn(qpn);
  MpData d;
  d.psn = p.psn;
  d.vp = p.vp;
  d.ce = p.ce;
  d.retx = p.retx;
  d.tail = p.tail;
  d.completion = p.completion;
  d.sync = p.sync;
  d.ipsn = p.ipsn;
  const int32_t ood = psn_diff(p.psn & kPsnMask, epsn(qpn));
  MpRxResult m;
  if (c.rx_open) {
    const MpReceiver::Counters before = c.rx_counts;
    m = rx_impl_->on_data(qpn, d, now);
    MpReceiver::count(c.rx_counts, m, ood);
    account(qpn, c, before, c.rx_counts);
  } else {
    const MpReceiver::Counters before = c.rx->counters();
    m = c.rx->on_data(d);
    account(qpn, c, before, c.rx->counters());
  }
  // The packets rx_max_ood looks at: every one but duplicates (which
  // include every PSN below rcv_nxt).
  if (ood_ && ood >= 0 && m.verdict != MpRxResult::Verdict::duplicate) ood_->record(ood);
  if (log_.enabled(core::LogLevel::trace)) {
    const char* v = m.verdict == MpRxResult::Verdict::place       ? "placed"
                    : m.verdict == MpRxResult::Verdict::duplicate ? "duplicate"
                                                                  : "dropped";
    std::ostringstream o;
    o << "qp " << qpn << " data psn " << (p.psn & kPsnMask) << " vp 0x" << std::hex << p.vp
      << std::dec << (p.retx ? " ReTx" : "") << (p.ce ? " CE" : "") << " ood " << ood << ": " << v
      << ", rcv_nxt " << epsn(qpn);
    if (m.send_ack)
      o << (m.ack.nack ? "; NACK" : "; ACK") << " sack " << m.ack.sack << " aack " << m.ack.aack;
    log_.write(core::LogLevel::trace, o.str());
  }
  RxOutcome o;
  o.verdict = m.verdict == MpRxResult::Verdict::place       ? RxOutcome::Verdict::place
              : m.verdict == MpRxResult::Verdict::duplicate ? RxOutcome::Verdict::duplicate
                                                            : RxOutcome::Verdict::drop;
  o.send_ack = m.send_ack;
  o.ack.echo_vp = m.ack.vp;
  o.ack.sack = m.ack.sack;
  o.ack.aack = m.ack.aack;
  o.ack.ece = m.ack.ece;
  o.ack.retx = m.ack.retx;
  o.ack.nack = m.ack.nack;
  o.completed = std::move(m.completed);
  return o;
}

std::vector<uint32_t> MpRdmaEngine::qpns() const {
  std::vector<uint32_t> out;
  out.reserve(conns_.size());
  for (const auto& [qpn, c] : conns_) out.push_back(qpn);
  std::sort(out.begin(), out.end());
  return out;
}

const MpSender* MpRdmaEngine::sender(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.tx ? nullptr : &*it->second.tx;
}

const MpReceiver* MpRdmaEngine::receiver(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  return it == conns_.end() || !it->second.rx ? nullptr : &*it->second.rx;
}

const MpReceiver::Counters* MpRdmaEngine::receiver_counters(uint32_t qpn) const {
  auto it = conns_.find(qpn);
  if (it == conns_.end()) return nullptr;
  const Conn& c = it->second;
  return c.rx ? &c.rx->counters() : c.rx_open ? &c.rx_counts : nullptr;
}

}  // namespace mprdma::nic
