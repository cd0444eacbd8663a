// CRC-32 and the RoCEv2 invariant CRC (ICRC).
//
// The ICRC is the IEEE 802.3 CRC-32 (the one zlib's crc32() computes) over a
// pseudo packet defined by InfiniBand Annex A17 (RoCEv2): eight 0xFF bytes
// standing in for the IB local route header, then the IP, UDP and BTH headers
// with every field a router or switch may rewrite replaced by ones, then the
// rest of the transport headers, the payload and its pad. The fields masked
// for IPv4 are TOS (DSCP+ECN), TTL and the header checksum; the UDP checksum;
// and the BTH byte holding FECN, BECN and resv6. So ECN marking, TTL
// decrement and congestion notification leave the ICRC valid.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mprdma::net {

constexpr size_t kIcrcBytes = 4;

// Advances a reflected CRC-32 register (polynomial 0xEDB88320) over `len`
// bytes without the initial or final inversion, so that segments can be
// chained: crc32(d) == ~crc32_update(0xFFFFFFFF, d). Carry-less
// multiplication where the CPU has it (crc32_clmul.h), else the tables.
uint32_t crc32_update(uint32_t reg, const uint8_t* data, size_t len);
// The same with slicing-by-8 tables only, on any CPU.
uint32_t crc32_update_table(uint32_t reg, const uint8_t* data, size_t len);

// The standard CRC-32 (initial value and final XOR 0xFFFFFFFF), as zlib.
inline uint32_t crc32(const uint8_t* data, size_t len) {
  return ~crc32_update(0xFFFFFFFFu, data, len);
}

// The CRC-32 register after the initial inversion and the eight 0xFF bytes
// that replace the local route header (Linux rxe starts from this constant).
uint32_t icrc_seed();

// ICRC of a RoCEv2 packet over IPv4. `ip` points at the IPv4 header (any
// IHL); `len` counts the bytes from there through the payload pad, i.e.
// everything up to but excluding the ICRC field. `len` must cover the IP,
// UDP and BTH headers (std::invalid_argument otherwise).
uint32_t roce_icrc(const uint8_t* ip, size_t len);

// The ICRC travels least significant byte first, like the Ethernet FCS (a
// ConnectX-4 Lx capture with CRC value 0x2a00fd82 ends in 82 fd 00 2a).
inline void store_icrc(uint8_t* dst, uint32_t icrc) {
  dst[0] = static_cast<uint8_t>(icrc);
  dst[1] = static_cast<uint8_t>(icrc >> 8);
  dst[2] = static_cast<uint8_t>(icrc >> 16);
  dst[3] = static_cast<uint8_t>(icrc >> 24);
}
inline uint32_t load_icrc(const uint8_t* src) {
  return static_cast<uint32_t>(src[0]) | static_cast<uint32_t>(src[1]) << 8 |
         static_cast<uint32_t>(src[2]) << 16 | static_cast<uint32_t>(src[3]) << 24;
}

}  // namespace mprdma::net
