#include "vp/nic/mac.h"

#include <algorithm>

#include "vp/net/cnp.h"
#include "vp/net/mp_ext.h"
#include "vp/net/pfc.h"

namespace mprdma::nic {

Mac::Mac(sc_core::sc_module_name name, const NicCore& core, TxScheduler& tx)
    : sc_core::sc_module(name),
      core_(core),
      tx_(tx),
      calendar_("calendar"),
      log_(core::Log::channel("nic." + core.cfg.name + ".mac")),
      tx_packets_(core.env.stats.counter(core.stat("mac.tx_packets"), "packets", "Frames sent")),
      tx_bytes_(core.env.stats.counter(core.stat("mac.tx_bytes"), "bytes",
                                       "Frame bytes sent (without FCS, preamble, IFG)")),
      rx_packets_(core.env.stats.counter(core.stat("mac.rx_packets"), "packets",
                                         "Frames received and accepted")),
      rx_bytes_(core.env.stats.counter(core.stat("mac.rx_bytes"), "bytes",
                                       "Frame bytes received and accepted")),
      rx_drops_(core.env.stats.counter(core.stat("mac.rx_drops"), "packets",
                                       "Frames dropped by the receive checks")),
      rx_queue_max_(core.env.stats.counter(core.stat("mac.rx_queue_max"), "packets",
                                           "Largest receive queue seen")),
      rx_stalls_(core.env.stats.counter(core.stat("mac.rx_stalls"), "packets",
                                        "Received packets that stalled the receive pipeline "
                                        "(their QP context was not on chip)")),
      pause_rx_(core.env.stats.counter(core.stat("mac.pause_rx"), "frames",
                                       "PFC PAUSE frames received (XOFF and XON)")),
      ce_rx_(core.env.stats.counter(core.stat("mac.ce_rx"), "packets",
                                    "Accepted frames marked Congestion Experienced (ECN 11)")) {
  tx_.set_mac_kick([this] { kick(); });
}

void Mac::attach(net::EthMediumIf* link, int side) {
  link_ = link;
  side_ = side;
  link_->attach(side, this);
}

void Mac::reset() {
  rx_queue_.clear();
  rx_busy_ = false;
  rx_stalled_ = false;
  ++rx_epoch_;
  // The held packet belongs to the pipeline the reset discarded. The pause
  // state is the link partner's and survives a device reset.
  held_.reset();
}

bool Mac::paused(uint8_t prio) const {
  return prio < paused_until_.size() && paused_until_[prio] > sc_core::sc_time_stamp();
}

void Mac::kick() {
  if (!link_ || tx_waiting_) return;
  if (!link_->idle(side_)) {
    tx_waiting_ = true;
    calendar_.at(link_->idle_at(side_), [this] {
      tx_waiting_ = false;
      kick();
    });
    return;
  }
  if (!held_) {
    held_ = tx_.pop();
    if (!held_) return;
    // The class PFC acts on: DSCP >> 3, as the switches classify.
    const auto& d = held_->data;
    if (d.size() > net::kIpOffset + 1 && d[12] == (net::kEtherTypeIpv4 >> 8) &&
        d[13] == (net::kEtherTypeIpv4 & 0xFF))
      held_->priority = static_cast<uint8_t>(d[net::kIpOffset + 1] >> 5);
  }
  if (paused(held_->priority)) {
    // Wait for the pause to expire; an XON calls kick() earlier.
    const uint64_t gen = ++pause_gen_;
    calendar_.at(paused_until_[held_->priority], [this, gen] {
      if (gen == pause_gen_) kick();
    });
    return;
  }
  net::PacketPtr pkt = std::move(held_);
  pkt->id = ++packet_ids_;
  pkt->birth_ps = sc_core::sc_time_stamp().value();
  ++tx_packets_;
  tx_bytes_.add(pkt->data.size());
  const sc_core::sc_time free_at = link_->transmit(side_, std::move(pkt));
  tx_waiting_ = true;
  calendar_.at(free_at, [this] {
    tx_waiting_ = false;
    kick();
  });
}

void Mac::on_pause(const net::Packet& pkt) {
  const auto f = net::parse_pfc(pkt);
  if (!f) {
    ++rx_drops_;
    MPR_LOG(log_, info, "dropped MAC Control frame that is not PFC");
    return;
  }
  ++pause_rx_;
  if (!link_) return;
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  for (size_t p = 0; p < paused_until_.size(); ++p) {
    if (!((f->class_mask >> p) & 1)) continue;
    paused_until_[p] =
        now + sc_core::sc_time::from_value(net::pause_ps(f->quanta[p], link_->rate(side_)));
    MPR_LOG(
        log_, debug,
        "priority " << p << (f->quanta[p] ? " paused until " : " resumed at ") << paused_until_[p]);
  }
  // Supersede the wake-up of the old pause and re-examine the head now: an
  // XON may release it, a longer pause re-arms the wake-up.
  ++pause_gen_;
  if (held_) kick();
}

void Mac::receive(net::PacketPtr pkt) {
  // MAC Control frames end in the MAC, at line rate, without the receive
  // pipeline's per-packet cost.
  if (net::is_mac_control(*pkt)) {
    on_pause(*pkt);
    return;
  }
  rx_queue_.push_back(std::move(pkt));
  if (rx_queue_.size() > rx_queue_max_.value()) rx_queue_max_.set(rx_queue_.size());
  if (!rx_busy_) {
    rx_busy_ = true;
    schedule_rx_step();
  }
}

core::Bandwidth Mac::tx_rate() const { return link_ ? link_->rate(side_) : core::Bandwidth{}; }

core::Bandwidth Mac::rx_rate() const { return link_ ? link_->rate(1 - side_) : core::Bandwidth{}; }

void Mac::resume_rx() {
  if (!rx_stalled_) return;  // a device reset came first
  rx_stalled_ = false;
  if (rx_queue_.empty()) {
    rx_busy_ = false;
    return;
  }
  schedule_rx_step();
}

void Mac::schedule_rx_step() {
  calendar_.at(core_.clock.after_cycles(static_cast<uint64_t>(core_.cfg.latency.rx_parse)),
               [this, epoch = rx_epoch_] {
                 if (epoch == rx_epoch_) rx_step();  // else: discarded by a device reset
               });
}

void Mac::rx_step() {
  if (rx_queue_.empty()) {  // cannot happen: every step is scheduled for a queued frame
    rx_busy_ = false;
    return;
  }
  net::PacketPtr pkt = std::move(rx_queue_.front());
  rx_queue_.pop_front();
  net::RoceFields f;
  // A packet that ends in a transport trailer (vp/net/mp_ext.h) says so
  // itself (BTH trailer flag): the frame parses without asking which
  // engine its QP runs; the NIC checks the two agree (Nic::admitted).
  net::ParseStatus st = net::parse_roce(pkt->data.data(), pkt->data.size(), f);
  // Not an RC opcode: a CNP (DCQCN) is the one other RoCEv2 packet accepted.
  if (st == net::ParseStatus::bad_opcode)
    st = net::parse_cnp(pkt->data.data(), pkt->data.size(), f);
  if (st != net::ParseStatus::ok) {
    ++rx_drops_;
    MPR_LOG(log_, info, "dropped frame: " << net::to_string(st));
  } else if (f.dst_ip != core_.cfg.ip) {
    ++rx_drops_;
    MPR_LOG(log_, info, "dropped frame for another address");
  } else {
    ++rx_packets_;
    rx_bytes_.add(pkt->data.size());
    if (f.ecn == 3) ++ce_rx_;
    if (rx_ && !rx_(std::move(pkt), f)) {
      ++rx_stalls_;
      rx_stalled_ = true;
      return;  // rx_busy_ stays set until resume_rx()
    }
  }
  if (rx_queue_.empty()) {
    rx_busy_ = false;
  } else {
    schedule_rx_step();
  }
}

}  // namespace mprdma::nic
