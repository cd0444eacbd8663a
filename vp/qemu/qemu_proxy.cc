#include "vp/qemu/qemu_proxy.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace mprdma::pcie {

using sc_core::sc_time;

namespace {

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

bool valid_bar_size(uint32_t s) { return s == 1 || s == 2 || s == 4 || s == 8; }

// "10" for 10 s, "0.1" for 100 ms: the deadline as the messages give it.
std::string seconds_text(std::chrono::milliseconds d) {
  std::ostringstream os;
  os << static_cast<double>(d.count()) / 1000.0;
  return os.str();
}

}  // namespace

QemuProxy::QemuProxy(sc_core::sc_module_name name, const QemuProxyConfig& cfg, RootComplex& rc,
                     GuestMemory& mem, GuestClock& clock, core::SimEnv& env)
    : sc_core::sc_module(name),
      cfg_(cfg),
      rc_(rc),
      mem_(mem),
      clock_(clock),
      log_(core::Log::channel("qemu." + cfg.name + ".proxy")),
      config_(cfg.identity, cfg.bar_size) {
  static_assert(sizeof(Request) <= 64, "kMaxQueued's comment promises 64 KiB per proxy");
  if (cfg_.reply_deadline <= std::chrono::milliseconds::zero())
    throw std::invalid_argument("QEMU proxy " + cfg_.name +
                                ": reply_deadline must be positive, not " +
                                std::to_string(cfg_.reply_deadline.count()) + " ms");
  stop_ = make_eventfd();
  wake_ = make_eventfd();
  room_ = make_eventfd();
  const std::string p = "pcie." + cfg_.name + ".proxy.";
  c_sysmem_ = &env.stats.counter(p + "sysmem_syncs", "messages",
                                 "Guest memory maps received from QEMU (SYNC_SYSMEM)");
  c_cfg_reads_ = &env.stats.counter(p + "config_reads", "accesses", "Config-space reads");
  c_cfg_writes_ = &env.stats.counter(p + "config_writes", "accesses", "Config-space writes");
  c_bar_reads_ = &env.stats.counter(p + "bar_reads", "accesses", "BAR reads served by the NIC");
  c_bar_writes_ = &env.stats.counter(p + "bar_writes", "accesses", "BAR writes served by the NIC");
  c_unclaimed_ = &env.stats.counter(p + "unclaimed", "accesses",
                                    "BAR accesses no BAR claimed (reads answered all ones)");
  c_resets_ = &env.stats.counter(p + "resets", "resets", "DEVICE_RESET requests from QEMU");
  c_backpressure_ = &env.stats.counter(
      p + "backpressure", "pauses",
      "Times the proxy stopped reading QEMU's socket because " + std::to_string(kMaxQueued) +
          " guest accesses were waiting (only a peer that does not wait for replies)");
  c_queued_max_ = &env.stats.counter(
      p + "queued_max", "accesses",
      "Most guest accesses taken from the socket and not yet answered at any moment");
  c_reply_waits_ = &env.stats.counter(
      p + "reply_waits", "replies",
      "Replies that found QEMU's socket buffer full and waited for room (only a peer that does "
      "not read its replies)");
  c_reply_timeouts_ =
      &env.stats.counter(p + "reply_timeouts", "replies",
                         "Replies that found no room in QEMU's socket buffer within " +
                             seconds_text(cfg_.reply_deadline) + " s (the connection was ended)");
  h_read_wall_us_ =
      &env.stats.histogram(p + "bar_read_wall_us", "us",
                           "Wall time from QEMU's BAR_READ arriving to our reply being sent");
  h_read_interval_us_ = &env.stats.histogram(
      p + "bar_read_interval_us", "us",
      "Wall time between consecutive BAR_READs (a guest's read loop: its round trip)");
  h_queue_us_ = &env.stats.histogram(
      p + "access_queue_wall_us", "us",
      "Wall time a guest access waited for the run loop to inject it into SystemC");
  h_access_sim_ns_ = &env.stats.histogram(
      p + "access_sim_ns", "ns", "Simulated time a guest BAR access took (the vCPU's stall)");
  SC_THREAD(worker);
}

