// A PCIe link between the root complex (host side) and one endpoint (the
// NIC), modelled at transaction-layer-packet level.
//
// Each direction is a FIFO pipe with a busy-until time: a TLP starts
// serialising when the previous one has left, takes wire_bytes /
// link_bytes_per_sec, and is usable at the far end `latency` after its last
// byte left. Timing is computed arithmetically when an access is handed to
// the link; the only simulation activity is one Calendar action per DMA
// read service and per delivered DMA read (plus one per freed tag while
// reads wait for tags).
//
// Ports (TLM-2.0, base protocol):
//   rc_mmio  target,    b_transport   MMIO from the RootComplex (downstream)
//   ep_mmio  initiator, b_transport   MMIO to the device's register target
//   ep_dma   target,    nb_transport  DMA from the device (upstream)
//   rc_dma   initiator, b_transport   DMA into the RootComplex
//
// MMIO (b_transport on rc_mmio, from an SC_THREAD of host software):
//   * Writes are posted. The link reserves the downstream TLPs, then calls
//     the device's b_transport with delay = arrival of the last byte - now.
//     The device must not call wait() in b_transport; it applies the write
//     at now + delay (with its own Calendar). The delay returned to the
//     caller is the time until the last TLP starts serialising: the CPU
//     stalls only while the link is backed up.
//   * Reads: a request TLP downstream, the device's b_transport (same rule:
//     no wait(); it may add its own delay), then the completion upstream.
//     The returned delay covers the whole round trip.
//
// DMA (nb_transport_fw on ep_dma, callable from SC_METHODs and Calendar
// actions because nothing blocks):
//   * Writes (and MSIs, i.e. writes to 0xFEE00000..0xFEEFFFFF) are posted:
//     the link reserves upstream TLPs, forwards the payload to rc_dma's
//     b_transport with delay = arrival - now (the root complex copies the
//     data and commits it at that time), and returns TLM_COMPLETED with the
//     same delay. The device may reuse the payload at once.
//   * Reads: returns TLM_UPDATED with END_REQ. Request TLPs go upstream as
//     read tags allow (max_outstanding_reads; the rest wait in FIFO order),
//     the root complex reads memory at arrival + memory_latency, and the
//     completions are queued downstream behind whatever else (MMIO) is
//     there. The response arrives by nb_transport_bw(BEGIN_RESP, 0) at the
//     time the last completion byte arrives; the device must return
//     TLM_COMPLETED. TLM_ADDRESS_ERROR_RESPONSE means some byte was not
//     backed (an Unsupported Request completion). A tag is freed when the
//     last completion of its request has arrived.
//   * An annotated delay on nb_transport_fw means "issued at now + delay";
//     for reads the link waits until then, for writes it reserves at that
//     time straight away (keep such delays small to keep the FIFO honest).
//
// Data-link layer (see pcie.md, Timing): the receiver of TLPs sends Ack and
// UpdateFC DLLPs the other way; they take link time when that direction is
// backlogged. A TLP starts only when the transmitter holds the flow-control
// credits it needs (header and data credits of its type at the far end's
// receive buffers); credits come back with an UpdateFC after the receiver
// has processed the TLP. A TLP waiting for credits holds up its direction.
//
// Statistics under pcie.<stats name>. (per direction, per TLP kind, plus the
// payload totals an Intel uncore would report as PCIeRdCur / PCIeItoM).
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <systemc>
#include <tlm>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/stats.h"
#include "vp/pcie/pcie_config.h"
#include "vp/pcie/tlp.h"

namespace mprdma::pcie {

class PcieLink : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<PcieLink> rc_mmio;
  tlm_utils::simple_initiator_socket<PcieLink> ep_mmio;
  tlm_utils::simple_target_socket<PcieLink> ep_dma;
  tlm_utils::simple_initiator_socket<PcieLink> rc_dma;

  // Statistics and the log channel are named pcie.<stats_name>; an empty
  // stats_name uses the module's basename. Give the link and its root
  // complex the same stats name (e.g. the NIC's) so their figures sit
  // together. Throws std::invalid_argument for an invalid configuration.
  PcieLink(sc_core::sc_module_name name, const PcieConfig& cfg, core::SimEnv& env,
           std::string stats_name = {});
  ~PcieLink() override;

  const PcieConfig& config() const { return cfg_; }
  const std::string& stats_prefix() const { return prefix_; }

  // When each direction will have finished serialising what it holds; a
  // device may use upstream_busy_until() to throttle posted writes.
  sc_core::sc_time downstream_busy_until() const { return down_.busy_until; }
  sc_core::sc_time upstream_busy_until() const { return up_.busy_until; }
  // Read tags in use now, and request TLPs waiting for a tag.
  size_t read_tags_in_use() const;
  size_t waiting_read_requests() const;
  // DMA read transactions accepted and not yet answered.
  size_t pending_dma_reads() const { return active_jobs_; }
  // Serialisation time of `wire_bytes` on this link.
  sc_core::sc_time serialize(uint64_t wire_bytes) const {
    return sc_core::sc_time::from_value(cfg_.serialize_ps(wire_bytes));
  }

