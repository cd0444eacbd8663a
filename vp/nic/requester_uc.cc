// Requester, UC QPs: SENDs and RDMA WRITEs without acknowledgements (see
// requester.md, "UC").
//
// A UC WQE is fetched and parsed like an RC one (same WQE layout; READ and
// atomics fail with LOC_QP_OP_ERR / UNSUPPORTED in parse). PSNs are
// assigned per packet over the path MTU, as on RC, but no transport engine
// grants them: the packets of the SQ's messages leave in order, one per
// turn of the TX scheduler, with the UC opcodes (0x20 + the RC opcode), no
// AckReq and no retransmission. The WQE completes (unacked_complete, in SQ
// order, like UD) once its last packet is built and every payload read has
// returned. Nothing paces a UC QP: the NIC's rate control (DCQCN) acts on
// RC QPs only.
#include <algorithm>

#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/qp_params.h"
#include "vp/nic/requester.h"

namespace mprdma::nic {

void Requester::assign_uc(Qp& qp) {
  bool added = false;
  while (!qp.pending.empty()) {
    Message& m = qp.pending.front();
    m.first_psn = qp.next_psn;
    if (m.status != MPR_CQE_SUCCESS) {
      m.npsn = 0;  // completes with its error when it reaches the head
      qp.inflight.push_back(std::move(m));
      qp.pending.pop_front();
      break;
    }
    // parse() bounded the packets to less than half the PSN space.
    m.npsn = m.packets(qp.mtu);
    m.uc_next = 0;
    qp.next_psn = psn_add(qp.next_psn, m.npsn);
    qp.inflight.push_back(std::move(m));
    qp.pending.pop_front();
    added = true;
  }
  if (added && qp.active && !qp.error) core_.tx.activate(qp.qpn);
}

bool Requester::emit_uc(Qp& qp) {
  if (qp.inflight.empty()) return false;
  Message& m = qp.inflight.front();
  if (m.npsn == 0) {
    retire_unacked(qp);  // a failed WQE at the head (after the sent ones complete)
    return false;
  }
  const uint32_t k = m.uc_next;
  const bool first = k == 0, last = k + 1 == m.npsn;
  if (first) {
    Qp::Unacked u;
    u.index = m.index;
    u.opcode = m.opcode;
    u.flags = m.flags;
    u.length = m.length;
    qp.unacked.push_back(u);
  }
  Qp::Unacked& u = qp.unacked.back();  // this message's (pushed at its first packet)
  if (m.length && m.inline_data.empty() && !local_still_valid(qp, m)) {
    // Its buffer was deregistered since the WQE was parsed: it fails here;
    // packets already sent stay sent (the responder drops the partial
    // message at the next FIRST or ONLY).
    u.status = MPR_CQE_LOC_PROT_ERR;
    u.syndrome = MPR_SYN_BAD_LKEY;
    u.built = true;
    qp.inflight.pop_front();
    unacked_complete(qp);
    return false;
  }
  using net::Opcode;
  const bool send = m.opcode == MPR_WQE_SEND || m.opcode == MPR_WQE_SEND_IMM;
  const bool imm = m.opcode == MPR_WQE_SEND_IMM || m.opcode == MPR_WQE_RDMA_WRITE_IMM;
  const uint32_t mtu = qp.mtu;
  const uint64_t offset = uint64_t(k) * mtu;
  const uint32_t plen =
      static_cast<uint32_t>(std::min<uint64_t>(mtu, m.length - std::min(m.length, offset)));
  net::RoceFields f = qp.base;  // addresses, destination QP, UDP source port, ECN
  f.psn = psn_add(m.first_psn, k);
  Opcode rc;
  if (first && last)
    rc = send ? (imm ? Opcode::SEND_ONLY_WITH_IMMEDIATE : Opcode::SEND_ONLY)
              : (imm ? Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE : Opcode::RDMA_WRITE_ONLY);
  else if (first)
    rc = send ? Opcode::SEND_FIRST : Opcode::RDMA_WRITE_FIRST;
  else if (last)
    rc = send ? (imm ? Opcode::SEND_LAST_WITH_IMMEDIATE : Opcode::SEND_LAST)
              : (imm ? Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode::RDMA_WRITE_LAST);
  else
    rc = send ? Opcode::SEND_MIDDLE : Opcode::RDMA_WRITE_MIDDLE;
  f.opcode = net::uc_of(rc);
  if (!send && first) {
    f.reth_va = m.remote_va;
    f.reth_rkey = m.rkey;
    f.reth_dma_len = static_cast<uint32_t>(m.length);
  }
  if (imm && last) f.imm = __builtin_bswap32(m.imm);
  f.ack_req = false;  // nothing is ever acknowledged on UC
  if (last) f.solicited = (m.flags & MPR_WQE_F_SOLICITED) && (send || imm);
  ++packets_;
  ++uc_packets_;
  const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
  if (plen == 0 || !m.inline_data.empty()) {
    core_.tx.fill(slot, net::build_roce(f, plen ? m.inline_data.data() + offset : nullptr, plen));
  } else {
    ++u.reads;
    std::vector<Segment> segs;
    slice_segments(m.local, offset, plen, segs);
    gather_unacked(qp, segs, f, slot, m.index);
  }
  if (last) {
    u.built = true;
    qp.inflight.pop_front();
    unacked_complete(qp);
  } else {
    ++m.uc_next;
  }
  return true;
}

}  // namespace mprdma::nic
