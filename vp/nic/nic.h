// The NIC: one PCIe function with an Ethernet port. Assembles the blocks of
// docs (vp/nic/nic.md): host interface, command processor (firmware),
// context memory, translation, DMA engine, requester, responder, transport
// engine, TX scheduler, CQ/EQ unit and MAC, and routes between them:
// doorbells to the queue owners, QP state changes to the data path, received
// packets by opcode.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <systemc>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/clock_domain.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/nic/command_processor.h"
#include "vp/nic/completion_unit.h"
#include "vp/nic/context_cache.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/host_interface.h"
#include "vp/nic/mac.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/nic_core.h"
#include "vp/nic/processing_units.h"
#include "vp/nic/rate_control/rate_control.h"
#include "vp/nic/requester.h"
#include "vp/nic/responder.h"
#include "vp/nic/translation.h"
#include "vp/nic/translation_cache.h"
#include "vp/nic/transport/transport_mux.h"
#include "vp/nic/tx_scheduler.h"
#include "vp/pcie/dma_initiator.h"

namespace mprdma::nic {

class Nic : public sc_core::sc_module {
 public:
  Nic(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env);

  // PCIe: MMIO arrives here (bind PcieLink::ep_mmio to it) ...
  tlm_utils::simple_target_socket<HostInterface>& mmio_socket() { return hostif_.mmio; }
  // ... and DMA leaves here (bind it to PcieLink::ep_dma).
  tlm_utils::simple_initiator_socket<pcie::DmaInitiator>& dma_socket() { return dma_port_.socket; }

  // Ethernet: connect the port to one side of a link.
  void attach(net::EthMediumIf* link, int side) { mac_.attach(link, side); }
  const Mac& port() const { return mac_; }
  // Per atomic lock bucket: time held so far, ps (Responder::lock_held_ps).
  const std::unordered_map<uint32_t, uint64_t>& atomic_lock_held_ps() const {
    return responder_.lock_held_ps();
  }

  // How the firmware learns whether an address software hands it is host
  // memory the NIC may use (pcie::RootComplex::dma_addressable): set by the
  // host the NIC sits in.
  void set_host_memory_check(std::function<bool(uint64_t, uint64_t)> check) {
    cp_.set_host_memory_check(std::move(check));
  }

  const NicConfig& config() const { return cfg_; }
  ContextMemory& contexts() { return contexts_; }
  TransportEngine& engine() { return *engine_; }

 private:
  enum class StallCause { qpc, wqe, mpt_mtt, count };  // caches a received packet needs
  void on_uar(uint32_t page, uint32_t offset, uint64_t value);
  void decode_uar(uint32_t page, uint32_t offset, uint64_t value);
  // WQE by MMIO: bytes of the MPR_UAR_BF window of a UAR page; a WQE is
  // taken once all its bytes have arrived.
  void on_uar_wqe(uint32_t page, uint32_t offset, std::vector<uint8_t> bytes);
  void decode_uar_wqe(uint32_t page, std::vector<uint8_t> wqe);
  void on_reset();
  void on_qp_state(uint32_t qpn, uint8_t from, uint8_t to);
  void on_qp_destroyed(uint32_t qpn);
  bool on_packet(net::PacketPtr pkt, const net::RoceFields& f);
  // True if the contexts a received packet needs are on chip (its QP's, and
  // for a request naming an rkey the MPT/MTT lines of its range); otherwise
  // their fills are under way and resume_parked() runs when one arrives.
  bool contexts_ready(const net::Packet& pkt, const net::RoceFields& f,
                      StallCause* first_miss = nullptr);
  void dispatch(net::PacketPtr pkt, const net::RoceFields& f);
  void deliver(net::PacketPtr pkt, const net::RoceFields& f);
  // The receive checks IB makes before a packet may touch a QP: its P_Key
  // matches the port's partition, and a packet for a connected QP comes
  // from the peer the QP is connected to. False: dropped and counted.
  bool admitted(const net::RoceFields& f);
  void resume_parked();
  void check_sram();

  NicConfig cfg_;
  core::SimEnv& env_;
  core::ClockDomain clock_;
  core::LogChannel& log_;
  // Before the context memory: a QP context's ICM entry holds its state.
  std::unique_ptr<TransportMux> engine_;           // nic.transport, nic.qp_transports
  std::unique_ptr<RateControlKind> rate_control_;  // nic.congestion_control; null: none
  ContextMemory contexts_;
  Translation translation_;
  pcie::DmaInitiator dma_port_;
  DmaEngine dma_;
  HostInterface hostif_;
  CompletionUnit cq_;
  ProcessingUnits pus_;      // nic.pu
  ContextCache qpc_cache_;   // nic.cache.qpc
  TranslationCache tcache_;  // nic.cache.mpt, nic.cache.mtt
  ContextCache cqc_cache_;   // nic.cache.cqc
  ContextCache wqe_cache_;   // nic.cache.wqe
  // The received packet whose QP context is being fetched (the receive
  // pipeline is stalled behind it).
  net::PacketPtr rx_parked_;
  net::RoceFields rx_parked_f_;
  // The parked packet's way through a range larger than the MTT cache.
  TranslationCache::RangeProgress rx_parked_range_;
  // Why and since when the receive stage is stalled: the first cache of
  // contexts_ready() that missed for the parked packet; the stall time is
  // added to rx.stall_ps.<cache> when the packet moves on.
  StallCause rx_stall_cause_ = StallCause::qpc;
  sc_core::sc_time rx_stall_since_;
  std::array<core::Counter*, static_cast<size_t>(StallCause::count)> rx_stall_ps_{};
  uint64_t generation_ = 0;  // device resets: dispatches scheduled before one are dropped
  // Per UAR page: the WQE-by-MMIO window as written so far (8-byte words).
  struct BfWindow {
    std::array<uint8_t, MPR_UAR_BF_SIZE> bytes{};
    std::array<bool, MPR_UAR_BF_SIZE / 8> written{};
  };
  std::map<uint32_t, BfWindow> bf_windows_;
  NicCore core_;
  TxScheduler tx_;
  Requester requester_;
  Responder responder_;
  Mac mac_;
  CommandProcessor cp_;
  core::Calendar calendar_;
  core::Counter& bad_doorbells_;
  core::Counter& resets_;
  core::Counter& wqes_by_mmio_;
  core::Counter& pkey_drops_;
  core::Counter& foreign_drops_;
};

}  // namespace mprdma::nic
