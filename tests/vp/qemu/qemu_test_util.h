// Helpers of the QEMU bridge tests: waiting on fds with timeouts (never
// sleeping), a fake QEMU speaking the proxy protocol over a socketpair,
// and a run loop driver.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <systemc>
#include <thread>
#include <vector>

#include "vp/qemu/qemu_fd.h"
#include "vp/qemu/qemu_mpqemu.h"
#include "vp/qemu/qemu_time.h"

namespace mprdma::test {

// True when `fd` became readable within `ms`.
inline bool wait_readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&p, 1, ms);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

// The QEMU end of the proxy socket: requests wait for RET with a timeout.
class FakeQemu {
 public:
  explicit FakeQemu(pcie::UniqueFd sock) : sock_(std::move(sock)) {}

  int fd() const { return sock_.get(); }
  void close() { sock_.reset(); }

  // Sends a request and returns RET's value; fails the test (and returns
  // all ones) on timeout or a wrong reply.
  uint64_t request(int32_t cmd, const void* payload, size_t size, int timeout_ms = 10000) {
    if (!pcie::mpqemu::send(sock_.get(), cmd, payload, size)) {
      ADD_FAILURE() << "sending " << pcie::mpqemu::cmd_name(cmd) << " failed";
      return UINT64_MAX;
    }
    if (!wait_readable(sock_.get(), timeout_ms)) {
      ADD_FAILURE() << "no reply to " << pcie::mpqemu::cmd_name(cmd) << " within " << timeout_ms
                    << " ms";
      return UINT64_MAX;
    }
    pcie::mpqemu::Message m;
    std::string err;
    if (pcie::mpqemu::recv(sock_.get(), &m, &err) != pcie::mpqemu::RecvStatus::kOk) {
      ADD_FAILURE() << "reading the reply to " << pcie::mpqemu::cmd_name(cmd) << ": " << err;
      return UINT64_MAX;
    }
    EXPECT_EQ(m.cmd, pcie::mpqemu::kRet);
    EXPECT_EQ(m.size, 8u);
    return m.as<uint64_t>();
  }
  uint64_t cfg_read(uint32_t addr, int len) {
    pcie::mpqemu::PciConf c{addr, 0, len};
    return request(pcie::mpqemu::kPciCfgRead, &c, sizeof c);
  }
  uint64_t cfg_write(uint32_t addr, uint32_t val, int len) {
    pcie::mpqemu::PciConf c{addr, val, len};
    return request(pcie::mpqemu::kPciCfgWrite, &c, sizeof c);
  }
  uint64_t bar_read(uint64_t addr, uint32_t size) {
    pcie::mpqemu::BarAccess b{addr, 0, size, 1, {}};
    return request(pcie::mpqemu::kBarRead, &b, sizeof b);
  }
  uint64_t bar_write(uint64_t addr, uint64_t val, uint32_t size) {
    pcie::mpqemu::BarAccess b{addr, val, size, 1, {}};
    return request(pcie::mpqemu::kBarWrite, &b, sizeof b);
  }
  uint64_t device_reset() { return request(pcie::mpqemu::kDeviceReset, nullptr, 0); }
  // SYNC_SYSMEM (no reply): regions {gpa, size, offset} of the given fds.
  struct Region {
    uint64_t gpa, size;
    int64_t offset;
    int fd;
  };
  bool sync_sysmem(const std::vector<Region>& regions) {
    pcie::mpqemu::SyncSysmem s{};
    std::vector<int> fds;
    for (size_t i = 0; i < regions.size(); ++i) {
      s.gpa[i] = regions[i].gpa;
      s.size[i] = regions[i].size;
      s.offset[i] = regions[i].offset;
      fds.push_back(regions[i].fd);
    }
    return pcie::mpqemu::send(sock_.get(), pcie::mpqemu::kSyncSysmem, &s, sizeof s, fds.data(),
                              fds.size());
  }

 private:
  pcie::UniqueFd sock_;
};

// A shared memfd mapped in the test, standing for guest RAM.
class MemFile {
 public:
  explicit MemFile(uint64_t size) : size_(size), fd_(pcie::make_memfd("test-ram", size)) {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap memfd");
    base_ = static_cast<uint8_t*>(p);
  }
  ~MemFile() { ::munmap(base_, size_); }
  int fd() const { return fd_.get(); }
  uint8_t* at(uint64_t off) { return base_ + off; }
  template <class T>
  T load(uint64_t off) {
    T v;
    std::memcpy(&v, base_ + off, sizeof v);
    return v;
  }

 private:
  uint64_t size_;
  pcie::UniqueFd fd_;
  uint8_t* base_;
};

// Drives SystemC with `loop` until `done()` or `wall_limit_s` of wall time.
// Returns false when the limit was hit.
inline bool run_until(pcie::QemuRunLoop& loop, const std::function<bool()>& done,
                      double wall_limit_s,
                      sc_core::sc_time slice = sc_core::sc_time(100, sc_core::SC_US)) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > wall_limit_s)
      return false;
    const auto step = loop.next_step(slice);
    if (!step) return done();
    sc_core::sc_start(*step);
  }
  return true;
}

// Waits, without simulating, until `done` (a state another thread of the
// platform changes: the proxy's I/O thread, QEMU's reaper) holds, checking
// it every millisecond for at most `wall_limit_s`. For when the run loop
// has ended and run_until can no longer step. Returns done().
inline bool wait_for_thread(const std::function<bool()>& done, double wall_limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done() && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
                        wall_limit_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done();
}

}  // namespace mprdma::test
