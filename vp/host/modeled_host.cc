#include "vp/host/modeled_host.h"

#include <stdexcept>

namespace mprdma::host {

ModeledHost::ModeledHost(sc_core::sc_module_name name, const HostConfig& host,
                         const nic::NicConfig& nic, const pcie::PcieConfig& pcie, core::SimEnv& env)
    : sc_core::sc_module(name),
      cfg_(host),
      mem_(host.memory_base, host.memory.n),
      rc_("rc", mem_, env, nic.name),
      link_("pcie", pcie, env, nic.name),
      nic_("nic", nic, env),
      driver_(std::string(this->basename()), rc_, mem_, nic_.config(), env) {
  rc_.mmio.bind(link_.rc_mmio);
  link_.ep_mmio.bind(nic_.mmio_socket());
  nic_.dma_socket().bind(link_.ep_dma);
  nic_.set_host_memory_check(
      [this](uint64_t pa, uint64_t len) { return rc_.dma_addressable(pa, len); });
  link_.rc_dma.bind(rc_.dma);
  driver_.set_write_combining(host.write_combining);
  SC_THREAD(boot);
}

AddressSpace& ModeledHost::new_address_space() {
  spaces_.push_back(std::make_unique<AddressSpace>(mem_));
  return *spaces_.back();
}

void ModeledHost::boot() {
  try {
    driver_.init();
  } catch (const std::exception& e) {
    boot_error_ = e.what();
  }
  booted_ = true;
  boot_done_.notify(sc_core::SC_ZERO_TIME);
}

void ModeledHost::wait_ready() {
  while (!booted_) sc_core::wait(boot_done_);
  if (!boot_error_.empty()) throw std::runtime_error(boot_error_);
}

}  // namespace mprdma::host
