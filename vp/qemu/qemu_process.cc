#include "vp/qemu/qemu_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace mprdma::pcie {
namespace {

constexpr size_t kStderrKeep = 50;
constexpr size_t kMaxLine = 64 * 1024;

std::string mac_text(const std::array<uint8_t, 6>& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5]);
  return buf;
}

std::string hex_slot(unsigned slot, unsigned fn) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%x.%u", slot, fn);
  return buf;
}

// QEMU's option parser splits on ',' ("a,,b" is a literal comma); paths
// with commas would silently become extra options.
void check_no_comma(const std::string& what, const std::string& v) {
  if (v.find(',') != std::string::npos)
    throw std::invalid_argument(what + " '" + v + "' contains a comma, which QEMU options cannot");
}

std::string find_in_path(const std::string& bin) {
  if (bin.find('/') != std::string::npos) return bin;
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + bin;
    if (::access(cand.c_str(), X_OK) == 0) return cand;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  throw std::runtime_error("cannot find '" + bin + "' in PATH (is qemu-system-x86 installed?)");
}

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

}  // namespace

std::vector<std::string> build_qemu_command(const QemuCommand& c) {
  if (c.proxy_fd < 0) throw std::invalid_argument("QEMU command: no proxy socket fd");
  if (c.memory_mib < 16) throw std::invalid_argument("QEMU command: memory below 16 MiB");
  if (c.smp < 1) throw std::invalid_argument("QEMU command: smp must be >= 1");
  if (c.slot == 0 || c.slot > 31) throw std::invalid_argument("QEMU command: slot must be 1..31");
  if (!c.append.empty() && c.kernel.empty())
    throw std::invalid_argument("QEMU command: a kernel command line without a kernel");
  if (!c.initrd.empty() && c.kernel.empty())
    throw std::invalid_argument("QEMU command: an initrd without a kernel");
  if (c.icount_shift >= 0 && c.plugin.empty() == false &&
      (c.plugin_fd < 0 || c.plugin_counter_fd < 0))
    throw std::invalid_argument("QEMU command: the sync plugin needs its socket and counter fds");
  for (const auto& [what, v] : {std::pair<std::string, std::string>{"kernel", c.kernel},
                                {"initrd", c.initrd},
                                {"bios", c.bios},
                                {"ivshmem socket", c.ivshmem_socket},
                                {"share dir", c.share_dir},
                                {"plugin", c.plugin}})
    check_no_comma(what, v);

  const std::string mem = std::to_string(c.memory_mib) + "M";
  std::vector<std::string> a = {c.binary};
  auto add = [&a](std::initializer_list<std::string> args) {
    a.insert(a.end(), args.begin(), args.end());
  };
  // Guest RAM in a shared memfd: the proxy hands its fd to the device,
  // which maps it for DMA.
  add({"-machine", "q35,accel=tcg,memory-backend=mem0"});
  add({"-object", "memory-backend-memfd,id=mem0,size=" + mem + ",share=on"});
  add({"-m", mem, "-smp", std::to_string(c.smp)});
  if (!c.cpu.empty()) add({"-cpu", c.cpu});
  // No default devices (NIC, monitor, serial); the console is the first
  // serial port on stdout, which the supervisor reads.
  add({"-nodefaults", "-nographic", "-no-reboot", "-serial", "stdio"});
  if (!c.bios.empty()) add({"-bios", c.bios});
  if (!c.kernel.empty()) add({"-kernel", c.kernel});
  if (!c.initrd.empty()) add({"-initrd", c.initrd});
  if (!c.append.empty()) add({"-append", c.append});
  if (c.paused) add({"-S"});
  add({"-device", "x-pci-proxy-dev,id=rnic0,fd=" + std::to_string(c.proxy_fd) +
                      ",addr=" + hex_slot(c.slot, 0) + ",multifunction=on"});
  if (!c.ivshmem_socket.empty() && c.vectors > 0) {
    add({"-chardev", "socket,id=rnic0-ivs,path=" + c.ivshmem_socket});
    add({"-device", "ivshmem-doorbell,id=rnic0-irq,chardev=rnic0-ivs,vectors=" +
                        std::to_string(c.vectors) + ",addr=" + hex_slot(c.slot, 1)});
  }
  if (!c.netdev.empty()) {
    add({"-netdev", c.netdev + ",id=net0"});
    add({"-device", "virtio-net-pci,netdev=net0,mac=" + mac_text(c.mac)});
  }
  if (!c.share_dir.empty()) {
    check_no_comma("share tag", c.share_tag);
    add({"-virtfs", "local,path=" + c.share_dir + ",mount_tag=" + c.share_tag +
                        ",security_model=none,id=share0"});
  }
  if (c.icount_shift >= 0)
    add({"-icount", "shift=" + std::to_string(c.icount_shift) + ",sleep=off"});
  if (!c.plugin.empty())
    add({"-plugin", c.plugin + ",fd=" + std::to_string(c.plugin_fd) +
                        ",shm=" + std::to_string(c.plugin_counter_fd)});
  a.insert(a.end(), c.extra.begin(), c.extra.end());
  return a;
}

