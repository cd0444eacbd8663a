// Bad input between two modeled hosts: every error gives a precise status
// (CQE status and syndrome, command status, async event, counter), nothing
// crashes, and the NIC keeps serving a healthy QP pair afterwards.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <mprdma/regs_util.h>

#include <cerrno>

#include "tests/vp/host/two_hosts.h"

namespace mprdma::test {
namespace {

constexpr int64_t kAnyLen = -1;

// An error completion, every field. docs/host-interface.md: byte_len is the
// WQE's total length on the send side (0 for a WQE flushed before the NIC
// read it) and 0 on the receive side; kAnyLen where the NIC may or may not
// have read the WQE yet, or could not parse it.
void ExpectErr(const mpr_wc& wc, uint64_t wr_id, uint32_t status, uint32_t syndrome,
               const Endpoint& e, uint32_t wqe_index, int is_recv, int64_t byte_len,
               const std::string& what = "") {
  SCOPED_TRACE("error completion " + what);
  EXPECT_EQ(wc.wr_id, wr_id);
  if (byte_len != kAnyLen) {
    EXPECT_EQ(wc.byte_len, static_cast<uint64_t>(byte_len));
  }
  EXPECT_EQ(wc.status, status);
  EXPECT_EQ(wc.syndrome, syndrome);
  EXPECT_EQ(wc.qpn, e.qpn());
  EXPECT_EQ(wc.wqe_index, wqe_index);
  EXPECT_EQ(wc.is_recv, is_recv);
  EXPECT_EQ(wc.imm_data, 0u);
  EXPECT_EQ(wc.flags, 0u);
}

void ExpectFlushed(const mpr_wc& wc, uint64_t wr_id, const Endpoint& e, uint32_t wqe_index,
                   int is_recv = 0, int64_t byte_len = kAnyLen) {
  ExpectErr(wc, wr_id, MPR_CQE_WR_FLUSH_ERR, MPR_SYN_FLUSHED, e, wqe_index, is_recv,
            is_recv ? 0 : byte_len, "flush of wr_id " + std::to_string(wr_id));
}

mpr_send_wr RemoteWr(uint64_t wr_id, uint8_t opcode, const mpr_sge* sg, uint32_t nsge,
                     uint64_t remote_addr, uint32_t rkey, uint8_t flags = MPR_WQE_F_SIGNALED) {
  mpr_send_wr wr = SendWr(wr_id, opcode, sg, nsge, flags);
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return wr;
}

// Waits for an asynchronous event of `type` naming `data0` in the driver's
// list; fails the test if none arrives within `timeout`.
// Returns the event (valid until the next event arrives), or nullptr.
const host::AsyncEvent* WaitAsync(host::Driver& d, uint8_t type, uint32_t data0,
                                  sc_core::sc_time timeout = Ms(5)) {
  const sc_core::sc_time end = sc_core::sc_time_stamp() + timeout;
  for (;;) {
    for (const host::AsyncEvent& e : d.async_events())
      if (e.type == type && e.data0 == data0) return &e;
    if (sc_core::sc_time_stamp() >= end) {
      ADD_FAILURE() << d.name() << ": no async event type " << int(type) << " for " << data0 << " ("
                    << d.async_events().size() << " events)";
      return nullptr;
    }
    sc_core::wait(end - sc_core::sc_time_stamp(), d.async_event());
  }
}

size_t CountAsync(const host::Driver& d, uint8_t type) {
  size_t n = 0;
  for (const host::AsyncEvent& e : d.async_events()) n += e.type == type;
  return n;
}

uint8_t QpState(const Endpoint& e) { return e.query().qp_state; }

bool RingIsEmpty(const host::CompletionQueue* cq) {
  const size_t bytes = sizeof(mpr_cqe) << cq->dp.log_size;
  for (size_t i = 0; i < bytes; ++i)
    if (cq->dp.buf[i]) return false;
  return true;
}

// Writes `wqe` (at most one slot) raw into the next SQ slot and rings.
void PostRaw(host::QueuePair* qp, const std::vector<uint8_t>& wqe, uint64_t wr_id) {
  mpr_dp_wq& sq = qp->dp.sq;
  const uint32_t mask = (1u << sq.log_size) - 1;
  uint8_t* slot = sq.buf + (size_t(sq.pi & mask) << sq.log_stride);
  std::memset(slot, 0, size_t{1} << sq.log_stride);
  std::memcpy(slot, wqe.data(), std::min<size_t>(wqe.size(), size_t{1} << sq.log_stride));
  sq.wr_id[sq.pi & mask] = wr_id;
  ++sq.pi;
  mpr_dp_ring_sq(&qp->dp);
}

template <typename T>
void Append(std::vector<uint8_t>& v, const T& seg) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&seg);
  v.insert(v.end(), p, p + sizeof seg);
}

// ---------------------------------------------------- local WQE checks --

TEST_F(TwoHostsTest, InvalidLkeyFailsWithBadLkeyAndFlushesTheRestInOrder) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    ExpectHealthy(healthy, 1);
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> b0 = p.b.prefill(2);
    mpr_sge r = p.b.sge(0, 4096);
    ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(70, &r, 1)), 0);
    mpr_sge bad = {p.a.va(0), 100, 0xffffff00u};
    mpr_sge good = p.a.sge(0, 100);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(1, MPR_WQE_SEND, &bad, 1)), 0);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp,
                                 RemoteWr(2, MPR_WQE_RDMA_WRITE, &good, 1, p.b.va(0), p.b.mr.key)),
              0);
    // Unsignaled, but a flushed WQE always completes.
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(3, MPR_WQE_SEND, &good, 1, 0)), 0);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 3);
    ASSERT_EQ(sc.size(), 3u);
    ExpectErr(sc[0], 1, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY, p.a, 0, 0, 100, "bad lkey");
    EXPECT_EQ(sc[0].opcode, MPR_CQE_REQ_SEND);
    ExpectFlushed(sc[1], 2, p.a, 1);
    ExpectFlushed(sc[2], 3, p.a, 2);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    EXPECT_EQ(bench->counter("nic.h0.requester.wqe_errors"), 1u);
    // Later WQEs of the QP in ERR are flushed too, and so are its RECVs.
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(4, MPR_WQE_SEND, &good, 1)), 0);
    ExpectFlushed(WaitWc(*p.a.ctx, p.a.scq), 4, p.a, 3, 0, /*byte_len=*/0);
    mpr_sge ar = p.a.sge(0, 64);
    ASSERT_EQ(p.a.ctx->post_recv(p.a.qp, RecvWr(40, &ar, 1)), 0);
    const mpr_wc fr = WaitWc(*p.a.ctx, p.a.rcq);
    ExpectFlushed(fr, 40, p.a, 0, 1);
    EXPECT_EQ(fr.opcode, MPR_CQE_RESP_RECV);
    // Nothing reached the peer, which is still fine.
    StaysEmpty(*p.b.ctx, p.b.rcq);
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
    EXPECT_EQ(QpState(p.b), MPR_QPS_RTS);
    ExpectHealthy(healthy, 3);
  });
}

