#include "vp/pcie/root_complex.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "vp/pcie/tlp.h"

namespace mprdma::pcie {

using sc_core::sc_time;
using sc_core::sc_time_stamp;

RootComplex::RootComplex(sc_core::sc_module_name name, HostMemoryIf& mem, core::SimEnv& env,
                         std::string stats_name)
    : sc_core::sc_module(name),
      mmio("mmio"),
      dma("dma"),
      mem_(mem),
      prefix_("pcie." +
              (stats_name.empty() ? std::string(static_cast<const char*>(name)) : stats_name)),
      log_(core::Log::channel(prefix_)),
      cal_("calendar") {
  dma.register_b_transport(this, &RootComplex::dma_b_transport);
  dma_write_errors_ = &env.stats.counter(prefix_ + ".dma_write_errors", "transactions",
                                         "DMA writes dropped because memory is not backed");
  dma_read_errors_ = &env.stats.counter(prefix_ + ".dma_read_service_errors", "requests",
                                        "DMA read requests that touched unbacked memory");
  msis_ = &env.stats.counter(prefix_ + ".msis", "interrupts", "MSI writes delivered");
  mmio_read_errors_ = &env.stats.counter(prefix_ + ".mmio_read_errors", "transactions",
                                         "MMIO reads the device answered with an error");
}

sc_time RootComplex::post_mmio_write(uint64_t addr, const void* data, size_t len) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  sc_time stall = sc_core::SC_ZERO_TIME;
  uint64_t a = addr;
  const uint64_t end = addr + len;
  while (a < end) {
    const uint64_t line_end = (a & ~(kWcLineBytes - 1)) + kWcLineBytes;
    const uint64_t n = std::min(end, line_end) - a;
    tlm::tlm_generic_payload gp;
    gp.set_command(tlm::TLM_WRITE_COMMAND);
    gp.set_address(a);
    // The device copies during b_transport; the payload dies with this loop.
    gp.set_data_ptr(const_cast<uint8_t*>(bytes + (a - addr)));
    gp.set_data_length(static_cast<unsigned int>(n));
    gp.set_streaming_width(static_cast<unsigned int>(n));
    gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = sc_core::SC_ZERO_TIME;
    mmio->b_transport(gp, delay);
    if (gp.is_response_error())
      MPR_LOG(log_, warn,
              "MMIO write 0x" << std::hex << a << std::dec << " " << n << " B: device answered "
                              << gp.get_response_string());
    stall = delay;  // lines drain in order: the last one bounds the stall
    a += n;
  }
  return stall;
}

void RootComplex::mmio_write(uint64_t addr, const void* data, size_t len) {
  const sc_time stall = post_mmio_write(addr, data, len);
  if (stall > sc_core::SC_ZERO_TIME) sc_core::wait(stall);
}

void RootComplex::mmio_read(uint64_t addr, void* data, size_t len) {
  tlm::tlm_generic_payload gp;
  gp.set_command(tlm::TLM_READ_COMMAND);
  gp.set_address(addr);
  gp.set_data_ptr(static_cast<uint8_t*>(data));
  gp.set_data_length(static_cast<unsigned int>(len));
  gp.set_streaming_width(static_cast<unsigned int>(len));
  gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
  sc_time delay = sc_core::SC_ZERO_TIME;
  mmio->b_transport(gp, delay);
  if (gp.is_response_error()) {
    // A failed non-posted read returns all ones to the CPU, as on x86.
    std::memset(data, 0xff, len);
    mmio_read_errors_->add();
    MPR_LOG(log_, warn,
            "MMIO read 0x" << std::hex << addr << std::dec << " " << len << " B: device answered "
                           << gp.get_response_string());
  }
  if (delay > sc_core::SC_ZERO_TIME) sc_core::wait(delay);
}

void RootComplex::add_write_watch(uint64_t pa, uint64_t len, sc_core::sc_event* ev) {
  if (ev == nullptr) throw std::invalid_argument(prefix_ + ": write watch without an event");
  watches_.push_back(Watch{pa, len, ev});
}

void RootComplex::remove_write_watch(sc_core::sc_event* ev) {
  watches_.erase(
      std::remove_if(watches_.begin(), watches_.end(), [ev](const Watch& w) { return w.ev == ev; }),
      watches_.end());
}

void RootComplex::dma_b_transport(tlm::tlm_generic_payload& trans, sc_time& delay) {
  const uint64_t pa = trans.get_address();
  const size_t len = trans.get_data_length();
  if (trans.get_byte_enable_ptr() != nullptr) {
    trans.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
    return;
  }
  if (trans.is_read()) {
    if (dma_allowed(pa, len) && mem_.read(pa, trans.get_data_ptr(), len)) {
      trans.set_response_status(tlm::TLM_OK_RESPONSE);
    } else {
      dma_read_errors_->add();
      trans.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    }
    return;
  }
  if (trans.is_write()) {
    const uint8_t* src = trans.get_data_ptr();
    std::vector<uint8_t> copy(src, src + len);
    const sc_time when = sc_time_stamp() + delay;
    if (is_msi_address(pa)) {
      cal_.at(when, [this, pa, d = std::move(copy)] { deliver_msi(pa, d); });
    } else {
      cal_.at(when, [this, pa, d = std::move(copy)] { commit(pa, d); });
    }
    trans.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  trans.set_response_status(tlm::TLM_OK_RESPONSE);
}

void RootComplex::revoke_dma(uint64_t pa, uint64_t len) {
  if (len == 0) return;
  const uint64_t last = pa + len - 1 < pa ? UINT64_MAX : pa + len - 1;
  revoked_.emplace_back(pa, last);
}

bool RootComplex::dma_addressable(uint64_t pa, uint64_t len) const {
  if (len && pa + len - 1 < pa) return false;  // wraps
  const uint64_t last = len ? pa + len - 1 : pa;
  const bool msi = pa < kMsiWindowEnd && last >= kMsiWindowBase;
  return !msi && dma_allowed(pa, len) && mem_.backed(pa, len);
}

bool RootComplex::dma_allowed(uint64_t pa, uint64_t len) const {
  if (revoked_.empty() || len == 0) return true;
  const uint64_t last = pa + len - 1 < pa ? UINT64_MAX : pa + len - 1;
  for (const auto& [first, end] : revoked_)
    if (pa <= end && first <= last) return false;
  return true;
}

void RootComplex::commit(uint64_t pa, const std::vector<uint8_t>& data) {
  if (!dma_allowed(pa, data.size()) || !mem_.write(pa, data.data(), data.size())) {
    dma_write_errors_->add();
    uint64_t suppressed = 0;
    if (write_error_log_.allow(&suppressed))
      MPR_LOG(log_, warn,
              "DMA write 0x" << std::hex << pa << std::dec << " " << data.size()
                             << " B to unbacked memory dropped (" << suppressed
                             << " more since the last report)");
    return;
  }
  const uint64_t end = pa + data.size();
  for (const Watch& w : watches_) {
    if (pa < w.pa + w.len && w.pa < end) w.ev->notify(sc_core::SC_ZERO_TIME);
  }
}

void RootComplex::deliver_msi(uint64_t pa, const std::vector<uint8_t>& data) {
  uint32_t value = 0;
  for (size_t i = 0; i < std::min<size_t>(4, data.size()); ++i)
    value |= static_cast<uint32_t>(data[i]) << (8 * i);
  msis_->add();
  if (!on_msi) {
    MPR_LOG(log_, warn,
            "MSI 0x" << std::hex << pa << " data 0x" << value << " with no handler set");
    return;
  }
  on_msi(pa, value);
}

}  // namespace mprdma::pcie
