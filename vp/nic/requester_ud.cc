// Requester, UD QPs: datagram SENDs (see requester.md, "UD").
//
// A UD WQE is fetched (DMA read, or WQE by MMIO) and parsed like an RC one,
// with the address segment (struct mpr_wqe_ud) after the control segment.
// It takes one PSN and leaves as one UD_SEND_ONLY[_WITH_IMMEDIATE] packet
// with a DETH; there is no transport engine, no ACK and no retransmission:
// the WQE completes when its packet is built (payload read), in SQ order. A
// SEND longer than the path MTU fails with LOC_LEN_ERR / MSG_TOO_LONG; a
// failed UD WQE moves the QP to ERR as on RC (the SQE state is not modelled).
#include <cstring>

#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/qp_params.h"
#include "vp/nic/requester.h"

namespace mprdma::nic {

bool Requester::parse_ud(Qp& qp, const uint8_t*& seg, const uint8_t* end, Message& m) {
  auto bad = [&](uint8_t status, uint8_t syndrome) {
    m.status = status;
    m.syndrome = syndrome;
    ++wqe_errors_;
    MPR_LOG(log_, info,
            "UD QP " << qp.qpn << " WQE " << m.index << " rejected: status " << int(status)
                     << " syndrome " << int(syndrome));
    return false;
  };
  if (m.opcode != MPR_WQE_SEND && m.opcode != MPR_WQE_SEND_IMM)
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_OPCODE);
  if (end - seg < static_cast<ptrdiff_t>(sizeof(mpr_wqe_ud)))
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
  mpr_wqe_ud a;
  std::memcpy(&a, seg, sizeof a);
  seg += sizeof a;
  static const uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (a.remote_qpn > MPR_DB_QPN_MASK || std::memcmp(a.dgid, kV4Prefix, sizeof kV4Prefix) != 0)
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
  m.ud.qpn = a.remote_qpn;
  // IB: a Q_Key with the high-order bit set in the work request means the
  // QP's own Q_Key.
  m.ud.qkey = (a.qkey & 0x80000000u) ? qp.qkey : a.qkey;
  m.ud.dst_ip = (uint32_t{a.dgid[12]} << 24) | (uint32_t{a.dgid[13]} << 16) |
                (uint32_t{a.dgid[14]} << 8) | a.dgid[15];
  std::memcpy(m.ud.dmac.b.data(), a.dmac, 6);
  m.ud.ttl = a.hop_limit ? a.hop_limit : 64;
  m.ud.dscp = a.traffic_class >> 2;
  return true;
}

void Requester::assign_ud(Qp& qp) {
  bool added = false;
  while (!qp.pending.empty()) {
    Message& m = qp.pending.front();
    if (m.status == MPR_CQE_SUCCESS && m.length > qp.mtu) {
      // A datagram is one packet: longer than the path MTU cannot be sent.
      m.status = MPR_CQE_LOC_LEN_ERR;
      m.syndrome = MPR_SYN_MSG_TOO_LONG;
      ++wqe_errors_;
      MPR_LOG(log_, info,
              "UD QP " << qp.qpn << " WQE " << m.index << ": " << m.length
                       << " bytes exceed the path MTU " << qp.mtu);
    }
    m.first_psn = qp.next_psn;
    if (m.status != MPR_CQE_SUCCESS) {
      m.npsn = 0;  // completes with its error when it reaches the head
      qp.inflight.push_back(std::move(m));
      qp.pending.pop_front();
      break;
    }
    m.npsn = 1;
    qp.next_psn = psn_add(qp.next_psn, 1);
    qp.inflight.push_back(std::move(m));
    qp.pending.pop_front();
    added = true;
  }
  if (added && qp.active && !qp.error) core_.tx.activate(qp.qpn);
}

void Requester::retire_unacked(Qp& qp) {
  // A WQE that failed locally, at the head once those before it completed.
  if (!qp.inflight.empty() && qp.inflight.front().npsn == 0 && qp.unacked.empty()) {
    const Message& m = qp.inflight.front();
    fail(qp, &m, m.status, m.syndrome);
  }
}

