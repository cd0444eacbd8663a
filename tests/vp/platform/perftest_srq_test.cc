// perftest send_bw with use_srq (perftest's --use_srq): the server's QP
// takes every RECV from a shared receive queue the job re-posts through
// post_srq_recv, over RC and UC, one SRQ per connection with qps > 1; the
// options an SRQ cannot serve, and more SRQs than the NIC has, are refused
// with an error naming the key.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

constexpr uint64_t kMessages = 300;

std::string scenario(const std::string& job, const std::string& nic = "") {
  return "name: srq\nseed: 5\nend_time: 50ms\nnic: {mtu: 1024" + nic +
         "}\n"
         "hosts: [{name: s}, {name: c}]\n"
         "links: [{name: w, a: c, b: s, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n  - {name: j, app: send_bw, client: c, server: s, iterations: " +
         std::to_string(kMessages) + ", sizes: [2000], tx_depth: 16, cq_mod: 8, " + job + "}\n";
}

class PerftestSrq : public test::ScenarioRun {};

TEST_F(PerftestSrq, RcSendsTakeEveryRecvFromTheSrq) {
  // rx_depth below the message count: the SRQ is refilled as it drains.
  ASSERT_TRUE(run(scenario("use_srq: true, rx_depth: 64")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_GT(result().bw_gbps, 0.0);
  EXPECT_EQ(counter("nic.s.responder.srq.taken"), kMessages);
  EXPECT_EQ(counter("nic.s.responder.messages"), kMessages);
  EXPECT_EQ(counter("nic.s.cq.error_cqes"), 0u);
}

TEST_F(PerftestSrq, WithoutTheOptionNoSrqIsUsed) {
  ASSERT_TRUE(run(scenario("rx_depth: 64")));
  EXPECT_EQ(result().error, "");
  EXPECT_EQ(counter("nic.s.responder.srq.taken"), 0u);
  EXPECT_EQ(counter("nic.s.responder.messages"), kMessages);
}

TEST_F(PerftestSrq, UcSendsTakeTheirRecvsFromTheSrq) {
  ASSERT_TRUE(run(scenario("use_srq: true, transport: uc, rx_depth: 512")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.s.responder.srq.taken"), kMessages);
  EXPECT_EQ(counter("nic.s.mac.tx_packets"), 0u) << "UC: the server sends nothing";
}

TEST_F(PerftestSrq, EveryConnectionHasItsOwnSrq) {
  ASSERT_TRUE(run(scenario("use_srq: true, rx_depth: 64, qps: 3")));
  EXPECT_EQ(result().error, "");
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.s.responder.srq.taken"), 3 * kMessages);
}

TEST_F(PerftestSrq, OptionsAreChecked) {
  std::string e = config_error(scenario("use_srq: true, transport: ud, sizes: [512]"));
  EXPECT_NE(e.find("use_srq applies to RC and UC"), std::string::npos) << e;
  std::string bad = scenario("use_srq: true");
  bad.replace(bad.find("app: send_bw"), 12, "app: write_bw");
  e = config_error(bad);
  EXPECT_NE(e.find("use_srq applies to send_bw only"), std::string::npos) << e;
  // One SRQ per server end: three connections need three.
  e = config_error(scenario("use_srq: true, qps: 3", ", limits: {max_srq: 2}"));
  EXPECT_NE(e.find("nic.limits.max_srq"), std::string::npos) << e;
  EXPECT_NE(e.find("SRQs"), std::string::npos) << e;
}

}  // namespace
}  // namespace mprdma::platform
