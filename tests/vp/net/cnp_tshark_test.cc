// Integration: Wireshark's InfiniBand dissector (tshark) decodes the CNPs
// build_cnp() makes as RoCEv2 with BTH opcode 129, the P_Key, destination
// QP and PSN built, followed by the 16 reserved zero bytes and the ICRC, and
// reports no malformed packet. Independent evidence of the byte layout.
// Wireshark 4.0 (Debian 12) has no name for opcode 129 ("Unknown (129)",
// the rest shown as vendor data); later versions call it CNP: either is
// accepted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tshark_util.h"
#include "vp/net/cnp.h"
#include "vp/net/pcap_writer.h"

namespace mprdma::net {
namespace {

using test::CmdResult;
using test::kTshark;
using test::lines;
using test::run;

TEST(CnpTshark, DecodesAsRoceCnp) {
  ASSERT_EQ(access(kTshark, X_OK), 0)
      << kTshark << " is missing: install the Debian package 'tshark' (this test does not skip)";
  const std::string path =
      ::testing::TempDir() + "/mprdma_cnp_" + std::to_string(::getpid()) + ".pcap";
  const std::vector<uint32_t> qpns = {0x000011, 0x00ABCD, 0xFFFFFE};
  std::vector<std::string> tails;  // 16 reserved bytes + ICRC, as hex
  {
    PcapWriter w(path);
    uint64_t t = 0;
    for (uint32_t qpn : qpns) {
      RoceFields f;
      f.src_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x02}};
      f.dst_mac = MacAddr{{0x02, 0, 0, 0, 0, 0x01}};
      f.src_ip = 0x0A000002;
      f.dst_ip = 0x0A000001;
      f.dscp = 48;
      f.dest_qp = qpn;
      f.ip_id = static_cast<uint16_t>(qpn);
      const PacketPtr p = build_cnp(f);
      std::ostringstream hex;
      hex << std::hex;
      for (size_t i = kExtOffset; i < p->data.size(); ++i) {
        hex.width(2);
        hex.fill('0');
        hex << static_cast<int>(p->data[i]);
      }
      tails.push_back(hex.str());
      w.write(t += 1000000, p->data.data(), p->data.size());
    }
  }
  const std::string read = std::string(kTshark) + " -n -r '" + path + "'";
  const CmdResult fields = run(read +
                               " -T fields -E separator=, -e udp.dstport -e infiniband.bth.opcode"
                               " -e infiniband.bth.p_key -e infiniband.bth.destqp"
                               " -e infiniband.bth.psn -e infiniband.vendor 2>/dev/null");
  ASSERT_EQ(fields.status, 0) << "tshark failed on " << path;
  const auto rows = lines(fields.out);
  ASSERT_EQ(rows.size(), qpns.size()) << fields.out;
  for (size_t i = 0; i < qpns.size(); ++i) {
    std::ostringstream want;
    want << "4791,129,65535,0x" << std::hex;
    want.width(6);
    want.fill('0');
    want << qpns[i] << std::dec << ",0,";
    EXPECT_EQ(tails[i].substr(0, 32), std::string(32, '0'));
    // The bytes after the BTH end the row as vendor data (Wireshark 4.0
    // lists a vendor field twice; the last one holds the bytes).
    EXPECT_EQ(rows[i].substr(0, want.str().size()), want.str()) << "frame " << i;
    EXPECT_EQ(rows[i].substr(rows[i].size() - tails[i].size()), tails[i]) << "frame " << i;
  }
  const CmdResult verbose = run(read + " -V -c 1 2>/dev/null");
  EXPECT_TRUE(verbose.out.find("CNP") != std::string::npos ||
              verbose.out.find("Unknown (129)") != std::string::npos)
      << verbose.out;

  const CmdResult malformed = run(read + " -Y _ws.malformed 2>/dev/null");
  EXPECT_EQ(malformed.status, 0);
  EXPECT_TRUE(lines(malformed.out).empty()) << "malformed:\n" << malformed.out;
  if (!HasFailure()) std::remove(path.c_str());
}

}  // namespace
}  // namespace mprdma::net
