// perftest write_bw and send_bw over UC QPs (transport: uc): multi-packet
// messages arrive intact with the UC opcodes, nothing is acknowledged, and
// the options UC cannot honour are refused with an error naming the key.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

constexpr uint64_t kMessages = 200;

std::string scenario(const std::string& job) {
  return "name: uc\nseed: 3\nend_time: 50ms\nnic: {mtu: 1024}\n"
         "hosts: [{name: s}, {name: c}]\n"
         "links: [{name: w, a: c, b: s, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n  - {name: j, transport: uc, client: c, server: s, iterations: " +
         std::to_string(kMessages) + ", sizes: [4000], tx_depth: 16, cq_mod: 8, " + job + "}\n";
}

class PerftestUc : public test::ScenarioRun {};

TEST_F(PerftestUc, WriteBwOverUcMovesTheDataWithoutAcks) {
  ASSERT_TRUE(run(scenario("app: write_bw")));
  const host::SizeResult& r = result();
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.data_ok);
  EXPECT_GT(r.bw_gbps, 0.0);
  EXPECT_EQ(counter("nic.c.requester.uc_packets"), kMessages * 4);  // 4000 B at MTU 1024
  // The run ends when the client's completions say the packets left and
  // the destination holds the pattern: the last message may still be on
  // its way then.
  EXPECT_GT(counter("nic.s.responder.bytes"), (kMessages - 1) * 4000);
  EXPECT_LE(counter("nic.s.responder.bytes"), kMessages * 4000);
  EXPECT_EQ(counter("nic.s.mac.tx_packets"), 0u) << "UC: the server sends nothing";
  EXPECT_EQ(counter("nic.c.requester.acks"), 0u);
}

TEST_F(PerftestUc, SendBwOverUcDeliversEveryMessage) {
  ASSERT_TRUE(run(scenario("app: send_bw, rx_depth: 256")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.s.responder.messages"), kMessages);
  EXPECT_EQ(counter("nic.s.mac.tx_packets"), 0u);
}

TEST_F(PerftestUc, OptionsAreChecked) {
  std::string e = config_error(scenario("app: read_bw"));
  EXPECT_NE(e.find("transport uc applies to write_bw and send_bw only"), std::string::npos) << e;
  e = config_error(scenario("app: send_bw, rx_depth: 64"));
  EXPECT_NE(e.find("needs rx_depth >= iterations"), std::string::npos) << e;
  std::string bad = scenario("app: write_bw");
  bad.replace(bad.find("transport: uc"), 13, "transport: uk");
  e = config_error(bad);
  EXPECT_NE(e.find("transport"), std::string::npos) << e;
  EXPECT_NE(e.find("uk"), std::string::npos) << e;
}

}  // namespace
}  // namespace mprdma::platform
