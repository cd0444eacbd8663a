// RoCEv2 codec: byte layout, round trips, validation, ICRC against external
// reference values.
#include "vp/net/roce_codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "roce_test_util.h"
#include "vp/net/icrc.h"
#include "vp/net/packet.h"

namespace mprdma::net {
namespace {

using test::all_opcodes;
using test::full_fields;
using test::reference_icrc;
using test::stored_icrc;

std::vector<uint8_t> hex(const char* text) {
  std::vector<uint8_t> out;
  int nibbles = 0;
  uint8_t cur = 0;
  for (const char* p = text; *p; ++p) {
    int v;
    if (*p >= '0' && *p <= '9')
      v = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      v = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      v = *p - 'A' + 10;
    else
      continue;
    cur = static_cast<uint8_t>(cur << 4 | v);
    if (++nibbles % 2 == 0) out.push_back(cur);
  }
  return out;
}

std::vector<uint8_t> payload_of(size_t len) {
  std::vector<uint8_t> p(len);
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(i * 7 + 3);
  return p;
}

uint16_t be16(const std::vector<uint8_t>& d, size_t at) {
  return static_cast<uint16_t>(d[at] << 8 | d[at + 1]);
}

// What parse_roce must return for a packet built from `f`: the fields the
// opcode carries, defaults elsewhere.
RoceFields expected_after_parse(const RoceFields& f) {
  RoceFields e = f;
  const RoceFields d;
  if (!has_reth(f.opcode)) {
    e.reth_va = d.reth_va;
    e.reth_rkey = d.reth_rkey;
    e.reth_dma_len = d.reth_dma_len;
  }
  if (!has_aeth(f.opcode)) {
    e.aeth_syndrome = d.aeth_syndrome;
    e.aeth_msn = d.aeth_msn;
  }
  if (!has_atomic_eth(f.opcode)) {
    e.atomic_va = d.atomic_va;
    e.atomic_rkey = d.atomic_rkey;
    e.atomic_swap_add = d.atomic_swap_add;
    e.atomic_compare = d.atomic_compare;
  }
  if (!has_atomic_ack_eth(f.opcode)) e.atomic_ack_orig = d.atomic_ack_orig;
  if (!has_imm(f.opcode)) e.imm = d.imm;
  return e;
}

void expect_fields_eq(const RoceFields& a, const RoceFields& b) {
  EXPECT_TRUE(a.src_mac == b.src_mac);
  EXPECT_TRUE(a.dst_mac == b.dst_mac);
  EXPECT_EQ(a.src_ip, b.src_ip);
  EXPECT_EQ(a.dst_ip, b.dst_ip);
  EXPECT_EQ(a.dscp, b.dscp);
  EXPECT_EQ(a.ecn, b.ecn);
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(a.ip_id, b.ip_id);
  EXPECT_EQ(a.udp_sport, b.udp_sport);
  EXPECT_EQ(a.opcode, b.opcode);
  EXPECT_EQ(a.solicited, b.solicited);
  EXPECT_EQ(a.mig_req, b.mig_req);
  EXPECT_EQ(a.ack_req, b.ack_req);
  EXPECT_EQ(a.fecn, b.fecn);
  EXPECT_EQ(a.becn, b.becn);
  EXPECT_EQ(a.pkey, b.pkey);
  EXPECT_EQ(a.dest_qp, b.dest_qp);
  EXPECT_EQ(a.psn, b.psn);
  EXPECT_EQ(a.reth_va, b.reth_va);
  EXPECT_EQ(a.reth_rkey, b.reth_rkey);
  EXPECT_EQ(a.reth_dma_len, b.reth_dma_len);
  EXPECT_EQ(a.aeth_syndrome, b.aeth_syndrome);
  EXPECT_EQ(a.aeth_msn, b.aeth_msn);
  EXPECT_EQ(a.atomic_va, b.atomic_va);
  EXPECT_EQ(a.atomic_rkey, b.atomic_rkey);
  EXPECT_EQ(a.atomic_swap_add, b.atomic_swap_add);
  EXPECT_EQ(a.atomic_compare, b.atomic_compare);
  EXPECT_EQ(a.atomic_ack_orig, b.atomic_ack_orig);
  EXPECT_EQ(a.imm, b.imm);
}

// Recomputes the IP checksum and the ICRC after a test edits a frame, so
// that only the edit under test can make parsing fail.
void reseal(std::vector<uint8_t>& f) {
  f[24] = f[25] = 0;
  const uint16_t c = ipv4_checksum(&f[14], 20);
  f[24] = static_cast<uint8_t>(c >> 8);
  f[25] = static_cast<uint8_t>(c);
  const size_t ip_total = be16(f, 16);
  store_icrc(&f[14 + ip_total - 4], roce_icrc(&f[14], ip_total - 4));
}

void set_lengths(std::vector<uint8_t>& f) {
  const size_t ip_total = f.size() - 14;
  f[16] = static_cast<uint8_t>(ip_total >> 8);
  f[17] = static_cast<uint8_t>(ip_total);
  f[38] = static_cast<uint8_t>((ip_total - 20) >> 8);
  f[39] = static_cast<uint8_t>(ip_total - 20);
}

ParseStatus parse(const std::vector<uint8_t>& f) {
  RoceFields out;
  return parse_roce(f.data(), f.size(), out);
}

std::vector<uint8_t> build(const RoceFields& f, size_t payload_len = 0) {
  const auto pay = payload_of(payload_len);
  return build_roce(f, pay.data(), pay.size())->data;
}

// ---------------------------------------------------------------------------
// CRC and ICRC against values not produced by this code.

TEST(Crc32, StandardCheckValue) {
  // The CRC-32 "check" value of the ASCII string 123456789 (catalogued for
  // CRC-32/ISO-HDLC, the Ethernet and zlib CRC).
  const char* s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(s), 9), 0xCBF43926u);
}

