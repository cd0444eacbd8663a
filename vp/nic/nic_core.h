// What the NIC's data-path blocks share. Owned by Nic, handed to each block
// by reference; it exists so that block constructors do not take ten
// arguments.
#pragma once

#include <string>

#include "vp/core/clock_domain.h"
#include "vp/core/sim_env.h"
#include "vp/nic/nic_config.h"

namespace mprdma::nic {

class CompletionUnit;
class ContextCache;
class ContextMemory;
class DmaEngine;
class ProcessingUnits;
class RateControlKind;
class TransportEngine;
class Translation;
class TxScheduler;
class TranslationCache;

struct NicCore {
  const NicConfig& cfg;
  core::SimEnv& env;
  const core::ClockDomain& clock;
  ContextMemory& contexts;
  Translation& translation;
  DmaEngine& dma;
  CompletionUnit& cq;
  TransportEngine& engine;
  TxScheduler& tx;
  ProcessingUnits& pus;
  TranslationCache& tcache;  // MPT/MTT lines on chip
  ContextCache& wqe_cache;   // send WQEs on chip (see wqe_line())
  // The NIC's congestion control (nic.congestion_control), made once: the
  // requester's reaction points and the responder's notification point
  // come from it. Null for none.
  const RateControlKind* rate_control;
  // The WQE cache's line of send WQE `index` of QP `qpn`: the QPN above 16
  // bits of index + 0x9E37 x QPN (a multiplicative hash), so that the set
  // (the low bits) spreads one QP's WQEs and the same index of other QPs.
  static uint64_t wqe_line(uint32_t qpn, uint32_t index) {
    return (uint64_t{qpn} << 16) | ((index + qpn * 0x9E37u) & 0xffff);
  }
  static uint32_t wqe_line_index(uint64_t line) {  // low 16 bits of the index
    const uint32_t qpn = static_cast<uint32_t>(line >> 16);
    return (static_cast<uint32_t>(line) - qpn * 0x9E37u) & 0xffff;
  }
  // "nic.<name>.": prefix of every statistic of this NIC.
  std::string stat(const std::string& block_and_name) const {
    return "nic." + cfg.name + "." + block_and_name;
  }
  uint64_t now_cycle() const { return clock.now_cycle(); }
};

}  // namespace mprdma::nic
