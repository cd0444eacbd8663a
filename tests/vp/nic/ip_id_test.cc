// Integration: the IPv4 identification the NIC puts in every frame it sends.
// Each NIC numbers its packets 0, 1, 2, ... (requests, ACKs, READ and atomic
// responses alike), wrapping at 65536, and the frames still carry a correct
// IPv4 header checksum and ICRC (the ICRC covers the identification). Frames
// are read back from a pcap of the cable between two modeled hosts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "support/files.h"
#include "vp/fabric/eth_link.h"
#include "vp/host/two_hosts.h"
#include "vp/net/icrc.h"
#include "vp/net/roce_codec.h"

namespace mprdma::test {
namespace {

using net::Opcode;

struct Captured {
  std::vector<uint8_t> frame;
  uint32_t orig_len = 0;
};

// Every record of a pcap file written by net::PcapWriter (host byte order).
std::vector<Captured> read_pcap(const std::string& path) {
  const std::vector<uint8_t> d = read_file(path);
  std::vector<Captured> out;
  EXPECT_GE(d.size(), 24u) << path;
  size_t off = 24;  // global header
  while (off + 16 <= d.size()) {
    const uint32_t incl = u32(d, off + 8);
    Captured c;
    c.orig_len = u32(d, off + 12);
    if (off + 16 + incl > d.size()) {
      ADD_FAILURE() << "truncated record at " << off;
      break;
    }
    c.frame.assign(d.begin() + static_cast<std::ptrdiff_t>(off + 16),
                   d.begin() + static_cast<std::ptrdiff_t>(off + 16 + incl));
    out.push_back(std::move(c));
    off += 16 + incl;
  }
  return out;
}

uint16_t ip_id_of(const std::vector<uint8_t>& f) {
  return static_cast<uint16_t>(f[net::kIpOffset + 4] << 8 | f[net::kIpOffset + 5]);
}
uint32_t src_ip_of(const std::vector<uint8_t>& f) {
  const uint8_t* p = &f[net::kIpOffset + 12];
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

class IpIdTest : public TwoHostsTest {
 protected:
  // Re-cables the two hosts through a link that writes every frame whole
  // to <dir>/cap.pcap (`snaplen` 0), or its first `snaplen` bytes.
  void Capture(uint64_t snaplen = 0, uint64_t nic_mtu = 1024) {
    dir = testing::TempDir() + "mprdma_nic_ip_id_" + std::to_string(getpid()) + "_" +
          testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    env->out_dir = dir;
    TwoHosts::Options o;
    o.nic_mtu = nic_mtu;
    Build(o);
    fabric::LinkConfig lc;
    lc.name = "cap";
    lc.rate = core::Bandwidth::gbps(40);
    lc.pcap = true;
    lc.pcap_snaplen = core::Bytes{snaplen};
    cap = std::make_unique<fabric::EthLink>("cap", lc, *env);
    bench->h0().nic().attach(cap.get(), 0);
    bench->h1().nic().attach(cap.get(), 1);
  }
  // Closes the capture (the pcap is complete once its link is gone; nothing
  // may be simulated after this) and returns its frames.
  std::vector<Captured> Frames() {
    cap.reset();
    return read_pcap(dir + "/cap.pcap");
  }
  void TearDown() override {
    cap.reset();
    TwoHostsTest::TearDown();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }

  std::string dir;
  std::unique_ptr<fabric::EthLink> cap;
};

TEST_F(IpIdTest, EveryPacketOfANicCarriesTheNextIdAndStillVerifies) {
  Capture();
  Run([&] {
    QpPair p = bench->make_pair();
    p.a.prefill(1);
    p.b.prefill(2);
    // WRITE 8 KiB (8 requests, ACKed), READ 4 KiB (1 request, 4 responses),
    // FETCH_ADD (1 request, 1 atomic ACK), then a SEND from h1 to h0 so that
    // both NICs send requests and responses.
    mpr_sge w = p.a.sge(0, 8192);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &w, p.b, 0)), 0);
    mpr_sge r = p.a.sge(16384, 4096);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(2, MPR_WQE_RDMA_READ, &r, p.b, 32768)), 0);
    mpr_sge f = p.a.sge(65536, 8);
    mpr_send_wr fa = RemoteWrTo(3, MPR_WQE_ATOMIC_FA, &f, p.b, 65536);
    fa.compare_add = 5;
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, fa), 0);
    for (const mpr_wc& wc : WaitWcs(*p.a.ctx, p.a.scq, 3))
      EXPECT_EQ(wc.status, static_cast<uint32_t>(MPR_CQE_SUCCESS)) << wc.wr_id;
    mpr_sge rr = p.a.sge(131072, 4096);
    ASSERT_EQ(p.a.ctx->post_recv(p.a.qp, RecvWr(4, &rr, 1)), 0);
    mpr_sge s = p.b.sge(0, 3000);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, SendWr(5, MPR_WQE_SEND, &s, 1)), 0);
    EXPECT_EQ(WaitWc(*p.b.ctx, p.b.scq).status, static_cast<uint32_t>(MPR_CQE_SUCCESS));
    EXPECT_EQ(WaitWc(*p.a.ctx, p.a.rcq).status, static_cast<uint32_t>(MPR_CQE_SUCCESS));
  });
  const uint64_t sent0 = bench->counter("nic.h0.mac.tx_packets");
  const uint64_t sent1 = bench->counter("nic.h1.mac.tx_packets");
  const std::vector<Captured> frames = Frames();
  ASSERT_EQ(frames.size(), sent0 + sent1);

  std::map<uint32_t, std::vector<uint16_t>> ids;  // by source address
  std::map<uint32_t, std::set<Opcode>> opcodes;
  for (size_t i = 0; i < frames.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    const std::vector<uint8_t>& fr = frames[i].frame;
    ASSERT_EQ(fr.size(), frames[i].orig_len) << "captured whole";
    // The codec's own check: IPv4 header checksum, then ICRC.
    net::RoceFields rf;
    ASSERT_EQ(net::parse_roce(fr.data(), fr.size(), rf), net::ParseStatus::ok);
    EXPECT_EQ(rf.ip_id, ip_id_of(fr));
    // And the same checks spelled out.
    EXPECT_EQ(net::ipv4_checksum(&fr[net::kIpOffset], net::kIpv4HeaderBytes), 0);
    const size_t icrc_at = fr.size() - net::kIcrcBytes;
    EXPECT_EQ(net::roce_icrc(&fr[net::kIpOffset], icrc_at - net::kIpOffset),
              net::load_icrc(&fr[icrc_at]));
    ids[src_ip_of(fr)].push_back(rf.ip_id);
    opcodes[src_ip_of(fr)].insert(rf.opcode);
  }
  const uint32_t h0 = bench->h0().nic().config().ip, h1 = bench->h1().nic().config().ip;
  ASSERT_EQ(ids.size(), 2u);
  ASSERT_EQ(ids[h0].size(), sent0);
  ASSERT_EQ(ids[h1].size(), sent1);
  EXPECT_GE(sent0, 10u + 1u);      // 8 writes, 1 read, 1 atomic and ACKs of the SEND
  EXPECT_GE(sent1, 4u + 1u + 3u);  // 4 read responses, atomic ACK, 3 sends
  for (uint32_t ip : {h0, h1}) {
    SCOPED_TRACE("NIC " + std::to_string(ip & 0xFF));
    for (size_t k = 0; k < ids[ip].size(); ++k)
      EXPECT_EQ(ids[ip][k], k) << "packet " << k << " of this NIC";
  }
  // Both kinds of traffic came from both NICs, so every builder of frames
  // (requester, responder ACKs, READ and atomic responses) took an ID.
  EXPECT_TRUE(opcodes[h0].count(Opcode::RDMA_WRITE_FIRST));
  EXPECT_TRUE(opcodes[h0].count(Opcode::RDMA_READ_REQUEST));
  EXPECT_TRUE(opcodes[h0].count(Opcode::FETCH_ADD));
  EXPECT_TRUE(opcodes[h0].count(Opcode::ACKNOWLEDGE));
  EXPECT_TRUE(opcodes[h1].count(Opcode::ACKNOWLEDGE));
  EXPECT_TRUE(opcodes[h1].count(Opcode::RDMA_READ_RESPONSE_FIRST));
  EXPECT_TRUE(opcodes[h1].count(Opcode::ATOMIC_ACKNOWLEDGE));
  EXPECT_TRUE(opcodes[h1].count(Opcode::SEND_FIRST));
}

