// The QEMU bridge's parts without QEMU: mpqemu framing, the config-space
// model, guest memory over memfds, the ivshmem server with a fake client,
// QEMU's command line and supervision (with shell scripts standing in for
// QEMU), the synchronised clock with a fake plugin, and the run loop.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <systemc>
#include <thread>

#include "qemu_test_util.h"
#include "support/sim_test.h"
#include "vp/qemu/guest_memory.h"
#include "vp/qemu/ivshmem_server.h"
#include "vp/qemu/qemu_config_space.h"
#include "vp/qemu/qemu_mpqemu.h"
#include "vp/qemu/qemu_process.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::pcie {
namespace {

using test::MemFile;
using test::wait_readable;

constexpr uint64_t kMiB = 1ull << 20;

std::string temp_dir() {
  std::string t = "/tmp/mprdma-bridge-test-XXXXXX";
  if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
  return t;
}

// ---------------------------------------------------------------------------
// mpqemu framing

TEST(Mpqemu, MessageWithFdsRoundTrips) {
  auto [a, b] = make_socketpair();
  MemFile m1(4096), m2(8192);
  mpqemu::SyncSysmem s{};
  s.gpa[0] = 0;
  s.size[0] = 4096;
  s.gpa[1] = 1ull << 32;
  s.size[1] = 8192;
  s.offset[1] = 0;
  const int fds[2] = {m1.fd(), m2.fd()};
  ASSERT_TRUE(mpqemu::send(a.get(), mpqemu::kSyncSysmem, &s, sizeof s, fds, 2));
  mpqemu::Message msg;
  std::string err;
  ASSERT_EQ(mpqemu::recv(b.get(), &msg, &err), mpqemu::RecvStatus::kOk) << err;
  EXPECT_EQ(msg.cmd, mpqemu::kSyncSysmem);
  EXPECT_EQ(msg.size, 192u);
  ASSERT_EQ(msg.fds.size(), 2u);
  struct stat st;
  ASSERT_EQ(::fstat(msg.fds[1].get(), &st), 0);
  EXPECT_EQ(st.st_size, 8192);
  EXPECT_EQ(msg.as<mpqemu::SyncSysmem>().gpa[1], 1ull << 32);
}

TEST(Mpqemu, EofBetweenMessagesAndBrokenMessages) {
  {
    auto [a, b] = make_socketpair();
    a.reset();
    mpqemu::Message msg;
    std::string err;
    EXPECT_EQ(mpqemu::recv(b.get(), &msg, &err), mpqemu::RecvStatus::kEof);
  }
  {
    // A header announcing more than 192 payload bytes.
    auto [a, b] = make_socketpair();
    mpqemu::Header h{mpqemu::kBarRead, 0, 193};
    ASSERT_TRUE(send_with_fds(a.get(), &h, sizeof h));
    mpqemu::Message msg;
    std::string err;
    EXPECT_EQ(mpqemu::recv(b.get(), &msg, &err), mpqemu::RecvStatus::kError);
    EXPECT_NE(err.find("192"), std::string::npos) << err;
  }
  {
    // The peer vanishes in the middle of a payload.
    auto [a, b] = make_socketpair();
    mpqemu::Header h{mpqemu::kBarRead, 0, 24};
    ASSERT_TRUE(send_with_fds(a.get(), &h, sizeof h));
    ASSERT_TRUE(send_with_fds(a.get(), "abc", 3));
    a.reset();
    mpqemu::Message msg;
    std::string err;
    EXPECT_EQ(mpqemu::recv(b.get(), &msg, &err), mpqemu::RecvStatus::kError);
  }
}

// ---------------------------------------------------------------------------
// Config space

PciConfigSpace nic_config() {
  return PciConfigSpace(PciConfigSpace::Identity{}, {64 * 1024, 0, 4 * 1024 * 1024, 0, 0, 0});
}

TEST(PciConfigSpace, IdentityAsTheGuestEnumeratesIt) {
  const PciConfigSpace c = nic_config();
  EXPECT_EQ(*c.read(0x00, 2), 0xC0DEu);
  EXPECT_EQ(*c.read(0x02, 2), 0x4D50u);
  EXPECT_EQ(*c.read(0x00, 4), 0x4D50C0DEu);
  EXPECT_EQ(*c.read(0x08, 4), 0x02000001u);  // class 020000, revision 1
  EXPECT_EQ(*c.read(0x0a, 2), 0x0200u);
  EXPECT_EQ(*c.read(0x0e, 1), 0x80u);  // multi-function
  EXPECT_EQ(*c.read(0x2c, 2), 0xC0DEu);
  EXPECT_EQ(*c.read(0x2e, 2), 0x0001u);
  EXPECT_EQ(*c.read(0x06, 2), 0u);  // status: no capability list
  EXPECT_EQ(*c.read(0x34, 1), 0u);
  EXPECT_EQ(*c.read(0x3d, 1), 0u);  // no INTx pin
}

TEST(PciConfigSpace, BarSizingAsQemuProbes) {
  PciConfigSpace c = nic_config();
  const uint32_t want[7] = {0xFFFF0000u, 0, 0xFFC00000u, 0, 0, 0, 0};
  for (int i = 0; i < 7; ++i) {
    const uint32_t off = 0x10 + 4 * i;
    const uint32_t orig = *c.read(off, 4);
    ASSERT_TRUE(c.write(off, 0xFFFFFFFFu, 4));
    EXPECT_EQ(*c.read(off, 4), want[i]) << "BAR offset 0x" << std::hex << off;
    ASSERT_TRUE(c.write(off, orig, 4));
  }
  EXPECT_EQ(*c.read(0x30, 4), 0u);  // no expansion ROM
  ASSERT_TRUE(c.write(0x10, 0xE0001234u, 4));
  EXPECT_EQ(*c.read(0x10, 4), 0xE0000000u);  // low bits read-only, type bits 0
  EXPECT_EQ(c.bar_base(0), 0xE0000000u);
}

TEST(PciConfigSpace, CommandRegisterAndDecoding) {
  PciConfigSpace c = nic_config();
  ASSERT_TRUE(c.write(0x10, 0xE0000000u, 4));
  ASSERT_TRUE(c.write(0x18, 0xE1000000u, 4));
  uint64_t off = 0;
  EXPECT_EQ(c.decode(0xE0000000u, 4, &off), -1) << "memory decoding is off after reset";
  ASSERT_TRUE(c.write(0x04, 0xFFFF, 2));
  EXPECT_EQ(c.command(), 0x0546);  // memory, master, parity, SERR, INTx disable
  EXPECT_TRUE(c.memory_enabled());
  EXPECT_TRUE(c.bus_master());
  EXPECT_EQ(c.decode(0xE0000010u, 4, &off), 0);
  EXPECT_EQ(off, 0x10u);
  EXPECT_EQ(c.decode(0xE1400000u - 8, 8, &off), 2);
  EXPECT_EQ(off, 4 * kMiB - 8);
  EXPECT_EQ(c.decode(0xE000FFFEu, 4, &off), -1) << "straddles the end of BAR0";
  EXPECT_EQ(c.decode(0xE0010000u, 4, &off), -1);
  // Byte writes land in the right byte.
  ASSERT_TRUE(c.write(0x3c, 0x0b, 1));
  EXPECT_EQ(*c.read(0x3c, 1), 0x0bu);
  // Invalid accesses.
  EXPECT_FALSE(c.read(0xfe, 4).has_value());
  EXPECT_FALSE(c.read(0x00, 3).has_value());
  EXPECT_FALSE(c.write(0x100, 0, 1));
  c.reset();
  EXPECT_EQ(c.command(), 0);
  EXPECT_EQ(c.bar_base(0), 0u);
}

// ---------------------------------------------------------------------------
// Guest memory

std::vector<GuestMemory::Region> regions_of(MemFile& f, std::vector<std::array<uint64_t, 3>> r) {
  std::vector<GuestMemory::Region> out;
  for (const auto& [gpa, size, offset] : r)
    out.push_back(
        GuestMemory::Region{gpa, size, static_cast<int64_t>(offset), UniqueFd(::dup(f.fd()))});
  return out;
}

TEST(GuestMemory, ReadWriteWithinAndAcrossRegions) {
  MemFile f(4 * kMiB);
  GuestMemory m;
  // Two regions adjacent in guest-physical space, from different offsets.
  auto errors = m.replace(regions_of(f, {{0, kMiB, 0}, {kMiB, kMiB, 3 * kMiB}}));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(m.mapped_bytes(), 2 * kMiB);
  const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(m.write(kMiB - 4, data, 8));
  EXPECT_EQ(*f.at(kMiB - 4), 1);
  EXPECT_EQ(*f.at(3 * kMiB + 3), 8) << "the second half landed at the second region's offset";
  uint8_t back[8] = {};
  ASSERT_TRUE(m.read(kMiB - 4, back, 8));
  EXPECT_EQ(std::memcmp(back, data, 8), 0);
  EXPECT_EQ(m.ptr(kMiB - 4, 8), nullptr) << "not contiguous in our address space";
  uint8_t* p = m.ptr(16, 8);
  ASSERT_NE(p, nullptr);
  p[0] = 42;
  EXPECT_EQ(*f.at(16), 42);
}

TEST(GuestMemory, UnbackedAccessesAreRefusedWhole) {
  MemFile f(kMiB);
  GuestMemory m;
  uint8_t buf[16] = {};
  EXPECT_FALSE(m.read(0, buf, 1)) << "nothing is backed before SYNC_SYSMEM";
  m.replace(regions_of(f, {{0x100000, 0x10000, 0}}));
  std::memset(f.at(0), 0x5a, 0x10000);
  const uint8_t ones[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_FALSE(m.write(0x100000 + 0x10000 - 8, ones, 16));
  EXPECT_EQ(*f.at(0x10000 - 8), 0x5a) << "a refused write stores nothing";
  EXPECT_FALSE(m.read(0xfffff8, buf, 16));
  EXPECT_FALSE(m.read(UINT64_MAX - 4, buf, 16)) << "wrapping range";
  EXPECT_EQ(m.refused_writes(), 1u);
  EXPECT_EQ(m.refused_reads(), 3u);
  EXPECT_EQ(m.ptr(0x100000 + 0x10000 - 8, 16), nullptr);
}

TEST(GuestMemory, RemapReplacesTheWholeMapAndKeepsOldPointersUntilReleased) {
  MemFile a(kMiB), b(kMiB);
  GuestMemory m;
  m.replace(regions_of(a, {{0, kMiB, 0}}));
  uint8_t* old = m.ptr(0, 4);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(m.generation(), 1u);
  m.replace(regions_of(b, {{2 * kMiB, kMiB, 0}}));
  EXPECT_EQ(m.generation(), 2u);
  uint8_t x = 7;
  EXPECT_FALSE(m.write(0, &x, 1)) << "the old region is gone from the map";
  ASSERT_TRUE(m.write(2 * kMiB, &x, 1));
  EXPECT_EQ(*b.at(0), 7);
  old[0] = 9;  // still mapped: retired, not released
  EXPECT_EQ(*a.at(0), 9);
  m.release_retired();
  m.clear();
  EXPECT_FALSE(m.read(2 * kMiB, &x, 1));
  EXPECT_TRUE(m.regions().empty());
}

TEST(GuestMemory, OverlapsAndBadRegionsAreLeftOut) {
  MemFile f(2 * kMiB);
  GuestMemory m;
  auto regs = regions_of(f, {{0, kMiB, 0}, {kMiB / 2, kMiB, kMiB}});
  regs.push_back(GuestMemory::Region{4 * kMiB, kMiB, 0, UniqueFd(::open("/dev/null", O_RDONLY))});
  const auto errors = m.replace(std::move(regs));
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(m.regions().size(), 1u);
}

TEST(GuestMemory, AccessesDuringRemapsNeverFault) {
  // The I/O thread remaps while the SystemC thread copies; the same memfd
  // stays behind the same addresses, so data must survive every remap.
  MemFile f(kMiB);
  GuestMemory m;
  m.replace(regions_of(f, {{0, kMiB, 0}}));
  std::atomic<bool> stop{false};
  std::thread remapper([&] {
    for (int i = 0; i < 300 && !stop.load(); ++i) {
      if (i % 2)
        m.replace(regions_of(f, {{0, kMiB / 2, 0}, {kMiB / 2, kMiB / 2, kMiB / 2}}));
      else
        m.replace(regions_of(f, {{0, kMiB, 0}}));
    }
  });
  uint64_t v = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    const uint64_t at = (i * 4096 + 8) % (kMiB - 8);
    ASSERT_TRUE(m.write(at, &i, 8));
    ASSERT_TRUE(m.read(at, &v, 8));
    ASSERT_EQ(v, i);
    if (i % 64 == 0) m.release_retired();
  }
  stop.store(true);
  remapper.join();
}

// ---------------------------------------------------------------------------
// ivshmem server

struct IvshmemClient {
  UniqueFd sock;
  std::vector<std::pair<int64_t, UniqueFd>> msgs;

