#include "vp/nic/requester.h"

#include <algorithm>
#include <cstring>

#include "vp/net/mp_ext.h"
#include "vp/nic/completion_unit.h"
#include "vp/nic/context_cache.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/qp_params.h"
#include "vp/nic/rc_opcodes.h"
#include "vp/nic/translation_cache.h"

namespace mprdma::nic {
namespace {

uint8_t cqe_opcode(uint8_t wqe_opcode) {
  switch (wqe_opcode) {
    case MPR_WQE_SEND:
    case MPR_WQE_SEND_IMM:
      return MPR_CQE_REQ_SEND;
    case MPR_WQE_RDMA_WRITE:
    case MPR_WQE_RDMA_WRITE_IMM:
      return MPR_CQE_REQ_RDMA_WRITE;
    case MPR_WQE_RDMA_READ:
      return MPR_CQE_REQ_RDMA_READ;
    case MPR_WQE_ATOMIC_CAS:
      return MPR_CQE_REQ_ATOMIC_CAS;
    case MPR_WQE_ATOMIC_FA:
      return MPR_CQE_REQ_ATOMIC_FA;
  }
  return MPR_CQE_REQ_SEND;
}

bool has_raddr(uint8_t op) {
  return op == MPR_WQE_RDMA_WRITE || op == MPR_WQE_RDMA_WRITE_IMM || op == MPR_WQE_RDMA_READ ||
         op == MPR_WQE_ATOMIC_CAS || op == MPR_WQE_ATOMIC_FA;
}

bool is_atomic(uint8_t op) { return op == MPR_WQE_ATOMIC_CAS || op == MPR_WQE_ATOMIC_FA; }

// NAK code of a fatal NAK -> completion status of the requester's WQE.
void nak_status(uint8_t code, uint8_t& status, uint8_t& syndrome) {
  switch (code) {
    case static_cast<uint8_t>(net::NakCode::remote_access_error):
      status = MPR_CQE_REM_ACCESS_ERR;
      syndrome = MPR_SYN_NAK_REM_ACCESS;
      return;
    case static_cast<uint8_t>(net::NakCode::remote_operational_error):
      status = MPR_CQE_REM_OP_ERR;
      syndrome = MPR_SYN_NAK_REM_OP;
      return;
    default:
      status = MPR_CQE_REM_INV_REQ_ERR;
      syndrome = MPR_SYN_NAK_INV_REQ;
      return;
  }
}

// What made the engine go back, for the log.
const char* ack_kind_name(AckEvent::Kind k) {
  switch (k) {
    case AckEvent::Kind::ack:
      return "an ACK (a READ or atomic response it passed was lost) at";
    case AckEvent::Kind::nak_sequence:
      return "a sequence NAK for";
    case AckEvent::Kind::nak_rnr:
      return "an RNR NAK for";
    case AckEvent::Kind::nak_fatal:
      return "a fatal NAK for";
    case AckEvent::Kind::read_response:
      return "a READ response after a lost one, at";
    case AckEvent::Kind::atomic_ack:
      return "an atomic ACK after a lost response, at";
  }
  return "?";
}

}  // namespace

uint32_t Requester::Message::packets(uint32_t mtu) const {
  if (is_atomic(opcode)) return 1;
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

Requester::Requester(sc_core::sc_module_name name, NicCore& core)
    : sc_core::sc_module(name),
      core_(core),
      calendar_("calendar"),
      log_(core::Log::channel("nic." + core.cfg.name + ".requester")),
      wqes_(core.env.stats.counter(core.stat("requester.wqes"), "WQEs",
                                   "Send WQEs completed successfully")),
      wqe_errors_(core.env.stats.counter(core.stat("requester.wqe_errors"), "WQEs",
                                         "Send WQEs completed with an error (not flushes)")),
      packets_(core.env.stats.counter(core.stat("requester.packets"), "packets",
                                      "Request packets sent, retransmissions included")),
      retransmits_(core.env.stats.counter(core.stat("requester.retransmits"), "packets",
                                          "Request packets sent again")),
      acks_(core.env.stats.counter(core.stat("requester.acks"), "packets", "ACKs received")),
      naks_(core.env.stats.counter(core.stat("requester.naks"), "packets",
                                   "NAKs received (sequence, RNR and fatal)")),
      timeouts_(core.env.stats.counter(core.stat("requester.timeouts"), "events",
                                       "Retransmission timeouts")),
      bad_responses_(core.env.stats.counter(core.stat("requester.bad_responses"), "packets",
                                            "Responses dropped: unknown QP or unexpected")),
      doorbells_dropped_(core.env.stats.counter(core.stat("requester.doorbells_dropped"),
                                                "doorbells",
                                                "SQ doorbells ignored (QP in RESET or bad index)")),
      wqes_by_mmio_(core.env.stats.counter(core.stat("requester.wqes_by_mmio"), "WQEs",
                                           "Send WQEs taken from the MMIO write, no DMA read")),
      ud_sends_(
          core.env.stats.counter(core.stat("requester.ud_sends"), "packets", "UD datagrams sent")),
      uc_packets_(core.env.stats.counter(core.stat("requester.uc_packets"), "packets",
                                         "UC request packets sent (no ACK, never resent)")),
      read_acks_tx_(core.env.stats.counter(core.stat("requester.read_acks_tx"), "packets",
                                           "Read (N)ACKs sent for READ responses (IRN)")),
      read_acks_rx_(core.env.stats.counter(core.stat("requester.read_acks_rx"), "packets",
                                           "Read (N)ACKs received, handed to the responder")),
      read_data_tx_(core.env.stats.counter(
          core.stat("requester.read_data_tx"), "packets",
          "READ responses sent in the QP's own send stream (READ as data, MP-RDMA), "
          "retransmissions included")),
      read_data_rx_(core.env.stats.counter(
          core.stat("requester.read_data_rx"), "packets",
          "READ responses placed from the peer's send stream (READ as data, MP-RDMA)")),
      rtt_ns_(core.env.stats.histogram(
          core.stat("requester.rtt"), "ns",
          "Round-trip times sampled on every QP, one packet at a time: from a fresh packet "
          "leaving the requester to snd_una passing it, none across a retransmission; the "
          "smallest is the path's base RTT with both NICs' processing")) {
  if ((rc_ = core.rate_control)) {
    const std::string rc = rc_->name();
    if (rc_->cnp_interval_cycles() != RateControlKind::kNoCnp)
      cnp_rx_ = &core.env.stats.counter(core.stat(rc + ".cnp_rx"), "packets",
                                        "CNPs received (reaction point)");
    if (rc_->rtt_samples())
      rtt_samples_ = &core.env.stats.counter(core.stat(rc + ".rtt_samples"), "samples",
                                             "RTT samples fed to the reaction points");
    rate_cuts_ = &core.env.stats.counter(core.stat(rc + ".rate_cuts"), "events",
                                         "Rate decreases applied by the reaction point");
    paced_ = &core.env.stats.counter(core.stat(rc + ".paced"), "events",
                                     "Times a QP waited for its rate before a packet");
  }
}

Requester::Qp* Requester::find(uint32_t qpn) {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : &it->second;
}

void Requester::reset() {
  ++generation_;
  qps_.clear();
}

void Requester::sq_doorbell(uint32_t qpn, uint16_t pi16) {
  if (Qp* qp = accept_sq_pi(qpn, pi16)) fetch(*qp);
}

void Requester::sq_wqe_mmio(uint32_t qpn, const std::vector<uint8_t>& wqe) {
  mpr_wqe_ctrl ctrl;
  std::memcpy(&ctrl, wqe.data(), sizeof ctrl);
  const uint16_t index = ctrl.wqe_index;
  Qp* qp = accept_sq_pi(qpn, static_cast<uint16_t>(index + 1));
  if (!qp) return;
  const mpr_qpc* q = core_.contexts.qp(qpn);
  // Kept until fetch() reaches its index (at once if the NIC is idle); the
  // widened index is the producer index just accepted, minus one.
  const uint32_t at = qp->sq_pi - 1;
  if (wqe.size() <= (size_t{1} << q->sq_log_stride) &&
      at - qp->fetch_idx < (1u << q->sq_log_size) &&
      qp->mmio_wqes.size() < static_cast<size_t>(core_.cfg.max_outstanding_wqes))
    qp->mmio_wqes[at] = wqe;
  fetch(*qp);
}

std::optional<uint32_t> Requester::wqe_of_response(uint32_t qpn, uint32_t psn) {
  Qp* qp = find(qpn);
  if (!qp) return std::nullopt;
  const Message* m = message_at(*qp, psn);
  if (!m || m->answers_read) return std::nullopt;
  return m->index;
}

Requester::Qp* Requester::accept_sq_pi(uint32_t qpn, uint16_t pi16) {
  mpr_qpc* q = core_.contexts.qp(qpn);
  if (!q) {
    ++doorbells_dropped_;
    return nullptr;
  }
  if (q->state == MPR_QPS_RESET) {
    // Hardware cannot complete WQEs of a QP without a connection; the verbs
    // layer refuses such posts, so a doorbell here is a software bug.
    ++doorbells_dropped_;
    MPR_LOG(log_, warn, "SQ doorbell for QP " << qpn << " in RESET dropped");
    return nullptr;
  }
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
  }
  const uint32_t pi = qp.sq_pi + static_cast<uint16_t>(pi16 - static_cast<uint16_t>(qp.sq_pi));
  const uint32_t oldest = !qp.inflight.empty()  ? qp.inflight.front().index
                          : !qp.pending.empty() ? qp.pending.front().index
                                                : qp.fetch_idx;
  if (pi - oldest > (1u << q->sq_log_size)) {
    ++doorbells_dropped_;
    MPR_LOG(log_, warn,
            "SQ doorbell for QP " << qpn << " claims " << (pi - oldest) << " WQEs in a ring of "
                                  << (1u << q->sq_log_size) << ": dropped");
    return nullptr;
  }
  qp.sq_pi = pi;
  q->sq_pi = pi;
  if (q->state == MPR_QPS_ERR) {
    flush_new(qp);
    return nullptr;
  }
  return &qp;
}

void Requester::qp_to_rts(uint32_t qpn) {
  mpr_qpc* q = core_.contexts.qp(qpn);
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
  }
  // A QP that already answers READs from RTR (READ as data) keeps its
  // stream: the engine's send side and its PSNs go on.
  const bool answering = qp.answering && !qp.error;
  qp.answering = false;
  qp.active = true;
  qp.error = false;
  qp.mtu = std::min<uint32_t>(mtu_bytes(q->attr.path_mtu), static_cast<uint32_t>(core_.cfg.mtu.n));
  qp.max_rd_atomic = std::max<uint32_t>(1, q->attr.max_rd_atomic);
  qp.base = qp_base_fields(*q, core_.cfg, core_.contexts);
  if (!answering) qp.next_psn = q->attr.sq_psn;
  qp.next_recv_msn = 0;
  qp.ud = q->qp_type == MPR_QPT_UD;
  qp.uc = q->qp_type == MPR_QPT_UC;
  qp.qkey = q->attr.qkey;
  if (qp.uc) return fetch(qp);  // no engine, no rate control: path MTU, SQ PSN
  if (qp.ud) {
    // Datagrams: no connection, no engine; a message is one packet of at
    // most the port's MTU (UD QPs have no path MTU attribute).
    qp.mtu = static_cast<uint32_t>(core_.cfg.mtu.n);
    return fetch(qp);
  }
  if (answering) {
    if (q->attr.sq_psn != qp.stream_base)
      MPR_LOG(log_, warn,
              "QP " << qpn << " to RTS with SQ PSN " << q->attr.sq_psn
                    << ": its stream already began at " << qp.stream_base
                    << " (READ responses sent from RTR) and goes on from there");
  } else {
    core_.engine.set_requester(conn_params(*q, core_.cfg, qp.base));
    qp.traits = core_.engine.traits_of(qpn);
  }
  ensure_rp(qp);
  fetch(qp);
}

