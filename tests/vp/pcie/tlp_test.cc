// TLP splitting arithmetic and the link configuration, without simulation.
#include "vp/pcie/tlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/recording_binder.h"
#include "vp/core/random.h"
#include "vp/pcie/pcie_config.h"

namespace mprdma::pcie {
namespace {

TlpRules kalia() { return PcieConfig{}.tlp_rules(); }

// Kalia et al., Appendix A: 10 WQEs of D = 65 B, PCIe 3.0, Pr = 26, Pc = 22,
// Crc = 128, doorbell d = 8 B.
TEST(TlpArithmetic, KaliaAppendixA) {
  const TlpRules r = kalia();
  // WQE-by-MMIO: each WQE padded to a 128 B slot is written through the
  // write-combining buffer as two 64 B lines, one TLP each.
  uint64_t by_mmio = 0;
  for (int wqe = 0; wqe < 10; ++wqe)
    for (int line = 0; line < 2; ++line)
      by_mmio += write_totals(0x10000 + wqe * 128 + line * 64, 64, r).wire_bytes;
  EXPECT_EQ(by_mmio, 1800u);  // 10 * ceil(65/64) * (64 + Pr)

  // Doorbell: one 8 B MMIO write, then the NIC reads the 10 slots; the
  // completions flow CPU -> NIC, the read requests NIC -> CPU.
  const uint64_t doorbell = write_totals(0x2000, 8, r).wire_bytes;
  const TlpTotals completions = completion_totals(0x40000, 10 * 128, r);
  EXPECT_EQ(doorbell, 34u);
  EXPECT_EQ(completions.tlps, 10u);
  EXPECT_EQ(doorbell + completions.wire_bytes, 1534u);  // (d + Pr) + 10 * (128 + Pc)
}

TEST(TlpArithmetic, ReadRequestsCutAtMrrsMultiples) {
  const TlpRules r = kalia();
  auto reqs = split_read_requests(0, 1280, r);
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].addr, 0u);
  EXPECT_EQ(reqs[0].len, 512u);
  EXPECT_EQ(reqs[1].addr, 512u);
  EXPECT_EQ(reqs[2].addr, 1024u);
  EXPECT_EQ(reqs[2].len, 256u);
  for (const Tlp& t : reqs) EXPECT_EQ(t.wire_bytes, 26u);  // no data in a read request

  // An unaligned start runs to the next MRRS multiple first.
  reqs = split_read_requests(0x0f00, 0x300, r);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].addr, 0x0f00u);
  EXPECT_EQ(reqs[0].len, 0x100u);
  EXPECT_EQ(reqs[1].addr, 0x1000u);
  EXPECT_EQ(reqs[1].len, 0x200u);
}

TEST(TlpArithmetic, NoRequestCrosses4KiB) {
  TlpRules r = kalia();
  r.max_read_request = 4096;
  r.max_payload = 4096;
  const auto reqs = split_read_requests(0x1800, 0x1000, r);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].len, 0x800u);
  EXPECT_EQ(reqs[1].addr, 0x2000u);
  const auto writes = split_writes(0x1ffc, 8, r);
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[0].len, 4u);
  EXPECT_EQ(writes[1].addr, 0x2000u);

  // Property: for random accesses and every legal size, the pieces tile the
  // access, respect the size limit and stay inside one 4 KiB page.
  core::RandomStream rng(7, "tlp.property");
  for (uint64_t size : {128u, 256u, 512u, 1024u, 4096u}) {
    r.max_read_request = size;
    r.max_payload = size;
    for (int i = 0; i < 500; ++i) {
      const uint64_t addr = rng.below(1u << 20);
      const uint64_t len = 1 + rng.below(20000);
      for (const auto& pieces : {split_read_requests(addr, len, r), split_writes(addr, len, r),
                                 split_completions(addr, len, r)}) {
        uint64_t next = addr;
        for (const Tlp& t : pieces) {
          ASSERT_EQ(t.addr, next);
          ASSERT_GT(t.len, 0u);
          ASSERT_LE(t.len, size);
          ASSERT_EQ(t.addr / 4096, (t.addr + t.len - 1) / 4096) << "crosses 4 KiB";
          next += t.len;
        }
        ASSERT_EQ(next, addr + len);
      }
      // The totals agree with the lists.
      const auto writes2 = split_writes(addr, len, r);
      uint64_t wire = 0;
      for (const Tlp& t : writes2) wire += t.wire_bytes;
      const TlpTotals wt = write_totals(addr, len, r);
      ASSERT_EQ(wt.tlps, writes2.size());
      ASSERT_EQ(wt.wire_bytes, wire);
      ASSERT_EQ(wt.last_wire_bytes, writes2.back().wire_bytes);
      // Completions of the whole read equal those of its requests.
      uint64_t per_request = 0;
      for (const Tlp& q : split_read_requests(addr, len, r))
        per_request += completion_totals(q.addr, q.len, r).wire_bytes;
      ASSERT_EQ(per_request, completion_totals(addr, len, r).wire_bytes);
    }
  }
}