  explicit IvshmemClient(const std::string& path) {
    sock.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("connect " + path);
  }
  // Reads `n` messages (each within 5 s).
  bool read(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (!wait_readable(sock.get(), 5000)) return false;
      int64_t v;
      std::vector<UniqueFd> fds;
      std::string err;
      if (recv_exact(sock.get(), &v, sizeof v, &fds, &err) != sizeof v) return false;
      msgs.emplace_back(v, fds.empty() ? UniqueFd() : std::move(fds[0]));
    }
    return true;
  }
};

TEST(IvshmemServer, HandsOverShmAndVectorsAndNotifies) {
  const std::string dir = temp_dir();
  {
    IvshmemServer s("h0", dir + "/ivs.sock", 4);
    EXPECT_FALSE(s.notify(0)) << "no client yet";
    IvshmemClient c(s.path());
    ASSERT_TRUE(c.read(3 + 4));
    EXPECT_EQ(c.msgs[0].first, 0) << "protocol version";
    EXPECT_FALSE(c.msgs[0].second.valid());
    const int64_t id = c.msgs[1].first;
    EXPECT_GE(id, 0);
    EXPECT_FALSE(c.msgs[1].second.valid());
    EXPECT_EQ(c.msgs[2].first, -1);
    ASSERT_TRUE(c.msgs[2].second.valid());
    struct stat st;
    ASSERT_EQ(::fstat(c.msgs[2].second.get(), &st), 0);
    EXPECT_EQ(st.st_size, 4096) << "a power of two (it becomes BAR2)";
    for (int v = 0; v < 4; ++v) {
      EXPECT_EQ(c.msgs[3 + v].first, id) << "own vectors come with the client's own id";
      ASSERT_TRUE(c.msgs[3 + v].second.valid());
    }
    // The server records the client after sending; wait for its note.
    ASSERT_TRUE(wait_readable(s.message_fd(), 5000));
    EXPECT_TRUE(s.connected());
    EXPECT_EQ(s.peer_id(), id);
    ASSERT_TRUE(s.notify(2));
    ASSERT_TRUE(wait_readable(c.msgs[3 + 2].second.get(), 1000)) << "vector 2's eventfd fires";
    EXPECT_EQ(drain_eventfd(c.msgs[3 + 2].second.get()), 1u);
    EXPECT_FALSE(wait_readable(c.msgs[3 + 1].second.get(), 0)) << "and only it";
    EXPECT_FALSE(s.notify(4)) << "out of range";
    EXPECT_EQ(s.dropped(), 2u);

    // A second client is refused while the first is connected.
    IvshmemClient second(s.path());
    ASSERT_TRUE(wait_readable(second.sock.get(), 5000));
    char b;
    EXPECT_EQ(::recv(second.sock.get(), &b, 1, 0), 0);

    // The first one leaves: the server notices and drops its vectors.
    s.take_messages();
    c.sock.reset();
    bool gone = false;
    while (!gone && wait_readable(s.message_fd(), 5000))
      for (const std::string& m : s.take_messages()) gone |= m.find("closed") != std::string::npos;
    EXPECT_TRUE(gone);
    EXPECT_FALSE(s.connected());
    EXPECT_FALSE(s.notify(0));
  }
  struct stat st;
  EXPECT_NE(::stat((dir + "/ivs.sock").c_str(), &st), 0) << "socket file removed";
  ::rmdir(dir.c_str());
}

