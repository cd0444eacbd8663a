// Integration: two modeled hosts whose NICs talk RDMA through a Switch
// instead of a cable. The switch's PFC pauses the real NIC MAC (lossless:
// no drop, no retransmission); without PFC the same transfer overflows a
// small buffer and go-back-N recovers the losses.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "vp/fabric/eth_link.h"
#include "vp/fabric/switch.h"
#include "vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

using fabric::Switch;
using fabric::SwitchConfig;

mpr_send_wr WriteWr(uint64_t wr_id, const mpr_sge* sg, const Endpoint& remote) {
  mpr_send_wr wr = SendWr(wr_id, MPR_WQE_RDMA_WRITE, sg, 1);
  wr.remote_addr = remote.va(0);
  wr.rkey = remote.mr.key;
  return wr;
}

class SwitchNicTest : public TwoHostsTest {
 protected:
  // h0 -- 40 Gbps -- switch port 0; switch port 1 -- 10 Gbps -- h1: data
  // from h0 arrives four times faster than it can leave.
  void Rewire(const SwitchConfig& c) {
    Build();
    sw = std::make_unique<Switch>("sw", 2, c, *env);
    for (int i = 0; i < 2; ++i) {
      fabric::LinkConfig lc;
      lc.name = "h" + std::to_string(i) + "-sw";
      lc.rate = core::Bandwidth::gbps(i == 0 ? 40 : 10);
      links.push_back(std::make_unique<fabric::EthLink>(lc.name.c_str(), lc, *env));
      bench->h(i).nic().attach(links.back().get(), 0);
      sw->attach(i, links.back().get(), 1);
      sw->set_route(bench->h(i).nic().config().ip, {i});
    }
  }
  void TearDown() override {
    sw.reset();
    links.clear();
    TwoHostsTest::TearDown();
  }
  // RDMA WRITE of `bytes` from h0 to h1; checks the completion and the data.
  // `timeout` is the QP's retransmission timeout code (4.096 us x 2^code).
  void Transfer(uint64_t bytes, uint8_t timeout = 14) {
    Run([&] {
      PairOptions o;
      o.buf_bytes = bytes;
      o.timeout = timeout;
      QpPair p = bench->make_pair(o);
      const std::vector<uint8_t> a0 = p.a.prefill(7);
      p.b.prefill(8);
      mpr_sge s = p.a.sge(0, static_cast<uint32_t>(bytes));
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, WriteWr(1, &s, p.b)), 0);
      const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(400));
      EXPECT_EQ(wc.status, static_cast<uint32_t>(MPR_CQE_SUCCESS));
      EXPECT_TRUE(SameBytes(p.b.get(0, bytes), a0));
    });
  }
  uint64_t counter(const std::string& path) const { return bench->counter(path); }

  std::unique_ptr<Switch> sw;
  std::vector<std::unique_ptr<fabric::EthLink>> links;
};

SwitchConfig Lossless() {
  SwitchConfig c;
  c.ecn.enabled = false;
  c.pfc.lossless_mask = 1;  // the QPs use traffic class 0: priority 0
  c.pfc.xoff = core::Bytes{16 * 1024};
  c.pfc.xon = core::Bytes{8 * 1024};
  c.pfc.headroom = core::Bytes{32 * 1024};
  return c;
}

TEST_F(SwitchNicTest, PfcPausesTheNicAndNothingIsLost) {
  Rewire(Lossless());
  Transfer(512 * 1024);
  EXPECT_EQ(counter("switch.sw.port1.drops") + counter("switch.sw.port0.drops"), 0u);
  EXPECT_EQ(counter("switch.sw.pfc_headroom_drops"), 0u);
  EXPECT_GT(counter("switch.sw.port0.pause_tx"), 0u);
  // The NIC honoured them: every PAUSE arrived, and no packet was resent.
  EXPECT_EQ(counter("nic.h0.mac.pause_rx"), counter("switch.sw.port0.pause_tx"));
  EXPECT_EQ(counter("nic.h0.requester.retransmits"), 0u);
  EXPECT_EQ(counter("nic.h1.mac.pause_rx"), 0u);  // port 1 never filled
  // The ingress never went past xoff by more than what was in flight.
  EXPECT_LE(counter("switch.sw.buffer_max_bytes"), 16u * 1024 + 32 * 1024);
}

TEST_F(SwitchNicTest, WithoutPfcASmallBufferDropsAndGoBackNRecovers) {
  SwitchConfig c = Lossless();
  c.pfc.enabled = false;
  c.buffer = core::Bytes{32 * 1024};
  Rewire(c);
  // Go-back-N resends everything after a loss and loses again at this
  // overload, so keep the transfer short and a lost tail's timeout at 1 ms.
  Transfer(128 * 1024, 8);
  EXPECT_GT(counter("switch.sw.port1.drops"), 0u);
  EXPECT_GT(counter("nic.h0.requester.retransmits"), 0u);
  EXPECT_EQ(counter("nic.h0.mac.pause_rx"), 0u);
}

}  // namespace
}  // namespace mprdma::test
