#include "vp/nic/completion_unit.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "vp/nic/context_cache.h"

namespace mprdma::nic {

CompletionUnit::CompletionUnit(sc_core::sc_module_name name, const NicConfig& cfg,
                               core::SimEnv& env, const core::ClockDomain& clock, DmaEngine& dma,
                               HostInterface& hostif, ContextMemory& contexts)
    : sc_core::sc_module(name),
      cfg_(cfg),
      clock_(clock),
      dma_(dma),
      hostif_(hostif),
      contexts_(contexts),
      calendar_("calendar"),
      log_(core::Log::channel("nic." + cfg.name + ".cq")),
      cqes_(env.stats.counter("nic." + cfg.name + ".cq.cqes", "entries", "CQEs written")),
      error_cqes_(env.stats.counter("nic." + cfg.name + ".cq.error_cqes", "entries",
                                    "CQEs with a status other than success")),
      eqes_(env.stats.counter("nic." + cfg.name + ".cq.eqes", "entries", "EQEs written")),
      cq_overflows_(env.stats.counter("nic." + cfg.name + ".cq.cq_overflows", "entries",
                                      "CQEs dropped because their CQ was full")),
      eq_overflows_(env.stats.counter("nic." + cfg.name + ".cq.eq_overflows", "entries",
                                      "EQEs dropped because their EQ was full")),
      dbrec_reads_(env.stats.counter("nic." + cfg.name + ".cq.dbrec_reads", "reads",
                                     "DMA reads of a CQ consumer-index record")),
      bad_doorbells_(env.stats.counter("nic." + cfg.name + ".cq.bad_doorbells", "doorbells",
                                       "CQ/EQ doorbells naming an object not bound to the page")) {}

void CompletionUnit::reset() {
  ++generation_;
  queue_.clear();
  busy_ = false;
}

void CompletionUnit::post_cqe(uint32_t cqn, const mpr_cqe& cqe, bool event_worthy,
                              std::vector<uint8_t> inline_data) {
  Work w{};
  w.is_cqe = true;
  w.cqn = cqn;
  w.cqe = cqe;
  w.event_worthy = event_worthy || cqe.status != MPR_CQE_SUCCESS;
  w.inline_data = std::move(inline_data);
  queue_.push_back(w);
  kick();
}

void CompletionUnit::post_async(uint8_t type, uint32_t data0, uint32_t data1) {
  Work w{};
  w.is_cqe = false;
  w.eqn = kAsyncEqn;
  w.eqe.type = type;
  w.eqe.data0 = data0;
  w.eqe.data1 = data1;
  queue_.push_back(w);
  kick();
}

void CompletionUnit::kick() {
  if (busy_ || queue_.empty()) return;
  busy_ = true;
  calendar_.at(clock_.after_cycles(static_cast<uint64_t>(cfg_.latency.cqe)), [this] { step(); });
}

void CompletionUnit::step() {
  busy_ = false;
  if (queue_.empty()) return;
  Work& w = queue_.front();
  if (!w.is_cqe) {
    write_eqe(w.eqn, w.eqe);
    queue_.pop_front();
    kick();
    return;
  }
  mpr_cqc* cq = contexts_.cq(w.cqn);
  if (!cq || cq->overflow) {
    // Destroyed or broken CQ: nothing to write to.
    ++cq_overflows_;
    queue_.pop_front();
    kick();
    return;
  }
  // The CQ's context must be on chip (a line per CQ, modified by every CQE).
  if (cqc_cache_) {
    const uint64_t gen = generation_;
    if (!cqc_cache_->access(w.cqn, w.cqn, true, [this, gen] {
          if (gen != generation_) return;
          busy_ = false;
          kick();
        })) {
      busy_ = true;
      return;
    }
  }
  const uint32_t size = 1u << cq->log_size;
  if (cq->pi - cq->ci >= size) {
    if (cq->dbrec == 0) {
      cq->overflow = 1;
      ++cq_overflows_;
      MPR_LOG(log_, error, "CQ " << w.cqn << " overflow");
      post_async(MPR_EQE_CQ_ERROR, w.cqn);
      queue_.pop_front();
      kick();
      return;
    }
    // Refresh the consumer index from host memory before declaring overflow.
    busy_ = true;
    ++dbrec_reads_;
    const uint64_t gen = generation_;
    const uint32_t cqn = w.cqn;
    dma_.read(cq->dbrec, 4, DmaPurpose::completion,
              [this, gen, cqn](bool ok, std::vector<uint8_t>&& data) {
                if (gen != generation_) return;
                busy_ = false;
                mpr_cqc* c = contexts_.cq(cqn);
                if (c && !ok) {
                  // The record is out of reach: the consumer index can never
                  // be learnt, so the CQ fails (as on overflow) and its
                  // completions are dropped; asking again would hold every
                  // other CQ of the NIC behind this one for ever.
                  c->overflow = 1;
                  ++cq_overflows_;
                  MPR_LOG(log_, error,
                          "CQ " << cqn << ": consumer-index record unreadable; CQ in error");
                  post_async(MPR_EQE_CQ_ERROR, cqn, MPR_SYN_DMA_FAULT);
                  queue_.pop_front();
                } else if (c) {
                  uint32_t ci;
                  std::memcpy(&ci, data.data(), 4);
                  // The record only moves forward; ignore a stale value.
                  if (ci - c->ci <= (1u << c->log_size)) c->ci = ci;
                  if (c->pi - c->ci >= (1u << c->log_size)) {
                    c->overflow = 1;
                    ++cq_overflows_;
                    MPR_LOG(log_, error, "CQ " << cqn << " overflow");
                    post_async(MPR_EQE_CQ_ERROR, cqn);
                    queue_.pop_front();
                  }
                }
                kick();
              });
    return;
  }
  write_cqe(w);
  queue_.pop_front();
  kick();
}

uint32_t CompletionUnit::inline_capacity(uint32_t cqn) const {
  const mpr_cqc* cq = contexts_.cq(cqn);
  return cq && (cq->flags & MPR_CQ_F_INLINE_RECV) ? MPR_CQE_INLINE_MAX(cq->log_cqe_size) : 0;
}

void CompletionUnit::write_cqe(Work& w) {
  mpr_cqc* cq = contexts_.cq(w.cqn);
  const uint32_t mask = (1u << cq->log_size) - 1;
  mpr_cqe cqe = w.cqe;
  cqe.owner = MPR_PHASE(cq->pi, cq->log_size);
  // The whole slot is one write: inline receive data (or zeros), then the
  // 32-byte CQE whose owner byte ends it.
  // The firmware admits slots of 32..128 bytes only.
  const uint32_t slot = 1u << std::clamp<uint32_t>(cq->log_cqe_size, MPR_CQ_LOG_CQE_SIZE_MIN,
                                                   MPR_CQ_LOG_CQE_SIZE_MAX);
  std::array<uint8_t, 1u << MPR_CQ_LOG_CQE_SIZE_MAX> bytes{};
  const size_t n = std::min<size_t>(w.inline_data.size(), slot - sizeof cqe);
  if (n) std::memcpy(bytes.data(), w.inline_data.data(), n);
  std::memcpy(bytes.data() + slot - sizeof cqe, &cqe, sizeof cqe);
  dma_.write(cq->base + uint64_t(cq->pi & mask) * slot, bytes.data(), slot, DmaPurpose::completion);
  ++cq->pi;
  ++cqes_;
  if (cqe.status != MPR_CQE_SUCCESS) ++error_cqes_;
  const bool fire =
      cq->arm == MPR_CQ_DB_ARM_NEXT || (cq->arm == MPR_CQ_DB_ARM_SOLICITED && w.event_worthy);
  if (fire) {
    cq->arm = 0;
    mpr_eqe eqe{};
    eqe.type = MPR_EQE_COMPLETION;
    eqe.data0 = w.cqn;
    write_eqe(cq->eqn, eqe);
  }
}

void CompletionUnit::write_eqe(uint32_t eqn, mpr_eqe eqe) {
  mpr_eqc* eq = contexts_.eq(eqn);
  if (!eq) {
    ++eq_overflows_;
    MPR_LOG(log_, warn, "event type " << int(eqe.type) << " for missing EQ " << eqn << " dropped");
    return;
  }
  const uint32_t size = 1u << eq->log_size;
  if (eq->pi - eq->ci >= size) {
    ++eq_overflows_;
    MPR_LOG(log_, error, "EQ " << eqn << " full: event type " << int(eqe.type) << " dropped");
    return;
  }
  eqe.owner = MPR_PHASE(eq->pi, eq->log_size);
  dma_.write(eq->base + uint64_t(eq->pi & (size - 1)) * sizeof(mpr_eqe), &eqe, sizeof eqe,
             DmaPurpose::completion);
  ++eq->pi;
  ++eqes_;
  if (eq->armed) {
    eq->armed = 0;
    hostif_.raise(eq->vector);
  }
}

void CompletionUnit::cq_doorbell(uint32_t page, uint64_t value) {
  const uint32_t cqn = static_cast<uint32_t>(value & MPR_DB_QPN_MASK);
  mpr_cqc* cq = contexts_.cq(cqn);
  if (!cq || cq->uar_index != page) {
    ++bad_doorbells_;
    MPR_LOG(log_, warn, "CQ doorbell for CQ " << cqn << " on UAR page " << page << " dropped");
    return;
  }
  const uint32_t ci24 = static_cast<uint32_t>((value >> MPR_CQ_DB_CI_SHIFT) & MPR_CQ_DB_CI_MASK);
  // The doorbell carries 24 bits of the free-running index: widen it, and
  // ignore a value behind the one already known (a stale, overtaken store).
  const int32_t ahead = static_cast<int32_t>(((ci24 - cq->ci) & 0xffffffu) << 8) >> 8;
  if (ahead > 0) cq->ci += static_cast<uint32_t>(ahead);
  const uint32_t cmd = static_cast<uint32_t>((value >> MPR_CQ_DB_CMD_SHIFT) & MPR_CQ_DB_CMD_MASK);
  if (cmd == MPR_CQ_DB_ARM_NEXT || cmd == MPR_CQ_DB_ARM_SOLICITED) {
    cq->arm = static_cast<uint8_t>(cmd);
    // Completions already waiting past the consumer index fire at once.
    if (cq->pi != cq->ci) {
      cq->arm = 0;
      mpr_eqe eqe{};
      eqe.type = MPR_EQE_COMPLETION;
      eqe.data0 = cqn;
      Work w{};
      w.is_cqe = false;
      w.eqn = cq->eqn;
      w.eqe = eqe;
      queue_.push_back(w);
      kick();
    }
  }
}

void CompletionUnit::eq_doorbell(uint32_t page, uint64_t value) {
  const uint32_t eqn = static_cast<uint32_t>(value & MPR_DB_QPN_MASK);
  mpr_eqc* eq = contexts_.eq(eqn);
  if (page != 0 || !eq) {
    ++bad_doorbells_;
    MPR_LOG(log_, warn, "EQ doorbell for EQ " << eqn << " on UAR page " << page << " dropped");
    return;
  }
  const uint32_t ci24 = static_cast<uint32_t>((value >> MPR_CQ_DB_CI_SHIFT) & MPR_CQ_DB_CI_MASK);
  const int32_t ahead = static_cast<int32_t>(((ci24 - eq->ci) & 0xffffffu) << 8) >> 8;
  if (ahead > 0) eq->ci += static_cast<uint32_t>(ahead);
  if (value & MPR_EQ_DB_ARM) {
    eq->armed = 1;
    if (eq->pi != eq->ci) {
      eq->armed = 0;
      hostif_.raise(eq->vector);
    }
  }
}

}  // namespace mprdma::nic
