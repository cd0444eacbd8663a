// A QEMU-backed host: a stock QEMU 7.2 guest (TCG) drives the simulated
// NIC through the bridge in vp/qemu. It mirrors ModeledHost: memory, root
// complex, PCIe link and NIC, with the guest's RAM in place of the sparse
// memory and the guest's Linux driver in place of the driver model.
//
//   QEMU (x-pci-proxy-dev, slot.0) <-> QemuProxy -> RootComplex -> PcieLink -> Nic
//   guest RAM (SYNC_SYSMEM memfds) <- GuestMemory <- RootComplex <- NIC DMA
//   NIC MSI-X write -> RootComplex::on_msi -> IvshmemServer::notify(data)
//        -> QEMU's ivshmem-doorbell (slot.1) -> MSI-X vector `data`
//
// BAR addresses: the guest programs BAR0/BAR2 through config space; the
// proxy rebases every access onto the NIC's configured bar0_base/bar2_base,
// so the NIC always sees the addresses it decodes, wherever the guest puts
// its BARs (QemuProxy::bar_base() tells where that is).
//
// QEMU is launched when the host is constructed (elaboration): its start-up
// handshake (memory map, BAR discovery) is served by the proxy's I/O
// thread; its machine reset (DEVICE_RESET) and every BAR access wait until
// the run loop services this host. The platform's run loop must drive time
// with pcie::QemuRunLoop (see vp/qemu/qemu_time.h) with this host added.
//
// Exit: QEMU's exit (status or signal) and its last error lines are logged
// on channel qemu.<name> and available from exit_report(); with on_exit
// "stop" the run loop then stops the simulation, with "continue" the
// simulation goes on without this guest (no pacing, no synchronisation).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <systemc>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/log.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/host/host.h"
#include "vp/nic/nic.h"
#include "vp/pcie/pcie_config.h"
#include "vp/pcie/pcie_link.h"
#include "vp/pcie/root_complex.h"
#include "vp/qemu/guest_memory.h"
#include "vp/qemu/ivshmem_server.h"
#include "vp/qemu/qemu_fd.h"
#include "vp/qemu/qemu_process.h"
#include "vp/qemu/qemu_proxy.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::host {

struct QemuHostConfig {
  std::string qemu = "qemu-system-x86_64";
  // Guest image: a directory holding vmlinux and initramfs.cpio (the output
  // of guest/build-image); `kernel`/`initrd` override either file. With
  // neither, QEMU runs its default firmware (or `bios`) and boots nothing.
  std::string image_dir;
  std::string kernel;
  std::string initrd;
  std::string bios;
  core::Bytes memory{uint64_t{1} << 30};
  int64_t smp = 1;
  std::string cpu;
  // Kernel parameters after ours (console=ttyS0 panic=-1 mprdma.ip=...
  // mprdma.hostname=... [mprdma.share=...]); e.g. "mprdma.run=/host/t.sh".
  std::string append;
  // free: SystemC time paced to `ratio` x wall time. sync: lock-step with
  // the guest's instruction count (TCG plugin, -icount).
  enum class TimeMode { free, sync };
  TimeMode time_mode = TimeMode::free;
  double ratio = 1.0;
  int64_t quantum = 100000;  // instructions between synchronisations
  int64_t icount_shift = 0;  // one guest instruction = 2^shift ns
  // Guest console (serial) copy; empty: <out_dir>/<host>.console.log when
  // the simulation has an output directory, else none.
  std::string console_log;
  std::string share_dir;  // -virtfs share mounted by the guest at /host
  std::string share_tag = "host";
  // QEMU -netdev spec of the guest's IP network (e.g. "dgram,local.type=
  // inet,local.host=127.0.0.1,local.port=5555,remote.type=inet,
  // remote.host=127.0.0.1,remote.port=5556"); empty: no network.
  std::string netdev;
  // stop: the guest's exit ends the simulation; continue: it runs on.
  enum class OnExit { stop, continue_run };
  OnExit on_exit = OnExit::stop;
  int64_t vectors = 32;  // MSI-X vectors of the ivshmem function
  bool paused = false;   // -S: no guest code runs (tests)
  // A NIC without Memory/Bus Master enabled (command register) cannot DMA
  // or send MSIs, as on real hardware: such accesses are refused and
  // counted.
  bool require_bus_master = true;
  std::string plugin;      // the TCG plugin (default: the one built here)
  std::string extra_args;  // appended to QEMU's command line (split on spaces)
  // Not a scenario key: `./mprdma-vp boot --shell` makes one guest's console
  // interactive, copying its output to this fd (-1: not interactive).
  int console_tap_fd = -1;

  void bind(core::Binder& b);
};

