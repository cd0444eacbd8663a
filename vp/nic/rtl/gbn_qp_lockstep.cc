#include "vp/nic/rtl/gbn_qp_lockstep.h"

#include <sstream>
#include <stdexcept>

namespace mprdma::nic::rtl {

namespace {

const char* kind_name(AckEvent::Kind k) {
  switch (k) {
    case AckEvent::Kind::ack:
      return "ACK";
    case AckEvent::Kind::nak_sequence:
      return "NAK(sequence)";
    case AckEvent::Kind::nak_rnr:
      return "NAK(RNR)";
    case AckEvent::Kind::nak_fatal:
      return "NAK(fatal)";
    case AckEvent::Kind::read_response:
      return "READ response";
    case AckEvent::Kind::atomic_ack:
      return "atomic ACK";
  }
  return "?";
}

const char* error_name(AckResult::Error e) {
  switch (e) {
    case AckResult::Error::none:
      return "none";
    case AckResult::Error::retry_exceeded:
      return "retry exceeded";
    case AckResult::Error::rnr_exceeded:
      return "RNR retry exceeded";
    case AckResult::Error::fatal_nak:
      return "fatal NAK";
  }
  return "?";
}

const char* verdict_name(RxVerdict v) {
  switch (v) {
    case RxVerdict::accept:
      return "accept";
    case RxVerdict::duplicate:
      return "duplicate";
    case RxVerdict::nak_sequence:
      return "NAK(sequence)";
    case RxVerdict::drop:
      return "drop";
  }
  return "?";
}

std::string describe_op(uint64_t number, const GbnOp& op) {
  std::ostringstream s;
  s << "#" << number << " " << gbn_op_name(op.kind) << " row " << op.row << " at cycle " << op.now;
  const ConnParams& c = op.params;
  switch (op.kind) {
    case GbnOpKind::open:
    case GbnOpKind::set_requester:
      s << " psn " << op.psn << " retry_cnt " << int(c.retry_cnt) << " rnr_retry "
        << int(c.rnr_retry) << " timeout " << c.ack_timeout_cycles << " sport 0x" << std::hex
        << c.udp_sport << std::dec << " coalesce " << c.ack_coalesce;
      break;
    case GbnOpKind::set_snd_max:
    case GbnOpKind::classify:
      s << " psn " << op.psn;
      break;
    case GbnOpKind::on_sent:
      s << " psn " << op.psn << " npsn " << op.npsn;
      break;
    case GbnOpKind::on_ack:
      s << " " << kind_name(op.ack) << " psn " << op.psn << " ack_limit " << op.ack_limit;
      if (op.ack == AckEvent::Kind::nak_rnr) s << " rnr_delay " << op.rnr_delay;
      break;
    case GbnOpKind::commit:
      s << " npsn " << op.npsn << (op.ack_req ? " ack_req" : "")
        << (op.implicit_ack ? " implicit" : "");
      break;
    default:
      break;
  }
  return s.str();
}

std::string describe_outcome(const GbnOutcome& o) {
  std::ostringstream s;
  switch (o.kind) {
    case GbnOpKind::next_tx:
      if (o.grant.send)
        s << "send psn " << o.grant.psn << " sport 0x" << std::hex << o.grant.udp_sport << std::dec
          << (o.grant.retransmit ? " (retransmit)" : "");
      else
        s << "no send";
      break;
    case GbnOpKind::on_ack:
    case GbnOpKind::on_timer:
      s << (o.result.progress ? "progress " : "") << (o.result.accept ? "accept " : "")
        << (o.result.rewound ? "rewound " : "") << "error " << error_name(o.result.error);
      break;
    case GbnOpKind::classify:
      s << verdict_name(o.verdict);
      break;
    case GbnOpKind::commit:
      s << (o.decision.send ? "ACK " + std::to_string(o.decision.psn) : std::string("no ACK"));
      break;
    default:
      s << "(no result)";
  }
  s << ", wake " << (o.wake == kNever ? std::string("never") : std::to_string(o.wake));
  return s.str();
}

}  // namespace

std::vector<std::string> context_diff(const GbnContext& g, const GbnContext& r) {
  std::vector<std::string> d;
  const auto a = g.fields(), b = r.fields();
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second) d.push_back(a[i].first);
  return d;
}

