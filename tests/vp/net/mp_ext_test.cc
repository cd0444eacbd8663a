// MP-RDMA / IRN per-packet fields as a RoCEv2 payload trailer: field round
// trips, reserved bits, and whole frames (a WRITE with data and a data
// trailer, an ACK with an ACK trailer) that build, carry a valid ICRC and
// parse back with the trailer separated from the payload.
#include "vp/net/mp_ext.h"

#include <gtest/gtest.h>

#include <vector>

#include "vp/net/icrc.h"

namespace mprdma::net {
namespace {

TEST(MpExt, DataTrailerRoundTripsEveryField) {
  MpDataExt e;
  e.msn = 0xABCDEF;
  e.ipsn = 0x012345;
  e.retx = true;
  e.tail = true;
  uint8_t b[kMpDataExtBytes];
  put_mp_data_ext(b, e);
  EXPECT_EQ(b[0], 0xAB);
  EXPECT_EQ(b[5], 0x45);
  EXPECT_EQ(b[6], 0x05);  // ReTx | tail
  MpDataExt r;
  ASSERT_TRUE(get_mp_data_ext(b, r));
  EXPECT_EQ(r.msn, e.msn);
  EXPECT_EQ(r.ipsn, e.ipsn);
  EXPECT_TRUE(r.retx);
  EXPECT_FALSE(r.sync);
  EXPECT_TRUE(r.tail);
  b[7] = 1;  // reserved
  EXPECT_FALSE(get_mp_data_ext(b, r));
  e.msn = 0x1000000;
  EXPECT_THROW(put_mp_data_ext(b, e), std::invalid_argument);
}

TEST(MpExt, AckTrailerRoundTripsEveryField) {
  MpAckExt e;
  e.echo_vp = 0xC0DE;
  e.sack = 0x00FFFE;
  e.aack = 0x00FFFD;
  e.ece = true;
  e.nack = true;
  uint8_t b[kMpAckExtBytes];
  put_mp_ack_ext(b, e);
  MpAckExt r;
  ASSERT_TRUE(get_mp_ack_ext(b, r));
  EXPECT_EQ(r.echo_vp, 0xC0DE);
  EXPECT_EQ(r.sack, 0x00FFFEu);
  EXPECT_EQ(r.aack, 0x00FFFDu);
  EXPECT_TRUE(r.ece);
  EXPECT_FALSE(r.retx);
  EXPECT_TRUE(r.nack);
  EXPECT_FALSE(r.read);
  // A Read (N)ACK sets bit 3 of the flags.
  e.read = true;
  put_mp_ack_ext(b, e);
  EXPECT_EQ(b[8], 0x0d);
  ASSERT_TRUE(get_mp_ack_ext(b, r));
  EXPECT_TRUE(r.read);
  EXPECT_TRUE(r.nack);
  b[8] |= 0x80;
  EXPECT_FALSE(get_mp_ack_ext(b, r));
  b[8] = 0x10;  // bits 4-7 stay reserved
  EXPECT_FALSE(get_mp_ack_ext(b, r));
}

RoceFields base(Opcode op) {
  RoceFields f;
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000002;
  f.opcode = op;
  f.dest_qp = 0x000123;
  f.psn = 77;
  f.udp_sport = 0xC555;
  return f;
}

TEST(MpExt, TrailerBytesFollowTheOpcodeAndTheEngine) {
  // MP-RDMA: every SEND and WRITE packet, every ACK.
  for (Opcode op : {Opcode::SEND_FIRST, Opcode::SEND_ONLY_WITH_IMMEDIATE, Opcode::RDMA_WRITE_ONLY,
                    Opcode::RDMA_WRITE_MIDDLE, Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE})
    EXPECT_EQ(mp_trailer_bytes(op), kMpDataExtBytes) << int(op);
  EXPECT_EQ(mp_trailer_bytes(Opcode::ACKNOWLEDGE), kMpAckExtBytes);
  // IRN: no data trailer on a WRITE without immediate; SENDs, the tail of a
  // WRITE with immediate and ACKs keep theirs.
  for (Opcode op : {Opcode::RDMA_WRITE_FIRST, Opcode::RDMA_WRITE_MIDDLE, Opcode::RDMA_WRITE_LAST,
                    Opcode::RDMA_WRITE_ONLY})
    EXPECT_EQ(mp_trailer_bytes(op, false), 0u) << int(op);
  for (Opcode op : {Opcode::SEND_MIDDLE, Opcode::SEND_LAST_WITH_IMMEDIATE,
                    Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE, Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE})
    EXPECT_EQ(mp_trailer_bytes(op, false), kMpDataExtBytes) << int(op);
  EXPECT_EQ(mp_trailer_bytes(Opcode::ACKNOWLEDGE, false), kMpAckExtBytes);
  // IRN: no READ, response or atomic carries one.
  for (bool w : {true, false})
    for (Opcode op : {Opcode::RDMA_READ_REQUEST, Opcode::RDMA_READ_RESPONSE_ONLY,
                      Opcode::COMPARE_SWAP, Opcode::ATOMIC_ACKNOWLEDGE})
      EXPECT_EQ(mp_trailer_bytes(op, w), 0u) << int(op);
  // MP-RDMA (READ as data): READ and atomic requests and every response do.
  for (Opcode op : {Opcode::RDMA_READ_REQUEST, Opcode::RDMA_READ_RESPONSE_FIRST,
                    Opcode::RDMA_READ_RESPONSE_MIDDLE, Opcode::RDMA_READ_RESPONSE_LAST,
                    Opcode::RDMA_READ_RESPONSE_ONLY, Opcode::COMPARE_SWAP, Opcode::FETCH_ADD,
                    Opcode::ATOMIC_ACKNOWLEDGE})
    EXPECT_EQ(mp_trailer_bytes(op, true, true), kMpDataExtBytes) << int(op);
  EXPECT_EQ(mp_trailer_bytes(Opcode::ACKNOWLEDGE, true, true), kMpAckExtBytes);
}

TEST(MpExt, AWriteCarriesDataThenTrailerUnderTheIcrc) {
  RoceFields f = base(Opcode::RDMA_WRITE_MIDDLE);
  std::vector<uint8_t> body(1021);  // not a multiple of 4: a pad follows the trailer
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 7);
  MpDataExt e;
  e.msn = 9;
  e.ipsn = 3;
  e.sync = true;
  body.resize(body.size() + kMpDataExtBytes);
  put_mp_data_ext(body.data() + 1021, e);
  f.trailer_len = kMpDataExtBytes;
  PacketPtr p = build_roce(f, body.data(), body.size());

