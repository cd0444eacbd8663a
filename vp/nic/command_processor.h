// Command processor: the NIC's embedded core running the firmware. This is
// the timing shell around Firmware: it implements the FirmwareHal with the
// admin queue in host memory (fetched and answered by DMA), blocking DMA,
// the context memory and notifications to the data path, and charges
// `latency.command` cycles per command.
#pragma once

#include <cstdint>
#include <functional>
#include <systemc>

#include "vp/core/clock_domain.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/firmware/firmware.h"
#include "vp/nic/firmware/firmware_hal.h"
#include "vp/nic/host_interface.h"
#include "vp/nic/nic_config.h"
#include "vp/pcie/dma_initiator.h"

namespace mprdma::nic {

class CommandProcessor : public sc_core::sc_module, public FirmwareHal {
 public:
  struct DataPathHooks {
    std::function<void(uint32_t qpn, uint8_t from, uint8_t to)> qp_state_changed;
    std::function<void(uint32_t qpn)> qp_destroyed;
    std::function<void(uint32_t srqn)> srq_destroyed;
  };

  SC_HAS_PROCESS(CommandProcessor);
  CommandProcessor(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env,
                   const core::ClockDomain& clock, pcie::DmaInitiator& dma, HostInterface& hostif,
                   ContextMemory& contexts, DataPathHooks hooks);

  // From the host interface.
  void on_aq_enable_changed() { wake_.notify(sc_core::SC_ZERO_TIME); }
  void on_aq_doorbell() { wake_.notify(sc_core::SC_ZERO_TIME); }
  // Device reset: abandon the current command, forget the queue position.
  void reset();

  // FirmwareHal
  bool next_command(mpr_cmd& cmd) override;
  void complete_command(const mpr_cmd_comp& comp) override;
  bool dma_read(uint64_t pa, void* dst, size_t len) override;
  bool dma_write(uint64_t pa, const void* src, size_t len) override;
  ContextMemory& contexts() override { return contexts_; }
  void qp_state_changed(uint32_t qpn, uint8_t from, uint8_t to) override;
  void qp_destroyed(uint32_t qpn) override;
  void srq_destroyed(uint32_t srqn) override {
    if (hooks_.srq_destroyed) hooks_.srq_destroyed(srqn);
  }
  PortInfo port() const override;
  TransportOffer transports() const override;
  // Since the last device reset.
  mpr_port_counters counters() const override;

  void set_link_up(bool up) { link_up_ = up; }
  // The host's answer for host_memory() (Nic::set_host_memory_check).
  void set_host_memory_check(std::function<bool(uint64_t, uint64_t)> check) {
    host_memory_check_ = std::move(check);
  }
  bool host_memory(uint64_t pa, uint64_t len) const override {
    return host_memory_check_ ? host_memory_check_(pa, len) : FirmwareHal::host_memory(pa, len);
  }

 private:
  void core_thread();
  mpr_port_counters raw_counters() const;
  bool current() const { return generation_ == command_generation_; }

  const NicConfig& cfg_;
  core::SimEnv& env_;
  const core::ClockDomain& clock_;
  pcie::DmaInitiator& dma_;
  HostInterface& hostif_;
  ContextMemory& contexts_;
  DataPathHooks hooks_;
  Firmware firmware_;
  core::LogChannel& log_;
  sc_core::sc_event wake_;
  sc_core::sc_event dma_done_;
  uint64_t generation_ = 0;          // bumped by every reset
  uint64_t command_generation_ = 0;  // generation the running command belongs to
  uint16_t aq_ci_ = 0;
  uint16_t acq_pi_ = 0;
  bool link_up_ = true;
  std::function<bool(uint64_t, uint64_t)> host_memory_check_;
  mpr_port_counters counters_at_reset_{};  // the statistics run on across resets
  core::Counter& commands_;
  core::Counter& command_errors_;
};

}  // namespace mprdma::nic