GbnQpLockstep::GbnQpLockstep(uint64_t go_back_delay_cycles, size_t history, bool traceable)
    : history_(history),
      rtl_(go_back_delay_cycles, traceable),
      golden_(go_back_delay_cycles),
      go_back_delay_(go_back_delay_cycles) {}

GbnOutcome GbnQpLockstep::run_golden(const GbnOp& op) {
  GbnOutcome o;
  o.kind = op.kind;
  o.row = op.row;
  ConnParams cp = op.params;
  cp.qpn = op.row;
  if (op.kind == GbnOpKind::open) {
    cp.rq_psn = op.psn;
    golden_.open(cp);
    started_[op.row] = true;
  } else if (op.kind == GbnOpKind::set_requester) {
    if (!started_.count(op.row))
      throw std::logic_error("GbnQpLockstep: set_requester on row " + std::to_string(op.row) +
                             " before open (the RTL row would hold no defined state)");
    cp.sq_psn = op.psn;
    golden_.set_requester(cp);
  } else if (!started_.count(op.row)) {
    throw std::logic_error("GbnQpLockstep: a " + std::string(gbn_op_name(op.kind)) +
                           " operation on row " + std::to_string(op.row) +
                           ", which no open operation started");
  }
  const uint32_t q = op.row;
  switch (op.kind) {
    case GbnOpKind::set_snd_max:
      golden_.set_snd_max(q, op.psn, op.now);
      break;
    case GbnOpKind::next_tx:
      o.grant = golden_.next_tx(q, op.now);
      break;
    case GbnOpKind::on_sent:
      golden_.on_sent(q, op.psn, op.npsn, op.now);
      break;
    case GbnOpKind::on_ack: {
      AckEvent a;
      a.kind = op.ack;
      a.psn = op.psn;
      a.ack_limit = op.ack_limit;
      a.rnr_delay_cycles = op.rnr_delay;
      o.result = golden_.on_ack(q, a, op.now);
      break;
    }
    case GbnOpKind::on_timer:
      o.result = golden_.on_timer(q, op.now);
      break;
    case GbnOpKind::classify:
      o.verdict = golden_.classify(q, op.psn, op.now);
      break;
    case GbnOpKind::commit:
      o.decision = golden_.commit(q, op.npsn, op.ack_req, op.implicit_ack, op.now);
      break;
    case GbnOpKind::nak_sent:
      golden_.nak_sent(q);
      break;
    default:
      break;
  }
  o.wake = golden_.wake_at(q);
  o.context = golden_.context(q);
  return o;
}

std::optional<std::string> GbnQpLockstep::step(const GbnOp* op) {
  if (diverged_) throw std::logic_error("GbnQpLockstep: the run already diverged");
  if (op) {
    GbnOp in = *op;
    in.psn &= kPsnMask;
    in.npsn &= kPsnMask;
    in.ack_limit &= kPsnMask;
    pending_.push_back({issued_++, in, run_golden(in), rtl_.cycles()});
  }
  const std::optional<GbnOutcome> out = rtl_.clock(op);
  if (!out) return std::nullopt;
  if (pending_.empty()) {
    diverged_ = true;
    return std::string("lockstep: the go-back-N RTL gave an outcome for an operation never issued");
  }
  const Pending p = pending_.front();
  pending_.pop_front();
  auto r = compare(p, *out);
  auto before = rtl_rows_.find(p.op.row);
  replay_.push_back(
      {p, before == rtl_rows_.end() ? std::nullopt : std::optional<GbnContext>(before->second)});
  if (replay_.size() > kReplayOps) replay_.pop_front();
  rtl_rows_[p.op.row] = out->context;
  last_ = out;
  auto& recent = recent_[p.op.row];
  recent.push_back(p);
  if (recent.size() > history_) recent.pop_front();
  ++compared_;
  if (r) diverged_ = true;
  return r;
}

