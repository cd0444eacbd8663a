// QemuProxy on its own, with a fake QEMU that does what no QEMU does: send
// BAR accesses back to back without waiting for the replies, or never read
// its replies at all. The device behind the root complex records every
// write, so the tests see exactly what was performed and in which order.
// The proxy's everyday paths (with the NIC model behind it) are in
// qemu_host_test.cc.
#include "vp/qemu/qemu_proxy.h"

#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <systemc>
#include <thread>
#include <tlm>
#include <vector>

#include "qemu_test_util.h"
#include "support/log_capture.h"
#include "support/sim_test.h"
#include "vp/pcie/root_complex.h"
#include "vp/qemu/guest_memory.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::pcie {
namespace {

using test::FakeQemu;
using test::MemFile;
using test::wait_for_thread;
using test::wait_readable;

constexpr uint64_t kBar0 = 0xC0000000;     // where the fake guest puts BAR0
constexpr uint64_t kTarget = 0x100000000;  // where the device decodes it
constexpr uint64_t kReadTag = 0xAB000000;  // reads answer kReadTag | writes seen

// Records every MMIO write; a read answers how many writes came before it.
// Each access takes 50 ns, so draining a flood spans many time steps.
class RecordingDevice : public sc_core::sc_module {
 public:
  struct Write {
    uint64_t addr;
    uint32_t value;
  };
  tlm_utils::simple_target_socket<RecordingDevice> socket{"socket"};
  tlm_utils::simple_initiator_socket<RecordingDevice> dma{"dma"};  // unused: never DMAs
  std::vector<Write> writes;  // SystemC thread (the test thread)

  explicit RecordingDevice(sc_core::sc_module_name name) : sc_core::sc_module(name) {
    socket.register_b_transport(this, &RecordingDevice::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
    if (gp.is_write()) {
      uint32_t v = 0;
      std::memcpy(&v, gp.get_data_ptr(), std::min<size_t>(gp.get_data_length(), sizeof v));
      writes.push_back(Write{gp.get_address(), v});
    } else {
      const uint32_t v = static_cast<uint32_t>(kReadTag | writes.size());
      std::memset(gp.get_data_ptr(), 0, gp.get_data_length());
      std::memcpy(gp.get_data_ptr(), &v, std::min<size_t>(gp.get_data_length(), sizeof v));
    }
    delay += sc_core::sc_time(50, sc_core::SC_NS);
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
  }
};

// The proxy as the run loop's participant (QemuHost's role, minus QEMU).
class ProxyParticipant : public QemuRunLoop::Participant {
 public:
  explicit ProxyParticipant(QemuProxy& p) : p_(p) {}
  void service() override { p_.service(); }
  sc_core::sc_time horizon() const override { return sc_core::sc_max_time(); }
  bool busy() const override { return p_.busy(); }
  bool take_kick() override { return p_.take_kick(); }
  double pacing_ratio() const override { return 0; }
  void wait_fds(std::vector<int>* fds) const override { fds->push_back(p_.wake_fd()); }
  bool stop_requested() const override { return false; }

