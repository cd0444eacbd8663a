// The rdma-core provider's pure translation layer (sw_stack/provider/
// mprdma_xlate.c) on its own: ibv_send_wr -> mpr_send_wr for every opcode and
// flag, refused opcodes and flags, mpr_wc -> ibv_wc for every CQE opcode,
// status pass-through, immediates, and the CQ clean-up that drops a dead QP's
// CQEs (phase bits, wrap-around, the consumer-index record). Needs only the
// public <infiniband/verbs.h>; the provider as a whole is exercised by
// provider/run.sh against a real rdma-core build.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <mprdma/dp.h>
#include <mprdma/hw.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sw_stack/provider/mprdma_xlate.h"

namespace mprdma::test {
namespace {

ibv_send_wr BaseWr(ibv_wr_opcode op, ibv_sge* sge, int num_sge) {
  ibv_send_wr wr{};
  wr.wr_id = 0x1122334455667788ull;
  wr.opcode = op;
  wr.sg_list = sge;
  wr.num_sge = num_sge;
  return wr;
}

TEST(ProviderXlateSendWr, EveryOpcodeMapsToItsWqeOpcode) {
  const struct {
    ibv_wr_opcode verbs;
    uint8_t wqe;
  } cases[] = {
      {IBV_WR_SEND, MPR_WQE_SEND},
      {IBV_WR_SEND_WITH_IMM, MPR_WQE_SEND_IMM},
      {IBV_WR_RDMA_WRITE, MPR_WQE_RDMA_WRITE},
      {IBV_WR_RDMA_WRITE_WITH_IMM, MPR_WQE_RDMA_WRITE_IMM},
      {IBV_WR_RDMA_READ, MPR_WQE_RDMA_READ},
      {IBV_WR_ATOMIC_CMP_AND_SWP, MPR_WQE_ATOMIC_CAS},
      {IBV_WR_ATOMIC_FETCH_AND_ADD, MPR_WQE_ATOMIC_FA},
  };
  for (const auto& c : cases) {
    ibv_sge sge{0x1000, 8, 0x55};
    ibv_send_wr wr = BaseWr(c.verbs, &sge, 1);
    mpr_send_wr out;
    ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0) << "opcode " << c.verbs;
    EXPECT_EQ(out.opcode, c.wqe) << "opcode " << c.verbs;
    EXPECT_EQ(out.wr_id, wr.wr_id);
  }
}

TEST(ProviderXlateSendWr, OpcodesWithoutAWqeAreRefused) {
  const ibv_wr_opcode refused[] = {IBV_WR_SEND_WITH_INV, IBV_WR_LOCAL_INV, IBV_WR_BIND_MW,
                                   IBV_WR_TSO, IBV_WR_DRIVER1};
  for (ibv_wr_opcode op : refused) {
    ibv_send_wr wr = BaseWr(op, nullptr, 0);
    mpr_send_wr out;
    EXPECT_EQ(mprdma_xlate_send_wr(&wr, &out), -EINVAL) << "opcode " << op;
  }
}

TEST(ProviderXlateSendWr, FlagsMapOneToOne) {
  const struct {
    unsigned verbs;
    uint8_t wqe;
  } cases[] = {
      {0, 0},
      {IBV_SEND_SIGNALED, MPR_WQE_F_SIGNALED},
      {IBV_SEND_FENCE, MPR_WQE_F_FENCE},
      {IBV_SEND_SOLICITED, MPR_WQE_F_SOLICITED},
      {IBV_SEND_INLINE, MPR_WQE_F_INLINE},
      {IBV_SEND_SIGNALED | IBV_SEND_FENCE | IBV_SEND_SOLICITED | IBV_SEND_INLINE,
       MPR_WQE_F_SIGNALED | MPR_WQE_F_FENCE | MPR_WQE_F_SOLICITED | MPR_WQE_F_INLINE},
  };
  for (const auto& c : cases) {
    ibv_send_wr wr = BaseWr(IBV_WR_SEND, nullptr, 0);
    wr.send_flags = c.verbs;
    mpr_send_wr out;
    ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
    EXPECT_EQ(out.flags, c.wqe) << "send_flags 0x" << std::hex << c.verbs;
  }
}

TEST(ProviderXlateSendWr, UnknownFlagsAreRefusedNotDropped) {
  ibv_send_wr wr = BaseWr(IBV_WR_SEND, nullptr, 0);
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_IP_CSUM;
  mpr_send_wr out;
  EXPECT_EQ(mprdma_xlate_send_wr(&wr, &out), -EINVAL);
  wr.send_flags = 1u << 20;
  EXPECT_EQ(mprdma_xlate_send_wr(&wr, &out), -EINVAL);
}

TEST(ProviderXlateSendFlags, SharedByPostSendAndTheWrApi) {
  uint8_t flags = 0xff;
  EXPECT_EQ(mprdma_xlate_send_flags(IBV_SEND_SIGNALED | IBV_SEND_INLINE, &flags), 0);
  EXPECT_EQ(flags, MPR_WQE_F_SIGNALED | MPR_WQE_F_INLINE);
  EXPECT_EQ(mprdma_xlate_send_flags(0, &flags), 0);
  EXPECT_EQ(flags, 0);
  EXPECT_EQ(mprdma_xlate_send_flags(IBV_SEND_IP_CSUM, &flags), -EINVAL);
}

TEST(ProviderXlateSendWr, RdmaFieldsAndImmediateInNetworkOrder) {
  ibv_sge sge[2] = {{0x1000, 100, 7}, {0x2000, 200, 8}};
  ibv_send_wr wr = BaseWr(IBV_WR_RDMA_WRITE_WITH_IMM, sge, 2);
  wr.imm_data = htonl(0xdeadbeef);
  wr.wr.rdma.remote_addr = 0xabcdef0123456789ull;
  wr.wr.rdma.rkey = 0x4242;
  mpr_send_wr out;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.imm_data, htonl(0xdeadbeef));  // passed through, not swapped
  EXPECT_EQ(out.remote_addr, 0xabcdef0123456789ull);
  EXPECT_EQ(out.rkey, 0x4242u);
  EXPECT_EQ(out.compare_add, 0u);
  EXPECT_EQ(out.swap, 0u);
  // The SGE list is handed over without a copy: same memory, same layout.
  ASSERT_EQ(out.num_sge, 2u);
  EXPECT_EQ(static_cast<const void*>(out.sg_list), static_cast<const void*>(sge));
  EXPECT_EQ(out.sg_list[1].addr, 0x2000u);
  EXPECT_EQ(out.sg_list[1].length, 200u);
  EXPECT_EQ(out.sg_list[1].lkey, 8u);
}