size_t GbnQpLockstep::replay_fst(const std::string& path, uint64_t period_ps) const {
  if (!diverged_) throw std::logic_error("GbnQpLockstep: replay_fst() before a divergence");
  GbnQpRtl e(go_back_delay_, true);
  std::map<uint32_t, bool> loaded;
  for (const Replayable& r : replay_) {
    if (loaded.count(r.p.op.row)) continue;
    loaded[r.p.op.row] = true;
    if (r.before) e.load_context(r.p.op.row, *r.before);
  }
  if (!replay_.empty()) e.advance_to(replay_.front().p.cycle);
  e.trace_fst(path, period_ps);
  // Back-to-back operations stay back to back (forwarding); between the
  // others the engine drains and idles.
  for (size_t i = 0; i < replay_.size(); ++i) {
    e.advance_to(replay_[i].p.cycle);
    e.clock(&replay_[i].p.op);
    if (i + 1 == replay_.size() || replay_[i + 1].p.cycle > e.cycles()) e.clock(nullptr);
  }
  e.clock(nullptr);
  e.close_trace();
  return replay_.size();
}

std::optional<std::string> GbnQpLockstep::drain() {
  while (!pending_.empty()) {
    auto r = step(nullptr);
    if (r) return r;
  }
  return std::nullopt;
}

std::optional<std::string> GbnQpLockstep::compare(const Pending& p, const GbnOutcome& rtl) {
  const GbnOutcome& g = p.golden;
  std::vector<std::string> why;
  if (rtl.kind != g.kind || rtl.row != p.op.row) why.push_back("operation or row");
  switch (g.kind) {
    case GbnOpKind::next_tx:
      if (g.grant.send != rtl.grant.send || g.grant.psn != rtl.grant.psn ||
          g.grant.udp_sport != rtl.grant.udp_sport || g.grant.retransmit != rtl.grant.retransmit)
        why.push_back("grant");
      break;
    case GbnOpKind::on_ack:
    case GbnOpKind::on_timer:
      if (g.result.progress != rtl.result.progress) why.push_back("progress");
      if (g.result.accept != rtl.result.accept) why.push_back("accept");
      if (g.result.rewound != rtl.result.rewound) why.push_back("rewound");
      if (g.result.error != rtl.result.error) why.push_back("error");
      break;
    case GbnOpKind::classify:
      if (g.verdict != rtl.verdict) why.push_back("verdict");
      break;
    case GbnOpKind::commit:
      if (g.decision.send != rtl.decision.send || g.decision.psn != rtl.decision.psn)
        why.push_back("ACK decision");
      break;
    default:
      break;
  }
  if (g.wake != rtl.wake) why.push_back("next deadline");
  for (auto& f : context_diff(g.context, rtl.context)) why.push_back("context " + f);
  if (why.empty()) return std::nullopt;
  return report(p, rtl, why);
}

std::string GbnQpLockstep::report(const Pending& p, const GbnOutcome& rtl,
                                  const std::vector<std::string>& why) {
  std::ostringstream s;
  s << "lockstep divergence in the go-back-N engine at operation " << describe_op(p.number, p.op)
    << " (RTL cycle " << rtl_.cycles() << ")\n  differs in:";
  for (auto& w : why) s << " [" << w << "]";
  s << "\n  golden: " << describe_outcome(p.golden) << "\n  rtl:    " << describe_outcome(rtl)
    << "\n  context after the operation (golden | rtl):\n";
  const auto a = p.golden.context.fields(), b = rtl.context.fields();
  for (size_t i = 0; i < a.size(); ++i)
    s << "    " << (a[i].second == b[i].second ? "  " : "! ") << a[i].first << ": " << a[i].second
      << " | " << b[i].second << "\n";
  auto it = recent_.find(p.op.row);
  s << "  earlier operations on row " << p.op.row << ", oldest first:";
  if (it == recent_.end() || it->second.empty()) s << " none";
  s << "\n";
  if (it != recent_.end())
    for (auto& q : it->second)
      s << "    " << describe_op(q.number, q.op) << " -> " << describe_outcome(q.golden) << "\n";
  return s.str();
}

}  // namespace mprdma::nic::rtl
