// The transport-engine interface: the seam between the NIC's message layer
// (requester and responder: WQEs, segmentation, placement, completions) and
// the transport (which PSN goes next, on which path, when; what an ACK means;
// what an arriving PSN is). Engines: RoCEv2 go-back-N (gbn/), MP-RDMA
// (mp_rdma/) and IRN (irn/), each in its own folder; rate control (DCQCN, ...)
// is a separate seam (vp/nic/rate_control/). What the message layer must
// know about an engine is one value, EngineTraits, that a QP caches when it
// binds to its engine.
//
// The interface is narrow and synchronous: every call carries the current
// NIC cycle and returns at once; the NIC charges the cycle cost of each call
// (NicLatencies) around it. Engines keep their own per-connection state,
// whose size state_bytes() reports for the on-chip memory budget. Engines may
// not look at simulator time, SystemC or packets: only at these arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vp/net/mp_ext.h"

namespace mprdma::nic {

constexpr uint32_t kPsnMask = 0xffffff;
inline uint32_t psn_add(uint32_t psn, int64_t delta) {
  return static_cast<uint32_t>(static_cast<int64_t>(psn) + delta) & kPsnMask;
}
// a - b as a signed 24-bit distance.
inline int32_t psn_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(((a - b) & kPsnMask) << 8) >> 8;
}

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

// Thrown by TransportEngine::open() when the engine has no room for another
// connection (an RTL engine's context RAM is full): the NIC fails that QP
// with an asynchronous QP_FATAL event (MPR_SYN_NO_CONTEXT), as hardware out
// of a resource does, and goes on.
struct EngineContextExhausted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One field of an engine's per-connection state, for the on-chip memory
// budget and the papers' state tables.
struct StateField {
  const char* name;
  uint32_t bytes;
};

struct ConnParams {
  uint32_t qpn = 0;
  uint32_t dest_qpn = 0;
  uint32_t sq_psn = 0;              // first PSN the requester sends
  uint32_t rq_psn = 0;              // first PSN the responder expects
  uint64_t ack_timeout_cycles = 0;  // 0: never time out
  uint8_t retry_cnt = 7;            // retransmissions before giving up
  uint8_t rnr_retry = 7;            // 7 = retry for ever
  uint16_t udp_sport = 0xC000;      // path of the connection (RoCEv2 entropy)
  uint32_t ack_coalesce = 1;        // responder: ACK every N packets
  uint8_t engine = 0;               // enum mpr_transport of the QP (TransportMux)
};

// Requester: the engine's answer to "may this QP send, and what".
struct TxGrant {
  bool send = false;
  uint32_t psn = 0;
  uint16_t udp_sport = 0;
  bool retransmit = false;
  // Not sending because the next packet is still in the engine (an RTL
  // engine whose cycles the NIC charges) until this cycle: wake_at() says
  // when to ask again. 0: nothing held.
  uint64_t held_until = 0;
};

// The per-packet ACK fields of out-of-order engines (MP-RDMA Fig. 3, IRN's
// SACK), carried by the ACK trailer of vp/net/mp_ext.h.
struct AckExt {
  uint16_t echo_vp = 0;  // virtual path (UDP source port) of the data packet
  uint32_t sack = 0;     // PSN of the data packet this ACK is for
  uint32_t aack = 0;     // cumulative: every PSN up to and including it arrived
  bool ece = false;      // the data packet arrived CE-marked
  bool retx = false;     // the data packet was a retransmission
  bool nack = false;     // the receiver asks for `sack` again (MP-RDMA) / saw it out of order (IRN)
};

struct AckEvent {
  enum class Kind { ack, nak_sequence, nak_rnr, nak_fatal, read_response, atomic_ack };
  Kind kind = Kind::ack;
  uint32_t psn = 0;      // BTH PSN of the ACK/NAK/response
  bool has_ext = false;  // out-of-order engines: `ext` holds the ACK trailer
  AckExt ext;
  // Packets the NIC has built but not yet put on the wire (its TX pipeline,
  // all QPs): a window-limited sender sees ~0, a port-limited one more.
  uint32_t egress_backlog = 0;
  uint64_t rnr_delay_cycles = 0;  // nak_rnr: how long to wait
  // The message layer's limit: the first PSN whose READ or atomic response
  // has not arrived. A plain ACK beyond it implies that response was lost.
  uint32_t ack_limit = 0;
  // An ACK with the out-of-order trailer beyond ack_limit: the PSNs up to
  // the ACK's whose responses have not arrived, and whether an atomic's is
  // among them.
  std::vector<uint32_t> missing_responses;
  bool missing_atomic = false;
};