 private:
  QemuProxy& p_;
};

class QemuProxyTest : public test::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    dev_ = std::make_unique<RecordingDevice>("dev");
    rc_ = std::make_unique<RootComplex>("rc", mem_, *env);
    rc_->mmio.bind(dev_->socket);
    dev_->dma.bind(rc_->dma);
    QemuProxyConfig cfg;
    cfg.bar_target[0] = kTarget;
    cfg.reply_deadline = reply_deadline_;
    proxy_ = std::make_unique<QemuProxy>("proxy", cfg, *rc_, mem_, clock_, *env);
    proxy_->on_device_reset = [this] { resets_after_.push_back(dev_->writes.size()); };
    proxy_->on_disconnect = [this](const std::string& why) { disconnects_.push_back(why); };
    part_ = std::make_unique<ProxyParticipant>(*proxy_);
    loop_.add(part_.get());
    auto [dev_end, qemu_end] = make_socketpair();
    if (small_buffers_) {
      // The smallest buffers the kernel allows (it raises 1 to its
      // minimum, a few KiB). On an AF_UNIX stream socket the sender's
      // SO_SNDBUF bounds the bytes its peer has not read yet, so a few
      // unread replies fill the proxy's end. Linux does not consult the
      // receiver's SO_RCVBUF there; the fake's is made small as well so
      // that the test does not depend on that.
      const int one = 1;
      ASSERT_EQ(::setsockopt(dev_end.get(), SOL_SOCKET, SO_SNDBUF, &one, sizeof one), 0);
      ASSERT_EQ(::setsockopt(qemu_end.get(), SOL_SOCKET, SO_RCVBUF, &one, sizeof one), 0);
    }
    qemu_ = std::make_unique<FakeQemu>(std::move(qemu_end));
    proxy_->start(std::move(dev_end));
    // BAR0 at kBar0, memory decoding on: answered by the I/O thread alone.
    EXPECT_EQ(qemu_->cfg_write(0x10, static_cast<uint32_t>(kBar0), 4), 0u);
    EXPECT_EQ(qemu_->cfg_write(0x04, 0x0006, 2), 0u);
  }
  void TearDown() override {
    // A failed test may leave the fake's threads blocked on the socket:
    // shutting its end down releases them.
    if (qemu_ && qemu_->fd() >= 0) ::shutdown(qemu_->fd(), SHUT_RDWR);
    if (sender_.joinable()) sender_.join();
    if (reader_.joinable()) reader_.join();
    if (part_) loop_.remove(part_.get());
    proxy_.reset();
    rc_.reset();
    dev_.reset();
    SimTest::TearDown();
  }

  // The fake QEMU's flood: `n` BAR writes to consecutive registers (value
  // i, wrapping over BAR0's 64 KiB), then `then` (BAR_READ, DEVICE_RESET,
  // PCI_CFGREAD of the vendor ID) messages, all without reading a reply.
  // The socket buffer fills and the sender blocks whenever the proxy stops
  // reading; it returns when the connection is shut.
  void flood(int n, std::vector<int32_t> then = {}) {
    sender_ = std::thread([this, n, then] {
      for (int i = 0; i < n; ++i) {
        mpqemu::BarAccess b{kBar0 + write_offset(i), static_cast<uint64_t>(i), 4, 1, {}};
        if (!mpqemu::send(qemu_->fd(), mpqemu::kBarWrite, &b, sizeof b)) return;
        sent_.fetch_add(1);
      }
      for (int32_t cmd : then) {
        mpqemu::BarAccess b{kBar0, 0, 4, 1, {}};
        mpqemu::PciConf c{0, 0, 2};
        const bool ok = cmd == mpqemu::kBarRead      ? mpqemu::send(qemu_->fd(), cmd, &b, sizeof b)
                        : cmd == mpqemu::kPciCfgRead ? mpqemu::send(qemu_->fd(), cmd, &c, sizeof c)
                                                     : mpqemu::send(qemu_->fd(), cmd, nullptr, 0);
        if (!ok) return;
        sent_.fetch_add(1);
      }
    });
  }
  static uint64_t write_offset(int i) { return (static_cast<uint64_t>(i) * 4) % (64 * 1024); }
  // Reads `n` replies as they come (what the fake does once the simulator
  // runs); each must come within 10 s of the previous one.
  void read_replies(int n) {
    reader_ = std::thread([this, n] {
      for (int i = 0; i < n; ++i) {
        if (!wait_readable(qemu_->fd(), 10000)) return;
        mpqemu::Message m;
        std::string err;
        if (mpqemu::recv(qemu_->fd(), &m, &err) != mpqemu::RecvStatus::kOk) return;
        if (m.cmd != mpqemu::kRet || m.size != 8) return;
        replies_.push_back(m.as<uint64_t>());
        replied_.fetch_add(1);
      }
    });
  }
  // Waits, without servicing the proxy, until its I/O thread has stopped
  // reading (or, without a bound, has taken more than the bound).
  bool wait_until_full() {
    return wait_for_thread(
        [this] {
          const auto c = proxy_->counts();
          return c.backpressure > 0 || c.queued > QemuProxy::kMaxQueued;
        },
        10);
  }
  bool run_until(const std::function<bool()>& done, double limit_s = 30) {
    return test::run_until(loop_, done, limit_s);
  }

  // What SetUp gives the proxy; fixtures below change them.
  std::chrono::milliseconds reply_deadline_ = QemuProxyConfig::kDefaultReplyDeadline;
  bool small_buffers_ = false;

