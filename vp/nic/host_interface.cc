#include "vp/nic/host_interface.h"

#include <mprdma/hw.h>
#include <mprdma/regs_util.h>

#include <cstring>

#include "vp/nic/firmware/firmware_hal.h"

namespace mprdma::nic {
namespace {

constexpr uint64_t kMsixBase = MPR_BAR0_OFF(MSIX);
constexpr uint64_t kMsixEnd = kMsixBase + kNumVectors * MPR_BAR0_MSIX_ENTRY_SIZE;

}  // namespace

HostInterface::HostInterface(sc_core::sc_module_name name, const NicConfig& cfg, core::SimEnv& env,
                             pcie::DmaInitiator& dma, Callbacks callbacks)
    : sc_core::sc_module(name),
      mmio("mmio"),
      cfg_(cfg),
      dma_(dma),
      cb_(std::move(callbacks)),
      calendar_("calendar"),
      log_(core::Log::channel("nic." + cfg.name + ".hostif")),
      mmio_writes_(env.stats.counter("nic." + cfg.name + ".hostif.mmio_writes", "writes",
                                     "MMIO writes to BAR0 and BAR2")),
      mmio_reads_(env.stats.counter("nic." + cfg.name + ".hostif.mmio_reads", "reads",
                                    "MMIO reads of BAR0")),
      bad_accesses_(env.stats.counter("nic." + cfg.name + ".hostif.bad_accesses", "accesses",
                                      "MMIO accesses outside the BARs or of a wrong width")),
      interrupts_(env.stats.counter("nic." + cfg.name + ".hostif.interrupts", "messages",
                                    "MSI-X messages sent")) {
  mmio.register_b_transport(this, &HostInterface::b_transport);
}

bool HostInterface::aq_enabled() const { return MPR_GET(AQ_CFG, ENABLE, aq_cfg_); }
unsigned HostInterface::aq_sq_log_size() const { return MPR_GET(AQ_CFG, SQ_LOG_SIZE, aq_cfg_); }
unsigned HostInterface::aq_cq_log_size() const { return MPR_GET(AQ_CFG, CQ_LOG_SIZE, aq_cfg_); }
unsigned HostInterface::aq_vector() const { return MPR_GET(AQ_CFG, VECTOR, aq_cfg_); }
bool HostInterface::aq_intr_enabled() const { return MPR_GET(AQ_CFG, INTR_EN, aq_cfg_); }

void HostInterface::set_ready(bool ready) {
  status_ = (status_ & ~MPRDMA_BAR0__STATUS__READY_bm) | MPR_SET(STATUS, READY, ready);
}

void HostInterface::set_link_up(bool up) {
  status_ = (status_ & ~MPRDMA_BAR0__STATUS__LINK_UP_bm) | MPR_SET(STATUS, LINK_UP, up);
}

void HostInterface::set_fatal(uint32_t syndrome) {
  status_ |= MPR_SET(STATUS, FATAL, 1);
  fatal_syndrome_ = syndrome;
}

void HostInterface::reset_registers() {
  status_ &= MPRDMA_BAR0__STATUS__LINK_UP_bm;
  intr_mask_ = 0xffffffffu;
  intr_pending_ = 0;
  fatal_syndrome_ = 0;
  aq_base_lo_ = aq_base_hi_ = aq_cfg_ = acq_base_lo_ = acq_base_hi_ = 0;
  aq_pi_ = aq_ci_ = acq_pi_ = 0;
  msix_.fill(MsixEntry{});
  pending_writes_.clear();
}

void HostInterface::b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
  const uint64_t addr = gp.get_address();
  const unsigned len = gp.get_data_length();
  uint8_t* data = gp.get_data_ptr();
  gp.set_response_status(tlm::TLM_OK_RESPONSE);

  if (addr >= cfg_.bar0_base && addr + len <= cfg_.bar0_base + kBar0Size) {
    const uint64_t off = addr - cfg_.bar0_base;
    if (len != 4 || (off & 3)) {
      // The register map is 32-bit only; a driver bug must not corrupt it.
      ++bad_accesses_;
      MPR_LOG(log_, warn,
              "BAR0 access of " << len << " bytes at 0x" << std::hex << off
                                << " ignored (registers are 32-bit)");
      if (gp.is_read()) std::memset(data, 0xff, len);
      return;
    }
    if (gp.is_read()) {
      ++mmio_reads_;
      // PCIe ordering: a read does not pass earlier posted writes. Writes
      // that arrive before this read are applied first.
      apply_writes_until(sc_core::sc_time_stamp() + delay);
      uint32_t v = read_bar0(off);
      std::memcpy(data, &v, 4);
    } else {
      ++mmio_writes_;
      uint32_t v;
      std::memcpy(&v, data, 4);
      const sc_core::sc_time at = sc_core::sc_time_stamp() + delay;
      pending_writes_.push_back({at, off, v});
      calendar_.at(at, [this, at] { apply_writes_until(at); });
    }
    return;
  }

