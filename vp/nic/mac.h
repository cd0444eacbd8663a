// MAC: the NIC's Ethernet port. Transmits packets from the TX scheduler
// back to back at the link rate; receives packets from the link into an RX
// queue that the NIC parses at `latency.rx_parse` cycles per packet and
// dispatches by opcode. Packets failing the checks (not RoCEv2, bad ICRC,
// bad IP checksum, not for this NIC's address) are dropped and counted.
//
// PFC (802.1Qbb): a received PAUSE frame is acted on at once by the MAC (it
// never reaches the receive queue) and holds transmission of packets of the
// paused priorities (Packet::priority = DSCP >> 3 of the frame, set here)
// until the pause time expires or an XON arrives. The NIC has one transmit
// queue, so a paused head packet blocks every packet behind it, whatever
// their priority. The NIC never sends PAUSE.
#pragma once

#include <array>
#include <deque>
#include <functional>
#include <systemc>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/net/eth_port.h"
#include "vp/net/roce_codec.h"
#include "vp/nic/nic_core.h"
#include "vp/nic/tx_scheduler.h"

namespace mprdma::nic {

class Mac : public sc_core::sc_module, public net::EthPortIf {
 public:
  // Takes a received packet. False: the handler kept the packet but cannot
  // finish with it yet (a context-cache miss); the receive pipeline stalls
  // until resume_rx().
  using RxHandler = std::function<bool(net::PacketPtr pkt, const net::RoceFields& f)>;

  Mac(sc_core::sc_module_name name, const NicCore& core, TxScheduler& tx);
  void attach(net::EthMediumIf* link, int side);
  void set_rx_handler(RxHandler handler) { rx_ = std::move(handler); }

  void kick();                                // TX: a packet may be ready
  void receive(net::PacketPtr pkt) override;  // from the link
  void resume_rx();                           // the stalled packet is done
  // The attached link's current rate out of / into this port; 0 unattached.
  core::Bandwidth tx_rate() const;
  core::Bandwidth rx_rate() const;

  void reset();

 private:
  void rx_step();
  // Schedules rx_step() one parse time from now, for the current pipeline.
  void schedule_rx_step();
  void on_pause(const net::Packet& pkt);
  bool paused(uint8_t prio) const;

  const NicCore& core_;
  TxScheduler& tx_;
  core::Calendar calendar_;
  core::LogChannel& log_;
  net::EthMediumIf* link_ = nullptr;
  int side_ = 0;
  bool tx_waiting_ = false;  // a kick is scheduled for when the link is idle
  RxHandler rx_;
  std::deque<net::PacketPtr> rx_queue_;
  bool rx_busy_ = false;  // a packet is being parsed, or the pipeline is stalled
  // The receive pipeline's generation: a device reset discards the pipeline,
  // and a step it had scheduled must not run on beside the next one.
  uint64_t rx_epoch_ = 0;
  // The handler kept the last packet (returned false): resume_rx() goes on.
  bool rx_stalled_ = false;
  uint64_t packet_ids_ = 0;
  // The packet taken from the TX scheduler but held by a PAUSE.
  net::PacketPtr held_;
  // Per priority: transmission of that class may resume at this time.
  std::array<sc_core::sc_time, 8> paused_until_{};
  // Generation of the pending wake-up at a pause's expiry; an XON or a new
  // PAUSE supersedes it.
  uint64_t pause_gen_ = 0;

  core::Counter& tx_packets_;
  core::Counter& tx_bytes_;
  core::Counter& rx_packets_;
  core::Counter& rx_bytes_;
  core::Counter& rx_drops_;
  core::Counter& rx_queue_max_;
  core::Counter& rx_stalls_;
  core::Counter& pause_rx_;
  core::Counter& ce_rx_;
};

}  // namespace mprdma::nic
