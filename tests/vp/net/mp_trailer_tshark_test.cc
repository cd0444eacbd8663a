// Integration: tools/wireshark/mprdma_trailer.lua, run by the external
// tshark, decodes the MP-RDMA/IRN trailers of a capture to the values the
// codec wrote (vp/net/mp_ext.h), leaves plain RoCEv2 packets alone, never
// takes payload for a trailer in its default mode, and says so when the
// snaplen cut the trailer off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tshark_util.h"
#include "vp/net/mp_ext.h"
#include "vp/net/pcap_writer.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {
namespace {

using test::CmdResult;
using test::kTshark;
using test::lines;
using test::run;

RoceFields fields(Opcode op, uint32_t psn) {
  RoceFields f;
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000002;
  f.opcode = op;
  f.dest_qp = 0x000123;
  f.psn = psn;
  f.udp_sport = 0xC005;
  return f;
}

PacketPtr data_packet(Opcode op, size_t payload, const MpDataExt& e) {
  RoceFields f = fields(op, 100);
  if (op == Opcode::RDMA_WRITE_ONLY) {
    f.reth_va = 0x10000;
    f.reth_rkey = 0x77;
    f.reth_dma_len = static_cast<uint32_t>(payload);
  }
  std::vector<uint8_t> body(payload + kMpDataExtBytes, 0xab);
  put_mp_data_ext(body.data() + payload, e);
  f.trailer_len = kMpDataExtBytes;
  return build_roce(f, body.data(), body.size());
}

PacketPtr ack_packet(const MpAckExt* e) {
  RoceFields f = fields(Opcode::ACKNOWLEDGE, 99);
  if (!e) return build_roce(f, nullptr, 0);
  uint8_t t[kMpAckExtBytes];
  put_mp_ack_ext(t, *e);
  f.trailer_len = kMpAckExtBytes;
  return build_roce(f, t, sizeof t);
}

std::string script() {
  const char* root = std::getenv("MPRDMA_SOURCE_DIR");
  return std::string(root ? root : MPRDMA_SOURCE_DIR_STR) + "/tools/wireshark/mprdma_trailer.lua";
}

class TrailerTshark : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(kTshark, X_OK), 0)
        << kTshark << " is missing: install the Debian package 'tshark' (this test does not skip)";
    ASSERT_EQ(access(script().c_str(), R_OK), 0) << script();
  }
  // Writes the frames with `snaplen` and returns the capture's path.
  std::string capture(const std::vector<PacketPtr>& frames, uint32_t snaplen) {
    const std::string path = ::testing::TempDir() + "/mprdma_trailer_" +
                             std::to_string(::getpid()) + "_" + std::to_string(snaplen) + ".pcap";
    PcapWriter w(path, snaplen);
    for (size_t i = 0; i < frames.size(); ++i)
      w.write(1000 * (i + 1), frames[i]->data.data(), frames[i]->data.size());
    paths_.push_back(path);
    return path;
  }
  // tshark's field columns for every frame, with the trailer script.
  std::vector<std::string> decode(const std::string& path, const std::string& mode,
                                  const std::string& columns) {
    // tshark's stderr (a Lua error, say) goes to a file the failure shows.
    const std::string err = path + ".stderr";
    const CmdResult r =
        run(std::string(kTshark) + " -n --disable-protocol rpcordma -X lua_script:'" + script() +
            "' -o mprdma_trailer.mode:" + mode + " -r '" + path + "' -T fields -E separator=, " +
            columns + " 2>'" + err + "'");
    const CmdResult stderr_text = run("grep -v 'Running as user' '" + err + "'");
    EXPECT_EQ(r.status, 0) << stderr_text.out;
    EXPECT_EQ(stderr_text.out, "") << "tshark complained";
    std::remove(err.c_str());
    return lines(r.out);
  }
  void TearDown() override {
    if (!HasFailure())
      for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

const std::string kDataColumns =
    "-e frame.number -e mprdma_trailer.msn -e mprdma_trailer.ipsn -e mprdma_trailer.retx "
    "-e mprdma_trailer.sync -e mprdma_trailer.tail";
const std::string kAckColumns =
    "-e frame.number -e mprdma_trailer.echo_vp -e mprdma_trailer.sack -e mprdma_trailer.aack "
    "-e mprdma_trailer.ece -e mprdma_trailer.ack_retx -e mprdma_trailer.nack";

std::vector<PacketPtr> frames() {
  MpDataExt w;  // a retransmitted WRITE, packet 3 of message 9, its tail
  w.msn = 9;
  w.ipsn = 3;
  w.retx = true;
  w.tail = true;
  MpDataExt s;  // a synchronise SEND of 21 bytes (a pad follows the trailer)
  s.msn = 0x123456;
  s.ipsn = 0;
  s.sync = true;
  MpAckExt a;
  a.echo_vp = 0xC777;
  a.sack = 80;
  a.aack = 0xFFFFFE;
  a.ece = true;
  a.nack = true;
  std::vector<PacketPtr> v;
  v.push_back(data_packet(Opcode::RDMA_WRITE_ONLY, 100, w));
  v.push_back(data_packet(Opcode::SEND_ONLY, 21, s));
  v.push_back(ack_packet(&a));
  v.push_back(ack_packet(nullptr));
  return v;
}

TEST_F(TrailerTshark, DecodesDataAndAckTrailersAsWritten) {
  const std::string path = capture(frames(), 0);
  const auto data = decode(path, "all", kDataColumns);
  ASSERT_EQ(data.size(), 4u);
  EXPECT_EQ(data[0], "1,9,3,1,0,1");
  EXPECT_EQ(data[1], "2,1193046,0,0,1,0");
  EXPECT_EQ(data[2], "3,,,,,");
  EXPECT_EQ(data[3], "4,,,,,");
  const auto acks = decode(path, "all", kAckColumns);
  ASSERT_EQ(acks.size(), 4u);
  EXPECT_EQ(acks[2], "3,0xc777,80,16777214,1,0,1");
  EXPECT_EQ(acks[3], "4,,,,,,") << "a plain RoCEv2 ACK has no trailer";
}

TEST_F(TrailerTshark, DefaultModeDecodesOnlyUnambiguousAcks) {
  const std::string path = capture(frames(), 0);
  const auto data = decode(path, "acks", kDataColumns);
  ASSERT_EQ(data.size(), 4u);
  EXPECT_EQ(data[0], "1,,,,,") << "payload bytes are not taken for a trailer";
  EXPECT_EQ(data[1], "2,,,,,");
  const auto acks = decode(path, "acks", kAckColumns);
  ASSERT_EQ(acks.size(), 4u);
  EXPECT_EQ(acks[2], "3,0xc777,80,16777214,1,0,1");
  const auto off = decode(path, "off", kAckColumns);
  ASSERT_EQ(off.size(), 4u);
  EXPECT_EQ(off[2], "3,,,,,,");
}

// IRN's Read (N)ACK: the READ flag (bit 3) is decoded; it is not reserved.
TEST_F(TrailerTshark, DecodesTheReadFlagOfAReadNack) {
  MpAckExt a;
  a.sack = 7;
  a.aack = 5;
  a.nack = true;
  a.read = true;
  MpAckExt b = a;  // an ordinary NACK
  b.read = false;
  std::vector<PacketPtr> v;
  v.push_back(ack_packet(&a));
  v.push_back(ack_packet(&b));
  const std::string path = capture(v, 0);
  const auto rows = decode(path, "acks",
                           "-e frame.number -e mprdma_trailer.sack -e mprdma_trailer.nack "
                           "-e mprdma_trailer.read -e _ws.expert.message");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], "1,7,1,1,") << "no expert info: bit 3 is not reserved";
  EXPECT_EQ(rows[1], "2,7,1,0,");
}