// ---------------------------------------------------------------------------
// Command line

TEST(QemuCommand, HasTheDevicesAndModes) {
  QemuCommand c;
  c.memory_mib = 512;
  c.kernel = "/img/vmlinux";
  c.initrd = "/img/initramfs.cpio";
  c.append = "console=ttyS0 mprdma.ip=10.0.0.1/24";
  c.proxy_fd = 7;
  c.ivshmem_socket = "/run/x/ivs.sock";
  c.vectors = 8;
  c.netdev = "dgram,local.type=inet,local.host=127.0.0.1,local.port=5000";
  c.mac = {0x02, 0, 0, 0, 0, 1};
  c.share_dir = "/srv/share";
  const auto argv = build_qemu_command(c);
  const std::string line = shell_quote(argv);
  for (const char* want :
       {"-machine q35,accel=tcg,memory-backend=mem0",
        "-object memory-backend-memfd,id=mem0,size=512M,share=on", "-m 512M", "-smp 1",
        "-nodefaults -nographic -no-reboot -serial stdio", "-kernel /img/vmlinux",
        "-initrd /img/initramfs.cpio", "-append 'console=ttyS0 mprdma.ip=10.0.0.1/24'",
        "-device x-pci-proxy-dev,id=rnic0,fd=7,addr=4.0,multifunction=on",
        "-chardev socket,id=rnic0-ivs,path=/run/x/ivs.sock",
        "-device ivshmem-doorbell,id=rnic0-irq,chardev=rnic0-ivs,vectors=8,addr=4.1",
        "-netdev dgram,local.type=inet,local.host=127.0.0.1,local.port=5000,id=net0",
        "-device virtio-net-pci,netdev=net0,mac=02:00:00:00:00:01",
        "-virtfs local,path=/srv/share,mount_tag=host,security_model=none,id=share0"})
    EXPECT_NE(line.find(want), std::string::npos) << want << "\nin: " << line;
  EXPECT_EQ(line.find("-icount"), std::string::npos);
  EXPECT_EQ(inherited_fds(c), std::vector<int>{7});

  c.icount_shift = 2;
  c.plugin = "/p/libmprdma-qemu-sync.so";
  c.plugin_fd = 9;
  c.plugin_counter_fd = 10;
  const std::string sync = shell_quote(build_qemu_command(c));
  EXPECT_NE(sync.find("-icount shift=2,sleep=off"), std::string::npos) << sync;
  EXPECT_NE(sync.find("-plugin /p/libmprdma-qemu-sync.so,fd=9,shm=10"), std::string::npos);
  EXPECT_EQ(inherited_fds(c), (std::vector<int>{7, 9, 10}));
}

