// The responder's path for out-of-order transport engines (MP-RDMA, IRN):
// every SEND and WRITE packet is placed as soon as it arrives, wherever it
// falls in its message, because it carries its placement (a WRITE its own
// RETH, a SEND its message number and index in the data trailer of
// vp/net/mp_ext.h). The engine decides what the packet is (place,
// duplicate, drop), what to ACK, and which messages are complete; the
// responder completes them in order: a CQE and the RECV WQE consumed for a
// SEND or a WRITE with immediate.
#include <algorithm>

#include "vp/net/mp_ext.h"
#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/rc_opcodes.h"
#include "vp/nic/responder.h"

namespace mprdma::nic {

using net::Opcode;

Responder::Step Responder::recv_for(Qp& qp, uint32_t msn, const RecvWqe*& wqe) {
  wqe = nullptr;
  const int32_t idx = psn_diff(msn, qp.recv_msn_base);
  if (idx < 0) return Step::done;  // completed long ago: a duplicate
  if (static_cast<size_t>(idx) < qp.recv_cache.size()) {
    wqe = &qp.recv_cache[static_cast<size_t>(idx)];
    return Step::done;
  }
  // Posted but not on chip yet: fetch up to it and hold the packet.
  const uint32_t need = static_cast<uint32_t>(idx) + 1;
  const uint32_t was_needed = qp.recv_need;
  qp.recv_need = std::max(qp.recv_need, need);
  switch (need_recvs(qp, need)) {
    case RecvAvail::on_chip:  // taken from the QP's SRQ at once
      wqe = &qp.recv_cache[static_cast<size_t>(idx)];
      return Step::done;
    case RecvAvail::fetching:
      return Step::stall;
    case RecvAvail::none:
      break;
  }
  qp.recv_need = was_needed;
  return Step::done;  // not posted
}

Responder::Step Responder::handle_ooo(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f) {
  const Opcode op = f.opcode;
  if ((op == Opcode::RDMA_READ_REQUEST || op == Opcode::COMPARE_SWAP || op == Opcode::FETCH_ADD) &&
      qp.traits.carries_read_atomic) {
    read_atomic_ooo(qp, f);
    return Step::done;
  }
  // READ as data (MP-RDMA): a READ request of the peer's stream, or a
  // response of it to one of this QP's READs; both carry the data trailer.
  const EngineTraits& engine = qp.traits;
  const bool atomic_op = op == Opcode::COMPARE_SWAP || op == Opcode::FETCH_ADD;
  const bool read_req = (op == Opcode::RDMA_READ_REQUEST || atomic_op) && engine.read_as_data;
  const bool read_resp =
      (is_read_response(op) || op == Opcode::ATOMIC_ACKNOWLEDGE) && engine.read_as_data;
  // A packet the engine could not place as new (behind epsn, or beyond its
  // window) is not checked as a request: what fails a check there is
  // dropped, not a reason to fail the QP (a stale duplicate, a stray frame).
  const int32_t ahead = psn_diff(f.psn, core_.engine.epsn(qp.qpn));
  auto refuse = [&](net::NakCode code, uint8_t event, const char* why,
                    uint8_t syndrome = MPR_SYN_NONE) {
    if (ahead < 0 || static_cast<uint32_t>(ahead) >= engine.rx_window) {
      ++ooo_drops_;
      MPR_LOG(
          log_, debug,
          "QP " << qp.qpn << " PSN " << f.psn << ": " << why << ", outside the window: dropped");
      return Step::done;
    }
    fatal(qp, code, f.psn, event, why, syndrome);
    return Step::done;
  };
  net::MpDataExt x;
  const bool has_trailer = engine.trailer_bytes(op) != 0;
  // A WRITE packet without a trailer (IRN): its RETH places it; the tail of
  // its message is the packet with AckReq, which the requester sets on the
  // last packet of every message (as RoCEv2 requesters do; these engines ACK
  // every packet anyway).
  x.tail = !has_trailer && f.ack_req;
  if (!(is_send(op) || is_write(op) || read_req || read_resp) ||
      f.trailer_len != engine.trailer_bytes(op) ||
      (has_trailer && !net::get_mp_data_ext(net::trailer_of(pkt->data.data(), f), x))) {
    return refuse(net::NakCode::invalid_request, MPR_EQE_QP_REQ_ERR,
                  "request the out-of-order transport does not carry, or without its trailer");
  }
  const uint32_t plen = f.payload_len;
  const bool consumes = is_send(op) || carries_imm(op);
  const bool first = x.ipsn == 0;
  const bool opcode_ok = is_send(op) ? ends(op) == x.tail && starts(op) == first
                         : read_req  ? x.tail && first && plen == 0
                         : op == Opcode::ATOMIC_ACKNOWLEDGE ? x.tail && first && plen == 0
                         : read_resp ? op == (first && x.tail ? Opcode::RDMA_READ_RESPONSE_ONLY
                                              : first         ? Opcode::RDMA_READ_RESPONSE_FIRST
                                              : x.tail        ? Opcode::RDMA_READ_RESPONSE_LAST
                                                              : Opcode::RDMA_READ_RESPONSE_MIDDLE)
                                     : (op == Opcode::RDMA_WRITE_ONLY ||
                                        (op == Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE && x.tail));
  // Every WRITE packet's RETH covers exactly its own payload: a mismatch is
  // a peer that frames WRITEs otherwise (another out-of-order engine, with or
  // without the trailer), whose bytes must not be placed.
  if (is_write(op) && f.reth_dma_len != plen) {
    return refuse(net::NakCode::invalid_request, MPR_EQE_QP_REQ_ERR,
                  "WRITE packet's RETH length is not its payload's (a peer on another transport?)");
  }
  if (!opcode_ok || plen > qp.mtu || (!x.tail && plen != qp.mtu)) {
    return refuse(net::NakCode::invalid_request, MPR_EQE_QP_REQ_ERR,
                  "opcode, tail flag and payload length inconsistent");
  }
  // Where the data goes, checked before the engine records the packet, so
  // that a packet held for its RECV WQE is seen again unchanged.
  std::vector<Segment> segs;
  if (is_write(op) &&
      !check_rkey(qp, f.reth_rkey, f.reth_va, plen, MPR_ACCESS_REMOTE_WRITE, segs)) {
    return refuse(net::NakCode::remote_access_error, MPR_EQE_QP_ACCESS_ERR,
                  "WRITE rkey check failed");
  }
  const bool old = ahead < 0;
  if (consumes && !old) {
    const RecvWqe* wqe = nullptr;
    if (recv_for(qp, x.msn, wqe) == Step::stall) return Step::stall;
    if (!wqe && psn_diff(x.msn, qp.recv_msn_base) >= 0) {
      // No RECV posted for this message: drop the packet (the bitmap does
      // not see it) and answer with an RNR NAK whose trailer NACKs it: the
      // sender waits the QP's RNR timer and resends from snd_una (every
      // packet of the message is NACKed so; the first starts the wait).
      // An engine without rnr_nacks leaves it to the sender's timeout.
      ++rnr_drops_;
      if (engine.rnr_nacks) {
        const mpr_qpc* q = core_.contexts.qp(qp.qpn);
        Out a;
        a.kind = Out::Kind::ack;
        a.ext.echo_vp = f.udp_sport;
        a.ext.sack = f.psn;
        a.ext.aack = psn_add(core_.engine.epsn(qp.qpn), -1);
        a.ext.ece = f.ecn == 3;
        a.ext.retx = x.retx;
        a.ext.nack = true;
        a.psn = a.ext.aack;
        a.msn = qp.msn;
        a.syndrome = net::aeth_rnr_nak(q ? q->attr.min_rnr_timer : qp.min_rnr_timer);
        a.has_ext = true;
        qp.out.push_back(a);
        ++rnr_naks_;
        core_.tx.activate(qp.qpn);
      }
      return Step::done;
    }
    if (wqe && is_send(op)) {
      std::vector<Segment> bufs;
      uint64_t cap = 0;
      for (const mpr_wqe_data& d : wqe->sges) {
        if (core_.translation.translate(d.lkey, qp.pdn, d.addr, d.byte_count,
                                        MPR_ACCESS_LOCAL_WRITE, bufs) != AccessStatus::ok) {
          return refuse(net::NakCode::remote_operational_error, MPR_EQE_QP_FATAL,
                        "RECV buffer fails its lkey check", MPR_SYN_BAD_LKEY);
        }
        cap += d.byte_count;
      }
      const uint64_t offset = uint64_t(x.ipsn) * qp.mtu;
      if (offset + plen > cap) {
        return refuse(net::NakCode::invalid_request, MPR_EQE_QP_REQ_ERR,
                      "SEND longer than the RECV buffers");
      }
      slice_segments(bufs, offset, plen, segs);
    }
  }

  RxPacket p;
  p.psn = f.psn;
  p.vp = f.udp_sport;
  p.ce = f.ecn == 3;
  p.retx = x.retx;
  p.tail = x.tail;
  p.completion = x.tail && consumes;
  p.sync = x.sync;
  p.ipsn = x.ipsn;
  const uint32_t qpn = qp.qpn;
  RxOutcome o = core_.engine.on_data(qpn, p, core_.now_cycle());
  switch (o.verdict) {
    case RxOutcome::Verdict::place: {
      if (read_req || read_resp) {
        if (!place_read(qp, f, x, pkt->data.data() + f.payload_offset)) return Step::done;
        break;
      }
      // Inline receive: a single-packet SEND that fits the receive CQ's
      // slots is kept on chip and goes into its CQE when the message
      // completes, in order; everything else is placed now.
      const uint8_t* payload = pkt->data.data() + f.payload_offset;
      const mpr_qpc* qc = core_.contexts.qp(qpn);
      const bool in_cqe = is_send(op) && consumes && x.ipsn == 0 && x.tail && plen && qc &&
                          plen <= core_.cq.inline_capacity(qc->recv_cqn);
      if (!in_cqe) core_.dma.scatter(segs, payload, DmaPurpose::payload);
      bytes_.add(plen);
      ++packets_;
      if (x.tail) {
        Tail& t = qp.tails[f.psn];
        t.consumes_recv = consumes;
        t.byte_len = static_cast<uint32_t>(uint64_t(x.ipsn) * qp.mtu + plen);
        t.f = f;
        if (in_cqe) {
          t.inline_data.assign(payload, payload + plen);
          ++inline_recvs_;
        }
      }
      break;
    }
    case RxOutcome::Verdict::duplicate:
      ++duplicates_;
      break;
    case RxOutcome::Verdict::drop:
      ++ooo_drops_;
      break;
  }
  if (o.send_ack) {
    Out a;
    a.kind = Out::Kind::ack;
    a.psn = o.ack.aack;
    a.msn = qp.msn;
    a.syndrome = net::aeth_ack(0x1f);
    a.has_ext = true;
    a.ext = o.ack;
    qp.out.push_back(a);
    core_.tx.activate(qpn);
  }
  for (const auto& c : o.completed) {
    complete_ooo(qp, c.first);
    if (qp.error) break;
  }
  return Step::done;
}

bool Responder::place_read(Qp& qp, const net::RoceFields& f, const net::MpDataExt& x,
                           const uint8_t* payload) {
  const uint32_t qpn = qp.qpn;
  std::optional<AtomicJob> atomic;
  if (f.opcode == Opcode::COMPARE_SWAP || f.opcode == Opcode::FETCH_ADD) {
    // An atomic of the peer, executed once (its request is placed once),
    // when it completes in order (complete_ooo); its original value then
    // joins this QP's own send stream.
    std::vector<Segment> segs;
    if (!check_atomic(qp, f, segs)) return false;  // NAKed, QP in ERR
    AtomicJob job{qpn,
                  qp.generation,
                  f.psn,
                  segs.front().pa,
                  f.opcode == Opcode::COMPARE_SWAP,
                  f.atomic_swap_add,
                  f.atomic_compare};
    job.rkey = f.atomic_rkey;
    job.va = f.atomic_va;
    job.pdn = qp.pdn;
    job.as_data = true;
    job.stream_base = x.msn;
    atomic = job;
  } else if (f.opcode == Opcode::RDMA_READ_REQUEST) {
    // A READ of the peer: its responses join this QP's own send stream.
    Out o;
    if (!check_read(qp, f, o)) return false;  // NAKed, QP in ERR
    if (!requester_ || !requester_->send_read_data(qpn, f.psn, x.msn, o.rkey, o.va, o.len)) {
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
            "READ on a QP that cannot send its responses");
      return false;
    }
    ++read_requests_;
  } else {
    // A response to one of this QP's READs: the requester places it (or
    // fails the QP when it fits no READ).
    const uint64_t gen = qp.generation;
    if (!requester_ || !requester_->place_read_data(qpn, x.msn, x.ipsn, f, payload)) return false;
    Qp* again = find(qpn);
    if (!again || again->generation != gen || again->error) return false;
  }
  if (x.tail) {
    Tail& t = qp.tails[f.psn];
    t.read_data = is_read_response(f.opcode) || f.opcode == Opcode::ATOMIC_ACKNOWLEDGE;
    t.atomic = atomic;
    t.f = f;
  }
  return true;
}

