#include "vp/qemu/qemu_time.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

namespace mprdma::pcie {

using sc_core::sc_time;

SyncClock::SyncClock(std::string name, const Config& cfg) : name_(std::move(name)), cfg_(cfg) {
  if (cfg_.quantum == 0) throw std::invalid_argument(name_ + ": sync quantum must be > 0");
  if (cfg_.icount_shift < 0 || cfg_.icount_shift > 10)
    throw std::invalid_argument(name_ + ": icount shift must be 0..10");
  auto [ours, theirs] = make_socketpair();
  sock_ = std::move(ours);
  qemu_sock_ = std::move(theirs);
  const int fl = ::fcntl(sock_.get(), F_GETFL);
  ::fcntl(sock_.get(), F_SETFL, fl | O_NONBLOCK);
  counter_fd_ = make_memfd("mprdma-icount", 4096);
  void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, counter_fd_.get(), 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "mmap counter");
  counter_ = static_cast<volatile uint64_t*>(p);
}

SyncClock::~SyncClock() {
  if (counter_) ::munmap(const_cast<uint64_t*>(counter_), 4096);
}

void SyncClock::close_qemu_ends() {
  qemu_sock_.reset();
  counter_fd_.reset();  // the mapping stays
}

std::vector<std::string> SyncClock::take_messages() {
  std::vector<std::string> out;
  out.swap(messages_);
  return out;
}

void SyncClock::service(const sc_time& now) {
  if (detached_) return;
  for (;;) {
    const ssize_t n = ::recv(sock_.get(), rx_ + rx_len_, sizeof rx_ - rx_len_, MSG_DONTWAIT);
    if (n > 0) {
      rx_len_ += static_cast<size_t>(n);
      if (rx_len_ < sizeof rx_) continue;
      rx_len_ = 0;
      uint64_t count;
      std::memcpy(&count, rx_, sizeof count);
      if (count < last_count_)
        messages_.push_back("plugin reported count " + std::to_string(count) +
                            " below the last known " + std::to_string(last_count_));
      blocked_ = true;
      blocked_at_ = std::max(count, last_count_);
      last_count_ = blocked_at_;
      ++syncs_;
      continue;
    }
    if (n == 0) {
      detached_ = true;
      blocked_ = false;
      messages_.push_back("the TCG plugin closed its socket (QEMU exited?)");
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    detached_ = true;
    blocked_ = false;
    messages_.push_back("reading the TCG plugin's socket failed: " + errno_text(errno));
    return;
  }
  if (blocked_ && due(blocked_at_) <= now) {
    const uint64_t grant = blocked_at_ + cfg_.quantum;
    if (!send_with_fds(sock_.get(), &grant, sizeof grant)) {
      detached_ = true;
      messages_.push_back("releasing the vCPU failed: " + errno_text(errno));
    }
    blocked_ = false;
  }
}

sc_time SyncClock::horizon() const {
  if (detached_) return sc_core::sc_max_time();
  return due(last_count_);
}

uint64_t SyncClock::stamp() const {
  return __atomic_load_n(const_cast<const uint64_t*>(counter_), __ATOMIC_ACQUIRE);
}

sc_time SyncClock::due(uint64_t stamp) const {
  const uint64_t ps = stamp * (uint64_t{1000} << cfg_.icount_shift);
  return origin_ + sc_time::from_value(ps) + offset_;
}

void SyncClock::access_done(uint64_t stamp, const sc_time& stall) {
  offset_ += stall;
  last_count_ = std::max(last_count_, stamp);
}

void QemuRunLoop::remove(Participant* p) {
  parts_.erase(std::remove(parts_.begin(), parts_.end(), p), parts_.end());
}

double QemuRunLoop::ratio() const {
  double r = 0;
  for (const Participant* p : parts_) {
    const double x = p->pacing_ratio();
    if (x > 0 && (r == 0 || x < r)) r = x;
  }
  return r;
}

sc_time QemuRunLoop::paced_limit() const {
  const double r = ratio();
  if (!started_ || r <= 0) return sc_core::sc_max_time();
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  return sim0_ + sc_time::from_value(static_cast<uint64_t>(wall_s * r * 1e12));
}

namespace {

// When SystemC next has something to do (now when it cannot tell yet).
sc_time next_activity(const sc_time& now) {
  if (sc_core::sc_get_status() != sc_core::SC_PAUSED) return now;
  const sc_time dt = sc_core::sc_time_to_pending_activity(sc_core::sc_get_curr_simcontext());
  return dt >= sc_core::sc_max_time() - now ? sc_core::sc_max_time() : now + dt;
}

}  // namespace

std::optional<sc_time> QemuRunLoop::next_step(const sc_time& max_slice) {
  thread_local bool slack_set = false;
  if (!slack_set) {
    // Pacing waits are often microseconds long; the default 50 us slack
    // would stretch each one (and each BAR read served during it).
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    slack_set = true;
  }
  if (!started_) {
    started_ = true;
    wall0_ = std::chrono::steady_clock::now();
    sim0_ = sc_core::sc_time_stamp();
  }
  std::vector<pollfd> pfds;
  std::vector<int> fds;
  for (;;) {
    for (Participant* p : parts_) p->service();
    for (Participant* p : parts_)
      if (p->stop_requested()) return std::nullopt;
    const sc_time now = sc_core::sc_time_stamp();
    bool busy = false, kicked = false;
    sc_time h = sc_core::sc_max_time();
    for (Participant* p : parts_) {
      busy |= p->busy();
      kicked |= p->take_kick();
      h = std::min(h, p->horizon());
    }
    const double r = ratio();
    const sc_time paced = paced_limit();
    const sc_time limit = std::min(h, paced);
    const bool pacing_binds = r > 0 && paced <= h;
    const sc_time idle_step = std::min(opt_.idle_step, max_slice);
    if (limit > now) {
      const sc_time step = std::min(limit - now, max_slice);
      // Unpaced, bound by a participant (a vCPU waiting for its quantum),
      // or serving an access: go. Paced: go when SystemC has something to
      // do within the step, or lazily once idle time has piled up.
      if (!pacing_binds || busy || kicked || step >= idle_step || next_activity(now) <= now + step)
        return step;
    }
    if (kicked) return sc_core::SC_ZERO_TIME;

    // Wait for QEMU, or for wall time to allow what comes next.
    auto timeout = std::chrono::duration<double>(opt_.max_wait);
    if (pacing_binds) {
      sc_time want =
          busy ? now + sc_time(1, sc_core::SC_NS) : std::min(next_activity(now), now + idle_step);
      if (want <= now) want = now + sc_time(1, sc_core::SC_NS);
      const double target_wall_s = (want - sim0_).to_seconds() / r;
      const double now_wall_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
      timeout = std::min(timeout,
                         std::chrono::duration<double>(std::max(0.0, target_wall_s - now_wall_s)));
    }
    fds.clear();
    for (const Participant* p : parts_) p->wait_fds(&fds);
    pfds.clear();
    for (int fd : fds) pfds.push_back(pollfd{fd, POLLIN, 0});
    const double secs = timeout.count();
    timespec ts{static_cast<time_t>(secs),
                static_cast<long>((secs - static_cast<double>(static_cast<time_t>(secs))) * 1e9)};
    const auto t0 = std::chrono::steady_clock::now();
    ::ppoll(pfds.data(), pfds.size(), &ts, nullptr);
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

}  // namespace mprdma::pcie
