// Time between QEMU guests and SystemC: the two time modes of the bridge
// and the run-loop step that both need.
//
// free-running (FreeClock): a guest access is injected at the SystemC time
//   the run loop sees it; the run loop keeps SystemC time <= ratio x wall
//   time since the start of the run (it never sleeps while behind).
//
// synchronised (SyncClock): the TCG plugin in vp/qemu/sync_plugin counts
//   guest instructions per translated block, publishes the count in a
//   shared page, and every `quantum` instructions blocks the vCPU until the
//   simulator releases it. Guest instruction n maps to SystemC time
//       origin + n x 2^shift ns + offset
//   (QEMU runs with -icount shift=S,sleep=off, so the guest's own clock is
//   n x 2^S ns too). `offset` is the sum of the SystemC time guest accesses
//   stalled the vCPU (a BAR read's round trip): the guest's clock does not
//   see it, but the CPU timeline does.
//   Lock-step: while the vCPU runs, SystemC stays at the time of the last
//   count it knows; when the vCPU blocks at count c, SystemC advances to
//   time(c) and then releases it for another quantum. A BAR access stamped
//   with the published count s first advances SystemC to time(s), is served
//   (the vCPU is stalled in it), and the slice ends at the reply.
//   Exact (same results run after run, device events seen by the guest at
//   most one quantum late): busy-polling workloads, which keep executing
//   instructions. Not exact: (1) idle: when the guest halts, QEMU warps its
//   clock to the next timer (sleep=off) with no instructions executed, so
//   the guest's clock jumps while SystemC stands still until instructions
//   resume; an interrupt-driven wait therefore sees the device late by up
//   to the warp (run the guest with idle=poll to stay exact); (2)
//   interrupts from the device reach the guest through QEMU's main loop
//   (ivshmem eventfd), not at an instruction boundary SystemC chose; (3)
//   the plugin counts a block when it starts, so a block cut short (an
//   exception, an I/O instruction that makes icount re-translate) counts
//   instructions QEMU's icount does not: SystemC time runs slightly ahead
//   of the guest's clock on such code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "vp/qemu/qemu_fd.h"

namespace mprdma::pcie {

// How the proxy time-stamps guest accesses.
class GuestClock {
 public:
  virtual ~GuestClock() = default;
  // The guest's progress now, from any thread (the proxy's I/O thread calls
  // it when an access arrives; the vCPU is stalled in that access).
  virtual uint64_t stamp() const = 0;
  // SystemC time at which an access stamped `stamp` is due; a time <= now
  // means "now".
  virtual sc_core::sc_time due(uint64_t stamp) const = 0;
  // The access stamped `stamp` has been answered after `stall` of SystemC
  // time.
  virtual void access_done(uint64_t stamp, const sc_core::sc_time& stall) = 0;
  // True when the slice must end at each reply (lock-step).
  virtual bool pause_after_reply() const = 0;
};

class FreeClock : public GuestClock {
 public:
  uint64_t stamp() const override { return 0; }
  sc_core::sc_time due(uint64_t) const override { return sc_core::SC_ZERO_TIME; }
  void access_done(uint64_t, const sc_core::sc_time&) override {}
  bool pause_after_reply() const override { return false; }
};

// The simulator end of the TCG plugin's protocol: a stream socket carrying
// little-endian u64s. Plugin -> simulator: "the vCPU is blocked at
// instruction count c". Simulator -> plugin: "run until the count reaches
// g" (the grant). The plugin's count is also published as a u64 at offset
// 0 of a shared page.
class SyncClock : public GuestClock {
 public:
  struct Config {
    uint64_t quantum = 100000;  // instructions between synchronisations
    int icount_shift = 0;       // one instruction = 2^shift ns
  };
  // Creates the socket pair and the counter page.
  SyncClock(std::string name, const Config& cfg);
  ~SyncClock() override;

  // The fds QEMU inherits (plugin arguments fd=<socket>,shm=<counter>);
  // close_qemu_ends() after spawning QEMU so that its exit is seen as EOF.
  int qemu_socket() const { return qemu_sock_.get(); }
  int qemu_counter() const { return counter_fd_.get(); }
  void close_qemu_ends();

  // SystemC thread. Guest instruction 0 is at `origin`.
  void set_origin(const sc_core::sc_time& origin) { origin_ = origin; }
  // Reads what the plugin sent (never blocks) and releases a vCPU whose
  // blocking count is due at or before `now`.
  void service(const sc_core::sc_time& now);
  // Latest time SystemC may reach before the guest has run further:
  // time(last known count); sc_max_time() once the plugin is gone.
  sc_core::sc_time horizon() const;
  int poll_fd() const { return sock_.get(); }  // -1 after release()
  bool detached() const { return detached_; }
  // The plugin is gone: stop constraining time.
  void detach() { detached_ = true; }
  // Lets the guest run free: closes our end, so a vCPU blocked in the
  // plugin returns at once (QEMU cannot shut down while one is blocked).
  void release() {
    detached_ = true;
    blocked_ = false;
    sock_.reset();
  }

