// A hostile peer on the wire: frames forged field by field (forge.h), with
// valid checksums, injected between the two modeled hosts by the Relay.
// Whatever they say, the receiving NIC answers as hardware does (a drop
// counted in a named counter, a NAK, an error completion or an
// asynchronous event) and the simulation goes on: nothing throws out of a
// block, and a healthy QP pair on the same NICs still works afterwards.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tests/vp/host/forge.h"
#include "tests/vp/host/two_hosts.h"
#include "vp/net/cnp.h"
#include "vp/nic/transport/irn/irn_engine.h"
#include "vp/nic/transport/transport_mux.h"

namespace mprdma::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;

// A READ request to QP `qpn` for `len` bytes at `va`, PSN `psn`, with the
// trailer the QP's engine expects (MP-RDMA: READ as data).
net::PacketPtr ForgeRead(const std::string& transport, uint32_t qpn, uint32_t psn, uint64_t va,
                         uint32_t rkey, uint32_t len) {
  net::RoceFields f = FromH0ToH1();
  f.opcode = net::Opcode::RDMA_READ_REQUEST;
  f.dest_qp = qpn;
  f.psn = psn;
  f.reth_va = va;
  f.reth_rkey = rkey;
  f.reth_dma_len = len;
  f.ack_req = true;
  if (transport != "mprdma") return Forge(f);
  net::MpDataExt x;
  x.tail = true;
  return Forge(f, {}, DataTrailer(x));
}

class HostilePeerTest : public TwoHostsTest {
 protected:
  void Build(const std::string& transport) {
    TwoHosts::Options o;
    o.transport = transport;
    o.relay = true;
    TwoHostsTest::Build(o);
  }
  // Puts `pkt` on the wire towards h1 and lets it arrive and take effect.
  void Inject(net::PacketPtr pkt, sc_core::sc_time settle = Us(20)) {
    bench->relay().inject(0, std::move(pkt));
    sc_core::wait(settle);
  }
};

// Finding 1 of the hardening review: an ACKNOWLEDGE for a UD QP, carrying
// an ACK trailer with the Read flag, to a NIC whose default engine is IRN.
// UD QPs have no engine; the frame used to reach IRN's per-connection
// table and throw out of the simulation.
TEST_F(HostilePeerTest, ReadAckForAUdQpIsDroppedNotFatal) {
  Build("irn");
  Run([&] {
    PairOptions o;
    o.caps.qp_type = MPR_QPT_UD;
    o.connect = false;
    QpPair ud = bench->make_pair(o);
    ud.a.ctx->activate_ud(ud.a.qp, kQkey, ud.a.psn);
    ud.b.ctx->activate_ud(ud.b.qp, kQkey, ud.b.psn);
    QpPair healthy = bench->make_pair();
    auto dropped = [&] {
      return bench->counter("nic.h1.requester.bad_responses") +
             bench->counter("nic.h1.mac.rx_drops");
    };
    const uint64_t dropped_before = dropped();
    net::RoceFields f = FromH0ToH1();
    f.opcode = net::Opcode::ACKNOWLEDGE;
    f.dest_qp = ud.b.qpn();
    f.psn = 5;
    net::MpAckExt x;
    x.read = true;
    x.sack = 5;
    x.aack = 4;
    Inject(Forge(f, {}, AckTrailer(x)));
    EXPECT_EQ(dropped(), dropped_before + 1);
    ExpectHealthy(healthy, 1);
  });
}

// Frames h1 sent towards h0, as the relay saw them (go-back-N: no trailers).
struct SentByH1 {
  std::vector<net::RoceFields> frames;
  size_t naks(net::NakCode code) const {
    size_t n = 0;
    for (const net::RoceFields& f : frames)
      n += f.opcode == net::Opcode::ACKNOWLEDGE && f.aeth_syndrome == net::aeth_nak(code);
    return n;
  }
};

void Record(TwoHosts& bench, SentByH1& out) {
  bench.relay().set_filter([&out](net::Packet& frame, int from) {
    net::RoceFields f;
    if (from == 1 && net::parse_roce(frame, f) == net::ParseStatus::ok) out.frames.push_back(f);
    return Relay::Verdict::forward;
  });
}

