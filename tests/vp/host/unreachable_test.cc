// Valid objects whose memory the NIC cannot reach once they are in use: the
// host's IOMMU takes pages away from the device (RootComplex::revoke_dma),
// as a buggy or hostile guest driver would arrange by handing the NIC
// addresses it does not own. The NIC answers as hardware does: the object
// fails with an asynchronous event that names it and says why (DMA fault),
// and nothing else on the NIC is held up.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tests/vp/host/two_hosts.h"
#include "vp/nic/context_memory.h"

namespace mprdma::test {
namespace {

constexpr uint32_t kQkey = 0x11111111;

// Waits (bounded) for an asynchronous event of `type` about `object` on
// host `h`; returns its data1 (the syndrome), or fails.
std::optional<uint32_t> WaitEvent(TwoHosts& bench, int h, uint8_t type, uint32_t object,
                                  sc_core::sc_time timeout = Ms(5)) {
  host::Driver& d = bench.h(h).driver();
  const sc_core::sc_time end = sc_core::sc_time_stamp() + timeout;
  for (size_t seen = 0;;) {
    for (; seen < d.async_events().size(); ++seen) {
      const host::AsyncEvent& e = d.async_events()[seen];
      if (e.type == type && e.data0 == object) return e.data1;
    }
    if (sc_core::sc_time_stamp() >= end) break;
    sc_core::wait(end - sc_core::sc_time_stamp(), d.async_event());
  }
  ADD_FAILURE() << "no event " << int(type) << " for object " << object << " on h" << h;
  return std::nullopt;
}

class UnreachableTest : public TwoHostsTest {};

// Finding 2: a UD QP whose receive ring lies where the NIC cannot read,
// moved to RTR, plus one RQ doorbell. The failed ring read used to ask the
// transport engine for the expected PSN of a QP no engine holds, and the
// exception stopped the simulation. A UD QP has no peer to NAK: the QP
// goes to ERR with a QP_FATAL event whose syndrome is the DMA fault.
TEST_F(UnreachableTest, UdReceiveRingOutOfReachFailsTheQpWithAnEvent) {
  Build();
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.caps.qp_type = MPR_QPT_UD;
    o.connect = false;
    QpPair ud = bench->make_pair(o);
    ud.a.ctx->activate_ud(ud.a.qp, kQkey, ud.a.psn);
    ud.b.ctx->activate_ud(ud.b.qp, kQkey, ud.b.psn);
    const mpr_qpc* qpc = bench->h1().nic().contexts().qp(ud.b.qpn());
    ASSERT_NE(qpc, nullptr);
    bench->h1().root_complex().revoke_dma(qpc->rq_base, 4096);
    const mpr_sge sge = ud.b.sge(0, 1024);
    ASSERT_EQ(ud.b.ctx->post_recv(ud.b.qp, RecvWr(7, &sge, 1)), 0);
    const auto syndrome = WaitEvent(*bench, 1, MPR_EQE_QP_FATAL, ud.b.qpn());
    ASSERT_TRUE(syndrome.has_value());
    EXPECT_EQ(*syndrome, uint32_t{MPR_SYN_DMA_FAULT});
    EXPECT_EQ(ud.b.query().qp_state, MPR_QPS_ERR);
    // No NAK: a UD QP has no peer to send one to.
    EXPECT_EQ(bench->counter("nic.h1.responder.fatal_naks"), 0u);
    // The RECV completes flushed, as every RECV of a QP in ERR does.
    const mpr_wc wc = WaitWc(*ud.b.ctx, ud.b.rcq);
    EXPECT_EQ(wc.status, uint32_t{MPR_CQE_WR_FLUSH_ERR});
    EXPECT_EQ(wc.wr_id, 7u);
    ExpectHealthy(healthy, 3);
  });
}