QemuProxy::~QemuProxy() { stop(); }

void QemuProxy::start(UniqueFd sock) {
  if (started_.load()) throw std::logic_error(cfg_.name + ": proxy already started");
  sock_ = std::move(sock);
  started_.store(true);
  io_ = std::thread([this] { io_loop(); });
}

void QemuProxy::stop() {
  if (!io_.joinable()) return;
  // Before the signal: whoever sees the socket fail from here on knows
  // the shutdown below is ours. stop_ is never drained, so it stays
  // readable for the paused I/O thread and for a writer waiting for room.
  stopping_.store(true);
  signal_eventfd(stop_.get());
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    // Wakes an I/O thread blocked in the middle of a message.
    if (sock_) ::shutdown(sock_.get(), SHUT_RDWR);
  }
  io_.join();
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    sock_.reset();
  }
  disconnect("closed by the simulator", false);
}

std::string QemuProxy::disconnect_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disconnect_reason_;
}

uint64_t QemuProxy::bar_base(int bar) const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.bar_base(bar);
}

uint16_t QemuProxy::command() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_.command();
}

PciConfigSpace QemuProxy::config_snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

QemuProxy::Counts QemuProxy::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::vector<QemuProxy::HistoryEntry> QemuProxy::history() const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_;
}

void QemuProxy::note(core::LogLevel level, std::string msg) {
  std::lock_guard<std::mutex> lock(mu_);
  notes_.emplace_back(level, std::move(msg));
}

void QemuProxy::record(int32_t cmd, uint64_t addr, uint64_t value, uint32_t len, uint64_t stamp) {
  // Caller holds mu_.
  if (history_.size() < kHistory) history_.push_back(HistoryEntry{cmd, addr, value, len, stamp});
}

// --- I/O thread ------------------------------------------------------------

void QemuProxy::io_loop() {
  for (;;) {
    bool paused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!reading_paused_ && counts_.queued >= kMaxQueued) {
        reading_paused_ = true;
        if (counts_.backpressure++ == 0)
          notes_.emplace_back(
              core::LogLevel::warn,
              "QEMU sent " + std::to_string(kMaxQueued) +
                  " guest accesses without waiting for their replies (QEMU waits for each): "
                  "reading its socket is paused until the simulator has answered half of them; "
                  "nothing is dropped. Logged once; pcie." +
                  cfg_.name + ".proxy.backpressure counts every pause");
      }
      paused = reading_paused_;
    }
    // Paused, the socket is polled for nothing: poll still reports hang-up
    // and errors, so a QEMU that goes away is seen without reading.
    pollfd fds[3] = {{stop_.get(), POLLIN, 0},
                     {sock_.get(), static_cast<short>(paused ? 0 : POLLIN), 0},
                     {room_.get(), POLLIN, 0}};
    if (::poll(fds, paused ? 3 : 2, -1) < 0) {
      if (errno == EINTR) continue;
      disconnect("poll on the proxy socket failed: " + errno_text(errno), true);
      return;
    }
    if (fds[0].revents) return;
    if (paused) {
      if (fds[1].revents & POLLHUP) {
        disconnect("QEMU closed the proxy connection", false);
        return;
      }
      if (fds[1].revents & (POLLERR | POLLNVAL)) {
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(sock_.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        disconnect("proxy connection broken: " + errno_text(err), true);
        return;
      }
      drain_eventfd(room_.get());  // reading_paused_ is rechecked above
      continue;
    }
    if (!fds[1].revents) continue;
    mpqemu::Message msg;
    std::string err;
    switch (mpqemu::recv(sock_.get(), &msg, &err)) {
      case mpqemu::RecvStatus::kEof:
        disconnect("QEMU closed the proxy connection", false);
        return;
      case mpqemu::RecvStatus::kError:
        if (fds[0].revents || stopping_.load()) return;  // our own shutdown
        disconnect("proxy connection broken: " + err, true);
        return;
      case mpqemu::RecvStatus::kOk:
        break;
    }
    if (!handle(msg)) return;
    // A reply that could not be sent (to this message, or the worker's)
    // ended the connection and shut the socket.
    if (disconnected_.load()) return;
  }
}

