// What the NIC wrappers of the RTL engines (mp_rdma_rx_nic, mp_rdma_tx_nic,
// gbn_qp_nic) share: the --trace-rtl window of a NIC, and the report that
// stops a run at a lockstep divergence, with its replay waveform.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

#include "vp/core/sim_env.h"

namespace mprdma::nic::rtl {

// The waveform window --trace-rtl asked for NIC `nic` (env.rtl_traces),
// written to <env.out_dir>/<file>. std::invalid_argument when a window is
// asked for without an output directory.
class RtlWaveformWindow {
 public:
  RtlWaveformWindow(const core::SimEnv& env, const std::string& nic, const std::string& file) {
    auto w = env.rtl_traces.find(nic);
    if (w == env.rtl_traces.end()) return;
    if (env.out_dir.empty())
      throw std::invalid_argument("nic " + nic + ": RTL waveforms need an output directory");
    window_ = w->second;
    path_ = env.out_dir + "/" + file;
  }

  // The engine must be made traceable.
  bool wanted() const { return !path_.empty(); }

  // Before an operation at NIC cycle `now`: opens engine `e`'s FST when the
  // window starts (once), closes it when an operation comes after the
  // window. Engine: advance_to, trace_fst, close_trace, tracing.
  template <class Engine>
  void before(Engine& e, uint64_t now, uint64_t period_ps) {
    if (path_.empty()) return;
    const uint64_t t = now * period_ps;
    if (!e.tracing() && !opened_ && t >= window_.from_ps && t <= window_.to_ps) {
      e.advance_to(now);
      e.trace_fst(path_, period_ps);
      opened_ = true;
    } else if (e.tracing() && t > window_.to_ps) {
      e.close_trace();
    }
  }

 private:
  core::SimEnv::TraceWindow window_;
  std::string path_;  // empty: no waveform
  bool opened_ = false;
};

// Stops the run at a lockstep divergence: std::runtime_error with "nic N,
// QP Q (<row_kind> R): <report>", and, when the run has an output
// directory, the replay waveform `replay(path, period_ps)` writes (it
// returns how many operations it replayed) at <env.out_dir>/<file>.
template <class Replay>
[[noreturn]] void throw_divergence(const core::SimEnv& env, const std::string& nic, uint32_t qpn,
                                   const char* row_kind, uint32_t row, const std::string& report,
                                   const std::string& file, uint64_t period_ps, Replay replay) {
  std::string msg = "nic " + nic + ", QP " + std::to_string(qpn) + " (" + row_kind + " " +
                    std::to_string(row) + "): " + report;
  if (!env.out_dir.empty()) {
    const std::string path = env.out_dir + "/" + file;
    try {
      const size_t n = replay(path, period_ps);
      msg += "  waveform: " + path + " (the last " + std::to_string(n) +
             " operations replayed from the RTL's own contexts, each at its cycle)\n";
    } catch (const std::exception& e) {
      msg += "  no waveform: " + std::string(e.what()) + "\n";
    }
  }
  throw std::runtime_error(msg);
}

}  // namespace mprdma::nic::rtl