void Requester::ensure_rp(Qp& qp) {
  // The NIC's rate control paces the QPs of engines without a congestion
  // control of their own; a QP keeps its limiter from its first paced
  // packet (it may be a READ response sent in RTR) until it is reset.
  if (qp.rp || !rc_ || qp.traits.own_congestion_control) return;
  qp.rp = rc_->make();
  qp.pace_at = kNever;
  qp.rate_gauge = &core_.env.stats.counter(
      core_.stat(std::string(rc_->name()) + ".qp" + std::to_string(qp.qpn) + ".rate_mbps"), "Mb/s",
      "Current rate of the QP at its last packet or rate update");
  qp.rate_gauge->set(static_cast<uint64_t>(qp.rp->rate_bps() / 1e6));
}

Requester::Qp* Requester::limited(uint32_t qpn) {
  if (!rc_) return nullptr;
  Qp* qp = find(qpn);
  if (!qp) {
    const mpr_qpc* q = core_.contexts.qp(qpn);
    if (!q || q->qp_type == MPR_QPT_UD || q->qp_type == MPR_QPT_UC ||
        (q->state != MPR_QPS_RTR && q->state != MPR_QPS_RTS))
      return nullptr;
    auto [it, created] = qps_.try_emplace(qpn);
    qp = &it->second;
    qp->qpn = qpn;
    qp->generation = ++generation_;
  }
  if (qp->ud || qp->uc || qp->error) return nullptr;
  ensure_rp(*qp);
  return qp->rp ? qp : nullptr;
}

uint64_t Requester::paced_at(uint32_t qpn, uint64_t now) {
  Qp* qp = limited(qpn);
  const uint64_t at = qp ? std::max(now, qp->rp->tx_allowed_at()) : now;
  if (at > now) schedule_pace(*qp, at);  // the responder waits for the same wake-up
  return at;
}

void Requester::paced_sent(uint32_t qpn, uint64_t wire_bytes, uint64_t now) {
  if (Qp* qp = limited(qpn)) note_paced(*qp, wire_bytes, now);
}

void Requester::note_paced(Qp& qp, uint64_t wire_bytes, uint64_t now) {
  qp.rp->on_sent(wire_bytes, now);
  qp.rate_gauge->set(static_cast<uint64_t>(qp.rp->rate_bps() / 1e6));
}

