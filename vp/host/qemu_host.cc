#include "vp/host/qemu_host.h"

#include <mprdma/regs_util.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "vp/net/roce_codec.h"

#ifndef MPRDMA_QEMU_PLUGIN_PATH
#define MPRDMA_QEMU_PLUGIN_PATH ""
#endif

namespace mprdma::host {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

QemuHostConfig validated(QemuHostConfig c, const std::string& name) {
  std::vector<std::string> errors;
  if (c.memory.n % kMiB != 0 || c.memory.n < 64 * kMiB)
    errors.push_back("memory must be a whole number of MiB, at least 64 MiB");
  if (c.smp < 1) errors.push_back("smp must be >= 1");
  if (c.time_mode == QemuHostConfig::TimeMode::sync && c.smp != 1)
    errors.push_back("the synchronised time mode needs smp 1 (one instruction count)");
  if (c.ratio <= 0) errors.push_back("ratio must be > 0");
  if (c.quantum < 1) errors.push_back("quantum must be >= 1");
  if (c.icount_shift < 0 || c.icount_shift > 10) errors.push_back("icount_shift must be 0..10");
  if (c.vectors < 1 || c.vectors > 1024) errors.push_back("vectors must be 1..1024");
  if (!errors.empty()) {
    std::string msg = "QEMU host " + name + ":";
    for (const std::string& e : errors) msg += " " + e + ";";
    throw std::invalid_argument(msg);
  }
  if (c.plugin.empty()) c.plugin = MPRDMA_QEMU_PLUGIN_PATH;
  return c;
}

uint32_t pow2_at_least(uint64_t v) {
  uint64_t p = 16;
  while (p < v) p <<= 1;
  return static_cast<uint32_t>(p);
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

QemuHost::RuntimeDir::RuntimeDir(const std::string& host) {
  const char* tmp = std::getenv("TMPDIR");
  // Socket paths must stay under 108 bytes; a long TMPDIR could break them.
  const std::string base = tmp && std::string(tmp).size() < 60 ? tmp : "/tmp";
  path = base + "/mprdma-" + host.substr(0, 16) + "-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr)
    throw std::runtime_error("QEMU host " + host + ": cannot create a directory under " + base +
                             ": " + pcie::errno_text(errno));
}

QemuHost::RuntimeDir::~RuntimeDir() {
  // Only our own socket lives here; the ivshmem server removed it already.
  ::unlink((path + "/ivshmem.sock").c_str());
  ::rmdir(path.c_str());
}

void QemuHostConfig::bind(core::Binder& b) {
  b.field("qemu", qemu,
          "QEMU binary (searched in PATH). Runs as you: a scenario names programs to run, as a "
          "Makefile does (README, \"Scenarios\").");
  b.field("image_dir", image_dir,
          "Guest image directory holding vmlinux and initramfs.cpio (guest/build-image).");
  b.field("kernel", kernel, "Guest kernel (PVH ELF); overrides image_dir/vmlinux.");
  b.field("initrd", initrd, "Guest initramfs; overrides image_dir/initramfs.cpio.");
  b.field("bios", bios, "Firmware instead of QEMU's default (no kernel is then needed).");
  b.field("memory", memory, "Guest RAM (a shared memfd the NIC DMAs into).", 64 * kMiB,
          uint64_t{1} << 40);
  b.field("smp", smp, "Guest vCPUs (1 in the sync time mode).", 1, 64);
  b.field("cpu", cpu, "QEMU -cpu model (empty: QEMU's default).");
  b.field("append", append,
          "Extra kernel parameters, after console=ttyS0 panic=-1 mprdma.ip mprdma.hostname "
          "[mprdma.share] (e.g. mprdma.run=/host/test.sh, idle=poll).");
  b.choice("time_mode", time_mode, {{"free", TimeMode::free}, {"sync", TimeMode::sync}},
           "free: SystemC time paced to ratio x wall time; sync: lock-step with the guest's "
           "instruction count (TCG plugin, -icount).");
  b.field("ratio", ratio, "free mode: SystemC time allowed per wall time.", 1e-6, 1e6);
  b.field("quantum", quantum, "sync mode: guest instructions between synchronisations.", 1,
          int64_t{1} << 40, "instructions");
  b.field("icount_shift", icount_shift, "sync mode: one guest instruction is 2^shift ns.", 0, 10);
  b.field("console_log", console_log,
          "Copy of the guest console (empty: <out_dir>/<host>.console.log, or none).");
  b.field("share_dir", share_dir, "Host directory shared with the guest (9p, mounted at /host).");
  b.field("share_tag", share_tag, "9p mount tag of share_dir.");
  b.field("netdev", netdev,
          "QEMU -netdev spec of the guest's IP network (virtio-net with the NIC's MAC); empty: "
          "none. Passed to QEMU as it is: a netdev can start programs (tap script=, "
          "downscript=) and open sockets to any address.");
  b.choice("on_exit", on_exit, {{"stop", OnExit::stop}, {"continue", OnExit::continue_run}},
           "When QEMU exits before its run script ended (a crash, a kill): stop the simulation, "
           "or continue without this guest.");
  b.field("vectors", vectors, "MSI-X vectors of the ivshmem-doorbell function.", 1, 1024);
  b.field("paused", paused, "Start QEMU with -S (no guest code runs; for tests).");
  b.field("require_bus_master", require_bus_master,
          "Refuse DMA and MSIs while the guest has not enabled bus mastering on the NIC.");
  b.field("plugin", plugin,
          "TCG plugin of the sync mode (empty: the one built with the VP); a shared library "
          "QEMU loads and runs.");
  b.field("extra_args", extra_args,
          "Extra QEMU arguments (split on spaces), passed as they are: they can make QEMU read "
          "and write any file you can and run programs.");
}

QemuHost::QemuHost(sc_core::sc_module_name name, const QemuHostConfig& cfg,
                   const nic::NicConfig& nic, const pcie::PcieConfig& pcie, core::SimEnv& env,
                   pcie::UniqueFd qemu_socket)
    : sc_core::sc_module(name),
      cfg_(validated(cfg, basename())),
      env_(env),
      log_(core::Log::channel("qemu." + std::string(basename()))),
      runtime_dir_(basename()),
      gate_(*this),
      rc_("rc", gate_, env, nic.name),
      link_("pcie", pcie, env, nic.name),
      nic_("nic", nic, env),
      sync_(cfg_.time_mode == QemuHostConfig::TimeMode::sync
                ? std::make_unique<pcie::SyncClock>(
                      basename(), pcie::SyncClock::Config{static_cast<uint64_t>(cfg_.quantum),
                                                          static_cast<int>(cfg_.icount_shift)})
                : nullptr),
      ivshmem_(basename(), runtime_dir_.path + "/ivshmem.sock",
               static_cast<unsigned>(cfg_.vectors)),
      proxy_(
          "proxy",
          [&] {
            pcie::QemuProxyConfig p;
            p.name = nic.name;
            p.bar_size = {
                static_cast<uint32_t>(nic::kBar0Size),
                0,
                pow2_at_least(static_cast<uint64_t>(nic.limits.num_uar_pages) * MPR_UAR_PAGE_SIZE),
                0,
                0,
                0};
            p.bar_target = {nic.bar0_base, 0, nic.bar2_base, 0, 0, 0};
            return p;
          }(),
          rc_, guest_mem_, sync_ ? static_cast<pcie::GuestClock&>(*sync_) : free_clock_, env),
      process_(basename()),
      refused_dma_(env.stats.counter("pcie." + nic.name + ".qemu.dma_without_bus_master",
                                     "transactions",
                                     "DMA refused: bus mastering not enabled by the guest")),
      refused_msi_(env.stats.counter("pcie." + nic.name + ".qemu.msi_without_bus_master",
                                     "interrupts",
                                     "MSIs refused: bus mastering not enabled by the guest")),
      dropped_msi_(env.stats.counter("pcie." + nic.name + ".qemu.msi_dropped", "interrupts",
                                     "MSIs with no ivshmem client or an out-of-range vector")) {
  rc_.mmio.bind(link_.rc_mmio);
  link_.ep_mmio.bind(nic_.mmio_socket());
  nic_.dma_socket().bind(link_.ep_dma);
  nic_.set_host_memory_check(
      [this](uint64_t pa, uint64_t len) { return rc_.dma_addressable(pa, len); });
  link_.rc_dma.bind(rc_.dma);

  rc_.on_msi = [this](uint64_t addr, uint32_t data) {
    if (cfg_.require_bus_master && !proxy_.bus_master()) {
      refused_msi_.add();
      MPR_LOG(log_, warn, "MSI (vector " << data << ") refused: bus mastering is off");
      return;
    }
    if (!ivshmem_.notify(data)) {
      dropped_msi_.add();
      MPR_LOG(log_, warn,
              "MSI vector " << data << " dropped: "
                            << (ivshmem_.connected() ? "beyond the ivshmem vectors"
                                                     : "no ivshmem client"));
    }
  };
  proxy_.on_device_reset = [this] {
    const uint32_t v = MPR_SET(RESET, RESET, 1);
    rc_.post_mmio_write(nic_.config().bar0_base + MPR_BAR0_OFF(RESET), &v, sizeof v);
  };
  // The NIC answers a register read when the read is issued, so a read
  // must not be issued before the guest's earlier posted writes arrive
  // (PCIe ordering; see QemuProxy::writes_landed).
  proxy_.writes_landed = [this] {
    return link_.downstream_busy_until() + link_.config().latency.sc();
  };
  proxy_.on_disconnect = [this](const std::string& why) {
    if (stopping_) {
      MPR_LOG(log_, info, "QEMU " << basename() << " left the NIC's proxy: " << why);
    } else {
      MPR_LOG(log_, warn, "QEMU " << basename() << " left the NIC's proxy: " << why);
    }
  };

  if (qemu_socket) {
    proxy_.start(std::move(qemu_socket));
  } else {
    launch();
  }
}

QemuHost::~QemuHost() { stop_qemu(); }

void QemuHost::stop_qemu() {
  stopping_ = true;
  if (sync_) sync_->release();
  proxy_.stop();
  process_.terminate();
}

std::string QemuHost::kernel_append() const {
  const nic::NicConfig& n = nic_.config();
  // quiet and cryptomgr.notests shorten the boot under TCG (GUEST.md);
  // no_timer_check keeps a guest starved of host CPU (several QEMUs on two
  // cores) from panicking on the IO-APIC timer check at boot.
  std::string a = "console=ttyS0 panic=-1 quiet cryptomgr.notests no_timer_check mprdma.ip=" +
                  net::ipv4_text(n.ip) + "/24 mprdma.hostname=" + std::string(basename());
  if (!cfg_.share_dir.empty()) a += " mprdma.share=" + cfg_.share_tag;
  if (!cfg_.append.empty()) a += " " + cfg_.append;
  return a;
}

std::string QemuHost::console_path() const {
  if (!cfg_.console_log.empty()) return cfg_.console_log;
  if (!env_.out_dir.empty()) return env_.out_dir + "/" + basename() + ".console.log";
  return {};
}

void QemuHost::launch() {
  pcie::QemuCommand c;
  c.binary = cfg_.qemu;
  c.memory_mib = cfg_.memory.n / kMiB;
  c.smp = static_cast<int>(cfg_.smp);
  c.cpu = cfg_.cpu;
  c.kernel = cfg_.kernel;
  c.initrd = cfg_.initrd;
  if (!cfg_.image_dir.empty()) {
    if (c.kernel.empty()) c.kernel = cfg_.image_dir + "/vmlinux";
    if (c.initrd.empty()) c.initrd = cfg_.image_dir + "/initramfs.cpio";
  }
  for (const std::string* f : {&c.kernel, &c.initrd, &cfg_.bios})
    if (!f->empty() && !file_exists(*f))
      throw std::runtime_error("QEMU host " + std::string(basename()) + ": no file " + *f);
  if (!c.kernel.empty()) c.append = kernel_append();
  c.bios = cfg_.bios;
  c.paused = cfg_.paused;
  c.ivshmem_socket = ivshmem_.path();
  c.vectors = static_cast<unsigned>(cfg_.vectors);
  c.netdev = cfg_.netdev;
  c.mac = nic_.config().mac;
  c.share_dir = cfg_.share_dir;
  c.share_tag = cfg_.share_tag;
  if (sync_) {
    if (cfg_.plugin.empty() || !file_exists(cfg_.plugin))
      throw std::runtime_error("QEMU host " + std::string(basename()) +
                               ": the sync time mode needs the TCG plugin; not found at '" +
                               cfg_.plugin + "'");
    c.icount_shift = static_cast<int>(cfg_.icount_shift);
    c.plugin = cfg_.plugin;
    c.plugin_fd = sync_->qemu_socket();
    c.plugin_counter_fd = sync_->qemu_counter();
    sync_->set_origin(sc_core::sc_time_stamp());
  }
  std::istringstream extra(cfg_.extra_args);
  for (std::string w; extra >> w;) c.extra.push_back(w);

  auto [ours, theirs] = pcie::make_socketpair();
  c.proxy_fd = theirs.get();
  argv_ = pcie::build_qemu_command(c);
  MPR_LOG(log_, info, "starting " << pcie::shell_quote(argv_));
  proxy_.start(std::move(ours));
  if (cfg_.console_tap_fd >= 0) process_.set_interactive(cfg_.console_tap_fd);
  process_.start(argv_, pcie::inherited_fds(c), console_path());
  // Only QEMU may hold its ends now, so its exit reads as EOF here.
  theirs.reset();
  if (sync_) sync_->close_qemu_ends();
  MPR_LOG(log_, info, "QEMU " << basename() << " running as pid " << process_.pid());
}

void QemuHost::on_console(const std::string& line) {
  lines_.push_back(line);
  MPR_LOG(log_, info, "console: " << line);
  if (line.rfind("MPRDMA-READY", 0) == 0) ready_ = true;
  const std::string exit_tag = "MPRDMA-RUN-EXIT ";
  if (line.rfind(exit_tag, 0) == 0) {
    try {
      run_exit_ = std::stoi(line.substr(exit_tag.size()));
    } catch (const std::exception&) {
      MPR_LOG(log_, warn, "unreadable exit status in '" << line << "'");
    }
  }
  console_event_.notify(sc_core::SC_ZERO_TIME);
}

void QemuHost::on_exit(const std::string& report) {
  exited_ = true;
  exit_report_ = report;
  const pcie::QemuProcess::ExitStatus st = process_.status();
  if (st.exited && st.code == 0) {
    MPR_LOG(log_, info, report);
  } else {
    MPR_LOG(log_, warn, report);
  }
  if (sync_) sync_->detach();
  // The guest machine is gone (powered off, crashed, killed), and with it
  // the NIC's host: without this the NIC would go on answering its peers,
  // ACKing writes into memory that no longer exists, and a peer would never
  // notice the host died. A device reset drops every QP, so the NIC then
  // ignores requests (unknown QPs are dropped silently) as a NIC without
  // power does, and the peers' transport retries run out.
  if (!stopping_) {
    const uint32_t v = MPR_SET(RESET, RESET, 1);
    rc_.post_mmio_write(nic_.config().bar0_base + MPR_BAR0_OFF(RESET), &v, sizeof v);
    MPR_LOG(log_, info,
            "QEMU " << basename() << " is gone: NIC " << nic_.config().name
                    << " reset (its QPs no longer answer)");
  }
  // Powering off after the run script (MPRDMA-RUN-EXIT seen) is the
  // expected end of a guest, not a failure that should stop the others.
  if (cfg_.on_exit == QemuHostConfig::OnExit::stop && !run_exit_) stop_requested_ = true;
}

void QemuHost::service() {
  for (const std::string& m : ivshmem_.take_messages()) MPR_LOG(log_, info, "ivshmem: " << m);
  for (pcie::QemuProcess::Event& e : process_.take_events()) {
    switch (e.kind) {
      case pcie::QemuProcess::Event::kConsoleLine:
        on_console(e.text);
        break;
      case pcie::QemuProcess::Event::kStderrLine:
        if (stopping_) {
          MPR_LOG(log_, info, "qemu: " << e.text);
        } else {
          MPR_LOG(log_, warn, "qemu: " << e.text);
        }
        break;
      case pcie::QemuProcess::Event::kExited:
        on_exit(e.text);
        break;
    }
  }
  proxy_.service();
  if (sync_) {
    sync_->service(sc_core::sc_time_stamp());
    for (const std::string& m : sync_->take_messages()) MPR_LOG(log_, info, "sync: " << m);
  }
  // Between slices nothing holds a pointer into guest RAM.
  guest_mem_.release_retired();
}

sc_core::sc_time QemuHost::horizon() const {
  if (!sync_ || exited_ || proxy_.busy()) return sc_core::sc_max_time();
  sc_core::sc_time h = sync_->horizon();
  const sc_core::sc_time due = proxy_.next_due();
  if (due != sc_core::sc_max_time()) h = std::max(h, due);
  return h;
}

double QemuHost::pacing_ratio() const { return !sync_ && !exited_ ? cfg_.ratio : 0.0; }

void QemuHost::wait_fds(std::vector<int>* fds) const {
  fds->push_back(proxy_.wake_fd());
  fds->push_back(process_.wake_fd());
  fds->push_back(ivshmem_.message_fd());
  if (sync_ && !sync_->detached() && sync_->poll_fd() >= 0) fds->push_back(sync_->poll_fd());
}

bool QemuHost::BusMasterGate::allowed(const char* what, uint64_t pa) {
  if (!h_.cfg_.require_bus_master || h_.proxy_.bus_master()) return true;
  h_.refused_dma_.add();
  if (!h_.bus_master_warned_) {
    h_.bus_master_warned_ = true;
    MPR_LOG(h_.log_, warn,
            what << " at 0x" << std::hex << pa << std::dec
                 << " refused: the guest has not enabled bus mastering on the NIC "
                    "(pci_set_master); further refusals are only counted");
  }
  return false;
}

bool QemuHost::BusMasterGate::read(uint64_t pa, void* dst, size_t len) {
  return allowed("DMA read", pa) && h_.guest_mem_.read(pa, dst, len);
}

bool QemuHost::BusMasterGate::write(uint64_t pa, const void* src, size_t len) {
  return allowed("DMA write", pa) && h_.guest_mem_.write(pa, src, len);
}

uint8_t* QemuHost::BusMasterGate::ptr(uint64_t pa, size_t len) {
  return h_.cfg_.require_bus_master && !h_.proxy_.bus_master() ? nullptr
                                                               : h_.guest_mem_.ptr(pa, len);
}

}  // namespace mprdma::host
