// Requester: the send side of every RC, UC and UD QP (UD: requester_ud.cc,
// UC: requester_uc.cc).
//
// Doorbell -> WQE fetch by DMA (up to wqe_fetch_batch WQEs per read) -> parse,
// validate and translate each WQE (latency.wqe_parse cycles) -> PSNs assigned
// in order (respecting fences and the outstanding READ/atomic limit) -> the
// transport engine grants PSNs -> payload DMA read -> packet to the TX
// scheduler. ACKs, NAKs and responses come back through on_response(): the
// engine decides what they mean; READ response data and atomic results are
// placed by DMA; completed WQEs leave a CQE when signaled (or on error).
//
// Errors follow the verbs semantics: a malformed WQE or a failed local check
// completes that WQE with an error CQE when it reaches the head, a fatal NAK
// or exhausted retries complete the oldest WQE with the matching error; then
// the QP enters ERR and every other outstanding WQE completes with
// WR_FLUSH_ERR, in order. Doorbells of a QP in ERR flush the new WQEs.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <systemc>
#include <unordered_map>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/net/roce_codec.h"
#include "vp/nic/nic_core.h"
#include "vp/nic/qp_sides.h"
#include "vp/nic/rate_control/rate_control.h"
#include "vp/nic/translation.h"
#include "vp/nic/translation_cache.h"
#include "vp/nic/transport/transport_engine.h"
#include "vp/nic/tx_scheduler.h"

namespace mprdma::nic {

class Requester : public sc_core::sc_module, public TxSource, public RequesterSide {
 public:
  Requester(sc_core::sc_module_name name, NicCore& core);

  // SQ doorbell (UAR page already checked against the QP).
  void sq_doorbell(uint32_t qpn, uint16_t pi);
  // WQE by MMIO: a doorbell for the WQE's index that brings the WQE along;
  // taken without a DMA read when it is the next WQE to fetch.
  void sq_wqe_mmio(uint32_t qpn, const std::vector<uint8_t>& wqe);
  // The index of the send WQE a READ response or atomic ACK with this PSN
  // belongs to, if the QP has it in flight.
  std::optional<uint32_t> wqe_of_response(uint32_t qpn, uint32_t psn);
  // QP lifecycle, from the command processor.
  void qp_to_rts(uint32_t qpn);
  void qp_to_error(uint32_t qpn) override;
  void qp_removed(uint32_t qpn);  // RESET or destroyed
  // Responses addressed to this NIC's requester QPs.
  void on_response(net::PacketPtr pkt, const net::RoceFields& f);
  // A CNP addressed to requester QP `f.dest_qp` (DCQCN reaction point).
  void on_cnp(const net::RoceFields& f);

  bool try_emit(uint32_t qpn) override;

  void reset();

  // The responder of the same QPs (qp_sides.h): it flushes when the
  // requester moves a QP to ERR, and takes Read (N)ACKs, CE-marked READ
  // responses and faults of READ-as-data sources. None: a requester alone.
  void connect(ResponderSide* responder) { responder_ = responder; }
  // READ as data (TransportEngine::read_as_data, MP-RDMA). The responder
  // accepted a READ of the peer (request PSN `read_psn`, source `segs` of
  // `len` bytes): its responses join QP `qpn`'s send stream, after the
  // messages that have PSNs (false: the QP cannot send, not in RTS).
  // A QP still in RTR starts its stream for the responses at `stream_base`
  // (the PSN the peer's receiver expects first, carried by the request) and
  // keeps it when it goes to RTS.
  bool send_read_data(uint32_t qpn, uint32_t read_psn, uint32_t stream_base, uint32_t rkey,
                      uint64_t va, uint64_t len) override;
  uint32_t answers_pending(uint32_t qpn) override;
  // Likewise the ATOMIC ACKNOWLEDGE of the peer's atomic `atomic_psn`,
  // carrying the original value `orig`.
  bool send_atomic_data(uint32_t qpn, uint32_t atomic_psn, uint32_t stream_base,
                        uint64_t orig) override;
  // The responder placed response `k` of READ `read_psn` in the receive
  // bitmap (or the ATOMIC ACKNOWLEDGE of atomic `read_psn`): scatter its
  // payload (the original value) into the WQE's buffers; the WQE completes
  // (in order) once all its responses are here and its request is ACKed.
  // False: no such READ in flight or a response that does not fit it (the
  // QP went to ERR, the oldest WQE with BAD_RESP_ERR).
  bool place_read_data(uint32_t qpn, uint32_t read_psn, uint32_t k, const net::RoceFields& f,
                       const uint8_t* payload) override;
  // DCQCN (congestion_control: dcqcn): QP `qpn`'s rate limiter paces
  // everything the QP sends as data, its requests and its responder's READ
  // responses (a QP in RTR gets one at its first paced packet or CNP):
  // the earliest cycle its next paced packet may start (`now` when it is not
  // limited, or never rate controlled: an engine with its own congestion
  // control, a UD QP, a NIC without DCQCN; when later, the QP is activated
  // again then), and the accounting of one sent.
  uint64_t paced_at(uint32_t qpn, uint64_t now) override;
  void paced_sent(uint32_t qpn, uint64_t wire_bytes, uint64_t now) override;

