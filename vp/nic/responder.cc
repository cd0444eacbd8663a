#include "vp/nic/responder.h"

#include <algorithm>
#include <cstring>

#include "vp/net/cnp.h"
#include "vp/net/mp_ext.h"
#include "vp/nic/completion_unit.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/qp_params.h"
#include "vp/nic/rc_opcodes.h"

namespace mprdma::nic {
namespace {

using net::Opcode;

constexpr size_t kAtomicReplayDepth = 16;
constexpr uint8_t kAckCredits = 0x1f;  // "no credit information": we do not use end-to-end credits

}  // namespace

namespace {
uarch::AtomicLockTableParams lock_params(const NicConfig& cfg) {
  uarch::AtomicLockTableParams p;
  p.buckets = static_cast<uint32_t>(cfg.atomics.lock_buckets);
  p.low_bit = static_cast<uint32_t>(cfg.atomics.lock_low_bit);
  return p;
}
}  // namespace

Responder::Responder(sc_core::sc_module_name name, NicCore& core)
    : sc_core::sc_module(name),
      core_(core),
      calendar_("calendar"),
      log_(core::Log::channel("nic." + core.cfg.name + ".responder")),
      packets_(core.env.stats.counter(core.stat("responder.packets"), "packets",
                                      "Request packets executed")),
      bytes_(core.env.stats.counter(core.stat("responder.bytes"), "bytes",
                                    "Payload bytes placed by SEND and WRITE")),
      messages_(core.env.stats.counter(core.stat("responder.messages"), "messages",
                                       "Request messages completed")),
      duplicates_(core.env.stats.counter(core.stat("responder.duplicates"), "packets",
                                         "Duplicate request packets")),
      seq_naks_(
          core.env.stats.counter(core.stat("responder.seq_naks"), "packets", "Sequence NAKs sent")),
      ooo_drops_(core.env.stats.counter(core.stat("responder.ooo_drops"), "packets",
                                        "Out-of-order packets dropped after a NAK")),
      rnr_naks_(core.env.stats.counter(core.stat("responder.rnr_naks"), "packets",
                                       "RNR NAKs sent (no RECV posted)")),
      fatal_naks_(core.env.stats.counter(core.stat("responder.fatal_naks"), "packets",
                                         "Access, invalid-request and operational NAKs sent")),
      dropped_(core.env.stats.counter(core.stat("responder.dropped"), "packets",
                                      "Requests for unknown QPs or QPs not ready")),
      atomics_done_(core.env.stats.counter(core.stat("responder.atomics"), "operations",
                                           "Atomic operations executed")),
      atomic_lock_conflicts_(core.env.stats.counter(
          core.stat("atomics.lock_conflicts"), "atomics",
          "Atomics that found their lock bucket held and waited (nic.atomics)")),
      atomic_lock_max_queue_(
          core.env.stats.counter(core.stat("atomics.lock_max_queue"), "atomics",
                                 "Longest queue of atomics waiting behind one bucket's holder")),
      atomic_buffer_busy_ps_(core.env.stats.counter(
          core.stat("atomics.buffer_busy_ps"), "ps",
          "Time atomics held a read-modify-write buffer (nic.atomics.max_outstanding), summed; "
          "counted when each ends")),
      doorbells_dropped_(core.env.stats.counter(core.stat("responder.doorbells_dropped"),
                                                "doorbells", "RQ doorbells ignored")),
      rnr_drops_(core.env.stats.counter(
          core.stat("responder.rnr_drops"), "packets",
          "Out-of-order transports: SEND packets dropped, no RECV posted for their message")),
      qkey_drops_(core.env.stats.counter(core.stat("responder.qkey_drops"), "packets",
                                         "UD datagrams dropped: Q_Key differs from the QP's")),
      ud_drops_(core.env.stats.counter(core.stat("responder.ud_drops"), "packets",
                                       "UD datagrams dropped: no RECV posted, or not a UD SEND")),
      uc_drops_psn_(core.env.stats.counter(
          core.stat("responder.uc_drops.psn"), "packets",
          "UC MIDDLE/LAST packets dropped: PSN not the expected one (a packet before it lost)")),
      uc_drops_sequence_(core.env.stats.counter(
          core.stat("responder.uc_drops.sequence"), "packets",
          "UC MIDDLE/LAST packets dropped: no message of their kind in progress")),
      uc_drops_discarding_(core.env.stats.counter(
          core.stat("responder.uc_drops.discarding"), "packets",
          "UC packets dropped as the rest of a message already being dropped (until the next "
          "FIRST or ONLY)")),
      uc_drops_access_(core.env.stats.counter(
          core.stat("responder.uc_drops.access"), "packets",
          "UC WRITE packets dropped: rkey, bounds or the QP's REMOTE_WRITE right failed (no NAK "
          "exists on UC)")),
      uc_drops_no_recv_(core.env.stats.counter(
          core.stat("responder.uc_drops.no_recv"), "packets",
          "UC SEND (first packet) or WRITE with immediate (last packet) dropped: no RECV posted "
          "(no RNR NAK on UC)")),
      uc_drops_length_(core.env.stats.counter(
          core.stat("responder.uc_drops.length"), "packets",
          "UC packets dropped: payload not one MTU (last: at most one), WRITE payload beyond its "
          "RETH length or longer than the largest message, SEND longer than its RECV (the RECV "
          "completes LOC_LEN_ERR and the QP goes to ERR)")),
      uc_drops_opcode_(core.env.stats.counter(
          core.stat("responder.uc_drops.opcode"), "packets",
          "Packets dropped: an RC opcode on a UC QP, or a UC opcode on an RC QP")),
      uc_partial_(core.env.stats.counter(
          core.stat("responder.uc_partial"), "messages",
          "UC messages abandoned part way (a drop, or a FIRST/ONLY arriving before their last "
          "packet); a SEND's RECV is reused, WRITE data placed stays")),
      srq_taken_(core.env.stats.counter(core.stat("responder.srq.taken"), "WQEs",
                                        "RECV WQEs QPs took from shared receive queues")),
      srq_limit_events_(
          core.env.stats.counter(core.stat("responder.srq.limit_events"), "events",
                                 "SRQ limit events raised (fewer WQEs left than the armed limit)")),
      srq_list_breaks_(core.env.stats.counter(
          core.stat("responder.srq.list_breaks"), "fetches",
          "SRQ fetches cut short where the list left the slots read in order (the next WQE "
          "named a slot elsewhere in the ring: another DMA read)")),
      header_only_recvs_(core.env.stats.counter(
          core.stat("responder.header_only_recvs"), "RECVs",
          "SENDs without payload taken by RECVs without scatter entries: completed with "
          "no DMA but the CQE (header-only, UD without the GRH)")),
      inline_recvs_(core.env.stats.counter(
          core.stat("responder.inline_recvs"), "RECVs",
          "Receives placed inside their CQE slot (CQ with MPR_CQ_F_INLINE_RECV): no payload "
          "DMA")),
      read_retransmits_(core.env.stats.counter(
          core.stat("responder.read_retransmits"), "packets",
          "READ responses sent again on a Read NACK or timeout (explicit READ "
          "acknowledgements, IRN)")),
      dup_reads_dropped_(core.env.stats.counter(
          core.stat("responder.dup_reads_dropped"), "packets",
          "Duplicate READ requests dropped: outside the responder resources (the READs the QP "
          "accepted), or asking again for responses still queued")),
      read_requests_(core.env.stats.counter(
          core.stat("responder.read_data_requests"), "messages",
          "READ requests whose responses this QP sends in its own send stream (READ as data, "
          "MP-RDMA)")) {
  locks_ = uarch::AtomicLockTable(lock_params(core.cfg));
  // The notification point of a rate control that takes CNPs (DCQCN).
  const RateControlKind* rc = core.rate_control;
  if (rc && rc->cnp_interval_cycles() != RateControlKind::kNoCnp) {
    np_.emplace(rc->cnp_interval_cycles());
    cnp_tx_ = &core.env.stats.counter(core.stat(std::string(rc->name()) + ".cnp_tx"), "packets",
                                      "CNPs sent (notification point)");
  }
}

Responder::Qp* Responder::find(uint32_t qpn) {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : &it->second;
}

void Responder::reset() {
  if (np_) np_->reset();
  ++reset_epoch_;
  ++generation_;
  qps_.clear();
  srqs_.clear();
  atomics_.clear();
  locks_ = uarch::AtomicLockTable(lock_params(core_.cfg));
  lock_waiters_.clear();
  atomics_active_ = 0;
}

void Responder::rq_doorbell(uint32_t qpn, uint16_t pi16) {
  mpr_qpc* q = core_.contexts.qp(qpn);
  if (!q || q->state == MPR_QPS_RESET) {
    ++doorbells_dropped_;
    MPR_LOG(log_, warn,
            "RQ doorbell for QP " << qpn << (q ? " in RESET" : " (no such QP)") << " dropped");
    return;
  }
  if (q->flags & MPR_CREATE_QP_F_SRQ) {
    // Its RECVs come from the SRQ: there is no ring to read.
    ++doorbells_dropped_;
    MPR_LOG(log_, warn, "RQ doorbell for QP " << qpn << ", which uses an SRQ, dropped");
    return;
  }
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
  }
  const uint32_t pi = qp.rq_pi + static_cast<uint16_t>(pi16 - static_cast<uint16_t>(qp.rq_pi));
  if (pi - qp.rq_ci > (1u << q->rq_log_size)) {
    ++doorbells_dropped_;
    MPR_LOG(log_, warn, "RQ doorbell for QP " << qpn << " overruns its ring: dropped");
    return;
  }
  qp.rq_pi = pi;
  q->rq_pi = pi;
  if (q->state == MPR_QPS_ERR || qp.error) {
    flush_recvs(qp);
    return;
  }
  fetch_recv(qp);
}