std::vector<int> inherited_fds(const QemuCommand& c) {
  std::vector<int> fds;
  if (c.proxy_fd >= 0) fds.push_back(c.proxy_fd);
  if (!c.plugin.empty()) {
    if (c.plugin_fd >= 0) fds.push_back(c.plugin_fd);
    if (c.plugin_counter_fd >= 0) fds.push_back(c.plugin_counter_fd);
  }
  return fds;
}

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& s : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !s.empty() && s.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_=.,:/+@%") == std::string::npos;
    if (plain) {
      out += s;
      continue;
    }
    out += '\'';
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    out += '\'';
  }
  return out;
}

// ---------------------------------------------------------------------------

QemuProcess::QemuProcess(std::string name) : name_(std::move(name)) {
  wake_ = make_eventfd();
  stop_ = make_eventfd();
}

QemuProcess::~QemuProcess() {
  terminate();
  signal_eventfd(stop_.get());
  if (thread_.joinable()) thread_.join();
  if (console_fd_ >= 0) ::close(console_fd_);
}

void QemuProcess::start(const std::vector<std::string>& argv, const std::vector<int>& inherit,
                        const std::string& console_log, std::string line_prefix) {
  if (started_) throw std::logic_error("QEMU " + name_ + " already started");
  if (argv.empty()) throw std::invalid_argument("QEMU " + name_ + ": empty command");
  prefix_ = std::move(line_prefix);
  const std::string path = find_in_path(argv[0]);
  for (int fd : inherit)
    if (fd <= 2 || ::fcntl(fd, F_GETFD) < 0)
      throw std::invalid_argument("QEMU " + name_ + ": cannot pass fd " + std::to_string(fd));

  if (!console_log.empty()) {
    console_fd_ = ::open(console_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (console_fd_ < 0)
      throw std::runtime_error("QEMU " + name_ + ": cannot create console log " + console_log +
                               ": " + errno_text(errno));
  }
  int out[2], err[2], ex[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(ex, O_CLOEXEC) != 0)
    throw std::runtime_error("QEMU " + name_ + ": pipe: " + errno_text(errno));
  UniqueFd out_r(out[0]), out_w(out[1]), err_r(err[0]), err_w(err[1]), ex_r(ex[0]), ex_w(ex[1]);
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  UniqueFd in_r, in_w;
  if (interactive_) {
    int in[2];
    if (::pipe2(in, O_CLOEXEC) != 0)
      throw std::runtime_error("QEMU " + name_ + ": pipe: " + errno_text(errno));
    in_r = UniqueFd(in[0]);
    in_w = UniqueFd(in[1]);
  }

  std::vector<char*> cargv;
  for (const std::string& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
  cargv[0] = const_cast<char*>(argv[0].c_str());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("QEMU " + name_ + ": fork: " + errno_text(errno));
  if (pid == 0) {
    // Child: async-signal-safe calls only (the parent has other threads).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // QEMU must not outlive the simulator
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(interactive_ ? in_r.get() : devnull.get(), 0);
    ::dup2(out_w.get(), 1);
    ::dup2(err_w.get(), 2);
    for (int fd : inherit) ::fcntl(fd, F_SETFD, 0);
    ::execve(path.c_str(), cargv.data(), environ);
    const int e = errno;
    ssize_t ignored = ::write(ex_w.get(), &e, sizeof e);
    (void)ignored;
    ::_exit(127);
  }
  pid_ = pid;
  in_r.reset();
  stdin_w_ = std::move(in_w);
  out_w.reset();
  err_w.reset();
  ex_w.reset();
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(ex_r.get(), &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  if (n == sizeof exec_errno) {
    int st;
    ::waitpid(pid, &st, 0);
    pid_ = -1;
    throw std::runtime_error("QEMU " + name_ + ": cannot run " + path + ": " +
                             errno_text(exec_errno));
  }
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  out_ = std::move(out_r);
  err_ = std::move(err_r);
  pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  started_ = true;
  thread_ = std::thread([this] { monitor(); });
}

void QemuProcess::push(Event e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  signal_eventfd(wake_.get());
}

std::vector<QemuProcess::Event> QemuProcess::take_events() {
  drain_eventfd(wake_.get());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out(events_.begin(), events_.end());
  events_.clear();
  return out;
}

QemuProcess::ExitStatus QemuProcess::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

std::vector<std::string> QemuProcess::stderr_tail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {stderr_lines_.begin(), stderr_lines_.end()};
}

std::string QemuProcess::exit_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!exited_.load()) return "QEMU " + name_ + " is running";
  std::string r = "QEMU " + name_ + " (pid " + std::to_string(pid_) + ") ";
  r += status_.exited ? "exited with status " + std::to_string(status_.code)
                      : "was killed by signal " + signal_text(status_.signal);
  if (!stderr_lines_.empty()) {
    r += "; its last messages:";
    const size_t from = stderr_lines_.size() > 5 ? stderr_lines_.size() - 5 : 0;
    for (size_t i = from; i < stderr_lines_.size(); ++i) r += "\n  " + stderr_lines_[i];
  }
  return r;
}