TEST_F(TwoHostsTest, LocalSgeChecksGiveTheirSyndromes) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    struct Case {
      const char* name;
      uint8_t opcode;
      uint32_t syndrome;
    };
    const Case cases[] = {
        {"SGE runs past the end of its MR", MPR_WQE_RDMA_WRITE, MPR_SYN_LKEY_BOUNDS},
        {"SGE starts before its MR", MPR_WQE_SEND, MPR_SYN_LKEY_BOUNDS},
        {"lkey of another PD", MPR_WQE_RDMA_WRITE, MPR_SYN_BAD_LKEY},
        {"READ into an MR without local write", MPR_WQE_RDMA_READ, MPR_SYN_LKEY_ACCESS},
        {"atomic result into an MR without local write", MPR_WQE_ATOMIC_FA, MPR_SYN_LKEY_ACCESS},
    };
    int k = 0;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      QpPair p = bench->make_pair();
      const std::vector<uint8_t> a0 = p.a.prefill(10 + k), b0 = p.b.prefill(20 + k);
      mpr_sge s{};
      switch (k) {
        case 0:
          s = {p.a.va(p.a.len - 10), 20, p.a.mr.key};
          break;
        case 1:
          s = {p.a.va(0) - 1, 20, p.a.mr.key};
          break;
        case 2: {
          const Endpoint other = bench->make_endpoint(0, PairOptions());
          s = {other.va(0), 20, other.mr.key};
          break;
        }
        default: {
          const host::MemoryRegion ro = p.a.ctx->reg_mr(p.a.pd, p.a.buf, 4096, 0);
          s = {p.a.va(64), 8, ro.key};
          break;
        }
      }
      mpr_send_wr w = RemoteWr(100 + k, c.opcode, &s, 1, p.b.va(0), p.b.mr.key);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, w), 0);
      const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
      ExpectErr(wc, 100 + k, MPR_CQE_LOC_PROT_ERR, c.syndrome, p.a, 0, 0, s.length);
      EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
      EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), a0));
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
      ++k;
    }
    ExpectHealthy(healthy, 30);
  });
}

TEST_F(TwoHostsTest, ErrorCompletionReportsTheWholeWqeLength) {
  Run([&] {
    PairOptions o;
    o.caps.max_send_sge = 3;
    // The bad SGE first, then good ones: the CQE's byte_len is still the
    // WQE's total length (docs/host-interface.md, CQE byte_len).
    for (int bad_at = 0; bad_at < 3; ++bad_at) {
      SCOPED_TRACE("bad lkey in SGE " + std::to_string(bad_at));
      QpPair p = bench->make_pair(o);
      mpr_sge s[3] = {p.a.sge(0, 100), p.a.sge(1000, 50), p.a.sge(2000, 7)};
      s[bad_at].lkey = 0xffffff00u;
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(5, MPR_WQE_SEND, s, 3)), 0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 5, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY, p.a, 0, 0,
                157);
    }
  });
}

TEST_F(TwoHostsTest, QpInErrorRecoversThroughReset) {
  Run([&] {
    PairOptions o;
    QpPair p = bench->make_pair(o);
    mpr_sge bad = {p.a.va(0), 10, 0xffffff00u};
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(i, MPR_WQE_SEND, &bad, 1)), 0);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 3);
    ASSERT_EQ(sc.size(), 3u);
    EXPECT_EQ(sc[0].status, MPR_CQE_LOC_PROT_ERR);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    // ERR -> RESET on both sides, then a new connection with new PSNs.
    for (Endpoint* e : {&p.a, &p.b}) {
      mpr_qp_attr reset{};
      reset.attr_mask = MPR_QP_ATTR_STATE;
      reset.qp_state = MPR_QPS_RESET;
      ASSERT_TRUE(e->ctx->modify_qp(e->qp, reset).ok());
      EXPECT_EQ(QpState(*e), MPR_QPS_RESET);
      EXPECT_EQ(e->qp->dp.sq.pi, 0u);
    }
    p.a.psn = 0x300000;
    p.b.psn = 0x400000;
    bench->connect(p.a, p.b, o);
    EXPECT_EQ(p.a.query().sq_psn, 0x300000u);
    mpr_sge s = p.a.sge(0, 10);
    ASSERT_EQ(
        p.a.ctx->post_send(p.a.qp, RemoteWr(7, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
        0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(wc.wr_id, 7u);
    EXPECT_EQ(wc.wqe_index, 0u) << "the SQ restarts at index 0 after RESET";
    ExpectHealthy(p, 230);
  });
}

// ------------------------------------------------ remote access checks --

TEST_F(TwoHostsTest, ReadOutsideTheRkeyRegionIsARemoteAccessError) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(40);
    mpr_sge br = p.b.sge(0, 64);
    ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(90, &br, 1)), 0);
    mpr_sge s = p.a.sge(0, 200);
    ASSERT_EQ(p.a.ctx->post_send(
                  p.a.qp, RemoteWr(7, MPR_WQE_RDMA_READ, &s, 1, p.b.va(p.b.len - 100), p.b.mr.key)),
              0);
    mpr_sge s2 = p.a.sge(1000, 10);
    ASSERT_EQ(
        p.a.ctx->post_send(p.a.qp, RemoteWr(8, MPR_WQE_RDMA_WRITE, &s2, 1, p.b.va(0), p.b.mr.key)),
        0);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2);
    ASSERT_EQ(sc.size(), 2u);
    ExpectErr(sc[0], 7, MPR_CQE_REM_ACCESS_ERR, MPR_SYN_NAK_REM_ACCESS, p.a, 0, 0, 200);
    EXPECT_EQ(sc[0].opcode, MPR_CQE_REQ_RDMA_READ);
    ExpectFlushed(sc[1], 8, p.a, 1);
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), a0));
    // The responder: QP in ERR, an access-error event, its RECV flushed.
    EXPECT_NE(nullptr, WaitAsync(p.b.host->driver(), MPR_EQE_QP_ACCESS_ERR, p.b.qpn()));
    EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    ExpectFlushed(WaitWc(*p.b.ctx, p.b.rcq), 90, p.b, 0, 1);
    EXPECT_EQ(CountAsync(p.a.host->driver(), MPR_EQE_QP_ACCESS_ERR), 0u);
    EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), 1u);
    ExpectHealthy(healthy, 41);
  });
}