void Requester::qp_to_error(uint32_t qpn) {
  auto [it, created] = qps_.try_emplace(qpn);
  Qp& qp = it->second;
  if (created) {
    qp.qpn = qpn;
    qp.generation = ++generation_;
    if (const mpr_qpc* q = core_.contexts.qp(qpn)) qp.sq_pi = q->sq_pi;
  }
  fail(qp, nullptr, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
}

void Requester::qp_removed(uint32_t qpn) { qps_.erase(qpn); }

void Requester::fetch(Qp& qp) {
  if (qp.fetching || !qp.active || qp.error) return;
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  const uint32_t size = 1u << q->sq_log_size;
  const uint32_t held = static_cast<uint32_t>(qp.pending.size() + qp.inflight.size());
  const uint32_t room = held >= core_.cfg.max_outstanding_wqes
                            ? 0
                            : static_cast<uint32_t>(core_.cfg.max_outstanding_wqes) - held;
  const uint32_t to_ring_end = size - (qp.fetch_idx & (size - 1));
  uint32_t n = std::min({qp.sq_pi - qp.fetch_idx, room, to_ring_end,
                         static_cast<uint32_t>(core_.cfg.wqe_fetch_batch)});
  if (n == 0) return;
  // WQEs that came by MMIO are taken as they are, one at a time; a DMA read
  // stops short of them.
  while (!qp.mmio_wqes.empty() && qp.mmio_wqes.begin()->first - qp.fetch_idx >= (1u << 31))
    qp.mmio_wqes.erase(qp.mmio_wqes.begin());  // indices already fetched by DMA
  if (auto it = qp.mmio_wqes.find(qp.fetch_idx); it != qp.mmio_wqes.end()) {
    ++wqes_by_mmio_;
    qp.fetching = true;
    std::vector<uint8_t> slot(size_t{1} << q->sq_log_stride, 0);
    std::memcpy(slot.data(), it->second.data(), it->second.size());
    qp.mmio_wqes.erase(it);
    on_wqes(qp.qpn, qp.generation, qp.fetch_idx, 1, true, slot);
    return;
  }
  uint32_t dma_n = n;
  for (uint32_t k = 1; k < n; ++k)
    if (qp.mmio_wqes.count(qp.fetch_idx + k)) {
      dma_n = k;
      break;
    }
  n = dma_n;
  qp.fetching = true;
  const uint64_t addr = q->sq_base + (uint64_t(qp.fetch_idx & (size - 1)) << q->sq_log_stride);
  const uint32_t first = qp.fetch_idx;
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  core_.dma.read(addr, n << q->sq_log_stride, DmaPurpose::wqe,
                 [this, qpn, gen, first, n](bool ok, std::vector<uint8_t>&& data) {
                   on_wqes(qpn, gen, first, n, ok, data);
                 });
}

void Requester::on_wqes(uint32_t qpn, uint64_t gen, uint32_t first, uint32_t count, bool ok,
                        const std::vector<uint8_t>& data) {
  Qp* qp = find(qpn);
  if (!qp || qp->generation != gen || qp->error) return;
  if (!ok) {
    // The send ring itself is unreadable: nothing after it can be trusted.
    qp->fetching = false;
    Message m;
    m.index = first;
    m.status = MPR_CQE_LOC_QP_OP_ERR;
    m.syndrome = MPR_SYN_DMA_FAULT;
    qp->pending.push_back(m);
    qp->fetch_idx = first + 1;
    core_.cq.post_async(MPR_EQE_QP_FATAL, qpn, MPR_SYN_DMA_FAULT);
    MPR_LOG(log_, error, "QP " << qpn << ": send queue at WQE " << first << " unreadable");
    assign(*qp);
    retire(*qp);
    return;
  }
  // The fetched WQEs are on chip now (the WQE cache).
  for (uint32_t i = 0; i < count; ++i)
    core_.wqe_cache.install(NicCore::wqe_line(qpn, first + i), qpn);
  // Parsing costs wqe_parse cycles per WQE; the WQEs become visible after it.
  const uint64_t cycles = static_cast<uint64_t>(core_.cfg.latency.wqe_parse) * count;
  calendar_.at(core_.clock.after_cycles(cycles), [this, qpn, gen, first, count, data] {
    Qp* q = find(qpn);
    if (!q || q->generation != gen || q->error) return;
    const uint32_t stride = static_cast<uint32_t>(data.size() / count);
    auto batch = std::make_shared<Batch>();
    batch->messages.resize(count);
    for (uint32_t i = 0; i < count; ++i)
      parse(*q, data.data() + size_t(i) * stride, first + i, batch->messages[i]);
    admit(qpn, gen, batch, first + count);
  });
}

void Requester::admit(uint32_t qpn, uint64_t gen, std::shared_ptr<Batch> batch,
                      uint32_t next_fetch_idx) {
  if (batch->messages.empty()) return;
  Qp* q = find(qpn);
  if (!q || q->generation != gen || q->error) return;
  // The translations the batch used must be on chip; a miss delays the
  // whole batch (and the next fetch) until the lines have arrived. The batch
  // looks again once every lookup that missed has its lines (one wait at a
  // time: a look per fill would pile up waiters for every SGE still
  // missing). An SGE whose lines were all there once is not looked up
  // again: the other SGEs' fills may have evicted them since, and a batch
  // needing more lines than the cache holds would never go.
  for (Message& m : batch->messages)
    for (Message::Sge& s : m.sges) {
      if (s.translated) continue;
      s.translated = core_.tcache.access(
          s.lkey, s.addr, s.len, qpn,
          [this, qpn, gen, batch, next_fetch_idx] {
            if (--batch->waiting == 0) admit(qpn, gen, batch, next_fetch_idx);
          },
          &s.progress);
      if (!s.translated) ++batch->waiting;
    }
  if (batch->waiting > 0) return;
  q->fetching = false;
  for (Message& m : batch->messages) q->pending.push_back(std::move(m));
  batch->messages.clear();
  q->fetch_idx = next_fetch_idx;
  assign(*q);
  retire(*q);
  if (Qp* again = find(qpn); again && again->generation == gen) fetch(*again);
}

void Requester::parse(Qp& qp, const uint8_t* wqe, uint32_t index, Message& m) {
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  const uint32_t stride = 1u << q->sq_log_stride;
  mpr_wqe_ctrl ctrl;
  std::memcpy(&ctrl, wqe, sizeof ctrl);
  m.index = index;
  m.opcode = ctrl.opcode;
  m.flags = ctrl.flags | (q->sq_sig_all ? MPR_WQE_F_SIGNALED : 0);
  m.imm = ctrl.imm_data;
  auto bad = [&](uint8_t status, uint8_t syndrome) {
    m.status = status;
    m.syndrome = syndrome;
    ++wqe_errors_;
    MPR_LOG(log_, info,
            "QP " << qp.qpn << " WQE " << index << " rejected: status " << int(status)
                  << " syndrome " << int(syndrome));
  };
  if (ctrl.opcode == MPR_WQE_NOP || ctrl.opcode > MPR_WQE_OPCODE_MAX)
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_OPCODE);
  if (qp.uc && (ctrl.opcode == MPR_WQE_RDMA_READ || is_atomic(ctrl.opcode))) {
    // No READ or atomic exists on UC (IBA ch. 9.2): a local QP operation
    // error, as hardware reports it.
    MPR_LOG(log_, info, "UC QP " << qp.qpn << " WQE " << index << ": no READ or atomics on UC");
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_UNSUPPORTED);
  }
  const EngineTraits& engine = qp.traits;
  if (!engine.carries_read_atomic && (ctrl.opcode == MPR_WQE_RDMA_READ || is_atomic(ctrl.opcode)) &&
      !engine.read_as_data) {
    MPR_LOG(log_, warn,
            "QP " << qp.qpn << " WQE " << index << ": the " << core_.engine.name_of(qp.qpn)
                  << " transport carries no "
                  << (is_atomic(ctrl.opcode) ? "atomics" : "RDMA READ"));
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_UNSUPPORTED);
  }
  if (ctrl.wqe_index != static_cast<uint16_t>(index) || (ctrl.flags & ~MPR_WQE_F_ALL) ||
      sizeof ctrl + size_t(ctrl.num_ds) * MPR_WQE_SEG_SIZE > stride)
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);

  const uint8_t* seg = wqe + sizeof ctrl;
  const uint8_t* end = seg + size_t(ctrl.num_ds) * MPR_WQE_SEG_SIZE;
  if (qp.ud && !parse_ud(qp, seg, end, m)) return;
  if (has_raddr(m.opcode)) {
    if (end - seg < static_cast<ptrdiff_t>(sizeof(mpr_wqe_raddr)))
      return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
    mpr_wqe_raddr r;
    std::memcpy(&r, seg, sizeof r);
    m.remote_va = r.remote_addr;
    m.rkey = r.rkey;
    seg += sizeof r;
  }
  if (is_atomic(m.opcode)) {
    if (end - seg < static_cast<ptrdiff_t>(sizeof(mpr_wqe_atomic)))
      return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
    mpr_wqe_atomic a;
    std::memcpy(&a, seg, sizeof a);
    m.swap_add = a.swap_add;
    m.compare = a.compare;
    seg += sizeof a;
  }
  if (m.flags & MPR_WQE_F_INLINE) {
    if (m.opcode == MPR_WQE_RDMA_READ || is_atomic(m.opcode) ||
        end - seg < static_cast<ptrdiff_t>(sizeof(mpr_wqe_inline)))
      return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
    mpr_wqe_inline hdr;
    std::memcpy(&hdr, seg, sizeof hdr);
    seg += sizeof hdr;
    if (hdr.byte_count > q->max_inline || hdr.byte_count > static_cast<uint32_t>(end - seg))
      return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
    m.inline_data.assign(seg, seg + hdr.byte_count);
    m.length = hdr.byte_count;
    return;
  }
  const uint32_t need =
      (m.opcode == MPR_WQE_RDMA_READ || is_atomic(m.opcode)) ? MPR_ACCESS_LOCAL_WRITE : 0;
  m.mr_epoch = core_.contexts.mr_epoch();
  // The whole length first: an error CQE reports the WQE's length even when
  // a later SGE fails its check.
  for (const uint8_t* p = seg; p + sizeof(mpr_wqe_data) <= end; p += sizeof(mpr_wqe_data)) {
    mpr_wqe_data d;
    std::memcpy(&d, p, sizeof d);
    m.length += d.byte_count;
  }
  // Longer than the largest message, or (2^31 bytes at MTU 256) of as many
  // packets as half the PSN space, which a 24-bit PSN cannot order.
  if (m.length > MPR_MAX_MSG_SIZE || (m.length + qp.mtu - 1) / qp.mtu >= (1u << 23))
    return bad(MPR_CQE_LOC_LEN_ERR, MPR_SYN_BAD_WQE);
  int nsge = 0;
  for (; seg + sizeof(mpr_wqe_data) <= end; seg += sizeof(mpr_wqe_data)) {
    mpr_wqe_data d;
    std::memcpy(&d, seg, sizeof d);
    ++nsge;
    m.sges.push_back({d.lkey, d.addr, d.byte_count, false, {}});
    const AccessStatus st =
        core_.translation.translate(d.lkey, q->pdn, d.addr, d.byte_count, need, m.local);
    switch (st) {
      case AccessStatus::ok:
        break;
      case AccessStatus::bad_key:
      case AccessStatus::pd_mismatch:
        return bad(MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
      case AccessStatus::bounds:
        return bad(MPR_CQE_LOC_PROT_ERR, MPR_SYN_LKEY_BOUNDS);
      case AccessStatus::access:
        return bad(MPR_CQE_LOC_PROT_ERR, MPR_SYN_LKEY_ACCESS);
    }
  }
  if (nsge > core_.cfg.limits.max_sge) return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE);
  if (is_atomic(m.opcode) && (nsge != 1 || m.length != 8))
    return bad(MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_ATOMIC_ALIGN);
}

