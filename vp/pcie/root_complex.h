// The host end of the PCIe link: the CPU's MMIO path to the device and the
// device's DMA path into host memory.
//
// CPU side (called by host software running in SC_THREADs):
//   mmio_write  stores through a write-combining buffer: the range is cut
//               into TLPs at 64-byte line boundaries (a store of up to 64 B
//               inside one line is one TLP). Writes are posted: the caller
//               waits only while the downstream link is backed up, until its
//               last TLP starts serialising. That stands in for the WC
//               buffers and posted-write credits that stall a real core
//               when the link cannot drain them.
//   mmio_read   an uncached load: waits for the completion.
//
// Device side (the `dma` target, driven by PcieLink's rc_dma socket; never
// calls wait()):
//   * writes are copied at once and committed to memory at their arrival
//     time (now + the annotated delay) by this block's Calendar, never
//     earlier, so host software polling memory sees them no sooner than the
//     hardware would. A commit wakes every write watch it overlaps.
//   * writes into the MSI window 0xFEE00000..0xFEEFFFFF are interrupts:
//     on_msi(address, data) runs at arrival and memory is not touched.
//   * writes to unbacked memory are dropped, counted and logged (a real
//     root complex would log an Unsupported Request; posted writes have no
//     answer).
//   * reads copy memory at the time of the call, which the link makes the
//     request's service time; unbacked ranges answer
//     TLM_ADDRESS_ERROR_RESPONSE.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <functional>
#include <string>
#include <systemc>
#include <tlm>
#include <utility>
#include <vector>

#include "vp/core/calendar.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/stats.h"
#include "vp/pcie/host_memory_if.h"

namespace mprdma::pcie {

class RootComplex : public sc_core::sc_module {
 public:
  // Write-combining line size of the CPU.
  static constexpr uint64_t kWcLineBytes = 64;

  tlm_utils::simple_initiator_socket<RootComplex> mmio;  // bind to PcieLink::rc_mmio
  tlm_utils::simple_target_socket<RootComplex> dma;      // PcieLink::rc_dma binds here

  // Called at the arrival of a device write to the MSI window, with its
  // address and the first 4 data bytes (little-endian). Set by the host.
  std::function<void(uint64_t addr, uint32_t data)> on_msi;

  // Statistics and log channel are named pcie.<stats_name> (basename when
  // empty); use the same stats name as the PcieLink.
  RootComplex(sc_core::sc_module_name name, HostMemoryIf& mem, core::SimEnv& env,
              std::string stats_name = {});

  // CPU stores/loads to device space (addresses are passed to the device
  // unchanged). mmio_write and mmio_read must run in an SC_THREAD.
  void mmio_write(uint64_t addr, const void* data, size_t len);
  void mmio_read(uint64_t addr, void* data, size_t len);
  // mmio_write without waiting: returns how long the caller would stall.
  // For host models that run from Calendar actions and keep time
  // themselves.
  sc_core::sc_time post_mmio_write(uint64_t addr, const void* data, size_t len);

  // ev->notify(SC_ZERO_TIME) whenever a committed DMA write overlaps
  // [pa, pa + len). One event may watch several ranges.
  void add_write_watch(uint64_t pa, uint64_t len, sc_core::sc_event* ev);
  // Removes every range watched by `ev`.
  void remove_write_watch(sc_core::sc_event* ev);

  // The host takes [pa, pa + len) away from the device, as an IOMMU does
  // when it unmaps pages a driver had handed out (or memory is
  // hot-unplugged): from now on device reads touching it fail with an
  // address error and device writes touching it are dropped and counted,
  // exactly as for unbacked memory. The CPU's view is unchanged. For tests
  // of objects whose memory becomes unreachable while the NIC uses them.
  void revoke_dma(uint64_t pa, uint64_t len);
  // Gives every revoked range back.
  void restore_dma() { revoked_.clear(); }
  // Whether the device may use [pa, pa + len) for DMA: backed memory, not
  // revoked, not the MSI window. The host's IOMMU view, which the NIC's
  // firmware consults when software hands it an address (Nic::
  // set_host_memory_check).
  bool dma_addressable(uint64_t pa, uint64_t len) const;

  HostMemoryIf& memory() { return mem_; }
  const std::string& stats_prefix() const { return prefix_; }

 private:
  struct Watch {
    uint64_t pa, len;
    sc_core::sc_event* ev;
  };
  void dma_b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  void commit(uint64_t pa, const std::vector<uint8_t>& data);
  void deliver_msi(uint64_t pa, const std::vector<uint8_t>& data);
  // True when the device may access [pa, pa + len) (revoke_dma).
  bool dma_allowed(uint64_t pa, uint64_t len) const;

  HostMemoryIf& mem_;
  std::string prefix_;
  core::LogChannel& log_;
  core::Calendar cal_;
  core::LogRateLimit write_error_log_;
  std::vector<Watch> watches_;
  std::vector<std::pair<uint64_t, uint64_t>> revoked_;  // [first, last] byte
  core::Counter* dma_write_errors_;
  core::Counter* dma_read_errors_;
  core::Counter* msis_;
  core::Counter* mmio_read_errors_;
};

}  // namespace mprdma::pcie