TEST_F(TwoHostsTest, WriteWithAnRkeyOfAnotherPdOrWithoutRightsIsRejected) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(k == 0   ? "rkey of another PD"
                   : k == 1 ? "MR without remote write"
                            : "QP without remote write");
      PairOptions o;
      if (k == 2) o.access = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_READ;
      QpPair p = bench->make_pair(o);
      const Endpoint other = bench->make_endpoint(1, PairOptions());  // own PD on h1
      const std::vector<uint8_t> b0 = p.b.prefill(50 + k), o0 = other.prefill(60 + k);
      uint64_t addr = p.b.va(0);
      uint32_t rkey = p.b.mr.key;
      if (k == 0) {
        addr = other.va(0);
        rkey = other.mr.key;
      } else if (k == 1) {
        rkey = p.b.ctx->reg_mr(p.b.pd, p.b.buf, 4096, MPR_ACCESS_REMOTE_READ).key;
      } else {
        // The MR allows the WRITE; only the QP does not.
        rkey = p.b.ctx->reg_mr(p.b.pd, p.b.buf, 4096, kAllAccess).key;
      }
      mpr_sge s = p.a.sge(0, 100);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWr(5, MPR_WQE_RDMA_WRITE, &s, 1, addr, rkey)), 0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 5, MPR_CQE_REM_ACCESS_ERR, MPR_SYN_NAK_REM_ACCESS, p.a,
                0, 0, 100);
      EXPECT_NE(nullptr, WaitAsync(p.b.host->driver(), MPR_EQE_QP_ACCESS_ERR, p.b.qpn()));
      EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
      EXPECT_TRUE(SameBytes(other.get(0, other.len), o0));
    }
    ExpectHealthy(healthy, 63);
  });
}

TEST_F(TwoHostsTest, AtomicToAnUnalignedAddressIsAnInvalidRequest) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(70), b0 = p.b.prefill(71);
    mpr_sge s = p.a.sge(16, 8);
    mpr_send_wr w = RemoteWr(3, MPR_WQE_ATOMIC_FA, &s, 1, p.b.va(4100), p.b.mr.key);
    w.compare_add = 1;
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, w), 0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    ExpectErr(wc, 3, MPR_CQE_REM_INV_REQ_ERR, MPR_SYN_NAK_INV_REQ, p.a, 0, 0, 8);
    EXPECT_EQ(wc.opcode, MPR_CQE_REQ_ATOMIC_FA);
    EXPECT_NE(nullptr, WaitAsync(p.b.host->driver(), MPR_EQE_QP_REQ_ERR, p.b.qpn()));
    EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), a0));
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
    EXPECT_EQ(bench->counter("nic.h1.responder.atomics"), 0u);
    ExpectHealthy(healthy, 72);
  });
}

// ------------------------------------------------------ receive errors --

TEST_F(TwoHostsTest, SendLargerThanTheRecvFailsOnBothSides) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    for (const uint32_t n : {200u, 3000u}) {  // one packet, then several
      SCOPED_TRACE(std::to_string(n) + " bytes into 100");
      QpPair p = bench->make_pair();
      const std::vector<uint8_t> b0 = p.b.prefill(80 + n);
      mpr_sge r[2] = {p.b.sge(1000, 100), p.b.sge(2000, 4096)};
      ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(11, &r[0], 1)), 0);
      ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(12, &r[1], 1)), 0);
      mpr_sge s = p.a.sge(0, n);
      // An armed-for-solicited CQ fires for an error completion too.
      p.b.ctx->arm_cq(p.b.rcq, true);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(9, MPR_WQE_SEND, &s, 1)), 0);
      // (The responder's CQE comes before the NAK reaches the requester.)
      sc_core::wait(Ms(1), p.b.rcq->event);
      EXPECT_FALSE(sc_core::timed_out()) << "no event for an error completion";
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 9, MPR_CQE_REM_INV_REQ_ERR, MPR_SYN_NAK_INV_REQ, p.a, 0,
                0, n);
      const auto rc = WaitWcs(*p.b.ctx, p.b.rcq, 2);
      ASSERT_EQ(rc.size(), 2u);
      ExpectErr(rc[0], 11, MPR_CQE_LOC_LEN_ERR, MPR_SYN_RECV_TOO_SMALL, p.b, 0, 1, 0, "short recv");
      EXPECT_EQ(rc[0].opcode, MPR_CQE_RESP_RECV);
      ExpectFlushed(rc[1], 12, p.b, 1, 1);
      EXPECT_NE(nullptr, WaitAsync(p.b.host->driver(), MPR_EQE_QP_REQ_ERR, p.b.qpn()));
      EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0)) << "bytes placed past the RECV";
    }
    ExpectHealthy(healthy, 90);
  });
}

TEST_F(TwoHostsTest, RecvBufferFailingItsLkeyCheckNamesTheReason) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    for (int k = 0; k < 2; ++k) {
      SCOPED_TRACE(k == 0 ? "RECV into an MR without local write" : "RECV SGE outside its MR");
      QpPair p = bench->make_pair();
      const std::vector<uint8_t> b0 = p.b.prefill(100 + k);
      mpr_sge r{};
      if (k == 0) {
        const host::MemoryRegion ro =
            p.b.ctx->reg_mr(p.b.pd, p.b.buf, 8192, MPR_ACCESS_REMOTE_READ);
        r = {p.b.va(0), 4096, ro.key};
      } else {
        r = {p.b.va(p.b.len - 100), 4096, p.b.mr.key};
      }
      ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(21, &r, 1)), 0);
      mpr_sge s = p.a.sge(0, 64);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(22, MPR_WQE_SEND, &s, 1)), 0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 22, MPR_CQE_REM_OP_ERR, MPR_SYN_NAK_REM_OP, p.a, 0, 0,
                64);
      const mpr_wc rc = WaitWc(*p.b.ctx, p.b.rcq);
      // docs/host-interface.md: a RECV SGE failing its check completes with
      // BAD_LKEY whatever the reason (key, PD, bounds or access).
      ExpectErr(rc, 21, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY, p.b, 0, 1, 0, "recv");
      const host::AsyncEvent* ev = WaitAsync(p.b.host->driver(), MPR_EQE_QP_FATAL, p.b.qpn());
      ASSERT_NE(ev, nullptr);
      EXPECT_EQ(ev->data1, MPR_SYN_BAD_LKEY) << "hw.h: QP_FATAL data1 is the syndrome";
      EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
    }
    ExpectHealthy(healthy, 110);
  });
}

// ------------------------------------------------- retries run out --

// Receiver not ready, on go-back-N and on the out-of-order engines (which
// answer a packet without a RECV with an RNR NAK carrying the ACK trailer,
// wait the RNR timer and resend from snd_una: transport.md, "Receiver not
// ready"): the same verbs outcome, and no retransmission timeout on the way.
class RnrTest : public PerTransportTest {
 protected:
  bool mprdma() const { return BaseTransport(GetParam()) == "mprdma"; }
  bool out_of_order() const { return BaseTransport(GetParam()) != "gbn"; }
  uint64_t timeouts() const {
    return bench->counter("nic.h0.requester.timeouts") +
           (mprdma() ? bench->counter("nic.h0.transport.rtos") : 0);
  }
};

