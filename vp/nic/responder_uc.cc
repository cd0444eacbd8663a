// Responder, UC QPs: SENDs and RDMA WRITEs that nobody acknowledges (see
// responder.md, "UC").
//
// IBA ch. 9 (UC service): the responder checks each packet's PSN against
// the one it expects and the opcode against the message in progress, and
// silently drops what does not fit: nothing is ever answered (no ACK, NAK
// or RNR NAK exists on UC). A FIRST or ONLY packet always starts a new
// message, whatever its PSN (the expected PSN becomes its PSN + 1): a
// message still in progress is abandoned. A MIDDLE or LAST packet whose PSN
// is not the expected one (one before it was lost), or with no message of
// its kind in progress, is dropped with the message in progress and the
// rest of that message, until the next FIRST or ONLY. Abandoning a SEND
// puts its RECV back at the head of the receive queue, unconsumed (the
// bytes already placed in its buffer are garbage the next message
// overwrites); a WRITE's bytes already placed stay in memory.
//
// Silently dropped and counted (responder.uc_drops.*): a WRITE whose rkey,
// bounds or REMOTE_WRITE right fail (access), a SEND or WRITE with
// immediate finding no RECV posted (no_recv), a packet of the wrong length
// (length). A RECV that fails locally completes in error and the QP goes
// to ERR (see uc_fail): a SEND longer than its RECV (LOC_LEN_ERR /
// RECV_TOO_SMALL) and a RECV whose lkey fails (LOC_PROT_ERR / BAD_LKEY).
// That is IBA's treatment of receive WQE errors on UC and the verbs rule
// that a completion in error moves the QP to the error state; there is no
// peer to tell.
#include <cstring>

#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/rc_opcodes.h"
#include "vp/nic/responder.h"

