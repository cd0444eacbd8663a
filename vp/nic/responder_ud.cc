// Responder, UD QPs: datagram receive (see responder.md, "UD").
//
// A UD_SEND_ONLY[_WITH_IMMEDIATE] for a UD QP in RTR or RTS whose DETH
// Q_Key equals the QP's is placed into the next RECV WQE: MPR_UD_GRH_BYTES
// of GRH space first (20 zero bytes, then the packet's IPv4 header, as for
// RoCEv2 over IPv4), then the payload; the CQE carries byte_len = 40 +
// payload, the sender's QP (src_qp) and MPR_CQE_F_GRH. Nothing is ever
// acknowledged: a wrong Q_Key (responder.qkey_drops), no RECV posted, a UD
// packet for an RC QP or an RC packet for a UD QP (responder.ud_drops) are
// dropped silently. A datagram longer than the RECV's buffers completes
// that RECV with LOC_LEN_ERR / MSG_TOO_LONG; the QP stays usable.
//
// Header-only receive (Kalia et al., ATC'16, §3.3): a datagram without
// payload taken by a RECV without scatter entries places nothing, not even
// the GRH: no DMA but the CQE (byte_len 0, no MPR_CQE_F_GRH; the immediate
// and src_qp as usual).
#include <cstring>

#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/responder.h"

namespace mprdma::nic {

Responder::Step Responder::handle_ud(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f) {
  if (!qp.ud || !net::has_deth(f.opcode)) {
    ++ud_drops_;
    MPR_LOG(log_, info,
            "QP " << qp.qpn << ": " << net::to_string(f.opcode)
                  << (qp.ud ? " on a UD QP" : " on an RC QP") << " dropped");
    return Step::done;
  }
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  const uint32_t qkey = q ? q->attr.qkey : qp.qkey;
  if (f.deth_qkey != qkey) {
    ++qkey_drops_;
    MPR_LOG(log_, info,
            "UD QP " << qp.qpn << ": Q_Key 0x" << std::hex << f.deth_qkey << " from QP 0x"
                     << f.deth_src_qp << " dropped" << std::dec);
    return Step::done;
  }
  switch (need_recvs(qp, 1)) {
    case RecvAvail::on_chip:
      break;
    case RecvAvail::fetching:  // posted, being fetched: wait for it
      return Step::stall;
    case RecvAvail::none:
      ++ud_drops_;  // no RECV posted: a datagram is simply lost
      return Step::done;
  }
  RecvWqe wqe = std::move(qp.recv_cache.front());
  qp.recv_cache.pop_front();
  ++qp.rq_ci;
  fetch_recv(qp);
  std::vector<Segment> segs;
  uint64_t cap = 0;
  for (const mpr_wqe_data& d : wqe.sges) {
    if (core_.translation.translate(d.lkey, qp.pdn, d.addr, d.byte_count, MPR_ACCESS_LOCAL_WRITE,
                                    segs) != AccessStatus::ok) {
      recv_cqe(qp, wqe, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
      return Step::done;
    }
    cap += d.byte_count;
  }
  const bool header_only = cap == 0 && f.payload_len == 0;
  const uint32_t len = header_only ? 0 : MPR_UD_GRH_BYTES + f.payload_len;
  if (len > cap) {
    recv_cqe(qp, wqe, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_LOC_LEN_ERR, MPR_SYN_MSG_TOO_LONG);
    return Step::done;
  }
  // Inline receive: GRH and payload in the CQE slot when they fit.
  std::vector<uint8_t> inline_data;
  if (header_only) {
    ++header_only_recvs_;
  } else {
    std::vector<uint8_t> data(len, 0);
    std::memcpy(data.data() + 20, pkt->data.data() + net::kIpOffset, net::kIpv4HeaderBytes);
    if (f.payload_len)
      std::memcpy(data.data() + MPR_UD_GRH_BYTES, pkt->data.data() + f.payload_offset,
                  f.payload_len);
    if (q && len <= core_.cq.inline_capacity(q->recv_cqn)) {
      inline_data = std::move(data);
      ++inline_recvs_;
    } else {
      std::vector<Segment> place;
      slice_segments(segs, 0, len, place);
      core_.dma.scatter(place, data.data(), DmaPurpose::payload);
    }
  }
  bytes_.add(f.payload_len);
  ++packets_;
  ++messages_;
  // The CQE: recv_cqe() fills status, immediate and solicited; UD adds the
  // source QP and the GRH flag.
  if (!q) return Step::done;
  mpr_cqe cqe{};
  cqe.byte_len = len;
  cqe.qpn = qp.qpn;
  cqe.src_qp = f.deth_src_qp;
  cqe.wqe_index = static_cast<uint16_t>(wqe.index);
  cqe.opcode = f.opcode == net::Opcode::UD_SEND_ONLY_WITH_IMMEDIATE ? MPR_CQE_RESP_RECV_IMM
                                                                    : MPR_CQE_RESP_RECV;
  cqe.status = MPR_CQE_SUCCESS;
  cqe.flags = header_only ? 0 : MPR_CQE_F_GRH;
  if (!inline_data.empty()) cqe.flags |= MPR_CQE_F_INLINE;
  if (net::has_imm(f.opcode)) {
    cqe.imm_data = __builtin_bswap32(f.imm);
    cqe.flags |= MPR_CQE_F_IMM;
  }
  if (f.solicited) cqe.flags |= MPR_CQE_F_SOLICITED;
  core_.cq.post_cqe(q->recv_cqn, cqe, f.solicited, std::move(inline_data));
  return Step::done;
}

}  // namespace mprdma::nic
