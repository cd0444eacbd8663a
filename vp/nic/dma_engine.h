// DMA engine: the data path's access to host memory over the NIC's PCIe DMA
// port, with gather (several physical segments into one buffer) and scatter,
// and traffic counters per purpose so that a user can see who used PCIe.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "vp/core/sim_env.h"
#include "vp/nic/translation.h"
#include "vp/pcie/dma_initiator.h"

namespace mprdma::nic {

enum class DmaPurpose { wqe, payload, recv_wqe, atomic, completion, icm, count_ };

class DmaEngine {
 public:
  using Done = std::function<void(bool ok, std::vector<uint8_t>&& data)>;

  DmaEngine(pcie::DmaInitiator& port, core::SimEnv& env, const std::string& stat_prefix);

  // Reads the concatenation of `segs` (total bytes `total`) and calls `done`
  // once every part arrived; ok is false if any part failed.
  void gather(const std::vector<Segment>& segs, DmaPurpose purpose, Done done);
  void read(uint64_t pa, uint32_t len, DmaPurpose purpose, Done done);
  // Posted writes of `data` across `segs` (sizes must add up).
  void scatter(const std::vector<Segment>& segs, const uint8_t* data, DmaPurpose purpose);
  void write(uint64_t pa, const void* data, uint32_t len, DmaPurpose purpose);

  pcie::DmaInitiator& port() { return port_; }

 private:
  pcie::DmaInitiator& port_;
  struct Counters {
    core::Counter* read_bytes;
    core::Counter* write_bytes;
  };
  Counters counters_[static_cast<int>(DmaPurpose::count_)];
};

}  // namespace mprdma::nic
