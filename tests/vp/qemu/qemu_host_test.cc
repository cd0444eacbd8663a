// QemuHost with a fake QEMU over a socketpair: the proxy protocol end to
// end into the NIC model, without QEMU. The fake runs on its own thread
// (a real vCPU waits for each reply); the test thread drives SystemC with
// the QEMU run loop, as the platform does.
#include "vp/host/qemu_host.h"

#include <gtest/gtest.h>
#include <mprdma/hw.h>
#include <mprdma/regs_util.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <systemc>
#include <thread>

#include "qemu_test_util.h"
#include "support/fuzz_stream.h"
#include "support/log_capture.h"
#include "support/sim_test.h"

namespace mprdma::host {
namespace {

using pcie::UniqueFd;
using test::FakeQemu;
using test::MemFile;
using test::wait_readable;

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kBar0 = 0xC0000000;  // where the fake guest puts the BARs
constexpr uint64_t kBar2 = 0xC1000000;
constexpr uint32_t kCmdMemMaster = 0x0006;

uint64_t reg(uint64_t off) { return kBar0 + off; }

class QemuHostTest : public test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    auto [dev, qemu] = pcie::make_socketpair();
    qemu_ = std::make_unique<FakeQemu>(std::move(qemu));
    host_ = std::make_unique<QemuHost>("h0", cfg_, nic_, pcie_, *env, std::move(dev));
    loop_.add(host_.get());
  }
  void TearDown() override {
    loop_.remove(host_.get());
    host_.reset();
    SimTest::TearDown();
  }

  // Runs `script` as QEMU on a thread while SystemC runs.
  void with_qemu(const std::function<void(FakeQemu&)>& script, double limit_s = 60) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      script(*qemu_);
      done.store(true);
    });
    const bool ok = test::run_until(loop_, [&] { return done.load(); }, limit_s);
    t.join();
    EXPECT_TRUE(ok) << "the fake QEMU did not finish within " << limit_s << " s";
  }
  // Runs SystemC until `cond` (a few seconds at most).
  bool run_until(const std::function<bool()>& cond, double limit_s = 10) {
    return test::run_until(loop_, cond, limit_s);
  }
  uint64_t counter(const std::string& path) const {
    const core::Counter* c = env->stats.find_counter(path);
    return c ? c->value() : 0;
  }

  // The guest's PCI set-up: BARs and command register.
  static void program_bars(FakeQemu& q, uint32_t command = kCmdMemMaster) {
    EXPECT_EQ(q.cfg_write(0x10, kBar0, 4), 0u);
    EXPECT_EQ(q.cfg_write(0x18, kBar2, 4), 0u);
    EXPECT_EQ(q.cfg_write(0x04, command, 2), 0u);
  }
  // Polls a register until (value & mask) == want, at most `tries` reads.
  static bool poll_reg(FakeQemu& q, uint64_t off, uint32_t mask, uint32_t want,
                       int tries = 200000) {
    for (int i = 0; i < tries; ++i)
      if ((q.bar_read(reg(off), 4) & mask) == want) return true;
    return false;
  }
  // Enables the admin queue with its rings at `asq`/`acq` (4 entries).
  static void enable_aq(FakeQemu& q, uint64_t asq, uint64_t acq, uint32_t extra = 0) {
    ASSERT_TRUE(poll_reg(q, MPR_BAR0_OFF(STATUS), MPRDMA_BAR0__STATUS__READY_bm,
                         MPRDMA_BAR0__STATUS__READY_bm))
        << "the NIC never became ready";
    q.bar_write(reg(MPR_BAR0_OFF(AQ_BASE_LO)), static_cast<uint32_t>(asq), 4);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_BASE_HI)), static_cast<uint32_t>(asq >> 32), 4);
    q.bar_write(reg(MPR_BAR0_OFF(ACQ_BASE_LO)), static_cast<uint32_t>(acq), 4);
    q.bar_write(reg(MPR_BAR0_OFF(ACQ_BASE_HI)), static_cast<uint32_t>(acq >> 32), 4);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_CFG)),
                MPR_SET(AQ_CFG, SQ_LOG_SIZE, 2) | MPR_SET(AQ_CFG, CQ_LOG_SIZE, 2) |
                    MPR_SET(AQ_CFG, ENABLE, 1) | extra,
                4);
  }
  static void put_nop(MemFile& m, uint64_t off, uint16_t id) {
    mpr_cmd cmd{};
    cmd.hdr.opcode = MPR_CMD_NOP;
    cmd.hdr.cmd_id = id;
    std::memcpy(m.at(off), &cmd, sizeof cmd);
  }

  QemuHostConfig cfg_;
  nic::NicConfig nic_;
  pcie::PcieConfig pcie_;
  std::unique_ptr<FakeQemu> qemu_;
  std::unique_ptr<QemuHost> host_;
  pcie::QemuRunLoop loop_;
};