void Responder::read_source_fault(uint32_t qpn, uint32_t read_psn, bool revoked) {
  Qp* qp = find(qpn);
  if (!qp || qp->error) return;
  if (revoked)
    fatal(*qp, net::NakCode::remote_access_error, read_psn, MPR_EQE_QP_ACCESS_ERR,
          "READ source's memory region deregistered during the READ");
  else
    fatal(*qp, net::NakCode::remote_operational_error, read_psn, MPR_EQE_QP_FATAL,
          "READ source not readable", MPR_SYN_DMA_FAULT);
}

void Responder::read_atomic_ooo(Qp& qp, const net::RoceFields& f) {
  // A READ request covers the PSNs of its responses, an atomic one PSN;
  // both are answered by their responses, never by an ACK. A duplicate (a
  // re-request of responses the requester missed) is answered again.
  const bool read = f.opcode == Opcode::RDMA_READ_REQUEST;
  RxPacket p;
  p.psn = f.psn;
  p.vp = f.udp_sport;
  p.ce = f.ecn == 3;
  p.tail = true;
  p.npsn = read ? std::max<uint32_t>(
                      1, static_cast<uint32_t>((uint64_t{f.reth_dma_len} + qp.mtu - 1) / qp.mtu))
                : 1;
  RxOutcome r = core_.engine.on_data(qp.qpn, p, core_.now_cycle());
  switch (r.verdict) {
    case RxOutcome::Verdict::place: {
      // A check that fails moves the QP to ERR: what the engine recorded no
      // longer matters.
      Out o;
      std::vector<Segment> segs;
      if (!(read ? check_read(qp, f, o) : check_atomic(qp, f, segs))) return;
      Tail& t = qp.tails[psn_add(f.psn, p.npsn - 1)];
      t.consumes_recv = false;
      t.f = f;
      if (read)
        queue_read(qp, std::move(o), false);
      else
        queue_atomic(qp, f, segs.front().pa, false);
      break;
    }
    case RxOutcome::Verdict::duplicate:
      ++duplicates_;
      duplicate(qp, f);
      break;
    case RxOutcome::Verdict::drop:
      ++ooo_drops_;
      break;
  }
  for (const auto& c : r.completed) {
    complete_ooo(qp, c.first);
    if (qp.error) break;
  }
}