// Finding 6: DEREG_MR did not revoke. The responder kept a WRITE's
// translated segments from its first packet, so a peer could pause, let
// the guest free the region (and reuse its pages), and write on. Each
// packet is now translated as it is placed: the packet after the DEREG_MR
// gets a remote access NAK and nothing lands in the freed pages.
TEST_F(HostilePeerTest, WriteAfterTheRegionIsDeregisteredGetsAnAccessNak) {
  Build("gbn");
  SentByH1 sent;
  Run([&] {
    Record(*bench, sent);
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> before = p.b.prefill(9);
    net::RoceFields f = FromH0ToH1();
    f.dest_qp = p.b.qpn();
    f.psn = p.a.psn;
    f.opcode = net::Opcode::RDMA_WRITE_FIRST;
    f.reth_va = p.b.va(0);
    f.reth_rkey = p.b.mr.key;
    f.reth_dma_len = 3 * 1024;
    const std::vector<uint8_t> chunk(1024, 0xAB);
    Inject(Forge(f, chunk));
    p.b.ctx->dereg_mr(p.b.mr);  // the guest frees the region mid-WRITE
    f.opcode = net::Opcode::RDMA_WRITE_MIDDLE;
    f.psn = p.a.psn + 1;
    Inject(Forge(f, chunk));
    f.opcode = net::Opcode::RDMA_WRITE_LAST;
    f.psn = p.a.psn + 2;
    f.ack_req = true;
    Inject(Forge(f, chunk));
    std::vector<uint8_t> want = before;
    std::fill(want.begin(), want.begin() + 1024, 0xAB);  // the first packet, before DEREG_MR
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
    EXPECT_EQ(sent.naks(net::NakCode::remote_access_error), 1u);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_ERR);
  });
}

// The same for a READ: responses are read from the region as they leave,
// so none is read once DEREG_MR has completed; the READ ends with a remote
// access NAK.
TEST_F(HostilePeerTest, ReadStopsWhenTheRegionIsDeregistered) {
  Build("gbn");
  SentByH1 sent;
  Run([&] {
    Record(*bench, sent);
    PairOptions o;
    o.buf_bytes = 1 << 20;
    QpPair p = bench->make_pair(o);
    const uint64_t read_before = bench->counter("nic.h1.dma.payload_read_bytes");
    bench->relay().inject(0, ForgeRead("gbn", p.b.qpn(), p.a.psn, p.b.va(0), p.b.mr.key, 1 << 20));
    sc_core::wait(Us(10));  // some responses are out
    p.b.ctx->dereg_mr(p.b.mr);
    const uint64_t read_at_dereg = bench->counter("nic.h1.dma.payload_read_bytes");
    sc_core::wait(Us(300));  // long enough for the whole MiB at 40 Gb/s
    const uint64_t read_after = bench->counter("nic.h1.dma.payload_read_bytes");
    EXPECT_GT(read_at_dereg, read_before) << "the READ had started";
    EXPECT_EQ(read_after, read_at_dereg) << "source bytes read after DEREG_MR completed";
    EXPECT_LT(read_after - read_before, uint64_t{1} << 20);
    EXPECT_EQ(sent.naks(net::NakCode::remote_access_error), 1u);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_ERR);
  });
}

// Finding 7: receive checked only the destination address and QP. A
// connected QP now takes packets from its peer's address only, and every
// packet's P_Key must match the port's partition: a forged WRITE from
// another host, a forged fatal NAK and a WRITE with a foreign P_Key are
// dropped and counted, and touch nothing.
TEST_F(HostilePeerTest, ConnectedQpTakesPacketsFromItsPeerOnly) {
  Build("gbn");
  Run([&] {
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> before = p.b.prefill(11);
    net::RoceFields f = FromH0ToH1();
    f.src_ip = 0x0A000009;  // a third host
    f.dest_qp = p.b.qpn();
    f.psn = p.a.psn;
    f.opcode = net::Opcode::RDMA_WRITE_ONLY;
    f.reth_va = p.b.va(0);
    f.reth_rkey = p.b.mr.key;
    f.reth_dma_len = 512;
    f.ack_req = true;
    const std::vector<uint8_t> junk(512, 0xEE);
    Inject(Forge(f, junk));
    EXPECT_EQ(bench->counter("nic.h1.rx.foreign_drops"), 1u);
    // The genuine peer's address with a P_Key of another partition.
    f.src_ip = FromH0ToH1().src_ip;
    f.pkey = 0x1234;
    Inject(Forge(f, junk));
    EXPECT_EQ(bench->counter("nic.h1.rx.pkey_drops"), 1u);
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), before));
    // A fatal NAK from a third host for a WRITE b has outstanding: b's
    // WRITE is held in the relay meanwhile, then goes through.
    bool hold = true;
    bench->relay().set_filter([&hold](net::Packet&, int from) {
      return hold && from == 1 ? Relay::Verdict::drop : Relay::Verdict::forward;
    });
    const mpr_sge s = p.b.sge(0, 256);
    ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &s, p.a, 0)), 0);
    sc_core::wait(Us(5));
    net::RoceFields nak = FromH0ToH1();
    nak.src_ip = 0x0A000009;
    nak.opcode = net::Opcode::ACKNOWLEDGE;
    nak.dest_qp = p.b.qpn();
    nak.psn = p.b.psn;
    nak.aeth_syndrome = net::aeth_nak(net::NakCode::remote_access_error);
    Inject(Forge(nak));
    EXPECT_EQ(bench->counter("nic.h1.rx.foreign_drops"), 2u);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
    hold = false;  // the WRITE is sent again after its timeout and completes
    const mpr_wc wc = WaitWc(*p.b.ctx, p.b.scq, Ms(200));
    EXPECT_EQ(wc.status, uint32_t{MPR_CQE_SUCCESS});
    ExpectHealthy(p, 12);
  });
}