void QemuProxy::reply(uint64_t value) {
  // A RET framed as QEMU expects it (header and value in one buffer) and
  // written with a deadline: mpqemu::send's write may block without bound.
  uint8_t buf[sizeof(mpqemu::Header) + sizeof value];
  const mpqemu::Header h{mpqemu::kRet, 0, sizeof value};
  std::memcpy(buf, &h, sizeof h);
  std::memcpy(buf + sizeof h, &value, sizeof value);
  std::string why;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (!sock_ || disconnected_.load() || send_broken_) return;
    size_t sent = 0;
    int err = 0;
    const SendStatus status = send_bounded(
        buf, sizeof buf, std::chrono::steady_clock::now() + cfg_.reply_deadline, &sent, &err);
    if (status == SendStatus::kSent) return;
    // Set before send_mu_ is released: another writer may get the lock
    // before disconnect() has shut the socket, and must not write after a
    // torn message.
    send_broken_ = true;
    if (status == SendStatus::kStopped) return;  // stop() reports the disconnection
    const std::string part = sent ? " (" + std::to_string(sent) + " of its " +
                                        std::to_string(sizeof buf) + " bytes sent)"
                                  : std::string();
    if (status == SendStatus::kTimedOut) {
      const std::string s = seconds_text(cfg_.reply_deadline);
      why = "QEMU did not read its replies for " + s + " s";
      std::lock_guard<std::mutex> lock2(mu_);
      ++counts_.reply_timeouts;
      notes_.emplace_back(core::LogLevel::warn,
                          "a RET could not be sent" + part +
                              ": QEMU's socket buffer stayed full for " + s +
                              " s (QEMU reads every reply; this peer sends requests and does not "
                              "read): ending the connection");
    } else if (err == EPIPE || err == ECONNRESET) {
      why = "QEMU closed the proxy connection (a RET could not be sent" + part + ": " +
            errno_text(err) + ")";
    } else {
      why = "sending a RET to QEMU failed" + part + ": " + errno_text(err);
    }
  }
  // send_mu_ released: disconnect() takes mu_ and then send_mu_ to shut the
  // socket, which wakes the I/O thread wherever it waits.
  disconnect(why, true);
}

QemuProxy::SendStatus QemuProxy::send_bounded(const uint8_t* data, size_t len,
                                              std::chrono::steady_clock::time_point deadline,
                                              size_t* sent, int* err) {
  bool waited = false;
  bool hung_up = false;  // the last poll saw hang-up or an error, no room
  while (*sent < len) {
    // MSG_DONTWAIT: this call alone does not block; O_NONBLOCK would change
    // the socket for the I/O thread's reads as well.
    const ssize_t n = ::send(sock_.get(), data + *sent, len - *sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *sent += static_cast<size_t>(n);  // partial: the rest goes next
      hung_up = false;
      continue;
    }
    const int e = n < 0 ? errno : EPIPE;
    if (e == EINTR) continue;
    if ((e != EAGAIN && e != EWOULDBLOCK) || hung_up) {
      *err = e == EAGAIN || e == EWOULDBLOCK ? EPIPE : e;
      return stopping_.load() ? SendStatus::kStopped : SendStatus::kFailed;
    }
    if (!waited) {
      waited = true;
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.reply_waits;
    }
    // No room: wait for some, for stop(), or for the deadline.
    for (;;) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) return SendStatus::kTimedOut;
      // Rounded up: a 0 ms timeout while time is left would spin.
      const int64_t ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
      pollfd fds[2] = {{sock_.get(), POLLOUT, 0}, {stop_.get(), POLLIN, 0}};
      const int r = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(ms, INT_MAX)));
      if (r < 0) {
        if (errno == EINTR) continue;  // the deadline is recomputed
        *err = errno;
        return stopping_.load() ? SendStatus::kStopped : SendStatus::kFailed;
      }
      if (fds[1].revents) return SendStatus::kStopped;
      if (!fds[0].revents) continue;  // poll's timeout: the deadline check above ends it
      // Room, or hang-up/error without room: the next send says which.
      hung_up = !(fds[0].revents & POLLOUT);
      break;
    }
  }
  return SendStatus::kSent;
}

