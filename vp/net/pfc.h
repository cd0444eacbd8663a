// IEEE 802.1Qbb Priority-based Flow Control (PFC) PAUSE frames as real
// bytes: built by switches that run out of per-priority buffer and parsed
// by every MAC (switch port or NIC) that honours them.
//
// Frame layout (offsets from the destination MAC), 60 bytes without FCS:
//   0  destination 01:80:C2:00:00:01 (MAC Control reserved multicast)
//   6  source MAC of the sending port
//   12 ethertype 0x8808 (MAC Control)
//   14 opcode 0x0101 (PFC)
//   16 class-enable vector, 16 bits: bit i set = time[i] is valid for
//      priority i; the high 8 bits are reserved and sent as 0
//   18 time[0..7], eight 16-bit quanta (one quantum = 512 bit times)
//   34 zero padding to the 60-byte minimum frame
// All fields are big-endian. A time of 0 for an enabled class resumes that
// priority at once (XON).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "vp/core/units.h"
#include "vp/net/packet.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {

constexpr uint16_t kEtherTypeMacControl = 0x8808;
constexpr uint16_t kPfcOpcode = 0x0101;
constexpr MacAddr kPfcDstMac{{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}};
// Bytes of a PFC frame up to the last quanta field (before padding).
constexpr size_t kPfcPayloadEnd = 34;
constexpr int kPfcClasses = 8;
// Bits per pause quantum (802.3 Annex 31B).
constexpr uint64_t kPauseQuantumBits = 512;

struct PfcFields {
  MacAddr src_mac;
  // Class-enable vector: bit i = priority i. Only the low 8 bits are
  // meaningful; parse_pfc() returns the high bits as received.
  uint16_t class_mask = 0;
  std::array<uint16_t, kPfcClasses> quanta{};
};

// Builds a PFC frame, padded to 60 bytes. Bits of `class_mask` above 7 are
// rejected (std::invalid_argument): 802.1Qbb reserves them.
PacketPtr build_pfc(const MacAddr& src_mac, uint16_t class_mask,
                    const std::array<uint16_t, kPfcClasses>& quanta);

// True if the frame is an Ethernet MAC Control frame (ethertype 0x8808),
// whatever its opcode: such frames end at the receiving MAC and are never
// forwarded.
bool is_mac_control(const uint8_t* data, size_t len);
inline bool is_mac_control(const Packet& p) { return is_mac_control(p.data.data(), p.data.size()); }

// Parses a PFC frame: the destination must be 01:80:C2:00:00:01, the
// ethertype 0x8808, the opcode 0x0101 and the frame at least 34 bytes long.
// Returns nullopt otherwise (including 802.3x global PAUSE, opcode 0x0001).
std::optional<PfcFields> parse_pfc(const uint8_t* data, size_t len);
inline std::optional<PfcFields> parse_pfc(const Packet& p) {
  return parse_pfc(p.data.data(), p.data.size());
}

// Pause time of `quanta` quanta at line rate `rate`: quanta * 512 bits /
// rate, in picoseconds rounded up (a pause never ends early).
uint64_t pause_ps(uint16_t quanta, const core::Bandwidth& rate);

}  // namespace mprdma::net