TEST_F(QemuHostTest, ConfigSpaceAndBarSizingAsQemuProbes) {
  with_qemu([](FakeQemu& q) {
    // probe_pci_info's order: vendor, device, class, subsystem, then each
    // BAR: read, all ones, read the mask, restore.
    EXPECT_EQ(q.cfg_read(0x00, 2), 0xC0DEu);
    EXPECT_EQ(q.cfg_read(0x02, 2), 0x4D50u);
    EXPECT_EQ(q.cfg_read(0x0a, 2), 0x0200u);
    EXPECT_EQ(q.cfg_read(0x2e, 2), 0x0001u);
    EXPECT_EQ(q.cfg_read(0x0e, 1), 0x80u);
    const uint64_t masks[7] = {0xFFFF0000u, 0, 0xFFC00000u, 0, 0, 0, 0};
    for (int i = 0; i < 7; ++i) {
      const uint32_t off = 0x10 + 4 * i;
      const uint64_t orig = q.cfg_read(off, 4);
      EXPECT_EQ(q.cfg_write(off, 0xFFFFFFFFu, 4), 0u);
      EXPECT_EQ(q.cfg_read(off, 4), masks[i]) << "BAR at 0x" << std::hex << off;
      EXPECT_EQ(q.cfg_write(off, static_cast<uint32_t>(orig), 4), 0u);
    }
    EXPECT_EQ(q.cfg_read(0xfe, 4), UINT64_MAX) << "beyond the 256 bytes";
    EXPECT_EQ(q.cfg_write(0x04, 0xFFFF, 2), 0u);
    EXPECT_EQ(q.cfg_read(0x04, 2), 0x0546u);
  });
  const auto h = host_->proxy().history();
  ASSERT_GE(h.size(), 5u);
  EXPECT_EQ(h[0].cmd, pcie::mpqemu::kPciCfgRead);
  EXPECT_EQ(h[0].addr, 0u);
  EXPECT_EQ(host_->proxy().counts().cfg_reads, 5u + 14u + 2u);
}

