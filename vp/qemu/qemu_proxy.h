// The device end of QEMU's x-pci-proxy-dev: serves one QEMU's config-space
// and BAR accesses for the NIC function and keeps the guest-memory map.
//
// Threads and injection (the choice, and why):
//   * An I/O thread owns the socket. It answers what needs no simulation
//     at once: config reads/writes (the config space model below), BAR
//     accesses no BAR claims (reads all ones, like a master abort),
//     SYNC_SYSMEM (GuestMemory::replace) and SET_IRQFD (accepted, closed:
//     the irqfd only works with KVM). So QEMU's start-up handshake and the
//     guest's PCI enumeration never wait for SystemC.
//   * BAR accesses the NIC claims, and DEVICE_RESET, need the model. The
//     I/O thread decodes them against the BARs as programmed at that
//     moment, time-stamps them (GuestClock::stamp) and queues them under a
//     mutex, then signals an eventfd. It never calls into SystemC.
//   * The run loop (QemuRunLoop, between sc_start slices, in the SystemC
//     thread) calls service(): due accesses move to a SystemC-side queue
//     and an sc_event wakes the worker SC_THREAD, which performs them
//     through the RootComplex (mmio_read / mmio_write, so the PCIe link's
//     timing applies) and sends RET from the SystemC thread as soon as the
//     value exists. We chose the queue + run-loop hand-off over
//     sc_prim_channel::async_request_update() because the injection time
//     must be chosen by the run loop (pacing or the instruction count):
//     an asynchronous update would land at whatever time the kernel
//     happens to be at, and cannot wake a kernel that is not running.
//   * The vCPU that made the access is stalled until the reply (QEMU waits
//     with its big lock released); one request is outstanding at a time.
//
// Backpressure: a well-behaved QEMU has one access outstanding, but
// anything on the socket can send accesses without waiting for replies.
// The proxy holds at most kMaxQueued accesses taken from the socket and
// not yet answered (queued for SystemC, pending, being performed). At the
// bound the I/O thread stops reading the socket (the kernel's socket
// buffer fills and the sender's writes block) until the SystemC side has
// answered down to kResumeAt; it never drops or refuses an access, so the
// flood is performed whole and in order, only slower. While paused it
// still watches the stop eventfd (stop() and destruction return at once)
// and the socket for hang-up (a QEMU that goes away is seen at once). A
// read or DEVICE_RESET behind the flood waits its turn and is answered in
// order: the SystemC side never waits for the I/O thread, so draining
// cannot stall. Counted in counts().backpressure and the statistic
// pcie.<name>.proxy.backpressure; the first pause is logged at warn level.
//
// Addresses: QEMU sends absolute guest-physical addresses. BAR i's offset
// is rebased onto `bar_target[i]`, the address at which the device behind
// the root complex decodes that BAR (the NIC's bar0_base/bar2_base), so
// the NIC needs no change when the guest moves its BARs.
//
// Replies: every RET (from the I/O thread or the worker) is written whole
// or not at all, within QemuProxyConfig::reply_deadline of wall time. The
// socket is written without blocking (MSG_DONTWAIT) and, when QEMU's
// socket buffer is full, poll()ed for room with what is left of the
// deadline, so partial writes continue where they stopped. QEMU reads
// every reply (one request outstanding), so its buffer never fills; only
// a peer that sends requests and never reads can make a write wait, and
// it then waits at most the deadline instead of stalling the SystemC
// thread (or the I/O thread, and stop() behind it) for ever. A write that
// misses the deadline, or fails, ends the connection like a QEMU that
// goes away ("QEMU did not read its replies for 10 s"): nothing more is
// written after a message that went out torn. Counted in
// counts().reply_waits / reply_timeouts (statistics
// pcie.<name>.proxy.reply_waits / reply_timeouts). Writers hold send_mu_
// while they write, so one waits for the other at most one deadline; a
// writer waiting for room also watches the stop eventfd, so stop() and
// destruction return at once. A writer that gives up marks the socket
// broken under send_mu_ (nothing is written after it) and disconnects
// after releasing send_mu_, so the SystemC thread ending the connection
// cannot deadlock with the I/O thread.
//
// Disconnection (EOF, a protocol error, a reply that could not be sent):
// the guest-memory map is cleared at once (the simulator stops touching
// QEMU's RAM), queued accesses are dropped, and on_disconnect(reason) runs
// once in the SystemC thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <systemc>
#include <thread>
#include <vector>

#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/stats.h"
#include "vp/pcie/root_complex.h"
#include "vp/qemu/guest_memory.h"
#include "vp/qemu/qemu_config_space.h"
#include "vp/qemu/qemu_fd.h"
#include "vp/qemu/qemu_mpqemu.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::pcie {

