// A packet as it travels between NICs and links: the real frame bytes plus
// simulation bookkeeping that no wire would carry.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace mprdma::net {

// Ethernet framing that is not part of Packet::data but occupies the wire.
constexpr size_t kEthFcsBytes = 4;
constexpr size_t kEthPreambleBytes = 8;  // 7 preamble + 1 start-of-frame delimiter
constexpr size_t kEthIfgBytes = 12;      // minimum inter-frame gap
// Shortest frame a MAC sends, excluding the FCS (64 bytes with it); shorter
// frames are padded by the MAC, so they occupy the wire as if this long.
constexpr size_t kEthMinFrameBytes = 60;
constexpr size_t kEthHeaderBytes = 14;  // dst MAC, src MAC, ethertype
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kRoceUdpPort = 4791;

struct Packet {
  // The Ethernet frame from the destination MAC through the RoCE ICRC; no
  // FCS, no preamble.
  std::vector<uint8_t> data;
  // Simulation-only tags: a unique id for tracing, the time (ps) the packet
  // was created, and a scheduling priority for queues that have classes.
  uint64_t id = 0;
  uint64_t birth_ps = 0;
  uint8_t priority = 0;

  // Bytes the frame occupies on the wire: data (padded by the MAC to the
  // 60-byte minimum) + FCS + preamble/SFD + inter-frame gap.
  size_t wire_bytes() const {
    return std::max(data.size(), kEthMinFrameBytes) + kEthFcsBytes + kEthPreambleBytes +
           kEthIfgBytes;
  }
};
using PacketPtr = std::unique_ptr<Packet>;

}  // namespace mprdma::net