TEST_F(QemuHostTest, BarAccessesReachTheNicRegisters) {
  std::vector<double> rtt_us;
  with_qemu([&](FakeQemu& q) {
    EXPECT_EQ(q.bar_read(kBar0, 4), UINT64_MAX) << "no BAR is programmed yet";
    program_bars(q);
    // ID register 0xC0DE / 0x4D50 through BAR0, rebased onto the NIC's BAR0.
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(ID)), 4), 0x4D50C0DEu);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(VERSION)), 4) >> 16, uint64_t{MPR_IF_VERSION_MAJOR})
        << "VERSION.MAJOR";
    // A register write is read back.
    EXPECT_EQ(q.bar_write(reg(MPR_BAR0_OFF(AQ_BASE_LO)), 0x12345000, 4), 0u);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(AQ_BASE_LO)), 4), 0x12345000u);
    // The NIC's own rules apply: BAR0 is 32-bit only, UAR pages read ones.
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(ID)), 2) & 0xffff, 0xffffu);
    EXPECT_EQ(q.bar_read(kBar2, 4) & 0xffffffffu, 0xffffffffu);
    // Outside both BARs: a master abort, all ones.
    EXPECT_EQ(q.bar_read(0xD0000000, 4), UINT64_MAX);
    // Memory decoding off: nothing is claimed.
    EXPECT_EQ(q.cfg_write(0x04, 0, 2), 0u);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(ID)), 4), UINT64_MAX);
    EXPECT_EQ(q.cfg_write(0x04, kCmdMemMaster, 2), 0u);
    // Round trip of a BAR read through the bridge, the run loop and the
    // PCIe model (free-running time, ratio 1).
    for (int i = 0; i < 2000; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const uint64_t v = q.bar_read(reg(MPR_BAR0_OFF(ID)), 4);
      rtt_us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      if (v != 0x4D50C0DEu) {
        ADD_FAILURE() << "read " << i << " gave 0x" << std::hex << v;
        break;
      }
    }
  });
  EXPECT_EQ(host_->proxy().bar_base(0), kBar0);
  EXPECT_EQ(host_->proxy().bar_base(2), kBar2);
  const auto c = host_->proxy().counts();
  EXPECT_EQ(c.unclaimed, 3u);
  EXPECT_GE(counter("nic.nic0.hostif.mmio_reads"), 2000u);
  EXPECT_EQ(counter("pcie.nic0.proxy.unclaimed"), 3u);
  std::sort(rtt_us.begin(), rtt_us.end());
  ASSERT_FALSE(rtt_us.empty());
  const double p50 = rtt_us[rtt_us.size() / 2], p99 = rtt_us[rtt_us.size() * 99 / 100];
  const core::Histogram* sim = env->stats.find_histogram("pcie.nic0.proxy.access_sim_ns");
  const core::Histogram* dev = env->stats.find_histogram("pcie.nic0.proxy.bar_read_wall_us");
  ASSERT_NE(sim, nullptr);
  ASSERT_NE(dev, nullptr);
  std::printf(
      "BAR read round trip (fake QEMU, free-running): median %.1f us, p99 %.1f us; "
      "inside the simulator (arrival to reply) median %.1f us; simulated PCIe read "
      "%.0f ns\n",
      p50, p99, dev->percentile(50), sim->percentile(50));
  RecordProperty("bar_read_rtt_median_us", std::to_string(p50));
  RecordProperty("bar_read_rtt_p99_us", std::to_string(p99));
  EXPECT_GT(sim->percentile(50), 300.0) << "a read pays the PCIe round trip in SystemC time";
}

TEST_F(QemuHostTest, SyncSysmemMapsGuestRamAndNicDmaLandsThere) {
  MemFile ram(4 * kMiB), ram2(4 * kMiB);
  const uint64_t hi = 1ull << 32;  // a second region above 4 GiB
  const uint64_t asq = 0x10000, acq = hi + 0x2000;
  put_nop(ram, asq, 0x1234);
  put_nop(ram2, asq + MPR_CMD_SIZE, 0x5678);
  with_qemu([&](FakeQemu& q) {
    ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram.fd()}, {hi, 2 * kMiB, 2 * kMiB, ram.fd()}}));
    program_bars(q);
    enable_aq(q, asq, acq);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 1, 4);
    EXPECT_TRUE(poll_reg(q, MPR_BAR0_OFF(ACQ_PI), 0xffff, 1)) << "no admin completion";
    // A new memory map replaces the old one wholesale: the next command is
    // fetched from, and completed into, the second memfd.
    ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram2.fd()}, {hi, 2 * kMiB, 2 * kMiB, ram2.fd()}}));
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 2, 4);
    EXPECT_TRUE(poll_reg(q, MPR_BAR0_OFF(ACQ_PI), 0xffff, 2)) << "no second completion";
  });
  // The completion write commits when it reaches the root complex; let it.
  const uint64_t acq_off = 2 * kMiB + 0x2000;
  ASSERT_TRUE(run_until([&] { return ram2.load<mpr_cmd_comp>(acq_off + 32).owner != 0; }));
  const auto c1 = ram.load<mpr_cmd_comp>(acq_off);
  EXPECT_EQ(c1.cmd_id, 0x1234);
  EXPECT_EQ(c1.status, MPR_CMD_OK);
  EXPECT_EQ(c1.owner & 1, MPR_PHASE(0, 2));
  const auto c2 = ram2.load<mpr_cmd_comp>(acq_off + 32);
  EXPECT_EQ(c2.cmd_id, 0x5678);
  EXPECT_EQ(ram.load<mpr_cmd_comp>(acq_off + 32).owner, 0) << "nothing went to the old map";
  EXPECT_EQ(host_->proxy().counts().sysmem_syncs, 2u);
  EXPECT_EQ(host_->memory().generation(), 2u);
  EXPECT_EQ(counter("pcie.nic0.dma_write_errors"), 0u);
}