 private:
  ResponderSide* responder_ = nullptr;
  // Message::opcode of the responses to a peer's READ in this QP's send
  // stream (READ as data): not a WQE opcode.
  static constexpr uint8_t kReadDataOpcode = 0xff;
  static constexpr uint8_t kAtomicDataOpcode = 0xfe;  // likewise, an atomic's response
  struct Message {
    uint32_t index = 0;  // free-running WQE index
    uint8_t opcode = 0;  // enum mpr_wqe_opcode
    uint8_t flags = 0;
    uint32_t imm = 0;
    uint64_t length = 0;
    std::vector<Segment> local;  // gather list (send/write) or scatter list (read/atomic)
    // The SGEs as posted (lkey, address, length): what the MPT/MTT caches
    // must have held before the message can go; `translated` once they have
    // (later evictions do not take it back, so a batch whose lines exceed
    // the cache still goes), `progress` through a range larger than the
    // cache meanwhile.
    struct Sge {
      uint32_t lkey;
      uint64_t addr;
      uint32_t len;
      bool translated = false;
      TranslationCache::RangeProgress progress;
    };
    std::vector<Sge> sges;
    uint64_t mr_epoch = 0;  // ContextMemory::mr_epoch() when `local` was translated
    std::vector<uint8_t> inline_data;
    uint64_t remote_va = 0;
    uint32_t rkey = 0;
    uint64_t swap_add = 0, compare = 0;
    uint32_t first_psn = 0;
    uint32_t npsn = 0;       // PSNs it occupies (0 for a WQE that failed locally)
    uint32_t resp_next = 0;  // READ/atomic: next response PSN expected
    // READ/atomic on an out-of-order engine: which responses arrived (they
    // may come in any order); resp_next is then the first missing one.
    std::vector<bool> resp_got;
    // READ as data (MP-RDMA): a READ or atomic whose request takes one PSN
    // and whose responses arrive in the peer's stream; `data_left` of them
    // are not here yet (resp_got marks those that are).
    bool read_as_data = false;
    uint32_t data_left = 0;
    uint32_t stream_base = 0;  // its request says: the QP's rq_psn
    // READ as data: not a WQE but the responses to the peer's READ or
    // atomic request `read_psn`, in this QP's send stream (no CQE, no WQE
    // index; an atomic's original value in inline_data).
    bool answers_read = false;
    uint32_t read_psn = 0;
    bool answer_left = false;  // its last response left once (answers_pending)
    // Out-of-order engines: the number of this message among the QP's
    // messages that consume a RECV (SEND, WRITE with immediate), carried by
    // every packet so the responder places it in the right RECV WQE.
    uint32_t recv_msn = 0;
    // UC: the next of its packets to build (requester_uc.cc).
    uint32_t uc_next = 0;
    // UD: the WQE's address segment (struct mpr_wqe_ud).
    struct UdDest {
      uint32_t qpn = 0, qkey = 0, dst_ip = 0;
      net::MacAddr dmac;
      uint8_t ttl = 64, dscp = 0;
    } ud;
    uint8_t status = MPR_CQE_SUCCESS;
    uint8_t syndrome = MPR_SYN_NONE;
    bool is_read_or_atomic() const {
      return opcode == MPR_WQE_RDMA_READ || opcode == MPR_WQE_ATOMIC_CAS ||
             opcode == MPR_WQE_ATOMIC_FA;
    }
    uint32_t packets(uint32_t mtu) const;
  };

