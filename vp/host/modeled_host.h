// A modeled host: sparse physical memory, a PCIe root complex and link, its
// NIC, and the driver that boots at time zero. Applications run in their own
// threads with their own address spaces and verbs contexts.
#pragma once

#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/sim_env.h"
#include "vp/host/address_space.h"
#include "vp/host/driver.h"
#include "vp/host/host.h"
#include "vp/host/host_config.h"
#include "vp/host/sparse_memory.h"
#include "vp/nic/nic.h"
#include "vp/pcie/pcie_config.h"
#include "vp/pcie/pcie_link.h"
#include "vp/pcie/root_complex.h"

namespace mprdma::host {

class ModeledHost : public sc_core::sc_module, public Host {
 public:
  SC_HAS_PROCESS(ModeledHost);
  ModeledHost(sc_core::sc_module_name name, const HostConfig& host, const nic::NicConfig& nic,
              const pcie::PcieConfig& pcie, core::SimEnv& env);

  nic::Nic& nic() override { return nic_; }
  const char* kind() const override { return "modeled"; }
  Driver& driver() { return driver_; }
  SparseMemory& memory() { return mem_; }
  pcie::RootComplex& root_complex() { return rc_; }
  const HostConfig& config() const { return cfg_; }
  // A new process address space on this host (owned by the host).
  AddressSpace& new_address_space();
  // Waits (in a thread) until the driver has brought the NIC up; rethrows a
  // bring-up failure.
  void wait_ready();
  const std::string& boot_error() const { return boot_error_; }
  // The host's sequence counter (perftest rpc_bw's sequencer): every server
  // thread of the host takes its numbers from it.
  uint64_t next_sequence() { return ++sequence_; }

 private:
  void boot();

  HostConfig cfg_;
  SparseMemory mem_;
  pcie::RootComplex rc_;
  pcie::PcieLink link_;
  nic::Nic nic_;
  Driver driver_;
  std::vector<std::unique_ptr<AddressSpace>> spaces_;
  std::string boot_error_;
  bool booted_ = false;
  uint64_t sequence_ = 0;
  sc_core::sc_event boot_done_;
};

}  // namespace mprdma::host