void Responder::qp_to_rtr(uint32_t qpn) {
  mpr_qpc* q = core_.contexts.qp(qpn);
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
  }
  qp.active = true;
  qp.error = false;
  qp.pdn = q->pdn;
  qp.access = q->attr.access_flags;
  qp.mtu = std::min<uint32_t>(mtu_bytes(q->attr.path_mtu), static_cast<uint32_t>(core_.cfg.mtu.n));
  qp.min_rnr_timer = q->attr.min_rnr_timer;
  qp.max_dest_rd_atomic = std::max<uint32_t>(1, q->attr.max_dest_rd_atomic);
  qp.base = qp_base_fields(*q, core_.cfg, core_.contexts);
  qp.ud = q->qp_type == MPR_QPT_UD;
  qp.uc = q->qp_type == MPR_QPT_UC;
  qp.qkey = q->attr.qkey;
  qp.uc_epsn = q->attr.rq_psn;
  qp.uc_discarding = false;
  qp.srq = q->flags & MPR_CREATE_QP_F_SRQ;
  qp.srqn = q->srqn;
  if (!qp.ud && !qp.uc) {
    try {
      core_.engine.open(conn_params(*q, core_.cfg, qp.base));
    } catch (const EngineContextExhausted& e) {
      // No transport context for it: the QP fails, the NIC goes on.
      MPR_LOG(log_, warn, e.what());
      q->state = q->attr.qp_state = MPR_QPS_ERR;
      core_.cq.post_async(MPR_EQE_QP_FATAL, qpn, MPR_SYN_NO_CONTEXT);
      qp_to_error(qpn);
      if (requester_) requester_->qp_to_error(qpn);
      return;
    }
  }
  qp.traits = core_.engine.traits_of(qp.qpn);
  qp.recv_msn_base = 0;
  qp.recv_need = 0;
  qp.tails.clear();
  fetch_recv(qp);
}

void Responder::qp_to_error(uint32_t qpn) {
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
    if (const mpr_qpc* q = core_.contexts.qp(qpn)) {
      qp.rq_pi = q->rq_pi;
      qp.srq = q->flags & MPR_CREATE_QP_F_SRQ;
      qp.srqn = q->srqn;
    }
  }
  if (qp.error) return;
  qp.error = true;
  qp.active = false;
  qp.generation = ++generation_;
  // Only a NAK already queued still leaves; everything else is void.
  std::deque<Out> keep;
  for (Out& o : qp.out)
    if (o.kind == Out::Kind::nak) keep.push_back(std::move(o));
  qp.out.swap(keep);
  qp.rd_atomic_out = qp.rd_atomic_uncounted = 0;
  qp.stalled.clear();
  qp.read_table.clear();
  qp.rd_resources.clear();
  flush_recvs(qp);
  // IB: a QP of an SRQ that enters ERR takes no more of its WQEs; software
  // learns it may reclaim the QP's (and poll its last completions).
  if (qp.srq) core_.cq.post_async(MPR_EQE_QP_LAST_WQE, qpn, 0);
  if (!qp.out.empty()) core_.tx.activate(qpn);
}

void Responder::qp_removed(uint32_t qpn) {
  qps_.erase(qpn);
  if (np_) np_->forget(qpn);
}

