// The bridge with the real qemu-system-x86_64 (ctest label "guest"): the
// proxy handshake of a paused QEMU, and a 64 KiB firmware (firmware/
// bar_probe.S) that programs the NIC's BARs and reads its registers through
// real QEMU in both time modes. No guest image is needed. Every case skips
// when QEMU is not installed.
#include <gtest/gtest.h>
#include <mprdma/regs_util.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <systemc>

#include "qemu_test_util.h"
#include "support/sim_test.h"
#include "vp/core/kernel.h"
#include "vp/host/qemu_host.h"

namespace mprdma::host {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kSpin = 100000;  // bar_probe.S's SPIN
constexpr uint64_t kReads = 2000;   // and READS

bool have_qemu() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  size_t start = 0;
  while (start <= p.size()) {
    const size_t end = p.find(':', start);
    const std::string dir = p.substr(start, end == std::string::npos ? end : end - start);
    if (::access((dir + "/qemu-system-x86_64").c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

class QemuGuestTest : public test::SimTest {
 protected:
  void SetUp() override {
    if (!have_qemu()) GTEST_SKIP() << "qemu-system-x86_64 is not installed";
    SimTest::SetUp();
  }
  void TearDown() override {
    if (host_) loop_.remove(host_.get());
    host_.reset();
  }
  void launch(const QemuHostConfig& cfg) {
    host_ = std::make_unique<QemuHost>("g0", cfg, nic_, pcie_, *env);
    loop_.add(host_.get());
  }
  QemuHostConfig firmware_config() const {
    QemuHostConfig c;
    c.bios = MPRDMA_BAR_PROBE_BIN;
    c.memory.n = 64 * kMiB;
    // The firmware ends the run through this port: exit status (v << 1) | 1.
    c.extra_args = "-device isa-debug-exit,iobase=0xf4,iosize=0x04";
    return c;
  }
  // Runs until QEMU has exited and the run loop stops (on_exit: stop).
  bool run_to_exit(double limit_s) {
    // A guest that ends its run script and powers off is an expected exit
    // (no stop request): wait for the exit itself.
    return test::run_until(
        loop_, [&] { return host_->stop_requested() || host_->qemu_exited(); }, limit_s);
  }
  std::vector<pcie::QemuProxy::HistoryEntry> bar_reads() const {
    std::vector<pcie::QemuProxy::HistoryEntry> out;
    for (const auto& e : host_->proxy().history())
      if (e.cmd == pcie::mpqemu::kBarRead) out.push_back(e);
    return out;
  }
  double median(const std::string& hist) const {
    const core::Histogram* h = env->stats.find_histogram(hist);
    return h ? h->percentile(50) : -1;
  }

  nic::NicConfig nic_;
  pcie::PcieConfig pcie_;
  std::unique_ptr<QemuHost> host_;
  pcie::QemuRunLoop loop_;
};

TEST_F(QemuGuestTest, PausedQemuHandshakesAndItsExitIsReportedByName) {
  QemuHostConfig cfg;
  cfg.paused = true;
  cfg.memory.n = 256 * kMiB;
  launch(cfg);
  // QEMU's device realize and machine reset: memory map, irqfd, BAR
  // discovery, then DEVICE_RESET (served by SystemC through the run loop).
  ASSERT_TRUE(test::run_until(
      loop_, [&] { return host_->proxy().counts().resets >= 1 && host_->ivshmem().connected(); },
      30))
      << "no handshake; QEMU said: " << host_->process().exit_report();
  const auto h = host_->proxy().history();
  ASSERT_GE(h.size(), 2u + 4u + 28u + 1u);
  EXPECT_EQ(h[0].cmd, pcie::mpqemu::kSyncSysmem);
  size_t i = 0;
  while (i < h.size() && h[i].cmd == pcie::mpqemu::kSyncSysmem) ++i;
  ASSERT_LT(i, h.size());
  EXPECT_EQ(h[i].cmd, pcie::mpqemu::kSetIrqfd);
  EXPECT_EQ(h[i].value, 2u) << "two eventfds";
  // Identity reads, then read / all ones / read / restore for 7 BARs.
  const uint64_t ident[4] = {0x00, 0x02, 0x0a, 0x2e};
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(h[i + 1 + k].cmd, pcie::mpqemu::kPciCfgRead);
    EXPECT_EQ(h[i + 1 + k].addr, ident[k]);
  }
  const uint64_t masks[7] = {0xFFFF0000u, 0, 0xFFC00000u, 0, 0, 0, 0};
  for (int b = 0; b < 7; ++b) {
    const auto& probe = h[i + 5 + 4 * b + 2];
    EXPECT_EQ(probe.cmd, pcie::mpqemu::kPciCfgRead);
    EXPECT_EQ(probe.addr, 0x10u + 4 * b);
    EXPECT_EQ(probe.value, masks[b]) << "BAR " << b;
  }
  bool reset_seen = false;
  for (const auto& e : h) reset_seen |= e.cmd == pcie::mpqemu::kDeviceReset;
  EXPECT_TRUE(reset_seen);
  for (const auto& r : host_->memory().regions())
    std::printf("guest RAM region [0x%llx, 0x%llx)\n", static_cast<unsigned long long>(r.gpa),
                static_cast<unsigned long long>(r.gpa + r.size));
  std::printf("%llu SYNC_SYSMEM messages before the guest ran\n",
              static_cast<unsigned long long>(host_->proxy().counts().sysmem_syncs));
  const uint64_t mapped = host_->memory().mapped_bytes();
  EXPECT_GE(mapped, 250 * kMiB) << "guest RAM is mapped (minus the legacy holes)";
  EXPECT_LE(mapped, 256 * kMiB);
  EXPECT_EQ(host_->process().running(), true);

  host_->stop_qemu();
  ASSERT_TRUE(run_to_exit(30));
  EXPECT_TRUE(host_->qemu_exited());
  EXPECT_FALSE(loop_.next_step(sc_core::sc_time(100, sc_core::SC_US)).has_value())
      << "on_exit stop: the run loop ends the simulation";
  const std::string& report = host_->exit_report();
  EXPECT_NE(report.find("QEMU g0 (pid "), std::string::npos) << report;
  EXPECT_TRUE(report.find("exited with status") != std::string::npos ||
              report.find("killed by signal") != std::string::npos)
      << report;
}

TEST_F(QemuGuestTest, KilledQemuIsReportedWithItsSignal) {
  QemuHostConfig cfg;
  cfg.paused = true;
  cfg.memory.n = 64 * kMiB;
  launch(cfg);
  ASSERT_TRUE(test::run_until(loop_, [&] { return host_->proxy().counts().resets >= 1; }, 30));
  const core::Counter* nic_resets = env->stats.find_counter("nic.nic0.hostif.resets");
  ASSERT_NE(nic_resets, nullptr);
  // Let QEMU's DEVICE_RESETs land in the NIC. QEMU may send another one at
  // any wall-clock moment (it sent two in one CI run): take the counts
  // once no new one arrived over a 10 us step and the NIC has taken every
  // one the proxy received (the proxy injects each at the simulated time
  // its arrival maps to, which on a loaded machine can lie beyond the
  // step), and count later ones below.
  uint64_t proxy_before = 0, resets_before = 0;
  int steps = 0;
  do {
    proxy_before = host_->proxy().counts().resets;
    // Through the run loop: it injects what the proxy received (a plain
    // sc_start would never hand the NIC a reset the proxy counted after the
    // wait above returned; under load that happened).
    const auto step = loop_.next_step(sc_core::sc_time(10, sc_core::SC_US));
    ASSERT_TRUE(step.has_value()) << "QEMU ended before it was killed";
    sc_core::sc_start(*step);
    resets_before = nic_resets->value();
    ASSERT_LT(++steps, 100000) << "the NIC took " << resets_before << " of the proxy's "
                               << proxy_before << " DEVICE_RESETs in 1 s of simulated time";
  } while (host_->proxy().counts().resets != proxy_before || resets_before < proxy_before);
  ::kill(host_->process().pid(), SIGKILL);
  ASSERT_TRUE(run_to_exit(30));
  // The exit (reaped by the process's thread) and the EOF on the proxy
  // socket (seen by the proxy's I/O thread) are events of two threads: the
  // exit can come first (it did in a clean-clone run, and under load), and
  // the run loop has ended with it (on_exit stop).
  ASSERT_TRUE(test::wait_for_thread([&] { return !host_->proxy().connected(); }, 30));
  EXPECT_NE(host_->exit_report().find("QEMU g0 (pid "), std::string::npos);
  EXPECT_NE(host_->exit_report().find("killed by signal 9 (SIGKILL)"), std::string::npos)
      << host_->exit_report();
  EXPECT_FALSE(host_->proxy().connected());
  EXPECT_TRUE(host_->memory().regions().empty()) << "the dead guest's memory is dropped";
  // The machine is gone, so is its NIC: a reset drops its QPs, and peers
  // see their transport retries run out instead of a NIC that answers.
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_US));
  const uint64_t late_device_resets = host_->proxy().counts().resets - proxy_before;
  EXPECT_EQ(nic_resets->value(), resets_before + late_device_resets + 1)
      << "QEMU's exit resets the NIC (" << late_device_resets << " DEVICE_RESETs came late)";
}

TEST_F(QemuGuestTest, FirmwareReadsTheNicThroughRealQemu) {
  launch(firmware_config());
  ASSERT_TRUE(run_to_exit(120)) << host_->process().exit_report();
  EXPECT_EQ(host_->console_lines(),
            (std::vector<std::string>{"MPRDMA-READY", "MPRDMA-RUN-EXIT 0"}));
  EXPECT_TRUE(host_->guest_ready());
  ASSERT_TRUE(host_->run_exit().has_value());
  EXPECT_EQ(*host_->run_exit(), 0);
  EXPECT_TRUE(host_->process().status().exited);
  EXPECT_EQ(host_->process().status().code, 33) << host_->exit_report();
  EXPECT_NE(host_->exit_report().find("QEMU g0 (pid "), std::string::npos);
  EXPECT_EQ(host_->proxy().bar_base(0), 0xC0000000u);
  EXPECT_EQ(host_->proxy().bar_base(2), 0xC1000000u);
  const auto c = host_->proxy().counts();
  EXPECT_EQ(c.bar_reads, kReads + 3);
  EXPECT_EQ(c.bar_writes, 1u);
  EXPECT_EQ(c.unclaimed, 0u);
  const double rtt = median("pcie.nic0.proxy.bar_read_interval_us");
  const double inside = median("pcie.nic0.proxy.bar_read_wall_us");
  std::printf(
      "BAR read round trip through real QEMU (free-running): median %.1f us between "
      "reads, of which %.1f us inside the simulator (%.1f us waiting for the run "
      "loop)\n",
      rtt, inside, median("pcie.nic0.proxy.access_queue_wall_us"));
  RecordProperty("qemu_bar_read_rtt_median_us", std::to_string(rtt));
}

TEST_F(QemuGuestTest, SeaBiosAssignsTheBarsAndASynchronisedGuestStopsPromptly) {
  QemuHostConfig cfg;
  cfg.memory.n = 128 * kMiB;
  cfg.time_mode = QemuHostConfig::TimeMode::sync;
  cfg.quantum = 100000;
  launch(cfg);
  // QEMU's default firmware enumerates PCI and assigns memory to the BARs.
  ASSERT_TRUE(test::run_until(
      loop_,
      [&] {
        return host_->proxy().bar_base(0) != 0 && host_->proxy().bar_base(2) != 0 &&
               host_->sync_clock()->syncs() >= 10;
      },
      120))
      << host_->process().exit_report();
  EXPECT_EQ(host_->proxy().bar_base(0) % (64 * 1024), 0u);
  EXPECT_EQ(host_->proxy().bar_base(2) % (4 * kMiB), 0u);
  std::printf("SeaBIOS put BAR0 at 0x%llx and BAR2 at 0x%llx after %llu instructions\n",
              static_cast<unsigned long long>(host_->proxy().bar_base(0)),
              static_cast<unsigned long long>(host_->proxy().bar_base(2)),
              static_cast<unsigned long long>(host_->sync_clock()->last_count()));
  // The run loop no longer runs, so the vCPU soon blocks in the plugin
  // (or halts); stopping must not wait for the SIGKILL fallback.
  const auto t0 = std::chrono::steady_clock::now();
  host_->stop_qemu();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 1.5) << "QEMU needed the SIGKILL fallback";
  ASSERT_TRUE(run_to_exit(30));
  EXPECT_TRUE(host_->process().status().exited) << host_->exit_report();
}