TEST(QemuCommand, RefusesIncompleteDescriptions) {
  QemuCommand c;
  EXPECT_THROW(build_qemu_command(c), std::invalid_argument) << "no proxy fd";
  c.proxy_fd = 5;
  c.append = "x";
  EXPECT_THROW(build_qemu_command(c), std::invalid_argument) << "append without kernel";
  c.append.clear();
  c.kernel = "/a,b";
  EXPECT_THROW(build_qemu_command(c), std::invalid_argument) << "comma in a path";
}

// ---------------------------------------------------------------------------
// Process supervision, with /bin/sh standing in for QEMU

class QemuProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_dir(); }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  // Events until (and including) the exit, each within `ms`.
  std::vector<QemuProcess::Event> events_until_exit(QemuProcess& p, int ms = 10000) {
    std::vector<QemuProcess::Event> all;
    for (;;) {
      if (!wait_readable(p.wake_fd(), ms)) {
        ADD_FAILURE() << "no exit within " << ms << " ms";
        return all;
      }
      for (auto& e : p.take_events()) {
        all.push_back(e);
        if (e.kind == QemuProcess::Event::kExited) return all;
      }
    }
  }
  std::string dir_;
};

TEST_F(QemuProcessTest, ConsoleLinesAndExitStatusAreReportedByName) {
  const std::string log = dir_ + "/console.log";
  QemuProcess p("h7");
  p.start({"/bin/sh", "-c",
           "echo 'boot noise'; printf 'MPRDMA-READY\\r\\n'; echo 'qemu: bad thing' >&2; "
           "echo '[  1.0] x MPRDMA-RUN-EXIT 3'; exit 3"},
          {}, log);
  const auto ev = events_until_exit(p);
  std::vector<std::string> lines, errs;
  std::string exit_text;
  for (const auto& e : ev) {
    if (e.kind == QemuProcess::Event::kConsoleLine) lines.push_back(e.text);
    if (e.kind == QemuProcess::Event::kStderrLine) errs.push_back(e.text);
    if (e.kind == QemuProcess::Event::kExited) exit_text = e.text;
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"MPRDMA-READY", "MPRDMA-RUN-EXIT 3"}));
  EXPECT_EQ(errs, std::vector<std::string>{"qemu: bad thing"});
  EXPECT_TRUE(p.exited());
  EXPECT_TRUE(p.status().exited);
  EXPECT_EQ(p.status().code, 3);
  EXPECT_NE(exit_text.find("QEMU h7 (pid "), std::string::npos) << exit_text;
  EXPECT_NE(exit_text.find("exited with status 3"), std::string::npos) << exit_text;
  EXPECT_NE(exit_text.find("qemu: bad thing"), std::string::npos) << exit_text;
  std::ifstream in(log);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find("boot noise"), std::string::npos) << "the whole console is kept";
}