void Responder::flush_recvs(Qp& qp) {
  if (qp.in_send) {
    recv_cqe(qp, qp.send_wqe, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
    qp.in_send = false;
  }
  for (const RecvWqe& w : qp.recv_cache)
    recv_cqe(qp, w, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
  qp.recv_cache.clear();
  for (uint32_t i = qp.rq_fetch_idx; i != qp.rq_pi; ++i) {
    RecvWqe w;
    w.index = i;
    recv_cqe(qp, w, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
  }
  qp.rq_fetch_idx = qp.rq_ci = qp.rq_pi;
  qp.rq_fetching = false;
}

bool Responder::begin_send(Qp& qp) {
  qp.send_wqe = std::move(qp.recv_cache.front());
  qp.recv_cache.pop_front();
  qp.send_cap = 0;
  qp.send_off = 0;
  qp.in_send = true;
  for (const mpr_wqe_data& d : qp.send_wqe.sges) {
    if (core_.translation.check(d.lkey, qp.pdn, d.addr, d.byte_count, MPR_ACCESS_LOCAL_WRITE) !=
        AccessStatus::ok) {
      abort_send(qp, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
      return false;
    }
    qp.send_cap += d.byte_count;
  }
  fetch_recv(qp);
  return true;
}

void Responder::abort_send(Qp& qp, uint8_t status, uint8_t syndrome) {
  recv_cqe(qp, qp.send_wqe, MPR_CQE_RESP_RECV, 0, nullptr, status, syndrome);
  qp.in_send = false;
  ++qp.rq_ci;
}

Responder::RecvWqe Responder::parse_recv(uint32_t index, const uint8_t* segs, uint32_t bytes) {
  RecvWqe w;
  w.index = index;
  for (uint32_t off = 0; off + sizeof(mpr_wqe_data) <= bytes; off += sizeof(mpr_wqe_data)) {
    mpr_wqe_data d;
    std::memcpy(&d, segs + off, sizeof d);
    if (d.lkey == MPR_LKEY_END) break;
    w.sges.push_back(d);
  }
  return w;
}

void Responder::fetch_recv(Qp& qp) {
  if (qp.srq) {
    // Only what a message needs now (out-of-order engines: the messages
    // that arrived early): WQEs held by one QP are lost to the others.
    // (No waiting here: a packet that needs one waits in need_recvs.)
    if (qp.recv_need > qp.recv_cache.size() && !qp.error)
      if (Srq* s = srq_of(qp.srqn))
        if (mpr_srqc* ctx = core_.contexts.srq(qp.srqn); ctx && !ctx->error)
          take_from_srq(*s, *ctx, qp, qp.recv_need);
    return;
  }
  if (qp.rq_fetching || qp.error) return;
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  if (!q) return;
  const uint32_t want =
      std::max(qp.recv_need, static_cast<uint32_t>(std::max<int64_t>(1, core_.cfg.rq_prefetch)));
  if (qp.recv_cache.size() >= want && !qp.waiting_recv) return;
  const uint32_t size = 1u << q->rq_log_size;
  const uint32_t to_end = size - (qp.rq_fetch_idx & (size - 1));
  const uint32_t n =
      std::min({qp.rq_pi - qp.rq_fetch_idx, to_end,
                want - std::min<uint32_t>(want, static_cast<uint32_t>(qp.recv_cache.size())) +
                    (qp.waiting_recv ? 1u : 0u)});
  if (n == 0) return;
  qp.rq_fetching = true;
  const uint32_t first = qp.rq_fetch_idx;
  const uint32_t log_stride = q->rq_log_stride;
  const uint64_t addr = q->rq_base + (uint64_t(first & (size - 1)) << log_stride);
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  core_.dma.read(
      addr, n << log_stride, DmaPurpose::recv_wqe,
      [this, qpn, gen, first, n, log_stride](bool ok, std::vector<uint8_t>&& data) {
        Qp* q2 = find(qpn);
        if (!q2 || q2->generation != gen) return;
        q2->rq_fetching = false;
        if (!ok) {
          if (q2->active && !q2->ud && !q2->uc) {
            fatal(*q2, net::NakCode::remote_operational_error, core_.engine.epsn(qpn),
                  MPR_EQE_QP_FATAL, "receive queue unreadable", MPR_SYN_DMA_FAULT);
          } else {
            // Before RTR, and on a UD or UC QP, there is no peer to NAK:
            // report and fail the QP.
            MPR_LOG(log_, info, "QP " << qpn << ": receive queue unreadable");
            if (mpr_qpc* ctx = core_.contexts.qp(qpn))
              ctx->state = ctx->attr.qp_state = MPR_QPS_ERR;
            core_.cq.post_async(MPR_EQE_QP_FATAL, qpn, MPR_SYN_DMA_FAULT);
            qp_to_error(qpn);
            if (requester_) requester_->qp_to_error(qpn);
          }
          return;
        }
        const uint32_t stride = 1u << log_stride;
        for (uint32_t i = 0; i < n; ++i) {
          q2->recv_cache.push_back(parse_recv(first + i, data.data() + size_t(i) * stride, stride));
        }
        q2->rq_fetch_idx = first + n;
        if (q2->waiting_recv) {
          q2->waiting_recv = false;
          drain_stalled(*q2);
        }
        if (Qp* q3 = find(qpn); q3 && q3->generation == gen) fetch_recv(*q3);
      });
}

void Responder::on_request(net::PacketPtr pkt, const net::RoceFields& f) {
  // QPN 1 on the wire is the GSI QP, whatever its handle (MPR_QPT_GSI).
  const uint32_t dest = f.dest_qp == 1 ? core_.contexts.gsi_qpn() : f.dest_qp;
  Qp* qp = find(dest);
  const mpr_qpc* q = core_.contexts.qp(dest);
  if (!qp || !qp->active || qp->error || !q ||
      (q->state != MPR_QPS_RTR && q->state != MPR_QPS_RTS)) {
    // IB: requests for a QP that is not ready are silently dropped.
    ++dropped_;
    return;
  }
  if (f.ecn == 3) data_ce(*qp);
  if (qp->waiting_recv || !qp->stalled.empty()) {
    qp->stalled.emplace_back(std::move(pkt), f);
    return;
  }
  if (handle(*qp, pkt, f) == Step::stall) qp->stalled.emplace_back(std::move(pkt), f);
}

void Responder::data_ce(Qp& qp) {
  // DCQCN notification point: CE-marked data of the QP (a request, or a
  // READ response its requester received) asks for a CNP to the peer's QP,
  // at most one per min_cnp_interval, whatever becomes of the packet.
  // Not for UD or UC QPs: their senders have no reaction point.
  if (np_ && !qp.ud && !qp.uc && !qp.traits.own_congestion_control &&
      np_->on_ce(qp.qpn, core_.now_cycle())) {
    qp.cnp_due = true;
    core_.tx.activate(qp.qpn);
  }
}

void Responder::response_ce(uint32_t qpn) {
  Qp* qp = find(qpn);
  if (qp && qp->active && !qp->error) data_ce(*qp);
}

void Responder::drain_stalled(Qp& qp) {
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  while (!qp.stalled.empty() && !qp.waiting_recv) {
    auto [pkt, f] = std::move(qp.stalled.front());
    qp.stalled.pop_front();
    if (handle(qp, pkt, f) == Step::stall) {
      qp.stalled.emplace_front(std::move(pkt), f);
      return;
    }
    Qp* again = find(qpn);
    if (!again || again->generation != gen || again->error) return;
  }
}

Responder::Step Responder::handle(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f) {
  if (qp.ud || net::has_deth(f.opcode)) return handle_ud(qp, pkt, f);
  if (qp.uc || net::is_uc(f.opcode)) return handle_uc(qp, pkt, f);
  if (qp.traits.out_of_order) return handle_ooo(qp, pkt, f);
  switch (core_.engine.classify(qp.qpn, f.psn, core_.now_cycle())) {
    case RxVerdict::accept:
      return execute(qp, pkt, f);
    case RxVerdict::duplicate:
      ++duplicates_;
      duplicate(qp, f);
      return Step::done;
    case RxVerdict::nak_sequence:
      ++seq_naks_;
      push_nak(qp, net::aeth_nak(net::NakCode::psn_seq_error), core_.engine.epsn(qp.qpn));
      return Step::done;
    case RxVerdict::drop:
      ++ooo_drops_;
      return Step::done;
  }
  return Step::done;
}

bool Responder::qp_allows(const Qp& qp, uint32_t right, uint64_t len) const {
  // Access flags may change in RTR->RTS or RTS->RTS: read the live context.
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  if (!q || (!(q->attr.access_flags & right) && len)) return false;
  return true;
}

bool Responder::check_rkey(Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t right,
                           std::vector<Segment>& segs) {
  return qp_allows(qp, right, len) &&
         core_.translation.translate(rkey, qp.pdn, va, len, right, segs) == AccessStatus::ok;
}

bool Responder::rkey_allows(Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, uint32_t right) {
  return qp_allows(qp, right, len) &&
         core_.translation.check(rkey, qp.pdn, va, len, right) == AccessStatus::ok;
}

Responder::RecvAvail Responder::need_recvs(Qp& qp, uint32_t need) {
  if (qp.recv_cache.size() >= need) return RecvAvail::on_chip;
  const auto short_by = static_cast<uint32_t>(need - qp.recv_cache.size());
  if (qp.srq) {
    Srq* s = srq_of(qp.srqn);
    mpr_srqc* ctx = core_.contexts.srq(qp.srqn);
    if (!s || !ctx || ctx->error) return RecvAvail::none;
    take_from_srq(*s, *ctx, qp, need);
    if (qp.recv_cache.size() >= need) return RecvAvail::on_chip;
    // Posted WQEs not on chip yet, some of which other QPs may take first
    // (serve_srq_waiters tells this one if none is left for it).
    if (ctx->posted - ctx->taken == 0) return RecvAvail::none;
    qp.waiting_recv = true;
    qp.srq_need = need;
    if (std::find(s->waiters.begin(), s->waiters.end(), qp.qpn) == s->waiters.end())
      s->waiters.push_back(qp.qpn);
    srq_fetch(qp.srqn);
    return RecvAvail::fetching;
  }
  if (qp.rq_pi - qp.rq_fetch_idx < short_by) return RecvAvail::none;
  // Posted but not on chip yet: wait for the fetch.
  qp.waiting_recv = true;
  fetch_recv(qp);
  return RecvAvail::fetching;
}

Responder::Step Responder::take_recv(Qp& qp, const net::RoceFields& f, bool& have) {
  have = false;
  switch (need_recvs(qp, 1)) {
    case RecvAvail::on_chip:
      have = true;
      return Step::done;
    case RecvAvail::fetching:
      return Step::stall;
    case RecvAvail::none:
      break;
  }
  ++rnr_naks_;
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  push_nak(qp, net::aeth_rnr_nak(q ? q->attr.min_rnr_timer : qp.min_rnr_timer), f.psn);
  // Later packets of the message are dropped silently until the requester
  // resends this one after its RNR wait.
  core_.engine.nak_sent(qp.qpn);
  return Step::done;
}

Responder::Step Responder::execute(Qp& qp, net::PacketPtr& pkt, const net::RoceFields& f) {
  const Opcode op = f.opcode;
  const uint64_t now = core_.now_cycle();
  const uint8_t* payload = pkt->data.data() + f.payload_offset;
  const uint32_t plen = f.payload_len;
  const bool first = starts(op), last = ends(op);

  // An in-order connection's packets carry no transport trailer: a packet
  // that says it does comes from a peer running another transport.
  if (f.trailer_len != 0) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "a transport trailer on an in-order connection");
    return Step::done;
  }
  if (is_send(op) || is_write(op)) {
    // Every packet but the last of a message carries exactly one MTU.
    if ((!last && plen != qp.mtu) || plen > qp.mtu) {
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR, "bad payload length");
      return Step::done;
    }
  }

  if (is_send(op)) {
    if (first == qp.in_send) {
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
            "SEND opcode out of sequence");
      return Step::done;
    }
    if (first) {
      bool have;
      if (take_recv(qp, f, have) == Step::stall) return Step::stall;
      if (!have) return Step::done;  // RNR NAK queued
      if (!begin_send(qp)) {
        fatal(qp, net::NakCode::remote_operational_error, f.psn, MPR_EQE_QP_FATAL,
              "RECV buffer fails its lkey check", MPR_SYN_BAD_LKEY);
        return Step::done;
      }
    }
    if (qp.send_off + plen > qp.send_cap) {
      abort_send(qp, MPR_CQE_LOC_LEN_ERR, MPR_SYN_RECV_TOO_SMALL);
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
            "SEND longer than the RECV buffers");
      return Step::done;
    }
    // Inline receive: a single-packet SEND that fits the receive CQ's slots
    // goes into its CQE, not to the RECV's buffers.
    std::vector<uint8_t> inline_data;
    const mpr_qpc* qc = core_.contexts.qp(qp.qpn);
    if (first && last && plen && qc && plen <= core_.cq.inline_capacity(qc->recv_cqn)) {
      inline_data.assign(payload, payload + plen);
      ++inline_recvs_;
    } else {
      std::vector<Segment> segs;
      if (core_.translation.translate_sges(qp.send_wqe.sges, qp.pdn, qp.send_off, plen,
                                           MPR_ACCESS_LOCAL_WRITE, segs) != AccessStatus::ok) {
        recv_cqe(qp, qp.send_wqe, MPR_CQE_RESP_RECV, 0, nullptr, MPR_CQE_LOC_PROT_ERR,
                 MPR_SYN_BAD_LKEY);
        qp.in_send = false;
        ++qp.rq_ci;
        fatal(qp, net::NakCode::remote_operational_error, f.psn, MPR_EQE_QP_FATAL,
              "RECV buffer's memory region deregistered during the SEND", MPR_SYN_BAD_LKEY);
        return Step::done;
      }
      core_.dma.scatter(segs, payload, DmaPurpose::payload);
    }
    qp.send_off += plen;
    bytes_.add(plen);
    ++packets_;
    const AckDecision d = core_.engine.commit(qp.qpn, 1, f.ack_req || last, false, now);
    if (last) {
      if (qp.send_cap == 0 && qp.send_off == 0) ++header_only_recvs_;
      recv_cqe(qp, qp.send_wqe, carries_imm(op) ? MPR_CQE_RESP_RECV_IMM : MPR_CQE_RESP_RECV,
               static_cast<uint32_t>(qp.send_off), &f, MPR_CQE_SUCCESS, MPR_SYN_NONE,
               std::move(inline_data));
      qp.in_send = false;
      ++qp.rq_ci;
      qp.msn = psn_add(qp.msn, 1);
      ++messages_;
    }
    if (d.send) push_ack(qp, d.psn);
    return Step::done;
  }

  if (is_write(op)) {
    // A WRITE with immediate needs a RECV; look for it before any state
    // changes, so that a stall or an RNR NAK leaves the packet retryable.
    if (carries_imm(op)) {
      bool have;
      if (take_recv(qp, f, have) == Step::stall) return Step::stall;
      if (!have) return Step::done;
    }
    if (first == qp.in_write) {
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
            "WRITE opcode out of sequence");
      return Step::done;
    }
    if (first) {
      if (f.reth_dma_len > MPR_MAX_MSG_SIZE) {
        fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
              "WRITE longer than the largest message");
        return Step::done;
      }
      if (!rkey_allows(qp, f.reth_rkey, f.reth_va, f.reth_dma_len, MPR_ACCESS_REMOTE_WRITE)) {
        fatal(qp, net::NakCode::remote_access_error, f.psn, MPR_EQE_QP_ACCESS_ERR,
              "WRITE rkey check failed");
        return Step::done;
      }
      qp.write_rkey = f.reth_rkey;
      qp.write_va = f.reth_va;
      qp.write_len = f.reth_dma_len;
      qp.write_off = 0;
      qp.in_write = true;
    }
    if (qp.write_off + plen > qp.write_len || (last && qp.write_off + plen != qp.write_len)) {
      fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
            "WRITE payload does not match its RETH length");
      return Step::done;
    }
    std::vector<Segment> segs;
    if (!check_rkey(qp, qp.write_rkey, qp.write_va + qp.write_off, plen, MPR_ACCESS_REMOTE_WRITE,
                    segs)) {
      fatal(qp, net::NakCode::remote_access_error, f.psn, MPR_EQE_QP_ACCESS_ERR,
            "WRITE's memory region deregistered during the WRITE");
      return Step::done;
    }
    core_.dma.scatter(segs, payload, DmaPurpose::payload);
    qp.write_off += plen;
    bytes_.add(plen);
    ++packets_;
    const AckDecision d = core_.engine.commit(qp.qpn, 1, f.ack_req || last, false, now);
    if (last) {
      qp.in_write = false;
      qp.msn = psn_add(qp.msn, 1);
      ++messages_;
      if (carries_imm(op)) {
        RecvWqe w = std::move(qp.recv_cache.front());
        qp.recv_cache.pop_front();
        recv_cqe(qp, w, MPR_CQE_RESP_WRITE_IMM, static_cast<uint32_t>(qp.write_len), &f,
                 MPR_CQE_SUCCESS, MPR_SYN_NONE);
        ++qp.rq_ci;
        fetch_recv(qp);
      }
    }
    if (d.send) push_ack(qp, d.psn);
    return Step::done;
  }

  if (op == Opcode::RDMA_READ_REQUEST) {
    Out o;
    if (!check_read(qp, f, o)) return Step::done;
    core_.engine.commit(qp.qpn, o.npkts, false, true, now);
    queue_read(qp, std::move(o), true);
    return Step::done;
  }

  if (op == Opcode::COMPARE_SWAP || op == Opcode::FETCH_ADD) {
    std::vector<Segment> segs;
    if (!check_atomic(qp, f, segs)) return Step::done;
    core_.engine.commit(qp.qpn, 1, false, true, now);
    queue_atomic(qp, f, segs.front().pa, true);
    return Step::done;
  }

  fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR, "unsupported opcode");
  return Step::done;
}

