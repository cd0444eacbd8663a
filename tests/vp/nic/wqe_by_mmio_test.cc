// Integration: WQE by MMIO (hw.h MPR_UAR_BF) and doorbell batching, between
// two modeled hosts. WRITEs posted by MMIO reach the NIC without a DMA read
// of the send ring and complete with their data intact; posted behind one
// doorbell per batch, they are read by DMA; a WQE written to a page that is
// not its QP's, or claiming more than the window, is dropped and counted.
#include <gtest/gtest.h>
#include <mprdma/hw.h>

#include <cstring>
#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario(const std::string& job_extra, const std::string& size,
                     const std::string& top_extra = "") {
  return "name: bf\n"
         "end_time: 50ms\n" +
         top_extra +
         "nic: {mtu: 1024}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n"
         "  - {name: w, app: write_bw, client: h0, server: h1, sizes: [" +
         size + "], iterations: 100, tx_depth: 16, cq_mod: 1" + job_extra + "}\n";
}

class WqeByMmio : public test::ScenarioRun {
 protected:
  host::SizeResult run_job(const std::string& text) {
    EXPECT_TRUE(run(text));
    return result();
  }
};

TEST_F(WqeByMmio, WqesWrittenToTheUarPageNeedNoDmaRead) {
  for (const std::string size : {"64", "4KiB"}) {  // inline and with an SGE
    SCOPED_TRACE(size);
    const std::string inl = size == "64" ? ", inline_size: 64" : "";
    const host::SizeResult r = run_job(scenario(", wqe_by_mmio: true" + inl, size));
    EXPECT_TRUE(r.data_ok) << r.error;
    EXPECT_EQ(counter("nic.h0.hostif.wqes_by_mmio"), 100u);
    EXPECT_EQ(counter("nic.h0.requester.wqes_by_mmio"), 100u);
    EXPECT_EQ(counter("nic.h0.dma.wqe_read_bytes"), 0u);
    EXPECT_EQ(counter("nic.h0.requester.wqes"), 100u);
  }
}

// Without write combining (a QEMU guest's stores) each WQE arrives as
// 8-byte writes, its padding words last: 48-byte WQEs (8 bytes inline,
// padding words 6 and 7), then 64-byte ones (20 bytes inline). Each is
// assembled from its eight words and its data arrives intact. (A window
// left with a shorter WQE's padding, which once made the NIC take those
// zeros for a longer WQE's last words, is what guest.bad_input.lkey caught:
// each perftest size here runs on a fresh UAR page.)
TEST_F(WqeByMmio, EightByteStoresAssembleEachWqeFromItsOwnWords) {
  const std::string no_wc = "host: {write_combining: false}\n";
  const host::SizeResult r =
      run_job(scenario(", wqe_by_mmio: true, inline_size: 20", "8, 20", no_wc));
  EXPECT_TRUE(r.data_ok) << r.error;
  ASSERT_EQ(platform->outcomes().at(0).results.size(), 2u);
  EXPECT_TRUE(platform->outcomes()[0].results[1].data_ok);
  EXPECT_EQ(counter("nic.h0.requester.wqes_by_mmio"), 200u);
  EXPECT_EQ(counter("nic.h0.hostif.bad_doorbells"), 0u);
  // Every store was a TLP of its own: 200 WQEs of one line of 8 words.
  EXPECT_GE(counter("pcie.h0.downstream.mmio_write.tlps"), 200u * 8);
}

TEST_F(WqeByMmio, BatchesBehindOneDoorbellAreReadByDma) {
  const host::SizeResult one = run_job(scenario("", "4KiB"));
  EXPECT_TRUE(one.data_ok);
  const uint64_t writes_each = counter("pcie.h0.downstream.mmio_write.tlps");
  EXPECT_EQ(counter("nic.h0.requester.wqes_by_mmio"), 0u);
  EXPECT_GT(counter("nic.h0.dma.wqe_read_bytes"), 0u);
  const host::SizeResult batched = run_job(scenario(", post_list: 8", "4KiB"));
  EXPECT_TRUE(batched.data_ok);
  // 100 doorbells become 13 (12 batches of 8 and the rest): 87 fewer MMIO
  // writes of the 8-byte doorbell.
  EXPECT_EQ(writes_each - counter("pcie.h0.downstream.mmio_write.tlps"), 87u);
  EXPECT_EQ(counter("nic.h0.requester.wqes"), 100u);
}

TEST_F(WqeByMmio, AWqeForAnotherPageOrTooLongIsDroppedAndCounted) {
  run_job(scenario("", "4KiB"));
  host::Driver& drv = platform->modeled_host("h0").driver();
  const uint64_t bad0 = counter("nic.h0.hostif.bad_doorbells");
  // Stores from outside the host's threads: posted without waiting.
  const uint64_t bf = drv.nic().bar2_base + MPR_UAR_BF;  // UAR page 0
  uint8_t line[64] = {};
  mpr_wqe_ctrl ctrl{};
  ctrl.opcode = MPR_WQE_RDMA_WRITE;
  ctrl.num_ds = 2;
  ctrl.bf_qpn = 2;  // the job's QP, bound to another UAR page than page 0
  std::memcpy(line, &ctrl, sizeof ctrl);
  drv.root_complex().post_mmio_write(bf, line, sizeof line);
  ctrl.num_ds = 40;  // 656 bytes: more than the 256-byte window
  std::memcpy(line, &ctrl, sizeof ctrl);
  drv.root_complex().post_mmio_write(bf, line, sizeof line);
  sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_US));
  EXPECT_EQ(counter("nic.h0.hostif.bad_doorbells") - bad0, 2u);
  EXPECT_EQ(counter("nic.h0.requester.wqes_by_mmio"), 0u);
}

}  // namespace
}  // namespace mprdma::platform