TEST_P(RnrTest, SendWithoutRecvExhaustsRnrRetries) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    for (const uint8_t rnr_retry : {uint8_t{0}, uint8_t{1}, uint8_t{3}}) {
      SCOPED_TRACE("rnr_retry " + std::to_string(rnr_retry));
      PairOptions o;
      o.rnr_retry = rnr_retry;
      QpPair p = bench->make_pair(o);
      const uint64_t naks = bench->counter("nic.h1.responder.rnr_naks");
      const uint64_t waits = out_of_order() ? bench->counter("nic.h0.transport.rnr_waits") : 0;
      const sc_core::sc_time t0 = sc_core::sc_time_stamp();
      mpr_sge s = p.a.sge(0, 500);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(31, MPR_WQE_SEND, &s, 1)), 0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq, Ms(20)), 31, MPR_CQE_RNR_RETRY_EXC_ERR,
                MPR_SYN_RNR_EXCEEDED, p.a, 0, 0, 500);
      // One NAK per attempt, and the requester waited min_rnr_timer (0.64 ms,
      // set by connect) between attempts, no longer.
      EXPECT_EQ(bench->counter("nic.h1.responder.rnr_naks") - naks, rnr_retry + 1u);
      if (out_of_order()) {
        EXPECT_EQ(bench->counter("nic.h0.transport.rnr_waits") - waits, rnr_retry + 1u);
      }
      EXPECT_GE(sc_core::sc_time_stamp() - t0, Us(640) * rnr_retry);
      EXPECT_LT(sc_core::sc_time_stamp() - t0, Us(640) * (rnr_retry + 1u));
      EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
      // The responder did nothing wrong and stays usable.
      EXPECT_EQ(QpState(p.b), MPR_QPS_RTS);
    }
    ExpectHealthy(healthy, 120);
  });
  EXPECT_EQ(timeouts(), 0u);
}

TEST_P(RnrTest, InfiniteRnrRetryWaitsForTheRecv) {
  Run([&] {
    for (const uint8_t op : {MPR_WQE_SEND_IMM, MPR_WQE_RDMA_WRITE_IMM}) {
      for (const uint32_t n : {500u, 8192u}) {
        SCOPED_TRACE(std::string(op == MPR_WQE_SEND_IMM ? "SEND_IMM" : "WRITE_IMM") + " of " +
                     std::to_string(n) + " bytes, RECV posted 3 ms late");
        PairOptions o;
        o.rnr_retry = 7;  // retry for ever
        o.retry_cnt = 0;  // no transport retries: nothing here is lost
        QpPair p = bench->make_pair(o);
        const std::vector<uint8_t> a0 = p.a.prefill(130), b0 = p.b.prefill(131);
        const uint64_t rnr = bench->counter("nic.h1.responder.rnr_naks");
        mpr_sge s = p.a.sge(0, n);
        mpr_send_wr w = RemoteWr(41, op, &s, 1, p.b.va(20000), p.b.mr.key);
        w.imm_data = 0x5a5a0001;
        ASSERT_EQ(p.a.ctx->post_send(p.a.qp, w), 0);
        sc_core::wait(Ms(3));
        EXPECT_GE(bench->counter("nic.h1.responder.rnr_naks") - rnr, 3u);
        mpr_sge r = p.b.sge(0, 16384);
        ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(42, &r, 1)), 0);
        const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(20));
        ASSERT_EQ(wc.status, MPR_CQE_SUCCESS) << "syndrome " << wc.syndrome;
        EXPECT_EQ(wc.byte_len, n);
        const mpr_wc rc = WaitWc(*p.b.ctx, p.b.rcq);
        EXPECT_EQ(rc.status, MPR_CQE_SUCCESS);
        EXPECT_EQ(rc.byte_len, n);
        EXPECT_EQ(rc.wr_id, 42u);
        EXPECT_EQ(rc.imm_data, 0x5a5a0001u);
        EXPECT_EQ(rc.flags, MPR_CQE_F_IMM);
        EXPECT_EQ(rc.opcode,
                  op == MPR_WQE_SEND_IMM ? MPR_CQE_RESP_RECV_IMM : MPR_CQE_RESP_WRITE_IMM);
        std::vector<uint8_t> want = b0;
        std::copy(a0.begin(), a0.begin() + n, want.begin() + (op == MPR_WQE_SEND_IMM ? 0 : 20000));
        EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
        EXPECT_EQ(QpState(p.b), MPR_QPS_RTS);
      }
    }
  });
  EXPECT_EQ(timeouts(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Transport, RnrTest,
                         ::testing::Values("gbn", "mprdma", "irn", "mprdma_lockstep",
                                           "gbn_lockstep"),
                         TransportName);

// An RTL engine's context RAM full (nic.transport_impl rtl, 256 rows): the
// QP that reaches RTR beyond it fails with an asynchronous QP_FATAL naming
// MPR_SYN_NO_CONTEXT, as hardware out of a resource does; the simulation
// and every other QP go on.
TEST_F(TwoHostsTest, RtlContextRamFullFailsTheNextQpOnly) {
  TwoHosts::Options o;
  o.transport = "mprdma_rtl";
  Build(o);
  Run(
      [&] {
        std::vector<QpPair> pairs;
        for (uint32_t i = 0; i < 256; ++i) pairs.push_back(bench->make_pair());
        PairOptions po;
        po.connect = false;
        QpPair extra = bench->make_pair(po);
        const auto ai = extra.a.ctx->local_info(extra.a.qp, extra.a.psn);
        const auto bi = extra.b.ctx->local_info(extra.b.qp, extra.b.psn);
        extra.b.ctx->connect(extra.b.qp, bi, ai, po.path_mtu, po.access, po.timeout, po.retry_cnt,
                             po.rnr_retry, po.max_rd_atomic, 0, /*to_rts=*/false);
        const host::AsyncEvent* ev =
            WaitAsync(extra.b.host->driver(), MPR_EQE_QP_FATAL, extra.b.qpn());
        ASSERT_NE(ev, nullptr);
        EXPECT_EQ(ev->data1, MPR_SYN_NO_CONTEXT);
        EXPECT_EQ(QpState(extra.b), MPR_QPS_ERR);
        ExpectHealthy(pairs.front(), 31);
        ExpectHealthy(pairs.back(), 32);
        // Its row comes back when a connection goes: a new QP connects.
        pairs.front().a.ctx->destroy_qp(pairs.front().a.qp);
        pairs.front().b.ctx->destroy_qp(pairs.front().b.qp);
        QpPair again = bench->make_pair();
        ExpectHealthy(again, 33);
      },
      Ms(2000));
}

class DeadPeerTest : public TwoHostsTest, public ::testing::WithParamInterface<bool> {};

TEST_P(DeadPeerTest, RequesterGivesUpAfterRetryCnt) {
  const bool destroy = GetParam();
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.timeout = 4;  // 4.096 us * 2^4 = 65.5 us
    o.retry_cnt = 2;
    QpPair p = bench->make_pair(o);
    if (destroy) {
      p.b.ctx->destroy_qp(p.b.qp);
    } else {
      mpr_qp_attr reset{};
      reset.attr_mask = MPR_QP_ATTR_STATE;
      reset.qp_state = MPR_QPS_RESET;
      ASSERT_TRUE(p.b.ctx->modify_qp(p.b.qp, reset).ok());
      EXPECT_EQ(QpState(p.b), MPR_QPS_RESET);
    }
    const uint64_t dropped = bench->counter("nic.h1.responder.dropped");
    const uint64_t retx = bench->counter("nic.h0.requester.retransmits");
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    mpr_sge s = p.a.sge(0, 100);
    ASSERT_EQ(
        p.a.ctx->post_send(p.a.qp, RemoteWr(51, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
        0);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(52, MPR_WQE_SEND, &s, 1)), 0);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2, Ms(5));
    ASSERT_EQ(sc.size(), 2u);
    ExpectErr(sc[0], 51, MPR_CQE_RETRY_EXC_ERR, MPR_SYN_RETRY_EXCEEDED, p.a, 0, 0, 100);
    ExpectFlushed(sc[1], 52, p.a, 1, 0, 100);  // sent, so read by the NIC
    // Sent once and retried retry_cnt times, each after a full timeout.
    const sc_core::sc_time waited = sc_core::sc_time_stamp() - t0;
    EXPECT_GE(waited, Us(3 * 65.5));
    EXPECT_LT(waited, Us(5 * 65.5));
    EXPECT_EQ(bench->counter("nic.h0.requester.retransmits") - retx, 2u * 2);  // 2 packets each
    EXPECT_EQ(bench->counter("nic.h1.responder.dropped") - dropped, 3u * 2);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    ExpectHealthy(healthy, 140);
  });
}