bool Responder::check_read(Qp& qp, const net::RoceFields& f, Out& o) {
  o.kind = Out::Kind::read;
  if (f.reth_dma_len > MPR_MAX_MSG_SIZE) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "READ longer than the largest message");
    return false;
  }
  if (!rkey_allows(qp, f.reth_rkey, f.reth_va, f.reth_dma_len, MPR_ACCESS_REMOTE_READ)) {
    fatal(qp, net::NakCode::remote_access_error, f.psn, MPR_EQE_QP_ACCESS_ERR,
          "READ rkey check failed");
    return false;
  }
  o.psn = f.psn;
  o.rkey = f.reth_rkey;
  o.va = f.reth_va;
  o.len = f.reth_dma_len;
  o.npkts = o.len == 0 ? 1 : static_cast<uint32_t>((o.len + qp.mtu - 1) / qp.mtu);
  // 2^31 bytes at MTU 256 are 2^23 responses: half the PSN space, where a
  // 24-bit comparison can no longer tell ahead from behind.
  if (o.npkts >= (1u << 23)) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "READ of more responses than half the PSN space");
    return false;
  }
  o.uncounted = uncounted_request(qp, o.npkts);
  if (!within_rd_atomic_limit(qp, o.npkts)) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "more outstanding READ/atomics than max_dest_rd_atomic");
    return false;
  }
  return true;
}