TEST_F(QemuProcessTest, KilledBySignalIsReportedWithTheSignal) {
  QemuProcess p("h1");
  p.start({"/bin/sh", "-c", "echo MPRDMA-READY; exec sleep 60"}, {}, "");
  ASSERT_TRUE(wait_readable(p.wake_fd(), 10000));
  ::kill(p.pid(), SIGKILL);
  const auto ev = events_until_exit(p);
  ASSERT_FALSE(ev.empty());
  EXPECT_FALSE(p.status().exited);
  EXPECT_EQ(p.status().signal, SIGKILL);
  EXPECT_NE(ev.back().text.find("was killed by signal 9 (SIGKILL)"), std::string::npos)
      << ev.back().text;
}

TEST_F(QemuProcessTest, InheritsOnlyTheGivenFdsAndTerminates) {
  auto [ours, theirs] = make_socketpair();
  auto [other, other_peer] = make_socketpair();
  QemuProcess p("h2");
  const std::string fd = std::to_string(theirs.get());
  const std::string not_passed = std::to_string(other_peer.get());
  p.start({"/bin/sh", "-c",
           "echo inherited >&" + fd + "; (echo leaked >&" + not_passed +
               ") 2>/dev/null; exec sleep 60"},
          {theirs.get()}, "");
  theirs.reset();
  other_peer.reset();
  ASSERT_TRUE(wait_readable(ours.get(), 10000));
  char buf[32] = {};
  ASSERT_GT(::read(ours.get(), buf, sizeof buf - 1), 0);
  EXPECT_STREQ(buf, "inherited\n");
  // The child got no copy of the other socket: with ours closed, its peer
  // sees EOF at once rather than "leaked".
  ASSERT_TRUE(wait_readable(other.get(), 10000));
  EXPECT_EQ(::read(other.get(), buf, sizeof buf), 0);
  p.terminate(5000);
  EXPECT_TRUE(p.exited());
  EXPECT_EQ(p.status().signal, SIGTERM);
  EXPECT_NE(p.exit_report().find("signal 15 (SIGTERM)"), std::string::npos) << p.exit_report();
  EXPECT_TRUE(wait_readable(ours.get(), 5000));
  EXPECT_EQ(::read(ours.get(), buf, sizeof buf), 0) << "its end of the socket closed with it";
}

