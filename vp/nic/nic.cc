#include "vp/nic/nic.h"

#include <cstring>
#include <stdexcept>

#include "vp/net/cnp.h"
#include "vp/net/mp_ext.h"
#include "vp/nic/rc_opcodes.h"
#include "vp/nic/transport/engine_registry.h"
#include "vp/nic/transport/transport_mux.h"
#include "vp/nic/uarch/sram_budget.h"

namespace mprdma::nic {

namespace {

// The NIC's engines: every registered engine it offers (nic.transport,
// nic.qp_transports and the always-offered one), each QP routed to its own
// (TransportMux).
std::unique_ptr<TransportMux> make_transport(const NicConfig& cfg, core::SimEnv& env) {
  const EngineRegistry& reg = EngineRegistry::instance();
  std::vector<TransportMux::Offered> offered;
  for (const EngineEntry& e : reg.entries()) {
    if (!cfg.offers(e.name)) continue;
    TransportMux::Offered o;
    o.kinds = e.also_kinds;
    o.kinds.insert(o.kinds.begin(), e.kind);
    o.engine = reg.make(e.name, e.name == cfg.transport ? cfg.transport_impl : "model", cfg, env);
    offered.push_back(std::move(o));
  }
  return std::make_unique<TransportMux>(
      std::move(offered), NicConfig::transport_kind(cfg.transport),
      ContextMemory::qpn_index_bits_for(cfg.limits, cfg.handles.qpn == QpnPolicy::random));
}

}  // namespace

Nic::Nic(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env)
    : sc_core::sc_module(name),
      cfg_(cfg),
      env_(env),
      clock_(cfg.period_ps()),
      log_(core::Log::channel("nic." + cfg.name)),
      engine_(make_transport(cfg_, env)),
      rate_control_(make_rate_control(cfg_)),
      contexts_(cfg_.limits, Icm::qpc_entry_bytes(engine_->state_bytes()),
                HandlePolicy{static_cast<uint32_t>(cfg_.handles.key_random_bits),
                             cfg_.handles.qpn == QpnPolicy::random,
                             env.random.stream("nic." + cfg.name + ".handles").next_u64()}),
      translation_(contexts_),
      dma_port_("dma"),
      dma_(dma_port_, env, "nic." + cfg.name + "."),
      hostif_("hostif", cfg_, env, dma_port_,
              HostInterface::Callbacks{
                  [this] { on_reset(); }, [this] { cp_.on_aq_enable_changed(); },
                  [this] { cp_.on_aq_doorbell(); },
                  [this](uint32_t page, uint32_t off, uint64_t v) { on_uar(page, off, v); },
                  [this](uint32_t page, uint32_t off, std::vector<uint8_t> bytes) {
                    on_uar_wqe(page, off, std::move(bytes));
                  }}),
      cq_("cq", cfg_, env, clock_, dma_, hostif_, contexts_),
      pus_(cfg_, clock_, env),
      // A QPC line: struct mpr_qpc and the engine's per-connection state.
      qpc_cache_("qpc", IcmTable::qpc,
                 static_cast<uint32_t>(sizeof(mpr_qpc) + engine_->state_bytes()), cfg_.cache.qpc,
                 contexts_.icm(), dma_, env, cfg_.name),
      tcache_(cfg_, contexts_, dma_, env),
      cqc_cache_("cqc", IcmTable::cqc, static_cast<uint32_t>(sizeof(mpr_cqc)), cfg_.cache.cqc,
                 contexts_.icm(), dma_, env, cfg_.name, 1, "cq"),
      // A WQE line is named by its QP and index; it lives in the QP's ring.
      wqe_cache_(
          "wqe", 64, 16 + 24, cfg_.cache.wqe,
          [this](uint64_t line) -> std::vector<Icm::Piece> {
            const mpr_qpc* q = contexts_.qp(static_cast<uint32_t>(line >> 16));
            if (!q) return {};
            const uint64_t slot =
                NicCore::wqe_line_index(line) & ((uint64_t{1} << q->sq_log_size) - 1);
            return {Icm::Piece{q->sq_base + (slot << q->sq_log_stride),
                               uint32_t{1} << q->sq_log_stride}};
          },
          dma_, env, cfg_.name, "qp", DmaPurpose::wqe),
      core_{cfg_, env,  clock_,  contexts_,  translation_,       dma_, cq_, *engine_,
            tx_,  pus_, tcache_, wqe_cache_, rate_control_.get()},
      tx_("tx", core_),
      requester_("requester", core_),
      responder_("responder", core_),
      mac_("mac", core_, tx_),
      cp_("firmware", cfg_, env, clock_, dma_port_, hostif_, contexts_,
          CommandProcessor::DataPathHooks{
              [this](uint32_t qpn, uint8_t from, uint8_t to) { on_qp_state(qpn, from, to); },
              [this](uint32_t qpn) { on_qp_destroyed(qpn); },
              [this](uint32_t srqn) { responder_.srq_destroyed(srqn); }}),
      calendar_("calendar"),
      bad_doorbells_(env.stats.counter("nic." + cfg.name + ".hostif.bad_doorbells", "doorbells",
                                       "Doorbells naming an object not bound to their UAR page")),
      resets_(env.stats.counter("nic." + cfg.name + ".hostif.resets", "resets", "Device resets")),
      wqes_by_mmio_(env.stats.counter("nic." + cfg.name + ".hostif.wqes_by_mmio", "WQEs",
                                      "Send WQEs written into a UAR page (WQE by MMIO)")),
      pkey_drops_(env.stats.counter("nic." + cfg.name + ".rx.pkey_drops", "packets",
                                    "Packets whose BTH P_Key does not match the port's "
                                    "partition (IB: P_Key violations)")),
      foreign_drops_(env.stats.counter(
          "nic." + cfg.name + ".rx.foreign_drops", "packets",
          "Packets for a connected (RC, UC) QP from an address other than its peer's")) {
  tx_.set_sources(&responder_, &requester_);
  cq_.set_cqc_cache(&cqc_cache_);
  for (auto [cause, cache] : {std::pair<StallCause, const char*>{StallCause::qpc, "qpc"},
                              {StallCause::wqe, "wqe"},
                              {StallCause::mpt_mtt, "mpt_mtt"}})
    rx_stall_ps_[static_cast<size_t>(cause)] =
        &env.stats.counter("nic." + cfg.name + ".rx.stall_ps." + cache, "ps",
                           std::string("Time the in-order receive stage waited for ") + cache +
                               " cache fills (the first cache that missed for the stalled packet)");
  // A QP's turn to send needs its context on chip.
  tx_.set_gate([this](uint32_t qpn) {
    if (!contexts_.qp(qpn)) return true;  // the sources deal with a vanished QP
    return qpc_cache_.access(contexts_.qp_index(qpn), qpn, true,
                             [this, qpn] { tx_.activate(qpn); });
  });
  check_sram();
  mac_.set_rx_handler([this](net::PacketPtr pkt, const net::RoceFields& f) {
    return on_packet(std::move(pkt), f);
  });
  // The two halves of every QP (qp_sides.h).
  requester_.connect(&responder_);
  responder_.connect(&requester_);
  hostif_.set_link_up(true);
  // Power-on is a reset: the NIC is ready after the reset latency.
  calendar_.at(clock_.cycles(static_cast<uint64_t>(cfg_.latency.reset)),
               [this] { hostif_.set_ready(true); });
}

void Nic::on_uar(uint32_t page, uint32_t offset, uint64_t value) {
  // Decoding a doorbell and scheduling its queue takes `doorbell` cycles.
  calendar_.at(clock_.after_cycles(static_cast<uint64_t>(cfg_.latency.doorbell)),
               [this, page, offset, value] { decode_uar(page, offset, value); });
}

void Nic::decode_uar(uint32_t page, uint32_t offset, uint64_t value) {
  {
    const uint32_t qpn = static_cast<uint32_t>(value & MPR_DB_QPN_MASK);
    const uint16_t pi = static_cast<uint16_t>((value >> MPR_DB_PI_SHIFT) & MPR_DB_PI_MASK);
    switch (offset) {
      case MPR_UAR_SQ_DB:
      case MPR_UAR_RQ_DB: {
        const mpr_qpc* q = contexts_.qp(qpn);
        if (!q || q->uar_index != page) {
          ++bad_doorbells_;
          MPR_LOG(log_, warn,
                  "doorbell for QP " << qpn << " on UAR page " << page
                                     << " dropped (not its page or no such QP)");
          return;
        }
        // The QP's context must be on chip: fetch it, then decode again.
        if (!qpc_cache_.access(contexts_.qp_index(qpn), qpn, true,
                               [this, page, offset, value] { decode_uar(page, offset, value); }))
          return;
        if (offset == MPR_UAR_SQ_DB)
          requester_.sq_doorbell(qpn, pi);
        else
          responder_.rq_doorbell(qpn, pi);
        return;
      }
      case MPR_UAR_SRQ_DB: {
        const mpr_srqc* s = contexts_.srq(qpn);  // the same bits name the SRQ
        if (!s || s->uar_index != page) {
          ++bad_doorbells_;
          MPR_LOG(log_, warn,
                  "doorbell for SRQ " << qpn << " on UAR page " << page
                                      << " dropped (not its page or no such SRQ)");
          return;
        }
        responder_.srq_doorbell(qpn, pi);
        return;
      }
      case MPR_UAR_CQ_DB:
        cq_.cq_doorbell(page, value);
        return;
      case MPR_UAR_EQ_DB:
        cq_.eq_doorbell(page, value);
        return;
      default:
        ++bad_doorbells_;
        MPR_LOG(log_, warn,
                "UAR write at offset 0x" << std::hex << offset
                                         << " ignored (no register there; "
                                            "WQEs by MMIO go to MPR_UAR_BF)");
    }
  }
}

void Nic::on_uar_wqe(uint32_t page, uint32_t offset, std::vector<uint8_t> bytes) {
  BfWindow& w = bf_windows_[page];
  // A write of the window's first word starts a new WQE: whatever an
  // earlier, abandoned one left is forgotten. (Software that writes 8 bytes
  // at a time, as QEMU forwards a guest's stores, would otherwise have the
  // words of one WQE taken for the next one's.)
  if (offset == 0) w = BfWindow{};
  for (size_t i = 0; i < bytes.size(); i += 8) {
    std::memcpy(&w.bytes[offset + i], &bytes[i], 8);
    w.written[(offset + i) / 8] = true;
  }
  if (!w.written[0] || !w.written[1]) return;  // the ctrl segment is not complete yet
  mpr_wqe_ctrl ctrl;
  std::memcpy(&ctrl, w.bytes.data(), sizeof ctrl);
  const size_t len = sizeof ctrl + size_t{ctrl.num_ds} * MPR_WQE_SEG_SIZE;
  if (len > MPR_UAR_BF_SIZE) {
    ++bad_doorbells_;
    MPR_LOG(log_, warn,
            "WQE by MMIO on UAR page " << page << " claims " << len
                                       << " bytes, more than the window: dropped");
    bf_windows_.erase(page);
    return;
  }
  // Whole 64-byte lines: the WQE's padding is part of its last line, so
  // no word of this WQE is left to arrive after it was taken.
  const size_t lines_len = (len + 63) / 64 * 64;
  for (size_t word = 0; word < lines_len / 8; ++word)
    if (!w.written[word]) return;  // more to come
  std::vector<uint8_t> wqe(w.bytes.begin(), w.bytes.begin() + static_cast<std::ptrdiff_t>(len));
  bf_windows_.erase(page);
  // Decoding it takes what a doorbell takes.
  calendar_.at(clock_.after_cycles(static_cast<uint64_t>(cfg_.latency.doorbell)),
               [this, page, wqe = std::move(wqe), gen = generation_]() mutable {
                 if (gen == generation_) decode_uar_wqe(page, std::move(wqe));
               });
}

void Nic::decode_uar_wqe(uint32_t page, std::vector<uint8_t> wqe) {
  mpr_wqe_ctrl ctrl;
  std::memcpy(&ctrl, wqe.data(), sizeof ctrl);
  const uint32_t qpn = ctrl.bf_qpn & MPR_DB_QPN_MASK;
  const mpr_qpc* q = contexts_.qp(qpn);
  if (!q || q->uar_index != page) {
    ++bad_doorbells_;
    MPR_LOG(log_, warn,
            "WQE by MMIO for QP " << qpn << " on UAR page " << page
                                  << " dropped (not its page or no such QP)");
    return;
  }
  if (!qpc_cache_.access(contexts_.qp_index(qpn), qpn, true,
                         [this, page, wqe] { decode_uar_wqe(page, wqe); }))
    return;
  ++wqes_by_mmio_;
  requester_.sq_wqe_mmio(qpn, wqe);
}

void Nic::on_reset() {
  ++resets_;
  bf_windows_.clear();
  MPR_LOG(log_, info, "device reset");
  hostif_.reset_registers();
  hostif_.set_link_up(true);
  cp_.reset();
  requester_.reset();
  responder_.reset();
  tx_.reset();
  cq_.reset();
  mac_.reset();
  qpc_cache_.reset();
  tcache_.reset();
  cqc_cache_.reset();
  wqe_cache_.reset();
  rx_parked_.reset();
  pus_.reset();
  ++generation_;
  for (const uint32_t qpn : contexts_.qpns()) engine_->close(qpn);
  contexts_.clear();
  calendar_.at(clock_.after_cycles(static_cast<uint64_t>(cfg_.latency.reset)),
               [this] { hostif_.set_ready(true); });
}

void Nic::on_qp_state(uint32_t qpn, uint8_t from, uint8_t to) {
  switch (to) {
    case MPR_QPS_RTR:
      responder_.qp_to_rtr(qpn);
      break;
    case MPR_QPS_RTS:
      if (from == MPR_QPS_RTR) requester_.qp_to_rts(qpn);
      break;
    case MPR_QPS_ERR:
      requester_.qp_to_error(qpn);
      responder_.qp_to_error(qpn);
      break;
    case MPR_QPS_RESET:
      requester_.qp_removed(qpn);
      responder_.qp_removed(qpn);
      engine_->close(qpn);
      break;
    default:
      break;
  }
}

void Nic::on_qp_destroyed(uint32_t qpn) {
  qpc_cache_.invalidate(contexts_.qp_index(qpn));
  requester_.qp_removed(qpn);
  responder_.qp_removed(qpn);
  engine_->close(qpn);
}

bool Nic::on_packet(net::PacketPtr pkt, const net::RoceFields& f) {
  // Every packet needs its QP's context (a packet for no QP goes on to be
  // dropped and counted by the responder or requester).
  rx_parked_range_ = {};
  if (!contexts_ready(*pkt, f, &rx_stall_cause_)) {
    rx_parked_ = std::move(pkt);
    rx_parked_f_ = f;
    rx_stall_since_ = sc_core::sc_time_stamp();
    return false;  // the receive pipeline waits for the fills
  }
  dispatch(std::move(pkt), f);
  return true;
}

bool Nic::contexts_ready(const net::Packet& pkt, const net::RoceFields& f, StallCause* first_miss) {
  // QPN 1 on the wire is the GSI QP (MPR_QPT_GSI).
  const uint32_t qpn = f.dest_qp == 1 ? contexts_.gsi_qpn() : f.dest_qp;
  if (!contexts_.qp(qpn)) return true;
  bool ready = true;
  auto note = [&](bool hit, StallCause cause) {
    if (!hit && ready && first_miss) *first_miss = cause;
    ready &= hit;
  };
  note(qpc_cache_.access(contexts_.qp_index(qpn), qpn, true, [this] { resume_parked(); }),
       StallCause::qpc);
  // Responses that scatter data or a value need their WQE (READ, atomic).
  if (f.opcode == net::Opcode::RDMA_READ_RESPONSE_FIRST ||
      f.opcode == net::Opcode::RDMA_READ_RESPONSE_MIDDLE ||
      f.opcode == net::Opcode::RDMA_READ_RESPONSE_LAST ||
      f.opcode == net::Opcode::RDMA_READ_RESPONSE_ONLY ||
      f.opcode == net::Opcode::ATOMIC_ACKNOWLEDGE) {
    // READ as data: the response's PSN is of the peer's stream; the READ's
    // is the trailer's message number.
    uint32_t psn = f.psn;
    net::MpDataExt x;
    if (f.trailer_len == net::kMpDataExtBytes &&
        net::get_mp_data_ext(net::trailer_of(pkt.data.data(), f), x))
      psn = x.msn;
    if (const std::optional<uint32_t> index = requester_.wqe_of_response(qpn, psn))
      note(wqe_cache_.access(NicCore::wqe_line(qpn, *index), qpn, false,
                             [this] { resume_parked(); }),
           StallCause::wqe);
  }
  // Requests that name memory by rkey: the MPT line and the MTT lines of
  // the range this packet touches (a READ: the whole response).
  if (net::is_request(f.opcode)) {
    if (net::has_reth(f.opcode)) {
      const uint64_t len =
          f.opcode == net::Opcode::RDMA_READ_REQUEST ? f.reth_dma_len : f.payload_len;
      note(tcache_.access(
               f.reth_rkey, f.reth_va, len, qpn, [this] { resume_parked(); }, &rx_parked_range_),
           StallCause::mpt_mtt);
    } else if (f.opcode == net::Opcode::COMPARE_SWAP || f.opcode == net::Opcode::FETCH_ADD) {
      note(tcache_.access(f.atomic_rkey, f.atomic_va, 8, qpn, [this] { resume_parked(); }),
           StallCause::mpt_mtt);
    }
  }
  return ready;
}

void Nic::resume_parked() {
  if (!rx_parked_) return;
  if (!contexts_ready(*rx_parked_, rx_parked_f_)) return;  // more fills to wait for
  rx_stall_ps_[static_cast<size_t>(rx_stall_cause_)]->add(static_cast<uint64_t>(
      (sc_core::sc_time_stamp() - rx_stall_since_) / sc_core::sc_time(1, sc_core::SC_PS)));
  dispatch(std::move(rx_parked_), rx_parked_f_);
  rx_parked_.reset();
  mac_.resume_rx();
}

void Nic::check_sram() {
  // On chip: the QPC cache, whose lines are the connections whose state is
  // on chip (struct mpr_qpc, the engine's state and the line's tag bits),
  // and the CQC, MPT and MTT caches.
  uarch::SramBudget budget(cfg_.sram.size.n);
  if (qpc_cache_.enabled()) {
    const uarch::SetAssocCache& c = qpc_cache_.lines();
    budget.set_connections(uint64_t{c.params().sets} * c.params().ways);
    budget.add_per_connection("qpc.context", sizeof(mpr_qpc));
    budget.add_per_connection("qpc." + cfg_.transport + "_state", engine_->state_bytes());
    budget.add_per_connection("qpc.tag", (c.state_bits_per_line() + 7) / 8);
  }
  // The other caches are fixed regions (tags and data).
  budget.add_fixed("cache.cqc", cqc_cache_.sram_bytes());
  budget.add_fixed("cache.mpt", tcache_.mpt().sram_bytes());
  budget.add_fixed("cache.mtt", tcache_.mtt().sram_bytes());
  budget.add_fixed("cache.wqe", wqe_cache_.sram_bytes());
  // Shared receive queues: every context on chip, and the RECV WQEs each
  // keeps fetched ahead (rq_prefetch of them, room for max_sge entries).
  const auto srqs = static_cast<uint64_t>(cfg_.limits.max_srq);
  budget.add_fixed("srq.contexts", srqs * sizeof(mpr_srqc));
  budget.add_fixed("srq.prefetch",
                   srqs * static_cast<uint64_t>(std::max<int64_t>(1, cfg_.rq_prefetch)) *
                       static_cast<uint64_t>(cfg_.limits.max_sge) * sizeof(mpr_wqe_data));
  auto& st = env_.stats;
  const std::string p = "nic." + cfg_.name + ".sram.";
  st.counter(p + "size", "bytes", "On-chip SRAM (nic.sram.size)").set(budget.total_bytes());
  st.counter(p + "used", "bytes", "SRAM the configured caches take").set(budget.used_bytes());
  st.counter(p + "bytes_per_connection", "bytes",
             "SRAM per connection on chip: QP context, transport state, tag")
      .set(budget.bytes_per_connection());
  st.counter(p + "connections_on_chip", "connections", "QP contexts the QPC cache holds")
      .set(budget.connections());
  st.counter(p + "max_connections", "connections",
             "Connections whose state would fit in the whole SRAM")
      .set(qpc_cache_.enabled() ? budget.max_connections() : 0);
  const std::string err = budget.check();
  if (!err.empty()) throw std::invalid_argument("nic." + cfg_.name + ": " + err);
  MPR_LOG(log_, debug, "SRAM budget:\n" << budget.report());
}

void Nic::dispatch(net::PacketPtr pkt, const net::RoceFields& f) {
  // The packet is processed on its QP's PU (in order per QP) and takes
  // effect when that is done.
  const sc_core::sc_time done = pus_.run(f.dest_qp, uarch::PuOp::rx_packet);
  auto held = std::make_shared<net::PacketPtr>(std::move(pkt));
  const uint64_t gen = generation_;
  calendar_.at(done, [this, held, f, gen] {
    if (gen == generation_) deliver(std::move(*held), f);
  });
}

bool Nic::admitted(const net::RoceFields& f) {
  // The port's P_Key table holds the default partition (0xFFFF, full
  // member) alone: a key matches when its low 15 bits are all ones,
  // whatever its membership bit (IBA 10.9.3).
  if ((f.pkey & 0x7fff) != 0x7fff) {
    ++pkey_drops_;
    MPR_LOG(log_, info, "packet with P_Key 0x" << std::hex << f.pkey << " dropped");
    return false;
  }
  // A connected QP takes packets from its peer only: RoCEv2 carries no
  // source QP number for RC or UC, so the peer is its address (the QP's
  // destination GID). Datagram QPs take anyone's (they check the Q_Key).
  const mpr_qpc* q = contexts_.qp(f.dest_qp);
  if (q && (q->qp_type == MPR_QPT_RC || q->qp_type == MPR_QPT_UC) &&
      (q->state == MPR_QPS_RTR || q->state == MPR_QPS_RTS)) {
    const uint8_t* g = q->attr.dgid;
    const uint32_t peer =
        uint32_t{g[12]} << 24 | uint32_t{g[13]} << 16 | uint32_t{g[14]} << 8 | g[15];
    if (f.src_ip != peer) {
      ++foreign_drops_;
      MPR_LOG(log_, info,
              "packet for QP " << f.dest_qp << " from " << net::ipv4_text(f.src_ip)
                               << ", not its peer " << net::ipv4_text(peer) << ": dropped");
      return false;
    }
  }
  return true;
}

void Nic::deliver(net::PacketPtr pkt, const net::RoceFields& f) {
  if (!admitted(f)) return;
  if (static_cast<uint8_t>(f.opcode) == net::kCnpOpcode)
    requester_.on_cnp(f);
  else if (net::is_request(f.opcode) ||
           ((is_read_response(f.opcode) || f.opcode == net::Opcode::ATOMIC_ACKNOWLEDGE) &&
            engine_->traits_of(f.dest_qp).read_as_data))
    responder_.on_request(std::move(pkt), f);  // READ as data: responses are data too
  else
    requester_.on_response(std::move(pkt), f);
}

}  // namespace mprdma::nic