bool Responder::within_rd_atomic_limit(Qp& qp, uint32_t responses) {
  // READ as data (MP-RDMA): the responses wait in the QP's send stream.
  if (qp.traits.read_as_data)
    return !requester_ || requester_->answers_pending(qp.qpn) < qp.max_dest_rd_atomic;
  // Out-of-order engines that carry READs themselves (IRN): a requester
  // that lost a READ request asks for each of its responses alone, every
  // one a request of one response that is part of a READ it counted once.
  // Those are not counted; the receive window bounds how many there can be.
  if (uncounted_request(qp, responses)) return true;
  return qp.rd_atomic_out - qp.rd_atomic_uncounted < qp.max_dest_rd_atomic;
}

bool Responder::uncounted_request(const Qp& qp, uint32_t responses) const {
  return qp.traits.out_of_order && !qp.traits.read_as_data && responses <= 1;
}

void Responder::note_read_resource(Qp& qp, const Out& o) {
  auto& t = qp.rd_resources;
  // Consecutive one-response requests (a lost READ asked for again response
  // by response) extend one resource: they are parts of one READ.
  if (!t.empty()) {
    Qp::ReadDesc& last = t.back();
    if (last.rkey == o.rkey && psn_add(last.psn, last.npkts) == o.psn &&
        last.len == uint64_t{last.npkts} * qp.mtu && last.va + last.len == o.va) {
      last.npkts += o.npkts;
      last.len += o.len;
      return;
    }
  }
  t.push_back(Qp::ReadDesc{o.psn, o.npkts, o.rkey, o.va, o.len});
  while (t.size() > qp.max_dest_rd_atomic) t.pop_front();
}

const Responder::Qp::ReadDesc* Responder::read_resource_of(const Qp& qp,
                                                           const net::RoceFields& f) const {
  for (const Qp::ReadDesc& r : qp.rd_resources) {
    const int32_t k = psn_diff(f.psn, r.psn);
    if (k < 0 || static_cast<uint32_t>(k) >= r.npkts) continue;
    const uint64_t offset = uint64_t(k) * qp.mtu;
    if (f.reth_rkey == r.rkey && f.reth_va == r.va + offset && f.reth_dma_len <= r.len - offset)
      return &r;
  }
  return nullptr;
}

void Responder::queue_read(Qp& qp, Out o, bool count_message) {
  if (count_message) {
    qp.msn = psn_add(qp.msn, 1);
    ++messages_;
  }
  if (qp.traits.explicit_read_acks) {
    // The responses may be asked for again until the requester has
    // acknowledged them all: keep where they come from.
    qp.read_table.push_back(Qp::ReadDesc{o.psn, o.npkts, o.rkey, o.va, o.len});
    core_.engine.read_queued(qp.qpn, o.psn, o.npkts, core_.now_cycle());
  }
  note_read_resource(qp, o);
  o.msn = qp.msn;
  ++qp.rd_atomic_out;
  if (o.uncounted) ++qp.rd_atomic_uncounted;
  ++packets_;
  qp.out.push_back(std::move(o));
  core_.tx.activate(qp.qpn);
}