bool QemuProcess::write_console(const char* data, size_t n) {
  if (!stdin_w_) return false;
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(stdin_w_.get(), data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

void QemuProcess::on_output(int which, const char* data, size_t n) {
  if (which == 0 && tap_fd_ >= 0) {
    // The user's terminal: best effort, never blocks the guest for long.
    ssize_t ignored = ::write(tap_fd_, data, n);
    (void)ignored;
  }
  if (which == 0 && console_fd_ >= 0) {
    size_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(console_fd_, data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // a full disk must not stop the guest
      done += static_cast<size_t>(w);
    }
  }
  std::string& buf = line_buf_[which];
  buf.append(data, n);
  size_t start = 0;
  for (;;) {
    const size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    std::string line = buf.substr(start, nl - start);
    start = nl + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    if (which == 0) {
      // The guest console is noisy (boot log); only the lines of the init
      // contract are events.
      const size_t at = line.find(prefix_);
      if (!prefix_.empty() && at != std::string::npos)
        push(Event{Event::kConsoleLine, line.substr(at)});
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stderr_lines_.push_back(line);
        if (stderr_lines_.size() > kStderrKeep) stderr_lines_.pop_front();
      }
      push(Event{Event::kStderrLine, line});
    }
  }
  buf.erase(0, start);
  if (buf.size() > kMaxLine) buf.clear();  // a line without end: drop it
}

void QemuProcess::monitor() {
  bool reaped = false;
  auto set_status = [this](int st) {
    std::lock_guard<std::mutex> lock(mu_);
    status_.exited = WIFEXITED(st);
    status_.code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    status_.signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  };
  auto drain_deadline = std::chrono::steady_clock::time_point::max();
  for (;;) {
    pollfd fds[4] = {{stop_.get(), POLLIN, 0},
                     {out_.get(), POLLIN, 0},
                     {err_.get(), POLLIN, 0},
                     {reaped ? -1 : pidfd_.get(), POLLIN, 0}};
    int timeout = -1;
    if (!pidfd_ && !reaped) timeout = 50;  // no pidfd: poll waitpid
    if (reaped) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          drain_deadline - std::chrono::steady_clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    const int n = ::poll(fds, 4, timeout);
    if (n < 0 && errno != EINTR) {
      // Cannot watch any more: stop reading output, still report the exit.
      out_.reset();
      err_.reset();
      if (!reaped) {
        int st = 0;
        if (::waitpid(pid_, &st, 0) == pid_) set_status(st);
        reaped = true;
      }
      continue;
    }
    if (fds[0].revents) return;  // destructor; terminate() already reaped
    for (int w = 0; w < 2; ++w) {
      UniqueFd& fd = w == 0 ? out_ : err_;
      if (!fd || !(fds[1 + w].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      for (;;) {
        const ssize_t r = ::read(fd.get(), buf, sizeof buf);
        if (r > 0) {
          on_output(w, buf, static_cast<size_t>(r));
          continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EINTR)) fd.reset();
        break;
      }
    }
    if (!reaped) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped = true;
        set_status(st);
        // Output still in the pipes belongs before the exit; a grandchild
        // holding them open must not delay the report forever.
        drain_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
    }
    if (reaped && ((!out_ && !err_) || std::chrono::steady_clock::now() >= drain_deadline)) {
      for (int w = 0; w < 2; ++w)
        if (!line_buf_[w].empty()) on_output(w, "\n", 1);  // an unterminated last line
      {
        std::lock_guard<std::mutex> lock(exit_mu_);
        exited_.store(true);
      }
      push(Event{Event::kExited, exit_report()});
      exit_cv_.notify_all();
      return;
    }
  }
}

void QemuProcess::terminate(int grace_ms) {
  if (!started_ || exited_.load()) return;
  auto wait_for = [this](int ms) {
    std::unique_lock<std::mutex> lock(exit_mu_);
    return exit_cv_.wait_for(lock, std::chrono::milliseconds(ms),
                             [this] { return exited_.load(); });
  };
  ::kill(pid_, SIGTERM);
  if (wait_for(grace_ms)) return;
  ::kill(pid_, SIGKILL);
  wait_for(10000);
}

}  // namespace mprdma::pcie