TEST(ProviderXlateSendWr, ReadTakesTheRdmaUnionMember) {
  ibv_sge sge{0x3000, 64, 9};
  ibv_send_wr wr = BaseWr(IBV_WR_RDMA_READ, &sge, 1);
  wr.wr.rdma.remote_addr = 0x5000;
  wr.wr.rdma.rkey = 77;
  mpr_send_wr out;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.remote_addr, 0x5000u);
  EXPECT_EQ(out.rkey, 77u);
  EXPECT_EQ(out.imm_data, 0u);
}

TEST(ProviderXlateSendWr, ImmediateOnlyForImmOpcodes) {
  ibv_send_wr wr = BaseWr(IBV_WR_SEND, nullptr, 0);
  wr.imm_data = htonl(5);
  mpr_send_wr out;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.imm_data, 0u);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.imm_data, htonl(5));
}

TEST(ProviderXlateSendWr, AtomicsTakeTheAtomicUnionMember) {
  ibv_sge sge{0x1000, 8, 3};
  ibv_send_wr wr = BaseWr(IBV_WR_ATOMIC_CMP_AND_SWP, &sge, 1);
  wr.wr.atomic.remote_addr = 0x8000;
  wr.wr.atomic.rkey = 0x99;
  wr.wr.atomic.compare_add = 111;
  wr.wr.atomic.swap = 222;
  mpr_send_wr out;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.remote_addr, 0x8000u);
  EXPECT_EQ(out.rkey, 0x99u);
  EXPECT_EQ(out.compare_add, 111u);
  EXPECT_EQ(out.swap, 222u);

  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_EQ(out.opcode, MPR_WQE_ATOMIC_FA);
  EXPECT_EQ(out.compare_add, 111u);  // the addend
}