INSTANTIATE_TEST_SUITE_P(Peer, DeadPeerTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "destroyed" : "in_reset";
                         });

// ----------------------------------------------------------- doorbells --

TEST_F(TwoHostsTest, DoorbellsForAQpInResetAreRefusedAndDropped) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    Endpoint e = bench->make_endpoint(0, PairOptions());
    ASSERT_EQ(QpState(e), MPR_QPS_RESET);
    mpr_sge s = e.sge(0, 64);
    mpr_send_wr w = SendWr(61, MPR_WQE_SEND, &s, 1);
    EXPECT_EQ(e.ctx->post_send(e.qp, w), -EINVAL);
    mpr_recv_wr rw = RecvWr(62, &s, 1);
    EXPECT_EQ(e.ctx->post_recv(e.qp, rw), -EINVAL);
    EXPECT_EQ(e.qp->dp.sq.pi, 0u);
    EXPECT_EQ(e.qp->dp.rq.pi, 0u);

    // A buggy provider writes a valid WQE anyway and rings raw doorbells.
    e.qp->dp.state = MPR_DP_QPS_RTS;
    ASSERT_EQ(mpr_dp_post_send(&e.qp->dp, &w, 0), 0);
    e.qp->dp.state = MPR_DP_QPS_RESET;
    const uint64_t sq_drops = bench->counter("nic.h0.requester.doorbells_dropped");
    const uint64_t rq_drops = bench->counter("nic.h0.responder.doorbells_dropped");
    host::Driver& d = e.host->driver();
    d.uar_write64(e.ctx->uar(), MPR_UAR_SQ_DB, MPR_SQ_DB(e.qpn(), 1));
    d.uar_write64(e.ctx->uar(), MPR_UAR_RQ_DB, MPR_RQ_DB(e.qpn(), 1));
    sc_core::wait(Us(50));
    EXPECT_EQ(bench->counter("nic.h0.requester.doorbells_dropped") - sq_drops, 1u);
    EXPECT_EQ(bench->counter("nic.h0.responder.doorbells_dropped") - rq_drops, 1u);
    EXPECT_TRUE(RingIsEmpty(e.scq)) << "the NIC wrote into the send CQ";
    EXPECT_TRUE(RingIsEmpty(e.rcq)) << "the NIC wrote into the receive CQ";
    EXPECT_EQ(QpState(e), MPR_QPS_RESET);

    // The same QP, connected properly, then works from index 0.
    e.qp->dp.sq.pi = 0;
    PairOptions o;
    Endpoint peer = bench->make_endpoint(1, o);
    bench->connect(e, peer, o);
    const std::vector<uint8_t> e0 = e.prefill(150), p0 = peer.prefill(151);
    mpr_sge ws = e.sge(0, 1000);
    ASSERT_EQ(
        e.ctx->post_send(e.qp, RemoteWr(63, MPR_WQE_RDMA_WRITE, &ws, 1, peer.va(10), peer.mr.key)),
        0);
    const mpr_wc wc = WaitWc(*e.ctx, e.scq);
    EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(wc.wr_id, 63u);
    EXPECT_EQ(wc.wqe_index, 0u);
    std::vector<uint8_t> want = p0;
    std::copy(e0.begin(), e0.begin() + 1000, want.begin() + 10);
    EXPECT_TRUE(SameBytes(peer.get(0, peer.len), want));
    ExpectHealthy(healthy, 152);
  });
}

TEST_F(TwoHostsTest, DoorbellsOnAnotherUarPageAreDropped) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    QpPair p = bench->make_pair();
    host::VerbsContext& intruder = bench->new_context(0);
    ASSERT_NE(intruder.uar(), p.a.ctx->uar());
    host::Driver& d = p.a.host->driver();
    const std::vector<uint8_t> a0 = p.a.prefill(160), b0 = p.b.prefill(161);
    mpr_sge s = p.a.sge(0, 128);
    const mpr_send_wr w = RemoteWr(71, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key);
    ASSERT_EQ(mpr_dp_post_send(&p.a.qp->dp, &w, /*ring=*/0), 0);
    const uint64_t bad = bench->counter("nic.h0.hostif.bad_doorbells");
    const uint64_t bad_cq = bench->counter("nic.h0.cq.bad_doorbells");
    d.uar_write64(intruder.uar(), MPR_UAR_SQ_DB, MPR_SQ_DB(p.a.qpn(), 1));  // another process
    d.uar_write64(0, MPR_UAR_SQ_DB, MPR_SQ_DB(p.a.qpn(), 1));               // the kernel's page
    // An arm request from the wrong page must not arm the CQ either.
    d.uar_write64(intruder.uar(), MPR_UAR_CQ_DB, MPR_CQ_DB(p.a.scq->cqn, MPR_CQ_DB_ARM_NEXT, 0));
    sc_core::wait(Us(50));
    EXPECT_EQ(bench->counter("nic.h0.hostif.bad_doorbells") - bad, 2u);
    EXPECT_EQ(bench->counter("nic.h0.cq.bad_doorbells") - bad_cq, 1u);
    StaysEmpty(*p.a.ctx, p.a.scq);
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
    // The right page: the WQE runs, and no completion event fires.
    mpr_dp_ring_sq(&p.a.qp->dp);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    EXPECT_EQ(wc.status, MPR_CQE_SUCCESS);
    EXPECT_EQ(wc.wr_id, 71u);
    sc_core::wait(Us(100), p.a.scq->event);
    EXPECT_TRUE(sc_core::timed_out()) << "a CQ armed from a foreign UAR page fired";
    std::vector<uint8_t> want = b0;
    std::copy(a0.begin(), a0.begin() + 128, want.begin());
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
    ExpectHealthy(healthy, 162);
  });
}