  const uint64_t bar2_size = uint64_t(cfg_.limits.num_uar_pages) * MPR_UAR_PAGE_SIZE;
  if (addr >= cfg_.bar2_base && addr + len <= cfg_.bar2_base + bar2_size) {
    const uint64_t off = addr - cfg_.bar2_base;
    if (gp.is_read()) {
      // UAR pages are write-only; reads return all ones like an empty BAR.
      std::memset(data, 0xff, len);
      return;
    }
    const uint32_t page = static_cast<uint32_t>(off / MPR_UAR_PAGE_SIZE);
    const uint32_t in_page = static_cast<uint32_t>(off % MPR_UAR_PAGE_SIZE);
    if (in_page >= MPR_UAR_BF && in_page < MPR_UAR_BF + MPR_UAR_BF_SIZE && !(len & 7) &&
        !(in_page & 7) && in_page + len <= MPR_UAR_BF + MPR_UAR_BF_SIZE && cb_.uar_wqe) {
      // WQE by MMIO: write-combined lines of a WQE, taken at their arrival.
      ++mmio_writes_;
      std::vector<uint8_t> bytes(data, data + len);
      calendar_.after(delay, [this, page, in_page, bytes = std::move(bytes)]() mutable {
        cb_.uar_wqe(page, in_page - MPR_UAR_BF, std::move(bytes));
      });
      return;
    }
    if (len != 8 || (off & 7)) {
      ++bad_accesses_;
      MPR_LOG(log_, warn,
              "UAR write of " << len << " bytes at 0x" << std::hex << off
                              << " ignored (doorbells are 64-bit)");
      return;
    }
    ++mmio_writes_;
    uint64_t v;
    std::memcpy(&v, data, 8);
    calendar_.after(delay, [this, page, in_page, v] { cb_.uar_write(page, in_page, v); });
    return;
  }

  ++bad_accesses_;
  MPR_LOG(log_, warn,
          "MMIO " << (gp.is_read() ? "read" : "write") << " at 0x" << std::hex << addr
                  << " outside the BARs");
  gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
  if (gp.is_read()) std::memset(data, 0xff, len);
}

void HostInterface::apply_writes_until(const sc_core::sc_time& t) {
  while (!pending_writes_.empty() && pending_writes_.front().at <= t) {
    const PendingWrite w = pending_writes_.front();
    pending_writes_.pop_front();
    write_bar0(w.offset, w.value);
  }
}

uint32_t HostInterface::read_bar0(uint64_t off) {
  if (off >= kMsixBase && off < kMsixEnd) {
    const MsixEntry& e = msix_[(off - kMsixBase) / MPR_BAR0_MSIX_ENTRY_SIZE];
    switch ((off - kMsixBase) % MPR_BAR0_MSIX_ENTRY_SIZE) {
      case offsetof(mprdma_bar0__msix_entry_t_t, ADDR_LO):
        return e.addr_lo;
      case offsetof(mprdma_bar0__msix_entry_t_t, ADDR_HI):
        return e.addr_hi;
      case offsetof(mprdma_bar0__msix_entry_t_t, DATA):
        return e.data;
      default:
        return e.ctrl;
    }
  }
  switch (off) {
    case MPR_BAR0_OFF(ID):
      return MPR_RESET(ID, VENDOR) | MPR_RESET(ID, DEVICE);
    case MPR_BAR0_OFF(VERSION):
      return MPR_SET(VERSION, MAJOR, MPR_IF_VERSION_MAJOR) |
             MPR_SET(VERSION, MINOR, MPR_IF_VERSION_MINOR);
    case MPR_BAR0_OFF(CAPS):
      return fixed_caps() | TransportOffer{cfg_.transport_kinds(), MPR_TRANSPORT_GBN}.caps();
    case MPR_BAR0_OFF(FW_VERSION):
      return MPR_RESET(FW_VERSION, FW);
    case MPR_BAR0_OFF(STATUS):
      return status_ | MPR_SET(STATUS, AQ_ENABLED, aq_enabled());
    case MPR_BAR0_OFF(RESET):
      return 0;
    case MPR_BAR0_OFF(INTR_MASK):
      return intr_mask_;
    case MPR_BAR0_OFF(INTR_PENDING):
      return intr_pending_;
    case MPR_BAR0_OFF(AQ_BASE_LO):
      return aq_base_lo_;
    case MPR_BAR0_OFF(AQ_BASE_HI):
      return aq_base_hi_;
    case MPR_BAR0_OFF(AQ_CFG):
      return aq_cfg_;
    case MPR_BAR0_OFF(AQ_PI):
      return aq_pi_;
    case MPR_BAR0_OFF(AQ_CI):
      return aq_ci_;
    case MPR_BAR0_OFF(ACQ_BASE_LO):
      return acq_base_lo_;
    case MPR_BAR0_OFF(ACQ_BASE_HI):
      return acq_base_hi_;
    case MPR_BAR0_OFF(ACQ_PI):
      return acq_pi_;
    case MPR_BAR0_OFF(UAR_CFG):
      return MPR_SET(UAR_CFG, NUM_PAGES, cfg_.limits.num_uar_pages) |
             MPR_RESET(UAR_CFG, LOG_PAGE_SIZE);
    case MPR_BAR0_OFF(FATAL_SYNDROME):
      return fatal_syndrome_;
    default:
      return 0;  // reserved space reads as zero
  }
}

