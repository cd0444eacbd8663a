#include "vp/nic/rtl/mp_rdma_rx_lockstep.h"

#include <sstream>
#include <stdexcept>

namespace mprdma::nic::rtl {

namespace {

const char* verdict_name(MpRxResult::Verdict v) {
  switch (v) {
    case MpRxResult::Verdict::place:
      return "place";
    case MpRxResult::Verdict::duplicate:
      return "duplicate";
    case MpRxResult::Verdict::drop:
      return "drop";
  }
  return "?";
}

const char* slot_name(MpSlot s) {
  switch (s) {
    case MpSlot::empty:
      return "empty";
    case MpSlot::received:
      return "received";
    case MpSlot::tail:
      return "tail";
    case MpSlot::tail_completion:
      return "tail+completion";
  }
  return "?";
}

std::string describe_op(uint64_t number, const RxOp& op) {
  std::ostringstream s;
  const MpData& d = op.data;
  s << "#" << number << " " << rx_op_name(op.kind) << " row " << op.row;
  if (op.kind == RxOpKind::init) s << " epsn " << d.psn;
  if (op.kind == RxOpKind::data)
    s << " psn " << d.psn << " vp 0x" << std::hex << d.vp << std::dec << " ipsn " << d.ipsn
      << (d.ce ? " ce" : "") << (d.retx ? " retx" : "") << (d.tail ? " tail" : "")
      << (d.completion ? " completion" : "") << (d.sync ? " sync" : "");
  return s.str();
}

std::string describe_outcome(const RxOutcome& o) {
  std::ostringstream s;
  if (o.kind != RxOpKind::data) return "(no decision)";
  const MpRxResult& r = o.result;
  s << verdict_name(r.verdict) << (r.sync_drop ? " (synchronise)" : "") << ", ood " << o.ood;
  if (r.send_ack)
    s << ", " << (r.ack.nack ? "NACK" : "ACK") << " vp 0x" << std::hex << r.ack.vp << std::dec
      << " sack " << r.ack.sack << " aack " << r.ack.aack << (r.ack.ece ? " ece" : "")
      << (r.ack.retx ? " retx" : "");
  else
    s << ", no ACK";
  s << ", completed [";
  for (size_t i = 0; i < r.completed.size(); ++i)
    s << (i ? " " : "") << r.completed[i].first << (r.completed[i].second ? "c" : "");
  s << "]";
  return s.str();
}

}  // namespace

std::vector<std::string> context_diff(const MpReceiverContext& g, const MpReceiverContext& r) {
  std::vector<std::string> d;
  if (g.rcv_nxt != r.rcv_nxt) d.push_back("rcv_nxt");
  if (g.sync_nacked != r.sync_nacked) d.push_back("sync_nacked");
  if (g.sync_nacked_for != r.sync_nacked_for) d.push_back("sync_nacked_for");
  if (g.overflow_nacked != r.overflow_nacked) d.push_back("overflow_nacked");
  if (g.overflow_nacked_for != r.overflow_nacked_for) d.push_back("overflow_nacked_for");
  if (g.slots.size() != r.slots.size()) {
    d.push_back("bitmap length");
    return d;
  }
  for (size_t i = 0; i < g.slots.size(); ++i)
    if (g.slots[i] != r.slots[i]) d.push_back("bitmap slot " + std::to_string(i));
  return d;
}

MpRxLockstep::MpRxLockstep(MpOverflowNack overflow_nack, size_t history, bool traceable)
    : mode_(overflow_nack), history_(history), rtl_(overflow_nack, traceable) {}

const MpReceiver* MpRxLockstep::golden(uint32_t row) const {
  auto it = golden_.find(row);
  return it == golden_.end() ? nullptr : &it->second;
}

RxOutcome MpRxLockstep::run_golden(const RxOp& op) {
  RxOutcome o;
  o.kind = op.kind;
  o.row = op.row;
  if (op.kind == RxOpKind::init) {
    golden_.erase(op.row);
    golden_.emplace(op.row, MpReceiver(MpRxRtl::slots(), op.data.psn, mode_));
  }
  auto it = golden_.find(op.row);
  if (it == golden_.end())
    throw std::logic_error("MpRxLockstep: a " + std::string(rx_op_name(op.kind)) +
                           " operation on row " + std::to_string(op.row) +
                           ", which no init operation started");
  MpReceiver& g = it->second;
  if (op.kind == RxOpKind::data) {
    o.ood = (op.data.psn - g.rcv_nxt()) & kPsnMask;
    o.result = g.on_data(op.data);
  }
  o.context = g.context();
  return o;
}

std::optional<std::string> MpRxLockstep::step(const RxOp* op) {
  if (diverged_) throw std::logic_error("MpRxLockstep: the run already diverged");
  if (op) {
    RxOp in = *op;
    in.data.psn &= kPsnMask;
    pending_.push_back({issued_++, in, run_golden(in), rtl_.cycles()});
  }
  const std::optional<RxOutcome> out = rtl_.clock(op);
  if (!out) return std::nullopt;
  if (pending_.empty()) {
    diverged_ = true;
    return std::string("lockstep: the RTL gave an outcome for an operation never issued (row ") +
           std::to_string(out->row) + ")";
  }
  const Pending p = pending_.front();
  pending_.pop_front();
  auto r = compare(p, *out);
  auto before = rtl_rows_.find(p.op.row);
  replay_.push_back({p, before == rtl_rows_.end()
                            ? std::nullopt
                            : std::optional<MpReceiverContext>(before->second)});
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

size_t MpRxLockstep::replay_fst(const std::string& path, uint64_t period_ps) const {
  if (!diverged_) throw std::logic_error("MpRxLockstep: replay_fst() before a divergence");
  MpRxRtl e(mode_, true);
  // Each row from its state before its first replayed operation.
  std::map<uint32_t, bool> loaded;
  for (const Replayable& r : replay_) {
    if (loaded.count(r.p.op.row)) continue;
    loaded[r.p.op.row] = true;
    if (r.before) e.load_context(r.p.op.row, *r.before);
  }
  if (!replay_.empty()) e.advance_to(replay_.front().p.cycle);
  e.trace_fst(path, period_ps);
  // Back-to-back operations stay back to back (the forwarding path is
  // what they exercise); between the others the engine drains and idles.
  for (size_t i = 0; i < replay_.size(); ++i) {
    e.advance_to(replay_[i].p.cycle);
    e.clock(&replay_[i].p.op);
    if (i + 1 == replay_.size() || replay_[i + 1].p.cycle > e.cycles()) e.clock(nullptr);
  }
  e.clock(nullptr);
  e.close_trace();
  return replay_.size();
}

std::optional<std::string> MpRxLockstep::drain() {
  while (!pending_.empty()) {
    auto r = step(nullptr);
    if (r) return r;
  }
  return std::nullopt;
}

std::optional<std::string> MpRxLockstep::compare(const Pending& p, const RxOutcome& rtl) {
  const RxOutcome& g = p.golden;
  std::vector<std::string> why;
  if (rtl.kind != g.kind || rtl.row != p.op.row) why.push_back("operation or row");
  if (g.kind == RxOpKind::data) {
    const MpRxResult &a = g.result, &b = rtl.result;
    if (a.verdict != b.verdict) why.push_back("verdict");
    if (a.verdict == MpRxResult::Verdict::drop && a.sync_drop != b.sync_drop)
      why.push_back("drop reason");
    if (g.ood != rtl.ood) why.push_back("ood");
    if (a.send_ack != b.send_ack) why.push_back("ACK sent");
    if (a.send_ack && b.send_ack) {
      if (a.ack.nack != b.ack.nack) why.push_back("ACK nack");
      if (a.ack.vp != b.ack.vp) why.push_back("ACK vp");
      if (a.ack.sack != b.ack.sack) why.push_back("ACK sack");
      if (a.ack.aack != b.ack.aack) why.push_back("ACK aack");
      if (a.ack.ece != b.ack.ece) why.push_back("ACK ece");
      if (a.ack.retx != b.ack.retx) why.push_back("ACK retx");
    }
    if (a.completed != b.completed) why.push_back("completed messages");
  }
  for (auto& f : context_diff(g.context, rtl.context)) why.push_back("context " + f);
  if (why.empty()) return std::nullopt;
  return report(p, rtl, why);
}

std::string MpRxLockstep::report(const Pending& p, const RxOutcome& rtl,
                                 const std::vector<std::string>& why) {
  std::ostringstream s;
  s << "lockstep divergence in the MP-RDMA receiver at operation " << describe_op(p.number, p.op)
    << " (RTL cycle " << rtl_.cycles() << ")\n";
  s << "  differs in:";
  for (auto& w : why) s << " [" << w << "]";
  s << "\n  golden: " << describe_outcome(p.golden) << "\n  rtl:    " << describe_outcome(rtl)
    << "\n  context after the operation (golden | rtl):\n";
  const MpReceiverContext &g = p.golden.context, &r = rtl.context;
  auto line = [&](const std::string& name, const std::string& a, const std::string& b) {
    s << "    " << (a == b ? "  " : "! ") << name << ": " << a << " | " << b << "\n";
  };
  line("rcv_nxt", std::to_string(g.rcv_nxt), std::to_string(r.rcv_nxt));
  line("sync_nacked", std::to_string(g.sync_nacked), std::to_string(r.sync_nacked));
  line("sync_nacked_for", std::to_string(g.sync_nacked_for), std::to_string(r.sync_nacked_for));
  line("overflow_nacked", std::to_string(g.overflow_nacked), std::to_string(r.overflow_nacked));
  line("overflow_nacked_for", std::to_string(g.overflow_nacked_for),
       std::to_string(r.overflow_nacked_for));
  for (size_t i = 0; i < g.slots.size() && i < r.slots.size(); ++i)
    if (g.slots[i] != MpSlot::empty || r.slots[i] != MpSlot::empty)
      line("bitmap slot " + std::to_string(i), slot_name(g.slots[i]), slot_name(r.slots[i]));
  s << "  (bitmap slots empty in both are not listed)\n";
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