bool Requester::emit_ud(Qp& qp) {
  if (qp.inflight.empty()) return false;
  Message& m = qp.inflight.front();
  if (m.npsn == 0) {
    retire_unacked(qp);  // a failed WQE at the head (after the sent ones complete)
    return false;
  }
  if (m.length && m.inline_data.empty() && !local_still_valid(qp, m)) {
    // Its buffer was deregistered since the WQE was parsed: it fails here.
    m.npsn = 0;
    m.status = MPR_CQE_LOC_PROT_ERR;
    m.syndrome = MPR_SYN_BAD_LKEY;
    retire_unacked(qp);
    return false;
  }
  const bool imm = m.opcode == MPR_WQE_SEND_IMM;
  net::RoceFields f = qp.base;  // source MAC/IP, ECN
  f.opcode = imm ? net::Opcode::UD_SEND_ONLY_WITH_IMMEDIATE : net::Opcode::UD_SEND_ONLY;
  f.dst_mac = m.ud.dmac;
  f.dst_ip = m.ud.dst_ip;
  f.ttl = m.ud.ttl;
  f.dscp = m.ud.dscp;
  f.udp_sport = default_udp_sport(qp.qpn, m.ud.qpn);
  f.dest_qp = m.ud.qpn;
  f.psn = m.first_psn;
  f.deth_qkey = m.ud.qkey;
  // The GSI QP sends as QPN 1 (MPR_QPT_GSI).
  f.deth_src_qp = qp.qpn == core_.contexts.gsi_qpn() ? 1 : qp.qpn;
  f.solicited = (m.flags & MPR_WQE_F_SOLICITED) != 0;
  if (imm) f.imm = __builtin_bswap32(m.imm);
  ++packets_;
  ++ud_sends_;
  const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
  Qp::Unacked sent;
  sent.index = m.index;
  sent.opcode = m.opcode;
  sent.flags = m.flags;
  sent.length = m.length;
  sent.built = true;  // its one packet
  const uint32_t plen = static_cast<uint32_t>(m.length);
  if (plen == 0 || !m.inline_data.empty()) {
    core_.tx.fill(slot, net::build_roce(f, plen ? m.inline_data.data() : nullptr, plen));
    qp.unacked.push_back(sent);
  } else {
    sent.reads = 1;
    qp.unacked.push_back(sent);
    gather_unacked(qp, m.local, f, slot, m.index);
  }
  qp.inflight.pop_front();
  unacked_complete(qp);
  return true;
}

void Requester::gather_unacked(const Qp& qp, const std::vector<Segment>& segs,
                               const net::RoceFields& f, TxScheduler::Slot slot, uint32_t index) {
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  core_.dma.gather(segs, DmaPurpose::payload,
                   [this, f, slot, qpn, gen, index](bool ok, std::vector<uint8_t>&& data) {
                     if (ok)
                       core_.tx.fill(slot, net::build_roce(f, data.data(), data.size()));
                     else
                       core_.tx.cancel(slot);
                     Qp* q = find(qpn);
                     if (!q || q->generation != gen) return;  // reset or destroyed since
                     for (Qp::Unacked& u : q->unacked)
                       if (u.index == index) {
                         --u.reads;
                         if (!ok) {
                           u.status = MPR_CQE_LOC_PROT_ERR;
                           u.syndrome = MPR_SYN_DMA_FAULT;
                         }
                       }
                     unacked_complete(*q);
                   });
}

void Requester::unacked_complete(Qp& qp) {
  bool retired = false;
  while (!qp.unacked.empty() && qp.unacked.front().ready()) {
    const Qp::Unacked u = qp.unacked.front();
    qp.unacked.pop_front();
    Message m;
    m.index = u.index;
    m.opcode = u.opcode;
    m.length = u.length;
    if (u.status != MPR_CQE_SUCCESS) {
      // The payload could not be read: this WQE fails, the QP goes to ERR.
      complete(qp, m, u.status, u.syndrome);
      fail(qp, nullptr, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
      return;
    }
    if (u.flags & MPR_WQE_F_SIGNALED) complete(qp, m, MPR_CQE_SUCCESS, MPR_SYN_NONE);
    ++wqes_;
    retired = true;
  }
  if (!retired || qp.error) return;
  if (qp.unacked.empty()) retire_unacked(qp);
  if (!qp.error) fetch(qp);
}

}  // namespace mprdma::nic