void HostInterface::write_bar0(uint64_t off, uint32_t v) {
  if (off >= kMsixBase && off < kMsixEnd) {
    const unsigned vec = static_cast<unsigned>((off - kMsixBase) / MPR_BAR0_MSIX_ENTRY_SIZE);
    MsixEntry& e = msix_[vec];
    switch ((off - kMsixBase) % MPR_BAR0_MSIX_ENTRY_SIZE) {
      case offsetof(mprdma_bar0__msix_entry_t_t, ADDR_LO):
        e.addr_lo = v;
        break;
      case offsetof(mprdma_bar0__msix_entry_t_t, ADDR_HI):
        e.addr_hi = v;
        break;
      case offsetof(mprdma_bar0__msix_entry_t_t, DATA):
        e.data = v;
        break;
      default:
        e.ctrl = v & MPRDMA_BAR0__MSIX_ENTRY_T__CTRL__MASK_bm;
        send_pending();
        break;
    }
    return;
  }
  const bool enabled = aq_enabled();
  switch (off) {
    case MPR_BAR0_OFF(RESET):
      if (MPR_GET(RESET, RESET, v)) cb_.reset();
      break;
    case MPR_BAR0_OFF(INTR_MASK):
      intr_mask_ = v;
      send_pending();
      break;
    // The admin queue geometry is frozen while the queue is enabled.
    case MPR_BAR0_OFF(AQ_BASE_LO):
      if (!enabled) aq_base_lo_ = v;
      break;
    case MPR_BAR0_OFF(AQ_BASE_HI):
      if (!enabled) aq_base_hi_ = v;
      break;
    case MPR_BAR0_OFF(ACQ_BASE_LO):
      if (!enabled) acq_base_lo_ = v;
      break;
    case MPR_BAR0_OFF(ACQ_BASE_HI):
      if (!enabled) acq_base_hi_ = v;
      break;
    case MPR_BAR0_OFF(AQ_CFG): {
      const uint32_t geometry =
          MPRDMA_BAR0__AQ_CFG__SQ_LOG_SIZE_bm | MPRDMA_BAR0__AQ_CFG__CQ_LOG_SIZE_bm;
      aq_cfg_ = enabled ? (aq_cfg_ & geometry) | (v & ~geometry) : v;
      if (aq_enabled() != enabled) cb_.aq_enable_changed();
      break;
    }
    case MPR_BAR0_OFF(AQ_PI):
      aq_pi_ = static_cast<uint16_t>(MPR_GET(AQ_PI, PI, v));
      if (enabled) cb_.aq_doorbell();
      break;
    default:
      // Read-only or reserved: writes are ignored, as in hardware.
      MPR_LOG(log_, debug, "write to read-only BAR0 offset 0x" << std::hex << off << " ignored");
      break;
  }
}

void HostInterface::raise(unsigned vector) {
  if (vector >= kNumVectors) return;
  intr_pending_ |= 1u << vector;
  send_pending();
}

void HostInterface::send_pending() {
  for (unsigned vec = 0; vec < kNumVectors; ++vec) {
    const uint32_t bit = 1u << vec;
    if (!(intr_pending_ & bit) || (intr_mask_ & bit) || (msix_[vec].ctrl & 1)) continue;
    intr_pending_ &= ~bit;
    const MsixEntry& e = msix_[vec];
    const uint64_t addr = (uint64_t{e.addr_hi} << 32) | e.addr_lo;
    ++interrupts_;
    MPR_LOG(log_, debug, "MSI-X vector " << vec);
    dma_.send_msi(addr, e.data);
  }
}

}  // namespace mprdma::nic
