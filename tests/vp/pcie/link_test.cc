// The PCIe link, root complex and DMA port in simulation: Kalia's K1
// traffic figures, bandwidths, latencies, tag limits and DMA semantics.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <systemc>
#include <vector>

#include "support/sim_test.h"
#include "vp/core/calendar.h"
#include "vp/host/sparse_memory.h"
#include "vp/pcie/dma_initiator.h"
#include "vp/pcie/pcie_link.h"
#include "vp/pcie/root_complex.h"

namespace mprdma::pcie {
namespace {

using sc_core::SC_PS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;

constexpr uint64_t kMiB = 1ull << 20;

// A device register target: records accesses and acts on writes at their
// arrival time, as a NIC's register block would (no wait() in b_transport).
class TestDevice : public sc_core::sc_module {
 public:
  struct Access {
    sc_time arrival;
    uint64_t addr;
    std::vector<uint8_t> data;
  };
  tlm_utils::simple_target_socket<TestDevice> mmio{"mmio"};
  std::vector<Access> writes;
  std::function<void(const Access&)> on_write;
  uint32_t read_value = 0;
  sc_time read_service = sc_core::SC_ZERO_TIME;

  explicit TestDevice(sc_core::sc_module_name name) : sc_module(name), cal_("calendar") {
    mmio.register_b_transport(this, &TestDevice::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& t, sc_time& delay) {
    const uint8_t* p = t.get_data_ptr();
    if (t.is_write()) {
      Access a{sc_time_stamp() + delay, t.get_address(),
               std::vector<uint8_t>(p, p + t.get_data_length())};
      writes.push_back(a);
      cal_.at(a.arrival, [this, a] {
        if (on_write) on_write(a);
      });
    } else {
      std::memset(t.get_data_ptr(), 0, t.get_data_length());
      std::memcpy(t.get_data_ptr(), &read_value,
                  std::min<size_t>(sizeof read_value, t.get_data_length()));
      delay += read_service;
    }
    t.set_response_status(tlm::TLM_OK_RESPONSE);
  }
  core::Calendar cal_;
};

struct Bench {
  host::SparseMemory mem;
  RootComplex rc;
  PcieLink link;
  TestDevice dev;
  DmaInitiator dma;
  Bench(core::SimEnv& env, const PcieConfig& cfg, uint64_t mem_bytes)
      : mem(0, mem_bytes),
        rc("rc", mem, env, "nic0"),
        link("link", cfg, env, "nic0"),
        dev("dev"),
        dma("dma") {
    rc.mmio.bind(link.rc_mmio);
    link.ep_mmio.bind(dev.mmio);
    dma.socket.bind(link.ep_dma);
    link.rc_dma.bind(rc.dma);
  }
};

class PcieLinkTest : public test::SimTest {
 protected:
  void build(const PcieConfig& cfg = PcieConfig{}, uint64_t mem_bytes = 64 * kMiB) {
    bench = std::make_unique<Bench>(*env, cfg, mem_bytes);
  }
  // Runs `body` in its own SC_THREAD from time zero.
  void spawn(std::function<void()> body) { sc_core::sc_spawn(std::move(body)); }
  // One DMA read of kLongRead bytes from time zero; its MB/s to the end.
  static constexpr size_t kLongRead = 1024 * 1024;
  double long_read_mbps() {
    sc_time done_at;
    spawn([&] {
      bench->dma.read(0x200000, kLongRead,
                      [&](bool, const uint8_t*, size_t) { done_at = sc_time_stamp(); });
    });
    sc_core::sc_start();
    return kLongRead / done_at.to_seconds() / 1e6;
  }
  uint64_t counter(const std::string& name) const {
    const core::Counter* c = env->stats.find_counter("pcie.nic0." + name);
    EXPECT_NE(c, nullptr) << name;
    return c == nullptr ? UINT64_MAX : c->value();
  }
  static uint64_t ps(const sc_time& t) { return t.value(); }
  // Effective serialisation on gen3 x16: ceil(bytes * 63.4765625 ps).
  uint64_t ser(uint64_t bytes) const { return bench->link.config().serialize_ps(bytes); }

