#include "vp/net/icrc.h"

#include <array>
#include <cstring>
#include <stdexcept>

#include "vp/net/crc32_clmul.h"

namespace mprdma::net {
namespace {

constexpr uint32_t kPoly = 0xEDB88320u;  // 0x04C11DB7 bit-reversed
constexpr int kSlices = 8;

using Tables = std::array<std::array<uint32_t, 256>, kSlices>;

// Table k maps a byte to its CRC contribution k bytes further along, so eight
// input bytes are folded into the register with eight lookups and no
// dependency between them.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (int k = 1; k < kSlices; ++k)
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  return t;
}
constexpr Tables kTables = make_tables();

inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

constexpr size_t kLrhStandInBytes = 8;
constexpr size_t kUdpBytes = 8;
constexpr size_t kBthBytes = 12;
constexpr size_t kMaxIpv4HeaderBytes = 60;

}  // namespace

uint32_t crc32_update(uint32_t reg, const uint8_t* data, size_t len) {
  if (len >= kCrc32ClmulMinBytes && crc32_clmul_available())
    return crc32_update_clmul(reg, data, len);
  return crc32_update_table(reg, data, len);
}

uint32_t crc32_update_table(uint32_t reg, const uint8_t* data, size_t len) {
  const auto& t = kTables;
  while (len >= 8) {
    const uint32_t a = reg ^ load_le32(data);
    const uint32_t b = load_le32(data + 4);
    reg = t[7][a & 0xFF] ^ t[6][(a >> 8) & 0xFF] ^ t[5][(a >> 16) & 0xFF] ^ t[4][a >> 24] ^
          t[3][b & 0xFF] ^ t[2][(b >> 8) & 0xFF] ^ t[1][(b >> 16) & 0xFF] ^ t[0][b >> 24];
    data += 8;
    len -= 8;
  }
  while (len--) reg = t[0][(reg ^ *data++) & 0xFF] ^ (reg >> 8);
  return reg;
}

uint32_t icrc_seed() {
  static const uint32_t seed = [] {
    uint8_t ones[kLrhStandInBytes];
    std::memset(ones, 0xFF, sizeof ones);
    return crc32_update(0xFFFFFFFFu, ones, sizeof ones);
  }();
  return seed;
}

uint32_t roce_icrc(const uint8_t* ip, size_t len) {
  if (len < 1) throw std::invalid_argument("roce_icrc: empty packet");
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
  const size_t masked_len = ihl + kUdpBytes + kBthBytes;
  if (ihl < 20 || len < masked_len)
    throw std::invalid_argument("roce_icrc: packet shorter than its IP, UDP and BTH headers");

  // Copy the variant headers once into a stack buffer and mask them there,
  // so the frame itself is never written.
  uint8_t head[kMaxIpv4HeaderBytes + kUdpBytes + kBthBytes];
  std::memcpy(head, ip, masked_len);
  head[1] = 0xFF;                        // TOS: DSCP and ECN
  head[8] = 0xFF;                        // TTL
  head[10] = head[11] = 0xFF;            // header checksum
  head[ihl + 6] = head[ihl + 7] = 0xFF;  // UDP checksum
  head[ihl + kUdpBytes + 4] = 0xFF;      // BTH: FECN, BECN, resv6

  uint32_t reg = crc32_update(icrc_seed(), head, masked_len);
  reg = crc32_update(reg, ip + masked_len, len - masked_len);
  return ~reg;
}

}  // namespace mprdma::net
