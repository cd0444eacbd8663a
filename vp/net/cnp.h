// RoCEv2 Congestion Notification Packets (CNP) as real bytes.
//
// InfiniBand Annex A17 (RoCEv2), as ConnectX NICs send it: Ethernet II |
// IPv4 | UDP to 4791 | BTH with opcode 0x81 (transport class 100, CNP),
// BECN set, P_Key, destination QP = the QP of the flow's sender (the
// reaction point), PSN 0, everything else zero | 16 reserved zero bytes |
// ICRC: 74 frame bytes. The ICRC is computed like that of every RoCEv2
// packet (icrc.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "vp/net/packet.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {

constexpr uint8_t kCnpOpcode = 0x81;
constexpr size_t kCnpReservedBytes = 16;
// Frame bytes of a CNP: eth 14 + IPv4 20 + UDP 8 + BTH 12 + 16 + ICRC 4.
constexpr size_t kCnpFrameBytes = kExtOffset + kCnpReservedBytes + 4;

// Builds a CNP from the address fields of `f` (MACs, IPs, DSCP, ECN, TTL,
// IP identification, UDP source port), its P_Key and its `dest_qp`; every
// other field of `f` is ignored. Throws std::invalid_argument for a field
// out of range (dscp > 63, ecn > 3, dest_qp >= 2^24).
PacketPtr build_cnp(const RoceFields& f);

// Parses and validates a CNP in receiver order (Ethernet, IPv4 header and
// checksum, UDP port, lengths, ICRC, opcode): `bad_opcode` if it is not a
// CNP, `bad_length` if the transport part is not BTH + 16 bytes. On ok,
// `out` holds the address fields, P_Key, FECN/BECN and dest_qp; `opcode` is
// set to kCnpOpcode (not an RC opcode: use the value, not the traits).
ParseStatus parse_cnp(const uint8_t* data, size_t len, RoceFields& out);
inline ParseStatus parse_cnp(const Packet& p, RoceFields& out) {
  return parse_cnp(p.data.data(), p.data.size(), out);
}

}  // namespace mprdma::net