TEST(ProviderXlateSendWr, NegativeSgeCountBecomesOneTheDataPathRefuses) {
  ibv_send_wr wr = BaseWr(IBV_WR_SEND, nullptr, -1);
  mpr_send_wr out;
  ASSERT_EQ(mprdma_xlate_send_wr(&wr, &out), 0);
  EXPECT_GT(out.num_sge, 1u << 30);
}

TEST(ProviderXlateRecvWr, CopiesIdAndSgeList) {
  ibv_sge sge[3] = {};
  ibv_recv_wr wr{};
  wr.wr_id = 42;
  wr.sg_list = sge;
  wr.num_sge = 3;
  mpr_recv_wr out;
  mprdma_xlate_recv_wr(&wr, &out);
  EXPECT_EQ(out.wr_id, 42u);
  EXPECT_EQ(static_cast<const void*>(out.sg_list), static_cast<const void*>(sge));
  EXPECT_EQ(out.num_sge, 3u);
}

mpr_wc Wc(uint32_t opcode, uint32_t status = MPR_CQE_SUCCESS) {
  mpr_wc w{};
  w.wr_id = 0xfeedfacecafebeefull;
  w.status = status;
  w.opcode = opcode;
  w.byte_len = 4096;
  w.qpn = 0x123456;
  w.is_recv = opcode >= MPR_CQE_RESP_RECV;
  return w;
}

TEST(ProviderXlateWc, EveryCqeOpcodeMapsToItsVerbsOpcode) {
  const struct {
    uint32_t cqe;
    ibv_wc_opcode verbs;
  } cases[] = {
      {MPR_CQE_REQ_SEND, IBV_WC_SEND},
      {MPR_CQE_REQ_RDMA_WRITE, IBV_WC_RDMA_WRITE},
      {MPR_CQE_REQ_RDMA_READ, IBV_WC_RDMA_READ},
      {MPR_CQE_REQ_ATOMIC_CAS, IBV_WC_COMP_SWAP},
      {MPR_CQE_REQ_ATOMIC_FA, IBV_WC_FETCH_ADD},
      {MPR_CQE_RESP_RECV, IBV_WC_RECV},
      {MPR_CQE_RESP_RECV_IMM, IBV_WC_RECV},
      {MPR_CQE_RESP_WRITE_IMM, IBV_WC_RECV_RDMA_WITH_IMM},
  };
  for (const auto& c : cases) {
    mpr_wc in = Wc(c.cqe);
    ibv_wc out;
    std::memset(&out, 0xa5, sizeof(out));  // every field must be written
    mprdma_xlate_wc(&in, &out);
    EXPECT_EQ(out.opcode, c.verbs) << "cqe opcode " << c.cqe;
    EXPECT_EQ(out.status, IBV_WC_SUCCESS);
    EXPECT_EQ(out.wr_id, in.wr_id);
    EXPECT_EQ(out.byte_len, 4096u);
    EXPECT_EQ(out.qp_num, 0x123456u);
    EXPECT_EQ(out.src_qp, 0u);
    EXPECT_EQ(out.wc_flags, 0u);
    EXPECT_EQ(out.imm_data, 0u);
    EXPECT_EQ(out.vendor_err, 0u);
    EXPECT_EQ(out.pkey_index, 0u);
    EXPECT_EQ(out.slid, 0u);
    EXPECT_EQ(out.sl, 0u);
    EXPECT_EQ(out.dlid_path_bits, 0u);
  }
}

TEST(ProviderXlateWc, StatusPassesThroughAndSyndromeIsVendorErr) {
  const uint32_t statuses[] = {
      MPR_CQE_LOC_LEN_ERR,     MPR_CQE_LOC_QP_OP_ERR,     MPR_CQE_LOC_PROT_ERR,
      MPR_CQE_WR_FLUSH_ERR,    MPR_CQE_BAD_RESP_ERR,      MPR_CQE_LOC_ACCESS_ERR,
      MPR_CQE_REM_INV_REQ_ERR, MPR_CQE_REM_ACCESS_ERR,    MPR_CQE_REM_OP_ERR,
      MPR_CQE_RETRY_EXC_ERR,   MPR_CQE_RNR_RETRY_EXC_ERR, MPR_CQE_GENERAL_ERR};
  for (uint32_t s : statuses) {
    mpr_wc in = Wc(MPR_CQE_REQ_RDMA_WRITE, s);
    in.syndrome = MPR_SYN_NAK_REM_ACCESS;
    ibv_wc out;
    mprdma_xlate_wc(&in, &out);
    EXPECT_EQ(static_cast<uint32_t>(out.status), s);
    EXPECT_EQ(out.vendor_err, static_cast<uint32_t>(MPR_SYN_NAK_REM_ACCESS));
  }
  // The names as well as the numbers (ibv_wc_status_str is what users print).
  mpr_wc in = Wc(MPR_CQE_REQ_SEND, MPR_CQE_RETRY_EXC_ERR);
  ibv_wc out;
  mprdma_xlate_wc(&in, &out);
  EXPECT_EQ(out.status, IBV_WC_RETRY_EXC_ERR);
}

