// Responder: the receive side of every RC, UC and UD QP (UD: responder_ud.cc,
// UC: responder_uc.cc).
//
// Request packets arrive from the MAC in order per QP. The transport engine
// classifies each PSN (next expected, duplicate, or beyond); the responder
// then checks and executes the request: SEND data is placed into the buffers
// of the next RECV WQE (fetched ahead by DMA, rq_prefetch deep), WRITE data
// at the rkey-checked address, READs become a stream of response packets,
// atomics run in the NIC's atomic unit as a DMA read-modify-write, each
// holding the lock of its address's bucket (nic.atomics: one bucket
// serialises all, as on ConnectX-3; 4096 on bits 0-11 let atomics on other
// buckets overlap, as on Connect-IB). ACKs, NAKs and responses leave in PSN
// order through one output queue per QP.
//
// Errors follow the IB responder rules: no RECV posted -> RNR NAK; a PSN
// beyond the expected one -> one sequence NAK; a bad rkey, bounds or access
// -> NAK remote access error; a malformed request or a SEND longer than its
// RECV -> NAK invalid request; a local fault -> NAK remote operational error.
// The last three move the QP to ERR, flush its RECV WQEs and raise an
// asynchronous event.
//
// Shared receive queues (responder_srq.cc): a QP created with an SRQ takes
// its RECV WQEs from it, one message at a time, as it needs them. The SRQ
// keeps rq_prefetch WQEs on chip, fetched ahead from the head of its list
// (reading the ring's slots in one DMA where the list runs through them in
// order), and hands them to its QPs in the order they asked. A QP that finds
// none waits when more are posted, else it answers as with an empty receive
// queue (RNR NAK; UD and UC drop). Fewer WQEs left than the armed limit
// raise MPR_EQE_SRQ_LIMIT once; a QP of an SRQ entering ERR raises
// MPR_EQE_QP_LAST_WQE after its flush.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <systemc>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/net/mp_ext.h"
#include "vp/net/roce_codec.h"
#include "vp/nic/nic_core.h"
#include "vp/nic/qp_sides.h"
#include "vp/nic/rate_control/dcqcn/dcqcn.h"
#include "vp/nic/rate_control/rate_control.h"
#include "vp/nic/translation.h"
#include "vp/nic/transport/transport_engine.h"
#include "vp/nic/tx_scheduler.h"
#include "vp/nic/uarch/atomic_lock_table.h"

namespace mprdma::nic {

class Responder : public sc_core::sc_module, public TxSource, public ResponderSide {
 public:
  Responder(sc_core::sc_module_name name, NicCore& core);

  void rq_doorbell(uint32_t qpn, uint16_t pi);
  // An SRQ doorbell: `count` WQEs posted since the SRQ was created (mod
  // 2^16).
  void srq_doorbell(uint32_t srqn, uint16_t count);
  // DESTROY_SRQ (no QP uses it any more): the WQEs fetched ahead are void.
  void srq_destroyed(uint32_t srqn);
  void qp_to_rtr(uint32_t qpn);
  void qp_to_error(uint32_t qpn) override;
  void qp_removed(uint32_t qpn);
  void on_request(net::PacketPtr pkt, const net::RoceFields& f);

  bool try_emit(uint32_t qpn) override;
  void reset();
  // A Read (N)ACK from the peer's requester (explicit READ
  // acknowledgements): it acknowledges responses this responder sent.
  void on_read_ack(uint32_t qpn, const AckExt& ack) override;
  // The requester of the same QPs (qp_sides.h): it flushes when the
  // responder moves a QP to ERR; READ as data (TransportEngine::read_as_data)
  // sends a READ's responses in its send stream and places the responses
  // of the peer's stream (arriving here like any data packet); DCQCN's rate
  // limiter of a QP paces its READ responses too. None: a responder alone.
  void connect(RequesterSide* requester) { requester_ = requester; }
  // A READ response of QP `qpn` arrived CE-marked (its requester saw it):
  // the notification point may send the peer a CNP.
  void response_ce(uint32_t qpn) override;
  // READ as data: the source of READ `read_psn`'s responses could not be
  // read (the requester's DMA failed): NAK the READ, QP to ERR.
  void read_source_fault(uint32_t qpn, uint32_t read_psn, bool revoked) override;

  // Per atomic lock bucket ever held: the time it was held so far, in ps
  // (each hold counted when it ends).
  const std::unordered_map<uint32_t, uint64_t>& lock_held_ps() const { return lock_held_ps_; }

