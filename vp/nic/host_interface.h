// Host interface: the NIC's PCIe function as software sees it. BAR0 holds
// the control registers of sw_stack/regs/mprdma_regs.rdl (through the
// generated <mprdma/regs.h>) and the MSI-X table; BAR2 holds the UAR
// doorbell pages. MMIO arrives on a TLM target socket from the PCIe link;
// its effect takes place at the time the write arrives (now + annotated
// delay). Interrupts leave as MSI-X memory writes through the NIC's DMA port.
#pragma once

#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <systemc>
#include <tlm>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/nic/nic_config.h"
#include "vp/pcie/dma_initiator.h"

namespace mprdma::nic {

constexpr uint64_t kBar0Size = 64 * 1024;
constexpr int kNumVectors = 32;

class HostInterface : public sc_core::sc_module {
 public:
  struct Callbacks {
    std::function<void()> reset;              // RESET written
    std::function<void()> aq_enable_changed;  // AQ_CFG.ENABLE toggled
    std::function<void()> aq_doorbell;        // AQ_PI written
    // A 64-bit write at `offset` of UAR page `page`.
    std::function<void(uint32_t page, uint32_t offset, uint64_t value)> uar_write;
    // Bytes written into the WQE-by-MMIO window of UAR page `page`, at
    // `offset` from the window's start.
    std::function<void(uint32_t page, uint32_t offset, std::vector<uint8_t> bytes)> uar_wqe;
  };

  tlm_utils::simple_target_socket<HostInterface> mmio;

  HostInterface(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env,
                pcie::DmaInitiator& dma, Callbacks callbacks);

  // Register state used by the other blocks.
  uint64_t aq_base() const { return (uint64_t{aq_base_hi_} << 32) | aq_base_lo_; }
  uint64_t acq_base() const { return (uint64_t{acq_base_hi_} << 32) | acq_base_lo_; }
  uint32_t aq_cfg() const { return aq_cfg_; }
  bool aq_enabled() const;
  unsigned aq_sq_log_size() const;
  unsigned aq_cq_log_size() const;
  unsigned aq_vector() const;
  bool aq_intr_enabled() const;
  uint16_t aq_pi() const { return aq_pi_; }
  void set_aq_ci(uint16_t ci) { aq_ci_ = ci; }
  void set_acq_pi(uint16_t pi) { acq_pi_ = pi; }
  void set_ready(bool ready);
  void set_link_up(bool up);
  void set_fatal(uint32_t syndrome);

  // Sends the MSI-X message of `vector`, or holds it pending while masked.
  void raise(unsigned vector);

  // Forgets all register state (device reset), except identification.
  void reset_registers();

 private:
  void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
  uint32_t read_bar0(uint64_t offset);
  void write_bar0(uint64_t offset, uint32_t value);
  void send_pending();
  void apply_writes_until(const sc_core::sc_time& t);

  const NicConfig& cfg_;
  pcie::DmaInitiator& dma_;
  Callbacks cb_;
  core::Calendar calendar_;
  core::LogChannel& log_;

  uint32_t status_ = 0, intr_mask_ = 0xffffffffu, intr_pending_ = 0, fatal_syndrome_ = 0;
  uint32_t aq_base_lo_ = 0, aq_base_hi_ = 0, aq_cfg_ = 0, acq_base_lo_ = 0, acq_base_hi_ = 0;
  uint16_t aq_pi_ = 0, aq_ci_ = 0, acq_pi_ = 0;
  struct MsixEntry {
    uint32_t addr_lo = 0, addr_hi = 0, data = 0, ctrl = 1;
  };
  std::array<MsixEntry, kNumVectors> msix_{};
  // BAR0 writes not yet arrived, in arrival order (PCIe keeps posted writes
  // ordered, so arrival times never decrease).
  struct PendingWrite {
    sc_core::sc_time at;
    uint64_t offset;
    uint32_t value;
  };
  std::deque<PendingWrite> pending_writes_;

  core::Counter& mmio_writes_;
  core::Counter& mmio_reads_;
  core::Counter& bad_accesses_;
  core::Counter& interrupts_;
};

}  // namespace mprdma::nic
