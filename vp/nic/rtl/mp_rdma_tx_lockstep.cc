#include "vp/nic/rtl/mp_rdma_tx_lockstep.h"

#include <sstream>
#include <stdexcept>

namespace mprdma::nic::rtl {

namespace {

std::string describe_op(uint64_t number, const TxOp& op) {
  std::ostringstream s;
  s << "#" << number << " " << tx_op_name(op.kind) << " row " << op.row << " at cycle " << op.now;
  const MpAck& a = op.ack;
  switch (op.kind) {
    case TxOpKind::init:
      s << " isn " << op.psn;
      break;
    case TxOpKind::set_max:
      s << " snd_max " << op.psn;
      break;
    case TxOpKind::ack:
    case TxOpKind::rnr:
      s << (a.nack ? " NACK" : " ACK") << " vp 0x" << std::hex << a.vp << std::dec << " sack "
        << a.sack << " aack " << a.aack << (a.ece ? " ece" : "") << (a.retx ? " retx" : "");
      if (op.kind == TxOpKind::ack) s << " backlog " << op.backlog;
      if (op.kind == TxOpKind::rnr) s << " until " << op.until;
      break;
    default:
      break;
  }
  return s.str();
}

std::string describe_counts(const MpSender::Counters& c) {
  std::ostringstream s;
  auto f = [&s](const char* n, uint64_t v) {
    if (v) s << " " << n << "=" << v;
  };
  f("acks", c.acks);
  f("ece_acks", c.ece_acks);
  f("pruned_acks", c.pruned_acks);
  f("nacks", c.nacks);
  f("recoveries", c.recoveries);
  f("retransmits", c.retransmits);
  f("early_retransmits", c.early_retransmits);
  f("rtos", c.rtos);
  f("probes", c.probes);
  f("burst_timer_sends", c.burst_timer_sends);
  f("window_reductions", c.window_reductions);
  f("restarts", c.restarts);
  f("sync_waits", c.sync_waits);
  f("rnr_nacks", c.rnr_nacks);
  f("rnr_waits", c.rnr_waits);
  return s.str().empty() ? " none" : s.str();
}

std::string describe_outcome(const TxOutcome& o) {
  std::ostringstream s;
  s << o.packets.size() << " packets [";
  for (size_t i = 0; i < o.packets.size(); ++i) {
    const MpTx& t = o.packets[i].tx;
    s << (i ? " " : "") << t.psn << "@0x" << std::hex << t.vp << std::dec << (t.retx ? "r" : "");
  }
  s << "], counts" << describe_counts(o.counts);
  if (o.kind == TxOpKind::rnr) s << ", rnr wait " << (o.rnr_fresh ? "started" : "not started");
  s << ", wake " << (o.wake == kNever ? std::string("never") : std::to_string(o.wake))
    << ", lfsr 0x" << std::hex << o.rng << std::dec << ", sync pending " << o.sync_pending;
  return s.str();
}

bool same_counts(const MpSender::Counters& a, const MpSender::Counters& b) {
  return a.acks == b.acks && a.ece_acks == b.ece_acks && a.pruned_acks == b.pruned_acks &&
         a.nacks == b.nacks && a.recoveries == b.recoveries && a.retransmits == b.retransmits &&
         a.early_retransmits == b.early_retransmits && a.rtos == b.rtos && a.probes == b.probes &&
         a.burst_timer_sends == b.burst_timer_sends && a.window_reductions == b.window_reductions &&
         a.restarts == b.restarts && a.sync_waits == b.sync_waits && a.rnr_nacks == b.rnr_nacks &&
         a.rnr_waits == b.rnr_waits;
}

MpSender::Counters minus(const MpSender::Counters& a, const MpSender::Counters& b) {
  MpSender::Counters d;
  d.acks = a.acks - b.acks;
  d.ece_acks = a.ece_acks - b.ece_acks;
  d.pruned_acks = a.pruned_acks - b.pruned_acks;
  d.nacks = a.nacks - b.nacks;
  d.recoveries = a.recoveries - b.recoveries;
  d.retransmits = a.retransmits - b.retransmits;
  d.early_retransmits = a.early_retransmits - b.early_retransmits;
  d.rtos = a.rtos - b.rtos;
  d.probes = a.probes - b.probes;
  d.burst_timer_sends = a.burst_timer_sends - b.burst_timer_sends;
  d.window_reductions = a.window_reductions - b.window_reductions;
  d.restarts = a.restarts - b.restarts;
  d.sync_waits = a.sync_waits - b.sync_waits;
  d.rnr_nacks = a.rnr_nacks - b.rnr_nacks;
  d.rnr_waits = a.rnr_waits - b.rnr_waits;
  return d;
}

}  // namespace

std::vector<std::string> context_diff(const MpSenderContext& g, const MpSenderContext& r) {
  std::vector<std::string> d;
  const auto a = g.fields(), b = r.fields();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second) d.push_back(a[i].first);
  return d;
}