void QemuProxy::disconnect(std::string why, bool shut) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (disconnected_.load()) return;
    disconnect_reason_ = why;
    // Nobody waits for these any more: QEMU is gone or being shut out.
    const size_t dropped = arrived_.size();
    counts_.queued -= dropped;
    arrived_.clear();
    notes_.emplace_back(core::LogLevel::info,
                        "disconnected: " + why +
                            (dropped ? " (" + std::to_string(dropped) +
                                           " guest accesses not yet performed are dropped)"
                                     : std::string()));
    // From now on the simulator does not touch QEMU's memory; dropped before
    // the flag is set, so that whoever sees connected() false finds it gone.
    mem_.clear();
    disconnected_.store(true);
  }
  if (shut) {
    std::lock_guard<std::mutex> lock(send_mu_);
    if (sock_) ::shutdown(sock_.get(), SHUT_RDWR);
  }
  signal_eventfd(wake_.get());
}

bool QemuProxy::handle(mpqemu::Message& msg) {
  using namespace mpqemu;
  switch (msg.cmd) {
    case kSyncSysmem: {
      if (msg.size != sizeof(SyncSysmem)) {
        note(core::LogLevel::error,
             "SYNC_SYSMEM of " + std::to_string(msg.size) + " bytes ignored (expected 192)");
        return true;
      }
      const auto& s = msg.as<SyncSysmem>();
      size_t regions = 0;
      for (int i = 0; i < kMaxRegions; ++i) regions += s.size[i] != 0;
      if (regions != msg.fds.size()) {
        note(core::LogLevel::error, "SYNC_SYSMEM with " + std::to_string(regions) +
                                        " regions but " + std::to_string(msg.fds.size()) +
                                        " fds ignored");
        return true;
      }
      std::vector<GuestMemory::Region> regs;
      size_t k = 0;
      std::string desc;
      for (int i = 0; i < kMaxRegions; ++i) {
        if (!s.size[i]) continue;
        regs.push_back(
            GuestMemory::Region{s.gpa[i], s.size[i], s.offset[i], std::move(msg.fds[k++])});
        desc += " [" + hex(s.gpa[i]) + ", " + hex(s.gpa[i] + s.size[i]) + ")";
      }
      const std::vector<std::string> errors = mem_.replace(std::move(regs));
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.sysmem_syncs;
      record(msg.cmd, regions, 0, 0);
      notes_.emplace_back(core::LogLevel::debug, "guest memory map:" + desc);
      for (const std::string& e : errors) notes_.emplace_back(core::LogLevel::error, e);
      return true;
    }
    case kSetIrqfd: {
      // Only KVM wires this irqfd; interrupts use the ivshmem sibling.
      std::lock_guard<std::mutex> lock(mu_);
      ++counts_.irqfds;
      record(msg.cmd, 0, msg.fds.size(), 0);
      notes_.emplace_back(core::LogLevel::debug,
                          "SET_IRQFD accepted and its fds closed (no KVM: interrupts go through "
                          "ivshmem-doorbell)");
      return true;  // msg's fds close with msg
    }
    case kPciCfgRead:
    case kPciCfgWrite: {
      const bool write = msg.cmd == kPciCfgWrite;
      if (msg.size != sizeof(PciConf)) {
        note(core::LogLevel::error, cmd_name(msg.cmd) + " of " + std::to_string(msg.size) +
                                        " bytes answered with an error");
        reply(UINT64_MAX);
        return true;
      }
      const auto& c = msg.as<PciConf>();
      uint64_t answer;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (write) {
          ++counts_.cfg_writes;
          answer = config_.write(c.addr, c.val, c.len) ? 0 : UINT64_MAX;
          bus_master_.store(config_.bus_master());
        } else {
          ++counts_.cfg_reads;
          const auto v = config_.read(c.addr, c.len);
          answer = v ? *v : UINT64_MAX;
        }
        record(msg.cmd, c.addr, write ? c.val : answer, static_cast<uint32_t>(c.len));
        if (answer == UINT64_MAX)
          notes_.emplace_back(core::LogLevel::warn, cmd_name(msg.cmd) + " at " + hex(c.addr) +
                                                        " of length " + std::to_string(c.len) +
                                                        " refused");
      }
      reply(answer);
      return true;
    }
    case kBarRead:
    case kBarWrite: {
      const bool write = msg.cmd == kBarWrite;
      if (msg.size != sizeof(BarAccess)) {
        note(core::LogLevel::error, cmd_name(msg.cmd) + " of " + std::to_string(msg.size) +
                                        " bytes answered with all ones");
        reply(UINT64_MAX);
        return true;
      }
      const auto& b = msg.as<BarAccess>();
      int bar = -1;
      uint64_t off = 0;
      const uint64_t stamp = clock_.stamp();
      const auto now = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (b.memory && valid_bar_size(b.size)) bar = config_.decode(b.addr, b.size, &off);
        record(msg.cmd, b.addr, write ? b.val : 0, b.size, stamp);
        if (!write) {
          if (last_read_.time_since_epoch().count() != 0)
            read_intervals_us_.push_back(
                std::chrono::duration<double, std::micro>(now - last_read_).count());
          last_read_ = now;
        }
        if (bar < 0) {
          ++counts_.unclaimed;
          notes_.emplace_back(
              core::LogLevel::warn,
              std::string(write ? "write" : "read") + " of " + std::to_string(b.size) +
                  " bytes at " + hex(b.addr) + " claimed by no BAR (" +
                  (config_.memory_enabled() ? "" : "memory decoding off, ") + "BAR0 " +
                  hex(config_.bar_base(0)) + ", BAR2 " + hex(config_.bar_base(2)) + ")");
        } else {
          ++(write ? counts_.bar_writes : counts_.bar_reads);
          arrived_.push_back(Request{write ? Kind::kWrite : Kind::kRead, cfg_.bar_target[bar] + off,
                                     b.size, b.val, stamp, now});
          counts_.queued_max = std::max(counts_.queued_max, ++counts_.queued);
        }
      }
      if (bar < 0) {
        reply(write ? 0 : UINT64_MAX);  // a master abort reads all ones
        return true;
      }
      signal_eventfd(wake_.get());
      return true;
    }
    case kDeviceReset: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        // QEMU resets its copy of config space on machine reset as well.
        config_.reset();
        bus_master_.store(false);
        ++counts_.resets;
        record(msg.cmd, 0, 0, 0);
        arrived_.push_back(
            Request{Kind::kReset, 0, 0, 0, clock_.stamp(), std::chrono::steady_clock::now()});
        counts_.queued_max = std::max(counts_.queued_max, ++counts_.queued);
      }
      signal_eventfd(wake_.get());
      return true;
    }
    default:
      disconnect("QEMU sent " + cmd_name(msg.cmd) + " (" + std::to_string(msg.size) +
                     " bytes), which a device never receives",
                 true);
      return false;
  }
}