  GuestMemory mem_;
  FreeClock clock_;
  std::unique_ptr<RecordingDevice> dev_;
  std::unique_ptr<RootComplex> rc_;
  std::unique_ptr<QemuProxy> proxy_;
  std::unique_ptr<ProxyParticipant> part_;
  std::unique_ptr<FakeQemu> qemu_;
  QemuRunLoop loop_;
  std::thread sender_, reader_;
  std::atomic<int> sent_{0}, replied_{0};
  std::vector<uint64_t> replies_;     // reader thread until joined
  std::vector<size_t> resets_after_;  // writes the device had seen at each reset
  std::vector<std::string> disconnects_;
};

// Review finding 8a: BAR writes sent without waiting were queued without
// bound. While SystemC is not serviced, the proxy must hold at most
// kMaxQueued and leave the rest in the socket (the sender blocks); once
// serviced, every write is performed, in order, and answered.
TEST_F(QemuProxyTest, FloodOfBarWritesIsBoundedAndLosesNothing) {
  test::LogCapture log("");
  constexpr int kWrites = 20000;
  flood(kWrites);
  ASSERT_TRUE(wait_until_full()) << "the proxy took " << proxy_->counts().queued << " accesses";
  const auto full = proxy_->counts();
  EXPECT_LE(full.queued, QemuProxy::kMaxQueued) << "accesses held beyond the bound";
  EXPECT_EQ(full.backpressure, 1u);
  EXPECT_LT(sent_.load(), kWrites) << "the rest of the flood waits in the socket";
  EXPECT_EQ(dev_->writes.size(), 0u) << "nothing was performed: SystemC did not run";

  read_replies(kWrites);
  ASSERT_TRUE(run_until([&] {
    return dev_->writes.size() == static_cast<size_t>(kWrites) && replied_.load() == kWrites;
  })) << dev_->writes.size()
      << " writes performed, " << replied_.load() << " replies read, " << sent_.load() << " sent";
  sender_.join();
  reader_.join();
  EXPECT_EQ(sent_.load(), kWrites);
  ASSERT_EQ(dev_->writes.size(), static_cast<size_t>(kWrites));
  for (int i = 0; i < kWrites; ++i) {
    const auto& w = dev_->writes[static_cast<size_t>(i)];
    ASSERT_EQ(w.addr, kTarget + write_offset(i)) << "write " << i;
    ASSERT_EQ(w.value, static_cast<uint32_t>(i)) << "write " << i << " out of order";
  }
  for (uint64_t r : replies_) ASSERT_EQ(r, 0u);
  const auto c = proxy_->counts();
  std::printf("%d writes: %llu pauses of the I/O thread, at most %llu held at once\n", kWrites,
              static_cast<unsigned long long>(c.backpressure),
              static_cast<unsigned long long>(c.queued_max));
  EXPECT_EQ(c.bar_writes, static_cast<uint64_t>(kWrites));
  EXPECT_EQ(c.queued, 0u);
  EXPECT_LE(c.queued_max, QemuProxy::kMaxQueued) << "the bound held throughout";
  EXPECT_GE(c.backpressure, 1u);
  proxy_->service();  // what the run loop does between slices: publishes the counts
  EXPECT_EQ(counter_value("pcie.nic0.proxy.backpressure"), proxy_->counts().backpressure);
  EXPECT_EQ(counter_value("pcie.nic0.proxy.queued_max"), c.queued_max);
  EXPECT_EQ(log.count("without waiting for their replies"), 1u) << "warned once:\n" << log.text();
  EXPECT_TRUE(proxy_->connected());
}

// A BAR read and a DEVICE_RESET behind a full queue wait their turn: the
// read is performed after every write before it and its value comes back;
// the reset follows it.
TEST_F(QemuProxyTest, ReadAndResetBehindAFullQueueAreAnsweredInOrder) {
  test::LogCapture log("");
  constexpr int kWrites = 5000;
  flood(kWrites, {mpqemu::kBarRead, mpqemu::kDeviceReset});
  ASSERT_TRUE(wait_until_full());
  read_replies(kWrites + 2);
  ASSERT_TRUE(run_until([&] { return replied_.load() == kWrites + 2; }))
      << replied_.load() << " replies";
  sender_.join();
  reader_.join();
  ASSERT_EQ(replies_.size(), static_cast<size_t>(kWrites + 2));
  EXPECT_EQ(replies_[kWrites], kReadTag | kWrites) << "the read saw every write before it";
  EXPECT_EQ(replies_[kWrites + 1], 0u);
  EXPECT_EQ(resets_after_, std::vector<size_t>{static_cast<size_t>(kWrites)});
  EXPECT_EQ(proxy_->counts().queued, 0u);
  EXPECT_EQ(proxy_->bar_base(0), 0u) << "the reset cleared the BARs";
}

