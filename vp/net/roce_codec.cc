#include "vp/net/roce_codec.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "vp/net/icrc.h"
#include "vp/net/roce_headers.h"

namespace mprdma::net {

std::string ipv4_text(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xff) + "." +
         std::to_string((ip >> 8) & 0xff) + "." + std::to_string(ip & 0xff);
}
namespace {

// Per-opcode traits, indexed by opcode value, so every trait query and the
// header-size computation is one table lookup.
enum : uint16_t {
  kReth = 1 << 0,
  kAeth = 1 << 1,
  kImm = 1 << 2,
  kAtomic = 1 << 3,
  kAtomicAck = 1 << 4,
  kPayload = 1 << 5,
  kFirst = 1 << 6,
  kMiddle = 1 << 7,
  kLast = 1 << 8,
  kOnly = 1 << 9,
  kRequest = 1 << 10,
  kResponse = 1 << 11,
  kDeth = 1 << 12,
};

struct OpInfo {
  const char* name;
  uint16_t flags;
};

constexpr OpInfo kOps[kNumOpcodes] = {
    {"SEND_FIRST", kPayload | kFirst | kRequest},
    {"SEND_MIDDLE", kPayload | kMiddle | kRequest},
    {"SEND_LAST", kPayload | kLast | kRequest},
    {"SEND_LAST_WITH_IMMEDIATE", kImm | kPayload | kLast | kRequest},
    {"SEND_ONLY", kPayload | kOnly | kRequest},
    {"SEND_ONLY_WITH_IMMEDIATE", kImm | kPayload | kOnly | kRequest},
    {"RDMA_WRITE_FIRST", kReth | kPayload | kFirst | kRequest},
    {"RDMA_WRITE_MIDDLE", kPayload | kMiddle | kRequest},
    {"RDMA_WRITE_LAST", kPayload | kLast | kRequest},
    {"RDMA_WRITE_LAST_WITH_IMMEDIATE", kImm | kPayload | kLast | kRequest},
    {"RDMA_WRITE_ONLY", kReth | kPayload | kOnly | kRequest},
    {"RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReth | kImm | kPayload | kOnly | kRequest},
    {"RDMA_READ_REQUEST", kReth | kOnly | kRequest},
    {"RDMA_READ_RESPONSE_FIRST", kAeth | kPayload | kFirst | kResponse},
    {"RDMA_READ_RESPONSE_MIDDLE", kPayload | kMiddle | kResponse},
    {"RDMA_READ_RESPONSE_LAST", kAeth | kPayload | kLast | kResponse},
    {"RDMA_READ_RESPONSE_ONLY", kAeth | kPayload | kOnly | kResponse},
    {"ACKNOWLEDGE", kAeth | kOnly | kResponse},
    {"ATOMIC_ACKNOWLEDGE", kAeth | kAtomicAck | kOnly | kResponse},
    {"COMPARE_SWAP", kAtomic | kOnly | kRequest},
    {"FETCH_ADD", kAtomic | kOnly | kRequest},
};
// UD opcodes 0x64 and 0x65 (IBA table 38, UD column).
constexpr OpInfo kUdOps[2] = {
    {"UD_SEND_ONLY", kDeth | kPayload | kOnly | kRequest},
    {"UD_SEND_ONLY_WITH_IMMEDIATE", kDeth | kImm | kPayload | kOnly | kRequest},
};

// UC opcodes 0x20..0x2B (IBA table 38, UC column): the RC SEND and WRITE
// opcodes' headers, under their own names.
constexpr OpInfo kUcOps[kNumUcOpcodes] = {
    {"UC_SEND_FIRST", kPayload | kFirst | kRequest},
    {"UC_SEND_MIDDLE", kPayload | kMiddle | kRequest},
    {"UC_SEND_LAST", kPayload | kLast | kRequest},
    {"UC_SEND_LAST_WITH_IMMEDIATE", kImm | kPayload | kLast | kRequest},
    {"UC_SEND_ONLY", kPayload | kOnly | kRequest},
    {"UC_SEND_ONLY_WITH_IMMEDIATE", kImm | kPayload | kOnly | kRequest},
    {"UC_RDMA_WRITE_FIRST", kReth | kPayload | kFirst | kRequest},
    {"UC_RDMA_WRITE_MIDDLE", kPayload | kMiddle | kRequest},
    {"UC_RDMA_WRITE_LAST", kPayload | kLast | kRequest},
    {"UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kImm | kPayload | kLast | kRequest},
    {"UC_RDMA_WRITE_ONLY", kReth | kPayload | kOnly | kRequest},
    {"UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReth | kImm | kPayload | kOnly | kRequest},
};

inline const OpInfo& info_of(uint8_t v) {
  return v < kNumOpcodes ? kOps[v] : is_uc_opcode(v) ? kUcOps[v - kUcOpcodeBase] : kUdOps[v - 0x64];
}

inline uint16_t flags_of(Opcode op) {
  const auto v = static_cast<uint8_t>(op);
  return is_valid_opcode(v) ? info_of(v).flags : 0;
}

constexpr size_t ext_bytes_of(uint16_t flags) {
  return ((flags & kDeth) ? kDethBytes : 0) + ((flags & kReth) ? kRethBytes : 0) +
         ((flags & kAeth) ? kAethBytes : 0) + ((flags & kImm) ? kImmDtBytes : 0) +
         ((flags & kAtomic) ? kAtomicEthBytes : 0) +
         ((flags & kAtomicAck) ? kAtomicAckEthBytes : 0);
}

constexpr uint32_t kMax24 = (1u << 24) - 1;
constexpr size_t kMaxIpTotal = 65535;

// Big-endian stores and loads; byte by byte so alignment never matters.
inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}
inline void put64(uint8_t* p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p + 4, static_cast<uint32_t>(v));
}
inline uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
inline uint32_t get24(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}
inline uint32_t get32(const uint8_t* p) {
  return static_cast<uint32_t>(get16(p)) << 16 | get16(p + 2);
}
inline uint64_t get64(const uint8_t* p) {
  return static_cast<uint64_t>(get32(p)) << 32 | get32(p + 4);
}

void check_range(uint64_t v, uint64_t max, const char* what) {
  if (v > max)
    throw std::invalid_argument(std::string("build_roce: ") + what + " = " + std::to_string(v) +
                                " exceeds " + std::to_string(max));
}

// Checks the frame is Ethernet II carrying an IPv4 header; returns the IHL
// in bytes.
size_t require_ipv4(const Packet& p, const char* who) {
  const auto& d = p.data;
  if (d.size() < kUdpOffset || get16(&d[12]) != kEtherTypeIpv4 || (d[kIpOffset] >> 4) != 4)
    throw std::invalid_argument(std::string(who) + ": not an Ethernet/IPv4 frame");
  const size_t ihl = static_cast<size_t>(d[kIpOffset] & 0x0F) * 4;
  if (ihl < kIpv4HeaderBytes || d.size() < kIpOffset + ihl)
    throw std::invalid_argument(std::string(who) + ": IPv4 header truncated");
  return ihl;
}

}  // namespace

const char* to_string(Opcode op) {
  const auto v = static_cast<uint8_t>(op);
  return is_valid_opcode(v) ? info_of(v).name : "INVALID";
}

bool has_deth(Opcode op) { return flags_of(op) & kDeth; }
bool has_reth(Opcode op) { return flags_of(op) & kReth; }
bool has_aeth(Opcode op) { return flags_of(op) & kAeth; }
bool has_imm(Opcode op) { return flags_of(op) & kImm; }
bool has_atomic_eth(Opcode op) { return flags_of(op) & kAtomic; }
bool has_atomic_ack_eth(Opcode op) { return flags_of(op) & kAtomicAck; }
bool has_payload(Opcode op) { return flags_of(op) & kPayload; }
bool is_first(Opcode op) { return flags_of(op) & kFirst; }
bool is_middle(Opcode op) { return flags_of(op) & kMiddle; }
bool is_last(Opcode op) { return flags_of(op) & kLast; }
bool is_only(Opcode op) { return flags_of(op) & kOnly; }
bool is_request(Opcode op) { return flags_of(op) & kRequest; }
bool is_response(Opcode op) { return flags_of(op) & kResponse; }

size_t ext_header_bytes(Opcode op) { return ext_bytes_of(flags_of(op)); }

size_t roce_overhead_bytes(Opcode op) { return kExtOffset + ext_header_bytes(op) + kIcrcBytes; }

const char* to_string(ParseStatus s) {
  switch (s) {
    case ParseStatus::ok:
      return "ok";
    case ParseStatus::not_ipv4:
      return "not_ipv4";
    case ParseStatus::not_roce:
      return "not_roce";
    case ParseStatus::truncated:
      return "truncated";
    case ParseStatus::bad_ip_checksum:
      return "bad_ip_checksum";
    case ParseStatus::bad_icrc:
      return "bad_icrc";
    case ParseStatus::bad_opcode:
      return "bad_opcode";
    case ParseStatus::bad_length:
      return "bad_length";
  }
  return "unknown";
}

uint16_t ipv4_checksum(const uint8_t* hdr, size_t len) {
  uint32_t sum = 0;
  size_t i = 0;
  for (; i + 1 < len; i += 2) sum += get16(hdr + i);
  if (i < len) sum += static_cast<uint32_t>(hdr[i]) << 8;  // odd length: pad with zero
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

PacketPtr build_roce(const RoceFields& f, const uint8_t* payload, size_t len) {
  const auto op = static_cast<uint8_t>(f.opcode);
  if (!is_valid_opcode(op))
    throw std::invalid_argument("build_roce: opcode " + std::to_string(op) +
                                " is not an RC, UC or UD opcode");
  const uint16_t flags = info_of(op).flags;
  if (f.trailer_len > len)
    throw std::invalid_argument("build_roce: a trailer of " + std::to_string(f.trailer_len) +
                                " bytes in a payload of " + std::to_string(len));
  if (len != f.trailer_len && !(flags & kPayload))
    throw std::invalid_argument(std::string("build_roce: ") + info_of(op).name +
                                " carries no payload but " + std::to_string(len - f.trailer_len) +
                                " bytes were given");
  if (len != 0 && payload == nullptr) throw std::invalid_argument("build_roce: null payload");
  check_range(f.dscp, 63, "dscp");
  check_range(f.ecn, 3, "ecn");
  check_range(f.dest_qp, kMax24, "dest_qp");
  check_range(f.psn, kMax24, "psn");
  check_range(f.aeth_msn, kMax24, "aeth_msn");
  check_range(f.deth_src_qp, kMax24, "deth_src_qp");

  const size_t pad = pad_bytes(len);
  const size_t ext = ext_bytes_of(flags);
  const size_t total = kExtOffset + ext + len + pad + kIcrcBytes;
  check_range(total - kIpOffset, kMaxIpTotal, "IP total length");

  auto pkt = std::make_unique<Packet>();
  pkt->data.resize(total);  // zero-filled: reserved bits and pad stay 0
  uint8_t* d = pkt->data.data();

  detail::write_headers(d, f, op, static_cast<uint8_t>(pad), total);

  // Extended headers in IBA order.
  uint8_t* p = d + kExtOffset;
  if (flags & kDeth) {
    put32(p, f.deth_qkey);
    put24(p + 5, f.deth_src_qp);  // byte 4 reserved
    p += kDethBytes;
  }
  if (flags & kReth) {
    put64(p, f.reth_va);
    put32(p + 8, f.reth_rkey);
    put32(p + 12, f.reth_dma_len);
    p += kRethBytes;
  }
  if (flags & kAtomic) {
    put64(p, f.atomic_va);
    put32(p + 8, f.atomic_rkey);
    put64(p + 12, f.atomic_swap_add);
    put64(p + 20, f.atomic_compare);
    p += kAtomicEthBytes;
  }
  if (flags & kAeth) {
    p[0] = f.aeth_syndrome;
    put24(p + 1, f.aeth_msn);
    p += kAethBytes;
  }
  if (flags & kAtomicAck) {
    put64(p, f.atomic_ack_orig);
    p += kAtomicAckEthBytes;
  }
  if (flags & kImm) {
    put32(p, f.imm);
    p += kImmDtBytes;
  }
  if (len != 0) std::memcpy(p, payload, len);
  detail::seal(d, total);
  return pkt;
}

ParseStatus parse_roce(const uint8_t* d, size_t len, RoceFields& out) {
  size_t trailer = 0;
  if (len >= kBthOffset + kBthBytes && (d[kBthOffset + 8] & kBthTrailerFlag))
    trailer = d[kBthOffset] == static_cast<uint8_t>(Opcode::ACKNOWLEDGE) ? kTrailerAckBytes
                                                                         : kTrailerDataBytes;
  return parse_roce(d, len, out, trailer);
}

ParseStatus parse_roce(const uint8_t* d, size_t len, RoceFields& out, size_t trailer_len) {
  out = RoceFields{};
  size_t udp_len = 0;
  const ParseStatus st = detail::check_headers(d, len, udp_len);
  if (st != ParseStatus::ok) return st;

  const uint8_t* bth = d + kBthOffset;
  if (!is_valid_opcode(bth[0])) return ParseStatus::bad_opcode;
  const uint16_t flags = info_of(bth[0]).flags;
  const size_t ext = ext_bytes_of(flags);
  const size_t after_bth = udp_len - kUdpHeaderBytes - kBthBytes - kIcrcBytes;
  if (after_bth < ext) return ParseStatus::bad_length;
  const size_t area = after_bth - ext;  // payload + pad
  const size_t pad = (bth[1] >> 4) & 0x3;
  // IBA packets are whole 4-byte words; the pad makes them so.
  if (area % 4 != 0 || pad > area) return ParseStatus::bad_length;
  if (area - pad < trailer_len) return ParseStatus::bad_length;
  if (!(flags & kPayload) && area - pad != trailer_len) return ParseStatus::bad_length;
  if (!(flags & kPayload) && trailer_len == 0 && area != 0) return ParseStatus::bad_length;

  detail::read_headers(d, out);
  out.opcode = static_cast<Opcode>(bth[0]);

  const uint8_t* p = d + kExtOffset;
  if (flags & kDeth) {
    out.deth_qkey = get32(p);
    out.deth_src_qp = get24(p + 5);
    p += kDethBytes;
  }
  if (flags & kReth) {
    out.reth_va = get64(p);
    out.reth_rkey = get32(p + 8);
    out.reth_dma_len = get32(p + 12);
    p += kRethBytes;
  }
  if (flags & kAtomic) {
    out.atomic_va = get64(p);
    out.atomic_rkey = get32(p + 8);
    out.atomic_swap_add = get64(p + 12);
    out.atomic_compare = get64(p + 20);
    p += kAtomicEthBytes;
  }
  if (flags & kAeth) {
    out.aeth_syndrome = p[0];
    out.aeth_msn = get24(p + 1);
    p += kAethBytes;
  }
  if (flags & kAtomicAck) {
    out.atomic_ack_orig = get64(p);
    p += kAtomicAckEthBytes;
  }
  if (flags & kImm) {
    out.imm = get32(p);
    p += kImmDtBytes;
  }
  out.payload_offset = static_cast<uint32_t>(p - d);
  out.payload_len = static_cast<uint32_t>(area - pad - trailer_len);
  out.trailer_len = static_cast<uint32_t>(trailer_len);
  return ParseStatus::ok;
}

void set_ecn_ce(Packet& pkt) {
  const size_t ihl = require_ipv4(pkt, "set_ecn_ce");
  uint8_t* ip = pkt.data.data() + kIpOffset;
  ip[1] |= 0x3;
  put16(ip + 10, 0);
  put16(ip + 10, ipv4_checksum(ip, ihl));
}

uint8_t ecn_of(const Packet& pkt) {
  require_ipv4(pkt, "ecn_of");
  return pkt.data[kIpOffset + 1] & 0x3;
}

namespace detail {

void write_headers(uint8_t* d, const RoceFields& f, uint8_t bth_opcode, uint8_t pad, size_t total) {
  // Ethernet II.
  std::memcpy(d, f.dst_mac.b.data(), 6);
  std::memcpy(d + 6, f.src_mac.b.data(), 6);
  put16(d + 12, kEtherTypeIpv4);

  // IPv4, no options.
  uint8_t* ip = d + kIpOffset;
  ip[0] = 0x45;
  ip[1] = static_cast<uint8_t>(f.dscp << 2 | f.ecn);
  put16(ip + 2, static_cast<uint16_t>(total - kIpOffset));
  put16(ip + 4, f.ip_id);
  put16(ip + 6, 0x4000);  // DF: RoCE relies on path MTU, never on fragmentation
  ip[8] = f.ttl;
  ip[9] = 17;  // UDP
  put32(ip + 12, f.src_ip);
  put32(ip + 16, f.dst_ip);
  put16(ip + 10, ipv4_checksum(ip, kIpv4HeaderBytes));

  // UDP; checksum 0 (RoCEv2 allows it: the ICRC protects the payload).
  uint8_t* udp = d + kUdpOffset;
  put16(udp, f.udp_sport);
  put16(udp + 2, kRoceUdpPort);
  put16(udp + 4, static_cast<uint16_t>(total - kUdpOffset));

  // BTH. TVer is 0.
  uint8_t* bth = d + kBthOffset;
  bth[0] = bth_opcode;
  bth[1] = static_cast<uint8_t>((f.solicited ? 0x80 : 0) | (f.mig_req ? 0x40 : 0) | pad << 4);
  put16(bth + 2, f.pkey);
  bth[4] = static_cast<uint8_t>((f.fecn ? 0x80 : 0) | (f.becn ? 0x40 : 0));
  put24(bth + 5, f.dest_qp);
  bth[8] = static_cast<uint8_t>((f.ack_req ? 0x80 : 0) | (f.trailer_len ? kBthTrailerFlag : 0));
  put24(bth + 9, f.psn);
}

void seal(uint8_t* d, size_t total) {
  const size_t icrc_at = total - kIcrcBytes;
  store_icrc(d + icrc_at, roce_icrc(d + kIpOffset, icrc_at - kIpOffset));
}

ParseStatus check_headers(const uint8_t* d, size_t len, size_t& udp_len) {
  if (len < kEthHeaderBytes) return ParseStatus::truncated;
  if (get16(d + 12) != kEtherTypeIpv4) return ParseStatus::not_ipv4;
  if (len < kUdpOffset) return ParseStatus::truncated;

  const uint8_t* ip = d + kIpOffset;
  if ((ip[0] >> 4) != 4) return ParseStatus::not_ipv4;
  const size_t ihl = static_cast<size_t>(ip[0] & 0x0F) * 4;
  if (ihl < kIpv4HeaderBytes) return ParseStatus::bad_length;
  if (ihl > kIpv4HeaderBytes) return ParseStatus::not_roce;  // RoCE never sends IP options
  if (ipv4_checksum(ip, kIpv4HeaderBytes) != 0) return ParseStatus::bad_ip_checksum;
  if (ip[9] != 17) return ParseStatus::not_roce;
  if (get16(ip + 6) & 0x3FFF) return ParseStatus::not_roce;  // MF set or non-zero offset

  const size_t ip_total = get16(ip + 2);
  if (ip_total < kIpv4HeaderBytes + kUdpHeaderBytes) return ParseStatus::bad_length;
  if (len - kIpOffset < ip_total) return ParseStatus::truncated;
  const uint8_t* udp = d + kUdpOffset;
  if (get16(udp + 2) != kRoceUdpPort) return ParseStatus::not_roce;
  udp_len = get16(udp + 4);
  if (udp_len != ip_total - kIpv4HeaderBytes) return ParseStatus::bad_length;
  if (udp_len < kUdpHeaderBytes + kBthBytes + kIcrcBytes) return ParseStatus::bad_length;

  // The ICRC covers everything from here on, so a corrupted packet is
  // reported as such rather than by whichever field the corruption hit.
  const size_t icrc_len = ip_total - kIcrcBytes;
  if (roce_icrc(ip, icrc_len) != load_icrc(ip + icrc_len)) return ParseStatus::bad_icrc;
  return ParseStatus::ok;
}

void read_headers(const uint8_t* d, RoceFields& out) {
  const uint8_t* ip = d + kIpOffset;
  const uint8_t* bth = d + kBthOffset;
  std::memcpy(out.dst_mac.b.data(), d, 6);
  std::memcpy(out.src_mac.b.data(), d + 6, 6);
  out.dscp = ip[1] >> 2;
  out.ecn = ip[1] & 0x3;
  out.ip_id = get16(ip + 4);
  out.ttl = ip[8];
  out.src_ip = get32(ip + 12);
  out.dst_ip = get32(ip + 16);
  out.udp_sport = get16(d + kUdpOffset);
  out.solicited = bth[1] & 0x80;
  out.mig_req = bth[1] & 0x40;
  out.pkey = get16(bth + 2);
  out.fecn = bth[4] & 0x80;
  out.becn = bth[4] & 0x40;
  out.dest_qp = get24(bth + 5);
  out.ack_req = bth[8] & 0x80;
  out.psn = get24(bth + 9);
}

}  // namespace detail

}  // namespace mprdma::net