 private:
  RequesterSide* requester_ = nullptr;
  struct RecvWqe {
    uint32_t index = 0;
    std::vector<mpr_wqe_data> sges;
  };
  struct Out {
    enum class Kind { ack, nak, read, atomic } kind = Kind::ack;
    uint32_t psn = 0;
    uint8_t syndrome = 0;
    uint32_t msn = 0;
    // read: the source, translated packet by packet as each response
    // leaves (a key deregistered meanwhile fails the next one)
    uint32_t rkey = 0;
    uint64_t va = 0;
    uint64_t len = 0;
    uint32_t npkts = 0, next_k = 0;
    // atomic
    bool ready = false;
    uint64_t orig = 0;
    // out-of-order engines: the ACK trailer (ack) or none (set from psn)
    bool has_ext = false;
    AckExt ext;
    // read, atomic: takes no responder resource of its own (counted in
    // rd_atomic_uncounted): the answer to a duplicate, or to one of the
    // one-response requests with which an out-of-order requester asks again
    // for a READ whose request was lost.
    bool uncounted = false;
  };
  struct AtomicJob {
    uint32_t qpn;
    uint64_t generation;
    uint32_t psn;
    uint64_t pa;
    bool cas;
    uint64_t swap_add, compare;
    // The target as the request named it: checked again when the unit reads
    // and writes it (a region deregistered meanwhile is not touched).
    uint32_t rkey = 0;
    uint64_t va = 0;
    uint32_t pdn = 0;
    uint64_t op = 0;  // the lock table's name for it
    // When the atomic unit took it up (it then holds one of the
    // nic.atomics.max_outstanding read-modify-write buffers).
    sc_core::sc_time taken_up{};
    // READ as data (MP-RDMA): the original value goes to the QP's own send
    // stream (send_atomic_data; `stream_base` for a QP in RTR).
    bool as_data = false;
    uint32_t stream_base = 0;
  };
  // Out-of-order engines: what the tail packet of a message left for its
  // completion, which comes when every packet before it has arrived.
  struct Tail {
    bool consumes_recv = false;  // SEND or WRITE with immediate
    bool read_data = false;      // READ as data: a response, not a request
    // READ as data: an atomic of the peer, run when its request completes in
    // order (atomics of one QP take effect in their order, as on RC).
    std::optional<AtomicJob> atomic;
    uint32_t byte_len = 0;
    net::RoceFields f;  // opcode, immediate, solicited
    // Out-of-order engines: a single-packet SEND bound for an inline-receive
    // CQE, held until its message completes in order (at most 96 bytes).
    std::vector<uint8_t> inline_data;
  };
  // A shared receive queue's on-chip state (its context is mpr_srqc).
  struct Srq {
    uint64_t generation = 0;
    bool fetching = false;
    uint32_t fetched = 0;          // WQEs fetched: taken (mpr_srqc::taken) + cache
    std::deque<RecvWqe> cache;     // fetched, not yet taken by a QP
    std::deque<uint32_t> waiters;  // QPs waiting for a WQE, in the order they asked
  };
  struct Qp {
    uint32_t qpn = 0;
    uint64_t generation = 0;
    bool active = false;
    // What the message layer must know about the QP's engine, cached when
    // the QP binds to it (in-order defaults before that, and for UD).
    EngineTraits traits;
    bool error = false;
    uint32_t pdn = 0;
    uint32_t access = 0;
    uint32_t mtu = 1024;
    uint8_t min_rnr_timer = 0;
    uint32_t max_dest_rd_atomic = 1;
    net::RoceFields base;
    // receive queue
    uint32_t rq_pi = 0, rq_fetch_idx = 0, rq_ci = 0;
    bool rq_fetching = false;
    std::deque<RecvWqe> recv_cache;
    bool waiting_recv = false;
    // Attached to SRQ srqn: RECVs come from it, `srq_need` of them wanted
    // on chip while waiting_recv.
    bool srq = false;
    uint32_t srqn = 0;
    uint32_t srq_need = 0;
    std::deque<std::pair<net::PacketPtr, net::RoceFields>> stalled;
    // message in progress
    // Each packet's data is translated when it is placed, from the keys:
    // nothing translated is held across packets, so a DEREG_MR between two
    // packets of a message fails the next one (the data path keeps no
    // pages of a region that is gone).
    bool in_send = false;
    RecvWqe send_wqe;
    uint64_t send_cap = 0, send_off = 0;
    bool in_write = false;
    uint32_t write_rkey = 0;
    uint64_t write_va = 0;
    uint64_t write_len = 0, write_off = 0;
    uint32_t msn = 0;
    // output, in PSN order
    std::deque<Out> out;
    uint32_t rd_atomic_out = 0;
    // Of those, the ones Out::uncounted: parts of a READ or atomic the
    // requester counted once (within_rd_atomic_limit).
    uint32_t rd_atomic_uncounted = 0;
    std::deque<std::pair<uint32_t, uint64_t>> atomic_replay;  // psn -> original value
    bool cnp_due = false;  // DCQCN: a CNP for this QP waits for the scheduler
    // Explicit READ acknowledgements: the READs whose responses the engine
    // may ask to send again (responder resources), and its wake-up.
    struct ReadDesc {
      uint32_t psn = 0, npkts = 0;
      uint32_t rkey = 0;
      uint64_t va = 0, len = 0;
    };
    std::deque<ReadDesc> read_table;
    // Responder resources (IB: max_dest_rd_atomic of them): the READs this
    // QP accepted most recently. A duplicate READ request is answered only
    // inside one of them, at the same addresses, so that a flood of
    // duplicates can cost no more than the READs that were really asked.
    std::deque<ReadDesc> rd_resources;
    uint64_t read_wake = kNever;
    // out-of-order engines
    uint32_t recv_msn_base = 0;                // message number of recv_cache.front()
    uint32_t recv_need = 0;                    // RECV WQEs wanted on chip (an early SEND)
    std::unordered_map<uint32_t, Tail> tails;  // by tail PSN
    // UD QP (responder_ud.cc): datagrams, no engine, no ACKs.
    bool ud = false;
    uint32_t qkey = 0;
    // UC QP (responder_uc.cc): no engine, no ACKs. The PSN the next packet
    // of the message in progress must carry, and whether the rest of a
    // message is being dropped (until the next FIRST or ONLY).
    bool uc = false;
    uint32_t uc_epsn = 0;
    bool uc_discarding = false;
  };
  // Runs one atomic's read-modify-write; it holds its bucket's lock.
  void start_rmw(const AtomicJob& job);
  // The atomic's target still passes its key check (not deregistered).
  bool atomic_target_valid(const AtomicJob& job) const;
  // A target revoked before the unit touched it: no DMA, a remote access
  // NAK if its QP still lives.
  void atomic_revoked(const AtomicJob& job);
  // The read-modify-write of `job` (granted its lock at `granted`) is over:
  // counters, the lock to the next waiter, the next atomics.
  void end_rmw(const AtomicJob& job, sc_core::sc_time granted);
  enum class Step { done, stall };

