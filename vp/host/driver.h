// The modeled host's NIC driver: what the Linux driver does, in C++ on the
// simulated CPU. It brings the NIC up through BAR0 (wait for READY, program
// MSI-X, set up the admin queue), issues admin commands and waits for their
// completions, owns event queue 0 (asynchronous events and completion
// events) and its interrupt handler, and hands out UAR pages.
//
// Every call that touches the device must run in an SC_THREAD (it performs
// MMIO and waits). Commands are serialised: one at a time, like a driver
// holding its admin-queue lock.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/host/sparse_memory.h"
#include "vp/nic/nic_config.h"
#include "vp/pcie/root_complex.h"

namespace mprdma::host {

struct CommandResult {
  uint8_t status = MPR_CMD_OK;
  uint32_t syndrome = 0;
  uint32_t out0 = 0;
  uint32_t out1 = 0, out2 = 0, out3 = 0;  // the completion's other outputs (QUERY_SRQ)
  bool ok() const { return status == MPR_CMD_OK; }
};

// An asynchronous event as the driver received it.
struct AsyncEvent {
  uint8_t type;
  uint32_t data0;
  uint32_t data1;
  uint64_t time_ps;
};

class Driver {
 public:
  Driver(const std::string& name, pcie::RootComplex& rc, SparseMemory& mem,
         const nic::NicConfig& nic, core::SimEnv& env);
  ~Driver();

  // Brings the device up. Throws std::runtime_error with a clear message if
  // it does not become ready or a bring-up command fails.
  void init();
  bool ready() const { return ready_; }
  sc_core::sc_event& ready_event() { return ready_event_; }

  // Executes one admin command (cmd_id is assigned here). `in`/`out` are
  // copied to/from the mailbox area when given.
  CommandResult execute(mpr_cmd& cmd, const void* in = nullptr, size_t in_len = 0,
                        void* out = nullptr, size_t out_len = 0);

  // Register access (32-bit).
  uint32_t read_reg(uint64_t offset);
  void write_reg(uint64_t offset, uint32_t value);
  // A 64-bit doorbell store into UAR page `page`.
  void uar_write64(uint32_t page, uint32_t offset, uint64_t value);
  // `len` bytes at `offset` of UAR page `page`, through the CPU's
  // write-combining buffer (64-byte lines): WQE by MMIO.
  void uar_write_wc(uint32_t page, uint32_t offset, const void* data, uint32_t len);
  // False: uar_write_wc() stores 8 bytes per TLP (HostConfig::write_combining).
  void set_write_combining(bool on) { write_combining_ = on; }

  uint32_t alloc_uar();

  // The CQ with this number got a completion event (armed CQ fired).
  void on_completion_event(uint32_t cqn, std::function<void()> handler);
  void forget_completion_event(uint32_t cqn);

  const mpr_device_attr& device() const { return device_; }
  // Host memory given to the NIC for its context tables (MAP_ICM).
  uint64_t icm_bytes() const { return icm_bytes_; }
  const mpr_port_attr& port() const { return port_; }
  const std::vector<AsyncEvent>& async_events() const { return async_events_; }
  sc_core::sc_event& async_event() { return async_event_; }
  pcie::RootComplex& root_complex() { return rc_; }
  SparseMemory& memory() { return mem_; }
  const nic::NicConfig& nic() const { return nic_; }
  const std::string& name() const { return name_; }
  uint32_t async_eqn() const { return eqn_; }

 private:
  bool write_combining_ = true;
  void map_icm();
  void isr(uint64_t addr, uint32_t data);
  void drain_eq();

  std::string name_;
  pcie::RootComplex& rc_;
  SparseMemory& mem_;
  const nic::NicConfig& nic_;
  core::LogChannel& log_;
  bool ready_ = false;
  sc_core::sc_event ready_event_;

  // Admin queue.
  static constexpr unsigned kAqLogSize = 6;
  uint64_t asq_ = 0, acq_ = 0, mailbox_ = 0;
  static constexpr uint64_t kMailboxBytes = 4u << 20;
  uint16_t asq_pi_ = 0, acq_ci_ = 0, cmd_id_ = 0;
  sc_core::sc_event acq_written_;
  sc_core::sc_mutex cmd_lock_;

  // Event queue 0.
  static constexpr unsigned kEqLogSize = 10;
  uint64_t eq_ = 0;
  uint32_t eq_ci_ = 0;
  uint32_t eqn_ = 0;
  std::map<uint32_t, std::function<void()>> completion_handlers_;
  std::vector<AsyncEvent> async_events_;
  sc_core::sc_event async_event_;

  uint32_t next_uar_ = 1;
  mpr_device_attr device_{};
  uint64_t icm_bytes_ = 0;
  mpr_port_attr port_{};
  core::Counter& commands_;
  core::Counter& interrupts_;
};

}  // namespace mprdma::host