// A CNP from a third host throttles nobody: the reaction point of a DCQCN
// QP answers CNPs from its peer only.
TEST_F(HostilePeerTest, ForgedCnpFromAnotherHostDoesNotThrottle) {
  TwoHosts::Options o;
  o.relay = true;
  o.nic = [](nic::NicConfig& n) { n.congestion_control = "dcqcn"; };
  TwoHostsTest::Build(o);
  Run([&] {
    QpPair p = bench->make_pair();
    ExpectHealthy(p, 13);  // b has sent: its rate limiter exists
    net::RoceFields c = FromH0ToH1();
    c.src_ip = 0x0A000009;
    c.dest_qp = p.b.qpn();
    c.ecn = 0;
    for (int i = 0; i < 10; ++i) Inject(net::build_cnp(c), Us(2));
    EXPECT_EQ(bench->counter("nic.h1.rx.foreign_drops"), 10u);
    EXPECT_EQ(bench->counter("nic.h1.dcqcn.cnp_rx"), 0u);
    EXPECT_EQ(bench->counter("nic.h1.dcqcn.rate_cuts"), 0u);
  });
}

class HostilePeerPerTransport : public HostilePeerTest,
                                public ::testing::WithParamInterface<std::string> {};

// Finding 5: duplicate READ requests each queued a full response, with no
// bound from max_dest_rd_atomic: 400 forged 60-byte duplicates gave
// megabytes of responses. A duplicate is answered only inside a READ the
// responder accepted (its responder resources, max_dest_rd_atomic of them)
// and each response is queued at most once, so a flood of duplicates costs
// at most what the genuine READs did.
TEST_P(HostilePeerPerTransport, DuplicateReadFloodIsBoundedByTheAcceptedReads) {
  Build(GetParam());
  Run([&] {
    QpPair p = bench->make_pair();
    constexpr uint32_t kLen = 64 << 10;
    // One genuine 64 KiB READ: the responder's one resource.
    const mpr_sge s = p.a.sge(0, kLen);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &s, p.b, 0)), 0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    ASSERT_EQ(wc.status, uint32_t{MPR_CQE_SUCCESS});
    sc_core::wait(Us(50));
    const uint64_t sent_before = bench->counter("nic.h1.mac.tx_bytes");
    // 400 duplicates behind the expected PSN: 200 ask for the whole region
    // at older PSNs the READ never used, in ascending order (each one after
    // the ones before it, so that go-back-N's "answer again from here"
    // replaced none), then 200 name the genuine READ's PSNs with matching
    // addresses (valid re-requests of a tail of it).
    const uint32_t first = p.a.psn;
    // The READ's PSNs: its responses' (64), or MP-RDMA's one (READ as data).
    const uint32_t read_psns = BaseTransport(GetParam()) == "mprdma" ? 1 : 64;
    for (uint32_t i = 0; i < 400; ++i) {
      const uint32_t k = i % read_psns;
      const bool genuine = i >= 200;
      const uint32_t psn = genuine ? first + k : first - 200 + i;  // ascending
      const uint64_t va = genuine ? p.b.va(uint64_t{k} * 1024) : p.b.va(0);
      const uint32_t len = genuine ? kLen - k * 1024 : kLen;
      bench->relay().inject(
          0, ForgeRead(BaseTransport(GetParam()), p.b.qpn(), psn & 0xffffff, va, p.b.mr.key, len));
    }
    sc_core::wait(Ms(3));
    const uint64_t sent = bench->counter("nic.h1.mac.tx_bytes") - sent_before;
    // At most max_dest_rd_atomic (16) READs of responses queued at any
    // time, each response once (before: every duplicate a whole READ).
    EXPECT_LT(sent, uint64_t{kLen} * 16 * 11 / 10) << "bytes sent in answer to 400 duplicates";
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
  });
}