bool Responder::check_atomic(Qp& qp, const net::RoceFields& f, std::vector<Segment>& segs) {
  if (f.atomic_va & 7) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "atomic address not 8-byte aligned");
    return false;
  }
  if (!check_rkey(qp, f.atomic_rkey, f.atomic_va, 8, MPR_ACCESS_REMOTE_ATOMIC, segs)) {
    fatal(qp, net::NakCode::remote_access_error, f.psn, MPR_EQE_QP_ACCESS_ERR,
          "atomic rkey check failed");
    return false;
  }
  if (!within_rd_atomic_limit(qp, 1)) {
    fatal(qp, net::NakCode::invalid_request, f.psn, MPR_EQE_QP_REQ_ERR,
          "more outstanding READ/atomics than max_dest_rd_atomic");
    return false;
  }
  return true;
}

void Responder::queue_atomic(Qp& qp, const net::RoceFields& f, uint64_t pa, bool count_message) {
  if (count_message) {
    qp.msn = psn_add(qp.msn, 1);
    ++messages_;
  }
  Out o;
  o.kind = Out::Kind::atomic;
  o.psn = f.psn;
  o.msn = qp.msn;
  qp.out.push_back(o);
  ++qp.rd_atomic_out;
  ++packets_;
  AtomicJob job{qp.qpn,
                qp.generation,
                f.psn,
                pa,
                f.opcode == Opcode::COMPARE_SWAP,
                f.atomic_swap_add,
                f.atomic_compare};
  job.rkey = f.atomic_rkey;
  job.va = f.atomic_va;
  job.pdn = qp.pdn;
  atomics_.push_back(job);
  run_atomics();
}

void Responder::duplicate(Qp& qp, const net::RoceFields& f) {
  const Opcode op = f.opcode;
  if (is_send(op) || is_write(op)) {
    // The ACK was lost or is late: acknowledge everything received so far.
    push_ack(qp, psn_add(core_.engine.epsn(qp.qpn), -1));
    return;
  }
  if (op == Opcode::RDMA_READ_REQUEST) {
    // Reads are idempotent: answer again, but only inside a READ this QP
    // accepted (its responder resources) and from the same addresses; a
    // duplicate that names anything else is garbage, dropped.
    if (!read_resource_of(qp, f) ||
        !rkey_allows(qp, f.reth_rkey, f.reth_va, f.reth_dma_len, MPR_ACCESS_REMOTE_READ)) {
      ++dup_reads_dropped_;
      MPR_LOG(log_, debug,
              "QP " << qp.qpn << ": duplicate READ PSN " << f.psn
                    << " outside the responder resources: dropped");
      return;
    }
    Out o;
    o.kind = Out::Kind::read;
    o.psn = f.psn;
    o.rkey = f.reth_rkey;
    o.va = f.reth_va;
    o.len = f.reth_dma_len;
    o.npkts = o.len == 0 ? 1 : static_cast<uint32_t>((o.len + qp.mtu - 1) / qp.mtu);
    // Each response is queued at most once. In order (go-back-N), the
    // requester wants everything from this PSN on: responses queued at or
    // beyond it go, and a READ queued before it stops short of it.
    // Out-of-order engines ask for the responses they miss: one still
    // queued will come anyway, and the request is dropped.
    const bool in_order = !qp.traits.out_of_order;
    std::deque<Out> keep;
    for (Out& x : qp.out) {
      if (x.kind != Out::Kind::read) {
        keep.push_back(std::move(x));
        continue;
      }
      const int32_t from = psn_diff(f.psn, x.psn);  // the duplicate's first, in x's numbering
      const bool overlaps = static_cast<int64_t>(from) + o.npkts > int64_t{x.next_k} &&
                            from < static_cast<int64_t>(x.npkts);
      if (!in_order && overlaps) {
        ++dup_reads_dropped_;
        return;
      }
      if (in_order && from <= static_cast<int32_t>(x.next_k)) {
        --qp.rd_atomic_out;  // all of it is asked again
        if (x.uncounted) --qp.rd_atomic_uncounted;
        continue;
      }
      if (in_order && from < static_cast<int32_t>(x.npkts)) x.npkts = static_cast<uint32_t>(from);
      keep.push_back(std::move(x));
    }
    qp.out.swap(keep);
    o.msn = qp.msn;
    o.uncounted = true;
    ++qp.rd_atomic_out;
    ++qp.rd_atomic_uncounted;
    qp.out.push_back(std::move(o));
    core_.tx.activate(qp.qpn);
    return;
  }
  if (op == Opcode::COMPARE_SWAP || op == Opcode::FETCH_ADD) {
    // Never execute an atomic twice: replay its saved result.
    for (const Out& x : qp.out)
      if (x.kind == Out::Kind::atomic && x.psn == f.psn) return;  // answer still coming
    for (const auto& [psn, orig] : qp.atomic_replay)
      if (psn == f.psn) {
        Out o;
        o.kind = Out::Kind::atomic;
        o.psn = psn;
        o.msn = qp.msn;
        o.ready = true;
        o.orig = orig;
        o.uncounted = true;
        ++qp.rd_atomic_out;
        ++qp.rd_atomic_uncounted;
        qp.out.push_back(o);
        core_.tx.activate(qp.qpn);
        return;
      }
    MPR_LOG(log_, info,
            "QP " << qp.qpn << ": duplicate atomic PSN " << f.psn
                  << " beyond the replay buffer, dropped");
  }
}

void Responder::run_atomics() {
  // Take atomics up in arrival order; each runs as soon as its bucket's lock
  // is free, so atomics on different buckets overlap and atomics on one
  // bucket (one address) run one after the other, in order.
  while (!atomics_.empty() && atomics_active_ < core_.cfg.atomics.max_outstanding) {
    AtomicJob job = atomics_.front();
    atomics_.pop_front();
    ++atomics_active_;
    job.op = ++next_atomic_op_;
    job.taken_up = sc_core::sc_time_stamp();
    if (locks_.acquire(job.pa, job.op)) {
      start_rmw(job);
    } else {
      ++atomic_lock_conflicts_;
      if (locks_.counters().max_waiters > atomic_lock_max_queue_.value())
        atomic_lock_max_queue_.set(locks_.counters().max_waiters);
      lock_waiters_.emplace(job.op, job);
    }
  }
}

bool Responder::atomic_target_valid(const AtomicJob& job) const {
  return core_.translation.check(job.rkey, job.pdn, job.va, 8, MPR_ACCESS_REMOTE_ATOMIC) ==
         AccessStatus::ok;
}

void Responder::atomic_revoked(const AtomicJob& job) {
  Qp* qp = find(job.qpn);
  if (qp && qp->generation == job.generation && !qp->error)
    fatal(*qp, net::NakCode::remote_access_error, job.psn, MPR_EQE_QP_ACCESS_ERR,
          "atomic target's memory region deregistered before it ran");
}