  Qp* find(uint32_t qpn);
  Step handle(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f);
  // UD: checks the opcode and Q_Key, places GRH + payload into the next
  // RECV, writes its CQE (src_qp); drops what it cannot take, never NAKs.
  Step handle_ud(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f);
  Step execute(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f);
  // UC: checks the PSN and the opcode sequence, places SEND and WRITE data
  // in order; drops (and counts) what it cannot take, never answers.
  Step handle_uc(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f);
  // UC: the message in progress is given up (its RECV, not consumed, goes
  // back to the head of the receive queue; WRITE data placed stays).
  void uc_abandon(Qp& qp);
  // UC: the packet is dropped for `reason` (counted), the message in
  // progress abandoned, and the rest of this packet's message dropped too
  // unless the packet was its last.
  void uc_drop(Qp& qp, const net::RoceFields& f, core::Counter& reason, const char* why);
  // UC: a receive-side error completed a RECV in error: the QP goes to ERR
  // (no NAK exists on UC; the error CQE tells the application).
  void uc_fail(Qp& qp, const char* why);
  // Out-of-order engines: place a SEND/WRITE packet wherever it falls,
  // complete messages in order as the engine reports them.
  Step handle_ooo(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f);
  // The RECV WQE of message `msn` on chip (stall: being fetched; null and
  // done: none posted).
  Step recv_for(Qp& qp, uint32_t msn, const RecvWqe*& wqe);
  void complete_ooo(Qp& qp, uint32_t tail_psn);
  // Out-of-order engines that carry READ and atomics (IRN).
  void read_atomic_ooo(Qp& qp, const net::RoceFields& f);
  // DCQCN notification point for CE-marked data of the QP.
  void data_ce(Qp& qp);
  // READ as data, a packet the engine said to place: a READ request (its
  // responses go to the requester's send stream) or a response (the
  // requester places it). False: it failed and the QP is in ERR.
  bool place_read(Qp& qp, const net::RoceFields& f, const net::MpDataExt& x,
                  const uint8_t* payload);
  void duplicate(Qp& qp, const net::RoceFields& f);
  // READ and atomic requests: the checks (false: failed, a fatal NAK is
  // queued) and the queueing of the responses once the transport accepted
  // the request. `count_message`: the request completes its message now
  // (in order); an out-of-order engine reports completions itself.
  bool check_read(Qp& qp, const net::RoceFields& f, Out& o);
  // Whether one more READ or atomic (of `responses` responses) keeps the QP
  // within max_dest_rd_atomic (IB: its responder resources), on every
  // engine.
  bool within_rd_atomic_limit(Qp& qp, uint32_t responses);
  // Out-of-order engines that carry READs themselves (IRN): a request of one
  // response may be part of a READ asked again response by response.
  bool uncounted_request(const Qp& qp, uint32_t responses) const;
  void queue_read(Qp& qp, Out o, bool count_message);
  bool check_atomic(Qp& qp, const net::RoceFields& f, std::vector<Segment>& segs);
  void queue_atomic(Qp& qp, const net::RoceFields& f, uint64_t pa, bool count_message);
  Step take_recv(Qp& qp, const net::RoceFields& f, bool& have);
  void drain_stalled(Qp& qp);
  // Explicit READ acknowledgements: sends response `psn` again (an ONLY
  // response from the READ's table entry); false if the READ is gone.
  bool emit_read_retx(Qp& qp, uint32_t psn);
  // Builds READ response `f` into `slot` with the payload gathered from
  // `segs` (none: an empty response); an unreadable source is fatal.
  void fill_read_response(Qp& qp, const net::RoceFields& f, TxScheduler::Slot slot,
                          const std::vector<Segment>& segs);
  // Response `psn` left: tell the engine, keep its timeout scheduled.
  void read_response_left(Qp& qp, uint32_t psn);
  void schedule_read_wake(Qp& qp);
  void prune_read_table(Qp& qp);
  void fetch_recv(Qp& qp);
  // A RECV WQE's scatter list: `bytes` of mpr_wqe_data entries at `segs`,
  // ended early by MPR_LKEY_END (an RQ slot, or an SRQ slot after its link).
  static RecvWqe parse_recv(uint32_t index, const uint8_t* segs, uint32_t bytes);
  // Whether at least `need` RECV WQEs of the QP are on chip (taken from its
  // SRQ at once when it has one), being fetched (the QP now waits:
  // waiting_recv, the caller stalls the packet) or not posted at all.
  enum class RecvAvail { on_chip, fetching, none };
  RecvAvail need_recvs(Qp& qp, uint32_t need);
  // responder_srq.cc: the SRQ behind a QP (its on-chip state made on first
  // use); null if the SRQ no longer exists.
  Srq* srq_of(uint32_t srqn);
  // Moves WQEs from the SRQ's cache to the QP until it has `need` on chip.
  void take_from_srq(Srq& s, mpr_srqc& ctx, Qp& qp, uint32_t need);
  // Reads WQEs ahead from the head of the SRQ's list.
  void srq_fetch(uint32_t srqn);
  // After a fetch: QPs waiting get their WQEs, in order; a QP the SRQ can no
  // longer serve stops waiting (and answers as with no RECV posted).
  void serve_srq_waiters(uint32_t srqn);
  // The SRQ's ring could not be read: it is unusable, its QPs fail.
  void srq_fault(uint32_t srqn);
  void srq_fetched(uint32_t srqn, uint64_t gen, uint32_t first, uint32_t n, bool ok,
                   const std::vector<uint8_t>& data);
  // A SEND's first packet takes the RECV at the head of the cache (RC and
  // UC alike). False: a scatter entry failed its lkey check, the RECV
  // completed with LOC_PROT_ERR and is consumed; the caller fails the QP
  // its transport's way.
  bool begin_send(Qp& qp);
  // The SEND in progress ends in error: its RECV completes with `status`
  // and is consumed.
  void abort_send(Qp& qp, uint8_t status, uint8_t syndrome);
  void push_ack(Qp& qp, uint32_t psn);
  void push_nak(Qp& qp, uint8_t syndrome, uint32_t psn);
  void fatal(Qp& qp, net::NakCode code, uint32_t psn, uint8_t event, const char* why,
             uint8_t syndrome = 0);
  void recv_cqe(Qp& qp, const RecvWqe& wqe, uint8_t opcode, uint32_t byte_len,
                const net::RoceFields* f, uint8_t status, uint8_t syndrome,
                std::vector<uint8_t> inline_data = {});
  void flush_recvs(Qp& qp);
  void run_atomics();
  bool check_rkey(Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t right,
                  std::vector<Segment>& segs);
  // The QP's remote access flags allow `right` (for a range of `len` bytes).
  bool qp_allows(const Qp& qp, uint32_t right, uint64_t len) const;
  // check_rkey() without the translation (the data moves packet by packet).
  bool rkey_allows(Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t right);
  // Remembers an accepted READ among the QP's responder resources.
  void note_read_resource(Qp& qp, const Out& o);
  // The resource a duplicate READ request `f` falls in, with the same
  // source: null when it names no READ this QP accepted (dropped).
  const Qp::ReadDesc* read_resource_of(const Qp& qp, const net::RoceFields& f) const;
  // Builds and sends the response `psn` of a READ whose source is (rkey,
  // va + k * mtu): false when the source no longer passes its key check
  // (the QP failed with a remote access NAK).
  bool emit_read_response(Qp& qp, net::RoceFields f, uint32_t rkey, uint64_t va, uint64_t len,
                          uint32_t k);