// Finding 4: a full CQ whose consumer-index record the NIC cannot read.
// The failed read neither retired the CQE nor failed the CQ, so the
// completion unit asked again for ever and no other CQ of the NIC ever saw
// a completion. Now the CQ fails with a CQ_ERROR event (syndrome: DMA
// fault), its completions are dropped and counted, and the rest goes on.
TEST_F(UnreachableTest, FullCqWithAnUnreadableRecordFailsAloneWithAnEvent) {
  Build();
  Run([&] {
    QpPair healthy = bench->make_pair();
    PairOptions o;
    o.send_cq_entries = 2;
    QpPair p = bench->make_pair(o);
    bench->h0().root_complex().revoke_dma(p.a.scq->dbrec_pa, 4);
    const uint64_t overflows = bench->counter("nic.h0.cq.cq_overflows");
    for (int i = 0; i < 4; ++i) {
      const mpr_sge s = p.a.sge(0, 64);
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(i, MPR_WQE_RDMA_WRITE, &s, p.b, 0)), 0);
    }
    const auto syndrome = WaitEvent(*bench, 0, MPR_EQE_CQ_ERROR, p.a.scq->cqn);
    ASSERT_TRUE(syndrome.has_value());
    EXPECT_EQ(*syndrome, uint32_t{MPR_SYN_DMA_FAULT});
    EXPECT_GT(bench->counter("nic.h0.cq.cq_overflows"), overflows);
    ExpectHealthy(healthy, 5);
  });
}

// DEREG_MR of a buffer a READ is still scattering into: the requester
// checks its WQEs' keys again once a region was freed, so the READ fails
// with a local protection error and no response lands in the freed pages
// after DEREG_MR has completed, on every engine.
class LocalDeregTest : public PerTransportTest {};

TEST_P(LocalDeregTest, DeregisteringTheBufferOfAReadFailsTheRead) {
  Run([&] {
    PairOptions o;
    o.buf_bytes = 1 << 20;
    QpPair p = bench->make_pair(o);
    p.b.prefill(3);
    const mpr_sge s = p.a.sge(0, 1 << 20);
    ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_READ, &s, p.b, 0)), 0);
    sc_core::wait(Us(20));  // responses are arriving
    p.a.ctx->dereg_mr(p.a.mr);
    sc_core::wait(Us(5));  // writes already on the PCIe link land
    const std::vector<uint8_t> after_dereg = p.a.get(0, p.a.len);
    const mpr_wc wc = WaitWc(*p.a.ctx, p.a.scq, Ms(50));
    EXPECT_EQ(wc.status, uint32_t{MPR_CQE_LOC_PROT_ERR});
    EXPECT_EQ(wc.syndrome, uint32_t{MPR_SYN_BAD_LKEY});
    sc_core::wait(Us(300));
    EXPECT_TRUE(SameBytes(p.a.get(0, p.a.len), after_dereg))
        << "READ data placed into a deregistered buffer";
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, LocalDeregTest,
                         ::testing::Values("gbn", "dcqcn", "mprdma", "irn"), TransportName);

// Atomics wait in the atomic unit for their lock bucket (one bucket: they
// run one after the other). A region deregistered meanwhile is not touched
// by the ones still waiting: the first of them gets a remote access NAK,
// and the region's bytes do not change after DEREG_MR has completed.
TEST_F(UnreachableTest, AtomicsWaitingForTheirLockDoNotTouchADeregisteredRegion) {
  constexpr int kAtomics = 64;
  TwoHosts::Options opt;
  opt.nic = [](nic::NicConfig& n) {
    n.atomics.lock_buckets = 1;
    n.limits.max_rd_atomic = kAtomics;
  };
  Build(opt);
  Run([&] {
    PairOptions o;
    o.max_rd_atomic = kAtomics;
    QpPair p = bench->make_pair(o);
    p.b.put(0, std::vector<uint8_t>(8, 0));
    for (int i = 0; i < kAtomics; ++i) {
      const mpr_sge s = p.a.sge(8 * i, 8);
      mpr_send_wr wr = RemoteWrTo(i, MPR_WQE_ATOMIC_FA, &s, p.b, 0);
      wr.compare_add = 1;
      ASSERT_EQ(p.a.ctx->post_send(p.a.qp, wr), 0);
    }
    // The first answer is back: the others are queued at the one lock.
    std::vector<mpr_wc> wcs = WaitWcs(*p.a.ctx, p.a.scq, 1);
    p.b.ctx->dereg_mr(p.b.mr);
    sc_core::wait(Us(3));  // a write already on the PCIe link lands
    const std::vector<uint8_t> at_dereg = p.b.get(0, 8);
    const std::vector<mpr_wc> rest = WaitWcs(*p.a.ctx, p.a.scq, kAtomics - 1, Ms(20));
    wcs.insert(wcs.end(), rest.begin(), rest.end());
    ASSERT_EQ(wcs.size(), size_t{kAtomics});
    int done = 0, access = 0;
    for (const mpr_wc& wc : wcs) {
      done += wc.status == MPR_CQE_SUCCESS;
      access += wc.status == MPR_CQE_REM_ACCESS_ERR;
    }
    EXPECT_LT(done, kAtomics) << "DEREG_MR came after the last atomic ran";
    EXPECT_EQ(access, 1) << "the first one after it is refused, the rest flushed";
    sc_core::wait(Us(100));
    EXPECT_TRUE(SameBytes(p.b.get(0, 8), at_dereg)) << "an atomic wrote after DEREG_MR";
  });
}