TEST_F(QemuHostTest, DmaOutsideGuestRamIsRefusedAndCounted) {
  MemFile ram(2 * kMiB);
  put_nop(ram, 0x10000, 1);
  with_qemu([&](FakeQemu& q) {
    ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram.fd()}}));
    program_bars(q);
    enable_aq(q, 0x10000, 0x80000000);  // completion ring in no region
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 1, 4);
    EXPECT_TRUE(poll_reg(q, MPR_BAR0_OFF(ACQ_PI), 0xffff, 1));
  });
  ASSERT_TRUE(run_until([&] { return counter("pcie.nic0.dma_write_errors") > 0; }));
  EXPECT_GE(host_->memory().refused_writes(), 1u);
}

TEST_F(QemuHostTest, WithoutBusMasteringTheNicCannotDma) {
  MemFile ram(2 * kMiB);
  put_nop(ram, 0x10000, 1);
  with_qemu([&](FakeQemu& q) {
    ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram.fd()}}));
    program_bars(q, 0x0002);  // memory decoding only, no pci_set_master
    enable_aq(q, 0x10000, 0x20000);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 1, 4);
    // The fetch fails; give the NIC time to try.
    poll_reg(q, MPR_BAR0_OFF(STATUS), MPRDMA_BAR0__STATUS__FATAL_bm, MPRDMA_BAR0__STATUS__FATAL_bm,
             200);
  });
  ASSERT_TRUE(run_until([&] { return counter("pcie.nic0.qemu.dma_without_bus_master") > 0; }));
  EXPECT_EQ(ram.load<mpr_cmd_comp>(0x20000).owner, 0);
}

TEST_F(QemuHostTest, DeviceResetResetsConfigSpaceAndTheNic) {
  with_qemu([&](FakeQemu& q) {
    program_bars(q);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_BASE_LO)), 0xABC000, 4);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(AQ_BASE_LO)), 4), 0xABC000u);
    EXPECT_EQ(q.device_reset(), 0u);
    EXPECT_EQ(q.cfg_read(0x10, 4), 0u) << "BARs unassigned after reset";
    EXPECT_EQ(q.cfg_read(0x04, 2), 0u);
    program_bars(q);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(AQ_BASE_LO)), 4), 0u) << "NIC registers reset";
  });
  EXPECT_EQ(host_->proxy().counts().resets, 1u);
  EXPECT_EQ(counter("nic.nic0.hostif.resets"), 1u) << "the NIC saw RESET written once";
}