TEST_F(QemuProcessTest, ExecFailureThrowsWithTheReason) {
  QemuProcess p("h3");
  try {
    p.start({dir_ + "/no-such-qemu"}, {}, "");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(p.running());
  QemuProcess q("h4");
  EXPECT_THROW(q.start({"no-such-qemu-binary-anywhere"}, {}, ""), std::runtime_error);
}

// ---------------------------------------------------------------------------
// Synchronised clock with a fake plugin

class SyncClockTest : public test::SimTest {};

TEST_F(SyncClockTest, LockStepWithTheInstructionCount) {
  SyncClock clock("h0", SyncClock::Config{1000, 1});  // 2 ns per instruction
  UniqueFd plugin(::dup(clock.qemu_socket()));
  void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, clock.qemu_counter(), 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* counter = static_cast<volatile uint64_t*>(page);
  clock.close_qemu_ends();
  auto grant_after = [&](uint64_t count) -> uint64_t {
    *counter = count;
    EXPECT_TRUE(send_with_fds(plugin.get(), &count, 8));
    return 0;
  };
  auto read_grant = [&]() -> uint64_t {
    uint64_t g = 0;
    std::string err;
    if (!wait_readable(plugin.get(), 5000)) return UINT64_MAX;
    EXPECT_EQ(recv_exact(plugin.get(), &g, 8, nullptr, &err), 8);
    return g;
  };

  // The vCPU blocks before its first block: released at once (time 0).
  grant_after(0);
  ASSERT_TRUE(wait_readable(clock.poll_fd(), 5000));
  clock.service(sc_core::SC_ZERO_TIME);
  EXPECT_EQ(read_grant(), 1000u);
  EXPECT_EQ(clock.horizon(), sc_core::SC_ZERO_TIME);

  // It blocks again at 1500: SystemC may run to 3 us, and only then is it
  // released.
  grant_after(1500);
  ASSERT_TRUE(wait_readable(clock.poll_fd(), 5000));
  clock.service(sc_core::SC_ZERO_TIME);
  EXPECT_TRUE(clock.vcpu_blocked());
  EXPECT_EQ(clock.horizon(), sc_core::sc_time(3, sc_core::SC_US));
  EXPECT_FALSE(wait_readable(plugin.get(), 0)) << "not released before its time";
  sc_core::sc_start(sc_core::sc_time(3, sc_core::SC_US));
  clock.service(sc_core::sc_time_stamp());
  EXPECT_EQ(read_grant(), 2500u);
  EXPECT_FALSE(clock.vcpu_blocked());

  // A BAR access at count 1600 stalled the vCPU for 700 ns: later counts
  // map 700 ns later.
  *counter = 1600;
  EXPECT_EQ(clock.stamp(), 1600u);
  EXPECT_EQ(clock.due(1600), sc_core::sc_time(3200, sc_core::SC_NS));
  clock.access_done(1600, sc_core::sc_time(700, sc_core::SC_NS));
  EXPECT_EQ(clock.due(1600), sc_core::sc_time(3900, sc_core::SC_NS));
  EXPECT_EQ(clock.horizon(), sc_core::sc_time(3900, sc_core::SC_NS));
  EXPECT_EQ(clock.syncs(), 2u);

  // The plugin goes away: time is no longer constrained.
  plugin.reset();
  ASSERT_TRUE(wait_readable(clock.poll_fd(), 5000));
  clock.service(sc_core::sc_time_stamp());
  EXPECT_TRUE(clock.detached());
  EXPECT_EQ(clock.horizon(), sc_core::sc_max_time());
  EXPECT_FALSE(clock.take_messages().empty());
  ::munmap(page, 4096);
}

// ---------------------------------------------------------------------------
// Run loop

class FakeParticipant : public QemuRunLoop::Participant {
 public:
  void service() override {
    ++services;
    if (drain_eventfd(wake.get())) h = next_h;  // what its "QEMU" announced
  }
  sc_core::sc_time horizon() const override { return h; }
  bool busy() const override { return is_busy; }
  bool take_kick() override { return std::exchange(kick, false); }
  double pacing_ratio() const override { return ratio; }
  void wait_fds(std::vector<int>* fds) const override { fds->push_back(wake.get()); }
  bool stop_requested() const override { return stop; }

  sc_core::sc_time h = sc_core::sc_max_time();
  sc_core::sc_time next_h = sc_core::sc_max_time();
  bool is_busy = false, kick = false, stop = false;
  double ratio = 0;
  int services = 0;
  UniqueFd wake = make_eventfd();
};

class RunLoopTest : public test::SimTest {};

TEST_F(RunLoopTest, HorizonsBoundStepsAndStopEnds) {
  QemuRunLoop loop;
  FakeParticipant p;
  loop.add(&p);
  const sc_core::sc_time slice(100, sc_core::SC_US);
  EXPECT_EQ(*loop.next_step(slice), slice) << "unconstrained, unpaced";
  p.h = sc_core::sc_time(3, sc_core::SC_US);
  EXPECT_EQ(*loop.next_step(slice), sc_core::sc_time(3, sc_core::SC_US))
      << "a participant's horizon is honoured even when small";
  sc_core::sc_start(sc_core::sc_time(3, sc_core::SC_US));
  p.kick = true;
  EXPECT_EQ(*loop.next_step(slice), sc_core::SC_ZERO_TIME) << "work at the current time";
  // At the horizon with nothing to do, the loop waits for the participant's
  // fd; another thread signals it, and servicing lifts the horizon.
  p.next_h = sc_core::sc_time(5, sc_core::SC_US);
  std::thread t([&p] { signal_eventfd(p.wake.get()); });
  const auto step = loop.next_step(slice);
  t.join();
  ASSERT_TRUE(step.has_value());
  EXPECT_EQ(*step, sc_core::sc_time(2, sc_core::SC_US));
  p.stop = true;
  EXPECT_FALSE(loop.next_step(slice).has_value());
}

TEST_F(RunLoopTest, PacingKeepsSimulatedTimeBehindWallTime) {
  QemuRunLoop loop;
  FakeParticipant p;
  p.ratio = 1.0;
  loop.add(&p);
  const auto t0 = std::chrono::steady_clock::now();
  while (sc_core::sc_time_stamp() < sc_core::sc_time(20, sc_core::SC_MS)) {
    const auto step = loop.next_step(sc_core::sc_time(100, sc_core::SC_US));
    ASSERT_TRUE(step.has_value());
    sc_core::sc_start(*step);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_LE(sc_core::sc_time_stamp().to_seconds(), wall * 1.0 + 1e-9)
        << "SystemC time never runs ahead of ratio x wall time";
  }
  EXPECT_GT(loop.waited_seconds(), 0.0) << "it waited for wall time (an idle model is fast)";
}

}  // namespace
}  // namespace mprdma::pcie
