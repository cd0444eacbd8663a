// CQ/EQ unit: writes CQEs into completion queues, EQEs into event queues and
// raises the EQ's MSI-X vector when the queue is armed. Handles the CQ and EQ
// doorbells (consumer index, arming). One entry takes `latency.cqe` cycles;
// entries are written in the order they were posted.
//
// A CQ that looks full makes the unit re-read the consumer-index record
// (dbrec) by DMA; if it is still full the CQ overflows: the CQE is dropped,
// the CQ is marked in error and a CQ_ERROR event goes to EQ 0, the
// asynchronous event queue.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>
#include <deque>
#include <systemc>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/clock_domain.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/dma_engine.h"
#include "vp/nic/host_interface.h"
#include "vp/nic/nic_config.h"

namespace mprdma::nic {

class ContextCache;

constexpr uint32_t kAsyncEqn = 0;

class CompletionUnit : public sc_core::sc_module {
 public:
  // CQ contexts are read through this cache (nic.cache.cqc); null: on chip.
  void set_cqc_cache(ContextCache* cache) { cqc_cache_ = cache; }
  CompletionUnit(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env,
                 const core::ClockDomain& clock, DmaEngine& dma, HostInterface& hostif,
                 ContextMemory& contexts);

  // Queues a CQE (the owner bit is set here). `event_worthy` marks a
  // solicited or error completion, which fires a CQ armed for solicited
  // events.
  // `inline_data`: a receive placed in the CQE slot (MPR_CQE_F_INLINE set
  // by the caller), at most inline_capacity(cqn) bytes.
  void post_cqe(uint32_t cqn, const mpr_cqe& cqe, bool event_worthy,
                std::vector<uint8_t> inline_data = {});
  // Bytes of a receive CQ `cqn` takes inside its CQE slots: 0 unless it was
  // created with MPR_CQ_F_INLINE_RECV.
  uint32_t inline_capacity(uint32_t cqn) const;
  // Queues an asynchronous event for EQ 0.
  void post_async(uint8_t type, uint32_t data0, uint32_t data1 = 0);

  // UAR doorbells (already decoded to page and value).
  void cq_doorbell(uint32_t page, uint64_t value);
  void eq_doorbell(uint32_t page, uint64_t value);

  void reset();

 private:
  ContextCache* cqc_cache_ = nullptr;
  struct Work {
    bool is_cqe;
    uint32_t cqn;
    mpr_cqe cqe;
    bool event_worthy;
    std::vector<uint8_t> inline_data;
    mpr_eqe eqe;
    uint32_t eqn;
  };
  void kick();
  void step();
  void write_cqe(Work& w);
  void write_eqe(uint32_t eqn, mpr_eqe eqe);

  const NicConfig& cfg_;
  const core::ClockDomain& clock_;
  DmaEngine& dma_;
  HostInterface& hostif_;
  ContextMemory& contexts_;
  core::Calendar calendar_;
  core::LogChannel& log_;
  std::deque<Work> queue_;
  bool busy_ = false;
  uint64_t generation_ = 0;

  core::Counter& cqes_;
  core::Counter& error_cqes_;
  core::Counter& eqes_;
  core::Counter& cq_overflows_;
  core::Counter& eq_overflows_;
  core::Counter& dbrec_reads_;
  core::Counter& bad_doorbells_;
};

}  // namespace mprdma::nic
