// The parts of a RoCEv2 frame every transport packet shares (Ethernet II,
// IPv4, UDP to 4791, BTH, ICRC), written and checked in one place for the
// RC codec (roce_codec.cc) and the CNP (cnp.cc). Internal to vp/net.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vp/net/roce_codec.h"

namespace mprdma::net::detail {

// Writes Ethernet, IPv4 (with its checksum), UDP and the BTH of a frame of
// `total` bytes into `d` (zero-filled by the caller): addresses, DSCP/ECN,
// TTL, IP identification and UDP source port from `f`, BTH byte 0 =
// `bth_opcode`, PadCnt = `pad`, the BTH flags, P_Key, dest QP and PSN from
// `f`. Fields must be in range (the callers check them).
void write_headers(uint8_t* d, const RoceFields& f, uint8_t bth_opcode, uint8_t pad, size_t total);
// Stores the ICRC of the frame `d` of `total` bytes in its last 4 bytes.
void seal(uint8_t* d, size_t total);

// Checks a received frame in receiver order: Ethernet type, IPv4 version,
// header length, checksum, protocol, fragments, lengths, UDP port, ICRC.
// On ok `udp_len` is the UDP length. Reads nothing into fields.
ParseStatus check_headers(const uint8_t* d, size_t len, size_t& udp_len);
// Fills `out`'s address fields and its BTH fields (all but the opcode) from a
// frame check_headers() accepted.
void read_headers(const uint8_t* d, RoceFields& out);

}  // namespace mprdma::net::detail