// QEMU goes away while the I/O thread is not reading: seen at once from the
// hang-up, the memory map dropped, the held accesses dropped and said so.
TEST_F(QemuProxyTest, QemuLeavingWhileTheQueueIsFullIsSeen) {
  test::LogCapture log("qemu.nic0.proxy=info");
  MemFile ram(64 * 1024);
  ASSERT_TRUE(qemu_->sync_sysmem({{0, 64 * 1024, 0, ram.fd()}}));
  flood(20000);
  ASSERT_TRUE(wait_until_full());
  EXPECT_EQ(mem_.regions().size(), 1u);
  ::shutdown(qemu_->fd(), SHUT_RDWR);  // releases the blocked sender
  sender_.join();
  qemu_->close();
  ASSERT_TRUE(wait_for_thread([&] { return !proxy_->connected(); }, 10))
      << "a paused I/O thread did not notice QEMU leaving";
  EXPECT_NE(proxy_->disconnect_reason().find("closed"), std::string::npos)
      << proxy_->disconnect_reason();
  EXPECT_TRUE(mem_.regions().empty());
  EXPECT_EQ(proxy_->counts().queued, 0u);
  ASSERT_TRUE(run_until([&] { return !disconnects_.empty(); }, 10));
  EXPECT_EQ(disconnects_.size(), 1u);
  EXPECT_EQ(dev_->writes.size(), 0u) << "nothing held was performed after QEMU left";
  EXPECT_NE(log.text().find(std::to_string(QemuProxy::kMaxQueued) +
                            " guest accesses not yet performed are dropped"),
            std::string::npos)
      << log.text();
}

// Destroying the proxy while its I/O thread waits for room returns at once
// (the stop eventfd is watched while paused) and QEMU sees the socket close.
TEST_F(QemuProxyTest, DestroyingTheProxyWhileTheQueueIsFullReturns) {
  test::LogCapture log("");
  flood(20000);
  ASSERT_TRUE(wait_until_full());
  const auto t0 = std::chrono::steady_clock::now();
  loop_.remove(part_.get());
  part_.reset();
  proxy_.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 5.0);
  sender_.join();  // its blocked send fails once the proxy's end is shut
  EXPECT_LT(sent_.load(), 20000);
}

// ---------------------------------------------------------------------------
// A peer that sends requests and never reads its socket. Replies fill the
// proxy's send buffer; the write that finds no room must give up after
// reply_deadline and end the connection, never block the simulator.

