#include "vp/nic/command_processor.h"

#include <cstring>
#include <vector>

namespace mprdma::nic {

CommandProcessor::CommandProcessor(sc_core::sc_module_name name, const NicConfig& cfg,
                                   core::SimEnv& env, const core::ClockDomain& clock,
                                   pcie::DmaInitiator& dma, HostInterface& hostif,
                                   ContextMemory& contexts, DataPathHooks hooks)
    : sc_core::sc_module(name),
      cfg_(cfg),
      env_(env),
      clock_(clock),
      dma_(dma),
      hostif_(hostif),
      contexts_(contexts),
      hooks_(std::move(hooks)),
      firmware_(*this),
      log_(core::Log::channel("nic." + cfg.name + ".firmware")),
      commands_(env.stats.counter("nic." + cfg.name + ".firmware.commands", "commands",
                                  "Admin commands executed")),
      command_errors_(env.stats.counter("nic." + cfg.name + ".firmware.command_errors", "commands",
                                        "Admin commands answered with an error")) {
  SC_THREAD(core_thread);
}

void CommandProcessor::reset() {
  ++generation_;
  counters_at_reset_ = raw_counters();
  aq_ci_ = 0;
  acq_pi_ = 0;
  wake_.notify(sc_core::SC_ZERO_TIME);
  dma_done_.notify(sc_core::SC_ZERO_TIME);
}

void CommandProcessor::core_thread() {
  for (;;) {
    while (!hostif_.aq_enabled()) wait(wake_);
    command_generation_ = generation_;
    firmware_.run();
    // run() returns when the queue is disabled or the device was reset.
    if (!hostif_.aq_enabled()) continue;
    wait(wake_);
  }
}

bool CommandProcessor::next_command(mpr_cmd& cmd) {
  for (;;) {
    if (!hostif_.aq_enabled() || !current()) return false;
    if (aq_ci_ != hostif_.aq_pi()) break;
    wait(wake_);
  }
  const unsigned log_size = hostif_.aq_sq_log_size();
  const uint64_t slot = hostif_.aq_base() + (aq_ci_ & ((1u << log_size) - 1)) * MPR_CMD_SIZE;
  if (!dma_read(slot, &cmd, sizeof cmd)) {
    // The driver pointed the admin queue at memory that is not there: the
    // queue cannot make progress, which is a fatal device error.
    if (current()) {
      MPR_LOG(log_, error, "admin queue entry at 0x" << std::hex << slot << " unreadable");
      hostif_.set_fatal(1);
    }
    return false;
  }
  ++aq_ci_;
  hostif_.set_aq_ci(aq_ci_);
  wait(clock_.cycles(static_cast<uint64_t>(cfg_.latency.command)));
  return current();
}

void CommandProcessor::complete_command(const mpr_cmd_comp& comp_in) {
  if (!current()) return;
  mpr_cmd_comp comp = comp_in;
  const unsigned log_size = hostif_.aq_cq_log_size();
  comp.owner = MPR_PHASE(acq_pi_, log_size);
  const uint64_t slot = hostif_.acq_base() + (acq_pi_ & ((1u << log_size) - 1)) * sizeof comp;
  ++commands_;
  if (comp.status != MPR_CMD_OK) {
    ++command_errors_;
    MPR_LOG(log_, info,
            "command id " << comp.cmd_id << " failed: " << Firmware::status_name(comp.status)
                          << " syndrome " << comp.syndrome);
  }
  dma_.write(slot, &comp, sizeof comp);
  ++acq_pi_;
  hostif_.set_acq_pi(acq_pi_);
  if (hostif_.aq_intr_enabled()) hostif_.raise(hostif_.aq_vector());
}

bool CommandProcessor::dma_read(uint64_t pa, void* dst, size_t len) {
  bool ok = false, done = false;
  const uint64_t gen = generation_;
  dma_.read(pa, len, [&, gen](bool success, const uint8_t* data, size_t n) {
    if (gen != generation_) return;  // the thread has moved on after a reset
    ok = success;
    if (success) std::memcpy(dst, data, n);
    done = true;
    dma_done_.notify(sc_core::SC_ZERO_TIME);
  });
  while (!done) {
    wait(dma_done_);
    if (gen != generation_) return false;
  }
  return ok;
}

bool CommandProcessor::dma_write(uint64_t pa, const void* src, size_t len) {
  if (!current()) return false;
  // Posted: the firmware does not wait. A bad address is only visible to the
  // host's error reporting, as on real PCIe.
  dma_.write(pa, src, len);
  return true;
}

void CommandProcessor::qp_state_changed(uint32_t qpn, uint8_t from, uint8_t to) {
  MPR_LOG(log_, debug, "QP " << qpn << " state " << int(from) << " -> " << int(to));
  if (hooks_.qp_state_changed) hooks_.qp_state_changed(qpn, from, to);
}

void CommandProcessor::qp_destroyed(uint32_t qpn) {
  if (hooks_.qp_destroyed) hooks_.qp_destroyed(qpn);
}

// The NIC statistic behind each port counter (0 where the NIC has no such
// block, e.g. DCQCN off).
mpr_port_counters CommandProcessor::raw_counters() const {
  static const char* const kStat[MPR_CNT_NUM] = {
      "mac.tx_packets",        "mac.rx_packets",       "mac.tx_bytes",   "mac.rx_bytes",
      "requester.retransmits", "requester.timeouts",   "requester.naks", "responder.seq_naks",
      "responder.rnr_naks",    "responder.duplicates", "mac.rx_drops",   "mac.ce_rx",
      "dcqcn.cnp_tx",          "dcqcn.cnp_rx",         "cq.error_cqes",
  };
  mpr_port_counters n{};
  for (int i = 0; i < MPR_CNT_NUM; ++i)
    if (const core::Counter* c = env_.stats.find_counter("nic." + cfg_.name + "." + kStat[i]))
      n.value[i] = c->value();
  return n;
}

mpr_port_counters CommandProcessor::counters() const {
  mpr_port_counters n = raw_counters();
  for (int i = 0; i < MPR_CNT_NUM; ++i) n.value[i] -= counters_at_reset_.value[i];
  return n;
}

TransportOffer CommandProcessor::transports() const {
  return TransportOffer{cfg_.transport_kinds(), cfg_.transport_kind(cfg_.transport)};
}

PortInfo CommandProcessor::port() const {
  PortInfo p;
  p.mac = cfg_.mac;
  switch (cfg_.mtu.n) {
    case 256:
      p.max_mtu = MPR_MTU_256;
      break;
    case 512:
      p.max_mtu = MPR_MTU_512;
      break;
    case 1024:
      p.max_mtu = MPR_MTU_1024;
      break;
    case 2048:
      p.max_mtu = MPR_MTU_2048;
      break;
    default:
      p.max_mtu = MPR_MTU_4096;
      break;
  }
  p.speed_mbps = cfg_.port_speed_mbps;
  p.link_up = link_up_;
  return p;
}

}  // namespace mprdma::nic