void Responder::complete_ooo(Qp& qp, uint32_t tail_psn) {
  auto it = qp.tails.find(tail_psn);
  if (it == qp.tails.end()) {
    MPR_LOG(log_, error,
            "QP " << qp.qpn << ": engine completed a message at PSN " << tail_psn
                  << " whose tail was never placed");
    return;
  }
  Tail t = std::move(it->second);
  qp.tails.erase(it);
  if (t.read_data) return;  // a response of the peer's stream: the requester completes the READ
  qp.msn = psn_add(qp.msn, 1);
  ++messages_;
  if (t.atomic) {
    atomics_.push_back(*t.atomic);
    run_atomics();
    return;
  }
  if (!t.consumes_recv) return;
  if (qp.recv_cache.empty()) {
    MPR_LOG(log_, error,
            "QP " << qp.qpn << ": message at PSN " << tail_psn
                  << " completed without its RECV WQE on chip");
    return;
  }
  const RecvWqe w = std::move(qp.recv_cache.front());
  qp.recv_cache.pop_front();
  qp.recv_msn_base = psn_add(qp.recv_msn_base, 1);
  if (qp.recv_need) --qp.recv_need;
  const uint8_t opcode = is_write(t.f.opcode)      ? MPR_CQE_RESP_WRITE_IMM
                         : carries_imm(t.f.opcode) ? MPR_CQE_RESP_RECV_IMM
                                                   : MPR_CQE_RESP_RECV;
  recv_cqe(qp, w, opcode, t.byte_len, &t.f, MPR_CQE_SUCCESS, MPR_SYN_NONE,
           std::move(t.inline_data));
  ++qp.rq_ci;
  fetch_recv(qp);
}

}  // namespace mprdma::nic
