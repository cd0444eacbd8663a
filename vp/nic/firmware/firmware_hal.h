// The firmware's view of the NIC: the hardware abstraction layer that the
// command-processor firmware is written against.
//
// The firmware is plain sequential C++ with no SystemC in it. Here it runs on
// the command processor's modeled embedded core (CommandProcessor implements
// this interface with timed DMA and doorbells); the same code can run on an
// embedded core of a real NIC, or against the test HAL of the unit tests.
// Every call may take (simulated) time; none may fail silently.
#pragma once

#include <mprdma/hw.h>
#include <mprdma/regs.h>
#include <mprdma/regs_util.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace mprdma::nic {

class ContextMemory;

struct PortInfo {
  std::array<uint8_t, 6> mac{};
  uint8_t max_mtu = MPR_MTU_1024;  // enum mpr_mtu
  uint32_t speed_mbps = 40000;
  bool link_up = true;
};

// The CAPS bits every NIC of this model has (the engines' bits vary:
// TransportOffer::caps()).
inline uint32_t fixed_caps() {
  return MPR_RESET(CAPS, RC) | MPR_RESET(CAPS, UC) | MPR_RESET(CAPS, UD) |
         MPR_RESET(CAPS, ATOMICS) | MPR_RESET(CAPS, INLINE) | MPR_RESET(CAPS, WQE_BY_MMIO) |
         MPR_RESET(CAPS, INLINE_RECV) | MPR_RESET(CAPS, SRQ);
}

// The transport engines a QP may choose at CREATE_QP (nic.transport,
// nic.qp_transports): bit k of `kinds` offers enum mpr_transport k;
// MPR_TRANSPORT_DEFAULT stands for `default_kind`; MPR_TRANSPORT_DCQCN
// (go-back-N under DCQCN) is offered when the NIC runs DCQCN.
struct TransportOffer {
  uint32_t kinds = 1u << MPR_TRANSPORT_GBN;
  uint8_t default_kind = MPR_TRANSPORT_GBN;

  // The CAPS register's engine bits (GBN, MP_RDMA, DCQCN, IRN are bits 8..11
  // in enum mpr_transport order).
  uint32_t caps() const {
    uint32_t c = 0;
    for (uint32_t k = MPR_TRANSPORT_GBN; k <= MPR_TRANSPORT_IRN; ++k)
      if (kinds >> k & 1) c |= MPRDMA_BAR0__CAPS__GBN_bm << (k - MPR_TRANSPORT_GBN);
    return c;
  }
};

class FirmwareHal {
 public:
  virtual ~FirmwareHal() = default;

  // Admin queue. next_command() blocks until a command is available and
  // returns false when the admin queue is disabled or the device is reset.
  virtual bool next_command(mpr_cmd& cmd) = 0;
  virtual void complete_command(const mpr_cmd_comp& comp) = 0;

  // DMA to host memory, blocking from the firmware's view. False when the
  // host reported an error (address not backed).
  virtual bool dma_read(uint64_t pa, void* dst, size_t len) = 0;
  virtual bool dma_write(uint64_t pa, const void* src, size_t len) = 0;

  // Whether [pa, pa + len) is host memory the device may use for DMA: the
  // host's IOMMU view (RAM, not the MSI window). Consulted when software
  // hands the NIC an address (rings, records, ICM and MR pages) so that a
  // bad one is refused by the command; the data path still fails cleanly if
  // the memory goes away later. Without a host that says: everything but
  // the MSI window.
  virtual bool host_memory(uint64_t pa, uint64_t len) const {
    const uint64_t last = len ? pa + len - 1 : pa;
    return last >= pa && (last < 0xFEE00000ull || pa >= 0xFEF00000ull);
  }

  // On-chip context memory.
  virtual ContextMemory& contexts() = 0;

  // Tell the data path about QP lifecycle changes it must act on (start or
  // stop engines, flush WQEs). Called after the context was updated.
  virtual void qp_state_changed(uint32_t qpn, uint8_t from, uint8_t to) = 0;
  virtual void qp_destroyed(uint32_t qpn) = 0;
  // An SRQ is gone: the data path forgets the WQEs it fetched ahead.
  virtual void srq_destroyed(uint32_t srqn) { (void)srqn; }

  virtual PortInfo port() const = 0;
  // Go-back-N only unless the NIC says otherwise.
  virtual TransportOffer transports() const { return {}; }
  // The port's counters (enum mpr_port_counter); zeros where there are none.
  virtual mpr_port_counters counters() const { return {}; }
};

}  // namespace mprdma::nic
