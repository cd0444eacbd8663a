#include "vp/core/units.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace mprdma::core {
namespace {

TEST(Units, ParseDuration) {
  EXPECT_EQ(parse_duration("1.5us").ps, 1500000u);
  EXPECT_EQ(parse_duration("10 ns").ps, 10000u);
  EXPECT_EQ(parse_duration("7ps").ps, 7u);
  EXPECT_EQ(parse_duration("2ms").ps, 2000000000u);
  EXPECT_EQ(parse_duration("1s").ps, 1000000000000u);
  EXPECT_EQ(parse_duration("0").ps, 0u);
  EXPECT_EQ(parse_duration("0us").ps, 0u);
}

TEST(Units, ParseDurationErrors) {
  EXPECT_THROW(parse_duration("5"), UnitError);  // only 0 may be bare
  EXPECT_THROW(parse_duration("1h"), UnitError);
  EXPECT_THROW(parse_duration("us"), UnitError);
  EXPECT_THROW(parse_duration("-1us"), UnitError);
  try {
    parse_duration("5");
    FAIL();
  } catch (const UnitError& e) {
    EXPECT_EQ(std::string(e.what()), "'5' needs a time unit: ps, ns, us, ms or s (e.g. 1.5us)");
  }
}

TEST(Units, ParseBandwidthAndFrequency) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("40Gbps").bps, 40e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2.5 Tbps").bps, 2.5e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Mbps").bps, 100e6);
  EXPECT_THROW(parse_bandwidth("40"), UnitError);
  EXPECT_THROW(parse_bandwidth("40GB"), UnitError);
  EXPECT_THROW(parse_bandwidth("0Gbps"), UnitError);
  EXPECT_DOUBLE_EQ(parse_frequency("250MHz").hz, 250e6);
  EXPECT_DOUBLE_EQ(parse_frequency("1.5GHz").hz, 1.5e9);
  EXPECT_DOUBLE_EQ(parse_frequency("32kHz").hz, 32e3);
  EXPECT_THROW(parse_frequency("250"), UnitError);
  EXPECT_THROW(parse_frequency("0MHz"), UnitError);
  // Bounds: beyond them frames or cycles take less than a picosecond (or a
  // frame longer than a run can count).
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Tbps").bps, 100e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1bps").bps, 1.0);
  EXPECT_THROW(parse_bandwidth("100.1Tbps"), UnitError);
  EXPECT_THROW(parse_bandwidth("0.5bps"), UnitError);
  EXPECT_DOUBLE_EQ(parse_frequency("100GHz").hz, 100e9);
  EXPECT_THROW(parse_frequency("101GHz"), UnitError);
  EXPECT_THROW(parse_frequency("0.5Hz"), UnitError);
  try {
    parse_bandwidth("40000000000Gbps");
    FAIL();
  } catch (const UnitError& e) {
    EXPECT_EQ(std::string(e.what()),
              "'40000000000Gbps' is out of range: a rate is 1bps to 100Tbps");
  }
}

TEST(Units, ParseBytes) {
  EXPECT_EQ(parse_bytes("4KiB").n, 4096u);
  EXPECT_EQ(parse_bytes("4KB").n, 4000u);
  EXPECT_EQ(parse_bytes("1500").n, 1500u);
  EXPECT_EQ(parse_bytes("1500B").n, 1500u);
  EXPECT_EQ(parse_bytes("1.5KiB").n, 1536u);
  EXPECT_EQ(parse_bytes("2GiB").n, 2147483648u);
  EXPECT_THROW(parse_bytes("1.3B"), UnitError);
  EXPECT_THROW(parse_bytes("4kib"), UnitError);
  EXPECT_THROW(parse_bytes("lots"), UnitError);
}

