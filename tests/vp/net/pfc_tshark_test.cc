// Integration: Wireshark's MAC Control dissector (tshark) decodes the PFC
// frames build_pfc() makes as 802.1Qbb class-based flow control with the
// class-enable vector and pause times built, and reports no malformed
// packet or expert error (it checks the destination address and the
// reserved bits of the vector). Independent evidence of the byte layout.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tshark_util.h"
#include "vp/net/pcap_writer.h"
#include "vp/net/pfc.h"

namespace mprdma::net {
namespace {

using test::CmdResult;
using test::kTshark;
using test::lines;
using test::run;

TEST(PfcTshark, DecodesAsPriorityFlowControl) {
  ASSERT_EQ(access(kTshark, X_OK), 0)
      << kTshark << " is missing: install the Debian package 'tshark' (this test does not skip)";
  const std::string path =
      ::testing::TempDir() + "/mprdma_pfc_" + std::to_string(::getpid()) + ".pcap";
  struct Built {
    uint16_t mask;
    std::array<uint16_t, 8> quanta;
  };
  const std::vector<Built> built = {
      {0x08, {0, 0, 0, 0xFFFF, 0, 0, 0, 0}},   // XOFF on priority 3
      {0x08, {}},                              // XON on priority 3
      {0xFF, {1, 2, 3, 4, 5, 6, 7, 8}},        // every class
      {0x81, {100, 0, 0, 0, 0, 0, 0, 65534}},  // classes 0 and 7
  };
  {
    PcapWriter w(path);
    const MacAddr src{{0x02, 0x00, 0x00, 0x00, 0x10, 0x01}};
    uint64_t t = 0;
    for (const Built& b : built) {
      const PacketPtr p = build_pfc(src, b.mask, b.quanta);
      w.write(t += 1000000, p->data.data(), p->data.size());
    }
  }
  const std::string read = std::string(kTshark) + " -n -r '" + path + "'";
  std::string cmd = read + " -T fields -E separator=, -e eth.type -e macc.opcode -e macc.cbfc.enbv";
  for (int i = 0; i < 8; ++i) cmd += " -e macc.cbfc.pause_time.c" + std::to_string(i);
  const CmdResult fields = run(cmd + " 2>/dev/null");
  ASSERT_EQ(fields.status, 0) << "tshark failed on " << path;
  const auto rows = lines(fields.out);
  ASSERT_EQ(rows.size(), built.size()) << fields.out;
  for (size_t i = 0; i < built.size(); ++i) {
    std::ostringstream want;
    want << "0x8808,0x0101,0x" << std::hex;
    want.width(4);
    want.fill('0');
    want << built[i].mask << std::dec;
    // tshark lists the time of every class, enabled or not.
    for (uint16_t q : built[i].quanta) want << ',' << q;
    EXPECT_EQ(rows[i], want.str()) << "frame " << i;
  }
  // The verbose tree names the protocol as class-based flow control.
  const CmdResult verbose = run(read + " -V -c 1 2>/dev/null");
  EXPECT_NE(verbose.out.find("MAC Control"), std::string::npos) << verbose.out;
  EXPECT_NE(verbose.out.find("Class Enable Vector"), std::string::npos) << verbose.out;

  const CmdResult malformed = run(read + " -Y _ws.malformed 2>/dev/null");
  EXPECT_EQ(malformed.status, 0);
  EXPECT_TRUE(lines(malformed.out).empty()) << "malformed:\n" << malformed.out;
  const CmdResult expert = run(read + " -Y '_ws.expert.severity >= warning' 2>/dev/null");
  EXPECT_EQ(expert.status, 0);
  EXPECT_TRUE(lines(expert.out).empty()) << "expert warnings:\n" << expert.out;
  if (!HasFailure()) std::remove(path.c_str());
}

}  // namespace
}  // namespace mprdma::net