// What a faulty or hostile guest driver can do through QEMU: random config
// space and BAR accesses of every size, resets, the register file and the
// doorbell pages hit at random, the admin queue enabled over rings of random
// bytes (guest RAM is filled with them) and rung. The NIC must answer every
// access (a hang or a crash fails the test) and, after a DEVICE_RESET, work
// as new: its admin queue completes a NOP.
TEST_F(QemuHostTest, RandomGuestRegisterTrafficNeitherHangsNorBreaksTheNic) {
  test::LogCapture log("");  // thousands of warnings about bad accesses
  auto rng = test::fuzz::Stream("qemu_register_fuzz");
  const int rounds = test::fuzz::Rounds(3000);
  const uint64_t bar2_size = 4 * kMiB;  // QemuProxyConfig's BAR sizes
  const uint64_t regs = sizeof(mprdma_bar0_t), ram_size = 2 * kMiB;
  MemFile ram(ram_size);
  for (uint64_t off = 0; off < ram_size; off += 8) {
    const uint64_t v = rng();
    std::memcpy(ram.at(off), &v, sizeof v);
  }
  // Mostly what a driver writes (a register, 32 bits: a small number, one
  // bit, an address in guest RAM), sometimes anything anywhere.
  auto reg_value = [&]() -> uint64_t {
    switch (rng() % 4) {
      case 0:
        return rng() % 16;
      case 1:
        return uint64_t{1} << (rng() % 32);
      case 2:
        return (rng() % ram_size) & ~uint64_t{63};
      default:
        return rng();
    }
  };
  std::map<std::string, int> kinds;
  with_qemu([&](FakeQemu& q) {
    ASSERT_TRUE(q.sync_sysmem({{0, ram_size, 0, ram.fd()}}));
    program_bars(q);
    for (int i = 0; i < rounds && !::testing::Test::HasFailure(); ++i) {
      const unsigned pick = rng() % 100;
      if (pick < 40) {
        ++kinds["register write"];
        q.bar_write(kBar0 + ((rng() % regs) & ~uint64_t{3}), reg_value(), 4);
      } else if (pick < 48) {
        ++kinds["admin queue enabled over random rings and rung"];
        const uint64_t asq = (rng() % ram_size) & ~uint64_t{63};
        const uint64_t acq = (rng() % ram_size) & ~uint64_t{63};
        q.bar_write(reg(MPR_BAR0_OFF(AQ_BASE_LO)), asq, 4);
        q.bar_write(reg(MPR_BAR0_OFF(ACQ_BASE_LO)), acq, 4);
        q.bar_write(reg(MPR_BAR0_OFF(AQ_CFG)),
                    MPR_SET(AQ_CFG, SQ_LOG_SIZE, rng() % 8) |
                        MPR_SET(AQ_CFG, CQ_LOG_SIZE, rng() % 8) | MPR_SET(AQ_CFG, ENABLE, 1),
                    4);
        q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), rng() % 256, 4);
      } else if (pick < 63) {
        ++kinds["doorbell write"];
        q.bar_write(kBar2 + ((rng() % (64 * MPR_UAR_PAGE_SIZE)) & ~uint64_t{7}),
                    rng() % 2 ? rng() % 4096 : rng(), 8);
      } else if (pick < 70) {
        ++kinds["access of any size anywhere"];
        const uint64_t at = rng() % 2 ? kBar0 + rng() % (64 * 1024) : kBar2 + rng() % bar2_size;
        const uint32_t size = 1u << (rng() % 4);
        if (rng() % 2)
          q.bar_write(at, rng(), size);
        else
          q.bar_read(at, size);
      } else if (pick < 82) {
        ++kinds["register read"];
        q.bar_read(kBar0 + ((rng() % regs) & ~uint64_t{3}), 4);
      } else if (pick < 88) {
        ++kinds["config write"];  // may move the BARs or turn decoding off
        q.cfg_write(static_cast<uint32_t>(rng() % 256), static_cast<uint32_t>(rng()),
                    1 << (rng() % 3));
      } else if (pick < 91) {
        ++kinds["config read"];
        q.cfg_read(static_cast<uint32_t>(rng() % 4096), 1 << (rng() % 3));
      } else if (pick < 98) {
        ++kinds["BARs programmed again"];
        program_bars(q);
      } else {
        ++kinds["device reset"];
        EXPECT_EQ(q.device_reset(), 0u);
        program_bars(q);
      }
    }
    if (::testing::Test::HasFailure()) return;
    // As new after a reset: the ID register, then a NOP through the admin
    // queue, its rings cleaned first (a driver's first steps after probe).
    EXPECT_EQ(q.device_reset(), 0u);
    program_bars(q);
    EXPECT_EQ(q.bar_read(reg(MPR_BAR0_OFF(ID)), 4), 0x4D50C0DEu);
    std::memset(ram.at(0x10000), 0, 4 * MPR_CMD_SIZE);
    std::memset(ram.at(0x20000), 0, 4 * sizeof(mpr_cmd_comp));
    put_nop(ram, 0x10000, 0x77);
    enable_aq(q, 0x10000, 0x20000);
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 1, 4);
    EXPECT_TRUE(poll_reg(q, MPR_BAR0_OFF(ACQ_PI), 0xffff, 1)) << "no admin completion";
  });
  for (const auto& [kind, n] : kinds) std::printf("  %5d x %s\n", n, kind.c_str());
  std::printf("  %llu admin commands taken, %llu doorbells refused, %llu accesses refused\n",
              static_cast<unsigned long long>(counter("nic.nic0.firmware.commands")),
              static_cast<unsigned long long>(counter("nic.nic0.hostif.bad_doorbells")),
              static_cast<unsigned long long>(counter("nic.nic0.hostif.bad_accesses")));
  ASSERT_TRUE(run_until([&] { return ram.load<mpr_cmd_comp>(0x20000).owner != 0; }));
  const auto c = ram.load<mpr_cmd_comp>(0x20000);
  EXPECT_EQ(c.cmd_id, 0x77);
  EXPECT_EQ(c.status, MPR_CMD_OK);
  EXPECT_GT(counter("nic.nic0.firmware.commands"), 1u) << "random admin commands were taken";
}