  RoceFields g;
  ASSERT_EQ(parse_roce(p->data.data(), p->data.size(), g, kMpDataExtBytes), ParseStatus::ok);
  EXPECT_EQ(g.payload_len, 1021u);
  EXPECT_EQ(g.trailer_len, kMpDataExtBytes);
  EXPECT_EQ(p->data[g.payload_offset + 1020], static_cast<uint8_t>(1020 * 7));
  MpDataExt r;
  ASSERT_TRUE(get_mp_data_ext(trailer_of(p->data.data(), g), r));
  EXPECT_EQ(r.msn, 9u);
  EXPECT_EQ(r.ipsn, 3u);
  EXPECT_TRUE(r.sync);
  // The packet says it carries a trailer (BTH byte 8, a reserved bit): a
  // parser that does not know the connection finds it all the same.
  EXPECT_EQ(p->data[kBthOffset + 8] & kBthTrailerFlag, kBthTrailerFlag);
  RoceFields plain;
  ASSERT_EQ(parse_roce(*p, plain), ParseStatus::ok);
  EXPECT_EQ(plain.payload_len, 1021u);
  EXPECT_EQ(plain.trailer_len, kMpDataExtBytes);
  // Told there is none, it sees payload (trailer included) under the same
  // valid ICRC.
  ASSERT_EQ(parse_roce(p->data.data(), p->data.size(), plain, 0), ParseStatus::ok);
  EXPECT_EQ(plain.payload_len, 1021u + kMpDataExtBytes);
  // The ICRC covers the trailer: flip one of its bits and the frame fails.
  p->data[g.payload_offset + 1021 + 1] ^= 0x10;
  EXPECT_EQ(parse_roce(p->data.data(), p->data.size(), g, kMpDataExtBytes), ParseStatus::bad_icrc);
}

TEST(MpExt, AnAckCarriesItsTrailerAsItsWholePayloadArea) {
  RoceFields f = base(Opcode::ACKNOWLEDGE);
  f.trailer_len = kMpAckExtBytes;
  MpAckExt e;
  e.echo_vp = 0xC777;
  e.sack = 80;
  e.aack = 78;
  uint8_t t[kMpAckExtBytes];
  put_mp_ack_ext(t, e);
  PacketPtr p = build_roce(f, t, sizeof t);
  RoceFields g;
  ASSERT_EQ(parse_roce(p->data.data(), p->data.size(), g, kMpAckExtBytes), ParseStatus::ok);
  EXPECT_EQ(g.payload_len, 0u);
  MpAckExt r;
  ASSERT_TRUE(get_mp_ack_ext(trailer_of(p->data.data(), g), r));
  EXPECT_EQ(r.echo_vp, 0xC777);
  EXPECT_EQ(r.aack, 78u);
  // The flag gives the parser the ACK trailer's length.
  ASSERT_EQ(parse_roce(*p, g), ParseStatus::ok);
  EXPECT_EQ(g.trailer_len, kMpAckExtBytes);
  // Told there is no trailer, an ACK with bytes after its AETH is malformed;
  // and payload beyond the trailer on an ACK is refused.
  EXPECT_EQ(parse_roce(p->data.data(), p->data.size(), g, 0), ParseStatus::bad_length);
  EXPECT_EQ(parse_roce(p->data.data(), p->data.size(), g, 4), ParseStatus::bad_length);
  uint8_t more[kMpAckExtBytes + 4] = {};
  EXPECT_THROW(build_roce(f, more, sizeof more), std::invalid_argument);
  f.trailer_len = 40;
  EXPECT_THROW(build_roce(f, t, sizeof t), std::invalid_argument);
}

TEST(MpExt, TheTrailerFlagIsSetOnlyWithATrailerAndTheIcrcCoversIt) {
  RoceFields f = base(Opcode::RDMA_WRITE_ONLY);
  std::vector<uint8_t> body(64, 3);
  PacketPtr plain = build_roce(f, body.data(), body.size());
  EXPECT_EQ(plain->data[kBthOffset + 8] & kBthTrailerFlag, 0);
  RoceFields g;
  ASSERT_EQ(parse_roce(*plain, g), ParseStatus::ok);
  EXPECT_EQ(g.trailer_len, 0u);
  EXPECT_EQ(g.payload_len, 64u);
  // Setting the flag on the wire without resealing: the ICRC (which masks
  // only BTH byte 4) catches it, so a flipped flag cannot re-frame a packet.
  plain->data[kBthOffset + 8] |= kBthTrailerFlag;
  EXPECT_EQ(parse_roce(*plain, g), ParseStatus::bad_icrc);
}

TEST(MpExt, AFrameShorterThanItsTrailerIsBadLength) {
  RoceFields f = base(Opcode::RDMA_WRITE_ONLY);
  std::vector<uint8_t> four(4, 1);
  PacketPtr p = build_roce(f, four.data(), four.size());
  RoceFields g;
  EXPECT_EQ(parse_roce(p->data.data(), p->data.size(), g, kMpDataExtBytes),
            ParseStatus::bad_length);
}

}  // namespace
}  // namespace mprdma::net