  std::unique_ptr<Bench> bench;  // destroyed before the base's SimEnv
};

// ---------------------------------------------------------------- K1

// REPRODUCTION.md K1, WQE-by-MMIO: 10 WQEs of 65 B, each in a 128 B slot,
// written through write-combining as 2 lines -> 20 TLPs of 64 + 26 B.
TEST_F(PcieLinkTest, K1WqeByMmioIs1800BytesDownstream) {
  build();
  std::vector<uint8_t> wqe(128, 0);
  for (int i = 0; i < 65; ++i) wqe[i] = static_cast<uint8_t>(i + 1);
  spawn([&] {
    for (int i = 0; i < 10; ++i) bench->rc.mmio_write(0x10000 + i * 128, wqe.data(), 128);
  });
  sc_core::sc_start();
  EXPECT_EQ(counter("downstream.bytes"), 1800u);
  EXPECT_EQ(counter("downstream.mmio_write.tlps"), 20u);
  EXPECT_EQ(counter("upstream.bytes"), 0u);
  ASSERT_EQ(bench->dev.writes.size(), 20u);
  EXPECT_EQ(bench->dev.writes[1].addr, 0x10040u);
  EXPECT_EQ(bench->dev.writes[1].data[0], 65);
}

// K1, doorbell: one 8 B doorbell, then the NIC DMA-reads 10 x 128 B:
// (8 + 26) + 10 * (128 + 22) = 1534 B downstream.
TEST_F(PcieLinkTest, K1DoorbellIs1534BytesDownstream) {
  build();
  const uint64_t ring = bench->mem.alloc_contiguous(10 * 128, 128);
  std::vector<uint8_t> slots(10 * 128);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(bench->mem.write(ring, slots.data(), slots.size()));

  std::vector<uint8_t> fetched;
  bool ok = false;
  bench->dev.on_write = [&](const TestDevice::Access&) {
    bench->dma.read(ring, 10 * 128, [&](bool good, const uint8_t* data, size_t len) {
      ok = good;
      fetched.assign(data, data + len);
    });
  };
  spawn([&] {
    const uint64_t doorbell = 10;
    bench->rc.mmio_write(0x800, &doorbell, sizeof doorbell);
  });
  sc_core::sc_start();
  EXPECT_TRUE(ok);
  EXPECT_EQ(fetched, slots);
  EXPECT_EQ(counter("downstream.bytes"), 1534u);
  EXPECT_EQ(counter("downstream.mmio_write.bytes"), 34u);
  EXPECT_EQ(counter("downstream.dma_read_completion.tlps"), 10u);
  EXPECT_EQ(counter("downstream.dma_read_completion.bytes"), 1500u);
  // Requests go the other way: 512 + 512 + 256 B, one Pr each.
  EXPECT_EQ(counter("upstream.dma_read_request.tlps"), 3u);
  EXPECT_EQ(counter("upstream.bytes"), 78u);
  EXPECT_EQ(counter("dma_read_bytes"), 1280u);
}

// ---------------------------------------------------------------- timing

// An idle-link read of 64 B takes
//   ser(Pr) + latency + memory_latency + ser(64 + Pc) + latency
//   = 1651 + 150000 + 100000 + 5459 + 150000 ps = 407110 ps (gen3 x16).
TEST_F(PcieLinkTest, SmallReadLatencyMatchesFormula) {
  build();
  sc_time done_at;
  bool ok = false;
  spawn([&] {
    bench->dma.read(0x4000, 64, [&](bool good, const uint8_t*, size_t) {
      ok = good;
      done_at = sc_time_stamp();
    });
  });
  sc_core::sc_start();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ser(26), 1651u);
  EXPECT_EQ(ser(86), 5459u);
  EXPECT_EQ(ps(done_at), 407110u);
  const core::Histogram* h = env->stats.find_histogram("pcie.nic0.dma_read_latency");
  ASSERT_NE(h, nullptr);
  EXPECT_DOUBLE_EQ(h->max(), 407.11);
}

// A read crossing RCB boundaries: completions of 64, 128 and 8 B.
TEST_F(PcieLinkTest, UnalignedReadLatencyAndBytes) {
  build();
  sc_time done_at;
  spawn([&] {
    bench->dma.read(0x4040, 200, [&](bool, const uint8_t*, size_t) { done_at = sc_time_stamp(); });
  });
  sc_core::sc_start();
  EXPECT_EQ(counter("downstream.dma_read_completion.bytes"), 86u + 150u + 30u);
  EXPECT_EQ(ps(done_at), ser(26) + 150000 + 100000 + ser(266) + 150000);
}

// Long DMA reads reach Kalia's effective read bandwidth, 13443 MB/s
// (completions carry 128 B of data per 150 B on a 15754 MB/s link), less
// the DLLPs of the requests: 13354 MB/s (PcieReadStreamTest below).
TEST_F(PcieLinkTest, ReadBandwidthMatchesKalia) {
  build();
  constexpr size_t kRead = 64 * 1024;
  constexpr int kReads = 64;
  constexpr int kWindow = 8;
  int issued = 0, completed = 0;
  sc_time last;
  std::function<void()> issue = [&] {
    const uint64_t addr = 0x100000 + (issued % 16) * kRead;
    ++issued;
    bench->dma.read(addr, kRead, [&](bool ok, const uint8_t*, size_t) {
      EXPECT_TRUE(ok);
      ++completed;
      last = sc_time_stamp();
      if (issued < kReads) issue();
    });
  };
  spawn([&] {
    for (int i = 0; i < kWindow; ++i) issue();
  });
  sc_core::sc_start();
  ASSERT_EQ(completed, kReads);
  const double mbps = kRead * kReads / last.to_seconds() / 1e6;
  EXPECT_NEAR(mbps, 13354.0, 13354 * 0.005);
  EXPECT_EQ(counter("dma_read_bytes"), uint64_t{kRead} * kReads);
  EXPECT_EQ(counter("downstream.dma_read_completion.bytes"), uint64_t{kRead} * kReads / 128 * 150);
  EXPECT_EQ(bench->dma.outstanding_reads(), 0u);
  EXPECT_EQ(bench->link.pending_dma_reads(), 0u);
  EXPECT_EQ(bench->link.read_tags_in_use(), 0u);
}

// Posted DMA writes stream at link rate * MPS / (MPS + Pr): 14301.4 MB/s.
TEST_F(PcieLinkTest, WriteBandwidthFollowsMps) {
  build();
  constexpr size_t kWrite = 4096;
  constexpr int kWrites = 1024;
  const uint64_t base = bench->mem.alloc_contiguous(kWrite * kWrites);
  sc_core::sc_event last_landed;
  bench->rc.add_write_watch(base + (kWrites - 1) * kWrite, kWrite, &last_landed);
  sc_time landed;
  spawn([&] {
    std::vector<uint8_t> buf(kWrite, 0x5a);
    for (int i = 0; i < kWrites; ++i) bench->dma.write(base + i * kWrite, buf.data(), kWrite);
  });
  spawn([&] {
    sc_core::wait(last_landed);
    landed = sc_time_stamp();
  });
  sc_core::sc_start();
  const double expect = bench->link.config().link_bytes_per_sec() * 256 / 282 / 1e6;
  EXPECT_NEAR(expect, 14301.4, 0.1);
  const double mbps = double{kWrite} * kWrites / landed.to_seconds() / 1e6;
  EXPECT_NEAR(mbps, expect, expect * 0.01);
  EXPECT_EQ(counter("dma_write_bytes"), uint64_t{kWrite} * kWrites);
  EXPECT_EQ(counter("upstream.dma_write.tlps"), uint64_t{kWrites} * 16);
  // Their Acks and UpdateFCs go downstream: 2 x 8 B per 4 TLPs of 282 B
  // (1.4 % of the write traffic), and leave the write bandwidth alone.
  EXPECT_EQ(counter("downstream.dllp.bytes"), uint64_t{kWrites} * 16 / 4 * 2 * 8);
  EXPECT_EQ(counter("upstream.dllp.bytes"), 0u);
  EXPECT_EQ(bench->dma.last_write_arrival(), landed);
  EXPECT_EQ(bench->mem.ptr(base + kWrite * kWrites - 1, 1)[0], 0x5a);
}

// With 4 tags and MRRS 128, a long read moves 4 * 128 B per round trip
// (about 1.25 GB/s), far below the link; with the default 256 tags the same
// read saturates the link.
TEST_F(PcieLinkTest, OutstandingReadLimitCapsThroughput) {
  PcieConfig cfg;
  cfg.max_outstanding_reads = 4;
  cfg.max_read_request = core::Bytes{128};
  build(cfg);
  constexpr size_t kLen = 256 * 1024;
  sc_time done_at;
  size_t max_tags = 0;
  spawn([&] {
    bench->dma.read(0x200000, kLen, [&](bool ok, const uint8_t*, size_t) {
      EXPECT_TRUE(ok);
      done_at = sc_time_stamp();
    });
    while (done_at == sc_core::SC_ZERO_TIME) {
      max_tags = std::max(max_tags, bench->link.read_tags_in_use());
      sc_core::wait(sc_time(50, sc_core::SC_NS));
    }
  });
  sc_core::sc_start();
  const uint64_t rtt = ser(26) + 150000 + 100000 + ser(150) + 150000;
  const double expect = 4.0 * 128 / (rtt * 1e-12) / 1e6;
  const double mbps = kLen / done_at.to_seconds() / 1e6;
  EXPECT_NEAR(mbps, expect, expect * 0.02);
  EXPECT_LT(mbps, 0.1 * 13443);
  EXPECT_EQ(max_tags, 4u);
  EXPECT_GT(counter("read_tag_waits"), 0u);
  EXPECT_EQ(counter("upstream.dma_read_request.tlps"), kLen / 128);
}

TEST_F(PcieLinkTest, DefaultTagsSaturateSmallMrrs) {
  PcieConfig cfg;
  cfg.max_read_request = core::Bytes{128};
  build(cfg);
  constexpr size_t kLen = kLongRead;
  const double mbps = long_read_mbps();
  // Each 128 B completion (128 + 22 B) shares the downstream link with the
  // DLLPs acknowledging one 26 B request: 8 B x (1/4 Ack + 1/4 UpdateFC).
  EXPECT_NEAR(mbps, cfg.link_bytes_per_sec() * 128 / (150 + 4) / 1e6, 13443 * 0.01);
  EXPECT_LT(mbps, 13443 * 0.98) << "DLLPs cost Kalia's few percent";
  EXPECT_EQ(counter("read_tag_waits"), kLen / 128 - 256);
}

// Without the data-link layer (dllp_bytes 0) the same stream reaches Kalia's
// TLP-only figure, link x RCB / (RCB + Pc) = 13 443 MB/s.
TEST_F(PcieLinkTest, WithoutDllpsReadsReachTheTlpOnlyBandwidth) {
  PcieConfig cfg;
  cfg.max_read_request = core::Bytes{128};
  cfg.dllp_bytes = core::Bytes{0};
  build(cfg);
  EXPECT_NEAR(long_read_mbps(), 13443, 13443 * 0.01);
  EXPECT_EQ(counter("downstream.dllp.count"), 0u);
}

// The receiver of TLPs sends the DLLPs, the other way: 16 MMIO writes down
// are 4 Acks and 4 UpdateFCs up, 8 B each; the read requests of a DMA read
// are acknowledged downstream. DLLP bytes stay out of the TLP totals.
TEST_F(PcieLinkTest, DllpsGoTheOtherWayOnePerFourTlpsEach) {
  build();
  spawn([&] {
    for (int i = 0; i < 16; ++i) {
      const uint64_t v = i;
      bench->rc.mmio_write(0x800, &v, 8);
    }
  });
  sc_core::sc_start();
  EXPECT_EQ(counter("downstream.tlps"), 16u);
  EXPECT_EQ(counter("upstream.dllp.count"), 8u);
  EXPECT_EQ(counter("upstream.dllp.bytes"), 64u);
  EXPECT_EQ(counter("downstream.dllp.count"), 0u);
  EXPECT_EQ(counter("downstream.bytes"), 16u * (8 + 26));
}

// ---------------------------------------------------------------- data-link layer

// Exact DLLP counts for a known sequence (defaults: an Ack per 4 TLPs, an
// UpdateFC per 4 TLPs of one finite credit type, 8 B each, completion
// credits infinite so no UpdateFC for completions):
//   downstream TLPs: 10 MMIO writes (posted) + 1 MMIO read request
//     (non-posted) + 2 x 4 completions of two 512 B DMA reads = 19 TLPs
//     -> upstream: 19 / 4 = 4 Acks; posted 10 / 4 = 2 UpdateFCs,
//        non-posted 1 -> 0, completions none: 6 DLLPs, 48 B.
//   upstream TLPs: 1 MMIO read completion + 2 read requests (non-posted)
//     + 6 DMA writes of 64 B (posted) = 9 TLPs
//     -> downstream: 9 / 4 = 2 Acks; posted 6 / 4 = 1 UpdateFC,
//        non-posted 2 -> 0: 3 DLLPs, 24 B.
TEST_F(PcieLinkTest, DllpCountsOfAKnownSequence) {
  build();
  spawn([&] {
    for (int i = 0; i < 10; ++i) {
      const uint64_t v = i;
      bench->rc.mmio_write(0x800, &v, 8);
    }
    uint32_t r = 0;
    bench->rc.mmio_read(0x100, &r, 4);
    for (int i = 0; i < 2; ++i)
      bench->dma.read(0x10000 + i * 512, 512, [](bool, const uint8_t*, size_t) {});
    std::vector<uint8_t> buf(64, 1);
    for (int i = 0; i < 6; ++i) bench->dma.write(0x20000 + i * 64, buf.data(), 64);
  });
  sc_core::sc_start();
  EXPECT_EQ(counter("downstream.tlps"), 19u);
  EXPECT_EQ(counter("upstream.tlps"), 9u);
  EXPECT_EQ(counter("upstream.dllp.acks"), 4u);
  EXPECT_EQ(counter("upstream.dllp.update_fcs"), 2u);
  EXPECT_EQ(counter("upstream.dllp.count"), 6u);
  EXPECT_EQ(counter("upstream.dllp.bytes"), 48u);
  EXPECT_EQ(counter("downstream.dllp.acks"), 2u);
  EXPECT_EQ(counter("downstream.dllp.update_fcs"), 1u);
  EXPECT_EQ(counter("downstream.dllp.count"), 3u);
  EXPECT_EQ(counter("downstream.dllp.bytes"), 24u);
  // DLLPs are not TLP bytes.
  EXPECT_EQ(counter("downstream.bytes"), 10u * 34 + 26 + 2 * 4 * 150);
  EXPECT_EQ(counter("downstream.credit_waits") + counter("upstream.credit_waits"), 0u);
}

// One DLLP per TLP and per finite type when both factors are 1; with finite
// completion credits the completions get their UpdateFCs too.
TEST_F(PcieLinkTest, DllpFactorsOfOneAndFiniteCompletionCredits) {
  PcieConfig cfg;
  cfg.ack_every = 1;
  cfg.update_fc_every = 1;
  cfg.endpoint.completion_header = 64;
  cfg.endpoint.completion_data = 1024;
  build(cfg);
  spawn([&] { bench->dma.read(0x10000, 1024, [](bool, const uint8_t*, size_t) {}); });
  sc_core::sc_start();
  // 2 requests up, 8 completions down.
  EXPECT_EQ(counter("downstream.dllp.acks"), 2u);
  EXPECT_EQ(counter("downstream.dllp.update_fcs"), 2u);
  EXPECT_EQ(counter("upstream.dllp.acks"), 8u);
  EXPECT_EQ(counter("upstream.dllp.update_fcs"), 8u);
  EXPECT_EQ(counter("upstream.dllp.bytes"), 16u * 8);
}

// The receiver acknowledges the other way: a DMA write stream (upstream)
// puts all its DLLPs downstream. There they take link time when that
// direction is busy: 8 writes while completions are queued downstream add
// 2 Acks + 2 UpdateFCs = 4 x ser(8 B) to the downstream backlog, and a
// doorbell sent next waits for them.
TEST_F(PcieLinkTest, DllpsGoTheOtherWayAndDelayWhatQueuesBehind) {
  build();
  sc_time b0, b1;
  spawn([&] {
    bench->dma.read(0x300000, 64 * 1024, [](bool, const uint8_t*, size_t) {});
    sc_core::wait(sc_time(1, sc_core::SC_US));
    const uint64_t dllps_before = counter("downstream.dllp.count");
    b0 = bench->link.downstream_busy_until();
    ASSERT_GT(b0, sc_time(2, sc_core::SC_US)) << "completions queued downstream";
    std::vector<uint8_t> buf(64, 1);
    for (int i = 0; i < 8; ++i) bench->dma.write(0x20000 + i * 64, buf.data(), 64);
    b1 = bench->link.downstream_busy_until();
    EXPECT_EQ(counter("downstream.dllp.count") - dllps_before, 4u);
    const uint64_t v = 1;
    bench->rc.mmio_write(0x800, &v, 8);
  });
  sc_core::sc_start();
  EXPECT_EQ(ser(8), 508u);
  EXPECT_EQ(ps(b1) - ps(b0), 4 * ser(8));
  ASSERT_EQ(bench->dev.writes.size(), 1u);
  EXPECT_EQ(ps(bench->dev.writes[0].arrival), ps(b1) + ser(34) + 150000);
  // Only the writes' DLLPs went down besides the read requests' ones: the
  // read's 128 requests, 32 Acks and 32 UpdateFCs; the writes' 2 + 2.
  EXPECT_EQ(counter("downstream.dllp.count"), 32u + 32u + 4u);
  EXPECT_EQ(counter("upstream.dllp.update_fcs"), 0u) << "completion credits are infinite";
  EXPECT_EQ(counter("upstream.dllp.acks"), 64u * 1024 / 128 / 4);
}

// With 16 posted data credits at the root port (one 256 B TLP, the least a
// receiver may advertise) each TLP of a 1 KiB DMA write waits for the
// UpdateFC of the one before: the receiver sends it as soon as it frees the
// buffer (arrival + processing), because the sender has less than one TLP
// of credit, and it reaches the sender ser(8 B) + latency later. A write
// issued once the credits are back does not wait.
TEST_F(PcieLinkTest, PostedCreditsStallAndRelease) {
  PcieConfig cfg;
  cfg.root_port.posted_data = 16;
  cfg.root_port.processing = core::Duration::from_ns(20);
  build(cfg);
  const uint64_t pa = bench->mem.alloc_contiguous(8192);
  sc_time first_arrival, second_arrival;
  spawn([&] {
    std::vector<uint8_t> buf(1024, 0x33);
    bench->dma.write(pa, buf.data(), 1024);
    first_arrival = bench->dma.last_write_arrival();
    sc_core::wait(sc_time(5, sc_core::SC_US));
    bench->dma.write(pa + 4096, buf.data(), 256);
    second_arrival = bench->dma.last_write_arrival();
  });
  sc_core::sc_start();
  const uint64_t loop = 150000 + 20000 + ser(8) + 150000;  // arrival -> credits back
  EXPECT_EQ(ps(first_arrival), 4 * ser(282) + 3 * loop + 150000);
  EXPECT_EQ(counter("upstream.credit_waits"), 3u);
  EXPECT_EQ(counter("upstream.credit_wait_ps"), 3 * loop);
  EXPECT_EQ(counter("downstream.dllp.update_fcs"), 5u) << "one per TLP: the pool was empty";
  EXPECT_EQ(ps(second_arrival), 5000000 + ser(282) + 150000);
  EXPECT_EQ(bench->mem.ptr(pa + 1023, 1)[0], 0x33);
}

// Read requests wait for non-posted header credits at the root port: with
// 2 of them a long read moves 2 x MRRS per credit loop, like 2 tags would
// (the credit comes back when the request is taken, not when answered).
TEST_F(PcieLinkTest, NonPostedCreditsThrottleReadRequests) {
  PcieConfig cfg;
  cfg.root_port.non_posted_header = 2;
  build(cfg);
  constexpr size_t kLen = 256 * 1024;
  sc_time done_at;
  spawn([&] {
    bench->dma.read(0x200000, kLen, [&](bool ok, const uint8_t*, size_t) {
      EXPECT_TRUE(ok);
      done_at = sc_time_stamp();
    });
  });
  sc_core::sc_start();
  const double loop_s = (2 * ser(26) + 300000 + ser(8)) * 1e-12;
  const double expect = 2.0 * 512 / loop_s / 1e6;
  const double mbps = kLen / done_at.to_seconds() / 1e6;
  EXPECT_NEAR(mbps, expect, expect * 0.03);
  // Every second request waits (the UpdateFC returns two credits at once).
  EXPECT_EQ(counter("upstream.credit_waits"), (kLen / 512 - 2) / 2);
}

// A posted-write stream with fewer posted data credits than the bandwidth-
// delay product of the credit loop is throttled to
//   k x MPS / (b x ser(MPS + Pr) + 2 x latency + processing + ser(8 B)),
// k = TLPs the credits hold, b = min(k, update_fc_every) TLPs per UpdateFC
// (here 64 credits = 4 TLPs of 256 B: 2752 MB/s); with the defaults (2047
// credits, 32 KiB) it keeps MPS / (MPS + Pr) of the link.
TEST_F(PcieLinkTest, SmallPostedCreditsThrottleWriteBandwidth) {
  PcieConfig cfg;
  cfg.root_port.posted_data = 64;
  build(cfg);
  constexpr size_t kWrite = 4096;
  constexpr int kWrites = 256;
  const uint64_t base = bench->mem.alloc_contiguous(kWrite * kWrites);
  spawn([&] {
    std::vector<uint8_t> buf(kWrite, 0x5a);
    for (int i = 0; i < kWrites; ++i) bench->dma.write(base + i * kWrite, buf.data(), kWrite);
  });
  sc_core::sc_start();
  const sc_time landed = bench->dma.last_write_arrival();
  const double period_s = (4 * ser(282) + 300000 + ser(8)) * 1e-12;
  const double expect = 4.0 * 256 / period_s / 1e6;
  EXPECT_NEAR(expect, 2752, 1);
  const double mbps = double{kWrite} * kWrites / landed.to_seconds() / 1e6;
  EXPECT_NEAR(mbps, expect, expect * 0.01);
  EXPECT_LT(mbps, 0.2 * 14301);
  EXPECT_EQ(counter("upstream.credit_waits"), uint64_t{kWrites} * 16 / 4 - 1);
}

// Bandwidth with and without the DLLPs of the other direction, default
// MRRS 512: one request (and its Ack and UpdateFC share, 8 B x (1/4 + 1/4))
// per 4 completions of 128 + 22 B:
//   link x 128 / (150 + 4 / 4) = 13 354 MB/s; 13 443 MB/s without DLLPs.
// DLLPs are then 4 B per 600 B downstream (0.67 %) and the completions'
// Acks 8 B per 4 completions upstream, where the requests take 26 B.
class PcieReadStreamTest : public PcieLinkTest, public ::testing::WithParamInterface<uint64_t> {};

TEST_P(PcieReadStreamTest, ReadBandwidthWithAndWithoutDllps) {
  const uint64_t dllp = GetParam();
  PcieConfig cfg;
  cfg.dllp_bytes = core::Bytes{dllp};
  build(cfg);
  constexpr size_t kLen = 4 * 1024 * 1024;
  sc_time done_at;
  spawn([&] {
    bench->dma.read(0x200000, kLen,
                    [&](bool, const uint8_t*, size_t) { done_at = sc_time_stamp(); });
  });
  sc_core::sc_start();
  const double per_completion = dllp ? 150.0 + 2 * 8.0 / 4 / 4 : 150.0;
  const double expect = cfg.link_bytes_per_sec() * 128 / per_completion / 1e6;
  EXPECT_NEAR(expect, dllp ? 13354 : 13443, 1);
  EXPECT_NEAR(kLen / done_at.to_seconds() / 1e6, expect, expect * 0.003);
  EXPECT_EQ(counter("downstream.dllp.bytes"), dllp ? kLen / 512 / 4 * 2 * 8 : 0);
  EXPECT_EQ(counter("upstream.dllp.bytes"), dllp ? kLen / 128 / 4 * 8 : 0);
}

INSTANTIATE_TEST_SUITE_P(DllpBytes, PcieReadStreamTest, ::testing::Values(8u, 0u));

// Completions and MMIO writes share the downstream FIFO: a doorbell sent
// while a read's completions are queued leaves after them.
TEST_F(PcieLinkTest, DownstreamIsSharedByMmioAndCompletions) {
  build();
  sc_time read_done;
  spawn([&] {
    bench->dma.read(0x300000, 64 * 1024,
                    [&](bool, const uint8_t*, size_t) { read_done = sc_time_stamp(); });
  });
  spawn([&] {
    sc_core::wait(sc_time(1, sc_core::SC_US));
    const uint64_t v = 1;
    bench->rc.mmio_write(0x800, &v, 8);
  });
  sc_core::sc_start();
  ASSERT_EQ(bench->dev.writes.size(), 1u);
  EXPECT_GT(read_done, sc_time(1, sc_core::SC_US));
  // Its 8 B + Pr start when the last completion has left.
  EXPECT_EQ(ps(bench->dev.writes[0].arrival) - ps(read_done), ser(34));
}

// Back-to-back WC lines stall the CPU at link rate: 175 M lines/s (Kalia:
// 16 * 984.6 MB/s / (64 + 26) B). 1000 lines are far more than the
// endpoint's 127 posted header credits: the default credits keep up.
TEST_F(PcieLinkTest, MmioWriteBackPressure) {
  build();
  sc_time done;
  spawn([&] {
    uint8_t line[64] = {};
    for (int i = 0; i < 1000; ++i) bench->rc.mmio_write(0x1000 + 64 * (i % 64), line, 64);
    done = sc_time_stamp();
  });
  sc_core::sc_start();
  // The caller waits until its last line starts serialising.
  EXPECT_EQ(ps(done), 999 * ser(90));
  EXPECT_NEAR(1e12 / ser(90) / 1e6, 175.0, 1.75);
  ASSERT_EQ(bench->dev.writes.size(), 1000u);
  EXPECT_EQ(ps(bench->dev.writes[0].arrival), ser(90) + 150000);
  EXPECT_EQ(ps(bench->dev.writes[999].arrival), 1000 * ser(90) + 150000);
  EXPECT_EQ(counter("downstream.credit_waits"), 0u);
}

// With the 32 posted header credits of many FPGA endpoints the same lines
// are held to 32 per credit loop. Credits come back 4 TLPs at a time
// (update_fc_every), each group ser(8) + 2 x latency after its last TLP
// ended, so 32 lines take 4 x ser(90) + 2 x latency + ser(8): 99 M lines/s
// instead of 175 M.
TEST_F(PcieLinkTest, FewPostedHeaderCreditsHoldMmioLines) {
  PcieConfig cfg;
  cfg.endpoint.posted_header = 32;
  build(cfg);
  sc_time done;
  spawn([&] {
    uint8_t line[64] = {};
    for (int i = 0; i < 3200; ++i) bench->rc.mmio_write(0x1000 + 64 * (i % 64), line, 64);
    done = sc_time_stamp();
  });
  sc_core::sc_start();
  const double loop_s = (4 * ser(90) + 300000 + ser(8)) * 1e-12;
  EXPECT_NEAR(32 / loop_s / 1e6, 99.0, 0.1);
  const double lines_per_s = 3200 / done.to_seconds();
  EXPECT_NEAR(lines_per_s, 32 / loop_s, 32 / loop_s * 0.02);
  EXPECT_LT(lines_per_s, 0.6 * 175e6);
  EXPECT_GT(counter("downstream.credit_waits"), 90u);
}

TEST_F(PcieLinkTest, MmioReadRoundTrip) {
  build();
  bench->dev.read_value = 0x12345678;
  bench->dev.read_service = sc_time(20, sc_core::SC_NS);
  uint32_t v = 0;
  sc_time done;
  spawn([&] {
    bench->rc.mmio_read(0x100, &v, 4);
    done = sc_time_stamp();
  });
  sc_core::sc_start();
  EXPECT_EQ(v, 0x12345678u);
  EXPECT_EQ(ps(done), ser(26) + 150000 + 20000 + ser(26) + 150000);
  EXPECT_EQ(counter("downstream.mmio_read.tlps"), 1u);
  EXPECT_EQ(counter("upstream.mmio_read.bytes"), 26u);
}

// ---------------------------------------------------------------- DMA semantics

TEST_F(PcieLinkTest, DmaWriteLandsAtArrivalAndWakesWatch) {
  build();
  const uint64_t pa = bench->mem.alloc_contiguous(4096);
  const uint64_t arrival = ser(64 + 26) + 150000;  // 155713 ps
  sc_core::sc_event watch, elsewhere, removed;
  bench->rc.add_write_watch(pa + 32, 8, &watch);
  bench->rc.add_write_watch(pa + 64, 64, &elsewhere);  // adjacent, not overlapping
  bench->rc.add_write_watch(pa, 4096, &removed);
  bench->rc.remove_write_watch(&removed);
  sc_time woke, elsewhere_woke, removed_woke;
  uint8_t before = 0xee, after = 0;
  spawn([&] {
    std::vector<uint8_t> data(64, 0xab);
    bench->dma.write(pa, data.data(), data.size());
  });
  spawn([&] {
    sc_core::wait(watch);
    woke = sc_time_stamp();
  });
  spawn([&] {
    sc_core::wait(sc_time(1, sc_core::SC_US), elsewhere);
    elsewhere_woke = sc_time_stamp();
  });
  spawn([&] {
    sc_core::wait(sc_time(1, sc_core::SC_US), removed);
    removed_woke = sc_time_stamp();
  });
  spawn([&] {
    sc_core::wait(sc_time(arrival - 1, SC_PS));
    bench->mem.read(pa, &before, 1);
    sc_core::wait(sc_time(2, SC_PS));
    bench->mem.read(pa, &after, 1);
  });
  sc_core::sc_start();
  EXPECT_EQ(before, 0);
  EXPECT_EQ(after, 0xab);
  EXPECT_EQ(ps(woke), arrival);
  EXPECT_EQ(ps(bench->dma.last_write_arrival()), arrival);
  EXPECT_EQ(elsewhere_woke, sc_time(1, sc_core::SC_US));  // timed out
  EXPECT_EQ(removed_woke, sc_time(1, sc_core::SC_US));
}

// A read issued after a write sees it: the request follows the write
// upstream and is serviced after the write has committed.
TEST_F(PcieLinkTest, ReadAfterWriteSeesTheWrite) {
  build();
  const uint64_t pa = bench->mem.alloc_contiguous(4096);
  std::vector<uint8_t> got;
  spawn([&] {
    const uint32_t v = 0xcafef00d;
    bench->dma.write(pa, &v, 4);
    bench->dma.read(pa, 4, [&](bool, const uint8_t* d, size_t n) { got.assign(d, d + n); });
  });
  sc_core::sc_start();
  ASSERT_EQ(got.size(), 4u);
  uint32_t v = 0;
  std::memcpy(&v, got.data(), 4);
  EXPECT_EQ(v, 0xcafef00du);
}

TEST_F(PcieLinkTest, MsiWindowCallsOnMsi) {
  build();
  struct Msi {
    sc_time at;
    uint64_t addr;
    uint32_t data;
  };
  std::vector<Msi> msis;
  bench->rc.on_msi = [&](uint64_t addr, uint32_t data) {
    msis.push_back(Msi{sc_time_stamp(), addr, data});
  };
  spawn([&] { bench->dma.send_msi(0xFEE00010, 0x41); });
  sc_core::sc_start();
  ASSERT_EQ(msis.size(), 1u);
  EXPECT_EQ(msis[0].addr, 0xFEE00010u);
  EXPECT_EQ(msis[0].data, 0x41u);
  EXPECT_EQ(ps(msis[0].at), ser(4 + 26) + 150000);
  EXPECT_EQ(counter("upstream.msi.tlps"), 1u);
  EXPECT_EQ(counter("upstream.msi.bytes"), 30u);
  EXPECT_EQ(counter("upstream.dma_write.tlps"), 0u);
  EXPECT_EQ(counter("dma_write_bytes"), 0u);
  EXPECT_EQ(counter("msis"), 1u);
}

TEST_F(PcieLinkTest, UnbackedReadFails) {
  build(PcieConfig{}, 1 * kMiB);
  int calls = 0;
  bool ok_outside = true, ok_straddle = true, ok_inside = false;
  spawn([&] {
    bench->dma.read(2 * kMiB, 64, [&](bool ok, const uint8_t*, size_t) {
      ++calls;
      ok_outside = ok;
    });
    bench->dma.read(kMiB - 32, 64, [&](bool ok, const uint8_t*, size_t) {
      ++calls;
      ok_straddle = ok;
    });
    bench->dma.read(kMiB - 64, 64, [&](bool ok, const uint8_t*, size_t) {
      ++calls;
      ok_inside = ok;
    });
  });
  sc_core::sc_start();
  EXPECT_EQ(calls, 3);
  EXPECT_FALSE(ok_outside);
  EXPECT_FALSE(ok_straddle);
  EXPECT_TRUE(ok_inside);
  EXPECT_EQ(counter("dma_read_errors"), 2u);
  EXPECT_EQ(counter("dma_read_bytes"), 64u);
  // A failed request is answered by one completion without data. The
  // straddling read is two requests (cut at 1 MiB, an MRRS multiple): the
  // first, backed, gets its 32 B; the second fails.
  EXPECT_EQ(counter("upstream.dma_read_request.tlps"), 4u);
  EXPECT_EQ(counter("downstream.dma_read_completion.bytes"), 22u + (32u + 22u + 22u) + 86u);
}

TEST_F(PcieLinkTest, UnbackedWriteIsDroppedAndCounted) {
  build(PcieConfig{}, 1 * kMiB);
  spawn([&] {
    const uint64_t v = 7;
    bench->dma.write(2 * kMiB, &v, 8);
    bench->dma.write(64, &v, 8);
  });
  sc_core::sc_start();
  EXPECT_EQ(counter("dma_write_errors"), 1u);
  uint64_t got = 0;
  ASSERT_TRUE(bench->mem.read(64, &got, 8));
  EXPECT_EQ(got, 7u);
  EXPECT_EQ(counter("dma_write_bytes"), 16u);  // the link carried both
}

TEST_F(PcieLinkTest, LargeUnalignedReadReturnsTheBytes) {
  build();
  const uint64_t addr = 0x123456;
  const size_t len = 10000;
  std::vector<uint8_t> pattern(len);
  for (size_t i = 0; i < len; ++i) pattern[i] = static_cast<uint8_t>(i * 31 + 5);
  ASSERT_TRUE(bench->mem.write(addr, pattern.data(), len));
  std::vector<uint8_t> got;
  spawn([&] {
    bench->dma.read(addr, len, [&](bool ok, const uint8_t* d, size_t n) {
      EXPECT_TRUE(ok);
      got.assign(d, d + n);
    });
  });
  sc_core::sc_start();
  EXPECT_EQ(got, pattern);
  EXPECT_EQ(counter("upstream.dma_read_request.tlps"),
            split_read_requests(addr, len, PcieConfig{}.tlp_rules()).size());
  EXPECT_EQ(counter("downstream.dma_read_completion.tlps"),
            split_completions(addr, len, PcieConfig{}.tlp_rules()).size());
}

// Chained reads reuse pooled payloads instead of allocating per read.
TEST_F(PcieLinkTest, PayloadPoolStaysBounded) {
  build();
  int remaining = 1000;
  std::function<void()> next = [&] {
    bench->dma.read(0x1000, 64, [&](bool, const uint8_t*, size_t) {
      if (--remaining > 0) next();
    });
  };
  spawn([&] { next(); });
  sc_core::sc_start();
  EXPECT_EQ(remaining, 0);
  // The callback runs while its own payload is still held, so two suffice.
  EXPECT_LE(bench->dma.payloads_allocated(), 2u);
  EXPECT_EQ(bench->dma.outstanding_reads(), 0u);
  EXPECT_EQ(counter("dma_reads"), 1000u);
}

TEST_F(PcieLinkTest, InvalidConfigIsRejected) {
  PcieConfig cfg;
  cfg.lanes = 3;
  EXPECT_THROW(build(cfg), std::invalid_argument);
}

// The host's IOMMU view the NIC's firmware consults for addresses software
// hands it (RootComplex::dma_addressable): backed memory, not revoked, and
// never the MSI window, even where memory lies behind it (a device write
// there is an interrupt, not data: an MR over it would let a peer raise
// MSIs).
TEST_F(PcieLinkTest, DmaAddressableExcludesTheMsiWindowHolesAndRevokedPages) {
  host::SparseMemory mem(0, 8ull << 30);  // RAM under and over the window
  RootComplex rc("rc", mem, *env, "nic0");
  EXPECT_TRUE(rc.dma_addressable(0x1000, 4096));
  EXPECT_TRUE(rc.dma_addressable(0xFEDFF000, 4096)) << "just below the window";
  EXPECT_TRUE(rc.dma_addressable(0xFEF00000, 4096)) << "just above it";
  EXPECT_FALSE(rc.dma_addressable(0xFEE00000, 4));
  EXPECT_FALSE(rc.dma_addressable(0xFEEFFFFC, 4));
  EXPECT_FALSE(rc.dma_addressable(0xFEDFF000, 8192)) << "straddles the window's start";
  EXPECT_FALSE(rc.dma_addressable(8ull << 30, 4096)) << "beyond memory";
  EXPECT_FALSE(rc.dma_addressable(~0ull - 8, 64)) << "wraps";
  rc.revoke_dma(0x20000, 4096);
  EXPECT_FALSE(rc.dma_addressable(0x20ff0, 32));
  EXPECT_TRUE(rc.dma_addressable(0x21000, 32));
  rc.restore_dma();
  EXPECT_TRUE(rc.dma_addressable(0x20ff0, 32));
}

}  // namespace
}  // namespace mprdma::pcie