  NicCore& core_;
  core::Calendar calendar_;
  core::LogChannel& log_;
  std::unordered_map<uint32_t, Qp> qps_;
  std::unordered_map<uint32_t, Srq> srqs_;
  std::deque<AtomicJob> atomics_;                                 // not yet taken up
  uarch::AtomicLockTable locks_{uarch::AtomicLockTableParams{}};  // nic.atomics
  std::unordered_map<uint64_t, AtomicJob> lock_waiters_;          // by op, queued for a lock
  // Per lock bucket that was ever held: picoseconds it was held, summed
  // (added at each release), for the bottleneck analysis.
  std::unordered_map<uint32_t, uint64_t> lock_held_ps_;
  int64_t atomics_active_ = 0;  // taken up: running or waiting for a lock
  uint64_t next_atomic_op_ = 0;
  uint64_t generation_ = 0;  // hands out QP generations; bumped by every QP event
  // Device resets only: what a callback in flight across a reset must check.
  // (Not generation_: a QP created or failed elsewhere while an atomic's
  // read-modify-write was in flight made that atomic drop out without
  // releasing its lock, and later atomics on the bucket waited for ever.)
  uint64_t reset_epoch_ = 0;

  core::Counter& packets_;
  core::Counter& bytes_;
  core::Counter& messages_;
  core::Counter& duplicates_;
  core::Counter& seq_naks_;
  core::Counter& ooo_drops_;
  core::Counter& rnr_naks_;
  core::Counter& fatal_naks_;
  core::Counter& dropped_;
  core::Counter& atomics_done_;
  core::Counter& atomic_lock_conflicts_;
  core::Counter& atomic_lock_max_queue_;
  core::Counter& atomic_buffer_busy_ps_;
  core::Counter& doorbells_dropped_;
  core::Counter& rnr_drops_;
  core::Counter& qkey_drops_;
  core::Counter& ud_drops_;
  // UC drops, by reason (responder.uc_drops.*), and partial messages.
  core::Counter& uc_drops_psn_;
  core::Counter& uc_drops_sequence_;
  core::Counter& uc_drops_discarding_;
  core::Counter& uc_drops_access_;
  core::Counter& uc_drops_no_recv_;
  core::Counter& uc_drops_length_;
  core::Counter& uc_drops_opcode_;
  core::Counter& uc_partial_;
  core::Counter& srq_taken_;
  core::Counter& srq_limit_events_;
  core::Counter& srq_list_breaks_;
  core::Counter& header_only_recvs_;
  core::Counter& inline_recvs_;
  core::Counter& read_retransmits_;
  core::Counter& dup_reads_dropped_;
  core::Counter& read_requests_;  // READ as data: READs answered in the own send stream
  // The notification point of a rate control that takes CNPs (DCQCN:
  // at most one CNP per QP per min_cnp_interval).
  std::optional<DcqcnNp> np_;
  core::Counter* cnp_tx_ = nullptr;
};

}  // namespace mprdma::nic