// A fake ivshmem client (QEMU's ivshmem-doorbell end).
struct IvshmemPeer {
  UniqueFd sock;
  std::vector<UniqueFd> vectors;
  bool connect(const std::string& path, unsigned n) {
    sock.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
    for (unsigned i = 0; i < 3 + n; ++i) {
      if (!wait_readable(sock.get(), 5000)) return false;
      int64_t v;
      std::vector<UniqueFd> fds;
      if (pcie::recv_exact(sock.get(), &v, sizeof v, &fds, nullptr) != sizeof v) return false;
      if (i >= 3 && !fds.empty()) vectors.push_back(std::move(fds[0]));
    }
    return vectors.size() == n;
  }
};

TEST_F(QemuHostTest, SetIrqfdIsAcceptedAndMsisGoThroughIvshmem) {
  MemFile ram(2 * kMiB);
  put_nop(ram, 0x10000, 9);
  IvshmemPeer peer;
  ASSERT_TRUE(peer.connect(host_->ivshmem().path(), static_cast<unsigned>(cfg_.vectors)));
  with_qemu([&](FakeQemu& q) {
    UniqueFd irq = pcie::make_eventfd(), resample = pcie::make_eventfd();
    const int fds[2] = {irq.get(), resample.get()};
    ASSERT_TRUE(pcie::mpqemu::send(q.fd(), pcie::mpqemu::kSetIrqfd, nullptr, 0, fds, 2));
    ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram.fd()}}));
    program_bars(q);
    // MSI-X entry 3 -> 0xFEE00000 / data 3, unmasked; admin completions
    // raise vector 3.
    q.bar_write(reg(MPR_BAR0_MSIX_OFF(3, ADDR_LO)), 0xFEE00000, 4);
    q.bar_write(reg(MPR_BAR0_MSIX_OFF(3, ADDR_HI)), 0, 4);
    q.bar_write(reg(MPR_BAR0_MSIX_OFF(3, DATA)), 3, 4);
    q.bar_write(reg(MPR_BAR0_MSIX_OFF(3, CTRL)), 0, 4);
    q.bar_write(reg(MPR_BAR0_OFF(INTR_MASK)), ~(1u << 3), 4);
    enable_aq(q, 0x10000, 0x20000, MPR_SET(AQ_CFG, VECTOR, 3) | MPR_SET(AQ_CFG, INTR_EN, 1));
    q.bar_write(reg(MPR_BAR0_OFF(AQ_PI)), 1, 4);
    EXPECT_TRUE(wait_readable(peer.vectors[3].get(), 10000)) << "MSI-X vector 3 never fired";
    EXPECT_FALSE(wait_readable(peer.vectors[2].get(), 0));
  });
  EXPECT_EQ(host_->proxy().counts().irqfds, 1u);
  EXPECT_GE(host_->ivshmem().notified(), 1u);
  EXPECT_EQ(counter("pcie.nic0.msis"), host_->ivshmem().notified());
}