TEST(Crc32, SlicedMatchesBitwiseForAllLengthsAndAlignments) {
  std::vector<uint8_t> buf(300);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 131 + 17);
  for (size_t start = 0; start < 8; ++start) {
    for (size_t len = 0; len + start <= 200; ++len) {
      std::vector<uint8_t> part(buf.begin() + start, buf.begin() + start + len);
      ASSERT_EQ(crc32(buf.data() + start, len), test::bitwise_crc32(part))
          << "start " << start << " len " << len;
    }
  }
}

TEST(RoceIcrc, SeedMatchesLinuxRxeConstant) {
  // Linux drivers/infiniband/sw/rxe/rxe_icrc.c starts the ICRC register at
  // 0xdebb20e3, documented there as the CRC of the 8 bytes of 0xFF.
  EXPECT_EQ(icrc_seed(), 0xdebb20e3u);
}

TEST(RoceIcrc, MatchesConnectX4LxCapture) {
  // A RoCEv2 CNP frame captured on a Mellanox ConnectX-4 Lx, published in
  // Scapy's regression tests (secdev/scapy, test/contrib/roce.uts, "RoCE CNP
  // captured on ConnectX-4 Lx"): the ICRC was computed by the NIC hardware.
  // Its IP TOS (0xc2), TTL and header checksum are non-trivial, so the
  // masking is exercised; BTH byte 4 is 0x40 (BECN set).
  const auto frame =
      hex("e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2"
          "003c 718c 4000 4011 9161 0a00 1101 0a00"
          "1201 0000 12b7 0028 0000 8100 ffff 4000"
          "0118 0000 0000 0000 0000 0000 0000 0000"
          "0000 0000 0000 82fd 002a");
  ASSERT_EQ(frame.size(), 74u);
  EXPECT_EQ(roce_icrc(&frame[14], 60 - 4), 0x2a00fd82u);
  EXPECT_EQ(load_icrc(&frame[70]), 0x2a00fd82u);
  EXPECT_EQ(reference_icrc(frame), 0x2a00fd82u);
  // The hardware's IP header checksum verifies too.
  EXPECT_EQ(ipv4_checksum(&frame[14], 20), 0);
  // Opcode 0x81 (CNP) is not an RC opcode: the ICRC passes, the opcode not.
  EXPECT_EQ(parse(frame), ParseStatus::bad_opcode);
}

TEST(RoceIcrc, MatchesScapyUcExample) {
  // Scapy's RoCE example (same file, "RoCE layer"): a UC SEND_ONLY with
  // padcount 2, expected ICRC field 0x78f353f3 when read big-endian, i.e.
  // bytes 78 f3 53 f3 on the wire. Computed by Scapy's zlib-based code.
  const auto frame =
      hex("248a 07a8 fa22 248a 07a8 fa22 0800 4501"
          "0040 0478 4000 4011 b4d5 c0a8 0007 c0a8"
          "0007 c000 12b7 002c aca2 2460 ffff 0000"
          "00d3 00cf 1710 4630 818b e289 35d9 0e9a"
          "9550 5401 be88 5e50 0000 78f3 53f3");
  ASSERT_EQ(frame.size(), 78u);
  EXPECT_EQ(roce_icrc(&frame[14], 64 - 4), 0xf353f378u);
  EXPECT_EQ(reference_icrc(frame), 0xf353f378u);
  EXPECT_EQ(ipv4_checksum(&frame[14], 20), 0);
  // UC SEND_ONLY (0x24) parses: destination QP 0xd3, PSN 0xcf1710, 18
  // bytes of payload behind the pad count 2.
  RoceFields f;
  ASSERT_EQ(parse_roce(frame.data(), frame.size(), f), ParseStatus::ok);
  EXPECT_EQ(f.opcode, Opcode::UC_SEND_ONLY);
  EXPECT_EQ(f.dest_qp, 0xd3u);
  EXPECT_EQ(f.psn, 0xcf1710u);
  EXPECT_EQ(f.payload_len, 18u);
}