TEST(TlpArithmetic, CompletionsCutAtRcbBoundaries) {
  const TlpRules r = kalia();
  // 200 B from 0x40: the first completion reaches the 128 B boundary (64 B),
  // then one full RCB, then the 8 B remainder.
  const auto c = split_completions(0x40, 200, r);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].len, 64u);
  EXPECT_EQ(c[0].wire_bytes, 64u + 22u);
  EXPECT_EQ(c[1].addr, 0x80u);
  EXPECT_EQ(c[1].len, 128u);
  EXPECT_EQ(c[1].wire_bytes, 150u);
  EXPECT_EQ(c[2].len, 8u);
  EXPECT_EQ(c[2].wire_bytes, 30u);

  TlpRules r64 = r;
  r64.read_completion_boundary = 64;
  EXPECT_EQ(completion_totals(0, 512, r64).tlps, 8u);
  EXPECT_EQ(completion_totals(0, 512, r64).wire_bytes, 512u + 8u * 22u);
  EXPECT_EQ(completion_totals(0, 512, r).tlps, 4u);
}

TEST(TlpArithmetic, WritesCutAtMpsAndCarryWholeDwords) {
  const TlpRules r = kalia();
  const auto w = split_writes(0x10, 600, r);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].len, 240u);
  EXPECT_EQ(w[1].len, 256u);
  EXPECT_EQ(w[1].wire_bytes, 256u + 26u);
  EXPECT_EQ(w[2].len, 104u);
  // Data travels in whole double words.
  EXPECT_EQ(dword_span(0x41, 3), 4u);
  EXPECT_EQ(dword_span(0x43, 2), 8u);
  EXPECT_EQ(dword_span(0x40, 64), 64u);
  EXPECT_EQ(write_totals(0x43, 2, r).wire_bytes, 8u + 26u);
  EXPECT_EQ(write_totals(0x40, 1, r).wire_bytes, 4u + 26u);
}

TEST(TlpArithmetic, RejectsEmptyAndWrappingAccesses) {
  const TlpRules r = kalia();
  EXPECT_THROW(split_read_requests(0, 0, r), std::invalid_argument);
  EXPECT_THROW(write_totals(UINT64_MAX - 3, 8, r), std::invalid_argument);
  TlpRules bad = r;
  bad.max_payload = 384;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
  bad = r;
  bad.max_read_request = 64;  // below RCB 128
  EXPECT_THROW(bad.validate(), std::invalid_argument);
  EXPECT_NO_THROW(r.validate());
}

