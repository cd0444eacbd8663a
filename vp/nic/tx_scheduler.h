// TX scheduler: picks which QP sends the next packet and keeps the packets
// in order on their way to the MAC.
//
// QPs with something to send are served round robin, one packet per turn,
// the responder side (ACKs, READ responses) before the requester side of the
// same QP. Each turn costs `latency.tx_schedule` cycles of the scheduler
// (the NIC's packet rate over all QPs), and building the packet
// `latency.tx_packet` cycles on the QP's processing unit (ProcessingUnits):
// a packet is ready for the wire when both it is built and its payload has
// arrived. At most
// `tx_pipeline_depth` packets are between the scheduler and the wire (their
// payload DMA reads included): a reserved slot is filled when the packet is
// built, and the MAC takes slots strictly in reservation order.
//
// Reserving a slot also gives the packet the NIC's next IPv4 identification:
// one 16-bit counter per NIC, 0 for the first packet after a device reset,
// +1 for every packet (requests, ACKs/NAKs, READ and atomic responses),
// wrapping from 65535 to 0. As the MAC sends slots in order, consecutive
// frames on the wire carry consecutive IDs; only a slot cancelled because
// its payload DMA failed leaves a gap. Links that drop by IP ID modulo N
// (the MP-RDMA paper's iCAP loss) rely on it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <systemc>
#include <unordered_set>

#include "vp/core/calendar.h"
#include "vp/net/packet.h"
#include "vp/net/roce_codec.h"
#include "vp/nic/nic_core.h"

namespace mprdma::nic {

// A side of a QP that produces packets (requester or responder).
class TxSource {
 public:
  virtual ~TxSource() = default;
  // Emits at most one packet for `qpn` (reserving a slot); true if it did.
  virtual bool try_emit(uint32_t qpn) = 0;
};

class TxScheduler : public sc_core::sc_module {
 public:
  using Slot = uint64_t;

  TxScheduler(sc_core::sc_module_name name, const NicCore& core);
  void set_sources(TxSource* responder, TxSource* requester);
  // Called when the MAC may take a packet.
  void set_mac_kick(std::function<void()> kick) { mac_kick_ = std::move(kick); }

  // The QP may have something to send.
  void activate(uint32_t qpn);

  // Asked before a QP's turn: false if the QP cannot be served yet (its
  // context is being fetched); the gate activates it again when it can.
  void set_gate(std::function<bool(uint32_t qpn)> gate) { gate_ = std::move(gate); }

  // For sources, inside try_emit(): reserves the next slot and sets
  // `f.ip_id` to the NIC's next IPv4 identification (build the packet from
  // `f` after this call).
  Slot reserve(net::RoceFields& f);
  void fill(Slot slot, net::PacketPtr pkt);  // packet built (may be out of order)
  void cancel(Slot slot);                    // nothing will be sent for it

  // For the MAC: the next packet in order, or nullptr.
  net::PacketPtr pop();

  void reset();

  // Packets reserved and not yet taken by the MAC (all QPs): how far the
  // port is behind the scheduler.
  size_t backlog() const { return pipeline_.size(); }
  // The identification the next reserved packet gets.
  uint16_t next_ip_id() const { return next_ip_id_; }

 private:
  struct Entry {
    Slot slot;
    bool done = false;
    net::PacketPtr pkt;
    sc_core::sc_time built;  // its PU finishes building it
  };
  void mark_done(Slot slot);
  void kick();
  void step();
  std::function<bool(uint32_t)> gate_;
  // The QP whose turn it is (inside step()): reserve() charges its PU.
  bool serving_ = false;
  uint32_t serving_qpn_ = 0;
  bool room() const { return static_cast<int64_t>(pipeline_.size()) < depth_; }

  const NicCore& core_;
  core::Calendar calendar_;
  TxSource* responder_ = nullptr;
  TxSource* requester_ = nullptr;
  std::function<void()> mac_kick_;
  std::deque<uint32_t> active_;
  std::unordered_set<uint32_t> is_active_;
  std::deque<Entry> pipeline_;
  Slot next_slot_ = 0;
  uint16_t next_ip_id_ = 0;
  int64_t depth_;
  bool stepping_ = false;
  uint64_t generation_ = 0;
  core::Counter& packets_;
  core::Counter& stalls_;
};

}  // namespace mprdma::nic
