// RoCEv2 packets as real bytes: building and parsing Ethernet II / IPv4 /
// UDP / InfiniBand BTH (+ extended transport headers) / payload / pad / ICRC
// for the Reliable Connection opcodes, the Unreliable Connection SENDs and
// WRITEs, and the Unreliable Datagram SENDs.
//
// Frame layout (offsets from the destination MAC):
//   0  Ethernet II, 14 B, ethertype 0x0800
//   14 IPv4, 20 B (no options), DF set, protocol 17
//   34 UDP, 8 B, destination port 4791, checksum 0 (allowed by RoCEv2)
//   42 BTH, 12 B
//   54 extended headers by opcode, in this order: DETH 8 B (UD) | RETH 16 B
//      | AETH 4 B, then AtomicETH 28 B | AtomicAckETH 8 B | ImmDt 4 B
//   .. payload, zero pad to a multiple of 4 (BTH PadCnt), ICRC 4 B
// All multi-byte fields are big-endian on the wire except the ICRC (see
// icrc.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "vp/net/packet.h"

namespace mprdma::net {

// RC opcodes (transport bits 7..5 = 000).
enum class Opcode : uint8_t {
  SEND_FIRST = 0x00,
  SEND_MIDDLE = 0x01,
  SEND_LAST = 0x02,
  SEND_LAST_WITH_IMMEDIATE = 0x03,
  SEND_ONLY = 0x04,
  SEND_ONLY_WITH_IMMEDIATE = 0x05,
  RDMA_WRITE_FIRST = 0x06,
  RDMA_WRITE_MIDDLE = 0x07,
  RDMA_WRITE_LAST = 0x08,
  RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09,
  RDMA_WRITE_ONLY = 0x0A,
  RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B,
  RDMA_READ_REQUEST = 0x0C,
  RDMA_READ_RESPONSE_FIRST = 0x0D,
  RDMA_READ_RESPONSE_MIDDLE = 0x0E,
  RDMA_READ_RESPONSE_LAST = 0x0F,
  RDMA_READ_RESPONSE_ONLY = 0x10,
  ACKNOWLEDGE = 0x11,
  ATOMIC_ACKNOWLEDGE = 0x12,
  COMPARE_SWAP = 0x13,
  FETCH_ADD = 0x14,
  // UC (transport bits 7..5 = 001): the RC SEND and RDMA WRITE opcodes plus
  // 0x20, with the same headers (IBA table 38, UC column); no READ, atomics
  // or acknowledgements exist on UC.
  UC_SEND_FIRST = 0x20,
  UC_SEND_MIDDLE = 0x21,
  UC_SEND_LAST = 0x22,
  UC_SEND_LAST_WITH_IMMEDIATE = 0x23,
  UC_SEND_ONLY = 0x24,
  UC_SEND_ONLY_WITH_IMMEDIATE = 0x25,
  UC_RDMA_WRITE_FIRST = 0x26,
  UC_RDMA_WRITE_MIDDLE = 0x27,
  UC_RDMA_WRITE_LAST = 0x28,
  UC_RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x29,
  UC_RDMA_WRITE_ONLY = 0x2A,
  UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x2B,
  // UD (transport bits 7..5 = 011): single-packet datagrams with a DETH.
  UD_SEND_ONLY = 0x64,
  UD_SEND_ONLY_WITH_IMMEDIATE = 0x65,
};
constexpr int kNumOpcodes = 0x15;  // every value below this is a valid RC Opcode

// The two UD opcodes.
constexpr bool is_ud_opcode(uint8_t v) { return v == 0x64 || v == 0x65; }
// The twelve UC opcodes (0x20..0x2B).
constexpr uint8_t kUcOpcodeBase = 0x20;
constexpr int kNumUcOpcodes = 12;
constexpr bool is_uc_opcode(uint8_t v) {
  return v >= kUcOpcodeBase && v < kUcOpcodeBase + kNumUcOpcodes;
}
inline bool is_uc(Opcode op) { return is_uc_opcode(static_cast<uint8_t>(op)); }
// The RC opcode a UC opcode mirrors (same headers, same place in its
// message): UC_SEND_FIRST -> SEND_FIRST, ...; other opcodes unchanged.
inline Opcode rc_equivalent(Opcode op) {
  return is_uc(op) ? static_cast<Opcode>(static_cast<uint8_t>(op) - kUcOpcodeBase) : op;
}
// The UC opcode of an RC SEND or RDMA WRITE opcode (SEND_FIRST ..
// RDMA_WRITE_ONLY_WITH_IMMEDIATE); others unchanged.
inline Opcode uc_of(Opcode op) {
  const auto v = static_cast<uint8_t>(op);
  return v < kNumUcOpcodes ? static_cast<Opcode>(v + kUcOpcodeBase) : op;
}
// True for the 21 RC opcodes, the 12 UC and the 2 UD opcodes above.
constexpr bool is_valid_opcode(uint8_t v) {
  return v < kNumOpcodes || is_uc_opcode(v) || is_ud_opcode(v);
}
// "SEND_FIRST", ...; "INVALID" for other values.
const char* to_string(Opcode op);

// Which headers and data an opcode carries (IBA table 38: RC, UC, UD).
bool has_deth(Opcode op);  // UD: Q_Key and source QP
bool has_reth(Opcode op);
bool has_aeth(Opcode op);
bool has_imm(Opcode op);
bool has_atomic_eth(Opcode op);
bool has_atomic_ack_eth(Opcode op);
// True if the packet may carry payload (sends, writes, read responses).
bool has_payload(Opcode op);
// Position of the packet in its message. Single-packet operations (read
// request, acknowledge, atomic acknowledge, compare-swap, fetch-add) are
// "only", as are the *_ONLY opcodes: is_only means "first and last".
bool is_first(Opcode op);
bool is_middle(Opcode op);
bool is_last(Opcode op);
bool is_only(Opcode op);
// Requests flow requester -> responder (sends, writes, read requests,
// atomics); responses flow back (read responses, acknowledges).
bool is_request(Opcode op);
bool is_response(Opcode op);

struct MacAddr {
  std::array<uint8_t, 6> b{};
  bool operator==(const MacAddr& o) const { return b == o.b; }
  bool operator!=(const MacAddr& o) const { return b != o.b; }
};

// Every field a RoCEv2 RC packet carries. build_roce() writes the fields the
// opcode has and ignores the others; parse_roce() fills the fields present
// and leaves the others at their defaults.
struct RoceFields {
  MacAddr src_mac, dst_mac;
  uint32_t src_ip = 0, dst_ip = 0;  // host byte order
  uint8_t dscp = 0, ecn = 0 /* 2 bits */, ttl = 64;
  uint16_t ip_id = 0;
  uint16_t udp_sport = 0xC000;
  Opcode opcode = Opcode::ACKNOWLEDGE;
  bool solicited = false, mig_req = true, ack_req = false, fecn = false, becn = false;
  uint16_t pkey = 0xFFFF;
  uint32_t dest_qp = 0 /* 24 bits */;
  uint32_t psn = 0 /* 24 bits */;
  uint64_t reth_va = 0;
  uint32_t reth_rkey = 0, reth_dma_len = 0;
  uint8_t aeth_syndrome = 0;
  uint32_t aeth_msn = 0 /* 24 bits */;
  uint64_t atomic_va = 0;
  uint32_t atomic_rkey = 0;
  uint64_t atomic_swap_add = 0, atomic_compare = 0;
  uint64_t atomic_ack_orig = 0;
  uint32_t imm = 0;  // the 4 ImmDt bytes as a big-endian number
  uint32_t deth_qkey = 0, deth_src_qp = 0 /* 24 bits */;  // UD only
  uint32_t payload_offset = 0, payload_len = 0;           // filled by parse (pad excluded)
  // Bytes at the end of the payload area that are a transport trailer
  // (vp/net/mp_ext.h), not payload: build_roce() takes them as the last
  // `trailer_len` bytes of its payload argument (allowed on any opcode);
  // parse_roce() with a trailer length reports them after payload_len.
  uint32_t trailer_len = 0;
};

// BTH byte 8 is AckReq (bit 7) and seven reserved bits. Bit 6 says that the
// packet ends in a transport trailer (vp/net/mp_ext.h: the ACK trailer on
// an ACKNOWLEDGE, the data trailer on any other opcode), so that a receiver
// parses a frame without knowing its QP's transport. The ICRC covers it
// (only BTH byte 4 is masked). Wireshark shows it as BTH Reserved (7 bits).
constexpr uint8_t kBthTrailerFlag = 0x40;
constexpr size_t kTrailerDataBytes = 8;  // mp_ext.h: kMpDataExtBytes
constexpr size_t kTrailerAckBytes = 12;  // mp_ext.h: kMpAckExtBytes

// Header sizes.
constexpr size_t kIpv4HeaderBytes = 20;
constexpr size_t kUdpHeaderBytes = 8;
constexpr size_t kBthBytes = 12;
constexpr size_t kRethBytes = 16;
constexpr size_t kAethBytes = 4;
constexpr size_t kAtomicEthBytes = 28;
constexpr size_t kAtomicAckEthBytes = 8;
constexpr size_t kImmDtBytes = 4;
constexpr size_t kDethBytes = 8;
constexpr size_t kIpOffset = kEthHeaderBytes;
constexpr size_t kUdpOffset = kIpOffset + kIpv4HeaderBytes;
constexpr size_t kBthOffset = kUdpOffset + kUdpHeaderBytes;
constexpr size_t kExtOffset = kBthOffset + kBthBytes;

// Bytes of the extended transport headers an opcode carries.
size_t ext_header_bytes(Opcode op);
// Frame bytes that are not payload: eth+ip+udp+bth+ext+icrc (pad excluded).
size_t roce_overhead_bytes(Opcode op);
// Zero bytes appended to `payload_len` bytes to reach a multiple of 4.
constexpr size_t pad_bytes(size_t payload_len) { return (4 - payload_len % 4) % 4; }
// Size of the frame build_roce() makes.
inline size_t roce_frame_bytes(Opcode op, size_t payload_len) {
  return roce_overhead_bytes(op) + payload_len + pad_bytes(payload_len);
}
// Bytes that frame occupies on the wire (Packet::wire_bytes of it).
inline size_t roce_wire_bytes(Opcode op, size_t payload_len) {
  return std::max(roce_frame_bytes(op, payload_len), kEthMinFrameBytes) + kEthFcsBytes +
         kEthPreambleBytes + kEthIfgBytes;
}

// "10.0.0.1" for 0x0A000001 (an address in host byte order).
std::string ipv4_text(uint32_t ip);

// Builds the frame: all headers, payload, pad and ICRC, with the IP header
// checksum computed. `payload` may be null when `len` is 0. Throws
// std::invalid_argument for payload on an opcode that carries none, a field
// out of range (ecn > 3, dscp > 63, 24-bit fields above 2^24) or a frame too
// large for IPv4. Allocates only the Packet and its frame buffer.
PacketPtr build_roce(const RoceFields& f, const uint8_t* payload, size_t len);

enum class ParseStatus {
  ok,
  not_ipv4,         // ethertype is not IPv4, or IP version is not 4
  not_roce,         // not UDP to port 4791, IP options, or a fragment
  truncated,        // fewer bytes than the IP total length (or a header) needs
  bad_ip_checksum,  // IPv4 header checksum wrong
  bad_icrc,         // invariant CRC wrong
  bad_opcode,       // not an RC, UC or UD opcode
  bad_length,       // IP/UDP lengths inconsistent, payload where none may be,
                    // or pad longer than the payload area
};
const char* to_string(ParseStatus s);

// Parses and validates a frame. Checks run in the order a receiver would
// apply them: Ethernet, IPv4 header and checksum, UDP port, lengths, ICRC,
// opcode, extended headers. Bytes beyond the IP total length (Ethernet
// padding) are ignored. On ok, `out` holds every field of the packet
// (absent ones at their defaults) and payload_offset/payload_len locate the
// payload within `data`. No allocation.
// A packet with the BTH trailer flag (kBthTrailerFlag) ends in the trailer
// its opcode implies, reported in trailer_len.
ParseStatus parse_roce(const uint8_t* data, size_t len, RoceFields& out);
// The same, with the trailer length given instead of read from the flag
// (a packet built for tests). For a connection whose packets end in a `trailer_len`-byte
// trailer: the trailer is at payload_offset + payload_len (bad_length if the
// frame has fewer bytes after its headers).
ParseStatus parse_roce(const uint8_t* data, size_t len, RoceFields& out, size_t trailer_len);
inline ParseStatus parse_roce(const Packet& p, RoceFields& out) {
  return parse_roce(p.data.data(), p.data.size(), out);
}

// AETH syndrome (IBA 9.7.5.2.8): bits 6..5 select the kind, bits 4..0 hold
// the credit count, the RNR timer code or the NAK code.
enum class NakCode : uint8_t {
  psn_seq_error = 0,
  invalid_request = 1,
  remote_access_error = 2,
  remote_operational_error = 3,
  invalid_rd_request = 4,
};
enum class AethKind : uint8_t { ack, rnr_nak, nak, reserved };
// `credits` is the 5-bit credit code (31 = no end-to-end flow control).
constexpr uint8_t aeth_ack(uint8_t credits) { return credits & 0x1F; }
// `timer` is the 5-bit RNR timer code of IBA table 45.
constexpr uint8_t aeth_rnr_nak(uint8_t timer) { return 0x20 | (timer & 0x1F); }
constexpr uint8_t aeth_nak(NakCode code) { return 0x60 | (static_cast<uint8_t>(code) & 0x1F); }
// Bit 7 is reserved and must be zero; a set bit 7 also yields `reserved`.
constexpr AethKind aeth_kind(uint8_t syndrome) {
  if (syndrome & 0x80) return AethKind::reserved;
  switch (syndrome >> 5) {
    case 0:
      return AethKind::ack;
    case 1:
      return AethKind::rnr_nak;
    case 3:
      return AethKind::nak;
    default:
      return AethKind::reserved;
  }
}
// The low 5 bits: credit count, RNR timer or NAK code.
constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1F; }

// Internet checksum (RFC 1071) of `len` bytes, as stored in the header: the
// result over a header whose checksum field is zero is the value to write
// there; over a header with a correct checksum it is 0.
uint16_t ipv4_checksum(const uint8_t* hdr, size_t len);

// Marks the packet Congestion Experienced (ECN = 11) as a switch would and
// fixes the IP header checksum. The ICRC stays valid because TOS is masked.
// Throws std::invalid_argument if the frame is not Ethernet/IPv4.
void set_ecn_ce(Packet& p);
// The ECN bits of an Ethernet/IPv4 frame (std::invalid_argument otherwise).
uint8_t ecn_of(const Packet& p);

}  // namespace mprdma::net