TEST(Units, CanonicalText) {
  EXPECT_EQ(to_string(Duration{0}), "0s");
  EXPECT_EQ(to_string(Duration{999}), "999ps");
  EXPECT_EQ(to_string(Duration{1500}), "1.5ns");
  EXPECT_EQ(to_string(Duration{1500000}), "1.5us");
  EXPECT_EQ(to_string(Duration{1000000000000}), "1s");
  EXPECT_EQ(to_string(Duration{1001}), "1.001ns");
  EXPECT_EQ(to_string(Duration{2500000000001}), "2500000000.001ns");
  EXPECT_EQ(to_string(Bandwidth::gbps(40)), "40Gbps");
  EXPECT_EQ(to_string(Bandwidth{2.5e12}), "2.5Tbps");
  EXPECT_EQ(to_string(Frequency::mhz(312.5)), "312.5MHz");
  EXPECT_EQ(to_string(Bytes{4096}), "4KiB");
  EXPECT_EQ(to_string(Bytes{1500}), "1500B");
  EXPECT_EQ(to_string(Bytes{3ull << 30}), "3GiB");
}

TEST(Units, CanonicalTextRoundTrips) {
  for (uint64_t ps : {1ull, 999ull, 1000ull, 1001ull, 1234567ull, 4000ull, 999999999999ull,
                      2500000000001ull, 123456789012345ull, 3600000000000000ull}) {
    EXPECT_EQ(parse_duration(to_string(Duration{ps})).ps, ps) << to_string(Duration{ps});
  }
  // Pseudo-random durations up to ~2.6 hours (2^53 ps).
  uint64_t x = 12345;
  for (int i = 0; i < 2000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t ps = (x >> 11) >> (i % 40);
    EXPECT_EQ(parse_duration(to_string(Duration{ps})).ps, ps) << to_string(Duration{ps});
  }
  for (double bps : {1.0, 1e3, 25e9, 40e9, 100e9, 400e9, 1.6e12, 12.5e6})
    EXPECT_EQ(parse_bandwidth(to_string(Bandwidth{bps})).bps, bps);
  for (double hz : {1.0, 32e3, 156.25e6, 250e6, 1e9, 3.2e9})
    EXPECT_EQ(parse_frequency(to_string(Frequency{hz})).hz, hz);
  for (uint64_t n : {0ull, 1ull, 1023ull, 1024ull, 1500ull, 65536ull, 9216ull, 5ull << 30})
    EXPECT_EQ(parse_bytes(to_string(Bytes{n})).n, n);
}

TEST(Units, Helpers) {
  EXPECT_EQ(Duration::from_ns(1.5).ps, 1500u);
  EXPECT_EQ(Duration::from_us(2).ps, 2000000u);
  EXPECT_DOUBLE_EQ(Duration{2500}.ns(), 2.5);
  EXPECT_EQ(Frequency::mhz(250).period_ps(), 4000u);
  // 1500 B at 100 Gbps = 120 ns; rounded up when not exact.
  EXPECT_EQ(Bandwidth::gbps(100).serialize_ps(1500), 120000u);
  EXPECT_EQ(Bandwidth::gbps(3).serialize_ps(1), 2667u);
  EXPECT_THROW(Bandwidth{}.serialize_ps(1), std::logic_error);
}

// Whole picoseconds per byte take an integer product, the rest a rounded-up
// division: both agree with 8e12 * bytes / bps to the picosecond.
TEST(Units, SerialisationIsExactOrRoundedUp) {
  for (const double gbps : {1.0, 10.0, 25.0, 40.0, 100.0, 200.0, 400.0, 0.5, 3.0, 56.0, 12.5})
    for (const uint64_t bytes : {0ull, 1ull, 64ull, 1130ull, 9000ull, 1ull << 30}) {
      const long double exact = bytes * 8e12L / (gbps * 1e9L);
      const uint64_t want = static_cast<uint64_t>(std::ceil(exact - 1e-9L));
      EXPECT_EQ(Bandwidth::gbps(gbps).serialize_ps(bytes), want) << gbps << " Gb/s, " << bytes;
    }
  EXPECT_EQ(Bandwidth::gbps(40).serialize_ps(1130), 226000u);  // 200 ps per byte
  EXPECT_EQ(Bandwidth::gbps(56).serialize_ps(7), 1000u);       // 142.857 ps per byte
  EXPECT_EQ(Bandwidth::gbps(56).serialize_ps(1), 143u);
}

}  // namespace
}  // namespace mprdma::core