bool Requester::local_still_valid(const Qp& qp, Message& m) {
  if (m.mr_epoch == core_.contexts.mr_epoch()) return true;
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  if (!q) return false;
  const uint32_t need =
      (m.opcode == MPR_WQE_RDMA_READ || is_atomic(m.opcode)) ? MPR_ACCESS_LOCAL_WRITE : 0;
  // A region's translation never changes while its key is valid: checking
  // the keys again is enough.
  for (const Message::Sge& d : m.sges)
    if (core_.translation.check(d.lkey, q->pdn, d.addr, d.len, need) != AccessStatus::ok) {
      MPR_LOG(log_, info,
              "QP " << qp.qpn << ": WQE " << m.index << "'s buffer (lkey 0x" << std::hex << d.lkey
                    << std::dec << ") was deregistered while in use");
      return false;
    }
  m.mr_epoch = core_.contexts.mr_epoch();
  return true;
}

void Requester::assign(Qp& qp) {
  if (qp.ud) return assign_ud(qp);
  if (qp.uc) return assign_uc(qp);
  // READ and atomics travel as data (MP-RDMA): see send_read_data.
  const bool as_data = qp.traits.read_as_data;
  bool added = false;
  while (!qp.pending.empty()) {
    Message& m = qp.pending.front();
    if (m.status != MPR_CQE_SUCCESS) {
      // A WQE that failed locally takes no PSN; it completes in its turn.
      m.first_psn = qp.next_psn;
      m.npsn = 0;
      qp.inflight.push_back(std::move(m));
      qp.pending.pop_front();
      break;
    }
    if ((m.flags & MPR_WQE_F_FENCE) && qp.rd_atomic_out > 0) break;
    // MP-RDMA §3.3: a synchronise operation updates memory only after every
    // earlier one completed, a READ's or atomic's once its data are back.
    // The receiver's check sees only that their requests arrived, so the
    // requester holds it until they complete, as a fence would.
    if ((m.flags & MPR_WQE_F_SYNC) && qp.rd_atomic_out > 0 && as_data) break;
    if (m.is_read_or_atomic() && qp.rd_atomic_out >= qp.max_rd_atomic) break;
    m.first_psn = qp.next_psn;
    m.npsn = m.packets(qp.mtu);
    if (m.is_read_or_atomic() && as_data) {
      // The request is one data packet; the responses come in the peer's
      // own stream.
      m.read_as_data = true;
      m.data_left = m.npsn;
      if (const mpr_qpc* q = core_.contexts.qp(qp.qpn)) m.stream_base = q->attr.rq_psn;
      m.resp_got.assign(m.npsn, false);
      m.npsn = 1;
    }
    m.resp_next = m.first_psn;
    if (m.opcode == MPR_WQE_SEND || m.opcode == MPR_WQE_SEND_IMM ||
        m.opcode == MPR_WQE_RDMA_WRITE_IMM)
      m.recv_msn = qp.next_recv_msn++ & kPsnMask;
    if ((m.flags & MPR_WQE_F_SYNC) && qp.active && !qp.error)
      core_.engine.mark_sync(qp.qpn, m.first_psn);
    qp.next_psn = psn_add(qp.next_psn, m.npsn);
    if (m.is_read_or_atomic()) ++qp.rd_atomic_out;
    qp.inflight.push_back(std::move(m));
    qp.pending.pop_front();
    added = true;
  }
  if (added && qp.active && !qp.error) {
    core_.engine.set_snd_max(qp.qpn, qp.next_psn, core_.now_cycle());
    core_.tx.activate(qp.qpn);
  }
}

Requester::Message* Requester::message_at(Qp& qp, uint32_t psn) {
  for (Message& m : qp.inflight)
    if (m.npsn && psn_diff(psn, m.first_psn) >= 0 &&
        psn_diff(psn, psn_add(m.first_psn, m.npsn)) < 0)
      return &m;
  return nullptr;
}

uint32_t Requester::ack_limit(const Qp& qp) const {
  for (const Message& m : qp.inflight)
    if (m.npsn && m.is_read_or_atomic() && !m.read_as_data &&
        m.resp_next != psn_add(m.first_psn, m.npsn))
      return m.resp_next;
  return qp.next_psn;
}

bool Requester::missing_responses(const Qp& qp, uint32_t end, std::vector<uint32_t>& psns) const {
  bool atomic = false;
  for (const Message& m : qp.inflight) {
    if (!m.npsn || !m.is_read_or_atomic()) continue;
    if (psn_diff(m.first_psn, end) >= 0) break;
    for (uint32_t i = 0; i < m.npsn; ++i) {
      const uint32_t p = psn_add(m.first_psn, i);
      if (psn_diff(p, end) >= 0) break;
      const bool got =
          m.resp_got.size() == m.npsn ? m.resp_got[i] != 0 : psn_diff(p, m.resp_next) < 0;
      if (got) continue;
      psns.push_back(p);
      atomic |= m.opcode != MPR_WQE_RDMA_READ;
    }
  }
  return atomic;
}

void Requester::queue_read_ack(Qp& qp, const AckExt& ack) {
  if (!ack.nack && !qp.read_acks.empty() && !qp.read_acks.back().nack)
    qp.read_acks.back() = ack;
  else
    qp.read_acks.push_back(ack);
  core_.tx.activate(qp.qpn);
}

bool Requester::emit_read_ack(Qp& qp) {
  // An ACKNOWLEDGE with the ACK trailer's READ flag, from the requester to
  // the responder's QP; not paced (a control packet, like an ACK).
  const AckExt a = qp.read_acks.front();
  qp.read_acks.pop_front();
  net::RoceFields f = qp.base;
  f.opcode = net::Opcode::ACKNOWLEDGE;
  f.psn = a.aack;
  f.aeth_syndrome = net::aeth_ack(0x1f);
  f.aeth_msn = 0;
  net::MpAckExt x;
  x.echo_vp = a.echo_vp;
  x.sack = a.sack;
  x.aack = a.aack;
  x.nack = a.nack;
  x.read = true;
  uint8_t trailer[net::kMpAckExtBytes];
  net::put_mp_ack_ext(trailer, x);
  f.trailer_len = net::kMpAckExtBytes;
  const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
  core_.tx.fill(slot, net::build_roce(f, trailer, sizeof trailer));
  ++read_acks_tx_;
  return true;
}