TEST_F(QemuHostTest, QemuClosingTheConnectionIsReportedByName) {
  test::LogCapture log("");
  MemFile ram(2 * kMiB);
  with_qemu([&](FakeQemu& q) { ASSERT_TRUE(q.sync_sysmem({{0, 2 * kMiB, 0, ram.fd()}})); });
  ASSERT_TRUE(run_until([&] { return host_->memory().generation() == 1; }));
  EXPECT_EQ(host_->memory().regions().size(), 1u);
  qemu_->close();
  ASSERT_TRUE(run_until([&] { return !host_->proxy().connected(); }));
  // One more service delivers the report.
  ASSERT_TRUE(
      run_until([&] { return log.text().find("left the NIC's proxy") != std::string::npos; }));
  EXPECT_TRUE(host_->memory().regions().empty()) << "QEMU's memory is no longer touched";
  EXPECT_NE(host_->proxy().disconnect_reason().find("closed"), std::string::npos);
  EXPECT_NE(log.text().find("QEMU h0"), std::string::npos) << log.text();
}

TEST_F(QemuHostTest, AProtocolViolationEndsTheSession) {
  with_qemu([](FakeQemu& q) {
    const uint64_t v = 0;
    ASSERT_TRUE(pcie::mpqemu::send(q.fd(), pcie::mpqemu::kRet, &v, sizeof v));
    // The device hangs up.
    ASSERT_TRUE(wait_readable(q.fd(), 5000));
    char b;
    EXPECT_EQ(::recv(q.fd(), &b, 1, 0), 0);
  });
  ASSERT_TRUE(run_until([&] { return !host_->proxy().connected(); }));
  EXPECT_NE(host_->proxy().disconnect_reason().find("RET"), std::string::npos)
      << host_->proxy().disconnect_reason();
}

TEST(QemuHostConfig, BindsFromYamlWithChoicesChecked) {
  QemuHostConfig c;
  core::YamlBinder b(YAML::Load("image_dir: /cache/guest\nmemory: 512MiB\ntime_mode: sync\n"
                                "quantum: 20000\nicount_shift: 1\non_exit: continue\n"
                                "append: mprdma.run=/host/t.sh\n"),
                     "h.yaml");
  b.bind_root(c);
  EXPECT_EQ(c.image_dir, "/cache/guest");
  EXPECT_EQ(c.memory.n, 512 * kMiB);
  EXPECT_EQ(c.time_mode, QemuHostConfig::TimeMode::sync);
  EXPECT_EQ(c.quantum, 20000);
  EXPECT_EQ(c.on_exit, QemuHostConfig::OnExit::continue_run);
  QemuHostConfig d;
  core::YamlBinder bad(YAML::Load("time_mode: lockstep\n"), "h.yaml");
  EXPECT_THROW(bad.bind_root(d), core::ConfigError);
  core::DocBinder doc("QEMU host");
  QemuHostConfig defaults;
  EXPECT_NE(doc.describe(defaults).find("time_mode"), std::string::npos);
}

TEST_F(QemuHostTest, InvalidConfigurationsAreRefusedByName) {
  QemuHostConfig c;
  c.time_mode = QemuHostConfig::TimeMode::sync;
  c.smp = 2;
  c.memory.n = 100 * kMiB + 1;
  try {
    QemuHost h("h9", c, nic_, pcie_, *env, pcie::make_socketpair().first);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("QEMU host h9"), std::string::npos) << what;
    EXPECT_NE(what.find("smp 1"), std::string::npos) << what;
    EXPECT_NE(what.find("MiB"), std::string::npos) << what;
  }
  QemuHostConfig missing;
  missing.image_dir = "/nonexistent-image-dir";
  EXPECT_THROW(QemuHost("h8", missing, nic_, pcie_, *env), std::runtime_error);
}

}  // namespace
}  // namespace mprdma::host