struct AckResult {
  enum class Error { none, retry_exceeded, rnr_exceeded, fatal_nak };
  bool progress = false;  // snd_una moved forward
  bool accept = false;    // read_response/atomic_ack: the next expected, place it
  bool rewound = false;   // go back to snd_una (retransmission)
  bool tx_ready = false;  // the engine has packets to send now (ACK clocking)
  Error error = Error::none;
  // read_response with explicit READ acknowledgements: send `read_ack` to
  // the responder as a Read (N)ACK (aack: every response before aack + 1
  // arrived; sack: this response; nack: it arrived after a gap).
  bool send_read_ack = false;
  AckExt read_ack;
};

// Responder: what the message layer asks about an arriving request.
enum class RxVerdict {
  accept,        // the next expected PSN: execute it
  duplicate,     // already executed: re-ACK (or replay a READ/atomic)
  nak_sequence,  // beyond the expected PSN: answer with a sequence NAK
  drop,          // beyond it, and already NAKed: drop silently
};

// Out-of-order engines: an arriving data packet, with its trailer fields.
struct RxPacket {
  uint32_t psn = 0;
  uint16_t vp = 0;          // its UDP source port
  bool ce = false;          // IP ECN was Congestion Experienced
  bool retx = false;        // ReTx bit
  bool tail = false;        // last packet of its message
  bool completion = false;  // tail of a message that needs a completion (consumes a RECV)
  bool sync = false;        // part of a synchronise message
  uint32_t ipsn = 0;        // packet index within its message
  uint32_t npsn = 1;        // PSNs it covers (a READ request: its responses')
};

struct RxOutcome {
  enum class Verdict { place, duplicate, drop };
  Verdict verdict = Verdict::drop;  // place: write its data now, whatever its order
  bool send_ack = false;            // answer with an ACK carrying `ack`
  AckExt ack;
  // Messages this packet completed, oldest first: tail PSN and whether the
  // message needs a completion.
  std::vector<std::pair<uint32_t, bool>> completed;
};

struct AckDecision {
  bool send = false;
  uint32_t psn = 0;  // PSN the ACK acknowledges (last in order)
};

// The log channel of an engine whose statistics go under `stats_prefix`
// ("nic.<host>.transport." -> "nic.<host>.transport"), or `fallback` when it
// has none (an engine built alone, in a unit test).
inline std::string engine_log_channel(const std::string& stats_prefix, const char* fallback) {
  if (stats_prefix.empty()) return fallback;
  return stats_prefix.back() == '.' ? stats_prefix.substr(0, stats_prefix.size() - 1)
                                    : stats_prefix;
}

// What the message layer (requester, responder) must know about an engine,
// as one value: fixed for an engine instance, cached by a QP when it binds.
struct EngineTraits {
  // Packets may arrive and be placed in any order: every packet then
  // carries its placement (RETH in every WRITE packet, message number and
  // intra-message PSN of SEND packets) and the trailer of vp/net/mp_ext.h,
  // and the responder calls on_data() instead of classify()/commit().
  bool out_of_order = false;
  // Out-of-order engines that carry RDMA READ and atomics their own way
  // (IRN). In-order engines always do; MP-RDMA carries them as below.
  bool carries_read_atomic = true;
  // READ travels as data both ways (MP-RDMA): the request is one data
  // packet of the requester's stream (one PSN, the data trailer, ACKed like
  // a WRITE packet), and its responses are data packets of the responder's
  // own send stream (its PSNs, window and virtual paths), whose trailer's
  // message number is the READ request's PSN and index the response's
  // number; the requester's receive side places and ACKs them like any
  // arriving data. Atomics likewise: the request a data packet, its ATOMIC
  // ACKNOWLEDGE (the original value) a one-packet message of the
  // responder's stream, the atomic executed once, when its request is
  // first placed.
  bool read_as_data = false;
  // Out-of-order engines: whether a WRITE packet without immediate carries
  // the data trailer (MP-RDMA: its ReTx and synchronise bits and message
  // number; IRN: no, vp/net/mp_ext.h).
  bool write_trailer = true;
  // Out-of-order engines: a packet of a message whose RECV is not posted is
  // dropped, and true: answered with an RNR NAK that carries the ACK
  // trailer (its NACK names the packet; on_ack gets nak_rnr with `ext`),
  // so that the sender waits the RNR timer and resends from snd_una
  // (MP-RDMA, IRN); false: nothing is answered, the sender's timeout
  // recovers it.
  bool rnr_nacks = false;
  // The engine has its own congestion control (MP-RDMA's window): the NIC's
  // rate control neither paces its QPs nor answers their CE marks.
  bool own_congestion_control = false;
  // The requester answers READ responses with Read (N)ACKs (on_ack's
  // send_read_ack) and the responder recovers lost responses itself (IRN);
  // false: the requester asks again for them.
  bool explicit_read_acks = false;
  // Out-of-order engines: how far from epsn on a packet may be placed (the
  // receive bitmap). The responder checks a request as new only inside
  // [epsn, epsn + rx_window): what it cannot parse outside (a stale
  // duplicate, a stray or forged frame) is dropped instead of failing the
  // QP, as an in-order responder checks a request only at epsn.
  uint32_t rx_window = 1;

