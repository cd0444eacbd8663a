#include "vp/net/pfc.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::net {

namespace {

constexpr size_t kOpcodeOffset = kEthHeaderBytes;
constexpr size_t kCevOffset = kOpcodeOffset + 2;
constexpr size_t kTimeOffset = kCevOffset + 2;

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

}  // namespace

PacketPtr build_pfc(const MacAddr& src_mac, uint16_t class_mask,
                    const std::array<uint16_t, kPfcClasses>& quanta) {
  if (class_mask & 0xFF00)
    throw std::invalid_argument("build_pfc: class-enable vector bits 8..15 are reserved (mask " +
                                std::to_string(class_mask) + ")");
  auto p = std::make_unique<Packet>();
  // The MAC would pad to the minimum itself; padding here keeps the capture
  // identical to what a real port puts on the wire.
  p->data.assign(kEthMinFrameBytes, 0);
  uint8_t* d = p->data.data();
  std::copy(kPfcDstMac.b.begin(), kPfcDstMac.b.end(), d);
  std::copy(src_mac.b.begin(), src_mac.b.end(), d + 6);
  put16(d + 12, kEtherTypeMacControl);
  put16(d + kOpcodeOffset, kPfcOpcode);
  put16(d + kCevOffset, class_mask);
  for (int i = 0; i < kPfcClasses; ++i) put16(d + kTimeOffset + 2 * i, quanta[i]);
  // Control frames are not queued by priority; the highest class keeps any
  // priority-ordered queue from holding them behind data.
  p->priority = kPfcClasses - 1;
  return p;
}

bool is_mac_control(const uint8_t* data, size_t len) {
  return len >= kEthHeaderBytes && get16(data + 12) == kEtherTypeMacControl;
}

std::optional<PfcFields> parse_pfc(const uint8_t* data, size_t len) {
  if (len < kPfcPayloadEnd || !is_mac_control(data, len)) return std::nullopt;
  if (!std::equal(kPfcDstMac.b.begin(), kPfcDstMac.b.end(), data)) return std::nullopt;
  if (get16(data + kOpcodeOffset) != kPfcOpcode) return std::nullopt;
  PfcFields f;
  std::copy(data + 6, data + 12, f.src_mac.b.begin());
  f.class_mask = get16(data + kCevOffset);
  for (int i = 0; i < kPfcClasses; ++i) f.quanta[i] = get16(data + kTimeOffset + 2 * i);
  return f;
}

uint64_t pause_ps(uint16_t quanta, const core::Bandwidth& rate) {
  // 512 bits = 64 bytes: serialisation of 64 bytes per quantum, rounded up.
  return quanta == 0 ? 0 : rate.serialize_ps(uint64_t{quanta} * (kPauseQuantumBits / 8));
}

}  // namespace mprdma::net