// Flow-control units: one header credit per TLP, one data credit per 16 B
// (4 DW) of payload, rounded up; credit types by TLP kind and direction.
TEST(TlpArithmetic, FlowControlCreditsAndTypes) {
  EXPECT_EQ(fc_data_credits(0), 0u);
  EXPECT_EQ(fc_data_credits(4), 1u);
  EXPECT_EQ(fc_data_credits(16), 1u);
  EXPECT_EQ(fc_data_credits(20), 2u);
  EXPECT_EQ(fc_data_credits(256), 16u);
  EXPECT_EQ(fc_data_credits(4096), 256u);
  EXPECT_EQ(fc_type_of(TlpKind::mmio_write, true), FcType::posted);
  EXPECT_EQ(fc_type_of(TlpKind::dma_write, false), FcType::posted);
  EXPECT_EQ(fc_type_of(TlpKind::msi, false), FcType::posted);
  EXPECT_EQ(fc_type_of(TlpKind::mmio_read, true), FcType::non_posted);
  EXPECT_EQ(fc_type_of(TlpKind::mmio_read, false), FcType::completion);
  EXPECT_EQ(fc_type_of(TlpKind::dma_read_request, false), FcType::non_posted);
  EXPECT_EQ(fc_type_of(TlpKind::dma_read_completion, true), FcType::completion);
  EXPECT_STREQ(fc_type_name(FcType::non_posted), "non_posted");
  // The TLP-by-TLP walk gives the lists' TLPs.
  std::vector<Tlp> walked;
  for_each_completion(0x40, 200, kalia(), [&](const Tlp& t) { walked.push_back(t); });
  const auto listed = split_completions(0x40, 200, kalia());
  ASSERT_EQ(walked.size(), listed.size());
  for (size_t i = 0; i < walked.size(); ++i) EXPECT_EQ(walked[i].wire_bytes, listed[i].wire_bytes);
}

TEST(PcieConfigTest, LaneAndLinkRates) {
  PcieConfig c;
  EXPECT_NEAR(c.lane_bytes_per_sec(), 984.615e6, 1e3);  // 8 GT/s * 128/130 / 8
  EXPECT_NEAR(c.link_bytes_per_sec(), 15753.846e6, 1e4);
  // Kalia's effective DMA read bandwidth: 128 B of every 150 B completion.
  EXPECT_NEAR(c.link_bytes_per_sec() * 128 / 150 / 1e6, 13443, 0.5);
  c.gen = 1;
  EXPECT_DOUBLE_EQ(c.lane_bytes_per_sec(), 250e6);  // 2.5 GT/s * 8/10 / 8
  c.gen = 2;
  EXPECT_DOUBLE_EQ(c.lane_bytes_per_sec(), 500e6);
  c.gen = 4;
  EXPECT_NEAR(c.lane_bytes_per_sec(), 2 * 984.615e6, 1e4);
  c.gen = 5;
  c.lanes = 4;
  EXPECT_NEAR(c.link_bytes_per_sec(), 4 * 4 * 984.615e6, 1e5);
  // gen3 x16 takes 63.4765625 ps per byte.
  PcieConfig d;
  EXPECT_EQ(d.serialize_ps(150), 9522u);  // 9521.48 rounded up
  EXPECT_EQ(d.serialize_ps(128), 8125u);  // exact
}

// serialize_ps is exact integer arithmetic: the exact time rounded up, for
// every generation and width, and the same values as the long double formula
// it replaced (so every run and every quoted figure is unchanged).
TEST(PcieConfigTest, SerializeIsTheExactTimeRoundedUp) {
  for (int gen = 1; gen <= 5; ++gen)
    for (uint32_t lanes : {1u, 2u, 3u, 4u, 8u, 12u, 16u, 32u}) {
      PcieConfig c;
      c.gen = gen;
      c.lanes = lanes;
      SCOPED_TRACE("gen " + std::to_string(gen) + " x" + std::to_string(lanes));
      const long double bps = static_cast<long double>(c.link_bytes_per_sec());
      for (uint64_t bytes = 0; bytes <= 9000; ++bytes) {
        const long double ps = static_cast<long double>(bytes) * 1e12L / bps;
        const uint64_t before = static_cast<uint64_t>(std::ceil(ps - 1e-9L));
        ASSERT_EQ(c.serialize_ps(bytes), before) << bytes << " bytes";
      }
    }
}