// Runs `rescue` unless disarmed within `limit`: it frees whatever the code
// under test is stuck on (a write to the fake's socket), so that a hang
// becomes a failed assertion instead of a test that never ends.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::function<void()> rescue)
      : rescue_(std::move(rescue)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return disarmed_; })) {
            fired_ = true;
            rescue_();
          }
        }) {}
  ~Watchdog() { disarm(); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void disarm() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      disarmed_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool fired() {
    std::lock_guard<std::mutex> lock(mu_);
    return fired_;
  }

 private:
  std::function<void()> rescue_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false, fired_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// What the fake QEMU finds on its socket once it reads: whole RETs, then
// the end of the stream. A reply cut short may only be the last thing
// before the end ("a reply is sent whole or the connection is ended").
struct ReplyStream {
  int rets = 0;
  bool ended = false;  // EOF, or the stream closed inside the last message
  std::string end;     // how it ended, for messages
};

ReplyStream read_to_end(int fd) {
  ReplyStream r;
  for (;;) {
    if (!wait_readable(fd, 5000)) {
      r.end = "nothing for 5 s: the proxy's end is still open";
      return r;
    }
    mpqemu::Message m;
    std::string err;
    switch (mpqemu::recv(fd, &m, &err)) {
      case mpqemu::RecvStatus::kEof:
        r.ended = true;
        r.end = "EOF";
        return r;
      case mpqemu::RecvStatus::kError:
        r.ended = err.rfind("connection closed", 0) == 0;
        r.end = err;
        return r;
      case mpqemu::RecvStatus::kOk:
        break;
    }
    if (m.cmd != mpqemu::kRet || m.size != 8) {
      r.end = mpqemu::cmd_name(m.cmd) + " of " + std::to_string(m.size) + " bytes after " +
              std::to_string(r.rets) + " RETs (a torn reply followed by more data?)";
      return r;
    }
    ++r.rets;
  }
}

// The fixture's proxy with a 100 ms reply deadline (the default is 10 s)
// and the smallest socket buffers, so the tests take well under a second.
class QemuProxyNoReaderTest : public QemuProxyTest {
 protected:
  static constexpr std::chrono::milliseconds kDeadline{100};
  // How long the old code is given before the watchdog frees it: 50 times
  // the deadline, so only a write that never gives up sees it.
  static constexpr std::chrono::milliseconds kRescueAfter{5000};

  QemuProxyNoReaderTest() {
    reply_deadline_ = kDeadline;
    small_buffers_ = true;
  }
  // Unread bytes on the fake QEMU's end: the replies it has not read.
  int unread_bytes() const {
    int n = 0;
    return ::ioctl(qemu_->fd(), FIONREAD, &n) == 0 ? n : -1;
  }
  // Simulated time moves on through the run loop after the disconnection.
  void expect_simulation_goes_on() {
    const sc_core::sc_time t = sc_core::sc_time_stamp();
    const sc_core::sc_time later = t + sc_core::sc_time(1, sc_core::SC_MS);
    EXPECT_TRUE(run_until([&] { return sc_core::sc_time_stamp() >= later; }, 5))
        << "SystemC stood still at " << sc_core::sc_time_stamp().to_string();
    EXPECT_EQ(disconnects_.size(), 1u) << "on_disconnect runs once";
  }
};

// BAR reads are answered by the worker, in the SystemC thread. The old
// reply() blocked in send() once the buffer was full, inside sc_start, for
// ever: the test would hang, so a watchdog shuts the fake's socket after
// kRescueAfter and the test fails instead.
TEST_F(QemuProxyNoReaderTest, BarReadsWhoseRepliesAreNeverReadEndTheConnection) {
  test::LogCapture log("qemu.nic0.proxy=info");
  constexpr int kReads = 200;
  flood(0, std::vector<int32_t>(kReads, mpqemu::kBarRead));
  Watchdog dog(kRescueAfter, [this] { ::shutdown(qemu_->fd(), SHUT_RDWR); });
  const auto t0 = std::chrono::steady_clock::now();
  const bool ended = run_until([&] { return !disconnects_.empty(); }, 10);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dog.disarm();
  ASSERT_FALSE(dog.fired()) << "the SystemC thread was stuck writing a reply the peer never reads "
                               "until the watchdog shut the peer's socket after "
                            << kRescueAfter.count() << " ms (disconnect reason then: '"
                            << proxy_->disconnect_reason() << "')";
  ASSERT_TRUE(ended) << proxy_->counts().bar_reads << " reads taken, still connected";
  EXPECT_EQ(disconnects_, std::vector<std::string>{"QEMU did not read its replies for 0.1 s"});
  EXPECT_EQ(proxy_->disconnect_reason(), "QEMU did not read its replies for 0.1 s");
  EXPECT_FALSE(proxy_->connected());
  EXPECT_LT(s, 2.0) << "the deadline is 0.1 s";
  const auto c = proxy_->counts();
  EXPECT_EQ(c.reply_timeouts, 1u);
  EXPECT_GE(c.reply_waits, 1u);
  EXPECT_EQ(c.queued, 0u) << "the reads left behind are dropped";

  const ReplyStream r = read_to_end(qemu_->fd());
  EXPECT_TRUE(r.ended) << r.end;
  EXPECT_GE(r.rets, 1);
  EXPECT_LT(r.rets, kReads) << "the buffer was full: not every read was answered";
  std::printf("%d RETs filled the proxy's send buffer; the stream then ended (%s)\n", r.rets,
              r.end.c_str());

  expect_simulation_goes_on();
  proxy_->service();  // publishes the counts
  EXPECT_EQ(counter_value("pcie.nic0.proxy.reply_timeouts"), 1u);
  EXPECT_GE(counter_value("pcie.nic0.proxy.reply_waits"), 1u);
  EXPECT_EQ(log.count("disconnected: QEMU did not read its replies for 0.1 s"), 1u) << log.text();
  EXPECT_EQ(log.count("QEMU's socket buffer stayed full for 0.1 s"), 1u) << log.text();
}

// Config reads are answered by the I/O thread itself; the old code blocked
// it in send() for ever (and stop() behind it, on the send lock).
TEST_F(QemuProxyNoReaderTest, ConfigReadsWhoseRepliesAreNeverReadEndTheConnection) {
  test::LogCapture log("qemu.nic0.proxy=info");
  constexpr int kReads = 200;
  flood(0, std::vector<int32_t>(kReads, mpqemu::kPciCfgRead));
  ASSERT_TRUE(wait_for_thread([&] { return !proxy_->connected(); }, 5))
      << "the I/O thread is still writing a reply the peer never reads after 5 s ("
      << proxy_->counts().cfg_reads << " config reads taken)";
  EXPECT_EQ(proxy_->disconnect_reason(), "QEMU did not read its replies for 0.1 s");
  EXPECT_EQ(proxy_->counts().reply_timeouts, 1u);
  const ReplyStream r = read_to_end(qemu_->fd());
  EXPECT_TRUE(r.ended) << r.end;
  EXPECT_LT(r.rets, kReads);
  ASSERT_TRUE(run_until([&] { return !disconnects_.empty(); }, 5));
  EXPECT_EQ(disconnects_, std::vector<std::string>{"QEMU did not read its replies for 0.1 s"});
  expect_simulation_goes_on();
}

// A deadline of zero would end the connection at the first full buffer;
// it is a configuration error, refused by name.
TEST_F(QemuProxyTest, ANonPositiveReplyDeadlineIsRefused) {
  QemuProxyConfig cfg;
  cfg.reply_deadline = std::chrono::milliseconds(0);
  try {
    QemuProxy p("proxy_without_deadline", cfg, *rc_, mem_, clock_, *env);
    ADD_FAILURE() << "a proxy with a reply deadline of 0 ms was built";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("reply_deadline must be positive, not 0 ms"),
              std::string::npos)
        << e.what();
  }
}

