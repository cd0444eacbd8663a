// Requester, READ as data (MP-RDMA, TransportEngine::read_as_data; see
// transport.md, "READ and atomics on MP-RDMA"): the responses this QP's
// stream sends for the peer's READs and atomics (a message each, no WQE, no
// CQE; a QP still in RTR starts its stream for them), and the placement of
// the responses the peer's stream brings to this QP's READs and atomics.
#include <algorithm>

#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/qp_params.h"
#include "vp/nic/requester.h"

namespace mprdma::nic {

bool Requester::send_read_data(uint32_t qpn, uint32_t read_psn, uint32_t stream_base, uint32_t rkey,
                               uint64_t va, uint64_t len) {
  Message r;
  r.opcode = kReadDataOpcode;
  r.answers_read = true;
  r.read_psn = read_psn;
  // The source, translated response by response as each leaves (try_emit).
  r.rkey = rkey;
  r.remote_va = va;
  r.length = len;
  return queue_answer(qpn, stream_base, std::move(r));
}

uint32_t Requester::answers_pending(uint32_t qpn) {
  const Qp* qp = find(qpn);
  if (!qp) return 0;
  uint32_t n = 0;
  for (const Message& m : qp->inflight) n += m.answers_read && !m.answer_left;
  return n;
}

bool Requester::send_atomic_data(uint32_t qpn, uint32_t atomic_psn, uint32_t stream_base,
                                 uint64_t orig) {
  Message r;
  r.opcode = kAtomicDataOpcode;
  r.answers_read = true;
  r.read_psn = atomic_psn;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(&orig);
  r.inline_data.assign(b, b + sizeof orig);  // kept for retransmissions
  return queue_answer(qpn, stream_base, std::move(r));
}

bool Requester::queue_answer(uint32_t qpn, uint32_t stream_base, Message r) {
  Qp* qp = find(qpn);
  if (!qp || !sending(*qp)) qp = start_answering(qpn, stream_base);
  if (!qp || qp->error || qp->ud) return false;
  r.first_psn = qp->next_psn;
  r.npsn = r.packets(qp->mtu);
  qp->next_psn = psn_add(qp->next_psn, r.npsn);
  qp->inflight.push_back(std::move(r));
  core_.engine.set_snd_max(qpn, qp->next_psn, core_.now_cycle());
  core_.tx.activate(qpn);
  return true;
}

Requester::Qp* Requester::start_answering(uint32_t qpn, uint32_t stream_base) {
  const mpr_qpc* q = core_.contexts.qp(qpn);
  if (!q || q->state != MPR_QPS_RTR || q->qp_type == MPR_QPT_UD) return nullptr;
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
  }
  if (qp.error) return nullptr;
  // A QP in RTR answers READs (perftest's ib_read_bw server never goes to
  // RTS): its send side starts where the peer's receiver expects it, which
  // the READ request says; the QP's retry budget is an RTS attribute, so
  // the stream gets the largest (7).
  qp.answering = true;
  qp.stream_base = stream_base;
  qp.mtu = std::min<uint32_t>(mtu_bytes(q->attr.path_mtu), static_cast<uint32_t>(core_.cfg.mtu.n));
  qp.base = qp_base_fields(*q, core_.cfg, core_.contexts);
  qp.next_psn = stream_base;
  ConnParams p = conn_params(*q, core_.cfg, qp.base);
  p.sq_psn = stream_base;
  p.retry_cnt = 7;
  core_.engine.set_requester(p);
  qp.traits = core_.engine.traits_of(qp.qpn);
  MPR_LOG(
      log_, debug,
      "QP " << qpn << " in RTR starts its stream at PSN " << stream_base << " for READ responses");
  return &qp;
}

bool Requester::place_read_data(uint32_t qpn, uint32_t read_psn, uint32_t k,
                                const net::RoceFields& f, const uint8_t* payload) {
  Qp* qp = find(qpn);
  if (!qp || !qp->active || qp->error) return false;
  Message* m = nullptr;
  for (Message& x : qp->inflight)
    if (x.read_as_data && x.first_psn == read_psn) {
      m = &x;
      break;
    }
  // It must be a response this WQE is still waiting for, of its kind, with
  // the payload its index implies (an atomic's value is in its header).
  const uint64_t offset = uint64_t(k) * qp->mtu;
  const bool atomic = f.opcode == net::Opcode::ATOMIC_ACKNOWLEDGE;
  bool fits =
      m && k < m->resp_got.size() && !m->resp_got[k] && atomic == (m->opcode != MPR_WQE_RDMA_READ);
  if (fits && atomic) {
    fits = f.payload_len == 0;
  } else if (fits) {
    const bool last = k + 1 == m->resp_got.size();
    fits = f.payload_len == std::min<uint64_t>(qp->mtu, m->length - std::min(m->length, offset)) &&
           last == (f.opcode == net::Opcode::RDMA_READ_RESPONSE_LAST ||
                    f.opcode == net::Opcode::RDMA_READ_RESPONSE_ONLY);
  }
  if (!fits) {
    ++bad_responses_;
    MPR_LOG(log_, info,
            "QP " << qpn << ": READ response " << k << " for READ PSN " << read_psn
                  << (m ? " does not fit that READ" : ", which is not in flight"));
    fail(*qp, qp->inflight.empty() ? nullptr : &qp->inflight.front(), MPR_CQE_BAD_RESP_ERR,
         MPR_SYN_BAD_RESPONSE);
    return false;
  }
  if (!local_still_valid(*qp, *m)) {
    fail(*qp, m, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
    return false;
  }
  if (atomic) {
    const uint64_t orig = f.atomic_ack_orig;
    core_.dma.scatter(m->local, reinterpret_cast<const uint8_t*>(&orig), DmaPurpose::atomic);
  } else {
    std::vector<Segment> segs;
    slice_segments(m->local, offset, f.payload_len, segs);
    core_.dma.scatter(segs, payload, DmaPurpose::payload);
  }
  ++read_data_rx_;
  m->resp_got[k] = true;
  if (qp->answers_due != kNever && !qp->inflight.empty())  // answers still coming
    watch_answers(*qp, qp->inflight.front().first_psn, true);
  if (--m->data_left == 0) {
    m->resp_next = psn_add(m->first_psn, 1);
    retire(*qp);
    if (Qp* again = find(qpn); again && !again->error) core_.tx.activate(qpn);
  }
  return true;
}

}  // namespace mprdma::nic