void Responder::start_rmw(const AtomicJob& job) {
  const uint64_t epoch = reset_epoch_;
  const sc_core::sc_time granted = sc_core::sc_time_stamp();
  if (!atomic_target_valid(job)) {
    atomic_revoked(job);
    end_rmw(job, granted);
    return;
  }
  core_.dma.read(job.pa, 8, DmaPurpose::atomic,
                 [this, job, epoch, granted](bool ok, std::vector<uint8_t>&& data) {
                   if (epoch != reset_epoch_) return;  // the lock table and counts were reset
                   Qp* qp = find(job.qpn);
                   const bool live = qp && qp->generation == job.generation && !qp->error;
                   if (!ok) {
                     if (live)
                       fatal(*qp, net::NakCode::remote_operational_error, job.psn, MPR_EQE_QP_FATAL,
                             "atomic target not readable", MPR_SYN_DMA_FAULT);
                   } else if (!atomic_target_valid(job)) {
                     atomic_revoked(job);  // deregistered while the read was out
                   } else {
                     uint64_t orig;
                     std::memcpy(&orig, data.data(), 8);
                     uint64_t result = job.cas ? (orig == job.compare ? job.swap_add : orig)
                                               : orig + job.swap_add;
                     // The lock is released once the write is issued: a later read of the
                     // same address (the next holder's) is a read request behind this
                     // posted write on the same PCIe link, which may not pass it.
                     if (result != orig || !job.cas)
                       core_.dma.write(job.pa, &result, 8, DmaPurpose::atomic);
                     ++atomics_done_;
                     if (live && job.as_data) {
                       if (!requester_ ||
                           !requester_->send_atomic_data(job.qpn, job.psn, job.stream_base, orig))
                         fatal(*qp, net::NakCode::invalid_request, job.psn, MPR_EQE_QP_REQ_ERR,
                               "atomic on a QP that cannot send its response");
                     } else if (live) {
                       for (Out& o : qp->out)
                         if (o.kind == Out::Kind::atomic && o.psn == job.psn && !o.ready) {
                           o.ready = true;
                           o.orig = orig;
                         }
                       qp->atomic_replay.emplace_back(job.psn, orig);
                       if (qp->atomic_replay.size() > kAtomicReplayDepth)
                         qp->atomic_replay.pop_front();
                       core_.tx.activate(job.qpn);
                     }
                   }
                   end_rmw(job, granted);
                 });
}

void Responder::end_rmw(const AtomicJob& job, sc_core::sc_time granted) {
  --atomics_active_;
  const sc_core::sc_time ps(1, sc_core::SC_PS), now = sc_core::sc_time_stamp();
  lock_held_ps_[locks_.bucket_of(job.pa)] += static_cast<uint64_t>((now - granted) / ps);
  atomic_buffer_busy_ps_.add(static_cast<uint64_t>((now - job.taken_up) / ps));
  if (const std::optional<uint64_t> next = locks_.release(job.pa, job.op)) {
    auto it = lock_waiters_.find(*next);
    const AtomicJob waiting = it->second;
    lock_waiters_.erase(it);
    start_rmw(waiting);
  }
  run_atomics();
}

void Responder::push_ack(Qp& qp, uint32_t psn) {
  if (!qp.out.empty() && qp.out.back().kind == Out::Kind::ack) {
    qp.out.back().psn = psn;  // a later ACK covers the earlier one
    qp.out.back().msn = qp.msn;
  } else {
    Out o;
    o.kind = Out::Kind::ack;
    o.psn = psn;
    o.msn = qp.msn;
    o.syndrome = net::aeth_ack(kAckCredits);
    qp.out.push_back(o);
  }
  core_.tx.activate(qp.qpn);
}

void Responder::push_nak(Qp& qp, uint8_t syndrome, uint32_t psn) {
  Out o;
  o.kind = Out::Kind::nak;
  o.psn = psn;
  o.msn = qp.msn;
  o.syndrome = syndrome;
  qp.out.push_back(o);
  core_.tx.activate(qp.qpn);
}

void Responder::fatal(Qp& qp, net::NakCode code, uint32_t psn, uint8_t event, const char* why,
                      uint8_t syndrome) {
  ++fatal_naks_;
  MPR_LOG(log_, info, "QP " << qp.qpn << " PSN " << psn << ": " << why << "; NAK and QP to ERR");
  const uint32_t qpn = qp.qpn;
  qp.in_write = false;
  push_nak(qp, net::aeth_nak(code), psn);
  if (mpr_qpc* q = core_.contexts.qp(qpn)) {
    q->state = MPR_QPS_ERR;
    q->attr.qp_state = MPR_QPS_ERR;
  }
  core_.cq.post_async(event, qpn, syndrome);
  qp_to_error(qpn);
  if (requester_) requester_->qp_to_error(qpn);
}

void Responder::recv_cqe(Qp& qp, const RecvWqe& wqe, uint8_t opcode, uint32_t byte_len,
                         const net::RoceFields* f, uint8_t status, uint8_t syndrome,
                         std::vector<uint8_t> inline_data) {
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  if (!q) return;
  mpr_cqe cqe{};
  cqe.byte_len = byte_len;
  cqe.qpn = qp.qpn;
  cqe.wqe_index = static_cast<uint16_t>(wqe.index);
  cqe.opcode = opcode;
  cqe.status = status;
  cqe.syndrome = syndrome;
  bool solicited = false;
  if (f) {
    if (carries_imm(f->opcode)) {
      cqe.imm_data = __builtin_bswap32(f->imm);
      cqe.flags |= MPR_CQE_F_IMM;
    }
    if (f->solicited) {
      cqe.flags |= MPR_CQE_F_SOLICITED;
      solicited = true;
    }
  }
  if (!inline_data.empty()) cqe.flags |= MPR_CQE_F_INLINE;
  core_.cq.post_cqe(q->recv_cqn, cqe, solicited, std::move(inline_data));
}

