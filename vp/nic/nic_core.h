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
class ContextMemory;
class DmaEngine;
class ProcessingUnits;
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
  // "nic.<name>.": prefix of every statistic of this NIC.
  std::string stat(const std::string& block_and_name) const {
    return "nic." + cfg.name + "." + block_and_name;
  }
  uint64_t now_cycle() const { return clock.now_cycle(); }
};

}  // namespace mprdma::nic
