// Integration: Wireshark's InfiniBand dissector (tshark) decodes the UC
// SENDs and RDMA WRITEs build_roce() makes (BTH opcodes 32..43, the RETH on
// a WRITE's first packet, the immediate on the last) and reports no
// malformed packet: independent evidence of the UC opcode table.
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

TEST(UcTshark, DecodesEveryUcOpcode) {
  ASSERT_EQ(access(kTshark, X_OK), 0)
      << kTshark << " is missing: install the Debian package 'tshark' (this test does not skip)";
  const std::string path =
      ::testing::TempDir() + "/mprdma_uc_" + std::to_string(::getpid()) + ".pcap";
  {
    PcapWriter w(path);
    RoceFields f;
    f.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
    f.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
    f.src_ip = 0x0A000001;
    f.dst_ip = 0x0A000002;
    f.dest_qp = 0x000123;
    f.reth_va = 0x1000;
    f.reth_rkey = 0x2222;
    f.reth_dma_len = 3000;
    f.imm = 0xCAFEF00D;
    const std::vector<uint8_t> payload(64, 0x5A);
    for (int v = 0x20; v <= 0x2B; ++v) {
      f.opcode = static_cast<Opcode>(v);
      f.psn = static_cast<uint32_t>(v);
      const PacketPtr p = build_roce(f, payload.data(), payload.size());
      w.write(1000000u * static_cast<uint64_t>(v), p->data.data(), p->data.size());
    }
  }
  const std::string read = std::string(kTshark) + " -n -r '" + path + "'";
  const CmdResult fields = run(read +
                               " -T fields -E separator=, -e infiniband.bth.opcode"
                               " -e infiniband.bth.psn -e infiniband.reth.dmalen"
                               " -e infiniband.immdt 2>/dev/null");
  ASSERT_EQ(fields.status, 0) << "tshark failed on " << path;
  const auto rows = lines(fields.out);
  ASSERT_EQ(rows.size(), 12u) << fields.out;
  for (int v = 0x20; v <= 0x2B; ++v) {
    const std::string& row = rows[static_cast<size_t>(v - 0x20)];
    const std::string want = std::to_string(v) + "," + std::to_string(v) + ",";
    EXPECT_EQ(row.substr(0, want.size()), want) << row;
    const auto op = static_cast<Opcode>(v);
    // A RETH (DMA length 3000) exactly on the WRITE FIRST/ONLY packets; the
    // immediate exactly on the *_WITH_IMMEDIATE ones.
    EXPECT_EQ(row.find(",3000,") != std::string::npos, has_reth(op)) << row;
    EXPECT_EQ(row.find("ca:fe:f0:0d") != std::string::npos ||
                  row.find("cafef00d") != std::string::npos ||
                  row.find("0xcafef00d") != std::string::npos,
              has_imm(op))
        << row;
  }
  const CmdResult malformed = run(read + " -Y _ws.malformed 2>/dev/null");
  EXPECT_EQ(malformed.status, 0);
  EXPECT_TRUE(lines(malformed.out).empty()) << "malformed:\n" << malformed.out;
  if (!HasFailure()) std::remove(path.c_str());
}

}  // namespace
}  // namespace mprdma::net
