// Responder: shared receive queues (the SRQ paragraph of responder.h).
//
// The SRQ's ring is a linked list that software keeps (<mprdma/hw.h>,
// struct mpr_wqe_srq_next): the NIC takes WQEs from the head, following each
// one's next_index. Software links freed slots at the tail, so while QPs
// complete RECVs in the order they took them the list runs through the ring
// in order and one DMA read brings several WQEs; where it jumps, the fetch
// stops at the jump and the next one starts from there.
#include <algorithm>
#include <cstring>

#include "vp/nic/completion_unit.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/responder.h"

namespace mprdma::nic {

Responder::Srq* Responder::srq_of(uint32_t srqn) {
  if (!core_.contexts.srq(srqn)) return nullptr;
  auto [it, created] = srqs_.try_emplace(srqn);
  if (created) it->second.generation = ++generation_;
  return &it->second;
}

void Responder::srq_doorbell(uint32_t srqn, uint16_t count16) {
  mpr_srqc* ctx = core_.contexts.srq(srqn);
  Srq* s = srq_of(srqn);
  if (!ctx || !s) {
    ++doorbells_dropped_;
    MPR_LOG(log_, warn, "SRQ doorbell for SRQ " << srqn << " (no such SRQ) dropped");
    return;
  }
  const uint32_t posted =
      ctx->posted + static_cast<uint16_t>(count16 - static_cast<uint16_t>(ctx->posted));
  if (posted - ctx->taken > (1u << ctx->log_size)) {
    ++doorbells_dropped_;
    MPR_LOG(log_, warn, "SRQ doorbell for SRQ " << srqn << " overruns its ring: dropped");
    return;
  }
  ctx->posted = posted;
  srq_fetch(srqn);
}

void Responder::srq_destroyed(uint32_t srqn) { srqs_.erase(srqn); }

void Responder::take_from_srq(Srq& s, mpr_srqc& ctx, Qp& qp, uint32_t need) {
  while (qp.recv_cache.size() < need && !s.cache.empty()) {
    qp.recv_cache.push_back(std::move(s.cache.front()));
    s.cache.pop_front();
    ++ctx.taken;
    ++srq_taken_;
    // The limit event: once, when the WQEs left drop below the armed limit;
    // software arms it again with MODIFY_SRQ.
    if (ctx.limit && ctx.posted - ctx.taken < ctx.limit) {
      ctx.limit = 0;
      ++srq_limit_events_;
      core_.cq.post_async(MPR_EQE_SRQ_LIMIT, ctx.srqn, 0);
    }
  }
  srq_fetch(ctx.srqn);  // keep the SRQ's own WQEs ahead
}

void Responder::srq_fetch(uint32_t srqn) {
  mpr_srqc* ctx = core_.contexts.srq(srqn);
  Srq* s = srq_of(srqn);
  if (!ctx || !s || s->fetching || ctx->error) return;
  const uint32_t want = static_cast<uint32_t>(std::max<int64_t>(1, core_.cfg.rq_prefetch)) +
                        static_cast<uint32_t>(s->waiters.size());
  if (s->cache.size() >= want) return;
  const uint32_t size = 1u << ctx->log_size;
  const uint32_t first = ctx->head & (size - 1);
  const uint32_t n = std::min(
      {ctx->posted - s->fetched, size - first, want - static_cast<uint32_t>(s->cache.size())});
  if (n == 0) return;
  s->fetching = true;
  const uint64_t gen = s->generation;
  core_.dma.read(ctx->base + (uint64_t{first} << ctx->log_stride), n << ctx->log_stride,
                 DmaPurpose::recv_wqe,
                 [this, srqn, gen, first, n](bool ok, std::vector<uint8_t>&& data) {
                   srq_fetched(srqn, gen, first, n, ok, data);
                 });
}

void Responder::srq_fetched(uint32_t srqn, uint64_t gen, uint32_t first, uint32_t n, bool ok,
                            const std::vector<uint8_t>& data) {
  auto it = srqs_.find(srqn);
  mpr_srqc* ctx = core_.contexts.srq(srqn);
  if (it == srqs_.end() || it->second.generation != gen || !ctx) return;  // destroyed meanwhile
  Srq& s = it->second;
  s.fetching = false;
  if (!ok) {
    srq_fault(srqn);
    return;
  }
  const uint32_t size = 1u << ctx->log_size;
  const uint32_t stride = 1u << ctx->log_stride;
  // Walk the list through the slots read, as long as it runs through them
  // in order.
  uint32_t slot = first;
  for (uint32_t i = 0; i < n; ++i, ++slot) {
    if ((ctx->head & (size - 1)) != slot) {
      ++srq_list_breaks_;
      break;
    }
    const uint8_t* wqe = data.data() + size_t{i} * stride;
    mpr_wqe_srq_next next;
    std::memcpy(&next, wqe, sizeof next);
    s.cache.push_back(parse_recv(slot, wqe + sizeof next, stride - sizeof next));
    ++s.fetched;
    ctx->head = static_cast<uint16_t>(next.next_index & (size - 1));
  }
  serve_srq_waiters(srqn);
  srq_fetch(srqn);
}

void Responder::serve_srq_waiters(uint32_t srqn) {
  auto it = srqs_.find(srqn);
  mpr_srqc* ctx = core_.contexts.srq(srqn);
  if (it == srqs_.end() || !ctx) return;
  Srq& s = it->second;
  // QPs whose packets can go on: resumed after the loop, since handling
  // their packets takes WQEs from this SRQ again.
  std::vector<std::pair<uint32_t, uint64_t>> resume;
  while (!s.waiters.empty()) {
    Qp* qp = find(s.waiters.front());
    if (!qp || qp->error || !qp->waiting_recv || !qp->srq || qp->srqn != srqn) {
      s.waiters.pop_front();
      continue;
    }
    take_from_srq(s, *ctx, *qp, qp->srq_need);
    const bool served = qp->recv_cache.size() >= qp->srq_need;
    // Still short, and no WQE left that is not already on chip for it to
    // wait for: it stops waiting and finds no RECV posted.
    const bool hopeless = !served && (ctx->error || ctx->posted == s.fetched);
    if (!served && !hopeless) break;  // the next fetch serves it first
    s.waiters.pop_front();
    qp->waiting_recv = false;
    resume.emplace_back(qp->qpn, qp->generation);
  }
  for (auto [qpn, gen] : resume)
    if (Qp* qp = find(qpn); qp && qp->generation == gen) drain_stalled(*qp);
}

void Responder::srq_fault(uint32_t srqn) {
  mpr_srqc* ctx = core_.contexts.srq(srqn);
  if (!ctx || ctx->error) return;
  ctx->error = 1;
  MPR_LOG(log_, info, "SRQ " << srqn << ": ring unreadable, the SRQ and its QPs fail");
  core_.cq.post_async(MPR_EQE_SRQ_ERR, srqn, MPR_SYN_DMA_FAULT);
  // IB: the QPs of an SRQ in error get a catastrophic error of their
  // receive queue.
  std::vector<uint32_t> victims;
  for (auto& [qpn, qp] : qps_)
    if (qp.srq && qp.srqn == srqn && !qp.error) victims.push_back(qpn);
  std::sort(victims.begin(), victims.end());  // a fixed order of events
  for (uint32_t qpn : victims) {
    if (mpr_qpc* q = core_.contexts.qp(qpn)) q->state = q->attr.qp_state = MPR_QPS_ERR;
    core_.cq.post_async(MPR_EQE_QP_FATAL, qpn, MPR_SYN_DMA_FAULT);
    qp_to_error(qpn);
    if (requester_) requester_->qp_to_error(qpn);
  }
}

}  // namespace mprdma::nic