struct QemuProxyConfig {
  // Labels: log channel qemu.<name>.proxy, statistics pcie.<name>.proxy.*
  // (the NIC's name, like the root complex's).
  std::string name = "nic0";
  PciConfigSpace::Identity identity;
  // BAR sizes (0: not implemented) and where the device decodes each BAR.
  std::array<uint32_t, PciConfigSpace::kNumBars> bar_size{{64 * 1024, 0, 4 * 1024 * 1024, 0, 0, 0}};
  std::array<uint64_t, PciConfigSpace::kNumBars> bar_target{};
  // The default reply deadline, 10 s. QEMU has one request outstanding
  // and reads its reply before it sends the next request, so at most one
  // RET is ever unread and no write to QEMU waits at all: the deadline
  // cannot end a working QEMU however slowly TCG runs it. A write waits
  // only when the peer has left its socket buffer full (hundreds of unread
  // replies at the default buffer size). Generous all the same: a reader
  // starved of CPU on a loaded 2-core CI machine is late by milliseconds,
  // at worst a few hundred; 10 s is tens of times that. And short enough
  // that a peer that stopped reading is diagnosed well inside a test's
  // 120 s timeout instead of hanging the run.
  static constexpr std::chrono::milliseconds kDefaultReplyDeadline{10000};
  // How long a reply may wait for room in QEMU's socket buffer before the
  // connection is ended (see Replies in the file comment); > 0. Tests
  // shorten it; the default is kDefaultReplyDeadline.
  std::chrono::milliseconds reply_deadline = kDefaultReplyDeadline;
};

