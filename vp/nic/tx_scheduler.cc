#include "vp/nic/tx_scheduler.h"

#include <memory>
#include <stdexcept>

#include "vp/nic/processing_units.h"

namespace mprdma::nic {

TxScheduler::TxScheduler(sc_core::sc_module_name name, const NicCore& core)
    : sc_core::sc_module(name),
      core_(core),
      calendar_("calendar"),
      depth_(core.cfg.tx_pipeline_depth),
      packets_(core.env.stats.counter(core.stat("tx.packets"), "packets",
                                      "Packets scheduled for transmission")),
      stalls_(core.env.stats.counter(core.stat("tx.pipeline_full"), "events",
                                     "Times the scheduler waited for a free pipeline slot")) {}

void TxScheduler::set_sources(TxSource* responder, TxSource* requester) {
  responder_ = responder;
  requester_ = requester;
}

void TxScheduler::reset() {
  ++generation_;
  active_.clear();
  is_active_.clear();
  pipeline_.clear();
  stepping_ = false;
  next_ip_id_ = 0;
}

void TxScheduler::activate(uint32_t qpn) {
  if (is_active_.insert(qpn).second) active_.push_back(qpn);
  kick();
}

void TxScheduler::kick() {
  if (stepping_ || active_.empty()) return;
  if (!room()) {
    ++stalls_;
    return;  // pop() kicks again when a slot frees
  }
  stepping_ = true;
  const uint64_t gen = generation_;
  calendar_.at(core_.clock.after_cycles(static_cast<uint64_t>(core_.cfg.latency.tx_schedule)),
               [this, gen] {
                 if (gen == generation_) step();
               });
}

void TxScheduler::step() {
  stepping_ = false;
  // One full round at most: each QP gets one chance to emit a packet.
  for (size_t tries = active_.size(); tries > 0 && room(); --tries) {
    const uint32_t qpn = active_.front();
    active_.pop_front();
    if (gate_ && !gate_(qpn)) {
      is_active_.erase(qpn);  // the gate activates it again
      continue;
    }
    serving_ = true;
    serving_qpn_ = qpn;
    const bool sent =
        (responder_ && responder_->try_emit(qpn)) || (requester_ && requester_->try_emit(qpn));
    serving_ = false;
    if (sent) {
      // It may have more: back to the end of the round.
      active_.push_back(qpn);
      ++packets_;
      kick();
      return;
    }
    is_active_.erase(qpn);
  }
  kick();
}

TxScheduler::Slot TxScheduler::reserve(net::RoceFields& f) {
  if (!room()) throw std::logic_error("TxScheduler::reserve without room");
  // The packet is built on the QP's PU (a reserve outside a turn, which the
  // sources do not make, would cost nothing).
  const sc_core::sc_time built =
      serving_ ? core_.pus.run(serving_qpn_, uarch::PuOp::tx_packet) : sc_core::sc_time_stamp();
  pipeline_.push_back(Entry{next_slot_, false, nullptr, built});
  f.ip_id = next_ip_id_++;  // uint16_t: wraps from 65535 to 0
  return next_slot_++;
}

void TxScheduler::fill(Slot slot, net::PacketPtr pkt) {
  for (Entry& e : pipeline_)
    if (e.slot == slot) {
      e.pkt = std::move(pkt);
      if (e.built > sc_core::sc_time_stamp()) {
        const uint64_t gen = generation_;
        calendar_.at(e.built, [this, slot, gen] {
          if (gen == generation_) mark_done(slot);
        });
      } else {
        mark_done(slot);
      }
      return;
    }
  // The slot was dropped by a reset: the packet is discarded.
}

void TxScheduler::mark_done(Slot slot) {
  for (Entry& e : pipeline_)
    if (e.slot == slot) {
      e.done = true;
      if (mac_kick_ && pipeline_.front().done) mac_kick_();
      return;
    }
}

void TxScheduler::cancel(Slot slot) { fill(slot, nullptr); }

net::PacketPtr TxScheduler::pop() {
  while (!pipeline_.empty() && pipeline_.front().done) {
    net::PacketPtr pkt = std::move(pipeline_.front().pkt);
    pipeline_.pop_front();
    kick();
    if (pkt) return pkt;  // cancelled slots are skipped
  }
  return nullptr;
}

}  // namespace mprdma::nic