// A binder that records keys, overrides integer and byte fields from a map,
// and collects errors (the YAML binder is tested with core).

using test::RecordingBinder;

TEST(PcieConfigTest, BindNamesEveryKeyAndChecksShapes) {
  {
    PcieConfig c;
    RecordingBinder b;
    c.bind(b);
    EXPECT_TRUE(b.errors.empty());
    for (const char* key : {"gen", "lanes", "max_payload", "max_read_request",
                            "read_completion_boundary", "request_overhead", "completion_overhead",
                            "latency", "memory_latency", "max_outstanding_reads"})
      EXPECT_TRUE(b.keys.count(key)) << key;
    EXPECT_NO_THROW(c.validate());
  }
  struct Case {
    const char* key;
    uint64_t value;
    const char* needle;
  };
  for (const Case& k : {Case{"lanes", 12, "lanes"}, Case{"max_payload", 384, "max_payload"},
                        Case{"max_read_request", 1000, "max_read_request"},
                        Case{"read_completion_boundary", 96, "read_completion_boundary"}}) {
    PcieConfig c;
    RecordingBinder b;
    b.set[k.key] = k.value;
    c.bind(b);
    ASSERT_EQ(b.errors.size(), 1u) << k.key;
    EXPECT_NE(b.errors[0].find(k.needle), std::string::npos) << b.errors[0];
    EXPECT_THROW(c.validate(), std::invalid_argument) << k.key;
  }
  PcieConfig c;
  c.gen = 6;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = PcieConfig{};
  c.max_outstanding_reads = 0;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

// Credits: 0 is infinite; finite values between the spec's minimum
// advertisement (1 header, one max_payload TLP of posted/completion data)
// and 127 / 2047 (gen 1-3) or 16 times that with scaled flow control.
TEST(PcieConfigTest, FlowControlCreditsAreCheckedAgainstTheSpec) {
  {
    PcieConfig c;
    RecordingBinder b;
    c.bind(b);
    EXPECT_TRUE(b.errors.empty());
    for (const char* key : {"dllp_bytes", "ack_every", "update_fc_every", "posted_header",
                            "posted_data", "non_posted_header", "non_posted_data",
                            "completion_header", "completion_data", "processing"})
      EXPECT_TRUE(b.keys.count(key)) << key;
    EXPECT_EQ(b.keys["posted_data"].unit, "credits");
    EXPECT_EQ(c.endpoint.header_credits(FcType::completion), 0u) << "infinite by default";
    EXPECT_EQ(c.root_port.data_credits(FcType::posted), 2047u);
  }
  struct Case {
    uint64_t value;
    bool ok;
  };
  // posted_data: MPS 256 needs at least 16 credits.
  for (const Case& k :
       {Case{0, true}, Case{15, false}, Case{16, true}, Case{2047, true}, Case{2048, false}}) {
    PcieConfig c;
    RecordingBinder b;
    b.set["posted_data"] = k.value;  // both sides
    c.bind(b);
    EXPECT_EQ(b.errors.empty(), k.ok) << k.value;
    if (k.ok) {
      EXPECT_NO_THROW(c.validate()) << k.value;
    } else {
      EXPECT_THROW(c.validate(), std::invalid_argument) << k.value;
      EXPECT_NE(b.errors[0].find("posted_data"), std::string::npos) << b.errors[0];
    }
  }
  PcieConfig c;
  c.root_port.non_posted_header = 128;
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c.gen = 4;  // scaled flow control
  EXPECT_NO_THROW(c.validate());
  c.endpoint.completion_data = 8;  // below one 256 B TLP
  EXPECT_THROW(c.validate(), std::invalid_argument);
  c = PcieConfig{};
  c.max_payload = core::Bytes{512};  // the default 2047 still holds one
  c.endpoint.posted_data = 16;
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

}  // namespace
}  // namespace mprdma::pcie