namespace mprdma::nic {

void Responder::uc_abandon(Qp& qp) {
  if (qp.in_send) {
    qp.recv_cache.push_front(std::move(qp.send_wqe));  // not consumed: the next SEND takes it
    qp.in_send = false;
    ++uc_partial_;
  }
  if (qp.in_write) {
    qp.in_write = false;
    ++uc_partial_;
  }
}

void Responder::uc_drop(Qp& qp, const net::RoceFields& f, core::Counter& reason, const char* why) {
  ++reason;
  MPR_LOG(log_, debug,
          "UC QP " << qp.qpn << ": " << net::to_string(f.opcode) << " PSN " << f.psn
                   << " dropped: " << why);
  uc_abandon(qp);
  qp.uc_discarding = !ends(net::rc_equivalent(f.opcode));
}

void Responder::uc_fail(Qp& qp, const char* why) {
  MPR_LOG(log_, info, "UC QP " << qp.qpn << " to ERR: " << why);
  const uint32_t qpn = qp.qpn;
  if (mpr_qpc* ctx = core_.contexts.qp(qpn)) ctx->state = ctx->attr.qp_state = MPR_QPS_ERR;
  qp_to_error(qpn);
  if (requester_) requester_->qp_to_error(qpn);
}

Responder::Step Responder::handle_uc(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f) {
  if (!qp.uc || !net::is_uc(f.opcode)) {
    ++uc_drops_opcode_;
    MPR_LOG(log_, info,
            "QP " << qp.qpn << ": " << net::to_string(f.opcode)
                  << (qp.uc ? " on a UC QP" : " on an RC QP") << " dropped");
    return Step::done;
  }
  const net::Opcode op = net::rc_equivalent(f.opcode);
  // The packet's fields under the RC opcode, for the receive CQE (immediate,
  // solicited), which knows the RC opcodes.
  net::RoceFields rf = f;
  rf.opcode = op;
  const bool first = starts(op), last = ends(op), send = is_send(op);
  const uint8_t* payload = pkt->data.data() + f.payload_offset;
  const uint32_t plen = f.payload_len;

  if (first) {
    // A new message, whatever its PSN: the one in progress (its LAST was
    // lost) is given up. Idempotent, so a packet replayed after a RECV
    // fetch finds the same state.
    uc_abandon(qp);
    qp.uc_discarding = false;
  } else if (qp.uc_discarding) {
    ++uc_drops_discarding_;
    return Step::done;
  } else if (f.psn != qp.uc_epsn) {
    uc_drop(qp, f, uc_drops_psn_, "PSN not the expected one");
    return Step::done;
  } else if (send ? !qp.in_send : !qp.in_write) {
    uc_drop(qp, f, uc_drops_sequence_, "no message of its kind in progress");
    return Step::done;
  }
  // Every packet but the last of a message carries exactly one MTU.
  if (f.trailer_len != 0 || (!last && plen != qp.mtu) || plen > qp.mtu) {
    uc_drop(qp, f, uc_drops_length_, "payload length");
    return Step::done;
  }
  // SEND (first packet) and WRITE with immediate (last) take a RECV: wait
  // for one being fetched before any state changes, drop if none is posted.
  if ((send && first) || (!send && carries_imm(op))) {
    switch (need_recvs(qp, 1)) {
      case RecvAvail::on_chip:
        break;
      case RecvAvail::fetching:
        return Step::stall;
      case RecvAvail::none:
        uc_drop(qp, f, uc_drops_no_recv_, "no RECV posted");
        return Step::done;
    }
  }
  qp.uc_epsn = psn_add(f.psn, 1);

  if (send) {
    if (first) {
      if (!begin_send(qp)) {
        uc_fail(qp, "RECV buffer fails its lkey check");
        return Step::done;
      }
    }
    if (qp.send_off + plen > qp.send_cap) {
      ++uc_drops_length_;
      abort_send(qp, MPR_CQE_LOC_LEN_ERR, MPR_SYN_RECV_TOO_SMALL);
      uc_fail(qp, "SEND longer than the RECV buffers");
      return Step::done;
    }
    std::vector<uint8_t> inline_data;
    const mpr_qpc* qc = core_.contexts.qp(qp.qpn);
    if (first && last && plen && qc && plen <= core_.cq.inline_capacity(qc->recv_cqn)) {
      inline_data.assign(payload, payload + plen);
      ++inline_recvs_;
    } else if (plen) {
      std::vector<Segment> segs;
      if (core_.translation.translate_sges(qp.send_wqe.sges, qp.pdn, qp.send_off, plen,
                                           MPR_ACCESS_LOCAL_WRITE, segs) != AccessStatus::ok) {
        recv_cqe(qp, qp.send_wqe, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_LOC_PROT_ERR,
                 MPR_SYN_BAD_LKEY);
        qp.in_send = false;
        ++qp.rq_ci;
        uc_fail(qp, "RECV buffer's memory region deregistered during the SEND");
        return Step::done;
      }
      core_.dma.scatter(segs, payload, DmaPurpose::payload);
    }
    qp.send_off += plen;
    bytes_.add(plen);
    ++packets_;
    if (last) {
      if (qp.send_cap == 0 && qp.send_off == 0) ++header_only_recvs_;
      recv_cqe(qp, qp.send_wqe, carries_imm(op) ? MPR_CQE_RESP_RECV_IMM : MPR_CQE_RESP_RECV,
               static_cast<uint32_t>(qp.send_off), &rf, MPR_CQE_SUCCESS, MPR_SYN_NONE,
               std::move(inline_data));
      qp.in_send = false;
      ++qp.rq_ci;
      ++messages_;
    }
    return Step::done;
  }

  // RDMA WRITE.
  if (first) {
    if (f.reth_dma_len > MPR_MAX_MSG_SIZE) {
      uc_drop(qp, f, uc_drops_length_, "WRITE longer than the largest message");
      return Step::done;
    }
    if (!rkey_allows(qp, f.reth_rkey, f.reth_va, f.reth_dma_len, MPR_ACCESS_REMOTE_WRITE)) {
      uc_drop(qp, f, uc_drops_access_, "WRITE rkey check failed");
      return Step::done;
    }
    qp.write_rkey = f.reth_rkey;
    qp.write_va = f.reth_va;
    qp.write_len = f.reth_dma_len;
    qp.write_off = 0;
    qp.in_write = true;
  }
  if (qp.write_off + plen > qp.write_len || (last && qp.write_off + plen != qp.write_len)) {
    uc_drop(qp, f, uc_drops_length_, "WRITE payload does not match its RETH length");
    return Step::done;
  }
  std::vector<Segment> segs;
  if (!check_rkey(qp, qp.write_rkey, qp.write_va + qp.write_off, plen, MPR_ACCESS_REMOTE_WRITE,
                  segs)) {
    uc_drop(qp, f, uc_drops_access_, "WRITE's memory region deregistered during the WRITE");
    return Step::done;
  }
  core_.dma.scatter(segs, payload, DmaPurpose::payload);
  qp.write_off += plen;
  bytes_.add(plen);
  ++packets_;
  if (last) {
    qp.in_write = false;
    ++messages_;
    if (carries_imm(op)) {
      RecvWqe w = std::move(qp.recv_cache.front());
      qp.recv_cache.pop_front();
      recv_cqe(qp, w, MPR_CQE_RESP_WRITE_IMM, static_cast<uint32_t>(qp.write_len), &rf,
               MPR_CQE_SUCCESS, MPR_SYN_NONE);
      ++qp.rq_ci;
      fetch_recv(qp);
    }
  }
  return Step::done;
}

}  // namespace mprdma::nic