TEST(RoceIcrc, BuiltPacketsMatchIndependentReference) {
  for (Opcode op : all_opcodes()) {
    for (size_t len : {0, 1, 2, 3, 4, 5, 61, 1024}) {
      if (len && !has_payload(op)) continue;
      const auto f = build(full_fields(op), len);
      EXPECT_EQ(stored_icrc(f), reference_icrc(f)) << to_string(op) << " len " << len;
    }
  }
}

TEST(Ipv4Checksum, KnownHeader) {
  // The ConnectX-4 Lx header above with its checksum field zeroed.
  auto h = hex("45c2 003c 718c 4000 4011 0000 0a00 1101 0a00 1201");
  EXPECT_EQ(ipv4_checksum(h.data(), h.size()), 0x9161);
  // Odd length pads with a zero byte.
  const uint8_t odd[3] = {0x01, 0x02, 0x03};
  EXPECT_EQ(ipv4_checksum(odd, 3), static_cast<uint16_t>(~(0x0102 + 0x0300)));
}

// ---------------------------------------------------------------------------
// Opcode traits and header sizes.

TEST(RoceOpcode, TraitsFollowIbaRcTable) {
  // Extended header bytes per opcode (IBA table 38, RC rows).
  const std::map<Opcode, size_t> ext = {
      {Opcode::SEND_FIRST, 0},
      {Opcode::SEND_MIDDLE, 0},
      {Opcode::SEND_LAST, 0},
      {Opcode::SEND_LAST_WITH_IMMEDIATE, 4},
      {Opcode::SEND_ONLY, 0},
      {Opcode::SEND_ONLY_WITH_IMMEDIATE, 4},
      {Opcode::RDMA_WRITE_FIRST, 16},
      {Opcode::RDMA_WRITE_MIDDLE, 0},
      {Opcode::RDMA_WRITE_LAST, 0},
      {Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE, 4},
      {Opcode::RDMA_WRITE_ONLY, 16},
      {Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE, 20},
      {Opcode::RDMA_READ_REQUEST, 16},
      {Opcode::RDMA_READ_RESPONSE_FIRST, 4},
      {Opcode::RDMA_READ_RESPONSE_MIDDLE, 0},
      {Opcode::RDMA_READ_RESPONSE_LAST, 4},
      {Opcode::RDMA_READ_RESPONSE_ONLY, 4},
      {Opcode::ACKNOWLEDGE, 4},
      {Opcode::ATOMIC_ACKNOWLEDGE, 12},
      {Opcode::COMPARE_SWAP, 28},
      {Opcode::FETCH_ADD, 28},
  };
  ASSERT_EQ(ext.size(), static_cast<size_t>(kNumOpcodes));
  for (Opcode op : all_opcodes()) {
    SCOPED_TRACE(to_string(op));
    EXPECT_EQ(ext_header_bytes(op), ext.at(op));
    EXPECT_EQ(roce_overhead_bytes(op), 14u + 20 + 8 + 12 + ext.at(op) + 4);
    EXPECT_EQ(is_first(op) + is_middle(op) + is_last(op) + is_only(op), 1);
    EXPECT_NE(is_request(op), is_response(op));
    const int v = static_cast<int>(op);
    const bool payload = v <= 0x0B || (v >= 0x0D && v <= 0x10);
    EXPECT_EQ(has_payload(op), payload);
    EXPECT_EQ(is_response(op), v >= 0x0D && v <= 0x12);
  }
  EXPECT_TRUE(has_reth(Opcode::RDMA_WRITE_FIRST));
  EXPECT_FALSE(has_reth(Opcode::RDMA_WRITE_MIDDLE));
  EXPECT_TRUE(has_aeth(Opcode::RDMA_READ_RESPONSE_LAST));
  EXPECT_FALSE(has_aeth(Opcode::RDMA_READ_RESPONSE_MIDDLE));
  EXPECT_TRUE(has_imm(Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE));
  EXPECT_TRUE(has_atomic_eth(Opcode::FETCH_ADD));
  EXPECT_TRUE(has_atomic_ack_eth(Opcode::ATOMIC_ACKNOWLEDGE));
  EXPECT_TRUE(is_only(Opcode::RDMA_READ_REQUEST));
  EXPECT_TRUE(is_only(Opcode::ACKNOWLEDGE));
  EXPECT_TRUE(is_last(Opcode::SEND_LAST_WITH_IMMEDIATE));
  EXPECT_TRUE(is_first(Opcode::RDMA_READ_RESPONSE_FIRST));
  EXPECT_STREQ(to_string(Opcode::RDMA_READ_RESPONSE_ONLY), "RDMA_READ_RESPONSE_ONLY");
  EXPECT_STREQ(to_string(static_cast<Opcode>(0x15)), "INVALID");
  EXPECT_FALSE(has_payload(static_cast<Opcode>(0x81)));
}