// With the default 10 s deadline, destroying the proxy while its I/O
// thread waits for room returns at once: the waiting writer watches the
// stop eventfd. The old stop() waited for the send lock the blocked writer
// held, for ever.
class QemuProxyNoReaderDefaultDeadlineTest : public QemuProxyNoReaderTest {
 protected:
  QemuProxyNoReaderDefaultDeadlineTest() {
    reply_deadline_ = QemuProxyConfig::kDefaultReplyDeadline;
  }
};

TEST_F(QemuProxyNoReaderDefaultDeadlineTest, DestroyingTheProxyWhileAReplyWaitsReturns) {
  test::LogCapture log("");
  flood(0, std::vector<int32_t>(200, mpqemu::kPciCfgRead));
  // The I/O thread has taken a read whose reply is not in the fake's
  // buffer, which is not empty: it is writing into a full buffer.
  ASSERT_TRUE(wait_for_thread(
      [&] {
        const int unread = unread_bytes();
        return unread > 0 && proxy_->counts().cfg_reads > static_cast<uint64_t>(unread) / 24;
      },
      5))
      << "the buffer never filled: " << unread_bytes() << " bytes unread";
  Watchdog dog(kRescueAfter, [this] { ::shutdown(qemu_->fd(), SHUT_RDWR); });
  const auto t0 = std::chrono::steady_clock::now();
  loop_.remove(part_.get());
  part_.reset();
  proxy_.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  dog.disarm();
  EXPECT_FALSE(dog.fired()) << "destroying the proxy waited for a write the peer never reads "
                               "until the watchdog shut the peer's socket after "
                            << kRescueAfter.count() << " ms";
  EXPECT_LT(s, 1.0) << "the deadline is 10 s; stop() must not wait for it";
  // The proxy's end is closed; with requests of the flood still unread in
  // it, the kernel reports that as a reset rather than EOF.
  const ReplyStream r = read_to_end(qemu_->fd());
  EXPECT_TRUE(r.ended || r.end == errno_text(ECONNRESET)) << r.end;
}

}  // namespace
}  // namespace mprdma::pcie
