#include "vp/nic/transport/mp_rdma/mp_rdma_receiver.h"

#include <stdexcept>
#include <string>

namespace mprdma::nic {

MpReceiver::MpReceiver(uint32_t slots, uint32_t epsn, MpOverflowNack overflow_nack)
    : nxt_(epsn & kPsnMask), overflow_nack_(overflow_nack) {
  // A power of two divides the 2^24 PSN space, so slot = PSN mod L stays
  // continuous across the PSN wrap.
  if (slots == 0 || slots > (1u << 20) || (slots & (slots - 1)))
    throw std::invalid_argument(
        "MpReceiver: the bitmap needs a power-of-two number of slots "
        "up to 2^20, not " +
        std::to_string(slots));
  map_.assign(slots, MpSlot::empty);
}

std::vector<StateField> MpReceiver::extra_state(uint32_t slots, MpOverflowNack overflow_nack) {
  std::vector<StateField> f = {{"tracking bitmap (2 bits per slot)", (slots * 2 + 7) / 8},
                               {"rcv_nxt of the last synchronise NACK and its flag", 3}};
  if (overflow_nack == MpOverflowNack::once_per_head)
    f.push_back({"rcv_nxt of the last overflow NACK and its flag", 3});
  return f;
}

MpSlot MpReceiver::slot(uint32_t psn) const {
  const int32_t d = psn_diff(psn, nxt_);
  if (d < 0 || static_cast<uint32_t>(d) >= map_.size()) return MpSlot::empty;
  return map_[psn % map_.size()];
}

MpRxResult MpReceiver::on_data(const MpData& d) {
  const int32_t ood = psn_diff(d.psn & kPsnMask, nxt_);
  MpRxResult r = decide(d);
  count(counters_, r, ood);
  return r;
}

void MpReceiver::count(Counters& c, const MpRxResult& r, int32_t ood) {
  if (r.verdict == MpRxResult::Verdict::duplicate) {
    ++c.duplicates;
    return;
  }
  if (ood > 0 && static_cast<uint32_t>(ood) > c.max_ood) c.max_ood = static_cast<uint32_t>(ood);
  if (r.send_ack && r.ack.nack) ++c.nacks;
  if (r.verdict == MpRxResult::Verdict::drop) {
    ++(r.sync_drop ? c.sync_drops : c.overflow_drops);
    return;
  }
  ++c.placed;
  for (const auto& m : r.completed) {
    ++c.messages;
    if (m.second) ++c.completions;
  }
}

MpRxResult MpReceiver::decide(const MpData& d) {
  MpRxResult r;
  const uint32_t psn = d.psn & kPsnMask;
  const int32_t ood = psn_diff(psn, nxt_);
  auto ack_for = [&](uint32_t sack, bool nack) {
    r.send_ack = true;
    r.ack.vp = d.vp;
    r.ack.sack = sack;
    r.ack.aack = psn_add(nxt_, -1);
    r.ack.ece = d.ce;
    r.ack.retx = d.retx;
    r.ack.nack = nack;
  };
  if (ood < 0 || (static_cast<uint32_t>(ood) < map_.size() && at(psn) != MpSlot::empty)) {
    // Already here: ACK again so the sender's clock keeps going.
    r.verdict = MpRxResult::Verdict::duplicate;
    ack_for(psn, false);
    return r;
  }
  if (static_cast<uint32_t>(ood) >= map_.size()) {
    // Beyond the bitmap: the head-of-line packet is most likely lost. By
    // default every such drop is answered with a NACK naming rcv_nxt: the
    // dropped packet has left the network, and its NACK keeps the sender's
    // ACK clock going on its path (the sender rewinds on the first one
    // only). once_per_head NACKs the first drop per rcv_nxt: the paths of
    // the others lose their clock, and what they carried waits for the
    // burst timer or the RTO.
    r.verdict = MpRxResult::Verdict::drop;
    if (overflow_nack_ == MpOverflowNack::once_per_head) {
      if (overflow_nacked_ && overflow_nacked_for_ == nxt_) return r;
      overflow_nacked_ = true;
      overflow_nacked_for_ = nxt_;
    }
    ack_for(nxt_, true);
    return r;
  }
  if (d.sync && psn_diff(psn_add(psn, -static_cast<int64_t>(d.ipsn)), nxt_) > 0) {
    // A synchronise message overtook an earlier one: it must not touch
    // memory yet. Ask for it again, once while rcv_nxt stays where it is
    // (retransmissions may overtake again; NACKing every copy would rewind
    // the sender over and over). Later ones are recovered by the overflow
    // NACK or the RTO.
    r.verdict = MpRxResult::Verdict::drop;
    r.sync_drop = true;
    const uint32_t start = psn_add(psn, -static_cast<int64_t>(d.ipsn));
    if (!sync_nacked_ || sync_nacked_for_ != nxt_) {
      sync_nacked_ = true;
      sync_nacked_for_ = nxt_;
      ack_for(start, true);
    }
    return r;
  }
  at(psn) = !d.tail ? MpSlot::received : d.completion ? MpSlot::tail_completion : MpSlot::tail;
  r.verdict = MpRxResult::Verdict::place;
  complete_head(r);
  ack_for(psn, false);
  return r;
}

void MpReceiver::complete_head(MpRxResult& r) {
  // Head-of-line scan: the head moves over every packet that has arrived
  // in order, clearing its slot, and each Tail it passes completes the
  // message that ends there (all of whose packets are then in). The paper
  // moves the head "after the HoL message"; moving it packet by packet
  // gives the same completions in the same order, and lets a message
  // longer than L packets through (with the head held at its first packet
  // until its tail arrived, such a message could never be received, and
  // one of exactly L packets would stall everything behind it).
  for (;;) {
    MpSlot& s = at(nxt_);
    if (s == MpSlot::empty) return;
    if (s != MpSlot::received) {
      const bool completion = s == MpSlot::tail_completion;
      r.completed.emplace_back(nxt_, completion);
    }
    s = MpSlot::empty;
    nxt_ = psn_add(nxt_, 1);
  }
}

}  // namespace mprdma::nic
