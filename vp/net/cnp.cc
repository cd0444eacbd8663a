#include "vp/net/cnp.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "vp/net/icrc.h"

namespace mprdma::net {
namespace {

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t get24(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}
uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(get16(p)) << 16 | get16(p + 2);
}

void check(uint64_t v, uint64_t max, const char* what) {
  if (v > max)
    throw std::invalid_argument(std::string("build_cnp: ") + what + " = " + std::to_string(v) +
                                " is out of range");
}

}  // namespace

PacketPtr build_cnp(const RoceFields& f) {
  check(f.dscp, 63, "dscp");
  check(f.ecn, 3, "ecn");
  check(f.dest_qp, 0xFFFFFF, "dest_qp");
  auto pkt = std::make_unique<Packet>();
  pkt->data.resize(kCnpFrameBytes);  // zero: reserved bytes and fields
  uint8_t* d = pkt->data.data();
  std::memcpy(d, f.dst_mac.b.data(), 6);
  std::memcpy(d + 6, f.src_mac.b.data(), 6);
  put16(d + 12, kEtherTypeIpv4);

  uint8_t* ip = d + kIpOffset;
  ip[0] = 0x45;
  ip[1] = static_cast<uint8_t>(f.dscp << 2 | f.ecn);
  put16(ip + 2, static_cast<uint16_t>(kCnpFrameBytes - kIpOffset));
  put16(ip + 4, f.ip_id);
  put16(ip + 6, 0x4000);  // DF
  ip[8] = f.ttl;
  ip[9] = 17;
  put32(ip + 12, f.src_ip);
  put32(ip + 16, f.dst_ip);
  put16(ip + 10, ipv4_checksum(ip, kIpv4HeaderBytes));

  uint8_t* udp = d + kUdpOffset;
  put16(udp, f.udp_sport);
  put16(udp + 2, kRoceUdpPort);
  put16(udp + 4, static_cast<uint16_t>(kCnpFrameBytes - kUdpOffset));

  uint8_t* bth = d + kBthOffset;
  bth[0] = kCnpOpcode;
  bth[1] = 0;  // SE, M, PadCnt, TVer: zero
  put16(bth + 2, f.pkey);
  bth[4] = 0x40;  // BECN
  put24(bth + 5, f.dest_qp);
  // bth[8] (AckReq, reserved) and the PSN stay zero, as do the 16 reserved
  // bytes after the BTH.
  const size_t icrc_at = kCnpFrameBytes - kIcrcBytes;
  store_icrc(d + icrc_at, roce_icrc(ip, icrc_at - kIpOffset));
  return pkt;
}

ParseStatus parse_cnp(const uint8_t* d, size_t len, RoceFields& out) {
  out = RoceFields{};
  if (len < kEthHeaderBytes) return ParseStatus::truncated;
  if (get16(d + 12) != kEtherTypeIpv4) return ParseStatus::not_ipv4;
  if (len < kUdpOffset) return ParseStatus::truncated;
  const uint8_t* ip = d + kIpOffset;
  if ((ip[0] >> 4) != 4) return ParseStatus::not_ipv4;
  if ((ip[0] & 0x0F) < 5) return ParseStatus::bad_length;
  if ((ip[0] & 0x0F) > 5) return ParseStatus::not_roce;
  if (ipv4_checksum(ip, kIpv4HeaderBytes) != 0) return ParseStatus::bad_ip_checksum;
  if (ip[9] != 17) return ParseStatus::not_roce;
  if (get16(ip + 6) & 0x3FFF) return ParseStatus::not_roce;
  const size_t ip_total = get16(ip + 2);
  if (ip_total < kIpv4HeaderBytes + kUdpHeaderBytes) return ParseStatus::bad_length;
  if (len - kIpOffset < ip_total) return ParseStatus::truncated;
  const uint8_t* udp = d + kUdpOffset;
  if (get16(udp + 2) != kRoceUdpPort) return ParseStatus::not_roce;
  const size_t udp_len = get16(udp + 4);
  if (udp_len != ip_total - kIpv4HeaderBytes) return ParseStatus::bad_length;
  if (udp_len < kUdpHeaderBytes + kBthBytes + kIcrcBytes) return ParseStatus::bad_length;
  const size_t icrc_len = ip_total - kIcrcBytes;
  if (roce_icrc(ip, icrc_len) != load_icrc(ip + icrc_len)) return ParseStatus::bad_icrc;
  const uint8_t* bth = d + kBthOffset;
  if (bth[0] != kCnpOpcode) return ParseStatus::bad_opcode;
  if (udp_len != kUdpHeaderBytes + kBthBytes + kCnpReservedBytes + kIcrcBytes)
    return ParseStatus::bad_length;

  std::memcpy(out.dst_mac.b.data(), d, 6);
  std::memcpy(out.src_mac.b.data(), d + 6, 6);
  out.dscp = ip[1] >> 2;
  out.ecn = ip[1] & 0x3;
  out.ip_id = get16(ip + 4);
  out.ttl = ip[8];
  out.src_ip = get32(ip + 12);
  out.dst_ip = get32(ip + 16);
  out.udp_sport = get16(udp);
  out.opcode = static_cast<Opcode>(kCnpOpcode);
  out.mig_req = bth[1] & 0x40;
  out.pkey = get16(bth + 2);
  out.fecn = bth[4] & 0x80;
  out.becn = bth[4] & 0x40;
  out.dest_qp = get24(bth + 5);
  out.psn = get24(bth + 9);
  out.payload_offset = static_cast<uint32_t>(kExtOffset);
  out.payload_len = 0;
  return ParseStatus::ok;
}

}  // namespace mprdma::net