// 70000 packets from one NIC: the identification wraps from 65535 to 0 and
// keeps counting. Only the headers are captured.
TEST_F(IpIdTest, TheCounterWrapsAt65536) {
  Capture(/*snaplen=*/64, /*nic_mtu=*/256);
  constexpr uint64_t kPackets = 70000;
  constexpr uint64_t kBytes = kPackets * 256;
  Run(
      [&] {
        PairOptions o;
        o.buf_bytes = kBytes;
        o.path_mtu = MPR_MTU_256;
        QpPair p = bench->make_pair(o);
        mpr_sge w = p.a.sge(0, static_cast<uint32_t>(kBytes));
        ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &w, p.b, 0)), 0);
        EXPECT_EQ(WaitWc(*p.a.ctx, p.a.scq, Ms(100)).status,
                  static_cast<uint32_t>(MPR_CQE_SUCCESS));
      },
      Ms(200));
  EXPECT_EQ(bench->counter("nic.h0.requester.retransmits"), 0u);
  const uint32_t h0 = bench->h0().nic().config().ip;
  std::vector<uint16_t> ids;
  for (const Captured& c : Frames())
    if (src_ip_of(c.frame) == h0) ids.push_back(ip_id_of(c.frame));
  ASSERT_EQ(ids.size(), kPackets);
  for (size_t k = 0; k < ids.size(); ++k)
    ASSERT_EQ(ids[k], static_cast<uint16_t>(k)) << "packet " << k;
  EXPECT_EQ(ids[65535], 65535);
  EXPECT_EQ(ids[65536], 0);
  EXPECT_EQ(ids.back(), (kPackets - 1) % 65536);
}