// --- SystemC thread ----------------------------------------------------------

void QemuProxy::service() {
  std::vector<std::pair<core::LogLevel, std::string>> notes;
  std::vector<double> intervals;
  Counts c;
  drain_eventfd(wake_.get());
  {
    std::lock_guard<std::mutex> lock(mu_);
    notes.swap(notes_);
    intervals.swap(read_intervals_us_);
    for (Request& r : arrived_) pending_.push_back(r);
    arrived_.clear();
    c = counts_;
  }
  for (const auto& [level, text] : notes)
    if (log_.enabled(level)) log_.write(level, text);
  for (double us : intervals) h_read_interval_us_->record(us);
  c_sysmem_->set(c.sysmem_syncs);
  c_cfg_reads_->set(c.cfg_reads);
  c_cfg_writes_->set(c.cfg_writes);
  c_bar_reads_->set(c.bar_reads);
  c_bar_writes_->set(c.bar_writes);
  c_unclaimed_->set(c.unclaimed);
  c_resets_->set(c.resets);
  c_backpressure_->set(c.backpressure);
  c_queued_max_->set(c.queued_max);
  c_reply_waits_->set(c.reply_waits);
  c_reply_timeouts_->set(c.reply_timeouts);

  if (disconnected_.load()) {
    dequeued(pending_.size());
    pending_.clear();
    if (!disconnect_reported_) {
      disconnect_reported_ = true;
      if (on_disconnect) on_disconnect(disconnect_reason());
    }
    return;
  }
  const sc_time now = sc_core::sc_time_stamp();
  bool injected = false;
  const auto wall = std::chrono::steady_clock::now();
  while (!pending_.empty() && clock_.due(pending_.front().stamp) <= now) {
    h_queue_us_->record(
        std::chrono::duration<double, std::micro>(wall - pending_.front().arrived).count());
    work_.push_back(pending_.front());
    pending_.pop_front();
    ++in_flight_;
    injected = true;
  }
  if (injected) {
    kicked_ = true;
    kick_.notify(sc_core::SC_ZERO_TIME);
  }
}