  struct Qp {
    uint32_t qpn = 0;
    bool active = false;  // RTS
    // What the message layer must know about the QP's engine, cached when
    // the QP binds to it (in-order defaults before that, and for UD).
    EngineTraits traits;
    // READ as data: a QP in RTR whose send side answers the peer's READs
    // (its stream began at stream_base); WQEs still wait for RTS.
    bool answering = false;
    uint32_t stream_base = 0;
    bool error = false;  // ERR: flushing
    uint32_t sq_pi = 0;  // free-running, widened from the 16-bit doorbell
    uint32_t fetch_idx = 0;
    bool fetching = false;
    // WQEs that arrived by MMIO, by index, until fetch() takes them (in
    // place of a DMA read of those ring slots).
    std::map<uint32_t, std::vector<uint8_t>> mmio_wqes;
    std::deque<Message> pending;   // parsed, no PSN yet
    std::deque<Message> inflight;  // PSNs assigned, not completed
    uint32_t next_psn = 0;
    uint32_t next_recv_msn = 0;
    uint32_t rd_atomic_out = 0;
    uint32_t mtu = 1024;
    uint32_t max_rd_atomic = 1;
    net::RoceFields base;
    uint64_t wake_at = kNever;
    uint64_t generation = 0;
    // READ and atomics as data (MP-RDMA): the oldest WQE's request is
    // acknowledged and its answers are due by this cycle (kNever: none
    // awaited), and the cycle a check of it is scheduled for.
    uint64_t answers_due = kNever;
    uint64_t answers_check_at = kNever;
    uint32_t answers_for = 0;  // first PSN of the WQE the due time is for
    // Explicit READ acknowledgements: Read (N)ACKs waiting to be sent.
    std::deque<AckExt> read_acks;
    // The NIC's rate control (congestion_control): the QP's controller, its
    // pending pacing wake-up (cycle) and its rate gauge; the packet being
    // timed for an RTT sample (controls that take them).
    std::unique_ptr<RateControl> rp;
    uint64_t pace_at = kNever;
    core::Counter* rate_gauge = nullptr;
    bool rtt_armed = false;
    uint32_t rtt_psn = 0;
    uint64_t rtt_sent = 0;
    // The packet timed for requester.rtt (every QP, passive: it asks for no
    // ACK of its own).
    bool path_rtt_armed = false;
    uint32_t path_rtt_psn = 0;
    uint64_t path_rtt_sent = 0;
    // UD QP (requester_ud.cc): no transport engine, no ACKs; a WQE
    // completes once its one packet is built (payload read).
    bool ud = false;
    uint32_t qkey = 0;
    // UC QP (requester_uc.cc): no transport engine, no ACKs; a WQE
    // completes once all its packets are built (payloads read).
    bool uc = false;
    // UD and UC: WQEs whose packets are being built or were all built,
    // completing in SQ order once `built` and no payload read is pending.
    struct Unacked {
      uint32_t index = 0;
      uint8_t opcode = 0, flags = 0;
      uint64_t length = 0;
      bool built = false;  // its last packet is built
      uint32_t reads = 0;  // payload DMA reads not yet returned
      uint8_t status = MPR_CQE_SUCCESS, syndrome = MPR_SYN_NONE;
      bool ready() const { return built && reads == 0; }
    };
    std::deque<Unacked> unacked;
  };

