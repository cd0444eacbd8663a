// Helpers shared by the net tests: distinctive field values per opcode and
// an ICRC reference written independently of vp/net/icrc.cc (bit at a time,
// over an explicitly assembled pseudo packet).
#pragma once

#include <cstdint>
#include <vector>

#include "vp/net/roce_codec.h"

namespace mprdma::net::test {

inline std::vector<Opcode> all_opcodes() {
  std::vector<Opcode> ops;
  for (int v = 0; v < kNumOpcodes; ++v) ops.push_back(static_cast<Opcode>(v));
  return ops;
}

// Every field set to a value unlike its default and unlike the other fields,
// so a field written to the wrong place or not at all is noticed.
inline RoceFields full_fields(Opcode op, uint32_t psn = 0xABCDEF) {
  RoceFields f;
  f.src_mac.b = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  f.dst_mac.b = {0x02, 0x66, 0x77, 0x88, 0x99, 0xAA};
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000102;
  f.dscp = 26;
  f.ecn = 2;
  f.ttl = 37;
  f.ip_id = 0x1357;
  f.udp_sport = 0xC123;
  f.opcode = op;
  f.solicited = true;
  f.mig_req = false;
  f.ack_req = true;
  f.fecn = true;
  f.becn = true;
  f.pkey = 0x8001;
  f.dest_qp = 0x123456;
  f.psn = psn;
  f.reth_va = 0x1122334455667788ull;
  f.reth_rkey = 0x99AABBCC;
  f.reth_dma_len = 0x00012345;
  f.aeth_syndrome = aeth_nak(NakCode::remote_access_error);
  f.aeth_msn = 0xFEDCBA;
  f.atomic_va = 0x0102030405060708ull;
  f.atomic_rkey = 0x0A0B0C0D;
  f.atomic_swap_add = 0xF0E0D0C0B0A09080ull;
  f.atomic_compare = 0x0F1F2F3F4F5F6F7Full;
  f.atomic_ack_orig = 0x7766554433221100ull;
  f.imm = 0xDEADBEEF;
  return f;
}

// CRC-32 one bit at a time, straight from the definition (reflected
// polynomial 0xEDB88320, initial value and final XOR all ones).
inline uint32_t bitwise_crc32(const std::vector<uint8_t>& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t byte : bytes) {
    crc ^= byte;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
  }
  return ~crc;
}

// ICRC per IBA Annex A17 for an Ethernet/IPv4 (IHL 5) frame whose last four
// bytes are the ICRC: 8 bytes of 0xFF, then IP..payload+pad with TOS, TTL,
// IP checksum, UDP checksum and the BTH FECN/BECN/resv6 byte set to ones.
inline uint32_t reference_icrc(const std::vector<uint8_t>& frame) {
  std::vector<uint8_t> pseudo(8, 0xFF);
  pseudo.insert(pseudo.end(), frame.begin() + 14, frame.end() - 4);
  const size_t ip = 8;
  pseudo[ip + 1] = 0xFF;   // TOS
  pseudo[ip + 8] = 0xFF;   // TTL
  pseudo[ip + 10] = 0xFF;  // header checksum
  pseudo[ip + 11] = 0xFF;
  pseudo[ip + 20 + 6] = 0xFF;  // UDP checksum
  pseudo[ip + 20 + 7] = 0xFF;
  pseudo[ip + 28 + 4] = 0xFF;  // BTH byte 4
  return bitwise_crc32(pseudo);
}

// The ICRC as stored in the frame (least significant byte first).
inline uint32_t stored_icrc(const std::vector<uint8_t>& frame) {
  const size_t n = frame.size();
  return static_cast<uint32_t>(frame[n - 4]) | static_cast<uint32_t>(frame[n - 3]) << 8 |
         static_cast<uint32_t>(frame[n - 2]) << 16 | static_cast<uint32_t>(frame[n - 1]) << 24;
}

}  // namespace mprdma::net::test