bool Responder::try_emit(uint32_t qpn) {
  Qp* qp = find(qpn);
  if (!qp) return false;
  if (qp->cnp_due) {
    // CNPs go before the QP's ACKs and responses. Not-ECT: a CNP is not
    // congestion controlled itself.
    qp->cnp_due = false;
    net::RoceFields c = qp->base;
    c.ecn = 0;
    const TxScheduler::Slot slot = core_.tx.reserve(c);  // sets c.ip_id
    core_.tx.fill(slot, net::build_cnp(c));
    ++*cnp_tx_;
    return true;
  }
  // DCQCN paces READ responses with the QP's limiter (requests share it);
  // ACKs, NAKs and atomic responses go unpaced. The limiter's owner wakes
  // the QP when the rate allows (the scheduler serves its responder first).
  const uint64_t now = core_.now_cycle();
  const bool read_front = !qp->out.empty() && qp->out.front().kind == Out::Kind::read;
  const bool read_next = read_front || (!qp->read_table.empty() && qp->out.empty());
  if (read_next && requester_) {
    if (requester_->paced_at(qpn, now) > now) return false;
  }
  if (!qp->read_table.empty()) {
    // Responses the requester's Read NACKs (or a timeout) call lost go
    // before new ones.
    uint32_t psn = 0;
    while (core_.engine.next_read_retx(qpn, psn)) {
      if (emit_read_retx(*qp, psn)) return true;
      // Its source was revoked: the QP failed, its NAK goes now.
      if (qp->error) return try_emit(qpn);
    }
  }
  if (qp->out.empty()) return false;
  Out& o = qp->out.front();
  net::RoceFields f = qp->base;
  f.aeth_msn = o.msn;
  f.aeth_syndrome = net::aeth_ack(kAckCredits);
  switch (o.kind) {
    case Out::Kind::ack:
    case Out::Kind::nak: {
      f.opcode = Opcode::ACKNOWLEDGE;
      f.psn = o.psn;
      f.aeth_syndrome = o.syndrome;
      if (qp->traits.out_of_order) {
        // Every ACK and NAK of an out-of-order connection carries the ACK
        // trailer, on the virtual path of the packet it answers.
        net::MpAckExt x;
        if (o.has_ext) {
          x = net::MpAckExt{o.ext.echo_vp, o.ext.sack, o.ext.aack,
                            o.ext.ece,     o.ext.retx, o.ext.nack};
          f.udp_sport = o.ext.echo_vp;
        } else {
          x.echo_vp = f.udp_sport;
          x.sack = o.psn;
          x.aack = psn_add(o.psn, -1);
        }
        uint8_t trailer[net::kMpAckExtBytes];
        net::put_mp_ack_ext(trailer, x);
        f.trailer_len = net::kMpAckExtBytes;
        const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
        core_.tx.fill(slot, net::build_roce(f, trailer, sizeof trailer));
        qp->out.pop_front();
        return true;
      }
      const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
      core_.tx.fill(slot, net::build_roce(f, nullptr, 0));
      qp->out.pop_front();
      return true;
    }
    case Out::Kind::atomic: {
      if (!o.ready) return false;
      f.opcode = Opcode::ATOMIC_ACKNOWLEDGE;
      f.psn = o.psn;
      f.atomic_ack_orig = o.orig;
      const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
      core_.tx.fill(slot, net::build_roce(f, nullptr, 0));
      if (o.uncounted) --qp->rd_atomic_uncounted;
      qp->out.pop_front();
      --qp->rd_atomic_out;
      return true;
    }
    case Out::Kind::read: {
      const uint32_t k = o.next_k;
      const bool first = k == 0, last = k + 1 == o.npkts;
      f.opcode = first && last ? Opcode::RDMA_READ_RESPONSE_ONLY
                 : first       ? Opcode::RDMA_READ_RESPONSE_FIRST
                 : last        ? Opcode::RDMA_READ_RESPONSE_LAST
                               : Opcode::RDMA_READ_RESPONSE_MIDDLE;
      f.psn = psn_add(o.psn, k);
      // A failed check fails the QP and replaces its queue (`o` is gone) with
      // the NAK, which goes now.
      if (!emit_read_response(*qp, f, o.rkey, o.va, o.len, k)) return try_emit(qpn);
      ++o.next_k;
      if (last) {
        if (o.uncounted) --qp->rd_atomic_uncounted;
        qp->out.pop_front();
        --qp->rd_atomic_out;
      }
      return true;
    }
  }
  return false;
}

bool Responder::emit_read_retx(Qp& qp, uint32_t psn) {
  const Qp::ReadDesc* d = nullptr;
  for (const Qp::ReadDesc& r : qp.read_table) {
    const int32_t k = psn_diff(psn, r.psn);
    if (k >= 0 && static_cast<uint32_t>(k) < r.npkts) {
      d = &r;
      break;
    }
  }
  if (!d) return false;
  const uint32_t k = static_cast<uint32_t>(psn_diff(psn, d->psn));
  net::RoceFields f = qp.base;
  f.aeth_msn = qp.msn;
  f.aeth_syndrome = net::aeth_ack(kAckCredits);
  // One response on its own: an ONLY, which an out-of-order requester
  // places by its PSN.
  f.opcode = Opcode::RDMA_READ_RESPONSE_ONLY;
  f.psn = psn;
  const Qp::ReadDesc read = *d;  // a failed check fails the QP and clears the table
  if (!emit_read_response(qp, f, read.rkey, read.va, read.len, k)) return false;
  ++read_retransmits_;
  return true;
}

bool Responder::emit_read_response(Qp& qp, net::RoceFields f, uint32_t rkey, uint64_t va,
                                   uint64_t len, uint32_t k) {
  const uint64_t offset = uint64_t(k) * qp.mtu;
  const uint32_t plen =
      static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, len - std::min(len, offset)));
  // The source is translated as the response leaves: a region deregistered
  // since the READ was accepted is never read.
  std::vector<Segment> segs;
  if (plen && !check_rkey(qp, rkey, va + offset, plen, MPR_ACCESS_REMOTE_READ, segs)) {
    fatal(qp, net::NakCode::remote_access_error, f.psn, MPR_EQE_QP_ACCESS_ERR,
          "READ source's memory region deregistered during the READ");
    return false;
  }
  const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
  read_response_left(qp, f.psn);
  if (requester_)
    requester_->paced_sent(qp.qpn, net::roce_wire_bytes(f.opcode, plen), core_.now_cycle());
  fill_read_response(qp, f, slot, segs);
  return true;
}

void Responder::fill_read_response(Qp& qp, const net::RoceFields& f, TxScheduler::Slot slot,
                                   const std::vector<Segment>& segs) {
  if (segs.empty()) {
    core_.tx.fill(slot, net::build_roce(f, nullptr, 0));
    return;
  }
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  core_.dma.gather(segs, DmaPurpose::payload,
                   [this, f, slot, qpn, gen](bool ok, std::vector<uint8_t>&& data) {
                     if (ok) {
                       core_.tx.fill(slot, net::build_roce(f, data.data(), data.size()));
                       return;
                     }
                     core_.tx.cancel(slot);
                     Qp* q = find(qpn);
                     if (q && q->generation == gen && !q->error)
                       fatal(*q, net::NakCode::remote_operational_error, f.psn, MPR_EQE_QP_FATAL,
                             "READ source not readable", MPR_SYN_DMA_FAULT);
                   });
}

void Responder::read_response_left(Qp& qp, uint32_t psn) {
  if (qp.read_table.empty()) return;  // no explicit READ acknowledgements
  core_.engine.read_response_sent(qp.qpn, psn, core_.now_cycle());
  schedule_read_wake(qp);
}

void Responder::on_read_ack(uint32_t qpn, const AckExt& ack) {
  Qp* qp = find(qpn);
  if (!qp || qp->ud || !qp->active || qp->error || !qp->traits.explicit_read_acks) return;
  const AckResult r = core_.engine.on_read_ack(qpn, ack, core_.now_cycle());
  prune_read_table(*qp);
  if (r.tx_ready) core_.tx.activate(qpn);
  schedule_read_wake(*qp);
}

void Responder::prune_read_table(Qp& qp) {
  // READs whose responses are all acknowledged (or given up) free their
  // entries.
  auto& t = qp.read_table;
  t.erase(std::remove_if(
              t.begin(), t.end(),
              [&](const Qp::ReadDesc& d) { return !core_.engine.read_pending(qp.qpn, d.psn); }),
          t.end());
}

void Responder::schedule_read_wake(Qp& qp) {
  const uint64_t t = core_.engine.read_wake_at(qp.qpn);
  if (t == kNever || t >= qp.read_wake) return;
  qp.read_wake = t;
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  const sc_core::sc_time when = std::max(core_.clock.cycles(t), sc_core::sc_time_stamp());
  calendar_.at(when, [this, qpn, gen, t] {
    Qp* q = find(qpn);
    if (!q || q->generation != gen || q->read_wake != t) return;
    q->read_wake = kNever;
    if (!q->active || q->error) return;
    const AckResult r = core_.engine.on_read_timer(qpn, core_.now_cycle());
    prune_read_table(*q);
    if (r.tx_ready) core_.tx.activate(qpn);
    schedule_read_wake(*q);
  });
}

}  // namespace mprdma::nic