// Mode irn: IRN's plain WRITE packets have no trailer (their last payload
// bytes are data), its SENDs and the tail of a WRITE with immediate do.
TEST_F(TrailerTshark, IrnModeDecodesSendsAndImmediateTailsNotPlainWrites) {
  MpDataExt imm;  // the tail of a WRITE with immediate: RECV message 4
  imm.msn = 4;
  imm.ipsn = 2;
  imm.tail = true;
  RoceFields plain = fields(Opcode::RDMA_WRITE_ONLY, 100);
  plain.reth_va = 0x10000;
  plain.reth_rkey = 0x77;
  plain.reth_dma_len = 100;
  const std::vector<uint8_t> payload(100, 0xab);  // reserved bits set if misread
  std::vector<PacketPtr> v = frames();
  v[0] = build_roce(plain, payload.data(), payload.size());
  v.push_back(data_packet(Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE, 64, imm));
  const std::string path = capture(v, 0);
  const auto data = decode(path, "irn", kDataColumns + " -e _ws.expert.message");
  ASSERT_EQ(data.size(), 5u);
  EXPECT_EQ(data[0], "1,,,,,,") << "a plain WRITE's payload is not a trailer";
  EXPECT_EQ(data[1], "2,1193046,0,0,1,0,");
  EXPECT_EQ(data[4], "5,4,2,0,0,1,");
  const auto all = decode(path, "all", kDataColumns + " -e _ws.expert.message");
  ASSERT_EQ(all.size(), 5u);
  EXPECT_NE(all[0].find("Reserved trailer bits set"), std::string::npos)
      << "mode all takes the payload for a trailer and says it looks wrong: " << all[0];
}