  // Trailer bytes a packet of this opcode carries on this engine's
  // connections (vp/net/mp_ext.h): what a sender appends. A receiver reads
  // the packet's own trailer flag instead (RoceFields::trailer_len).
  size_t trailer_bytes(net::Opcode op) const {
    return out_of_order ? net::mp_trailer_bytes(op, write_trailer, read_as_data) : 0;
  }
};

class TransportEngine {
 public:
  virtual ~TransportEngine() = default;
  virtual const char* name() const = 0;
  // Per-connection on-chip state of this engine, in bytes.
  virtual size_t state_bytes() const = 0;

  virtual void open(const ConnParams& params) = 0;           // QP reached RTR
  virtual void set_requester(const ConnParams& params) = 0;  // QP reached RTS
  virtual void close(uint32_t qpn) = 0;

  // ---- requester ----
  // PSNs before snd_max have a packet the message layer can build.
  virtual void set_snd_max(uint32_t qpn, uint32_t snd_max, uint64_t now) = 0;
  virtual TxGrant next_tx(uint32_t qpn, uint64_t now) = 0;
  // A packet starting at `psn` and covering `npsn` PSNs left (READ requests
  // cover their responses' PSNs).
  virtual void on_sent(uint32_t qpn, uint32_t psn, uint32_t npsn, uint64_t now) = 0;
  virtual AckResult on_ack(uint32_t qpn, const AckEvent& ack, uint64_t now) = 0;
  // The next cycle at which the engine wants on_timer() called, or kNever.
  virtual uint64_t wake_at(uint32_t qpn) const = 0;
  virtual AckResult on_timer(uint32_t qpn, uint64_t now) = 0;
  virtual uint32_t snd_una(uint32_t qpn) const = 0;
  virtual uint32_t snd_nxt(uint32_t qpn) const = 0;

  // ---- responder ----
  virtual RxVerdict classify(uint32_t qpn, uint32_t psn, uint64_t now) = 0;
  // An accepted request consumed `npsn` PSNs. `implicit_ack`: its response
  // (READ/atomic) acknowledges it, no ACK packet is due for it.
  virtual AckDecision commit(uint32_t qpn, uint32_t npsn, bool ack_req, bool implicit_ack,
                             uint64_t now) = 0;
  virtual uint32_t epsn(uint32_t qpn) const = 0;
  // The message layer answered the expected PSN with a NAK of its own (RNR):
  // packets beyond it are dropped silently until it arrives again.
  virtual void nak_sent(uint32_t qpn) = 0;

  // ---- out-of-order engines (MP-RDMA, IRN) ----
  // What the message layer must know about this engine (EngineTraits).
  const EngineTraits& traits() const { return traits_; }
  // The traits of the engine that runs QP `qpn`: this one's, or behind a
  // TransportMux the QP's own engine's.
  virtual const EngineTraits& traits_of(uint32_t /*qpn*/) const { return traits_; }
  // The name of the engine that runs QP `qpn` (for messages).
  virtual const char* name_of(uint32_t /*qpn*/) const { return name(); }
  // The message starting at `psn` has the synchronise flag.
  virtual void mark_sync(uint32_t /*qpn*/, uint32_t /*psn*/) {}
  virtual RxOutcome on_data(uint32_t /*qpn*/, const RxPacket& /*p*/, uint64_t /*now*/) {
    throw std::logic_error("on_data() on an in-order transport engine");
  }

  // ---- explicit READ acknowledgements (IRN, EngineTraits::explicit_read_acks) ----
  // Responder: a READ's responses [first_psn, first_psn + n) are queued.
  virtual void read_queued(uint32_t /*qpn*/, uint32_t /*first_psn*/, uint32_t /*n*/,
                           uint64_t /*now*/) {}
  // Responder: response `psn` left (first time or again).
  virtual void read_response_sent(uint32_t /*qpn*/, uint32_t /*psn*/, uint64_t /*now*/) {}
  // Responder: a Read (N)ACK arrived; tx_ready: responses are due again.
  virtual AckResult on_read_ack(uint32_t /*qpn*/, const AckExt& /*ack*/, uint64_t /*now*/) {
    return {};
  }
  // Responder: the next response to send again (false: none is due).
  virtual bool next_read_retx(uint32_t /*qpn*/, uint32_t& /*psn*/) { return false; }
  // Responder: the READ at `first_psn` has responses not yet acknowledged.
  virtual bool read_pending(uint32_t /*qpn*/, uint32_t /*first_psn*/) const { return false; }
  virtual uint64_t read_wake_at(uint32_t /*qpn*/) const { return kNever; }
  virtual AckResult on_read_timer(uint32_t /*qpn*/, uint64_t /*now*/) { return {}; }

 protected:
  TransportEngine() = default;
  explicit TransportEngine(const EngineTraits& traits) : traits_(traits) {}
  EngineTraits traits_;
};

}  // namespace mprdma::nic