TEST(RoceBuild, HeaderBytesAtTheirOffsets) {
  RoceFields f = full_fields(Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0x000102);
  const auto d = build(f, 5);
  // 14 + 20 + 8 + 12 + 16 (RETH) + 4 (ImmDt) + 5 payload + 3 pad + 4 ICRC.
  ASSERT_EQ(d.size(), 86u);
  EXPECT_EQ(d.size(), roce_frame_bytes(f.opcode, 5));
  // Ethernet.
  EXPECT_EQ(d[0], 0x02);
  EXPECT_EQ(d[5], 0xAA);
  EXPECT_EQ(d[6], 0x02);
  EXPECT_EQ(d[11], 0x55);
  EXPECT_EQ(be16(d, 12), 0x0800);
  // IPv4.
  EXPECT_EQ(d[14], 0x45);
  EXPECT_EQ(d[15], 26 << 2 | 2);    // DSCP 26, ECT(0)
  EXPECT_EQ(be16(d, 16), 86 - 14);  // total length
  EXPECT_EQ(be16(d, 18), 0x1357);
  EXPECT_EQ(be16(d, 20), 0x4000);  // DF, offset 0
  EXPECT_EQ(d[22], 37);
  EXPECT_EQ(d[23], 17);
  EXPECT_EQ(ipv4_checksum(&d[14], 20), 0);
  EXPECT_EQ(be16(d, 26), 0x0A00);
  EXPECT_EQ(be16(d, 28), 0x0001);
  EXPECT_EQ(be16(d, 30), 0x0A00);
  EXPECT_EQ(be16(d, 32), 0x0102);
  // UDP.
  EXPECT_EQ(be16(d, 34), 0xC123);
  EXPECT_EQ(be16(d, 36), 4791);
  EXPECT_EQ(be16(d, 38), 86 - 34);
  EXPECT_EQ(be16(d, 40), 0);
  // BTH: opcode, SE=1 M=0 PadCnt=3 TVer=0, P_Key, FECN|BECN, QPN, A, PSN.
  EXPECT_EQ(d[42], 0x0B);
  EXPECT_EQ(d[43], 0x80 | 3 << 4);
  EXPECT_EQ(be16(d, 44), 0x8001);
  EXPECT_EQ(d[46], 0xC0);
  EXPECT_EQ(d[47], 0x12);
  EXPECT_EQ(d[48], 0x34);
  EXPECT_EQ(d[49], 0x56);
  EXPECT_EQ(d[50], 0x80);
  EXPECT_EQ(d[51], 0x00);
  EXPECT_EQ(d[52], 0x01);
  EXPECT_EQ(d[53], 0x02);
  // RETH then ImmDt.
  EXPECT_EQ(d[54], 0x11);
  EXPECT_EQ(d[61], 0x88);
  EXPECT_EQ(d[62], 0x99);
  EXPECT_EQ(d[65], 0xCC);
  EXPECT_EQ(be16(d, 66), 0x0001);
  EXPECT_EQ(be16(d, 68), 0x2345);
  EXPECT_EQ(d[70], 0xDE);
  EXPECT_EQ(d[73], 0xEF);
  // Payload, then three zero pad bytes.
  EXPECT_EQ(d[74], payload_of(5)[0]);
  EXPECT_EQ(d[78], payload_of(5)[4]);
  EXPECT_EQ(d[79], 0);
  EXPECT_EQ(d[80], 0);
  EXPECT_EQ(d[81], 0);
}

TEST(RoceBuild, AtomicAndAckHeaderOrder) {
  const auto cs = build(full_fields(Opcode::COMPARE_SWAP));
  ASSERT_EQ(cs.size(), 86u);
  EXPECT_EQ(cs[54], 0x01);  // VA
  EXPECT_EQ(cs[62], 0x0A);  // R_Key
  EXPECT_EQ(cs[66], 0xF0);  // swap/add data
  EXPECT_EQ(cs[74], 0x0F);  // compare data
  const auto aa = build(full_fields(Opcode::ATOMIC_ACKNOWLEDGE));
  ASSERT_EQ(aa.size(), 70u);
  EXPECT_EQ(aa[54], 0x62);  // AETH syndrome first
  EXPECT_EQ(aa[55], 0xFE);
  EXPECT_EQ(aa[58], 0x77);  // then AtomicAckETH
  EXPECT_EQ(aa[65], 0x00);
}

