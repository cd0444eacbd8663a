// The two halves of a QP inside the NIC and what each asks of the other.
//
// Every QP is both a requester (its send queue, Requester) and a responder
// (its receive queue, Responder), and a few things cross between the two:
// an error on one side flushes the other; on engines that carry READ as
// data (MP-RDMA) the responder's READ responses travel in the requester's
// send stream and the responses the requester gets are placed through the
// responder's receive bitmap; DCQCN has one rate limiter per QP for requests
// and READ responses alike. These two interfaces are the whole of that
// traffic, so that neither block depends on the other's header, and a
// block built alone (in a test) simply has no other side (nullptr).
#pragma once

#include <cstdint>
#include <vector>

#include "vp/net/roce_codec.h"
#include "vp/nic/translation.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

// What the responder of a QP asks of its requester.
class RequesterSide {
 public:
  virtual ~RequesterSide() = default;
  // The responder moved the QP to ERR: flush the send queue.
  virtual void qp_to_error(uint32_t qpn) = 0;
  // READ as data: the responses of the peer's READ `read_psn` (source: `len`
  // bytes at `va` of the region `rkey`, whose checks passed; each response
  // is translated as it leaves) join the QP's send stream; a QP still in
  // RTR starts that stream at `stream_base`. False: the QP cannot send.
  virtual bool send_read_data(uint32_t qpn, uint32_t read_psn, uint32_t stream_base, uint32_t rkey,
                              uint64_t va, uint64_t len) = 0;
  // READ as data: the peer's READs and atomics whose responses have not all
  // left the QP's send stream yet (its responder resources in use).
  virtual uint32_t answers_pending(uint32_t qpn) = 0;
  // Likewise the ATOMIC ACKNOWLEDGE of the peer's atomic, with value `orig`.
  virtual bool send_atomic_data(uint32_t qpn, uint32_t atomic_psn, uint32_t stream_base,
                                uint64_t orig) = 0;
  // READ as data: response `k` of this QP's READ `read_psn` arrived in the
  // receive bitmap: place it. False: no such READ, or it does not fit.
  virtual bool place_read_data(uint32_t qpn, uint32_t read_psn, uint32_t k,
                               const net::RoceFields& f, const uint8_t* payload) = 0;
  // DCQCN: the earliest cycle the QP's next paced packet may start (when
  // later than `now`, the requester wakes the QP then: it is the limiter's
  // owner), and the accounting of one sent.
  virtual uint64_t paced_at(uint32_t qpn, uint64_t now) = 0;
  virtual void paced_sent(uint32_t qpn, uint64_t wire_bytes, uint64_t now) = 0;
};

// What the requester of a QP asks of its responder.
class ResponderSide {
 public:
  virtual ~ResponderSide() = default;
  // The requester moved the QP to ERR: flush the receive queue.
  virtual void qp_to_error(uint32_t qpn) = 0;
  // A Read (N)ACK (explicit READ acknowledgements, IRN) for responses the
  // responder sent.
  virtual void on_read_ack(uint32_t qpn, const AckExt& ack) = 0;
  // A READ response arrived CE-marked: the notification point may send a CNP.
  virtual void response_ce(uint32_t qpn) = 0;
  // READ as data: the source of READ `read_psn`'s responses could not be
  // read (`revoked`: its region was deregistered; else a DMA fault): NAK
  // the READ.
  virtual void read_source_fault(uint32_t qpn, uint32_t read_psn, bool revoked) = 0;
  // Sends the responder's next packet of the QP now, in the requester's
  // turn with the TX scheduler (the NAK read_source_fault queued).
  virtual bool try_emit(uint32_t qpn) = 0;
};

}  // namespace mprdma::nic