TEST(ProviderXlateWc, ImmediateOnlyWithTheImmFlag) {
  mpr_wc in = Wc(MPR_CQE_RESP_RECV_IMM);
  in.imm_data = htonl(0x01020304);
  ibv_wc out;
  mprdma_xlate_wc(&in, &out);
  EXPECT_EQ(out.wc_flags, 0u) << "no MPR_CQE_F_IMM, no IBV_WC_WITH_IMM";
  EXPECT_EQ(out.imm_data, 0u);

  in.flags = MPR_CQE_F_IMM | MPR_CQE_F_SOLICITED;
  mprdma_xlate_wc(&in, &out);
  EXPECT_EQ(out.wc_flags, static_cast<unsigned>(IBV_WC_WITH_IMM));
  EXPECT_EQ(out.imm_data, htonl(0x01020304));  // network order, untouched
}

TEST(ProviderXlateWc, UnknownCqeOpcodeIsAnErrorNotAGuess) {
  mpr_wc in = Wc(0x0f);  // below 0x10: a send-side CQE
  ibv_wc out;
  mprdma_xlate_wc(&in, &out);
  EXPECT_EQ(out.status, IBV_WC_GENERAL_ERR);
  EXPECT_EQ(out.opcode, IBV_WC_SEND);
  in = Wc(0x1f);
  mprdma_xlate_wc(&in, &out);
  EXPECT_EQ(out.status, IBV_WC_GENERAL_ERR);
  EXPECT_EQ(out.opcode, IBV_WC_RECV);
  EXPECT_EQ(mprdma_wc_opcode(0), -1);
}

// A CQ ring written the way the NIC writes it.
struct Ring {
  explicit Ring(uint32_t log_size) : mem(sizeof(mpr_cqe) << log_size) {
    cq.buf = mem.data();
    cq.dbrec = &dbrec;
    cq.cqn = 3;
    cq.log_size = log_size;
    cq.ci = 0;
  }
  uint32_t size() const { return 1u << cq.log_size; }
  mpr_cqe* at(uint32_t idx) {
    return reinterpret_cast<mpr_cqe*>(mem.data()) + (idx & (size() - 1));
  }
  // The NIC's producer index: writes CQE `pi` for (qpn, wqe_index).
  void produce(uint32_t qpn, uint16_t wqe_index) {
    mpr_cqe* c = at(pi);
    std::memset(c, 0, sizeof(*c));
    c->qpn = qpn;
    c->wqe_index = wqe_index;
    c->opcode = MPR_CQE_REQ_SEND;
    c->owner = MPR_PHASE(pi, cq.log_size);
    pi++;
  }
  bool valid(uint32_t idx) { return (at(idx)->owner & 1) == MPR_PHASE(idx, cq.log_size); }

  std::vector<uint8_t> mem;
  uint32_t dbrec = 0;
  mpr_dp_cq cq{};
  uint32_t pi = 0;
};

// What a consumer would poll from ci on: (qpn, wqe_index) of each valid CQE.
std::vector<std::pair<uint32_t, uint16_t>> Pending(Ring& r) {
  std::vector<std::pair<uint32_t, uint16_t>> out;
  for (uint32_t i = r.cq.ci; i - r.cq.ci < r.size() && r.valid(i); ++i)
    out.emplace_back(r.at(i)->qpn, r.at(i)->wqe_index);
  return out;
}