TEST_F(TwoHostsTest, DoorbellClaimingMoreWqesThanTheRingIsDropped) {
  Run([&] {
    QpPair p = bench->make_pair();
    const uint32_t ring = 1u << p.a.qp->dp.sq.log_size;
    const uint64_t drops = bench->counter("nic.h0.requester.doorbells_dropped");
    p.a.host->driver().uar_write64(p.a.ctx->uar(), MPR_UAR_SQ_DB, MPR_SQ_DB(p.a.qpn(), ring + 1));
    sc_core::wait(Us(50));
    EXPECT_EQ(bench->counter("nic.h0.requester.doorbells_dropped") - drops, 1u);
    StaysEmpty(*p.a.ctx, p.a.scq, sc_core::SC_ZERO_TIME);
    EXPECT_EQ(QpState(p.a), MPR_QPS_RTS);
    ExpectHealthy(p, 240);
  });
}

// A device reset (the driver's, or the platform's when QEMU goes away) in
// the middle of reception: the frames queued at the MAC are discarded, and
// the receive pipeline that was parsing one of them must not live on beside
// the one the next frame starts. Here h1 parses a frame in 10 us (rx_parse
// 2500 cycles) while h0's WRITEs arrive every ~50 ns, so a backlog is
// queued when h1 is reset and its pipeline is due to take the next frame
// within 10 us; h0's next frames arrive before that, and are then parsed
// one per 10 us, not two.
TEST_F(TwoHostsTest, DeviceResetDuringReceptionKeepsOneReceivePipeline) {
  TwoHosts::Options opt;
  opt.nic = [](nic::NicConfig& n) {
    if (n.name == "h1") n.latency.rx_parse = 2500;  // 10 us a frame
  };
  Build(opt);
  Run([&] {
    QpPair p = bench->make_pair();
    auto write_burst = [&](uint64_t first, int n) {
      mpr_sge s = p.a.sge(0, 64);
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWr(first + i, MPR_WQE_RDMA_WRITE, &s, 1,
                                                      p.b.va(0), p.b.mr.key, 0)),
                  0);
    };
    // Until h0 has put `n` frames on the wire, and they have crossed it.
    auto sent = [&](uint64_t n) {
      while (bench->counter("nic.h0.mac.tx_packets") < n) sc_core::wait(Us(0.1));
      sc_core::wait(Us(1));
    };
    auto parsed = [&] {
      return bench->counter("nic.h1.mac.rx_packets") + bench->counter("nic.h1.mac.rx_drops");
    };
    const uint64_t tx0 = bench->counter("nic.h0.mac.tx_packets");
    write_burst(0, 24);
    sent(tx0 + 24);
    const uint64_t before = parsed();
    EXPECT_LT(before, 12u) << "a backlog is queued at h1's MAC";
    const uint32_t v = MPR_SET(RESET, RESET, 1);
    bench->h1().root_complex().mmio_write(
        bench->h1().nic().config().bar0_base + MPR_BAR0_OFF(RESET), &v, sizeof v);
    const sc_core::sc_time reset_at = sc_core::sc_time_stamp();
    write_burst(100, 24);  // to a NIC without QPs: parsed, then dropped
    sent(tx0 + 48);
    sc_core::wait(reset_at + Us(100) - sc_core::sc_time_stamp());
    EXPECT_LE(parsed() - before, 10u) << "one frame per 10 us: one pipeline";
    EXPECT_GE(parsed() - before, 8u);
    sc_core::wait(Us(200));
    EXPECT_EQ(parsed() - before, 24u) << "the frames sent after the reset, each once";
  });
}

TEST_F(TwoHostsTest, CqOverflowRaisesAnEventAndSparesOtherQueues) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.send_cq_entries = 2;
    QpPair p = bench->make_pair(o);
    ASSERT_EQ(p.a.scq->dp.log_size, 1u);
    mpr_sge s = p.a.sge(0, 16);
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(
          p.a.ctx->post_send(p.a.qp, RemoteWr(i, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
          0);
    EXPECT_NE(nullptr, WaitAsync(p.a.host->driver(), MPR_EQE_CQ_ERROR, p.a.scq->cqn));
    sc_core::wait(Us(50));
    EXPECT_EQ(bench->counter("nic.h0.cq.cq_overflows"), 2u);
    // The two that fitted are intact.
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2);
    ASSERT_EQ(sc.size(), 2u);
    EXPECT_EQ(sc[0].wr_id, 0u);
    EXPECT_EQ(sc[1].wr_id, 1u);
    StaysEmpty(*p.a.ctx, p.a.scq);
    ExpectHealthy(healthy, 250);
  });
}

TEST_F(TwoHostsTest, CqWithoutAConsumerRecordOverflowsOnceItsRingIsFull) {
  // Without a consumer-index record the NIC cannot learn that CQEs were
  // polled: the third CQE into a ring of two overflows the CQ, which raises
  // the CQ error event without a DMA read of a record.
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.send_cq_entries = 2;
    o.send_cq_record = false;
    QpPair p = bench->make_pair(o);
    const uint64_t reads = bench->counter("nic.h0.cq.dbrec_reads");
    mpr_sge s = p.a.sge(0, 16);
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(
          p.a.ctx->post_send(p.a.qp, RemoteWr(i, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
          0);
    EXPECT_NE(nullptr, WaitAsync(p.a.host->driver(), MPR_EQE_CQ_ERROR, p.a.scq->cqn));
    sc_core::wait(Us(50));
    EXPECT_EQ(bench->counter("nic.h0.cq.cq_overflows"), 1u);
    EXPECT_EQ(bench->counter("nic.h0.cq.dbrec_reads"), reads);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2);
    ASSERT_EQ(sc.size(), 2u);
    EXPECT_EQ(sc[0].wr_id, 0u);
    EXPECT_EQ(sc[1].wr_id, 1u);
    StaysEmpty(*p.a.ctx, p.a.scq);
    ExpectHealthy(healthy, 255);
  });
}