 private:
  // Flow control of one credit type for the TLPs of one direction: the
  // transmitter's credits and, at the receiver, the credits freed and not
  // yet returned. Computed when TLPs are reserved, in their order, which is
  // their arrival order (each direction is FIFO).
  struct FcPool {
    uint64_t limit_h = 0, limit_d = 0;  // advertised; 0 = infinite
    uint64_t avail_h = 0, avail_d = 0;  // at the transmitter, as of the last take
    // Data credits below which the receiver returns credits at once (the
    // spec: posted/completion data below one max_payload TLP, else none).
    uint64_t low_d = 1;
    struct Return {
      sc_core::sc_time at;  // UpdateFC received by the transmitter
      uint64_t h, d;
    };
    std::deque<Return> returns;  // non-decreasing `at`
    uint64_t pending_tlps = 0, pending_h = 0, pending_d = 0;
    bool infinite() const { return limit_h == 0 && limit_d == 0; }
  };
  struct Direction {
    sc_core::sc_time busy_until = sc_core::SC_ZERO_TIME;
    Direction* back = nullptr;  // the other direction: carries this one's DLLPs
    core::Counter* tlps = nullptr;
    core::Counter* bytes = nullptr;
    std::array<core::Counter*, kTlpKinds> kind_tlps{};
    std::array<core::Counter*, kTlpKinds> kind_bytes{};
    // Data-link layer for the TLPs sent this way: the far end's receive
    // buffers and TLPs it has not acknowledged yet.
    std::array<FcPool, kFcTypes> fc;
    sc_core::sc_time rx_processing = sc_core::SC_ZERO_TIME;
    uint64_t unacked = 0;
    core::Counter* credit_waits = nullptr;
    core::Counter* credit_wait_ps = nullptr;
    // DLLPs sent this way (for TLPs of the other direction).
    core::Counter* dllps = nullptr;
    core::Counter* dllp_bytes = nullptr;
    core::Counter* acks = nullptr;
    core::Counter* update_fcs = nullptr;
  };
  // A DLLP of `dir`, ready to send at `at`: it takes link time only when
  // the direction is backlogged then (an idle link sends it in the gap).
  void send_dllp(Direction& dir, const sc_core::sc_time& at);
  // The transmitter of `dir` takes `h` header and `d` data credits of `fc`
  // no earlier than `t`; returns when it has them (later than `t` when it
  // had to wait for an UpdateFC).
  sc_core::sc_time take_credits(Direction& dir, FcPool& fc, sc_core::sc_time t, uint64_t h,
                                uint64_t d);
  // The receiver of `dir` got a TLP at `arrival`: Ack and UpdateFC DLLPs.
  void received(Direction& dir, FcPool& fc, const sc_core::sc_time& arrival, uint64_t h,
                uint64_t d);
  struct Slot {
    sc_core::sc_time start, last_start, end;
  };
  struct ReadRequest {
    uint64_t addr = 0;
    uint64_t len = 0;
    sc_core::sc_time service;  // arrival at the root complex + memory_latency
  };
  // One DMA read transaction from the device.
  struct ReadJob {
    tlm::tlm_generic_payload* trans = nullptr;
    uint64_t addr = 0;
    std::vector<ReadRequest> requests;
    size_t next_issue = 0;  // first request not yet sent upstream
    size_t serviced = 0;    // requests whose completions are reserved
    bool ok = true;
    sc_core::sc_time accepted;
    sc_core::sc_time last_arrival;
  };

  void mmio_b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  tlm::tlm_sync_enum dma_nb_transport_fw(tlm::tlm_generic_payload& trans, tlm::tlm_phase& phase,
                                         sc_core::sc_time& delay);
  void dma_write(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  void dma_read_accept(tlm::tlm_generic_payload& trans, const sc_core::sc_time& delay);

  // Reserves the TLPs in `tlps_` back to back, the first no earlier than
  // `earliest`, each when its flow-control credits allow, and counts them.
  // `overhead`: the bytes of each TLP that are not payload.
  Slot reserve(Direction& dir, const sc_core::sc_time& earliest, TlpKind kind, uint64_t overhead);
  void register_kind(core::StatsRegistry& stats, Direction& dir, const char* dir_name,
                     TlpKind kind);

  // Read engine: tags, requests, service, delivery.
  void enqueue(ReadJob* job);
  void issue_requests();
  void release_due_tags();
  void maybe_schedule_wake();
  void service(ReadJob* job, size_t first, size_t count);
  void deliver(ReadJob* job);
  ReadJob* alloc_job();
  void free_job(ReadJob* job);

  PcieConfig cfg_;
  TlpRules rules_;
  std::string prefix_;
  core::LogChannel& log_;
  core::Calendar cal_;
  sc_core::sc_time latency_;
  sc_core::sc_time memory_latency_;

  Direction down_, up_;
  std::vector<Tlp> tlps_;  // scratch: the TLPs of the access being reserved

  // Read tags: `tags_held_` counts requests sent and not yet fully answered;
  // tags are returned lazily from `tag_release_` (completion arrival times,
  // non-decreasing because the downstream pipe is FIFO).
  size_t max_tags_;
  size_t tags_held_ = 0;
  std::deque<sc_core::sc_time> tag_release_;
  std::deque<ReadJob*> waiting_;  // jobs with requests not yet sent
  bool wake_pending_ = false;
  size_t active_jobs_ = 0;
  std::vector<std::unique_ptr<ReadJob>> job_store_;
  std::vector<ReadJob*> free_jobs_;
  tlm::tlm_generic_payload service_gp_;  // reused for root-complex reads

  core::Counter* dma_read_bytes_;
  core::Counter* dma_write_bytes_;
  core::Counter* dma_reads_;
  core::Counter* dma_writes_;
  core::Counter* dma_read_errors_;
  core::Counter* tag_waits_;
  core::Histogram* dma_read_latency_;
};

}  // namespace mprdma::pcie