void QemuProxy::dequeued(size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  counts_.queued -= n;
  if (reading_paused_ && counts_.queued <= kResumeAt) {
    reading_paused_ = false;
    signal_eventfd(room_.get());
  }
}

sc_time QemuProxy::next_due() const {
  if (pending_.empty()) return sc_core::sc_max_time();
  return clock_.due(pending_.front().stamp);
}

void QemuProxy::worker() {
  for (;;) {
    while (work_.empty()) sc_core::wait(kick_);
    const Request r = work_.front();
    work_.pop_front();
    const sc_time t0 = sc_core::sc_time_stamp();
    uint64_t value = 0;
    switch (r.kind) {
      case Kind::kRead: {
        if (writes_landed) {
          const sc_time landed = writes_landed();
          if (landed > sc_core::sc_time_stamp()) sc_core::wait(landed - sc_core::sc_time_stamp());
        }
        uint8_t buf[8] = {};
        rc_.mmio_read(r.target, buf, r.size);
        std::memcpy(&value, buf, r.size);
        break;
      }
      case Kind::kWrite:
        rc_.mmio_write(r.target, &r.value, r.size);
        break;
      case Kind::kReset:
        if (on_device_reset) on_device_reset();
        break;
    }
    const sc_time stall = sc_core::sc_time_stamp() - t0;
    reply(value);
    if (r.kind == Kind::kRead)
      h_read_wall_us_->record(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - r.arrived)
              .count());
    h_access_sim_ns_->record(stall.to_seconds() * 1e9);
    if (r.kind == Kind::kReset) {
      MPR_LOG(log_, trace, "reset in " << stall.to_string());
    } else {
      MPR_LOG(log_, trace,
              (r.kind == Kind::kRead ? "read " : "write ")
                  << hex(r.target) << " " << hex(r.kind == Kind::kRead ? value : r.value) << " in "
                  << stall.to_string());
    }
    clock_.access_done(r.stamp, stall);
    --in_flight_;
    dequeued(1);
    // Lock-step: the slice ends with the reply so SystemC does not run
    // ahead of the vCPU that was waiting for it.
    if (clock_.pause_after_reply()) sc_core::sc_pause();
  }
}

}  // namespace mprdma::pcie