TEST_F(TwoHostsTest, DeregisteredKeysAreRefusedOnBothSides) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    {
      SCOPED_TRACE("remote key deregistered");
      QpPair p = bench->make_pair();
      const std::vector<uint8_t> b0 = p.b.prefill(260);
      const host::MemoryRegion old = p.b.mr;
      p.b.ctx->dereg_mr(old);
      const host::MemoryRegion again = p.b.ctx->reg_mr(p.b.pd, p.b.buf, p.b.len, kAllAccess);
      EXPECT_NE(again.key, old.key) << "a stale rkey must not name the new MR";
      mpr_sge s = p.a.sge(0, 100);
      ASSERT_EQ(
          p.a.ctx->post_send(p.a.qp, RemoteWr(1, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), old.key)),
          0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 1, MPR_CQE_REM_ACCESS_ERR, MPR_SYN_NAK_REM_ACCESS, p.a,
                0, 0, 100);
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0));
    }
    {
      SCOPED_TRACE("local key deregistered");
      QpPair p = bench->make_pair();
      p.a.ctx->dereg_mr(p.a.mr);
      mpr_sge s = p.a.sge(0, 100);
      ASSERT_EQ(
          p.a.ctx->post_send(p.a.qp, RemoteWr(2, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
          0);
      ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 2, MPR_CQE_LOC_PROT_ERR, MPR_SYN_BAD_LKEY, p.a, 0, 0,
                100);
    }
    ExpectHealthy(healthy, 261);
  });
}

// ---------------------------------------------------- admin commands --

TEST_F(TwoHostsTest, UnknownAdminOpcodeIsRefusedAndTheQueueGoesOn) {
  Run([&] {
    host::VerbsContext& ctx = bench->new_context(0);
    host::Driver& d = ctx.driver();
    const uint64_t errors = bench->counter("nic.h0.firmware.command_errors");
    for (const uint16_t op : {uint16_t{0x7f}, uint16_t{0x14}, uint16_t{0xffff}}) {
      mpr_cmd cmd{};
      cmd.hdr.opcode = op;
      const host::CommandResult r = d.execute(cmd);
      EXPECT_EQ(r.status, MPR_CMD_BAD_OPCODE) << "opcode " << op;
    }
    mpr_cmd nop{};
    nop.hdr.opcode = MPR_CMD_NOP;
    EXPECT_EQ(d.execute(nop).status, MPR_CMD_OK);
    EXPECT_NE(ctx.alloc_pd(), 0u);
    // A reserved header field that is not zero is a parameter error.
    mpr_cmd rsv{};
    rsv.hdr.opcode = MPR_CMD_NOP;
    rsv.hdr.rsvd0 = 1;
    const host::CommandResult r = d.execute(rsv);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, MPR_CMD_SYN_RESERVED);
    EXPECT_EQ(bench->counter("nic.h0.firmware.command_errors") - errors, 4u);
    QpPair p = bench->make_pair();
    ExpectHealthy(p, 170);
  });
}

TEST_F(TwoHostsTest, ModifyQpNamesTheMissingOrForbiddenAttribute) {
  Run([&] {
    PairOptions o;
    Endpoint e = bench->make_endpoint(0, o);
    Endpoint peer = bench->make_endpoint(1, o);
    mpr_qp_attr a{};
    a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_ACCESS_FLAGS;
    a.qp_state = MPR_QPS_INIT;
    a.port_num = 1;
    a.access_flags = kAllAccess;
    host::CommandResult r = e.ctx->modify_qp(e.qp, a);
    EXPECT_EQ(r.status, MPR_CMD_BAD_ATTR);
    EXPECT_EQ(r.syndrome, MPR_QP_ATTR_PORT);
    EXPECT_EQ(QpState(e), MPR_QPS_RESET);
    EXPECT_EQ(e.qp->dp.state, MPR_DP_QPS_RESET);
    // An attribute the transition does not allow.
    a.attr_mask |= MPR_QP_ATTR_PORT | MPR_QP_ATTR_SQ_PSN;
    r = e.ctx->modify_qp(e.qp, a);
    EXPECT_EQ(r.status, MPR_CMD_BAD_ATTR);
    EXPECT_EQ(r.syndrome, MPR_QP_ATTR_SQ_PSN);
    a.attr_mask &= ~MPR_QP_ATTR_SQ_PSN;
    ASSERT_TRUE(e.ctx->modify_qp(e.qp, a).ok());
    EXPECT_EQ(QpState(e), MPR_QPS_INIT);

    // INIT -> RTR without a destination QPN.
    const auto pi = peer.ctx->local_info(peer.qp, peer.psn);
    mpr_qp_attr rtr{};
    rtr.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_RQ_PSN |
                    MPR_QP_ATTR_MAX_DEST_RD_ATOMIC | MPR_QP_ATTR_MIN_RNR_TIMER;
    rtr.qp_state = MPR_QPS_RTR;
    rtr.path_mtu = MPR_MTU_1024;
    rtr.rq_psn = pi.psn;
    rtr.max_dest_rd_atomic = 4;
    rtr.min_rnr_timer = 12;
    rtr.hop_limit = 64;
    rtr.dgid[10] = rtr.dgid[11] = 0xff;
    rtr.dgid[15] = 2;
    rtr.dgid[12] = 10;
    std::memcpy(rtr.dmac, pi.mac.data(), 6);
    r = e.ctx->modify_qp(e.qp, rtr);
    EXPECT_EQ(r.status, MPR_CMD_BAD_ATTR);
    EXPECT_EQ(r.syndrome, MPR_QP_ATTR_DEST_QPN);
    // A value out of range names its attribute too.
    rtr.attr_mask |= MPR_QP_ATTR_DEST_QPN;
    rtr.dest_qpn = pi.qpn;
    rtr.path_mtu = 6;
    r = e.ctx->modify_qp(e.qp, rtr);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, MPR_QP_ATTR_PATH_MTU);
    // A transition that does not exist.
    mpr_qp_attr rts{};
    rts.attr_mask = MPR_QP_ATTR_STATE;
    rts.qp_state = MPR_QPS_RTS;
    r = e.ctx->modify_qp(e.qp, rts);
    EXPECT_EQ(r.status, MPR_CMD_BAD_STATE);
    EXPECT_EQ(r.syndrome, MPR_QP_ATTR_STATE);
    EXPECT_EQ(QpState(e), MPR_QPS_INIT);
    EXPECT_EQ(e.qp->dp.state, MPR_DP_QPS_INIT);

    // After all that, a proper connection works.
    bench->connect(e, peer, o);
    QpPair p{e, peer};
    ExpectHealthy(p, 180);
  });
}

// ------------------------------------------------------ malformed WQEs --

