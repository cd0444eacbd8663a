// The MP-RDMA and IRN per-packet fields on the wire.
//
// Both transports need more per packet than RoCEv2 carries: MP-RDMA the
// ReTx and synchronise bits, the message sequence number and intra-message
// PSN of every data packet, and per-packet ACKs that echo the virtual path
// and carry SACK, AACK and ECE (NSDI'18 Fig. 3); IRN a SACK PSN in its NACKs
// and, on SENDs, the RECV message number and index (its WRITE packets need
// only the RETH each carries: mp_trailer_bytes' write_trailer).
// They travel as a fixed trailer at the end of the RoCEv2 payload area
// (before the pad and the ICRC; on ACKs, which carry no payload, it is the
// whole area: RoceFields::trailer_len), so every standard header stays where a RoCEv2 parser
// expects it (tshark decodes BTH, RETH and AETH as usual and shows the trailer as the last payload
// bytes) and the ICRC covers the trailer. Whether a packet has a trailer is a bit of its BTH
// (kBthTrailerFlag, roce_codec.h), set by the sender from its connection's transport and the
// opcode (mp_trailer_bytes); its length follows from the opcode. Layout, network byte
// order:
//
//   data trailer (8 bytes): MSN (24) | iPSN (24) | flags (8) | reserved (8)
//     flags: bit 0 ReTx, bit 1 synchronise, bit 2 tail of message. MP-RDMA
//     READ and atomic requests and their responses (READ RESPONSE, ATOMIC
//     ACKNOWLEDGE) carry it too (READ as data: a response's MSN is the PSN
//     of its request, iPSN its index in the READ, 0 for an atomic; a
//     request's MSN is the PSN at which its requester's receiver expects
//     the responder's stream to begin, for a responder still in RTR)
//   ACK trailer (12 bytes): echo VP (16) | SACK PSN (24) | AACK PSN (24) |
//     flags (8) | reserved (24); flags: bit 0 ECE, bit 1 ReTx, bit 2 NACK,
//     bit 3 READ: a Read (N)ACK, sent by a requester to acknowledge READ
//     responses (IRN's explicit READ acknowledgements; AACK: every response
//     up to it arrived, SACK: the response this one is for)
#pragma once

#include <cstddef>
#include <cstdint>

#include "vp/net/roce_codec.h"

namespace mprdma::net {

constexpr size_t kMpDataExtBytes = kTrailerDataBytes;
constexpr size_t kMpAckExtBytes = kTrailerAckBytes;

struct MpDataExt {
  uint32_t msn = 0;   // 24 bits
  uint32_t ipsn = 0;  // 24 bits
  bool retx = false, sync = false, tail = false;
};

struct MpAckExt {
  uint16_t echo_vp = 0;
  uint32_t sack = 0;  // 24 bits
  uint32_t aack = 0;  // 24 bits
  bool ece = false, retx = false, nack = false;
  bool read = false;  // a Read (N)ACK (requester -> responder)
};

// Write the trailer into `dst` (its size in bytes). Throw
// std::invalid_argument for a 24-bit field out of range.
void put_mp_data_ext(uint8_t* dst, const MpDataExt& e);
void put_mp_ack_ext(uint8_t* dst, const MpAckExt& e);
// Read it back; false when a reserved bit or byte is set (a malformed or
// foreign trailer).
bool get_mp_data_ext(const uint8_t* src, MpDataExt& e);
bool get_mp_ack_ext(const uint8_t* src, MpAckExt& e);

// Trailer bytes an out-of-order connection's packet of this opcode ends in:
// the data trailer on SEND and RDMA WRITE packets, the ACK trailer on ACKs
// and NAKs, none on the others (a CNP is no RC opcode). `write_trailer`
// false (IRN): a WRITE packet without immediate carries none. It is placed
// by its own RETH and completes nothing; IRN needs neither MP-RDMA's ReTx
// and synchronise bits nor a message number for it (its extension is the
// RETH in every packet, "up to 16 bytes"). The tail of a WRITE with
// immediate keeps it: its RECV message number and index. `read_data`
// (MP-RDMA, TransportEngine::read_as_data): READ and atomic requests and
// their responses are data packets and carry the data trailer too (a
// response's message number is its request's PSN, its index the
// response's number in the READ; an atomic has one).
inline size_t mp_trailer_bytes(Opcode op, bool write_trailer = true, bool read_data = false) {
  if (op == Opcode::ACKNOWLEDGE) return kMpAckExtBytes;
  if (read_data && ((op >= Opcode::RDMA_READ_REQUEST && op <= Opcode::RDMA_READ_RESPONSE_ONLY) ||
                    (op >= Opcode::ATOMIC_ACKNOWLEDGE && op <= Opcode::FETCH_ADD)))
    return kMpDataExtBytes;
  if (op > Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE) return 0;
  const bool plain_write = op >= Opcode::RDMA_WRITE_FIRST &&
                           op != Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE &&
                           op != Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
  return plain_write && !write_trailer ? 0 : kMpDataExtBytes;
}

// Where the trailer of a frame parse_roce(..., trailer_len) accepted
// starts.
inline const uint8_t* trailer_of(const uint8_t* frame, const RoceFields& f) {
  return frame + f.payload_offset + f.payload_len;
}

}  // namespace mprdma::net