// Floods of forged NAKs from the peer's own address, for a QP with
// requests outstanding: whatever they say (sequence, RNR, every fatal kind,
// PSNs in and out of the window), the requester fails at most once, with
// one error completion, flushes the rest, and the NIC goes on.
TEST_P(HostilePeerPerTransport, NakFloodFailsAQpOnceAtMost) {
  Build(GetParam());
  Run([&] {
    QpPair p = bench->make_pair();
    QpPair healthy = bench->make_pair();
    // b's WRITEs to a are held back by the relay: they stay outstanding.
    bench->relay().set_filter([](net::Packet&, int from) {
      return from == 1 ? Relay::Verdict::drop : Relay::Verdict::forward;
    });
    for (int i = 0; i < 8; ++i) {
      const mpr_sge s = p.b.sge(4096 * i, 4096);
      ASSERT_EQ(p.b.ctx->post_send(p.b.qp, RemoteWrTo(i, MPR_WQE_RDMA_WRITE, &s, p.a, 0)), 0);
    }
    sc_core::wait(Us(5));
    std::mt19937_64 rng(5);
    const uint8_t kinds[] = {
        net::aeth_nak(net::NakCode::psn_seq_error), net::aeth_nak(net::NakCode::invalid_request),
        net::aeth_nak(net::NakCode::remote_access_error),
        net::aeth_nak(net::NakCode::remote_operational_error), net::aeth_rnr_nak(3)};
    for (int i = 0; i < 2000; ++i) {
      net::RoceFields n = FromH0ToH1();
      n.opcode = net::Opcode::ACKNOWLEDGE;
      n.dest_qp = p.b.qpn();
      n.psn = (p.b.psn + static_cast<uint32_t>(rng() % 64)) & 0xffffff;
      if (i % 4 == 0) n.psn = static_cast<uint32_t>(rng()) & 0xffffff;
      n.aeth_syndrome = kinds[rng() % 5];
      net::MpAckExt x;
      x.sack = n.psn;
      x.aack = (n.psn - 1) & 0xffffff;
      x.nack = rng() % 2;
      bench->relay().inject(
          0, BaseTransport(GetParam()) == "gbn" ? Forge(n) : Forge(n, {}, AckTrailer(x)));
      if (i % 64 == 0) sc_core::wait(Us(1));
    }
    sc_core::wait(Ms(1));
    size_t errors = 0, completions = 0;
    mpr_wc wc{};
    while (p.b.ctx->poll_cq(p.b.scq, 1, &wc) == 1) {
      ++completions;
      errors += wc.status != MPR_CQE_SUCCESS && wc.status != MPR_CQE_WR_FLUSH_ERR;
    }
    EXPECT_LE(errors, 1u) << "one WQE fails, the others are flushed";
    size_t events = 0;
    for (const host::AsyncEvent& e : bench->h1().driver().async_events())
      events += e.data0 == p.b.qpn();
    EXPECT_LE(events, 1u);
    bench->relay().set_filter(nullptr);
    ExpectHealthy(healthy, 31);
  });
}