MpTxLockstep::MpTxLockstep(const MpSenderParams& params, uint32_t seed, size_t history,
                           bool traceable)
    : params_(params), history_(history), rtl_(params, seed, traceable), rng_(seed) {}

const MpSender* MpTxLockstep::golden(uint32_t row) const {
  auto it = golden_.find(row);
  return it == golden_.end() ? nullptr : &it->second;
}

void MpTxLockstep::add_sync(uint32_t row, uint32_t psn) {
  auto it = golden_.find(row);
  if (it == golden_.end())
    throw std::logic_error("MpTxLockstep: add_sync on row " + std::to_string(row) +
                           ", which no init operation started");
  it->second.add_sync(psn);
  rtl_.add_sync(row, psn);
  sync_[row].push_back(psn & kPsnMask);
}

TxOutcome MpTxLockstep::run_golden(const TxOp& op) {
  TxOutcome o;
  o.kind = op.kind;
  o.row = op.row;
  if (op.kind == TxOpKind::init) {
    golden_.erase(op.row);
    MpSenderParams sp = params_;
    sp.vp_base = op.vp_base;
    golden_.emplace(op.row, MpSender(sp, op.psn, rng_));
  }
  auto it = golden_.find(op.row);
  if (it == golden_.end())
    throw std::logic_error("MpTxLockstep: a " + std::string(tx_op_name(op.kind)) +
                           " operation on row " + std::to_string(op.row) +
                           ", which no init operation started");
  MpSender& g = it->second;
  const MpSender::Counters before = g.counters();
  std::vector<MpTx> out;
  switch (op.kind) {
    case TxOpKind::set_max:
      g.set_snd_max(op.psn, op.now, out);
      break;
    case TxOpKind::ack:
      g.on_ack(op.ack, op.now, out, op.backlog);
      break;
    case TxOpKind::rnr:
      o.rnr_fresh = g.on_rnr(op.ack, op.until, op.now);
      break;
    case TxOpKind::timer:
      g.on_timer(op.now, out);
      break;
    case TxOpKind::init:
    case TxOpKind::read:
      break;
  }
  for (const MpTx& t : out) o.packets.push_back({t, {}, false, false});
  o.counts = minus(g.counters(), before);
  o.wake = g.wake_at();
  o.rng = rng_.state();
  o.sync_pending = g.sync_pending();
  o.context = g.context();
  return o;
}

