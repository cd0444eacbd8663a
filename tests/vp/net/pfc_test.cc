// PFC (802.1Qbb) PAUSE frames: the exact byte layout, building and parsing
// round trips, what parse_pfc() rejects, and pause times.
#include "vp/net/pfc.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "vp/core/units.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {
namespace {

const MacAddr kSrc{{0x02, 0xAB, 0xCD, 0xEF, 0x01, 0x23}};

TEST(Pfc, ByteLayoutIsThe8021QbbFrame) {
  const std::array<uint16_t, 8> q = {0x0102, 0, 0, 0xFFFF, 0, 0, 0, 0x0708};
  const PacketPtr p = build_pfc(kSrc, 0x89, q);  // classes 0, 3 and 7
  // Written out byte by byte from 802.1Qbb clause 36 / 802.3 annex 31D.
  const std::vector<uint8_t> want = {
      0x01, 0x80, 0xC2, 0x00, 0x00, 0x01,              // reserved multicast destination
      0x02, 0xAB, 0xCD, 0xEF, 0x01, 0x23,              // source
      0x88, 0x08,                                      // MAC Control
      0x01, 0x01,                                      // PFC opcode
      0x00, 0x89,                                      // class-enable vector
      0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF,  // time[0..3]
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x08,  // time[4..7]
  };
  ASSERT_EQ(p->data.size(), 60u);  // padded to the minimum frame
  EXPECT_EQ(std::vector<uint8_t>(p->data.begin(), p->data.begin() + 34), want);
  for (size_t i = 34; i < 60; ++i) EXPECT_EQ(p->data[i], 0) << i;
  EXPECT_EQ(p->wire_bytes(), 84u);  // 60 + FCS + preamble + IFG
}

TEST(Pfc, RoundTrip) {
  std::array<uint16_t, 8> q{};
  for (int i = 0; i < 8; ++i) q[i] = static_cast<uint16_t>(1000 * i + 7);
  for (uint16_t mask : {uint16_t{0}, uint16_t{1}, uint16_t{0x08}, uint16_t{0xFF}, uint16_t{0xA5}}) {
    const PacketPtr p = build_pfc(kSrc, mask, q);
    EXPECT_TRUE(is_mac_control(*p));
    const auto f = parse_pfc(*p);
    ASSERT_TRUE(f.has_value()) << mask;
    EXPECT_EQ(f->src_mac, kSrc);
    EXPECT_EQ(f->class_mask, mask);
    EXPECT_EQ(f->quanta, q);
  }
}

TEST(Pfc, ParseRejectsWhatIsNotPfc) {
  const std::array<uint16_t, 8> q = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<uint8_t> good = build_pfc(kSrc, 0x08, q)->data;
  ASSERT_TRUE(parse_pfc(good.data(), good.size()).has_value());
  // 34 bytes (no padding) is enough; 33 is not.
  EXPECT_TRUE(parse_pfc(good.data(), 34).has_value());
  EXPECT_FALSE(parse_pfc(good.data(), 33).has_value());
  EXPECT_FALSE(parse_pfc(good.data(), 0).has_value());

  auto bad = good;
  bad[14] = 0x00;  // opcode 0x0001: 802.3x global PAUSE
  EXPECT_FALSE(parse_pfc(bad.data(), bad.size()).has_value());
  EXPECT_TRUE(is_mac_control(bad.data(), bad.size()));  // still MAC Control
  bad = good;
  bad[13] = 0x00;  // ethertype 0x8800
  EXPECT_FALSE(parse_pfc(bad.data(), bad.size()).has_value());
  EXPECT_FALSE(is_mac_control(bad.data(), bad.size()));
  bad = good;
  bad[5] = 0x02;  // another destination
  EXPECT_FALSE(parse_pfc(bad.data(), bad.size()).has_value());

  // A RoCE frame is neither.
  RoceFields f;
  f.opcode = Opcode::SEND_ONLY;
  const PacketPtr roce = build_roce(f, nullptr, 0);
  EXPECT_FALSE(is_mac_control(*roce));
  EXPECT_FALSE(parse_pfc(*roce).has_value());
}

TEST(Pfc, ReservedClassBitsAreRejectedWhenBuilding) {
  EXPECT_THROW(build_pfc(kSrc, 0x100, {}), std::invalid_argument);
  // ... but reported as received when parsing, for the receiver to judge.
  auto d = build_pfc(kSrc, 0x01, {})->data;
  d[16] = 0x01;
  const auto f = parse_pfc(d.data(), d.size());
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->class_mask, 0x0101);
}

TEST(Pfc, PauseTimeIsQuantaTimes512BitTimes) {
  // One quantum = 512 bits: 12.8 ns at 40 Gbps, 51.2 ns at 10 Gbps.
  EXPECT_EQ(pause_ps(1, core::Bandwidth::gbps(40)), 12800u);
  EXPECT_EQ(pause_ps(1, core::Bandwidth::gbps(10)), 51200u);
  EXPECT_EQ(pause_ps(0, core::Bandwidth::gbps(40)), 0u);
  // The maximum at 40 Gbps: 65535 * 12.8 ns = 838.848 us.
  EXPECT_EQ(pause_ps(0xFFFF, core::Bandwidth::gbps(40)), 838848000u);
  // 25 Gbps: 512 / 25e9 = 20.48 ns per quantum.
  EXPECT_EQ(pause_ps(100, core::Bandwidth::gbps(25)), 2048000u);
  // Rounded up, never down: 512 bits at 3 Gbps = 170666.67 ps.
  EXPECT_EQ(pause_ps(1, core::Bandwidth::gbps(3)), 170667u);
}

}  // namespace
}  // namespace mprdma::net
