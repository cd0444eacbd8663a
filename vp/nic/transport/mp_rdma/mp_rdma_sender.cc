#include "vp/nic/transport/mp_rdma/mp_rdma_sender.h"

#include <algorithm>

namespace mprdma::nic {

namespace {
constexpr uint32_t kOne = 1u << 16;  // one packet in Q16.16
}  // namespace

MpSender::MpSender(const MpSenderParams& params, uint32_t isn, MpRandom& rng)
    : p_(params),
      rng_(rng),
      una_(isn & kPsnMask),
      nxt_(isn & kPsnMask),
      max_(isn & kPsnMask),
      cwnd_q_(std::max<uint32_t>(params.iw, 1) << 16),
      ooh_(psn_add(isn, -1)),
      retx_(isn & kPsnMask),
      early_(isn & kPsnMask) {}

const std::vector<MpSender::Field>& MpSender::extra_state() {
  // Timestamps are 32-bit cycle counters compared with wrap-around in
  // hardware (17 s at 250 MHz); the model keeps 64 bits.
  static const std::vector<Field> fields = {
      {"cwnd (Q16.16 packets)", 4},
      {"inflate", 2},
      {"snd_ooh", 3},
      {"recovery", 3},
      {"snd_retx", 3},
      {"head named by the last rewinding NACK", 3},
      {"early_retx (FUSO pointer)", 3},
      {"flags: in recovery", 1},
      {"last send time (idle restart)", 4},
      {"burst timer", 4},
      {"next probing decision", 4},
      {"synchronise: previous message sent", 4},
  };
  return fields;
}

std::vector<std::pair<const char*, std::string>> MpSenderContext::fields() const {
  auto t = [](uint64_t v) { return v == kNever ? std::string("never") : std::to_string(v); };
  return {{"snd_una", std::to_string(una)},
          {"snd_nxt", std::to_string(nxt)},
          {"snd_max", std::to_string(max)},
          {"cwnd_q16", std::to_string(cwnd_q)},
          {"inflate", std::to_string(inflate)},
          {"snd_ooh", std::to_string(ooh)},
          {"recovering", std::to_string(recovering)},
          {"recovery", std::to_string(recovery)},
          {"snd_retx", std::to_string(retx)},
          {"nack_head", std::to_string(nack_head)},
          {"early_retx", std::to_string(early)},
          {"last_send", t(last_send)},
          {"burst_at", t(burst_at)},
          {"next_probe", t(next_probe)},
          {"rto_at", t(rto_at)},
          {"ever_sent", std::to_string(ever_sent)},
          {"hold_until", t(hold_until)},
          {"prev_msg_sent", t(prev_msg_sent)},
          {"sync_armed", std::to_string(sync_armed)}};
}

MpSenderContext MpSender::context() const {
  MpSenderContext c;
  c.una = una_;
  c.nxt = nxt_;
  c.max = max_;
  c.cwnd_q = cwnd_q_;
  c.inflate = inflate_;
  c.ooh = ooh_;
  c.recovering = recovering_;
  c.recovery = recovery_;
  c.retx = retx_;
  c.nack_head = nack_head_;
  c.early = early_;
  c.last_send = last_send_;
  c.burst_at = burst_at_;
  c.next_probe = next_probe_;
  c.rto_at = rto_at_;
  c.ever_sent = ever_sent_;
  c.hold_until = hold_until_;
  c.prev_msg_sent = prev_msg_sent_;
  c.sync_armed = sync_armed_;
  return c;
}

void MpSender::load(const MpSenderContext& c, const Counters& d, size_t sync_pending) {
  una_ = c.una;
  nxt_ = c.nxt;
  max_ = c.max;
  cwnd_q_ = c.cwnd_q;
  inflate_ = c.inflate;
  ooh_ = c.ooh;
  recovering_ = c.recovering;
  recovery_ = c.recovery;
  retx_ = c.retx;
  nack_head_ = c.nack_head;
  early_ = c.early;
  last_send_ = c.last_send;
  burst_at_ = c.burst_at;
  next_probe_ = c.next_probe;
  rto_at_ = c.rto_at;
  ever_sent_ = c.ever_sent;
  hold_until_ = c.hold_until;
  prev_msg_sent_ = c.prev_msg_sent;
  sync_armed_ = c.sync_armed;
  Counters& n = counters_;
  n.acks += d.acks;
  n.ece_acks += d.ece_acks;
  n.pruned_acks += d.pruned_acks;
  n.nacks += d.nacks;
  n.recoveries += d.recoveries;
  n.retransmits += d.retransmits;
  n.early_retransmits += d.early_retransmits;
  n.rtos += d.rtos;
  n.probes += d.probes;
  n.burst_timer_sends += d.burst_timer_sends;
  n.window_reductions += d.window_reductions;
  n.restarts += d.restarts;
  n.sync_waits += d.sync_waits;
  n.rnr_nacks += d.rnr_nacks;
  n.rnr_waits += d.rnr_waits;
  while (sync_psns_.size() > sync_pending) sync_psns_.pop_front();
}

int64_t MpSender::awnd() const {
  return static_cast<int64_t>(cwnd_q_ >> 16) + inflate_ - psn_diff(nxt_, una_);
}

void MpSender::cwnd_add_q(int64_t delta_q) {
  const int64_t c = static_cast<int64_t>(cwnd_q_) + delta_q;
  // One packet is the floor: the connection must keep an ACK clock.
  cwnd_q_ = static_cast<uint32_t>(std::clamp<int64_t>(c, kOne, int64_t{0xFFFF} << 16));
}

uint64_t MpSender::sync_delay() const {
  // delta_t = alpha * delta / (cwnd / RTT) = alpha * delta * RTT / cwnd.
  const uint64_t num = uint64_t{p_.sync_alpha_milli} * p_.delta * p_.rtt_cycles << 16;
  return num / (1000u * uint64_t{cwnd_q_});
}

bool MpSender::sync_blocked(uint32_t psn, uint64_t now) const {
  return !sync_psns_.empty() && sync_psns_.front() == psn && ever_sent_ &&
         now < prev_msg_sent_ + sync_delay();
}

void MpSender::add_sync(uint32_t psn) { sync_psns_.push_back(psn & kPsnMask); }

void MpSender::set_snd_max(uint32_t snd_max, uint64_t now, std::vector<MpTx>& out) {
  max_ = snd_max & kPsnMask;
  if (psn_diff(max_, nxt_) <= 0) return;
  if (una_ == nxt_ && !recovering_) {
    // No ACK will come to clock anything out.
    const bool idle = !ever_sent_ || now - last_send_ >= uint64_t{p_.idle_rtts} * p_.rtt_cycles;
    if (idle) {
      restart(now, out);
      return;
    }
    clock_out(static_cast<uint32_t>(std::clamp<int64_t>(awnd(), 0, p_.max_per_ack)), -1, now,
              Why::timer, out);
  }
  if (awnd() > 0 && burst_at_ == kNever) burst_at_ = now + p_.rtt_cycles / 2;
}

void MpSender::restart(uint64_t now, std::vector<MpTx>& out) {
  // Start (or restart after idle) from the initial window, each packet on
  // its own random virtual path.
  if (ever_sent_) ++counters_.restarts;
  cwnd_q_ = std::max<uint32_t>(p_.iw, 1) << 16;
  inflate_ = 0;
  clock_out(static_cast<uint32_t>(std::max<int64_t>(awnd(), 0)), -1, now, Why::start, out);
}

void MpSender::on_ack(const MpAck& a, uint64_t now, std::vector<MpTx>& out,
                      uint32_t egress_backlog) {
  ++counters_.acks;
  burst_at_ = kNever;
  // An ACK for nothing we sent is a protocol violation: ignore it.
  const uint32_t high = psn_add(nxt_, -1);
  if (psn_diff(a.aack, high) > 0 || (!a.nack && psn_diff(a.sack, high) > 0)) return;

  // inflate counts packets that left the network out of order: SACKed, or
  // dropped by the receiver and NACKed. snd_nxt - snd_una counts each PSN
  // once, so a retransmission's ACK or NACK (ReTx) must not inflate again.
  if (!a.retx) ++inflate_;
  advance_una(a.aack, now);
  if (a.nack) {
    ++counters_.nacks;
    // The receiver names the PSN it wants: go back to it (not below what
    // is acknowledged), and stay in recovery until snd_una passes snd_nxt
    // as it is now. Early retransmission resumes after what recovery covers.
    // Overflow NACKs (SACK = AACK + 1) come one per dropped packet: only
    // the first naming a head rewinds, the others clock out what recovery
    // sends next (a lost retransmission is the RTO's). A NACK naming a new
    // head (the hole was filled, the next one shows; or retransmissions
    // sent while the head was lower were dropped) rewinds to it. A
    // synchronise NACK names the message to resend, beyond the head: it
    // may rewind during recovery.
    uint32_t want = a.sack;
    if (psn_diff(want, una_) < 0) want = una_;
    const bool overflow = a.sack == psn_add(a.aack, 1);
    if (!recovering_) {
      ++counters_.recoveries;
      recovering_ = true;
      recovery_ = nxt_;
      retx_ = want;
      early_ = nxt_;
      nack_head_ = a.sack;
    } else if (overflow ? a.sack != nack_head_ : psn_diff(want, retx_) < 0) {
      retx_ = want;
      if (overflow) nack_head_ = a.sack;
    }
  } else {
    if (psn_diff(a.sack, ooh_) > 0) ooh_ = a.sack;
    // Out-of-order-aware path selection: an ACK from far behind the fastest
    // path names a slow path; shrink the window by one instead of growing
    // it, and send nothing on that path. Retransmissions were sent late on
    // purpose: exempt.
    if (p_.ooo_control && !a.retx &&
        psn_diff(a.sack, psn_add(ooh_, -static_cast<int64_t>(p_.delta))) < 0) {
      ++counters_.pruned_acks;
      cwnd_add_q(-static_cast<int64_t>(kOne));
      if (recovering_ && psn_diff(una_, recovery_) >= 0) recovering_ = false;
      // Nothing on this path; but when it was the last ACK in flight only
      // the burst timer can send what the window allows.
      if (awnd() > 0 && (recovering_ || psn_diff(nxt_, max_) < 0))
        burst_at_ = now + p_.rtt_cycles / 2;
      return;
    }
    if (a.ece) {
      ++counters_.ece_acks;
      cwnd_add_q(-static_cast<int64_t>(kOne / 2));
    } else if (egress_backlog <= p_.max_per_ack) {
      // (A packet or two on their way to the wire is ordinary pipelining.)
      cwnd_add_q(static_cast<int64_t>((uint64_t{1} << 32) / cwnd_q_));
    }
  }
  if (recovering_ && psn_diff(una_, recovery_) >= 0) recovering_ = false;

  // A NACK or the ACK of a retransmission stands for one packet that left
  // the network without opening the window: it clocks out at most one, on
  // its path. With two, the path of a NACK storm multiplied itself (every
  // packet sent on it was dropped and NACKed again) until one virtual path
  // carried the whole connection.
  const int64_t limit = a.nack || a.retx ? 1 : p_.max_per_ack;
  const int64_t room = awnd();
  clock_out(static_cast<uint32_t>(std::clamp<int64_t>(room, 0, limit)), a.vp, now, Why::ack, out);
  // Burst control: what the window allows beyond two packets waits for the
  // next ACKs, or half an RTT.
  if (awnd() > 0 && (recovering_ || psn_diff(nxt_, max_) < 0)) burst_at_ = now + p_.rtt_cycles / 2;
}

void MpSender::advance_una(uint32_t aack, uint64_t now) {
  const uint32_t new_una = psn_add(aack, 1);
  const int32_t moved = psn_diff(new_una, una_);
  if (moved <= 0) return;
  inflate_ = std::max<int32_t>(inflate_ - moved, 0);
  una_ = new_una;
  if (psn_diff(retx_, una_) < 0) retx_ = una_;
  if (psn_diff(early_, una_) < 0) early_ = una_;
  rto_at_ = una_ == nxt_ ? kNever : now + p_.rto_cycles;
}

bool MpSender::on_rnr(const MpAck& a, uint64_t until, uint64_t now) {
  ++counters_.rnr_nacks;
  const uint32_t high = psn_add(nxt_, -1);
  if (psn_diff(a.aack, high) > 0 || psn_diff(a.sack, high) > 0) return false;
  // The dropped packet left the network unplaced, like a NACKed one.
  if (!a.retx) ++inflate_;
  advance_una(a.aack, now);
  if (psn_diff(a.sack, una_) < 0) return false;  // a stale NACK
  const bool fresh = !holding(now);
  if (fresh) ++counters_.rnr_waits;
  hold_until_ = std::max(hold_until_, until);
  // Resend from snd_una, not from the NACKed packet: the receiver's
  // rcv_nxt may lie before it (a packet lost on the way), and until that
  // one arrives no message after it completes, so no RECV is consumed and
  // the application posts none: resending only from the NACKed packet
  // would meet the same RNR for ever.
  if (!recovering_) {
    ++counters_.recoveries;
    recovering_ = true;
    recovery_ = nxt_;
    early_ = nxt_;
    nack_head_ = a.sack;
  }
  retx_ = una_;
  // The wait replaces the burst timer and the RTO (nothing is lost yet).
  burst_at_ = kNever;
  rto_at_ = hold_until_ + p_.rto_cycles;
  return fresh;
}

bool MpSender::pick(MpTx& tx, uint64_t now) {
  if (holding(now)) return false;  // an RNR wait: nothing leaves
  if (recovering_ && psn_diff(retx_, recovery_) < 0) {
    tx = {retx_, 0, true};
    retx_ = psn_add(retx_, 1);
    ++counters_.retransmits;
    return true;
  }
  if (recovering_ && p_.strict_recovery) return false;
  if (psn_diff(nxt_, max_) < 0) {
    if (sync_blocked(nxt_, now)) {
      sync_armed_ = true;  // wake at its release time
      return false;
    }
    tx = {nxt_, 0, false};
    nxt_ = psn_add(nxt_, 1);
    return true;
  }
  // No new data (FUSO): resend, once each, what is still unacknowledged
  // although a later packet has been SACKed (overtaken: slow or lost),
  // rather than wait for the RTO.
  if (psn_diff(early_, una_) < 0) early_ = una_;
  if (psn_diff(early_, nxt_) < 0 && psn_diff(early_, ooh_) < 0) {
    tx = {early_, 0, true};
    early_ = psn_add(early_, 1);
    ++counters_.early_retransmits;
    return true;
  }
  return false;
}

void MpSender::clock_out(uint32_t n, int vp, uint64_t now, Why why, std::vector<MpTx>& out) {
  for (uint32_t k = 0; k < n; ++k) {
    MpTx tx;
    if (!pick(tx, now)) {
      if (!sync_psns_.empty() && sync_psns_.front() == nxt_ && psn_diff(nxt_, max_) < 0) {
        // A synchronise message waits for its release time.
        ++counters_.sync_waits;
      } else if (why == Why::ack && !holding(now) && p_.window_reduction) {
        // Use it or lose it: an ACK that could clock out a packet finds no
        // data, so the path it came from gives up that packet of window.
        ++counters_.window_reductions;
        cwnd_add_q(-static_cast<int64_t>(kOne));
      }
      return;
    }
    if (vp < 0) {
      tx.vp = random_vp();
    } else {
      tx.vp = static_cast<uint16_t>(vp);
      // Probing: once per RTT, with probability p, try a new random path.
      if (now >= next_probe_) {
        next_probe_ = now + p_.rtt_cycles;
        if (rng_.chance_ppm(p_.probe_ppm)) {
          tx.vp = random_vp();
          ++counters_.probes;
        }
      }
    }
    if (why == Why::timer && vp < 0) ++counters_.burst_timer_sends;
    sent(tx, now);
    out.push_back(tx);
  }
}

void MpSender::sent(const MpTx& tx, uint64_t now) {
  last_send_ = now;
  ever_sent_ = true;
  if (rto_at_ == kNever) rto_at_ = now + p_.rto_cycles;
  if (!tx.retx) {
    if (!sync_psns_.empty() && sync_psns_.front() == tx.psn) sync_psns_.pop_front();
    prev_msg_sent_ = now;
  }
}

uint64_t MpSender::wake_at() const {
  if (hold_until_) return hold_until_;
  uint64_t t = std::min(rto_at_, burst_at_);
  if (sync_armed_) t = std::min(t, prev_msg_sent_ + sync_delay());
  return t;
}

void MpSender::on_timer(uint64_t now, std::vector<MpTx>& out) {
  if (hold_until_) {
    if (holding(now)) return;
    // The RNR wait is over. No ACK is coming to clock anything out: send
    // what the window allows (at least the packet the NACK named) on random
    // paths, as after a timeout, and arm the RTO again.
    hold_until_ = 0;
    burst_at_ = kNever;
    rto_at_ = now + p_.rto_cycles;
    clock_out(static_cast<uint32_t>(std::max<int64_t>(awnd(), 1)), -1, now, Why::timer, out);
    return;
  }
  if (rto_at_ <= now) {
    if (una_ == nxt_) {
      rto_at_ = kNever;
    } else {
      // Retransmit everything unacknowledged, restarting the ACK clock from
      // the initial window on random paths; what was in flight counts as
      // gone (inflate covers it until ACKs move snd_una past it).
      ++counters_.rtos;
      recovering_ = true;
      recovery_ = nxt_;
      retx_ = una_;
      early_ = nxt_;
      cwnd_q_ = std::max<uint32_t>(p_.iw, 1) << 16;
      inflate_ = psn_diff(nxt_, una_);
      burst_at_ = kNever;
      rto_at_ = now + p_.rto_cycles;
      clock_out(static_cast<uint32_t>(std::max<int64_t>(awnd(), 0)), -1, now, Why::timer, out);
      return;
    }
  }
  if (burst_at_ <= now) {
    burst_at_ = kNever;
    clock_out(static_cast<uint32_t>(std::max<int64_t>(awnd(), 0)), -1, now, Why::timer, out);
  }
  if (sync_armed_ && !sync_blocked(nxt_, now)) {
    // The synchronise message is released: send what the window allows on
    // random paths (an ACK would have clocked it on its own path).
    sync_armed_ = false;
    clock_out(static_cast<uint32_t>(std::clamp<int64_t>(awnd(), 0, p_.max_per_ack)), -1, now,
              Why::timer, out);
  }
}

}  // namespace mprdma::nic