TEST(RoceBuild, PadCountAndFrameSizeForEveryLength) {
  for (size_t len = 0; len <= 12; ++len) {
    const auto d = build(full_fields(Opcode::SEND_ONLY), len);
    const size_t pad = (4 - len % 4) % 4;
    EXPECT_EQ(pad_bytes(len), pad);
    EXPECT_EQ(d.size(), 58 + len + pad);
    EXPECT_EQ((d[43] >> 4) & 3, static_cast<int>(pad));
    EXPECT_EQ((d.size() - 58) % 4, 0u);
  }
}

TEST(RoceBuild, RejectsBadInput) {
  const auto pay = payload_of(4);
  EXPECT_THROW(build_roce(full_fields(Opcode::ACKNOWLEDGE), pay.data(), 4), std::invalid_argument);
  EXPECT_THROW(build_roce(full_fields(Opcode::RDMA_READ_REQUEST), pay.data(), 4),
               std::invalid_argument);
  EXPECT_THROW(build_roce(full_fields(Opcode::SEND_ONLY), nullptr, 4), std::invalid_argument);
  RoceFields f = full_fields(Opcode::SEND_ONLY);
  f.psn = 1u << 24;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  f = full_fields(Opcode::SEND_ONLY);
  f.dest_qp = 1u << 24;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  f = full_fields(Opcode::SEND_ONLY);
  f.ecn = 4;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  f = full_fields(Opcode::SEND_ONLY);
  f.dscp = 64;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  f = full_fields(Opcode::ACKNOWLEDGE);
  f.aeth_msn = 1u << 24;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  f.opcode = static_cast<Opcode>(0x15);
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
  const std::vector<uint8_t> huge(65536);
  EXPECT_THROW(build_roce(full_fields(Opcode::SEND_ONLY), huge.data(), huge.size()),
               std::invalid_argument);
}

TEST(RocePacket, WireBytesAddFramingAndMinimumFrame) {
  Packet p;
  p.data.resize(1000);
  EXPECT_EQ(p.wire_bytes(), 1000u + 4 + 8 + 12);
  // A zero-length SEND_ONLY is 58 bytes; the MAC pads it to 60.
  const auto small = build_roce(full_fields(Opcode::SEND_ONLY), nullptr, 0);
  EXPECT_EQ(small->data.size(), 58u);
  EXPECT_EQ(small->wire_bytes(), 60u + 24);
}

// ---------------------------------------------------------------------------
// Parsing.

TEST(RoceParse, RoundTripEveryOpcodeAndPayloadLength) {
  uint32_t psn = 0xFFFFF0;  // runs across the 24-bit wrap
  for (Opcode op : all_opcodes()) {
    for (size_t len : {0, 1, 2, 3, 4, 7, 256, 4096}) {
      if (len && !has_payload(op)) continue;
      SCOPED_TRACE(std::string(to_string(op)) + " len " + std::to_string(len));
      const RoceFields f = full_fields(op, psn);
      psn = (psn + 1) & 0xFFFFFF;
      const auto pay = payload_of(len);
      const auto pkt = build_roce(f, pay.data(), pay.size());
      RoceFields out;
      ASSERT_EQ(parse_roce(*pkt, out), ParseStatus::ok);
      expect_fields_eq(out, expected_after_parse(f));
      EXPECT_EQ(out.payload_offset, 54 + ext_header_bytes(op));
      EXPECT_EQ(out.payload_len, len);
      ASSERT_LE(out.payload_offset + out.payload_len, pkt->data.size());
      EXPECT_TRUE(std::equal(pay.begin(), pay.end(), pkt->data.begin() + out.payload_offset));
    }
  }
}

TEST(RoceParse, DefaultsRoundTrip) {
  RoceFields f;  // an ACK with every default
  const auto pkt = build_roce(f, nullptr, 0);
  RoceFields out;
  out.psn = 99;  // parse must reset what it does not fill
  out.imm = 99;
  ASSERT_EQ(parse_roce(*pkt, out), ParseStatus::ok);
  expect_fields_eq(out, f);
}

TEST(RoceParse, EveryTruncationIsReported) {
  const auto d = build(full_fields(Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE), 5);
  for (size_t n = 0; n < d.size(); ++n) {
    RoceFields out;
    EXPECT_EQ(parse_roce(d.data(), n, out), ParseStatus::truncated) << "prefix " << n;
  }
}

TEST(RoceParse, TrailingEthernetPaddingIsIgnored) {
  auto d = build(full_fields(Opcode::SEND_ONLY), 0);
  ASSERT_EQ(d.size(), 58u);
  d.resize(60, 0);
  RoceFields out;
  ASSERT_EQ(parse_roce(d.data(), d.size(), out), ParseStatus::ok);
  EXPECT_EQ(out.payload_len, 0u);
}