class QemuProxy : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(QemuProxy);
  // The proxy accesses the device through `rc` (its mmio socket must be
  // bound) and maps guest RAM into `mem`; `clock` time-stamps accesses.
  QemuProxy(sc_core::sc_module_name name, const QemuProxyConfig& cfg, RootComplex& rc,
            GuestMemory& mem, GuestClock& clock, core::SimEnv& env);
  ~QemuProxy() override;

  // Serves QEMU on `sock`, a connected stream socket (ownership taken).
  void start(UniqueFd sock);
  // Stops the I/O thread and closes the socket (QEMU sees EOF); counts as
  // a disconnection ("closed by the simulator").
  void stop();

  // --- SystemC thread, between slices (QemuRunLoop) ---
  // Logs what the I/O thread noted, injects accesses due at or before now,
  // reports a disconnection.
  void service();
  // Readable when service() has work.
  int wake_fd() const { return wake_.get(); }
  // Due time of the oldest access not yet injected (sc_max_time(): none).
  sc_core::sc_time next_due() const;
  // An access is injected and not yet answered.
  bool busy() const { return in_flight_ > 0; }
  // Something was injected since the last call.
  bool take_kick() { return std::exchange(kicked_, false); }

  // DEVICE_RESET: reset the device model (SystemC thread, in the worker;
  // the reply follows when it returns).
  std::function<void()> on_device_reset;
  // QEMU went away: EOF, a socket error or a protocol error (SystemC
  // thread, once).
  std::function<void(const std::string& why)> on_disconnect;
  // When every posted write issued so far will have reached the device.
  // If set, a BAR read is issued only from then on. PCIe forbids a read to
  // pass a posted write, but a device model that answers reads when they
  // are issued (rather than when they arrive) would let the guest's
  // "writel; readl" flush read return the value from before the write.
  std::function<sc_core::sc_time()> writes_landed;

  // --- any thread ---
  bool connected() const { return started_.load() && !disconnected_.load(); }
  std::string disconnect_reason() const;
  uint64_t bar_base(int bar) const;
  uint16_t command() const;
  bool bus_master() const { return bus_master_.load(); }
  PciConfigSpace config_snapshot() const;

  struct Counts {
    uint64_t sysmem_syncs = 0, irqfds = 0, cfg_reads = 0, cfg_writes = 0;
    uint64_t bar_reads = 0, bar_writes = 0, unclaimed = 0, resets = 0;
    // Times the I/O thread stopped reading the socket at kMaxQueued.
    uint64_t backpressure = 0;
    // Accesses taken from the socket and not yet answered or dropped: now,
    // and the most at any moment so far (never above kMaxQueued).
    uint64_t queued = 0, queued_max = 0;
    // Replies that found QEMU's socket buffer full and waited for room;
    // replies that found none within reply_deadline (each ended the
    // connection, so at most one).
    uint64_t reply_waits = 0, reply_timeouts = 0;
  };
  Counts counts() const;

  // The most BAR accesses and resets the proxy holds (see Backpressure in
  // the file comment). QEMU has one outstanding, so it never gets near;
  // the bound only limits what a misbehaving peer can make the simulator
  // store: 1024 requests of at most 64 bytes, 64 KiB per proxy. Large
  // enough that a peer pipelining on purpose (a test tool) still moves
  // hundreds of accesses per wake-up of the I/O thread; beyond it the
  // socket buffer holds the rest and the sender blocks, which costs
  // nothing here.
  static constexpr size_t kMaxQueued = 1024;
  // Reading resumes when the SystemC side has answered down to this many:
  // half, so that a flood costs one I/O thread wake-up per 512 accesses
  // rather than one per access.
  static constexpr size_t kResumeAt = kMaxQueued / 2;
  // The first kHistory messages QEMU sent, for checking the handshake.
  static constexpr size_t kHistory = 256;
  struct HistoryEntry {
    int32_t cmd;
    uint64_t addr;  // config offset or BAR address
    uint64_t value;
    uint32_t len;
    uint64_t stamp;  // GuestClock::stamp() when it arrived (BAR accesses)
  };
  std::vector<HistoryEntry> history() const;

 private:
  enum class Kind { kRead, kWrite, kReset };
  struct Request {
    Kind kind;
    uint64_t target;  // address on the root complex's MMIO path
    uint32_t size;
    uint64_t value;  // write data (little-endian)
    uint64_t stamp;  // GuestClock::stamp() at arrival
    std::chrono::steady_clock::time_point arrived;
  };

  void io_loop();
  // Handles one message; false ends the session (protocol error).
  bool handle(mpqemu::Message& msg);
  void disconnect(std::string why, bool shut);
  // Sends RET(value) whole within cfg_.reply_deadline, or ends the
  // connection (disconnect with the cause). I/O thread and worker. Holds
  // send_mu_ while writing (taking mu_ inside it only to count and note)
  // and calls disconnect() after releasing it, since disconnect() takes
  // mu_ and then send_mu_.
  void reply(uint64_t value);
  enum class SendStatus { kSent, kTimedOut, kStopped, kFailed };
  // Writes [data, data + len) without blocking, polling for room until
  // `deadline`; *sent counts the bytes written (a partial write resumes
  // there). kStopped: stop() was called meanwhile. kFailed: *err is the
  // errno. Caller holds send_mu_.
  SendStatus send_bounded(const uint8_t* data, size_t len,
                          std::chrono::steady_clock::time_point deadline, size_t* sent, int* err);
  void note(core::LogLevel level, std::string msg);
  void worker();
  // SystemC thread: `n` accesses were answered or dropped; wakes a paused
  // I/O thread once the queue is down to kResumeAt.
  void dequeued(size_t n);
  void record(int32_t cmd, uint64_t addr, uint64_t value, uint32_t len, uint64_t stamp = 0);

  QemuProxyConfig cfg_;
  RootComplex& rc_;
  GuestMemory& mem_;
  GuestClock& clock_;
  core::LogChannel& log_;

  // I/O thread state. room_: the queue drained to kResumeAt (backpressure).
  UniqueFd sock_, stop_, wake_, room_;
  std::thread io_;
  std::atomic<bool> started_{false}, disconnected_{false}, bus_master_{false};
  // stop() was called: a write that fails from now on is our own doing.
  std::atomic<bool> stopping_{false};
  // Replies come from the I/O thread and the worker. Guards sock_ (its
  // writes, shutdown and reset) and send_broken_. Order: send_mu_ may be
  // held while taking mu_, never the other way round.
  std::mutex send_mu_;
  // A reply was not sent whole: nothing more may be written, even before
  // disconnect() has shut the socket (it would follow a torn message).
  bool send_broken_ = false;

  mutable std::mutex mu_;  // guards everything below up to `notes_`
  PciConfigSpace config_;
  std::deque<Request> arrived_;
  std::string disconnect_reason_;
  Counts counts_;  // counts_.queued is the bound's accounting
  // The I/O thread stopped reading at kMaxQueued and waits on room_.
  bool reading_paused_ = false;
  std::vector<HistoryEntry> history_;
  std::vector<std::pair<core::LogLevel, std::string>> notes_;
  // Wall time between consecutive BAR_READs: in a guest's tight read loop,
  // the whole round trip as the guest sees it.
  std::vector<double> read_intervals_us_;
  std::chrono::steady_clock::time_point last_read_{};

  // SystemC-side state.
  std::deque<Request> pending_;  // taken from arrived_, not yet due
  std::deque<Request> work_;     // injected, for the worker
  sc_core::sc_event kick_;
  int in_flight_ = 0;
  bool kicked_ = false;
  bool disconnect_reported_ = false;

  core::Counter* c_sysmem_;
  core::Counter* c_cfg_reads_;
  core::Counter* c_cfg_writes_;
  core::Counter* c_bar_reads_;
  core::Counter* c_bar_writes_;
  core::Counter* c_unclaimed_;
  core::Counter* c_resets_;
  core::Counter* c_backpressure_;
  core::Counter* c_queued_max_;
  core::Counter* c_reply_waits_;
  core::Counter* c_reply_timeouts_;
  core::Histogram* h_read_wall_us_;
  core::Histogram* h_read_interval_us_;
  core::Histogram* h_queue_us_;
  core::Histogram* h_access_sim_ns_;
};

}  // namespace mprdma::pcie