std::optional<std::string> MpTxLockstep::run(const TxOp& op) {
  if (diverged_) throw std::logic_error("MpTxLockstep: the run already diverged");
  Replayable rp{op, rtl_.cycles(), rtl_.rng(), std::nullopt, sync_[op.row]};
  auto before = rtl_rows_.find(op.row);
  if (before != rtl_rows_.end() && op.kind != TxOpKind::init) rp.before = before->second;
  const Done d{ops_++, op, run_golden(op)};
  if (op.kind == TxOpKind::init) sync_.erase(op.row);
  const TxOutcome r = rtl_.run(op);
  // The FIFO as the RTL side has it now.
  auto& q = sync_[op.row];
  while (q.size() > r.sync_pending) q.pop_front();
  replay_.push_back(std::move(rp));
  if (replay_.size() > kReplayOps) replay_.pop_front();
  rtl_rows_[op.row] = r.context;
  last_ = r;

  std::vector<std::string> why;
  const TxOutcome& g = d.golden;
  if (g.packets.size() != r.packets.size()) why.push_back("number of packets");
  for (size_t i = 0; i < g.packets.size() && i < r.packets.size(); ++i) {
    const MpTx &a = g.packets[i].tx, &b = r.packets[i].tx;
    const std::string n = "packet " + std::to_string(i) + " ";
    if (a.psn != b.psn) why.push_back(n + "PSN");
    if (a.vp != b.vp) why.push_back(n + "path");
    if (a.retx != b.retx) why.push_back(n + "ReTx");
  }
  if (!same_counts(g.counts, r.counts)) why.push_back("counters");
  if (op.kind == TxOpKind::rnr && g.rnr_fresh != r.rnr_fresh) why.push_back("RNR wait started");
  if (g.wake != r.wake) why.push_back("next deadline");
  if (g.rng != r.rng) why.push_back("path LFSR");
  if (g.sync_pending != r.sync_pending) why.push_back("synchronise PSNs pending");
  for (auto& f : context_diff(g.context, r.context)) why.push_back("context " + f);

  auto& recent = recent_[op.row];
  std::optional<std::string> out;
  if (!why.empty()) {
    diverged_ = true;
    out = report(d, r, why);
  }
  recent.push_back(d);
  if (recent.size() > history_) recent.pop_front();
  return out;
}

std::string MpTxLockstep::report(const Done& d, const TxOutcome& rtl,
                                 const std::vector<std::string>& why) {
  std::ostringstream s;
  s << "lockstep divergence in the MP-RDMA sender at operation " << describe_op(d.number, d.op)
    << " (RTL cycle " << rtl_.cycles() << ")\n";
  s << "  differs in:";
  for (auto& w : why) s << " [" << w << "]";
  s << "\n  golden: " << describe_outcome(d.golden) << "\n  rtl:    " << describe_outcome(rtl)
    << "\n  context after the operation (golden | rtl):\n";
  const auto a = d.golden.context.fields(), b = rtl.context.fields();
  for (size_t i = 0; i < a.size(); ++i)
    s << "    " << (a[i].second == b[i].second ? "  " : "! ") << a[i].first << ": " << a[i].second
      << " | " << b[i].second << "\n";
  auto it = recent_.find(d.op.row);
  s << "  earlier operations on row " << d.op.row << ", oldest first:";
  if (it == recent_.end() || it->second.empty()) s << " none";
  s << "\n";
  if (it != recent_.end())
    for (auto& q : it->second)
      s << "    " << describe_op(q.number, q.op) << " -> " << describe_outcome(q.golden) << "\n";
  return s.str();
}

size_t MpTxLockstep::replay_fst(const std::string& path, uint64_t period_ps) const {
  if (!diverged_) throw std::logic_error("MpTxLockstep: replay_fst() before a divergence");
  if (replay_.empty()) return 0;
  MpTxRtl e(params_, replay_.front().rng_before, true);
  std::map<uint32_t, bool> loaded;
  for (const Replayable& r : replay_) {
    if (loaded.count(r.op.row)) continue;
    loaded[r.op.row] = true;
    if (r.before) e.load_context(r.op.row, *r.before);
  }
  e.advance_to(replay_.front().cycle);
  e.trace_fst(path, period_ps);
  for (const Replayable& r : replay_) {
    e.advance_to(r.cycle);
    e.set_sync(r.op.row, r.sync_before);
    e.run(r.op);
  }
  e.close_trace();
  return replay_.size();
}

}  // namespace mprdma::nic::rtl
