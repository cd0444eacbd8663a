// Integration: Wireshark's InfiniBand dissector (tshark) decodes the UD
// SENDs build_roce() makes (BTH opcodes 100 and 101, then the DETH with the
// Q_Key and the source QP, then the immediate) and reports no malformed
// packet: independent evidence of the DETH layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tshark_util.h"
#include "vp/net/pcap_writer.h"
#include "vp/net/roce_codec.h"

namespace mprdma::net {
namespace {

using test::CmdResult;
using test::kTshark;
using test::lines;
using test::run;

TEST(UdTshark, DecodesBthAndDeth) {
  ASSERT_EQ(access(kTshark, X_OK), 0)
      << kTshark << " is missing: install the Debian package 'tshark' (this test does not skip)";
  const std::string path =
      ::testing::TempDir() + "/mprdma_ud_" + std::to_string(::getpid()) + ".pcap";
  {
    PcapWriter w(path);
    RoceFields f;
    f.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
    f.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
    f.src_ip = 0x0A000001;
    f.dst_ip = 0x0A000002;
    f.dest_qp = 0x000123;
    f.psn = 0x000456;
    f.deth_qkey = 0x11111111;
    f.deth_src_qp = 0xABCDEF;
    const std::vector<uint8_t> payload(60, 0x5A);
    f.opcode = Opcode::UD_SEND_ONLY;
    const PacketPtr a = build_roce(f, payload.data(), payload.size());
    w.write(1000000, a->data.data(), a->data.size());
    f.opcode = Opcode::UD_SEND_ONLY_WITH_IMMEDIATE;
    f.imm = 0xCAFEF00D;
    f.deth_qkey = 0x80010002;
    const PacketPtr b = build_roce(f, payload.data(), 7);
    w.write(2000000, b->data.data(), b->data.size());
  }
  const std::string read = std::string(kTshark) + " -n -r '" + path + "'";
  const CmdResult fields =
      run(read +
          " -T fields -E separator=, -e infiniband.bth.opcode -e infiniband.bth.destqp"
          " -e infiniband.bth.psn -e infiniband.deth.q_key -e infiniband.deth.srcqp"
          " -e infiniband.invariant.crc 2>/dev/null");
  ASSERT_EQ(fields.status, 0) << "tshark failed on " << path;
  const auto rows = lines(fields.out);
  ASSERT_EQ(rows.size(), 2u) << fields.out;
  // Wireshark 4.0 prints the Q_Key as 64 bits and the source QP as 32.
  const std::string want0 = "100,0x000123,1110,0x0000000011111111,0x00abcdef,";
  const std::string want1 = "101,0x000123,1110,0x0000000080010002,0x00abcdef,";
  EXPECT_EQ(rows[0].substr(0, want0.size()), want0) << rows[0];
  EXPECT_EQ(rows[1].substr(0, want1.size()), want1) << rows[1];
  const CmdResult malformed = run(read + " -Y _ws.malformed 2>/dev/null");
  EXPECT_EQ(malformed.status, 0);
  EXPECT_TRUE(lines(malformed.out).empty()) << "malformed:\n" << malformed.out;
  if (!HasFailure()) std::remove(path.c_str());
}

}  // namespace
}  // namespace mprdma::net