  Qp* find(uint32_t qpn);
  // The QP's engine connection has a send side: RTS, or answering READs.
  static bool sending(const Qp& qp) { return qp.active || qp.answering; }
  Qp* start_answering(uint32_t qpn, uint32_t stream_base);
  // Appends the responses `r` to QP `qpn`'s stream (started from RTR at
  // `stream_base` if need be).
  bool queue_answer(uint32_t qpn, uint32_t stream_base, Message r);
  void ensure_rp(Qp& qp);
  // The QP with a DCQCN limiter (created on demand for a QP in RTR/RTS), or
  // null when it is not rate controlled.
  Qp* limited(uint32_t qpn);
  void note_paced(Qp& qp, uint64_t wire_bytes, uint64_t now);  // qp.rp set
  void fetch(Qp& qp);
  void on_wqes(uint32_t qpn, uint64_t generation, uint32_t first, uint32_t count, bool ok,
               const std::vector<uint8_t>& data);
  // The SQ doorbell's checks; the QP if the new producer index was taken
  // and new WQEs may be fetched.
  Qp* accept_sq_pi(uint32_t qpn, uint16_t pi16);
  void parse(Qp& qp, const uint8_t* wqe, uint32_t index, Message& m);
  // A parsed batch of fetched WQEs on its way in: `waiting` counts its
  // translation lookups still waiting for fills.
  struct Batch {
    std::vector<Message> messages;
    int waiting = 0;
  };
  // Makes a parsed batch visible once the MPT/MTT lines of its SGEs are on
  // chip (now, or when their fills arrive).
  void admit(uint32_t qpn, uint64_t gen, std::shared_ptr<Batch> batch, uint32_t next_fetch_idx);
  void assign(Qp& qp);
  void retire(Qp& qp);
  void fail(Qp& qp, const Message* culprit, uint8_t status, uint8_t syndrome);
  // The message's local buffers may still be used: true unless a region
  // was freed since they were translated and one of its keys no longer
  // passes (DEREG_MR of a buffer still in use: the message then fails with
  // a local protection error, and the region's pages are not touched).
  bool local_still_valid(const Qp& qp, Message& m);
  void flush_new(Qp& qp);
  void complete(const Qp& qp, const Message& m, uint8_t status, uint8_t syndrome);
  void handle(Qp& qp, const AckResult& r, const Message* subject);
  void schedule_wake(Qp& qp);
  // READ/atomics as data: the oldest WQE's request was acknowledged, its
  // answers come in the peer's stream. Answers that stop coming for the
  // QP's retry budget fail it (watch_answers arms or refreshes the due
  // time, check_answers runs when it passes).
  void watch_answers(Qp& qp, uint32_t head_psn, bool progress);
  void check_answers(uint32_t qpn, uint64_t gen, uint64_t at);
  // DCQCN: the QP's one pacing wake-up (for its requests and its
  // responder's READ responses alike), counted in <rate control>.paced.
  void schedule_pace(Qp& qp, uint64_t at);
  // RTT samples for the rate control: time the packet at `psn` if none is
  // timed; on an ACK, feed the sample once snd_una passed it.
  void sample_rtt_sent(Qp& qp, uint32_t psn, uint64_t now);
  void sample_rtt_acked(Qp& qp, bool rewound, uint64_t now);
  // requester.rtt, every QP: time a fresh packet if none is timed (any
  // retransmission drops the sample, Karn's rule); on an ACK, record the
  // sample once snd_una passed it.
  void path_rtt_sent(Qp& qp, uint32_t psn, bool retransmit, uint64_t now);
  void path_rtt_acked(Qp& qp, bool rewound, uint64_t now);
  uint32_t ack_limit(const Qp& qp) const;
  // READ and atomic responses not yet here with PSNs before `end`; true
  // when an atomic's is among them.
  bool missing_responses(const Qp& qp, uint32_t end, std::vector<uint32_t>& psns) const;
  // Queues a Read (N)ACK (a plain Read ACK replaces a plain one still
  // waiting: the newer cumulative PSN says all the older one did).
  void queue_read_ack(Qp& qp, const AckExt& ack);
  bool emit_read_ack(Qp& qp);
  Message* message_at(Qp& qp, uint32_t psn);
  void place_read(Qp& qp, Message& m, const net::RoceFields& f, const net::Packet& pkt);
  // A response for PSN `psn` of READ/atomic `m` was accepted.
  void response_arrived(uint32_t qpn, Message& m, uint32_t psn);
  // Out-of-order engines: the data trailer of packet `k` of `m` (message
  // number, index, ReTx, synchronise, tail). WRITE packets are each a WRITE
  // ONLY with their own RETH (try_emit).
  void build_ooo(const Message& m, uint32_t k, bool retx, std::vector<uint8_t>& trailer) const;
  // UD (requester_ud.cc). parse_ud reads the address segment (false: the
  // WQE failed and carries its status); assign_ud, retire_unacked and
  // emit_ud replace assign, retire and try_emit for a UD QP;
  // unacked_complete retires the emitted WQEs whose packets are built, in
  // order (UD and UC).
  bool parse_ud(Qp& qp, const uint8_t*& seg, const uint8_t* end, Message& m);
  void assign_ud(Qp& qp);
  void retire_unacked(Qp& qp);
  bool emit_ud(Qp& qp);
  void unacked_complete(Qp& qp);
  // Reads `segs` as the payload of the packet in TX slot `slot` (header
  // fields `f`) of WQE `index`, then fills the slot and lets the WQE
  // complete (a DMA fault fails it): the payload step of UD and UC.
  void gather_unacked(const Qp& qp, const std::vector<Segment>& segs, const net::RoceFields& f,
                      TxScheduler::Slot slot, uint32_t index);
  // UC (requester_uc.cc): PSNs per packet over the path MTU, packets built
  // one per turn, no engine, no ACK; completion as UD (unacked_complete).
  void assign_uc(Qp& qp);
  bool emit_uc(Qp& qp);

  NicCore& core_;
  core::Calendar calendar_;
  core::LogChannel& log_;
  std::unordered_map<uint32_t, Qp> qps_;
  uint64_t generation_ = 0;

  core::Counter& wqes_;
  core::Counter& wqe_errors_;
  core::Counter& packets_;
  core::Counter& retransmits_;
  core::Counter& acks_;
  core::Counter& naks_;
  core::Counter& timeouts_;
  core::Counter& bad_responses_;
  core::Counter& doorbells_dropped_;
  core::Counter& wqes_by_mmio_;
  core::Counter& ud_sends_;
  core::Counter& uc_packets_;
  core::Counter& read_acks_tx_;
  core::Counter& read_acks_rx_;
  core::Counter& read_data_tx_;
  core::Counter& read_data_rx_;
  core::Histogram& rtt_ns_;
  // The NIC's rate control (null with `none`, which then registers no
  // statistics of its own).
  const RateControlKind* rc_;  // core.rate_control
  core::Counter* cnp_rx_ = nullptr;
  core::Counter* rtt_samples_ = nullptr;
  core::Counter* rate_cuts_ = nullptr;
  core::Counter* paced_ = nullptr;
};

}  // namespace mprdma::nic