class QemuHost : public sc_core::sc_module, public Host, public pcie::QemuRunLoop::Participant {
 public:
  // Launches QEMU (throws std::runtime_error / std::invalid_argument if it
  // cannot). With a valid `qemu_socket`, no QEMU is launched: the proxy
  // serves that connected socket (tests, or a QEMU started elsewhere).
  QemuHost(sc_core::sc_module_name name, const QemuHostConfig& cfg, const nic::NicConfig& nic,
           const pcie::PcieConfig& pcie, core::SimEnv& env, pcie::UniqueFd qemu_socket = {});
  ~QemuHost() override;

  nic::Nic& nic() override { return nic_; }
  const char* kind() const override { return "qemu"; }
  pcie::RootComplex& root_complex() { return rc_; }
  pcie::GuestMemory& memory() { return guest_mem_; }
  pcie::QemuProxy& proxy() { return proxy_; }
  pcie::IvshmemServer& ivshmem() { return ivshmem_; }
  pcie::QemuProcess& process() { return process_; }
  pcie::SyncClock* sync_clock() { return sync_.get(); }
  const QemuHostConfig& config() const { return cfg_; }
  // The QEMU command line (empty without a launch).
  const std::vector<std::string>& command() const { return argv_; }
  const std::string& runtime_dir() const { return runtime_dir_.path; }

  // Guest console lines of the init contract ("MPRDMA-..."), in order;
  // console_event() is notified (delta) for each.
  const std::vector<std::string>& console_lines() const { return lines_; }
  sc_core::sc_event& console_event() { return console_event_; }
  bool guest_ready() const { return ready_; }                // MPRDMA-READY seen
  std::optional<int> run_exit() const { return run_exit_; }  // MPRDMA-RUN-EXIT <n>
  bool qemu_exited() const { return exited_; }
  const std::string& exit_report() const { return exit_report_; }

  // Keystrokes for an interactive console (see console_tap_fd).
  bool write_console(const char* data, size_t n) { return process_.write_console(data, n); }
  // Terminates QEMU now (SIGTERM, then SIGKILL after 2 s). The vCPU is
  // released from the plugin and the proxy closed first: QEMU cannot
  // shut down while its vCPU waits for us.
  void stop_qemu();

  // pcie::QemuRunLoop::Participant
  void service() override;
  sc_core::sc_time horizon() const override;
  bool busy() const override { return proxy_.busy(); }
  bool take_kick() override { return proxy_.take_kick(); }
  double pacing_ratio() const override;
  void wait_fds(std::vector<int>* fds) const override;
  bool stop_requested() const override { return stop_requested_; }

 private:
  // Root-complex memory that honours the NIC's Bus Master Enable bit.
  class BusMasterGate : public pcie::HostMemoryIf {
   public:
    explicit BusMasterGate(QemuHost& h) : h_(h) {}
    bool read(uint64_t pa, void* dst, size_t len) override;
    bool write(uint64_t pa, const void* src, size_t len) override;
    uint8_t* ptr(uint64_t pa, size_t len) override;
    bool backed(uint64_t pa, uint64_t len) const override { return h_.guest_mem_.backed(pa, len); }

   private:
    bool allowed(const char* what, uint64_t pa);
    QemuHost& h_;
  };

  // A private directory for QEMU's sockets, removed with the host (also
  // when construction fails half-way).
  struct RuntimeDir {
    explicit RuntimeDir(const std::string& host);
    ~RuntimeDir();
    std::string path;
  };

  void launch();
  void on_console(const std::string& line);
  void on_exit(const std::string& report);
  std::string kernel_append() const;
  std::string console_path() const;

  QemuHostConfig cfg_;
  core::SimEnv& env_;
  core::LogChannel& log_;
  RuntimeDir runtime_dir_;
  pcie::GuestMemory guest_mem_;
  BusMasterGate gate_;
  pcie::RootComplex rc_;
  pcie::PcieLink link_;
  nic::Nic nic_;
  std::unique_ptr<pcie::SyncClock> sync_;
  pcie::FreeClock free_clock_;
  pcie::IvshmemServer ivshmem_;
  pcie::QemuProxy proxy_;
  pcie::QemuProcess process_;
  std::vector<std::string> argv_;

  std::vector<std::string> lines_;
  sc_core::sc_event console_event_;
  bool ready_ = false;
  std::optional<int> run_exit_;
  bool exited_ = false;
  std::string exit_report_;
  bool stop_requested_ = false;
  bool stopping_ = false;  // stop_qemu() was called: QEMU's farewells are expected
  bool bus_master_warned_ = false;
  core::Counter& refused_dma_;
  core::Counter& refused_msi_;
  core::Counter& dropped_msi_;
};

}  // namespace mprdma::host