// A READ of 1 GiB at MTU 256 (4 Mi responses) from a 2 GiB region: the
// responder holds state for the responses in flight only (IRN's explicit
// READ acknowledgements: a window, not a byte per response; no translation
// of the whole READ anywhere), and a READ longer than 2^31, or of as many
// responses as half the PSN space, is an invalid request.
TEST_P(HostilePeerPerTransport, HugeReadCostsWhatIsInFlight) {
  Build(GetParam());
  Run([&] {
    PairOptions o;
    o.path_mtu = MPR_MTU_256;
    QpPair p = bench->make_pair(o);
    // A 2 GiB region of 2 MiB pages (REG_MR straight to the driver).
    constexpr uint64_t kHuge = 2 << 20, kBig = uint64_t{1} << 31;
    const uint64_t base = p.b.host->memory().alloc_contiguous(kBig, kHuge);
    std::vector<uint64_t> pages;
    for (uint64_t off = 0; off < kBig; off += kHuge) pages.push_back(base + off);
    mpr_cmd cmd{};
    cmd.hdr.opcode = MPR_CMD_REG_MR;
    cmd.u.reg_mr.iova = uint64_t{1} << 40;
    cmd.u.reg_mr.length = kBig;
    cmd.u.reg_mr.pdn = p.b.pd;
    cmd.u.reg_mr.access = MPR_ACCESS_REMOTE_READ;
    cmd.u.reg_mr.page_shift = 21;
    cmd.u.reg_mr.num_pages = static_cast<uint32_t>(pages.size());
    const host::CommandResult r = p.b.host->driver().execute(cmd, pages.data(), pages.size() * 8);
    ASSERT_TRUE(r.ok()) << "REG_MR status " << int(r.status);
    const UnbackedMr big{cmd.u.reg_mr.iova, r.out0};
    bench->relay().inject(0, ForgeRead(BaseTransport(GetParam()), p.b.qpn(), p.a.psn, big.iova,
                                       big.key, MPR_MAX_MSG_SIZE / 2));
    sc_core::wait(Us(200));
    if (BaseTransport(GetParam()) == "irn") {
      auto& irn = dynamic_cast<nic::IrnEngine&>(
          *dynamic_cast<nic::TransportMux&>(bench->h1().nic().engine()).find(MPR_TRANSPORT_IRN));
      const nic::IrnReadResponder* rd = irn.read_responder(p.b.qpn());
      ASSERT_NE(rd, nullptr);
      EXPECT_TRUE(rd->pending(p.a.psn));
      EXPECT_LT(rd->window_responses(), 100000u) << "state for the responses in flight only";
    }
    // Answered: MP-RDMA's responses are ACK-clocked (an initial window of
    // 64; the forger's QP, which asked nothing, answers none), the others
    // stream them.
    EXPECT_GT(bench->counter("nic.h1.mac.tx_packets"),
              BaseTransport(GetParam()) == "mprdma" ? 60u : 1000u)
        << "the READ is being answered";
    // A READ one byte longer than the largest message is refused.
    QpPair q = bench->make_pair(o);
    const uint64_t fatal = bench->counter("nic.h1.responder.fatal_naks");
    bench->relay().inject(0, ForgeRead(BaseTransport(GetParam()), q.b.qpn(), q.a.psn, big.iova,
                                       big.key, MPR_MAX_MSG_SIZE + 1));
    sc_core::wait(Us(20));
    EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), fatal + 1);
    EXPECT_EQ(q.b.query().qp_state, MPR_QPS_ERR);
    // As an invalid request (its length), not an access error (the region
    // is shorter still): the length is checked before the key.
    const auto events_of = [&](uint32_t qpn, uint8_t type) {
      size_t n = 0;
      for (const host::AsyncEvent& e : bench->h1().driver().async_events())
        n += e.data0 == qpn && e.type == type;
      return n;
    };
    EXPECT_EQ(events_of(q.b.qpn(), MPR_EQE_QP_REQ_ERR), 1u);
    EXPECT_EQ(events_of(q.b.qpn(), MPR_EQE_QP_ACCESS_ERR), 0u);
    // 2^31 bytes at MTU 256: 2^23 responses, PSNs a 24-bit window cannot
    // tell from ones behind.
    QpPair half = bench->make_pair(o);
    bench->relay().inject(0, ForgeRead(BaseTransport(GetParam()), half.b.qpn(), half.a.psn,
                                       big.iova, big.key, MPR_MAX_MSG_SIZE));
    sc_core::wait(Us(20));
    EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), fatal + 2);
    EXPECT_EQ(half.b.query().qp_state, MPR_QPS_ERR);
  });
}

// max_dest_rd_atomic bounds new READs on every engine (the out-of-order
// ones used to skip the check): with a limit of 4, a fifth READ while four
// are answered is an invalid request that fails the QP.
TEST_P(HostilePeerPerTransport, ReadsBeyondMaxDestRdAtomicAreInvalidRequests) {
  Build(GetParam());
  Run([&] {
    PairOptions o;
    o.max_rd_atomic = 4;
    QpPair p = bench->make_pair(o);
    const uint64_t fatal = bench->counter("nic.h1.responder.fatal_naks");
    // Each READ covers its responses' PSNs (MP-RDMA: one, READ as data).
    const uint32_t step = BaseTransport(GetParam()) == "mprdma" ? 1 : 64;
    for (uint32_t i = 0; i < 5; ++i)
      bench->relay().inject(
          0, ForgeRead(BaseTransport(GetParam()), p.b.qpn(), (p.a.psn + i * step) & 0xffffff,
                       p.b.va(0), p.b.mr.key, 64 << 10));
    sc_core::wait(Us(30));
    EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), fatal + 1);
    EXPECT_EQ(p.b.query().qp_state, MPR_QPS_ERR);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, HostilePeerPerTransport,
                         ::testing::Values("gbn", "mprdma", "irn", "mprdma_lockstep",
                                           "gbn_lockstep"),
                         TransportName);

}  // namespace
}  // namespace mprdma::test