TEST(RoceParse, FlippedPayloadOrIcrcBitIsBadIcrc) {
  const auto good = build(full_fields(Opcode::RDMA_WRITE_FIRST), 64);
  RoceFields out;
  ASSERT_EQ(parse_roce(good.data(), good.size(), out), ParseStatus::ok);
  for (size_t i = out.payload_offset; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; bit += 3) {
      auto d = good;
      d[i] ^= static_cast<uint8_t>(1 << bit);
      EXPECT_EQ(parse(d), ParseStatus::bad_icrc) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(RoceParse, FlippedInvariantHeaderBitIsBadIcrc) {
  const auto good = build(full_fields(Opcode::RDMA_WRITE_FIRST), 64);
  // UDP source port, BTH opcode-adjacent flags, P_Key, QPN, PSN, RETH.
  for (size_t i : {34, 35, 43, 44, 47, 51, 53, 54, 69}) {
    auto d = good;
    d[i] ^= 0x01;
    EXPECT_EQ(parse(d), ParseStatus::bad_icrc) << "byte " << i;
  }
}

TEST(RoceParse, FlippedIpByteIsBadIpChecksum) {
  const auto good = build(full_fields(Opcode::SEND_ONLY), 16);
  // Every IPv4 header byte except version/IHL, protocol and fragment flags,
  // whose corruption is caught as something more specific first or which
  // change what the packet is.
  for (size_t i : {15, 17, 18, 19, 22, 24, 25, 26, 29, 30, 33}) {
    auto d = good;
    d[i] ^= 0x04;
    EXPECT_EQ(parse(d), ParseStatus::bad_ip_checksum) << "byte " << i;
  }
}

TEST(RoceParse, MaskedFieldsMayChangeWithoutBreakingIcrc) {
  const auto good = build(full_fields(Opcode::SEND_ONLY), 16);
  {
    auto d = good;  // a router decrements TTL and rewrites DSCP/ECN
    d[22] -= 1;
    d[15] = 0x03;
    d[24] = d[25] = 0;
    const uint16_t c = ipv4_checksum(&d[14], 20);
    d[24] = static_cast<uint8_t>(c >> 8);
    d[25] = static_cast<uint8_t>(c);
    RoceFields out;
    ASSERT_EQ(parse_roce(d.data(), d.size(), out), ParseStatus::ok);
    EXPECT_EQ(out.ttl, 36);
    EXPECT_EQ(out.ecn, 3);
    EXPECT_EQ(out.dscp, 0);
  }
  {
    auto d = good;  // a UDP checksum someone filled in
    d[40] = 0x12;
    d[41] = 0x34;
    EXPECT_EQ(parse(d), ParseStatus::ok);
  }
  {
    auto d = good;  // FECN/BECN cleared by a switch
    d[46] = 0x00;
    RoceFields out;
    ASSERT_EQ(parse_roce(d.data(), d.size(), out), ParseStatus::ok);
    EXPECT_FALSE(out.fecn);
    EXPECT_FALSE(out.becn);
  }
}

TEST(RoceParse, NotIpv4AndNotRoce) {
  const auto good = build(full_fields(Opcode::SEND_ONLY), 8);
  {
    auto d = good;
    d[12] = 0x86;  // IPv6 ethertype
    d[13] = 0xDD;
    EXPECT_EQ(parse(d), ParseStatus::not_ipv4);
  }
  {
    auto d = good;
    d[14] = 0x65;  // version 6 in an IPv4 ethertype
    EXPECT_EQ(parse(d), ParseStatus::not_ipv4);
  }
  {
    auto d = good;
    d[23] = 6;  // TCP
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::not_roce);
  }
  {
    auto d = good;
    d[36] = 0x12;  // UDP destination port 4792
    d[37] = 0xB8;
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::not_roce);
  }
  {
    auto d = good;
    d[20] = 0x20;  // MF set: a fragment
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::not_roce);
  }
  {
    auto d = good;
    d[14] = 0x46;  // IHL 6: options
    EXPECT_EQ(parse(d), ParseStatus::not_roce);
  }
}

TEST(RoceParse, BadOpcode) {
  // 0x20..0x2B: UC; 0x64, 0x65: UD.
  for (uint8_t op : {0x15, 0x1F, 0x2C, 0x3F, 0x63, 0x66, 0x81, 0xFF}) {
    auto d = build(full_fields(Opcode::SEND_ONLY), 0);
    d[42] = op;
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_opcode) << int(op);
  }
}