  uint64_t stamp() const override;
  sc_core::sc_time due(uint64_t stamp) const override;
  void access_done(uint64_t stamp, const sc_core::sc_time& stall) override;
  bool pause_after_reply() const override { return !detached_; }

  uint64_t syncs() const { return syncs_; }
  uint64_t last_count() const { return last_count_; }
  bool vcpu_blocked() const { return blocked_; }
  sc_core::sc_time offset() const { return offset_; }
  const Config& config() const { return cfg_; }
  // Problems seen (a broken message, the plugin vanishing); taken by the
  // owner to log.
  std::vector<std::string> take_messages();

 private:
  std::string name_;
  Config cfg_;
  UniqueFd sock_, qemu_sock_, counter_fd_;
  volatile uint64_t* counter_ = nullptr;
  sc_core::sc_time origin_ = sc_core::SC_ZERO_TIME;
  sc_core::sc_time offset_ = sc_core::SC_ZERO_TIME;
  uint64_t last_count_ = 0;
  uint64_t blocked_at_ = 0;
  bool blocked_ = false;
  bool detached_ = false;
  uint64_t syncs_ = 0;
  uint8_t rx_[8] = {};
  size_t rx_len_ = 0;
  std::vector<std::string> messages_;
};

// The step the platform's run loop gives sc_start when QEMU guests take
// part. Usage (between slices, in the thread that calls sc_start):
//
//   QemuRunLoop loop;                   // once
//   loop.add(&qemu_host);               // every QEMU-backed host
//   while (!done) {
//     auto step = loop.next_step(slice);  // may block on QEMU's fds
//     if (!step) break;                   // a QEMU exit asked to stop
//     sc_core::sc_start(*step);           // SC_ZERO_TIME: one delta cycle
//   }
//
// next_step() services every participant (guest accesses enter SystemC
// here), then returns the largest step <= max_slice that no participant's
// horizon and no pacing forbid. When time may not advance it waits with
// ppoll on the participants' fds (QEMU's requests wake it at once) and on
// a timeout until wall time allows the next step.
//
// Pacing is event-driven: while SystemC is behind wall time and has
// activity within the allowed window it steps at once (it never sleeps
// while behind with work to do); when the model is idle it sleeps until
// wall time reaches SystemC's next activity (or `idle_step`), so an idle
// simulation costs no CPU and a device event still happens on time. It
// lowers the calling thread's timer slack to 1 us so those timeouts are
// honoured to the microsecond.
class QemuRunLoop {
 public:
  class Participant {
   public:
    virtual ~Participant() = default;
    // Non-blocking: take what QEMU sent, inject due guest accesses into
    // SystemC, release vCPUs whose time has come, drain wait_fds().
    virtual void service() = 0;
    // Latest SystemC time the simulation may reach now (sc_max_time(): no
    // constraint).
    virtual sc_core::sc_time horizon() const = 0;
    // A guest access is being served: step to it without minimum steps.
    virtual bool busy() const = 0;
    // Something was injected at the current time since the last call and
    // needs (at least) a delta cycle.
    virtual bool take_kick() = 0;
    // SystemC time per wall time this participant asks for (0: none).
    virtual double pacing_ratio() const = 0;
    // Fds whose readability means service() has work.
    virtual void wait_fds(std::vector<int>* fds) const = 0;
    // The simulation should stop (e.g. QEMU exited and on_exit is stop).
    virtual bool stop_requested() const = 0;
  };

  struct Options {
    // Under pacing, an idle model's time still follows wall time in steps
    // of at least this (progress reports, end times).
    sc_core::sc_time idle_step = sc_core::sc_time(1, sc_core::SC_MS);
    // Longest single wait (fds wake it earlier); only bounds how long a
    // condition no fd signals could go unnoticed.
    std::chrono::milliseconds max_wait{100};
  };

  QemuRunLoop() = default;
  explicit QemuRunLoop(const Options& opt) : opt_(opt) {}

  void add(Participant* p) { parts_.push_back(p); }
  void remove(Participant* p);
  bool empty() const { return parts_.empty(); }

  // See the class comment. nullopt: a participant asked to stop.
  std::optional<sc_core::sc_time> next_step(const sc_core::sc_time& max_slice);

  // Pacing: the SystemC time wall time allows now (sc_max_time() without
  // pacing). Starts counting at the first next_step().
  sc_core::sc_time paced_limit() const;
  // Wall time spent waiting in next_step() (for reports).
  double waited_seconds() const { return waited_s_; }

 private:
  double ratio() const;

  Options opt_;
  std::vector<Participant*> parts_;
  bool started_ = false;
  std::chrono::steady_clock::time_point wall0_;
  sc_core::sc_time sim0_ = sc_core::SC_ZERO_TIME;
  double waited_s_ = 0;
};

}  // namespace mprdma::pcie