struct SyncRun {
  std::vector<uint64_t> stamps;  // instruction counts of the BAR reads in the history
  uint64_t syncs = 0, last_count = 0;
  sc_core::sc_time offset;
  int exit_code = -1;
};

TEST_F(QemuGuestTest, SynchronisedModeFollowsTheInstructionCountDeterministically) {
  auto run = [&]() {
    QemuHostConfig cfg = firmware_config();
    cfg.time_mode = QemuHostConfig::TimeMode::sync;
    cfg.quantum = 10000;
    cfg.icount_shift = 0;
    launch(cfg);
    EXPECT_TRUE(run_to_exit(180)) << host_->process().exit_report();
    SyncRun r;
    for (const auto& e : bar_reads()) r.stamps.push_back(e.stamp);
    r.syncs = host_->sync_clock()->syncs();
    r.last_count = host_->sync_clock()->last_count();
    r.offset = host_->sync_clock()->offset();
    r.exit_code = host_->process().status().code;
    return r;
  };
  const SyncRun a = run();
  EXPECT_EQ(a.exit_code, 33) << host_->exit_report();
  ASSERT_GE(a.stamps.size(), 2u);
  // The two marker reads are 2 x SPIN instructions (dec; jnz) apart, plus
  // the handful around them.
  const uint64_t gap = a.stamps[1] - a.stamps[0];
  EXPECT_GE(gap, 2 * kSpin);
  EXPECT_LE(gap, 2 * kSpin + 64);
  EXPECT_GE(a.syncs, 2 * kSpin / 10000);
  EXPECT_GE(a.last_count, 2 * kSpin);
  // Every read stalled the vCPU for the PCIe round trip in SystemC time.
  const double access_ns = median("pcie.nic0.proxy.access_sim_ns");
  EXPECT_GT(access_ns, 300);
  const double accesses = kReads + 4;  // marker reads, the write and its read-back
  EXPECT_NEAR(a.offset.to_seconds() * 1e9, access_ns * accesses, access_ns * accesses * 0.2);
  std::printf(
      "sync mode: %llu syncs, %llu instructions, marker gap %llu instructions, "
      "stall offset %s, BAR read round trip %.1f us (wall, between reads)\n",
      static_cast<unsigned long long>(a.syncs), static_cast<unsigned long long>(a.last_count),
      static_cast<unsigned long long>(gap), a.offset.to_string().c_str(),
      median("pcie.nic0.proxy.bar_read_interval_us"));

  // A second run from a fresh kernel sees the same instruction counts and
  // the same SystemC time.
  loop_.remove(host_.get());
  host_.reset();
  loop_ = pcie::QemuRunLoop();
  core::reset_kernel();
  env = std::make_unique<core::SimEnv>(1);
  const SyncRun b = run();
  EXPECT_EQ(b.exit_code, 33);
  EXPECT_EQ(a.stamps, b.stamps);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.last_count, b.last_count);
}

}  // namespace
}  // namespace mprdma::host