TEST(RoceParse, BadLength) {
  {
    auto d = build(full_fields(Opcode::ACKNOWLEDGE));  // payload on an ACK
    d.insert(d.end() - 4, {1, 2, 3, 4});
    set_lengths(d);
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
  {
    auto d = build(full_fields(Opcode::SEND_ONLY), 0);  // pad longer than payload
    d[43] |= 0x30;
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
  {
    auto d = build(full_fields(Opcode::SEND_ONLY), 4);  // not a whole number of words
    d.insert(d.end() - 4, uint8_t{9});
    set_lengths(d);
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
  {
    auto d = build(full_fields(Opcode::RDMA_READ_REQUEST));  // RETH cut short
    d.erase(d.end() - 8, d.end() - 4);
    set_lengths(d);
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
  {
    auto d = build(full_fields(Opcode::SEND_ONLY), 8);  // UDP length disagrees with IP
    d[39] -= 4;
    reseal(d);
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
  {
    auto d = build(full_fields(Opcode::SEND_ONLY), 8);  // IHL below 5
    d[14] = 0x44;
    EXPECT_EQ(parse(d), ParseStatus::bad_length);
  }
}

TEST(RoceParse, StatusNames) {
  EXPECT_STREQ(to_string(ParseStatus::ok), "ok");
  EXPECT_STREQ(to_string(ParseStatus::bad_icrc), "bad_icrc");
  EXPECT_STREQ(to_string(ParseStatus::bad_length), "bad_length");
}

// ---------------------------------------------------------------------------
// ECN marking and AETH syndromes.

TEST(RoceEcn, SetCeKeepsIcrcAndFixesIpChecksum) {
  RoceFields f = full_fields(Opcode::RDMA_WRITE_MIDDLE);
  f.ecn = 1;  // ECT(1)
  const auto pay = payload_of(100);
  auto pkt = build_roce(f, pay.data(), pay.size());
  const auto before = pkt->data;
  EXPECT_EQ(ecn_of(*pkt), 1);
  set_ecn_ce(*pkt);
  EXPECT_EQ(ecn_of(*pkt), 3);
  EXPECT_EQ(pkt->data[15], 26 << 2 | 3);  // DSCP untouched
  EXPECT_EQ(ipv4_checksum(&pkt->data[14], 20), 0);
  EXPECT_NE(pkt->data[24] << 8 | pkt->data[25], before[24] << 8 | before[25]);
  // Only TOS and the checksum changed; the ICRC bytes are the old ones and
  // still verify, by the codec and by the independent reference.
  for (size_t i = 0; i < before.size(); ++i) {
    if (i != 15 && i != 24 && i != 25) {
      EXPECT_EQ(pkt->data[i], before[i]) << i;
    }
  }
  EXPECT_EQ(stored_icrc(pkt->data), reference_icrc(pkt->data));
  RoceFields out;
  ASSERT_EQ(parse_roce(*pkt, out), ParseStatus::ok);
  EXPECT_EQ(out.ecn, 3);
  EXPECT_EQ(out.dscp, 26);
  set_ecn_ce(*pkt);  // idempotent
  EXPECT_EQ(parse_roce(*pkt, out), ParseStatus::ok);

  Packet junk;
  junk.data.resize(20);
  EXPECT_THROW(set_ecn_ce(junk), std::invalid_argument);
  EXPECT_THROW(ecn_of(junk), std::invalid_argument);
}

TEST(RoceAeth, SyndromeEncodings) {
  EXPECT_EQ(aeth_ack(31), 0x1F);
  EXPECT_EQ(aeth_kind(aeth_ack(31)), AethKind::ack);
  EXPECT_EQ(aeth_value(aeth_ack(7)), 7);
  EXPECT_EQ(aeth_rnr_nak(14), 0x2E);
  EXPECT_EQ(aeth_kind(aeth_rnr_nak(14)), AethKind::rnr_nak);
  EXPECT_EQ(aeth_nak(NakCode::psn_seq_error), 0x60);
  EXPECT_EQ(aeth_nak(NakCode::remote_access_error), 0x62);
  EXPECT_EQ(aeth_nak(NakCode::invalid_rd_request), 0x64);
  EXPECT_EQ(aeth_kind(aeth_nak(NakCode::remote_operational_error)), AethKind::nak);
  EXPECT_EQ(aeth_value(aeth_nak(NakCode::invalid_request)), 1);
  EXPECT_EQ(aeth_kind(0x40), AethKind::reserved);
  EXPECT_EQ(aeth_kind(0x80), AethKind::reserved);
}

}  // namespace
}  // namespace mprdma::net

namespace mprdma::net {
namespace {

// UD SENDs: BTH opcode 0x64/0x65, then the 8-byte DETH (Q_Key, a reserved
// byte, the 24-bit source QP), then the immediate; round trip and bytes.
TEST(RoceUd, DethRoundTripAndLayout) {
  RoceFields f;
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000002;
  f.dest_qp = 0x000321;
  f.psn = 0x00ABCD;
  f.deth_qkey = 0x80001234;
  f.deth_src_qp = 0x00F00D;
  f.imm = 0x01020304;
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5};
  for (Opcode op : {Opcode::UD_SEND_ONLY, Opcode::UD_SEND_ONLY_WITH_IMMEDIATE}) {
    f.opcode = op;
    const bool imm = op == Opcode::UD_SEND_ONLY_WITH_IMMEDIATE;
    EXPECT_TRUE(is_valid_opcode(static_cast<uint8_t>(op)));
    EXPECT_TRUE(has_deth(op));
    EXPECT_TRUE(is_request(op) && is_only(op) && has_payload(op));
    EXPECT_EQ(ext_header_bytes(op), imm ? 12u : 8u);
    const PacketPtr p = build_roce(f, payload.data(), payload.size());
    const uint8_t* d = p->data.data() + kExtOffset;
    EXPECT_EQ(p->data[kBthOffset], static_cast<uint8_t>(op));
    const std::vector<uint8_t> deth(d, d + 8);
    EXPECT_EQ(deth, (std::vector<uint8_t>{0x80, 0x00, 0x12, 0x34, 0x00, 0x00, 0xF0, 0x0D}));
    RoceFields g;
    ASSERT_EQ(parse_roce(*p, g), ParseStatus::ok) << to_string(op);
    EXPECT_EQ(g.opcode, op);
    EXPECT_EQ(g.deth_qkey, 0x80001234u);
    EXPECT_EQ(g.deth_src_qp, 0x00F00Du);
    EXPECT_EQ(g.imm, imm ? 0x01020304u : 0u);
    EXPECT_EQ(g.payload_len, 5u);
    EXPECT_EQ(g.payload_offset, kExtOffset + (imm ? 12u : 8u));
  }
  EXPECT_STREQ(to_string(Opcode::UD_SEND_ONLY), "UD_SEND_ONLY");
  EXPECT_FALSE(has_deth(Opcode::SEND_ONLY));
  f.opcode = Opcode::UD_SEND_ONLY;
  f.deth_src_qp = 1u << 24;
  EXPECT_THROW(build_roce(f, nullptr, 0), std::invalid_argument);
}

TEST(RoceUc, OpcodesMirrorRcSendAndWrite) {
  // Each UC opcode has the headers of the RC opcode 0x20 below it, round
  // trips, and maps back to it; nothing beyond RDMA_WRITE_ONLY_WITH_IMMEDIATE
  // exists on UC.
  RoceFields f;
  f.dest_qp = 0x000777;
  f.psn = 0x123456;
  f.reth_va = 0x1122334455667788;
  f.reth_rkey = 0xAABBCCDD;
  f.reth_dma_len = 4096;
  f.imm = 0x0BADF00D;
  const std::vector<uint8_t> payload(33, 0x42);
  for (int v = 0x20; v <= 0x2B; ++v) {
    const auto op = static_cast<Opcode>(v);
    const Opcode rc = static_cast<Opcode>(v - 0x20);
    EXPECT_TRUE(is_valid_opcode(static_cast<uint8_t>(v)));
    EXPECT_TRUE(is_uc(op));
    EXPECT_EQ(rc_equivalent(op), rc);
    EXPECT_EQ(uc_of(rc), op);
    EXPECT_EQ(ext_header_bytes(op), ext_header_bytes(rc)) << to_string(op);
    EXPECT_EQ(is_first(op), is_first(rc));
    EXPECT_EQ(is_last(op), is_last(rc));
    EXPECT_EQ(is_only(op), is_only(rc));
    EXPECT_TRUE(is_request(op));
    EXPECT_EQ(std::string(to_string(op)), std::string("UC_") + to_string(rc));
    f.opcode = op;
    const PacketPtr p = build_roce(f, payload.data(), payload.size());
    EXPECT_EQ(p->data[kBthOffset], v);
    RoceFields g;
    ASSERT_EQ(parse_roce(*p, g), ParseStatus::ok) << to_string(op);
    EXPECT_EQ(g.opcode, op);
    EXPECT_EQ(g.payload_len, payload.size());
    EXPECT_EQ(g.reth_rkey, has_reth(op) ? 0xAABBCCDDu : 0u);
    EXPECT_EQ(g.imm, has_imm(op) ? 0x0BADF00Du : 0u);
  }
  EXPECT_FALSE(is_valid_opcode(0x2C));
  EXPECT_EQ(rc_equivalent(Opcode::SEND_ONLY), Opcode::SEND_ONLY);
  EXPECT_EQ(uc_of(Opcode::RDMA_READ_REQUEST), Opcode::RDMA_READ_REQUEST);
}

}  // namespace
}  // namespace mprdma::net
