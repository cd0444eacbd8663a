// RoCEv2 CNP codec (vp/net/cnp.h): byte layout, round trip, ICRC against
// the bit-at-a-time reference, and the checks of parse_cnp().
#include "vp/net/cnp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "roce_test_util.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {
namespace {

// The Annex A17 pseudo packet of a CNP, built by hand: eight 0xFF bytes,
// then IP..reserved bytes with TOS, TTL, IP checksum, UDP checksum and BTH
// byte 4 as ones; its CRC-32 is the ICRC.
uint32_t reference_cnp_icrc(const std::vector<uint8_t>& frame) {
  std::vector<uint8_t> pseudo(8 + frame.size() - kIpOffset - 4, 0xFF);
  std::copy(frame.begin() + kIpOffset, frame.end() - 4, pseudo.begin() + 8);
  const size_t ip = 8;
  for (size_t off : {ip + 1, ip + 8, ip + 10, ip + 11, ip + 26, ip + 27, ip + 32})
    pseudo[off] = 0xFF;
  return test::bitwise_crc32(pseudo);
}

RoceFields cnp_fields() {
  RoceFields f;
  f.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x11}};
  f.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x22}};
  f.src_ip = 0x0A000002;
  f.dst_ip = 0x0A000001;
  f.dscp = 26;
  f.ecn = 0;
  f.ip_id = 0x1234;
  f.udp_sport = 0xC0DE;
  f.pkey = 0xFFFF;
  f.dest_qp = 0xABCDEF;
  f.psn = 0x123456;  // ignored: a CNP carries PSN 0
  f.ack_req = true;  // ignored
  return f;
}

TEST(Cnp, ByteLayout) {
  const PacketPtr p = build_cnp(cnp_fields());
  const auto& d = p->data;
  ASSERT_EQ(d.size(), 74u);
  ASSERT_EQ(d.size(), kCnpFrameBytes);
  EXPECT_EQ(d[kIpOffset + 1], 26 << 2);                         // DSCP, Not-ECT
  EXPECT_EQ(d[kIpOffset + 2] << 8 | d[kIpOffset + 3], 60);      // IP total length
  EXPECT_EQ(d[kUdpOffset + 2] << 8 | d[kUdpOffset + 3], 4791);  // RoCEv2 port
  EXPECT_EQ(d[kUdpOffset + 4] << 8 | d[kUdpOffset + 5], 40);    // UDP length
  const uint8_t* bth = d.data() + kBthOffset;
  EXPECT_EQ(bth[0], 0x81);
  EXPECT_EQ(bth[1], 0);
  EXPECT_EQ(bth[2] << 8 | bth[3], 0xFFFF);
  EXPECT_EQ(bth[4], 0x40);  // BECN
  EXPECT_EQ(bth[5], 0xAB);
  EXPECT_EQ(bth[6], 0xCD);
  EXPECT_EQ(bth[7], 0xEF);
  for (int i = 8; i < 12; ++i) EXPECT_EQ(bth[i], 0) << "BTH byte " << i;  // PSN 0
  for (size_t i = kExtOffset; i < kExtOffset + 16; ++i) EXPECT_EQ(d[i], 0) << "byte " << i;
  EXPECT_EQ(test::stored_icrc(d), reference_cnp_icrc(d));
}

TEST(Cnp, RoundTrip) {
  const RoceFields in = cnp_fields();
  const PacketPtr p = build_cnp(in);
  RoceFields out;
  ASSERT_EQ(parse_cnp(*p, out), ParseStatus::ok);
  EXPECT_EQ(static_cast<uint8_t>(out.opcode), kCnpOpcode);
  EXPECT_EQ(out.src_mac, in.src_mac);
  EXPECT_EQ(out.dst_mac, in.dst_mac);
  EXPECT_EQ(out.src_ip, in.src_ip);
  EXPECT_EQ(out.dst_ip, in.dst_ip);
  EXPECT_EQ(out.dscp, in.dscp);
  EXPECT_EQ(out.ecn, in.ecn);
  EXPECT_EQ(out.ip_id, in.ip_id);
  EXPECT_EQ(out.udp_sport, in.udp_sport);
  EXPECT_EQ(out.pkey, in.pkey);
  EXPECT_EQ(out.dest_qp, in.dest_qp);
  EXPECT_TRUE(out.becn);
  EXPECT_FALSE(out.fecn);
  EXPECT_EQ(out.psn, 0u);
}

TEST(Cnp, RcParserRejectsItAsBadOpcodeAfterTheIcrc) {
  const PacketPtr p = build_cnp(cnp_fields());
  RoceFields f;
  EXPECT_EQ(parse_roce(*p, f), ParseStatus::bad_opcode);  // ICRC passed, opcode not RC
}

TEST(Cnp, CeMarkingKeepsTheIcrcValid) {
  PacketPtr p = build_cnp(cnp_fields());
  set_ecn_ce(*p);
  RoceFields f;
  ASSERT_EQ(parse_cnp(*p, f), ParseStatus::ok);
  EXPECT_EQ(f.ecn, 3);
}

TEST(Cnp, ParseChecks) {
  const PacketPtr good = build_cnp(cnp_fields());
  RoceFields f;
  {
    Packet p = *good;
    p.data[kExtOffset + 3] ^= 1;  // a reserved byte: covered by the ICRC
    EXPECT_EQ(parse_cnp(p, f), ParseStatus::bad_icrc);
  }
  {
    Packet p = *good;
    p.data[kIpOffset + 12] ^= 1;  // source IP: the IP checksum fails first
    EXPECT_EQ(parse_cnp(p, f), ParseStatus::bad_ip_checksum);
  }
  {
    Packet p = *good;
    p.data.resize(60);
    EXPECT_EQ(parse_cnp(p, f), ParseStatus::truncated);
  }
  {
    Packet p = *good;
    p.data[kUdpOffset + 3] ^= 1;  // UDP destination port
    EXPECT_EQ(parse_cnp(p, f), ParseStatus::not_roce);
  }
  // An RC packet is not a CNP.
  RoceFields ack = cnp_fields();
  ack.opcode = Opcode::ACKNOWLEDGE;
  EXPECT_EQ(parse_cnp(*build_roce(ack, nullptr, 0), f), ParseStatus::bad_opcode);
  // Ethernet padding beyond the IP total length is ignored.
  Packet padded = *good;
  padded.data.resize(90, 0);
  EXPECT_EQ(parse_cnp(padded, f), ParseStatus::ok);
}

TEST(Cnp, RejectsOutOfRangeFields) {
  RoceFields f = cnp_fields();
  f.dest_qp = 1u << 24;
  EXPECT_THROW(build_cnp(f), std::invalid_argument);
  f = cnp_fields();
  f.dscp = 64;
  EXPECT_THROW(build_cnp(f), std::invalid_argument);
}

}  // namespace
}  // namespace mprdma::net