// MP-RDMA's READ and atomics travel as data: the request (no payload) and
// every response carry the data trailer, a response's message number being
// its request's PSN; mode all decodes them, mode irn leaves them alone.
TEST_F(TrailerTshark, ModeAllDecodesMprdmaReadRequestsAndResponses) {
  RoceFields req = fields(Opcode::RDMA_READ_REQUEST, 500);
  req.reth_va = 0x20000;
  req.reth_rkey = 0x55;
  req.reth_dma_len = 3000;
  MpDataExt r;
  r.tail = true;
  r.retx = true;
  uint8_t t[kMpDataExtBytes];
  put_mp_data_ext(t, r);
  req.trailer_len = kMpDataExtBytes;
  MpDataExt mid;  // response 1 of the READ at PSN 500
  mid.msn = 500;
  mid.ipsn = 1;
  MpDataExt last = mid;  // response 2, its tail, 952 bytes
  last.ipsn = 2;
  last.tail = true;
  // An atomic's response: the original value in its AtomicAckETH, then the
  // trailer (message number: the atomic's PSN, 600).
  RoceFields ack = fields(Opcode::ATOMIC_ACKNOWLEDGE, 77);
  ack.atomic_ack_orig = 0x1122334455667788ull;
  MpDataExt a;
  a.msn = 600;
  a.tail = true;
  uint8_t at[kMpDataExtBytes];
  put_mp_data_ext(at, a);
  ack.trailer_len = kMpDataExtBytes;
  std::vector<PacketPtr> v;
  v.push_back(build_roce(req, t, sizeof t));
  v.push_back(data_packet(Opcode::RDMA_READ_RESPONSE_MIDDLE, 1024, mid));
  v.push_back(data_packet(Opcode::RDMA_READ_RESPONSE_LAST, 952, last));
  v.push_back(build_roce(ack, at, sizeof at));
  const std::string path = capture(v, 0);
  const auto all = decode(path, "all", kDataColumns + " -e _ws.expert.message");
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], "1,0,0,1,0,1,");
  EXPECT_EQ(all[1], "2,500,1,0,0,0,");
  EXPECT_EQ(all[2], "3,500,2,0,0,1,");
  EXPECT_EQ(all[3], "4,600,0,0,0,1,");
  const auto irn = decode(path, "irn", kDataColumns);
  ASSERT_EQ(irn.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(irn[i], std::to_string(i + 1) + ",,,,,") << i;
}

TEST_F(TrailerTshark, ATrailerBeyondTheSnaplenIsReportedNotMisread) {
  // 96 bytes keep the ACKs whole but not the WRITE's trailer.
  const std::string path = capture(frames(), 96);
  const auto data = decode(path, "all", kDataColumns + " -e _ws.expert.message");
  ASSERT_EQ(data.size(), 4u);
  EXPECT_NE(data[0].find("1,,,,,"), std::string::npos) << data[0];
  EXPECT_NE(data[0].find("snaplen"), std::string::npos) << data[0];
  EXPECT_EQ(data[1].rfind("2,1193046,0,0,1,0", 0), 0u) << data[1];
  const auto acks = decode(path, "all", kAckColumns);
  EXPECT_EQ(acks.at(2), "3,0xc777,80,16777214,1,0,1");
}

}  // namespace
}  // namespace mprdma::net
