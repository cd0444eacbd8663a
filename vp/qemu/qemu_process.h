// Launching and supervising one QEMU (stock Debian qemu-system-x86_64 7.2).
//
// QemuCommand describes the machine; build_qemu_command() turns it into an
// argument vector (pure, so tests check it without QEMU):
//   -machine q35,accel=tcg,memory-backend=mem0 with a shared memfd backend
//     the size of -m (the proxy can only hand over fd-backed RAM);
//   -device x-pci-proxy-dev,fd=N,addr=<slot>.0,multifunction=on (the NIC);
//   -chardev socket + -device ivshmem-doorbell,vectors=V,addr=<slot>.1
//     (the NIC's MSI-X vectors);
//   -netdev <spec> + virtio-net-pci with the NIC's MAC (the out-of-band IP
//     network), -virtfs for a share, -kernel/-initrd/-append or -bios;
//   synchronised time: -icount shift=S,sleep=off and the TCG plugin;
//   -nodefaults -nographic -no-reboot, the serial port on stdout.
//
// QemuProcess spawns it (fork + exec; the listed fds are inherited under
// their numbers, every other fd of ours is close-on-exec; QEMU gets
// SIGKILL if this process dies first) and runs one monitor thread that
//   * copies the guest console (QEMU's stdout) to the console log file and
//     queues its lines starting with `line_prefix` ("MPRDMA-"),
//   * keeps QEMU's stderr (its error messages) for the exit report,
//   * notices the exit (pidfd) and reaps the process.
// The simulation thread takes these events with take_events(); wake_fd()
// becomes readable when there are some.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "vp/qemu/qemu_fd.h"

namespace mprdma::pcie {

struct QemuCommand {
  std::string binary = "qemu-system-x86_64";
  uint64_t memory_mib = 1024;
  int smp = 1;
  std::string cpu;  // -cpu (empty: QEMU's default)
  // Boot: a kernel (PVH ELF) with initrd and command line, or firmware.
  std::string kernel, initrd, append;
  std::string bios;     // -bios (empty: QEMU's default SeaBIOS)
  bool paused = false;  // -S: stop before the first guest instruction
  // The NIC: proxy socket fd (inherited), slot on bus 0.
  int proxy_fd = -1;
  unsigned slot = 4;
  // Its interrupts: ivshmem server socket and vector count (0: none).
  std::string ivshmem_socket;
  unsigned vectors = 32;
  // Guest IP network: -netdev <netdev>,id=net0 (e.g. "dgram,local.type=
  // inet,..."), virtio-net-pci with `mac`. Empty: no network.
  std::string netdev;
  std::array<uint8_t, 6> mac{};
  // -virtfs local share (empty dir: none).
  std::string share_dir, share_tag = "host";
  // Synchronised time: icount shift (< 0: no icount) and the plugin with
  // its socket and counter fds (inherited).
  int icount_shift = -1;
  std::string plugin;
  int plugin_fd = -1, plugin_counter_fd = -1;
  std::vector<std::string> extra;  // appended verbatim
};

// The argument vector (argv[0] is `binary`). Throws std::invalid_argument
// for an incomplete description (no proxy fd, kernel without initrd...).
std::vector<std::string> build_qemu_command(const QemuCommand& cmd);
// The fds the command line names, which the child must inherit.
std::vector<int> inherited_fds(const QemuCommand& cmd);
// argv joined with shell quoting, for logs and for reproducing a run.
std::string shell_quote(const std::vector<std::string>& argv);

class QemuProcess {
 public:
  struct Event {
    enum Kind { kConsoleLine, kStderrLine, kExited } kind;
    std::string text;  // the line, or the exit description (exit_report())
  };
  struct ExitStatus {
    bool exited = false;  // normal exit (code valid) vs killed (signal valid)
    int code = 0;
    int signal = 0;
  };

  // `name` labels messages ("h0").
  explicit QemuProcess(std::string name);
  ~QemuProcess();  // terminates QEMU if still running (SIGTERM, then SIGKILL)
  QemuProcess(const QemuProcess&) = delete;
  QemuProcess& operator=(const QemuProcess&) = delete;

  // Spawns argv[0] (searched in PATH if it has no '/') with `inherit` fds
  // kept open. The guest console goes to `console_log` (truncated; empty:
  // not kept). Throws std::runtime_error if it cannot be started (exec
  // failure included, with its reason).
  void start(const std::vector<std::string>& argv, const std::vector<int>& inherit,
             const std::string& console_log, std::string line_prefix = "MPRDMA-");

  pid_t pid() const { return pid_; }

  // Interactive console (before start()): QEMU's stdin, which its stdio
  // serial reads, becomes a pipe that write_console() feeds, and the raw
  // console output is copied to `tap_fd` as it arrives (e.g. the user's
  // terminal). For `./mprdma-vp boot --shell`.
  void set_interactive(int tap_fd) {
    interactive_ = true;
    tap_fd_ = tap_fd;
  }
  // Bytes typed into the guest console (interactive only). False if QEMU
  // no longer reads them.
  bool write_console(const char* data, size_t n);
  bool running() const { return started_ && !exited_.load(); }
  bool exited() const { return exited_.load(); }
  // Valid once exited().
  ExitStatus status() const;
  // "QEMU h0 (pid 123) exited with status 1" / "... was killed by signal
  // 9 (SIGKILL)", with QEMU's last error lines.
  std::string exit_report() const;
  // QEMU's stderr lines so far (the last 50).
  std::vector<std::string> stderr_tail() const;

  int wake_fd() const { return wake_.get(); }
  // Events since the last call, in order (drains wake_fd()). The exit event
  // comes after every console line QEMU wrote.
  std::vector<Event> take_events();

  // Asks QEMU to quit (SIGTERM), then SIGKILL after `grace_ms`; waits for
  // the exit to be reaped. No-op when not running.
  void terminate(int grace_ms = 2000);

 private:
  void monitor();
  void on_output(int which, const char* data, size_t n);
  void push(Event e);

  std::string name_;
  pid_t pid_ = -1;
  bool started_ = false;
  UniqueFd out_, err_, pidfd_, wake_, stop_;
  int console_fd_ = -1;
  bool interactive_ = false;
  int tap_fd_ = -1;
  UniqueFd stdin_w_;
  std::string prefix_;
  std::string line_buf_[2];
  mutable std::mutex mu_;
  std::deque<Event> events_;
  std::deque<std::string> stderr_lines_;
  ExitStatus status_;
  std::atomic<bool> exited_{false};
  std::mutex exit_mu_;  // with exit_cv_: terminate() waits for the monitor
  std::condition_variable exit_cv_;
  std::thread thread_;
};

}  // namespace mprdma::pcie