TEST_F(TwoHostsTest, MalformedWqesAreLocalQpOperationErrors) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.caps.max_inline = 32;
    struct Case {
      const char* name;
      uint32_t status;
      uint32_t syndrome;
    };
    const Case cases[] = {
        {"unknown opcode 0x09", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_OPCODE},
        {"NOP opcode", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_OPCODE},
        {"wqe_index does not match the slot", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE},
        {"num_ds larger than the slot", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE},
        {"undefined flag bit", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE},
        {"inline block longer than max_inline", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE},
        {"WRITE without its remote segment", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE},
        {"atomic with a 4-byte SGE", MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_ATOMIC_ALIGN},
    };
    int k = 0;
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      QpPair p = bench->make_pair(o);
      const std::vector<uint8_t> b0 = p.b.prefill(190 + k);
      // Index 0 is a good WRITE, index 1 the bad WQE, index 2 a good one
      // that must be flushed.
      mpr_sge s = p.a.sge(0, 64);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp,
                                   RemoteWr(1, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(512), p.b.mr.key)),
                0);
      mpr_wqe_ctrl ctrl{};
      ctrl.opcode = MPR_WQE_RDMA_WRITE;
      ctrl.flags = MPR_WQE_F_SIGNALED;
      ctrl.wqe_index = 1;
      mpr_wqe_raddr ra{};
      ra.remote_addr = p.b.va(0);
      ra.rkey = p.b.mr.key;
      mpr_wqe_data data{};
      data.byte_count = 64;
      data.lkey = p.a.mr.key;
      data.addr = p.a.va(0);
      std::vector<uint8_t> body;
      switch (k) {
        case 0:
          ctrl.opcode = 0x09;
          break;
        case 1:
          ctrl.opcode = MPR_WQE_NOP;
          break;
        case 2:
          ctrl.wqe_index = 6;
          break;
        case 3:
          ctrl.num_ds = static_cast<uint8_t>((1u << p.a.qp->dp.sq.log_stride) / 16);
          break;
        case 4:
          ctrl.flags |= 0x80;
          break;
        case 7:
          ctrl.opcode = MPR_WQE_ATOMIC_FA;
          data.byte_count = 4;
          break;
        default:
          break;
      }
      if (k == 5) {
        ctrl.flags |= MPR_WQE_F_INLINE;
        ctrl.num_ds = 1 + 4;  // raddr + a 64-byte inline block
        Append(body, ra);
        const uint32_t len = 60;  // max_inline is 32
        Append(body, len);
        body.resize(body.size() + 60, 0xab);
      } else if (k == 6) {
        ctrl.num_ds = 0;  // a WRITE needs at least its remote segment
      } else {
        if (k != 3) ctrl.num_ds = k == 7 ? 3 : 2;
        Append(body, ra);
        if (k == 7) Append(body, mpr_wqe_atomic{1, 0});
        Append(body, data);
      }
      std::vector<uint8_t> wqe;
      Append(wqe, ctrl);
      wqe.insert(wqe.end(), body.begin(), body.end());
      PostRaw(p.a.qp, wqe, 2);
      ASSERT_EQ(p.a.ctx->post_send(
                    p.a.qp, RemoteWr(3, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(1024), p.b.mr.key)),
                0);
      const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 3);
      ASSERT_EQ(sc.size(), 3u);
      EXPECT_EQ(sc[0].status, MPR_CQE_SUCCESS);
      EXPECT_EQ(sc[0].wr_id, 1u);
      ExpectErr(sc[1], 2, c.status, c.syndrome, p.a, 1, 0, kAnyLen, c.name);
      ExpectFlushed(sc[2], 3, p.a, 2);
      EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
      // Only the first WRITE reached the peer.
      std::vector<uint8_t> want = b0;
      const std::vector<uint8_t> src = p.a.get(0, 64);
      std::copy(src.begin(), src.end(), want.begin() + 512);
      EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
      ++k;
    }
    ExpectHealthy(healthy, 200);
  });
}

TEST_F(TwoHostsTest, MoreSgesThanTheNicSupportsIsABadWqe) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.caps.max_send_sge = 17;  // the NIC's max_sge is 16; the library does not know
    ASSERT_EQ(bench->h0().driver().device().max_sge, 16u);
    QpPair p = bench->make_pair(o);
    mpr_sge g[17];
    for (uint32_t i = 0; i < 17; ++i) g[i] = p.a.sge(64 * i, 8);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(1, MPR_WQE_SEND, g, 17)), 0);
    ExpectErr(WaitWc(*p.a.ctx, p.a.scq), 1, MPR_CQE_LOC_QP_OP_ERR, MPR_SYN_BAD_WQE, p.a, 0, 0,
              kAnyLen);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    ExpectHealthy(healthy, 270);
  });
}

// ------------------------------------------------- unbacked host memory --

TEST_F(TwoHostsTest, WriteFromAnMrOverUnbackedMemoryFailsWithDmaFault) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> b0 = p.b.prefill(210);
    const UnbackedMr mr = RegisterUnbackedMr(p.a, MPR_ACCESS_LOCAL_WRITE, 2, 0x500000000000ull);
    ASSERT_NE(mr.key, 0u);
    const uint64_t read_errors = bench->counter("pcie.h0.dma_read_service_errors");
    mpr_sge s = {mr.iova + 100, 5000, mr.key};
    ASSERT_EQ(
        p.a.ctx->post_send(p.a.qp, RemoteWr(81, MPR_WQE_RDMA_WRITE, &s, 1, p.b.va(0), p.b.mr.key)),
        0);
    mpr_sge g = p.a.sge(0, 10);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(82, MPR_WQE_SEND, &g, 1)), 0);
    const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2);
    ASSERT_EQ(sc.size(), 2u);
    ExpectErr(sc[0], 81, MPR_CQE_LOC_PROT_ERR, MPR_SYN_DMA_FAULT, p.a, 0, 0, 5000,
              "unbacked source");
    ExpectFlushed(sc[1], 82, p.a, 1);
    EXPECT_GT(bench->counter("pcie.h0.dma_read_service_errors"), read_errors);
    EXPECT_EQ(QpState(p.a), MPR_QPS_ERR);
    sc_core::wait(Us(50));
    EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), b0)) << "bytes from nowhere reached the peer";
    ExpectHealthy(healthy, 211);
  });
}

TEST_F(TwoHostsTest, ReadFromARemoteMrOverUnbackedMemoryIsARemoteOperationalError) {
  Run([&] {
    QpPair healthy = bench->make_pair();
    QpPair p = bench->make_pair();
    const std::vector<uint8_t> a0 = p.a.prefill(220);
    const UnbackedMr mr = RegisterUnbackedMr(p.b, MPR_ACCESS_REMOTE_READ, 1, 0x600000000000ull);
    ASSERT_NE(mr.key, 0u);
    mpr_sge s = p.a.sge(0, 2000);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWr(91, MPR_WQE_RDMA_READ, &s, 1, mr.iova, mr.key)),
              0);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq);
    ExpectErr(wc, 91, MPR_CQE_REM_OP_ERR, MPR_SYN_NAK_REM_OP, p.a, 0, 0, 2000);
    const host::AsyncEvent* ev = WaitAsync(p.b.host->driver(), MPR_EQE_QP_FATAL, p.b.qpn());
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->data1, MPR_SYN_DMA_FAULT);
    EXPECT_EQ(QpState(p.b), MPR_QPS_ERR);
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), a0));
    ExpectHealthy(healthy, 221);
  });
}

}  // namespace
}  // namespace mprdma::test