// REG_MR straight to the driver with `pages` as its page list.
host::CommandResult RegMr(Endpoint& e, const std::vector<uint64_t>& pages) {
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_REG_MR;
  cmd.u.reg_mr.iova = 0x700000000000ull;
  cmd.u.reg_mr.length = uint64_t{pages.size()} << 12;
  cmd.u.reg_mr.pdn = e.pd;
  cmd.u.reg_mr.access = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_WRITE;
  cmd.u.reg_mr.page_shift = 12;
  cmd.u.reg_mr.num_pages = static_cast<uint32_t>(pages.size());
  return e.host->driver().execute(cmd, pages.data(), pages.size() * 8);
}

// Finding 8: MR page lists were not checked against host memory. A page in
// a hole made a peer's WRITE vanish after its ACK; a page in the MSI window
// let a peer's WRITE raise interrupts. REG_MR now refuses both, and a good
// list still registers.
TEST_F(UnreachableTest, RegMrRefusesPagesOutsideHostMemoryAndTheMsiWindow) {
  Build();
  Run([&] {
    QpPair p = bench->make_pair();
    host::SparseMemory& mem = bench->h1().memory();
    std::vector<uint64_t> pages = mem.alloc_pages(3);
    host::CommandResult r = RegMr(p.b, pages);
    ASSERT_TRUE(r.ok()) << "a good page list";
    pages[1] = mem.base() + mem.size() + (uint64_t{1} << 30);  // a hole
    r = RegMr(p.b, pages);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, uint32_t{MPR_CMD_SYN_ADDRESS});
    pages[1] = 0xFEE00000ull;  // the MSI window
    r = RegMr(p.b, pages);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, uint32_t{MPR_CMD_SYN_ADDRESS});
    ExpectHealthy(p, 7);
  });
}

// Finding 2's other half: CREATE_QP took any non-zero aligned ring address.
// Rings, CQs and their records outside host memory are refused by the
// command that names them.
TEST_F(UnreachableTest, QueuesOutsideHostMemoryAreRefusedWhenCreated) {
  Build();
  Run([&] {
    QpPair p = bench->make_pair();
    host::SparseMemory& mem = bench->h0().memory();
    const uint64_t hole = mem.base() + mem.size() + (uint64_t{1} << 30);
    mpr_cmd cmd{};
    cmd.hdr.opcode = MPR_CMD_CREATE_QP;
    auto& c = cmd.u.create_qp;
    c.sq_base = mem.alloc_contiguous(1 << 14);
    c.rq_base = hole;
    c.pdn = p.a.pd;
    c.send_cqn = p.a.scq->cqn;
    c.recv_cqn = p.a.rcq->cqn;
    c.uar_index = p.a.ctx->uar();
    c.qp_type = MPR_QPT_UD;
    c.sq_log_size = 4;
    c.sq_log_stride = 7;
    c.rq_log_size = 4;
    c.rq_log_stride = MPR_RQ_LOG_STRIDE_MIN;
    host::CommandResult r = p.a.host->driver().execute(cmd);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, uint32_t{MPR_CMD_SYN_ADDRESS});
    c.rq_base = mem.alloc_contiguous(1 << 14);
    r = p.a.host->driver().execute(cmd);
    EXPECT_TRUE(r.ok()) << "the same QP with its ring in memory, status " << int(r.status);
    mpr_cmd cq{};
    cq.hdr.opcode = MPR_CMD_CREATE_CQ;
    cq.u.create_cq.log_size = 4;
    cq.u.create_cq.base = mem.alloc_contiguous(4096);
    cq.u.create_cq.dbrec = 0xFEE00000ull;  // a record in the MSI window
    cq.u.create_cq.uar_index = p.a.ctx->uar();
    r = p.a.host->driver().execute(cq);
    EXPECT_EQ(r.status, MPR_CMD_BAD_PARAM);
    EXPECT_EQ(r.syndrome, uint32_t{MPR_CMD_SYN_ADDRESS});
  });
}

}  // namespace
}  // namespace mprdma::test