TEST(ProviderCqClean, DropsOnlyTheDeadQpsEntriesInOrder) {
  Ring r(3);
  r.produce(2, 0);
  r.produce(5, 0);
  r.produce(2, 1);
  r.produce(5, 1);
  r.produce(2, 2);
  EXPECT_EQ(mprdma_cq_clean(&r.cq, 2), 3u);
  EXPECT_EQ(r.cq.ci, 3u);
  EXPECT_EQ(r.dbrec, 3u) << "the freed slots go back to the NIC";
  using P = std::pair<uint32_t, uint16_t>;
  EXPECT_EQ(Pending(r), (std::vector<P>{{5, 0}, {5, 1}}));
}

TEST(ProviderCqClean, NothingToDropChangesNothing) {
  Ring r(2);
  r.produce(5, 0);
  r.produce(6, 0);
  std::vector<uint8_t> before = r.mem;
  EXPECT_EQ(mprdma_cq_clean(&r.cq, 2), 0u);
  EXPECT_EQ(r.cq.ci, 0u);
  EXPECT_EQ(r.dbrec, 0u);
  EXPECT_EQ(r.mem, before);
}

TEST(ProviderCqClean, WrapsAroundWithTheRightPhase) {
  Ring r(2);  // 4 entries
  // Consume a first lap and a half so the valid entries straddle the wrap.
  for (int i = 0; i < 6; ++i) r.produce(9, static_cast<uint16_t>(i));
  r.cq.ci = 6;
  r.produce(7, 100);  // idx 6, slot 2
  r.produce(8, 200);  // idx 7, slot 3
  r.produce(7, 101);  // idx 8, slot 0, next lap: phase flips
  r.produce(8, 201);  // idx 9, slot 1
  EXPECT_EQ(mprdma_cq_clean(&r.cq, 7), 2u);
  EXPECT_EQ(r.cq.ci, 8u);
  using P = std::pair<uint32_t, uint16_t>;
  EXPECT_EQ(Pending(r), (std::vector<P>{{8, 200}, {8, 201}}));
  // The slot after the survivors is not mistaken for a valid entry.
  EXPECT_FALSE(r.valid(10));
}

TEST(ProviderCqClean, StopsAtTheFirstEmptySlotAndSurvivesAFullRing) {
  Ring r(2);
  for (int i = 0; i < 4; ++i) r.produce(i % 2 ? 4 : 3, static_cast<uint16_t>(i));
  // The ring is full: every slot valid; clean must not loop past one lap.
  EXPECT_EQ(mprdma_cq_clean(&r.cq, 3), 2u);
  using P = std::pair<uint32_t, uint16_t>;
  EXPECT_EQ(Pending(r), (std::vector<P>{{4, 1}, {4, 3}}));
}

TEST(ProviderCqClean, PolledByTheDataPathAfterwards) {
  // End to end with sw_stack/dp: after the clean, mpr_dp_poll_cq sees only
  // the survivors and the record follows its consumer index.
  Ring r(3);
  r.produce(2, 0);
  r.produce(5, 0);
  r.produce(2, 1);
  mpr_dp_ops ops{};
  ops.lookup_qp = [](void*, uint32_t) -> mpr_dp_qp* { return nullptr; };
  r.cq.ops = &ops;
  ASSERT_EQ(mprdma_cq_clean(&r.cq, 2), 2u);
  mpr_wc wc[4];
  ASSERT_EQ(mpr_dp_poll_cq(&r.cq, 4, wc), 1);
  EXPECT_EQ(wc[0].qpn, 5u);
  EXPECT_EQ(r.dbrec, 3u);
  EXPECT_EQ(mpr_dp_poll_cq(&r.cq, 4, wc), 0);
}

// MPRDMA_INLINE_RECV's values: the CQE slot sizes with room for data.
TEST(ProviderInlineRecvSlot, SlotSizesAndRefusals) {
  EXPECT_EQ(mprdma_inline_recv_slot(nullptr), 0);
  EXPECT_EQ(mprdma_inline_recv_slot(""), 0);
  EXPECT_EQ(mprdma_inline_recv_slot("0"), 0);
  EXPECT_EQ(mprdma_inline_recv_slot("64"), 6);
  EXPECT_EQ(mprdma_inline_recv_slot("128"), 7);
  for (const char* bad : {"32", "48", "256", "64 ", "yes"})
    EXPECT_EQ(mprdma_inline_recv_slot(bad), -1) << bad;
}

}  // namespace
}  // namespace mprdma::test