// A link that drops frames whose identification is a multiple of N (the
// MP-RDMA paper's iCAP loss) now drops one frame in N, not all of them:
// go-back-N recovers and the transfer completes.
TEST_F(IpIdTest, LossByIpIdModuloDropsOneFrameInN) {
  Build();
  bench->link().set_loss_ip_id_modulo(16, 0);  // h0 -> h1 only
  Run([&] {
    PairOptions o;
    o.buf_bytes = 64 * 1024;
    o.timeout = 8;  // ~1 ms, should a tail loss need the timer
    QpPair p = bench->make_pair(o);
    const std::vector<uint8_t> a0 = p.a.prefill(3);
    p.b.prefill(4);
    mpr_sge w = p.a.sge(0, 64 * 1024);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &w, p.b, 0)), 0);
    EXPECT_EQ(WaitWc(*p.a.ctx, p.a.scq, Ms(100)).status, static_cast<uint32_t>(MPR_CQE_SUCCESS));
    EXPECT_TRUE(SameBytes(p.b.get(0, 64 * 1024), a0));
  });
  const uint64_t sent = bench->counter("link.h0-h1.a2b.tx_packets");
  const uint64_t dropped = bench->counter("link.h0-h1.a2b.ip_id_drops");
  EXPECT_GT(dropped, 0u);
  // IDs 0, 16, 32, ... of the frames h0 sent.
  EXPECT_EQ(dropped, (sent + 15) / 16);
  EXPECT_GT(bench->counter("nic.h0.requester.retransmits"), 0u);
  EXPECT_EQ(bench->counter("link.h0-h1.b2a.ip_id_drops"), 0u);
}

}  // namespace
}  // namespace mprdma::test