bool Requester::try_emit(uint32_t qpn) {
  Qp* qp = find(qpn);
  if (!qp || !sending(*qp) || qp->error) return false;
  if (qp->ud) return emit_ud(*qp);
  if (qp->uc) return emit_uc(*qp);
  if (!qp->read_acks.empty()) return emit_read_ack(*qp);
  const uint64_t now = core_.now_cycle();
  if (qp->rp) {
    // DCQCN pacing: not before the previous packet's start + its wire time
    // at the current rate. A wake-up activates the QP again then.
    const uint64_t at = qp->rp->tx_allowed_at();
    if (at > now) {
      schedule_pace(*qp, at);
      return false;
    }
  }
  const TxGrant g = core_.engine.next_tx(qpn, now);
  if (!g.send) {
    if (g.held_until) schedule_wake(*qp);  // ask again when the engine lets it go
    return false;
  }
  Message* m = message_at(*qp, g.psn);
  if (!m) {
    MPR_LOG(log_, error, "QP " << qpn << ": engine granted PSN " << g.psn << " without a message");
    return false;
  }
  const uint32_t k = static_cast<uint32_t>(psn_diff(g.psn, m->first_psn));
  const uint32_t mtu = qp->mtu;
  net::RoceFields f = qp->base;
  f.udp_sport = g.udp_sport;
  f.psn = g.psn;
  uint32_t npsn = 1;
  uint64_t offset = 0;
  uint32_t plen = 0;
  using net::Opcode;
  const bool first = k == 0, last = k + 1 == m->npsn;
  switch (m->opcode) {
    case MPR_WQE_SEND:
    case MPR_WQE_SEND_IMM:
    case MPR_WQE_RDMA_WRITE:
    case MPR_WQE_RDMA_WRITE_IMM: {
      const bool send = m->opcode == MPR_WQE_SEND || m->opcode == MPR_WQE_SEND_IMM;
      const bool imm = m->opcode == MPR_WQE_SEND_IMM || m->opcode == MPR_WQE_RDMA_WRITE_IMM;
      offset = uint64_t(k) * mtu;
      plen = static_cast<uint32_t>(std::min<uint64_t>(mtu, m->length - offset));
      if (first && last)
        f.opcode = send ? (imm ? Opcode::SEND_ONLY_WITH_IMMEDIATE : Opcode::SEND_ONLY)
                        : (imm ? Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE : Opcode::RDMA_WRITE_ONLY);
      else if (first)
        f.opcode = send ? Opcode::SEND_FIRST : Opcode::RDMA_WRITE_FIRST;
      else if (last)
        f.opcode = send ? (imm ? Opcode::SEND_LAST_WITH_IMMEDIATE : Opcode::SEND_LAST)
                        : (imm ? Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE : Opcode::RDMA_WRITE_LAST);
      else
        f.opcode = send ? Opcode::SEND_MIDDLE : Opcode::RDMA_WRITE_MIDDLE;
      if (!send && qp->traits.out_of_order) {
        // Any packet may arrive first: each is a WRITE ONLY with the address
        // and length of its own payload; the immediate rides on the tail.
        f.opcode = imm && last ? Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE : Opcode::RDMA_WRITE_ONLY;
        f.reth_va = m->remote_va + offset;
        f.reth_rkey = m->rkey;
        f.reth_dma_len = plen;
      } else if (!send && first) {
        f.reth_va = m->remote_va;
        f.reth_rkey = m->rkey;
        f.reth_dma_len = static_cast<uint32_t>(m->length);
      }
      if (imm && last) f.imm = __builtin_bswap32(m->imm);
      if (last) {
        f.ack_req = true;
        f.solicited = (m->flags & MPR_WQE_F_SOLICITED) && (send || imm);
      }
      break;
    }
    case MPR_WQE_RDMA_READ:
      if (m->read_as_data) {
        // One data packet asking for the whole READ, sent again whole if
        // it is lost (the responder queues its responses once).
        f.opcode = Opcode::RDMA_READ_REQUEST;
        f.reth_va = m->remote_va;
        f.reth_rkey = m->rkey;
        f.reth_dma_len = static_cast<uint32_t>(m->length);
        f.ack_req = true;
        break;
      }
      // A retried READ asks only for the responses still missing: from the
      // PSN on (go-back-N), or that one response (selective retransmission
      // of an out-of-order engine).
      f.opcode = Opcode::RDMA_READ_REQUEST;
      f.reth_va = m->remote_va + uint64_t(k) * mtu;
      f.reth_rkey = m->rkey;
      f.reth_dma_len =
          static_cast<uint32_t>(m->length - std::min<uint64_t>(m->length, uint64_t(k) * mtu));
      npsn = m->npsn - k;
      if (g.retransmit && qp->traits.out_of_order) {
        f.reth_dma_len = std::min<uint32_t>(f.reth_dma_len, mtu);
        npsn = 1;
      }
      f.ack_req = true;
      break;
    case kReadDataOpcode:
      // Response k of the peer's READ, a data packet of this stream.
      offset = uint64_t(k) * mtu;
      plen =
          static_cast<uint32_t>(std::min<uint64_t>(mtu, m->length - std::min(m->length, offset)));
      f.opcode = first && last ? Opcode::RDMA_READ_RESPONSE_ONLY
                 : first       ? Opcode::RDMA_READ_RESPONSE_FIRST
                 : last        ? Opcode::RDMA_READ_RESPONSE_LAST
                               : Opcode::RDMA_READ_RESPONSE_MIDDLE;
      f.aeth_syndrome = net::aeth_ack(0x1f);
      f.aeth_msn = 0;
      break;
    case kAtomicDataOpcode:
      // The original value of the peer's atomic, one packet of this stream.
      f.opcode = Opcode::ATOMIC_ACKNOWLEDGE;
      f.aeth_syndrome = net::aeth_ack(0x1f);
      f.aeth_msn = 0;
      std::memcpy(&f.atomic_ack_orig, m->inline_data.data(), sizeof f.atomic_ack_orig);
      break;
    case MPR_WQE_ATOMIC_CAS:
    case MPR_WQE_ATOMIC_FA:
      f.opcode = m->opcode == MPR_WQE_ATOMIC_CAS ? Opcode::COMPARE_SWAP : Opcode::FETCH_ADD;
      f.atomic_va = m->remote_va;
      f.atomic_rkey = m->rkey;
      f.atomic_swap_add = m->swap_add;
      f.atomic_compare = m->compare;
      f.ack_req = true;
      break;
  }
  // The packet an RTT sample times asks for its ACK at once: behind a
  // coalesced ACK the sample would include the pacing gaps of the packets
  // sent after it, and a slowly paced QP's samples would only grow (TIMELY
  // measures a segment's completion, not its neighbours').
  const bool timed = rtt_samples_ && qp->rp && !qp->rtt_armed && !g.retransmit && !m->answers_read;
  if (timed) f.ack_req = true;
  std::vector<uint8_t> trailer;
  if (qp->traits.trailer_bytes(f.opcode)) {
    build_ooo(*m, k, g.retransmit, trailer);
    f.trailer_len = static_cast<uint32_t>(trailer.size());  // a READ request has no payload else
  }
  // READ as data: the source of this response is translated as it leaves;
  // a region deregistered since the peer's READ was accepted is never read.
  std::vector<Segment> answer_segs;
  if (m->answers_read && plen && m->inline_data.empty()) {
    const mpr_qpc* q = core_.contexts.qp(qpn);
    if (!q ||
        core_.translation.translate(m->rkey, q->pdn, m->remote_va + offset, plen,
                                    MPR_ACCESS_REMOTE_READ, answer_segs) != AccessStatus::ok) {
      if (!responder_) return false;
      // The responder NAKs the READ and fails the QP; its NAK goes now.
      responder_->read_source_fault(qpn, m->read_psn, /*revoked=*/true);
      return responder_->try_emit(qpn);
    }
  }
  if (!m->answers_read && plen && m->inline_data.empty() && !local_still_valid(*qp, *m)) {
    fail(*qp, m, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
    return false;
  }
  if (m->answers_read && last) m->answer_left = true;
  core_.engine.on_sent(qpn, g.psn, npsn, now);
  if (!m->answers_read) path_rtt_sent(*qp, g.psn, g.retransmit, now);
  if (qp->rp) {
    note_paced(*qp, net::roce_wire_bytes(f.opcode, plen + trailer.size()), now);
    if (timed) sample_rtt_sent(*qp, g.psn, now);
  }
  if (m->answers_read) {
    ++read_data_tx_;
  } else {
    ++packets_;
    if (g.retransmit) ++retransmits_;
  }
  const TxScheduler::Slot slot = core_.tx.reserve(f);  // sets f.ip_id
  if (plen == 0 || !m->inline_data.empty()) {
    const uint8_t* payload = plen ? m->inline_data.data() + offset : nullptr;
    if (trailer.empty()) {
      core_.tx.fill(slot, net::build_roce(f, payload, plen));
    } else {
      std::vector<uint8_t> body(payload, payload + plen);
      body.insert(body.end(), trailer.begin(), trailer.end());
      core_.tx.fill(slot, net::build_roce(f, body.data(), body.size()));
    }
  } else {
    std::vector<Segment> segs;
    if (m->answers_read)
      segs = std::move(answer_segs);
    else
      slice_segments(m->local, offset, plen, segs);
    const uint64_t gen = qp->generation;
    const uint32_t index = m->index;
    const bool answers = m->answers_read;
    const uint32_t read_psn = m->read_psn;
    core_.dma.gather(segs, DmaPurpose::payload,
                     [this, f, slot, qpn, gen, index, answers, read_psn, trailer](
                         bool ok, std::vector<uint8_t>&& data) {
                       if (ok) {
                         data.insert(data.end(), trailer.begin(), trailer.end());
                         core_.tx.fill(slot, net::build_roce(f, data.data(), data.size()));
                         return;
                       }
                       core_.tx.cancel(slot);
                       Qp* q = find(qpn);
                       if (!q || q->generation != gen) return;
                       if (answers) {
                         if (responder_) responder_->read_source_fault(qpn, read_psn, false);
                         return;
                       }
                       for (Message& msg : q->inflight)
                         if (msg.index == index)
                           return fail(*q, &msg, MPR_CQE_LOC_PROT_ERR, MPR_SYN_DMA_FAULT);
                     });
  }
  schedule_wake(*qp);
  return true;
}

void Requester::on_response(net::PacketPtr pkt, const net::RoceFields& f) {
  const uint32_t qpn = f.dest_qp;
  // A response carries the trailer its QP's engine puts on the opcode, or
  // it comes from a peer running another transport.
  if (f.trailer_len != core_.engine.traits_of(qpn).trailer_bytes(f.opcode)) {
    ++bad_responses_;
    return;
  }
  // The ACK trailer of an out-of-order connection, read once.
  const bool has_ext = f.trailer_len == net::kMpAckExtBytes;
  net::MpAckExt x;
  if (has_ext && !net::get_mp_ack_ext(net::trailer_of(pkt->data.data(), f), x)) {
    ++bad_responses_;
    return;
  }
  const AckExt ext{x.echo_vp, x.sack, x.aack, x.ece, x.retx, x.nack};
  if (has_ext && x.read) {
    // A Read (N)ACK is for this QP's responder, whatever the state of its
    // requester (a QP in RTR answers READs without sending requests).
    if (f.opcode != net::Opcode::ACKNOWLEDGE || !core_.engine.traits_of(qpn).explicit_read_acks) {
      ++bad_responses_;
      return;
    }
    ++read_acks_rx_;
    calendar_.at(core_.clock.after_cycles(static_cast<uint64_t>(core_.cfg.latency.ack_process)),
                 [this, qpn, ext] {
                   if (responder_) responder_->on_read_ack(qpn, ext);
                 });
    return;
  }
  Qp* qp = find(qpn);
  if (!qp || !sending(*qp) || qp->error || qp->ud || qp->uc) {
    ++bad_responses_;
    return;
  }
  const uint64_t gen = qp->generation;
  // DCQCN notification point for the data this QP receives as READ
  // responses: a CE mark asks the responder for a CNP to their sender.
  if (f.ecn == 3 && responder_ && is_read_response(f.opcode) && !qp->traits.own_congestion_control)
    responder_->response_ce(qpn);
  // ACK processing costs ack_process cycles before its effects are visible.
  std::shared_ptr<net::Packet> held(std::move(pkt));
  calendar_.at(
      core_.clock.after_cycles(static_cast<uint64_t>(core_.cfg.latency.ack_process)),
      [this, qpn, gen, held, f, has_ext, ext] {
        Qp* q = find(qpn);
        if (!q || q->generation != gen || !sending(*q) || q->error) return;
        using net::Opcode;
        AckEvent ev;
        ev.psn = f.psn;
        ev.ack_limit = ack_limit(*q);
        ev.egress_backlog = static_cast<uint32_t>(core_.tx.backlog());
        if (has_ext) {
          ev.has_ext = true;
          ev.ext = ext;
          const uint32_t end = psn_add(ext.aack, 1);
          // Only engines that answer READ/atomics themselves read it (IRN),
          // with or without explicit READ acknowledgements.
          if (f.opcode == Opcode::ACKNOWLEDGE && q->traits.carries_read_atomic &&
              psn_diff(end, ev.ack_limit) > 0)
            ev.missing_atomic = missing_responses(*q, end, ev.missing_responses);
        }
        Message* subject = nullptr;
        uint8_t fatal_status = MPR_CQE_REM_INV_REQ_ERR, fatal_syn = MPR_SYN_NAK_INV_REQ;
        switch (f.opcode) {
          case Opcode::ACKNOWLEDGE:
            switch (net::aeth_kind(f.aeth_syndrome)) {
              case net::AethKind::ack:
                ++acks_;
                ev.kind = AckEvent::Kind::ack;
                break;
              case net::AethKind::rnr_nak:
                ++naks_;
                ev.kind = AckEvent::Kind::nak_rnr;
                ev.rnr_delay_cycles = rnr_timer_ps(f.aeth_syndrome & 0x1f) / core_.cfg.period_ps();
                break;
              case net::AethKind::nak:
                ++naks_;
                if ((f.aeth_syndrome & 0x1f) == static_cast<uint8_t>(net::NakCode::psn_seq_error)) {
                  ev.kind = AckEvent::Kind::nak_sequence;
                } else {
                  ev.kind = AckEvent::Kind::nak_fatal;
                  nak_status(f.aeth_syndrome & 0x1f, fatal_status, fatal_syn);
                  subject = message_at(*q, f.psn);
                  // A fatal NAK names the request it refuses. One that names no
                  // outstanding request (already acknowledged, or never sent: a
                  // stale duplicate or a forged frame) is a response to nothing,
                  // dropped like a READ response for no READ; taking it would
                  // fail the QP with flushes only, no error and no event.
                  if (!subject) {
                    ++bad_responses_;
                    MPR_LOG(log_, debug,
                            "QP " << qpn << ": fatal NAK for PSN " << f.psn
                                  << ", no outstanding request: dropped");
                    return;
                  }
                }
                break;
              default:
                ++bad_responses_;
                return;
            }
            break;
          case Opcode::RDMA_READ_RESPONSE_FIRST:
          case Opcode::RDMA_READ_RESPONSE_MIDDLE:
          case Opcode::RDMA_READ_RESPONSE_LAST:
          case Opcode::RDMA_READ_RESPONSE_ONLY:
            ev.kind = AckEvent::Kind::read_response;
            subject = message_at(*q, f.psn);
            if (!subject || subject->opcode != MPR_WQE_RDMA_READ) {
              ++bad_responses_;
              return;
            }
            break;
          case Opcode::ATOMIC_ACKNOWLEDGE:
            ev.kind = AckEvent::Kind::atomic_ack;
            subject = message_at(*q, f.psn);
            if (!subject || !is_atomic(subject->opcode)) {
              ++bad_responses_;
              return;
            }
            break;
          default:
            ++bad_responses_;
            return;
        }
        const AckResult r = core_.engine.on_ack(qpn, ev, core_.now_cycle());
        sample_rtt_acked(*q, r.rewound, core_.now_cycle());
        path_rtt_acked(*q, r.rewound, core_.now_cycle());
        if (r.rewound)
          MPR_LOG(log_, debug,
                  "QP " << qpn << ": " << core_.engine.name_of(qpn) << " goes back on "
                        << ack_kind_name(ev.kind) << " PSN " << f.psn << ", snd_una "
                        << core_.engine.snd_una(qpn) << ", snd_nxt " << core_.engine.snd_nxt(qpn));
        if (r.send_read_ack) queue_read_ack(*q, r.read_ack);
        if (r.accept && subject) {
          if (ev.kind == AckEvent::Kind::read_response) {
            place_read(*q, *subject, f, *held);
            if (q->error) return;
          } else {
            if (!local_still_valid(*q, *subject))
              return fail(*q, subject, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
            const uint64_t orig = f.atomic_ack_orig;
            core_.dma.scatter(subject->local, reinterpret_cast<const uint8_t*>(&orig),
                              DmaPurpose::atomic);
            response_arrived(qpn, *subject, f.psn);
          }
        }
        if (r.error != AckResult::Error::none) {
          if (r.error == AckResult::Error::fatal_nak) {
            fail(*q, subject, fatal_status, fatal_syn);
          } else {
            Message* oldest = q->inflight.empty() ? nullptr : &q->inflight.front();
            const bool rnr = r.error == AckResult::Error::rnr_exceeded;
            fail(*q, oldest, uint8_t(rnr ? MPR_CQE_RNR_RETRY_EXC_ERR : MPR_CQE_RETRY_EXC_ERR),
                 uint8_t(rnr ? MPR_SYN_RNR_EXCEEDED : MPR_SYN_RETRY_EXCEEDED));
          }
          return;
        }
        if (r.progress) retire(*q);
        if (Qp* again = find(qpn); again && again->generation == gen && !again->error) {
          if (r.progress || r.rewound || r.tx_ready) core_.tx.activate(qpn);
          schedule_wake(*again);
        }
      });
}

void Requester::place_read(Qp& qp, Message& m, const net::RoceFields& f, const net::Packet& pkt) {
  const uint32_t k = static_cast<uint32_t>(psn_diff(f.psn, m.first_psn));
  const uint64_t offset = uint64_t(k) * qp.mtu;
  const uint32_t expect = static_cast<uint32_t>(std::min<uint64_t>(qp.mtu, m.length - offset));
  using net::Opcode;
  const bool first = k == 0, last = k + 1 == m.npsn;
  const Opcode want = first && last ? Opcode::RDMA_READ_RESPONSE_ONLY
                      : first       ? Opcode::RDMA_READ_RESPONSE_FIRST
                      : last        ? Opcode::RDMA_READ_RESPONSE_LAST
                                    : Opcode::RDMA_READ_RESPONSE_MIDDLE;
  // A retried READ restarts with FIRST (or ONLY) at any PSN of the message;
  // with an out-of-order engine a re-requested response is an ONLY.
  const bool restart_ok = (f.opcode == Opcode::RDMA_READ_RESPONSE_FIRST && !last) ||
                          (f.opcode == Opcode::RDMA_READ_RESPONSE_ONLY && last) ||
                          (f.opcode == Opcode::RDMA_READ_RESPONSE_ONLY && qp.traits.out_of_order);
  if (f.payload_len != expect || (f.opcode != want && !restart_ok)) {
    ++bad_responses_;
    fail(qp, &m, MPR_CQE_BAD_RESP_ERR, MPR_SYN_BAD_RESPONSE);
    return;
  }
  if (!local_still_valid(qp, m)) return fail(qp, &m, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY);
  std::vector<Segment> segs;
  slice_segments(m.local, offset, expect, segs);
  core_.dma.scatter(segs, pkt.data.data() + f.payload_offset, DmaPurpose::payload);
  response_arrived(qp.qpn, m, f.psn);
}

void Requester::response_arrived(uint32_t qpn, Message& m, uint32_t psn) {
  if (!core_.engine.traits_of(qpn).out_of_order) {
    m.resp_next = psn_add(psn, 1);
    return;
  }
  if (m.resp_got.size() != m.npsn) m.resp_got.assign(m.npsn, false);
  const int32_t k = psn_diff(psn, m.first_psn);
  if (k >= 0 && static_cast<uint32_t>(k) < m.npsn) m.resp_got[static_cast<size_t>(k)] = true;
  uint32_t i = static_cast<uint32_t>(psn_diff(m.resp_next, m.first_psn));
  while (i < m.npsn && m.resp_got[i]) ++i;
  m.resp_next = psn_add(m.first_psn, i);
}

void Requester::build_ooo(const Message& m, uint32_t k, bool retx,
                          std::vector<uint8_t>& trailer) const {
  const bool last = k + 1 == m.npsn;
  net::MpDataExt x;
  x.ipsn = k;
  x.retx = retx;
  x.sync = (m.flags & MPR_WQE_F_SYNC) != 0;
  x.tail = last;
  // A response: its READ's PSN. A READ request: where this QP's receiver
  // expects the peer's stream to begin (for a peer that answers from RTR).
  x.msn = m.answers_read ? m.read_psn : m.read_as_data ? m.stream_base : m.recv_msn;
  trailer.resize(net::kMpDataExtBytes);
  net::put_mp_data_ext(trailer.data(), x);
}

void Requester::retire(Qp& qp) {
  if (qp.error) return;
  if (qp.ud || qp.uc) return retire_unacked(qp);
  const uint32_t una = sending(qp) ? core_.engine.snd_una(qp.qpn) : qp.next_psn;
  bool retired = false;
  while (!qp.inflight.empty()) {
    Message& m = qp.inflight.front();
    if (m.npsn == 0) {
      fail(qp, &m, m.status, m.syndrome);
      return;
    }
    if (psn_diff(una, psn_add(m.first_psn, m.npsn)) < 0) break;
    if (m.answers_read) {  // all acknowledged: nothing to complete
      qp.inflight.pop_front();
      retired = true;
      continue;
    }
    if (m.data_left) {  // READ as data: responses still missing
      watch_answers(qp, m.first_psn, false);
      break;
    }
    if (m.flags & MPR_WQE_F_SIGNALED) complete(qp, m, MPR_CQE_SUCCESS, MPR_SYN_NONE);
    if (m.is_read_or_atomic()) --qp.rd_atomic_out;
    ++wqes_;
    qp.inflight.pop_front();
    retired = true;
  }
  if (retired) {
    assign(qp);
    if (!qp.inflight.empty() && qp.inflight.front().npsn == 0) return retire(qp);
    fetch(qp);
  }
}

void Requester::complete(const Qp& qp, const Message& m, uint8_t status, uint8_t syndrome) {
  mpr_cqe cqe{};
  cqe.byte_len = static_cast<uint32_t>(m.length);
  cqe.qpn = qp.qpn;
  cqe.wqe_index = static_cast<uint16_t>(m.index);
  cqe.opcode = cqe_opcode(m.opcode);
  cqe.status = status;
  cqe.syndrome = syndrome;
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  if (q) core_.cq.post_cqe(q->send_cqn, cqe, false);
}

void Requester::fail(Qp& qp, const Message* culprit, uint8_t status, uint8_t syndrome) {
  if (qp.error) return;
  qp.error = true;
  qp.active = false;
  qp.answering = false;
  qp.generation = ++generation_;  // outstanding DMA and timers of the QP are void
  qp.wake_at = kNever;
  if (culprit && status != MPR_CQE_WR_FLUSH_ERR)
    MPR_LOG(log_, info,
            "QP " << qp.qpn << " to ERR: WQE " << culprit->index << " status " << int(status)
                  << " syndrome " << int(syndrome));
  if (mpr_qpc* q = core_.contexts.qp(qp.qpn)) {
    q->state = MPR_QPS_ERR;
    q->attr.qp_state = MPR_QPS_ERR;
  }
  for (const Qp::Unacked& u : qp.unacked) {  // UD, UC: sent, not yet completed
    Message m;
    m.index = u.index;
    m.opcode = u.opcode;
    m.length = u.length;
    complete(qp, m, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
  }
  qp.unacked.clear();
  if (culprit && culprit->answers_read) {
    // The responses to the peer's READ failed (retries exhausted): the
    // oldest WQE, if any, carries the status.
    culprit = nullptr;
    for (auto* list : {&qp.inflight, &qp.pending})
      for (const Message& m : *list)
        if (!culprit && !m.answers_read) culprit = &m;
  }
  for (auto* list : {&qp.inflight, &qp.pending})
    for (const Message& m : *list) {
      if (m.answers_read) continue;  // no WQE of this QP
      if (m.uc_next) continue;       // UC, partly sent: flushed with `unacked` above
      const bool guilty = &m == culprit;
      complete(qp, m, guilty ? status : uint8_t{MPR_CQE_WR_FLUSH_ERR},
               guilty ? syndrome : uint8_t{MPR_SYN_FLUSHED});
    }
  qp.inflight.clear();
  qp.pending.clear();
  qp.rd_atomic_out = 0;
  qp.fetching = false;
  flush_new(qp);
  if (responder_) responder_->qp_to_error(qp.qpn);
}

void Requester::flush_new(Qp& qp) {
  for (; qp.fetch_idx != qp.sq_pi; ++qp.fetch_idx) {
    Message m;
    m.index = qp.fetch_idx;
    m.opcode = MPR_WQE_SEND;
    complete(qp, m, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED);
  }
}

void Requester::on_cnp(const net::RoceFields& f) {
  if (!cnp_rx_) return;  // the NIC's rate control takes no CNPs
  ++*cnp_rx_;
  // Also a QP in RTR: its READ responses are paced by the same limiter.
  Qp* qp = limited(f.dest_qp);
  if (!qp) return;
  const uint64_t cuts = qp->rp->cuts();
  qp->rp->on_cnp(core_.now_cycle());
  rate_cuts_->add(qp->rp->cuts() - cuts);
  qp->rate_gauge->set(static_cast<uint64_t>(qp->rp->rate_bps() / 1e6));
  MPR_LOG(log_, debug, "QP " << qp->qpn << ": CNP, " << qp->rp->state());
}

void Requester::sample_rtt_sent(Qp& qp, uint32_t psn, uint64_t now) {
  if (!rtt_samples_ || !qp.rp || qp.rtt_armed) return;
  qp.rtt_armed = true;
  qp.rtt_psn = psn;
  qp.rtt_sent = now;
}

void Requester::sample_rtt_acked(Qp& qp, bool rewound, uint64_t now) {
  if (!qp.rtt_armed) return;
  if (rewound) {  // Karn: a go-back may resend the timed packet
    qp.rtt_armed = false;
    return;
  }
  if (psn_diff(core_.engine.snd_una(qp.qpn), qp.rtt_psn) <= 0) return;
  qp.rtt_armed = false;
  ++*rtt_samples_;
  const uint64_t cuts = qp.rp->cuts();
  qp.rp->on_rtt(now - qp.rtt_sent, now);
  rate_cuts_->add(qp.rp->cuts() - cuts);
  qp.rate_gauge->set(static_cast<uint64_t>(qp.rp->rate_bps() / 1e6));
  MPR_LOG(log_, debug,
          "QP " << qp.qpn << ": RTT " << now - qp.rtt_sent << " cycles, " << qp.rp->state());
}

void Requester::path_rtt_sent(Qp& qp, uint32_t psn, bool retransmit, uint64_t now) {
  if (retransmit) {
    qp.path_rtt_armed = false;  // its ACK could be the first copy's
    return;
  }
  if (qp.path_rtt_armed) return;
  qp.path_rtt_armed = true;
  qp.path_rtt_psn = psn;
  qp.path_rtt_sent = now;
}

void Requester::path_rtt_acked(Qp& qp, bool rewound, uint64_t now) {
  if (!qp.path_rtt_armed) return;
  if (rewound) {
    qp.path_rtt_armed = false;
    return;
  }
  if (psn_diff(core_.engine.snd_una(qp.qpn), qp.path_rtt_psn) <= 0) return;
  qp.path_rtt_armed = false;
  rtt_ns_.record(static_cast<double>((now - qp.path_rtt_sent) * core_.cfg.period_ps()) / 1000.0);
}

void Requester::schedule_pace(Qp& qp, uint64_t at) {
  if (paced_) ++*paced_;
  if (at >= qp.pace_at) return;  // an earlier wake-up is pending
  qp.pace_at = at;
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  calendar_.at(core_.clock.cycles(at), [this, qpn, gen, at] {
    Qp* q = find(qpn);
    if (!q || q->generation != gen || q->pace_at != at) return;
    q->pace_at = kNever;
    // The QP's turn: its requester, or its responder's READ responses (a QP
    // in RTR has only those).
    if (!q->error) core_.tx.activate(qpn);
  });
}

void Requester::schedule_wake(Qp& qp) {
  const uint64_t t = core_.engine.wake_at(qp.qpn);
  if (t == kNever || t >= qp.wake_at) return;
  qp.wake_at = t;
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  const sc_core::sc_time when = std::max(core_.clock.cycles(t), sc_core::sc_time_stamp());
  calendar_.at(when, [this, qpn, gen, t] {
    Qp* q = find(qpn);
    if (!q || q->generation != gen || q->wake_at != t) return;
    q->wake_at = kNever;
    if (!sending(*q) || q->error) return;
    const AckResult r = core_.engine.on_timer(qpn, core_.now_cycle());
    if (r.rewound) {
      ++timeouts_;
      MPR_LOG(log_, debug,
              "QP " << qpn << ": " << core_.engine.name_of(qpn)
                    << " retransmission timeout, snd_una " << core_.engine.snd_una(qpn)
                    << ", snd_nxt " << core_.engine.snd_nxt(qpn)
                    << (r.error != AckResult::Error::none ? ", retries exhausted" : ""));
    }
    if (r.error != AckResult::Error::none) {
      fail(*q, q->inflight.empty() ? nullptr : &q->inflight.front(), MPR_CQE_RETRY_EXC_ERR,
           MPR_SYN_RETRY_EXCEEDED);
      return;
    }
    core_.tx.activate(qpn);
    schedule_wake(*q);
  });
}

void Requester::watch_answers(Qp& qp, uint32_t head_psn, bool progress) {
  // The QP's transport retry budget, as for an unacknowledged request: the
  // local ACK timeout once per try. (MP-RDMA recovers lost answers in the
  // peer's stream; this only bounds a READ whose request the peer took for
  // something else, e.g. a frame corrupted with valid checksums.)
  const mpr_qpc* q = core_.contexts.qp(qp.qpn);
  const uint64_t timeout_ps = q ? ack_timeout_ps(q->attr.timeout) : 0;
  if (timeout_ps == 0) return;  // timeout 0: wait for ever, as for ACKs
  const uint64_t budget = timeout_ps * (uint64_t{q->attr.retry_cnt} + 1) / core_.cfg.period_ps();
  const uint64_t now = core_.now_cycle();
  if (qp.answers_due == kNever || progress || qp.answers_for != head_psn)
    qp.answers_due = now + budget;
  qp.answers_for = head_psn;
  if (qp.answers_check_at != kNever) return;  // the pending check re-reads the due time
  qp.answers_check_at = qp.answers_due;
  const uint32_t qpn = qp.qpn;
  const uint64_t gen = qp.generation;
  const uint64_t at = qp.answers_check_at;
  calendar_.at(core_.clock.cycles(at), [this, qpn, gen, at] { check_answers(qpn, gen, at); });
}

void Requester::check_answers(uint32_t qpn, uint64_t gen, uint64_t at) {
  Qp* q = find(qpn);
  if (!q || q->generation != gen || q->answers_check_at != at) return;
  q->answers_check_at = kNever;
  if (q->error || q->inflight.empty() || !q->inflight.front().data_left) {
    q->answers_due = kNever;  // answered (or failed) meanwhile
    return;
  }
  if (q->answers_due > at || q->answers_for != q->inflight.front().first_psn) {
    // Answers arrived since, or this is a later WQE: look again then.
    watch_answers(*q, q->inflight.front().first_psn, false);
    return;
  }
  const Message& m = q->inflight.front();
  MPR_LOG(log_, info,
          "QP " << qpn << ": " << m.data_left << " answers of WQE " << m.index << " (PSN "
                << m.first_psn << ") never came; retries exhausted");
  fail(*q, &m, MPR_CQE_RETRY_EXC_ERR, MPR_SYN_RETRY_EXCEEDED);
}

}  // namespace mprdma::nic
