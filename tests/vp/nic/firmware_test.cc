// The command-processor firmware, run against a fake HAL: host memory is a
// vector (DMA outside it fails), the context memory is the real one, and the
// QP lifecycle callbacks are recorded. Every admin command of <mprdma/hw.h>
// is exercised on its success path and on each of its error statuses.
#include "vp/nic/firmware/firmware.h"

#include <gtest/gtest.h>
#include <mprdma/regs.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vp/nic/context_memory.h"
#include "vp/nic/firmware/firmware_hal.h"
#include "vp/nic/nic_config.h"

namespace mprdma::nic {
namespace {

constexpr uint64_t kMemBase = 0x100000;
constexpr uint64_t kMemSize = 0x40000;  // 256 KiB of host memory
constexpr uint64_t kInMailbox = kMemBase + 0x1000;
constexpr uint64_t kOutMailbox = kMemBase + 0x20000;
constexpr uint64_t kOutside = 0x80000000;  // nothing is backed there
constexpr uint8_t kSentinel = 0xAA;
constexpr uint64_t kIcmFake = 0x40000000;  // ICM page addresses (never accessed)

struct StateChange {
  uint32_t qpn;
  uint8_t from, to;
  bool operator==(const StateChange& o) const {
    return qpn == o.qpn && from == o.from && to == o.to;
  }
};

std::ostream& operator<<(std::ostream& os, const StateChange& s) {
  return os << "{qpn " << s.qpn << ": " << int(s.from) << "->" << int(s.to) << "}";
}

class FakeHal : public FirmwareHal {
 public:
  explicit FakeHal(const NicLimits& limits) : ctx(limits), mem(kMemSize, 0) {}

  bool next_command(mpr_cmd& cmd) override {
    if (queue.empty()) return false;
    cmd = queue.front();
    queue.pop_front();
    return true;
  }
  void complete_command(const mpr_cmd_comp& comp) override { completions.push_back(comp); }
  bool dma_read(uint64_t pa, void* dst, size_t len) override {
    ++dma_reads;
    if (!backed(pa, len)) return false;
    std::memcpy(dst, &mem[pa - kMemBase], len);
    return true;
  }
  bool dma_write(uint64_t pa, const void* src, size_t len) override {
    ++dma_writes;
    if (!backed(pa, len)) return false;
    std::memcpy(&mem[pa - kMemBase], src, len);
    return true;
  }
  ContextMemory& contexts() override { return ctx; }
  void qp_state_changed(uint32_t qpn, uint8_t from, uint8_t to) override {
    changes.push_back({qpn, from, to});
  }
  void qp_destroyed(uint32_t qpn) override { destroyed.push_back(qpn); }
  void srq_destroyed(uint32_t srqn) override { srqs_destroyed.push_back(srqn); }
  PortInfo port() const override { return port_info; }
  TransportOffer transports() const override { return offer; }
  mpr_port_counters counters() const override { return port_counters; }

  static bool backed(uint64_t pa, size_t len) {
    return pa >= kMemBase && len <= kMemSize && pa - kMemBase <= kMemSize - len;
  }
  void poke(uint64_t pa, const void* src, size_t len) {
    ASSERT_TRUE(backed(pa, len));
    std::memcpy(&mem[pa - kMemBase], src, len);
  }
  void fill(uint64_t pa, uint8_t value, size_t len) {
    ASSERT_TRUE(backed(pa, len));
    std::memset(&mem[pa - kMemBase], value, len);
  }
  const uint8_t* at(uint64_t pa) const { return &mem[pa - kMemBase]; }

  ContextMemory ctx;
  std::vector<uint8_t> mem;
  std::deque<mpr_cmd> queue;
  std::vector<mpr_cmd_comp> completions;
  std::vector<StateChange> changes;
  std::vector<uint32_t> destroyed;
  std::vector<uint32_t> srqs_destroyed;
  PortInfo port_info;
  TransportOffer offer;  // go-back-N only, unless a test offers more
  mpr_port_counters port_counters{};
  int dma_reads = 0, dma_writes = 0;
};

::testing::AssertionResult HasStatus(const mpr_cmd_comp& c, uint8_t status,
                                     uint32_t syndrome = MPR_CMD_SYN_NONE) {
  if (c.status == status && c.syndrome == syndrome) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << Firmware::status_name(c.status) << " syndrome 0x" << std::hex << c.syndrome
         << ", want " << Firmware::status_name(status) << " syndrome 0x" << syndrome;
}

uint32_t lowest_bit(uint32_t v) { return v & (~v + 1); }

// Table sizes small enough that each test builds its context memory quickly.
NicLimits test_limits() {
  NicLimits l;
  l.max_qp = 64;
  l.max_cq = 64;
  l.max_eq = 8;
  l.max_pd = 64;
  l.max_mr = 64;
  l.max_mtt = 4096;
  l.max_srq = 4;
  return l;
}

void set_mapped_gid(uint8_t gid[16], uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  std::memset(gid, 0, 16);
  gid[10] = gid[11] = 0xff;
  gid[12] = a;
  gid[13] = b;
  gid[14] = c;
  gid[15] = d;
}

// The attributes perftest passes at each step of the RC bring-up.
mpr_qp_attr init_attr() {
  mpr_qp_attr a{};
  a.attr_mask =
      MPR_QP_ATTR_STATE | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS;
  a.qp_state = MPR_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.access_flags = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_WRITE | MPR_ACCESS_REMOTE_READ;
  return a;
}

mpr_qp_attr rtr_attr() {
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_MAX_DEST_RD_ATOMIC | MPR_QP_ATTR_MIN_RNR_TIMER;
  a.qp_state = MPR_QPS_RTR;
  a.path_mtu = MPR_MTU_1024;
  a.dest_qpn = 0x123;
  a.rq_psn = 0x654321;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.sgid_index = 0;
  a.hop_limit = 64;
  a.traffic_class = 0x68;
  a.udp_sport = 0xD00D;
  set_mapped_gid(a.dgid, 10, 0, 0, 2);
  const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::memcpy(a.dmac, mac, 6);
  return a;
}

mpr_qp_attr rts_attr() {
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_TIMEOUT | MPR_QP_ATTR_RETRY_CNT |
                MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_MAX_QP_RD_ATOMIC;
  a.qp_state = MPR_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0x111111;
  a.max_rd_atomic = 4;
  return a;
}

mpr_qp_attr state_attr(uint8_t state) {
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_STATE;
  a.qp_state = state;
  return a;
}

class FirmwareTest : public ::testing::Test {
 protected:
  void SetUp() override { rebuild(test_limits()); }

  void rebuild(const NicLimits& limits) {
    fw_.reset();
    hal_ = std::make_unique<FakeHal>(limits);
    fw_ = std::make_unique<Firmware>(*hal_);
    // GID 0 is the local address (SET_GID, as the driver does at probe).
    uint8_t gid[16];
    set_mapped_gid(gid, 10, 0, 0, 1);
    ASSERT_TRUE(hal_->ctx.set_gid(0, gid));
    // GID 5 is link-local (fe80::1): stored, but no RoCEv2 source address.
    uint8_t ll[16] = {0xfe, 0x80};
    ll[15] = 1;
    ASSERT_TRUE(hal_->ctx.set_gid(5, ll));
    // The driver maps the NIC's whole ICM at probe (MAP_ICM, tested below).
    // The firmware never reads ICM itself, so fake page addresses will do.
    for (uint32_t p = 0; p < hal_->ctx.icm().pages(); ++p)
      ASSERT_TRUE(hal_->ctx.icm().map(p, kIcmFake + uint64_t{p} * 4096));
  }

  // MAP_ICM of `chunks` of 2^log_chunk bytes (addresses poked into the
  // input mailbox).
  mpr_cmd map_icm_cmd(uint32_t first, const std::vector<uint64_t>& chunks,
                      uint32_t log_chunk = 12) {
    if (!chunks.empty()) hal_->poke(kInMailbox, chunks.data(), chunks.size() * 8);
    mpr_cmd c = cmd(MPR_CMD_MAP_ICM);
    c.hdr.in_mailbox = kInMailbox;
    c.hdr.in_len = static_cast<uint32_t>(chunks.size() * 8);
    c.u.map_icm.first_page = first;
    c.u.map_icm.num_chunks = static_cast<uint32_t>(chunks.size());
    c.u.map_icm.log_chunk = log_chunk;
    return c;
  }

  mpr_cmd cmd(uint16_t opcode) {
    mpr_cmd c{};
    c.hdr.opcode = opcode;
    c.hdr.cmd_id = static_cast<uint16_t>(0x100 + ++next_id_);
    return c;
  }

  mpr_cmd_comp exec(const mpr_cmd& c) {
    const mpr_cmd_comp r = fw_->execute(c);
    EXPECT_EQ(r.cmd_id, c.hdr.cmd_id);
    EXPECT_EQ(r.owner, 0);
    if (r.status != MPR_CMD_OK) {
      EXPECT_EQ(r.out[0], 0u) << "a failed command returns no handle";
    }
    return r;
  }

  // ---- command builders ----
  uint32_t alloc_pd() {
    const mpr_cmd_comp r = exec(cmd(MPR_CMD_ALLOC_PD));
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }

  mpr_cmd reg_mr_cmd(uint32_t pdn, uint64_t iova, uint64_t length,
                     const std::vector<uint64_t>& pages, uint32_t access = MPR_ACCESS_LOCAL_WRITE,
                     uint32_t page_shift = 12) {
    if (!pages.empty()) hal_->poke(kInMailbox, pages.data(), pages.size() * 8);
    mpr_cmd c = cmd(MPR_CMD_REG_MR);
    c.hdr.in_mailbox = kInMailbox;
    c.hdr.in_len = static_cast<uint32_t>(pages.size() * 8);
    c.u.reg_mr.iova = iova;
    c.u.reg_mr.length = length;
    c.u.reg_mr.pdn = pdn;
    c.u.reg_mr.access = access;
    c.u.reg_mr.page_shift = page_shift;
    c.u.reg_mr.num_pages = static_cast<uint32_t>(pages.size());
    return c;
  }

  // `n` physical pages of 2^shift bytes, scattered (descending addresses).
  static std::vector<uint64_t> pages(size_t n, uint32_t shift = 12, uint64_t top = 0x40000000) {
    std::vector<uint64_t> v;
    for (size_t i = 0; i < n; ++i) v.push_back(top - (2 * i + 1) * (uint64_t{1} << shift));
    return v;
  }

  uint32_t reg_mr(uint32_t pdn, size_t npages) {
    const mpr_cmd_comp r = exec(reg_mr_cmd(pdn, 0x7f0000000000, npages * 4096, pages(npages)));
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }

  mpr_cmd dereg_mr_cmd(uint32_t key) {
    mpr_cmd c = cmd(MPR_CMD_DEREG_MR);
    c.u.dereg_mr.key = key;
    return c;
  }

  mpr_cmd create_eq_cmd() {
    mpr_cmd c = cmd(MPR_CMD_CREATE_EQ);
    c.u.create_eq.base = 0x200000;
    c.u.create_eq.log_size = 6;
    c.u.create_eq.vector = 3;
    return c;
  }

  mpr_cmd create_cq_cmd(uint32_t eqn) {
    mpr_cmd c = cmd(MPR_CMD_CREATE_CQ);
    c.u.create_cq.base = 0x210000;
    c.u.create_cq.dbrec = 0x220004;
    c.u.create_cq.log_size = 8;
    c.u.create_cq.eqn = eqn;
    c.u.create_cq.uar_index = 5;
    return c;
  }

  mpr_cmd create_qp_cmd(uint32_t pdn, uint32_t scqn, uint32_t rcqn) {
    mpr_cmd c = cmd(MPR_CMD_CREATE_QP);
    mpr_cmd_create_qp& q = c.u.create_qp;
    q.sq_base = 0x300000;
    q.rq_base = 0x310000;
    q.pdn = pdn;
    q.send_cqn = scqn;
    q.recv_cqn = rcqn;
    q.uar_index = 7;
    q.qp_type = MPR_QPT_RC;
    q.sq_log_size = 8;
    q.sq_log_stride = 8;
    q.rq_log_size = 7;
    q.rq_log_stride = 5;
    q.transport = MPR_TRANSPORT_DEFAULT;
    q.sq_sig_all = 1;
    q.max_inline = 64;
    return c;
  }

  mpr_cmd handle_cmd(uint16_t opcode, uint32_t handle) {
    mpr_cmd c = cmd(opcode);
    c.u.handle.handle = handle;
    return c;
  }

  mpr_cmd qpn_cmd(uint16_t opcode, uint32_t qpn) {
    mpr_cmd c = cmd(opcode);
    c.u.qpn.qpn = qpn;
    return c;
  }

  mpr_cmd modify_cmd(uint32_t qpn, const mpr_qp_attr& a) {
    mpr_cmd c = cmd(MPR_CMD_MODIFY_QP);
    c.u.modify_qp.qpn = qpn;
    c.u.modify_qp.attr = a;
    return c;
  }

  mpr_cmd_comp modify(uint32_t qpn, const mpr_qp_attr& a) { return exec(modify_cmd(qpn, a)); }

  uint32_t create_eq() {
    const mpr_cmd_comp r = exec(create_eq_cmd());
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }
  uint32_t create_cq(uint32_t eqn) {
    const mpr_cmd_comp r = exec(create_cq_cmd(eqn));
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }

  // A PD, an EQ and a CQ for QPs to use.
  void make_objects() {
    pdn_ = alloc_pd();
    eqn_ = create_eq();
    cqn_ = create_cq(eqn_);
  }

  uint32_t create_qp() {
    const mpr_cmd_comp r = exec(create_qp_cmd(pdn_, cqn_, cqn_));
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }

  // Creates a QP and walks it to `state` along RESET->INIT->RTR->RTS.
  uint32_t qp_in(uint8_t state) {
    const uint32_t qpn = create_qp();
    if (state >= MPR_QPS_INIT && state <= MPR_QPS_RTS) {
      EXPECT_TRUE(HasStatus(modify(qpn, init_attr()), MPR_CMD_OK));
    }
    if (state >= MPR_QPS_RTR && state <= MPR_QPS_RTS) {
      EXPECT_TRUE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));
    }
    if (state == MPR_QPS_RTS) {
      EXPECT_TRUE(HasStatus(modify(qpn, rts_attr()), MPR_CMD_OK));
    }
    if (state == MPR_QPS_ERR) {
      EXPECT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_OK));
    }
    EXPECT_EQ(hal_->ctx.qp(qpn)->state, state);
    return qpn;
  }

  uint8_t state_of(uint32_t qpn) { return hal_->ctx.qp(qpn)->state; }

  std::unique_ptr<FakeHal> hal_;
  std::unique_ptr<Firmware> fw_;
  uint16_t next_id_ = 0;
  uint32_t pdn_ = 0, eqn_ = 0, cqn_ = 0;
};

// ---------------------------------------------------------------------------
// Dispatch, NOP, unknown opcodes
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, NopSucceedsAndEchoesCmdId) {
  mpr_cmd c = cmd(MPR_CMD_NOP);
  c.hdr.cmd_id = 0xBEEF;
  const mpr_cmd_comp r = exec(c);
  EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(r.cmd_id, 0xBEEF);
  EXPECT_EQ(hal_->dma_reads + hal_->dma_writes, 0);
}

TEST_F(FirmwareTest, UnknownOpcodeIsBadOpcodeWithCmdIdEchoed) {
  for (uint16_t op :
       {uint16_t{0x7f}, uint16_t{0x06}, uint16_t{0x14}, uint16_t{0x34}, uint16_t{0xffff}}) {
    mpr_cmd c = cmd(op);
    c.hdr.cmd_id = static_cast<uint16_t>(0xC000 | op);
    const mpr_cmd_comp r = exec(c);
    EXPECT_TRUE(HasStatus(r, MPR_CMD_BAD_OPCODE)) << "opcode 0x" << std::hex << op;
    EXPECT_EQ(r.cmd_id, static_cast<uint16_t>(0xC000 | op));
  }
}

TEST_F(FirmwareTest, HeaderReservedFieldNonZeroIsBadParam) {
  mpr_cmd c = cmd(MPR_CMD_ALLOC_PD);
  c.hdr.rsvd0 = 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED));
  // Nothing was allocated: the next PD is still the first one.
  EXPECT_EQ(alloc_pd(), 1u);
}

TEST_F(FirmwareTest, RunServesTheQueueInOrder) {
  mpr_cmd a = cmd(MPR_CMD_NOP), b = cmd(MPR_CMD_ALLOC_PD), x = cmd(0x7f);
  hal_->queue = {a, b, x};
  fw_->run();
  ASSERT_EQ(hal_->completions.size(), 3u);
  EXPECT_EQ(hal_->completions[0].cmd_id, a.hdr.cmd_id);
  EXPECT_EQ(hal_->completions[0].status, MPR_CMD_OK);
  EXPECT_EQ(hal_->completions[1].cmd_id, b.hdr.cmd_id);
  EXPECT_EQ(hal_->completions[1].status, MPR_CMD_OK);
  EXPECT_EQ(hal_->completions[1].out[0], 1u);
  EXPECT_EQ(hal_->completions[2].cmd_id, x.hdr.cmd_id);
  EXPECT_EQ(hal_->completions[2].status, MPR_CMD_BAD_OPCODE);
}

TEST_F(FirmwareTest, OpcodeAndStatusNames) {
  EXPECT_STREQ(Firmware::opcode_name(MPR_CMD_QUERY_DEVICE), "QUERY_DEVICE");
  EXPECT_STREQ(Firmware::opcode_name(MPR_CMD_MODIFY_QP), "MODIFY_QP");
  EXPECT_STREQ(Firmware::opcode_name(MPR_CMD_DESTROY_QP), "DESTROY_QP");
  EXPECT_STREQ(Firmware::opcode_name(0x7f), "UNKNOWN");
  EXPECT_STREQ(Firmware::status_name(MPR_CMD_OK), "OK");
  EXPECT_STREQ(Firmware::status_name(MPR_CMD_BAD_ATTR), "BAD_ATTR");
  EXPECT_STREQ(Firmware::status_name(MPR_CMD_DMA_ERROR), "DMA_ERROR");
  EXPECT_STREQ(Firmware::status_name(0x42), "UNKNOWN");
}

// ---------------------------------------------------------------------------
// QUERY_DEVICE, QUERY_PORT
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, QueryDeviceWritesTheLimitsByteForByte) {
  hal_->fill(kOutMailbox, kSentinel, 256);
  mpr_cmd c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = 256;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));

  const NicLimits l = test_limits();
  mpr_device_attr want{};
  want.fw_version = 0x00010000;
  want.max_qp = static_cast<uint32_t>(l.max_qp);
  want.max_qp_wr = static_cast<uint32_t>(l.max_qp_wr);
  want.max_sge = static_cast<uint32_t>(l.max_sge);
  want.max_cq = static_cast<uint32_t>(l.max_cq);
  want.max_cqe = static_cast<uint32_t>(l.max_cqe);
  want.max_mr = static_cast<uint32_t>(l.max_mr);
  want.max_pd = static_cast<uint32_t>(l.max_pd);
  want.max_mr_size = uint64_t{1} << 40;
  want.page_size_cap = 0x7ffff000;  // 4 KiB .. 1 GiB pages
  want.max_qp_rd_atom = static_cast<uint32_t>(l.max_rd_atomic);
  want.max_inline = static_cast<uint32_t>(l.max_inline);
  want.max_eq = static_cast<uint32_t>(l.max_eq);
  want.num_uar_pages = static_cast<uint32_t>(l.num_uar_pages);
  want.max_gids = static_cast<uint32_t>(l.max_gids);
  want.max_msg_size = 1u << 31;
  // ICM: 64 QPCs of 256 B (4 pages), 64 CQCs of 64 B (1), 64 MPTs of 64 B
  // (1), 4096 MTT entries of 8 B (8).
  want.icm_pages = 14;
  // SRQs: contexts on chip; slots of at most 1 KiB, 16 B of it the list link.
  want.max_srq = static_cast<uint32_t>(l.max_srq);
  want.max_srq_wr = static_cast<uint32_t>(l.max_qp_wr);
  want.max_srq_sge = static_cast<uint32_t>(l.max_sge);
  // What this NIC implements, as the CAPS register advertises it: RC, UC, UD,
  // atomics, inline data, WQE by MMIO, inline receive, SRQs and the engines
  // the HAL offers (here go-back-N only).
  want.cap_flags = MPRDMA_BAR0__CAPS__RC_bm | MPRDMA_BAR0__CAPS__UC_bm | MPRDMA_BAR0__CAPS__UD_bm |
                   MPRDMA_BAR0__CAPS__ATOMICS_bm | MPRDMA_BAR0__CAPS__INLINE_bm |
                   MPRDMA_BAR0__CAPS__WQE_BY_MMIO_bm | MPRDMA_BAR0__CAPS__INLINE_RECV_bm |
                   MPRDMA_BAR0__CAPS__SRQ_bm | MPRDMA_BAR0__CAPS__GBN_bm;
  EXPECT_EQ(want.fw_version, uint32_t{MPRDMA_BAR0__FW_VERSION__FW_reset})
      << "the FW_VERSION register and QUERY_DEVICE agree";
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &want, sizeof want), 0);
  // Exactly sizeof(mpr_device_attr) bytes were written.
  for (size_t i = sizeof want; i < 256; ++i) ASSERT_EQ(hal_->at(kOutMailbox)[i], kSentinel) << i;
}

TEST_F(FirmwareTest, QueryDeviceMailboxErrors) {
  hal_->fill(kOutMailbox, kSentinel, 256);
  mpr_cmd c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = MPR_DEVICE_ATTR_V1_SIZE - 1;  // too small even for interface 1.0
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  EXPECT_EQ(hal_->at(kOutMailbox)[0], kSentinel);

  c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = 0;  // no mailbox
  c.hdr.out_len = 4096;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));

  c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = kOutside;
  c.hdr.out_len = 4096;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));

  // A mailbox straddling the end of host memory fails too.
  c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = kMemBase + kMemSize - 16;
  c.hdr.out_len = 4096;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));
}

TEST_F(FirmwareTest, QueryPortWritesThePortByteForByte) {
  hal_->port_info.mac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  hal_->port_info.max_mtu = MPR_MTU_2048;
  hal_->port_info.speed_mbps = 100000;
  hal_->port_info.link_up = true;
  hal_->fill(kOutMailbox, kSentinel, 64);
  mpr_cmd c = cmd(MPR_CMD_QUERY_PORT);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_port_attr);
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  mpr_port_attr want{};
  want.state = MPR_PORT_ACTIVE;
  want.max_mtu = MPR_MTU_2048;
  want.active_mtu = MPR_MTU_2048;
  want.speed_mbps = 100000;
  const uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  std::memcpy(want.mac, mac, 6);
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &want, sizeof want), 0);
  EXPECT_EQ(hal_->at(kOutMailbox)[sizeof want], kSentinel);

  hal_->port_info.link_up = false;
  c = cmd(MPR_CMD_QUERY_PORT);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_port_attr);
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  want.state = MPR_PORT_DOWN;
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &want, sizeof want), 0);
}

// QUERY_COUNTERS writes the HAL's port counters, in enum mpr_port_counter
// order, and nothing beyond them; a mailbox too short or outside memory
// fails as for the other queries.
TEST_F(FirmwareTest, QueryCountersWritesThePortCounters) {
  for (int i = 0; i < MPR_CNT_NUM; ++i)
    hal_->port_counters.value[i] = 0x1000000000ull * (i + 1) + 7u * i;
  hal_->fill(kOutMailbox, kSentinel, sizeof(mpr_port_counters) + 8);
  mpr_cmd c = cmd(MPR_CMD_QUERY_COUNTERS);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_port_counters);
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &hal_->port_counters, sizeof(mpr_port_counters)), 0);
  EXPECT_EQ(hal_->at(kOutMailbox)[sizeof(mpr_port_counters)], kSentinel);
  EXPECT_STREQ(Firmware::opcode_name(MPR_CMD_QUERY_COUNTERS), "QUERY_COUNTERS");
  c.hdr.out_len = sizeof(mpr_port_counters) - 8;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  c.hdr.out_mailbox = kOutside;
  c.hdr.out_len = sizeof(mpr_port_counters);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));
}

TEST_F(FirmwareTest, QueryPortMailboxErrors) {
  mpr_cmd c = cmd(MPR_CMD_QUERY_PORT);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_port_attr) - 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  c = cmd(MPR_CMD_QUERY_PORT);
  c.hdr.out_mailbox = kOutside;
  c.hdr.out_len = sizeof(mpr_port_attr);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));
}

// ---------------------------------------------------------------------------
// SET_GID
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, SetGidStoresTheGid) {
  mpr_cmd c = cmd(MPR_CMD_SET_GID);
  c.u.set_gid.index = 15;  // the last entry of 16
  set_mapped_gid(c.u.set_gid.gid, 192, 168, 1, 7);
  ASSERT_EQ(hal_->ctx.gid(15), nullptr);
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  ASSERT_NE(hal_->ctx.gid(15), nullptr);
  EXPECT_EQ(std::memcmp(hal_->ctx.gid(15), c.u.set_gid.gid, 16), 0);
}

TEST_F(FirmwareTest, SetGidStoresAnyGidAndZeroClears) {
  // A link-local GID is stored (the host's table mirrors its netdev), but a
  // QP cannot source RoCEv2 packets from it: see the AV check of MODIFY_QP.
  mpr_cmd c = cmd(MPR_CMD_SET_GID);
  c.u.set_gid.index = 2;
  c.u.set_gid.gid[0] = 0xfe;
  c.u.set_gid.gid[1] = 0x80;
  c.u.set_gid.gid[15] = 1;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  ASSERT_NE(hal_->ctx.gid(2), nullptr);
  c = cmd(MPR_CMD_SET_GID);
  c.u.set_gid.index = 2;  // all-zero GID
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.gid(2), nullptr);
}

TEST_F(FirmwareTest, SetGidErrors) {
  mpr_cmd c = cmd(MPR_CMD_SET_GID);
  c.u.set_gid.index = 16;  // == max_gids
  set_mapped_gid(c.u.set_gid.gid, 10, 0, 0, 9);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX));

  c = cmd(MPR_CMD_SET_GID);
  c.u.set_gid.index = 2;
  set_mapped_gid(c.u.set_gid.gid, 10, 0, 0, 9);
  c.u.set_gid.rsvd = 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED));
  EXPECT_EQ(hal_->ctx.gid(2), nullptr);
}

// ---------------------------------------------------------------------------
// ALLOC_PD, DEALLOC_PD
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, PdHandlesAreLowestFreeFromOne) {
  EXPECT_EQ(alloc_pd(), 1u);  // PD 0 is never handed out
  EXPECT_EQ(alloc_pd(), 2u);
  EXPECT_EQ(alloc_pd(), 3u);
  mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = 2;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_FALSE(hal_->ctx.pd_valid(2));
  EXPECT_EQ(alloc_pd(), 2u);
  EXPECT_EQ(alloc_pd(), 4u);
}

TEST_F(FirmwareTest, DeallocPdBadHandle) {
  const uint32_t pdn = alloc_pd();
  for (uint32_t bad : {0u, pdn + 1, 64u, 0xffffffffu}) {
    mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
    c.u.pd.pdn = bad;
    EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_HANDLE)) << bad;
  }
  mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_HANDLE)) << "double free";
}

TEST_F(FirmwareTest, AllocPdNoResources) {
  NicLimits l = test_limits();
  l.max_pd = 3;  // PDs 1 and 2
  rebuild(l);
  EXPECT_EQ(alloc_pd(), 1u);
  EXPECT_EQ(alloc_pd(), 2u);
  EXPECT_TRUE(HasStatus(exec(cmd(MPR_CMD_ALLOC_PD)), MPR_CMD_NO_RESOURCES));
  mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = 1;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(alloc_pd(), 1u);
}

TEST_F(FirmwareTest, DeallocPdWithAnMrIsBusy) {
  const uint32_t pdn = alloc_pd();
  const uint32_t key = reg_mr(pdn, 2);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 1u);
  mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BUSY));
  EXPECT_TRUE(hal_->ctx.pd_valid(pdn));
  ASSERT_TRUE(HasStatus(exec(dereg_mr_cmd(key)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 0u);
  c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
}

TEST_F(FirmwareTest, DeallocPdWithAQpIsBusy) {
  make_objects();
  const uint32_t qpn = create_qp();
  mpr_cmd c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn_;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BUSY));
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, qpn)), MPR_CMD_OK));
  c = cmd(MPR_CMD_DEALLOC_PD);
  c.u.pd.pdn = pdn_;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
}

// ---------------------------------------------------------------------------
// REG_MR, DEREG_MR
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, RegMrFillsTheMptAndMtt) {
  const uint32_t pdn = alloc_pd();
  // Unaligned start: 0x100 into the first page, 3 pages long -> 4 pages.
  const std::vector<uint64_t> pa = {0x5000, 0x3000, 0x9000, 0x1000};
  const uint64_t iova = 0x7f0000000100;
  const uint32_t access = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_READ;
  const mpr_cmd_comp r = exec(reg_mr_cmd(pdn, iova, 3 * 4096, pa, access));
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  const uint32_t key = r.out[0];
  EXPECT_EQ(key >> 8, 0u) << "index 0";
  const mpr_mpt* m = hal_->ctx.mr(key);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->key, key);
  EXPECT_EQ(m->iova, iova);
  EXPECT_EQ(m->length, 3u * 4096);
  EXPECT_EQ(m->pdn, pdn);
  EXPECT_EQ(m->access, access);
  EXPECT_EQ(m->page_shift, 12);
  EXPECT_EQ(m->num_pages, 4u);
  EXPECT_EQ(m->valid, 1);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(hal_->ctx.mtt(m->mtt_base + i), pa[i]) << i;
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 1u);

  // A second MR takes the next slot and the MTT entries after the first's.
  const mpr_cmd_comp r2 = exec(reg_mr_cmd(pdn, 0x10000, 4096, {0x20000}));
  ASSERT_TRUE(HasStatus(r2, MPR_CMD_OK));
  EXPECT_EQ(r2.out[0] >> 8, 1u);
  EXPECT_EQ(hal_->ctx.mr(r2.out[0])->mtt_base, m->mtt_base + 4);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 2u);
}

TEST_F(FirmwareTest, RegMrWithHugePages) {
  const uint32_t pdn = alloc_pd();
  const uint64_t huge = uint64_t{1} << 21;
  // 3 MiB from 1 MiB into a 2 MiB page: 2 pages.
  const mpr_cmd_comp r = exec(reg_mr_cmd(pdn, 5 * huge + huge / 2, 3 * huge / 2,
                                         {7 * huge, 3 * huge}, MPR_ACCESS_LOCAL_WRITE, 21));
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.mr(r.out[0])->page_shift, 21);
  EXPECT_EQ(hal_->ctx.mr(r.out[0])->num_pages, 2u);
  // A 4 KiB-aligned page address is misaligned for 2 MiB pages.
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0, huge, {huge + 4096}, MPR_ACCESS_LOCAL_WRITE, 21)),
                        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS));
}

TEST_F(FirmwareTest, RegMrAccessFlags) {
  const uint32_t pdn = alloc_pd();
  const auto try_access = [&](uint32_t access) {
    return exec(reg_mr_cmd(pdn, 0x1000, 4096, {0x8000}, access));
  };
  EXPECT_TRUE(HasStatus(try_access(0), MPR_CMD_OK)) << "local read only";
  EXPECT_TRUE(HasStatus(try_access(MPR_ACCESS_REMOTE_READ), MPR_CMD_OK));
  EXPECT_TRUE(HasStatus(try_access(MPR_ACCESS_ALL), MPR_CMD_OK));
  EXPECT_TRUE(HasStatus(try_access(MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_WRITE), MPR_CMD_OK));
  // Remote write or atomic without local write.
  EXPECT_TRUE(
      HasStatus(try_access(MPR_ACCESS_REMOTE_WRITE), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS));
  EXPECT_TRUE(HasStatus(try_access(MPR_ACCESS_REMOTE_ATOMIC | MPR_ACCESS_REMOTE_READ),
                        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS));
  // Unknown access bits.
  EXPECT_TRUE(
      HasStatus(try_access(MPR_ACCESS_LOCAL_WRITE | 0x10), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS));
  EXPECT_TRUE(HasStatus(try_access(0x80000000u), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ACCESS));
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 4u) << "only the 4 good registrations hold the PD";
}

TEST_F(FirmwareTest, RegMrParameterErrors) {
  const uint32_t pdn = alloc_pd();
  const std::vector<uint64_t> one = {0x8000};
  // Each case is executed as soon as it is built: building writes its page
  // list into the (shared) input mailbox.
  const auto check = [&](const char* what, const mpr_cmd& c, uint8_t status, uint32_t syndrome) {
    EXPECT_TRUE(HasStatus(exec(c), status, syndrome)) << what;
  };
  check("unknown pd", reg_mr_cmd(pdn + 1, 0x1000, 4096, one), MPR_CMD_BAD_HANDLE, MPR_CMD_SYN_NONE);
  check("pd 0", reg_mr_cmd(0, 0x1000, 4096, one), MPR_CMD_BAD_HANDLE, MPR_CMD_SYN_NONE);
  check("page shift 11", reg_mr_cmd(pdn, 0x1000, 2048, one, MPR_ACCESS_LOCAL_WRITE, 11),
        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT);
  check("page shift 31", reg_mr_cmd(pdn, 0, 4096, {0}, MPR_ACCESS_LOCAL_WRITE, 31),
        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT);
  check("length 0", reg_mr_cmd(pdn, 0x1000, 0, one), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  check("length above 2^40",
        reg_mr_cmd(pdn, 0, (uint64_t{1} << 40) + 4096, one, MPR_ACCESS_LOCAL_WRITE, 30),
        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  check("iova + length wraps", reg_mr_cmd(pdn, ~uint64_t{0} - 100, 4096, one), MPR_CMD_BAD_PARAM,
        MPR_CMD_SYN_LENGTH);
  check("num_pages one short", reg_mr_cmd(pdn, 0x1800, 4096, one), MPR_CMD_BAD_PARAM,
        MPR_CMD_SYN_LENGTH);
  check("num_pages one too many", reg_mr_cmd(pdn, 0x1000, 4096, {0x8000, 0x9000}),
        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  mpr_cmd c = reg_mr_cmd(pdn, 0x1000, 4096, one);
  c.hdr.in_len = 16;
  check("in_len larger than the MTT", c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  c = reg_mr_cmd(pdn, 0x1000, 2 * 4096, {0x8000, 0x9000});
  c.hdr.in_len = 8;
  check("in_len smaller than the MTT", c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  c = reg_mr_cmd(pdn, 0x1000, 4096, one);
  c.hdr.in_mailbox = 0;
  check("no input mailbox", c, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH);
  check("misaligned MTT entry", reg_mr_cmd(pdn, 0x1000, 2 * 4096, {0x8000, 0x9008}),
        MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS);
  check("misaligned first MTT entry", reg_mr_cmd(pdn, 0x1000, 4096, {0x8800}), MPR_CMD_BAD_PARAM,
        MPR_CMD_SYN_ADDRESS);
  c = reg_mr_cmd(pdn, 0x1000, 4096, one);
  c.hdr.in_mailbox = kOutside;
  check("mailbox outside host memory", c, MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);
  c = reg_mr_cmd(pdn, 0x1000, 4096, one);
  c.hdr.in_mailbox = kMemBase + kMemSize - 4;
  check("mailbox straddling the end of memory", c, MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS);

  // None of them allocated anything.
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 0u);
  const uint32_t key = reg_mr(pdn, 1);
  EXPECT_EQ(key >> 8, 0u) << "the first MPT entry";
  ASSERT_NE(hal_->ctx.mr(key), nullptr);
  EXPECT_EQ(hal_->ctx.mr(key)->mtt_base, 0u);
}

TEST_F(FirmwareTest, DeregMrInvalidatesTheKeyAndReRegistrationGetsANewOne) {
  const uint32_t pdn = alloc_pd();
  const uint32_t key1 = reg_mr(pdn, 2);
  ASSERT_TRUE(HasStatus(exec(dereg_mr_cmd(key1)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.mr(key1), nullptr);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 0u);
  EXPECT_TRUE(HasStatus(exec(dereg_mr_cmd(key1)), MPR_CMD_BAD_HANDLE)) << "double DEREG";

  const uint32_t key2 = reg_mr(pdn, 2);
  EXPECT_EQ(key2 >> 8, key1 >> 8) << "same MPT slot";
  EXPECT_NE(key2, key1);
  EXPECT_NE(hal_->ctx.mr(key2), nullptr);
  EXPECT_EQ(hal_->ctx.mr(key1), nullptr) << "the old key does not match the reused slot";
  EXPECT_TRUE(HasStatus(exec(dereg_mr_cmd(key1)), MPR_CMD_BAD_HANDLE));
  EXPECT_NE(hal_->ctx.mr(key2), nullptr) << "a stale DEREG does not free the new MR";
}

TEST_F(FirmwareTest, DeregMrBadHandle) {
  const uint32_t pdn = alloc_pd();
  const uint32_t key = reg_mr(pdn, 1);
  for (uint32_t bad : {0u, key + 1, key + (1u << 8), MPR_LKEY_END}) {
    EXPECT_TRUE(HasStatus(exec(dereg_mr_cmd(bad)), MPR_CMD_BAD_HANDLE)) << std::hex << bad;
  }
  EXPECT_NE(hal_->ctx.mr(key), nullptr);
}

TEST_F(FirmwareTest, MttEntriesAreFreedAndReused) {
  const uint32_t pdn = alloc_pd();
  const uint32_t a = reg_mr(pdn, 3);
  const uint32_t b = reg_mr(pdn, 2);
  EXPECT_EQ(hal_->ctx.mr(a)->mtt_base, 0u);
  EXPECT_EQ(hal_->ctx.mr(b)->mtt_base, 3u);
  ASSERT_TRUE(HasStatus(exec(dereg_mr_cmd(a)), MPR_CMD_OK));
  // First fit, lowest address: entries 0..1 of A's freed run.
  const uint32_t c = reg_mr(pdn, 2);
  EXPECT_EQ(hal_->ctx.mr(c)->mtt_base, 0u);
  // Entry 2 is too small for 2 pages: they come after B.
  const uint32_t d = reg_mr(pdn, 2);
  EXPECT_EQ(hal_->ctx.mr(d)->mtt_base, 5u);
  const uint32_t e = reg_mr(pdn, 1);
  EXPECT_EQ(hal_->ctx.mr(e)->mtt_base, 2u);
  // The new MRs translate through their own entries.
  EXPECT_EQ(hal_->ctx.mtt(0), pages(2)[0]);
}

TEST_F(FirmwareTest, RegMrNoResourcesWhenTheMttIsFull) {
  NicLimits l = test_limits();
  l.max_mtt = 4;
  rebuild(l);
  const uint32_t pdn = alloc_pd();
  const uint32_t a = reg_mr(pdn, 3);
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0, 2 * 4096, pages(2))), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 1u);
  reg_mr(pdn, 1);  // the last entry
  ASSERT_TRUE(HasStatus(exec(dereg_mr_cmd(a)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.mr(reg_mr(pdn, 3))->mtt_base, 0u);
}

TEST_F(FirmwareTest, RegMrNoResourcesWhenTheMptIsFullReturnsItsMttEntries) {
  NicLimits l = test_limits();
  l.max_mr = 1;
  l.max_mtt = 4;
  rebuild(l);
  const uint32_t pdn = alloc_pd();
  const uint32_t a = reg_mr(pdn, 2);
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0, 2 * 4096, pages(2))), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 1u);
  ASSERT_TRUE(HasStatus(exec(dereg_mr_cmd(a)), MPR_CMD_OK));
  // All 4 entries are free again, as one run: the failed attempt gave its 2 back.
  const uint32_t b = reg_mr(pdn, 4);
  EXPECT_EQ(hal_->ctx.mr(b)->mtt_base, 0u);
}

TEST_F(FirmwareTest, RegMrLargerThanTheMttIsRefusedWithoutReadingItsPageList) {
  const uint32_t pdn = alloc_pd();
  // 1 TiB of 4 KiB pages: 2^28 MTT entries, a 2 GiB page list. The table
  // holds 4096 entries, so this can never succeed; the firmware must not
  // buffer or read the list to find that out.
  mpr_cmd c = cmd(MPR_CMD_REG_MR);
  c.hdr.in_mailbox = kInMailbox;
  c.hdr.in_len = 1u << 31;
  c.u.reg_mr.iova = 0;
  c.u.reg_mr.length = uint64_t{1} << 40;
  c.u.reg_mr.pdn = pdn;
  c.u.reg_mr.access = MPR_ACCESS_LOCAL_WRITE;
  c.u.reg_mr.page_shift = 12;
  c.u.reg_mr.num_pages = 1u << 28;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->dma_reads, 0);
  // One entry more than the table, with the page list outside host memory:
  // resources are checked first.
  c = reg_mr_cmd(pdn, 0, 4097 * 4096, {});
  c.hdr.in_mailbox = kOutside;
  c.hdr.in_len = 4097 * 8;
  c.u.reg_mr.num_pages = 4097;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->dma_reads, 0);
}

// ---------------------------------------------------------------------------
// CREATE_EQ, DESTROY_EQ
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, CreateEqFillsTheContext) {
  const mpr_cmd_comp r = exec(create_eq_cmd());
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(r.out[0], 0u);
  const mpr_eqc* e = hal_->ctx.eq(0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->eqn, 0u);
  EXPECT_EQ(e->base, 0x200000u);
  EXPECT_EQ(e->log_size, 6);
  EXPECT_EQ(e->vector, 3u);
  EXPECT_EQ(e->pi, 0u);
  EXPECT_EQ(e->ci, 0u);
  EXPECT_EQ(e->num_cqs, 0u);
  EXPECT_EQ(e->valid, 1);
  EXPECT_EQ(create_eq(), 1u);
}

TEST_F(FirmwareTest, CreateEqParameterErrors) {
  struct Case {
    const char* what;
    void (*mutate)(mpr_cmd_create_eq&);
    uint32_t syndrome;
  };
  const Case cases[] = {
      {"log_size 0", [](mpr_cmd_create_eq& e) { e.log_size = 0; }, MPR_CMD_SYN_LOG_SIZE},
      {"log_size 17", [](mpr_cmd_create_eq& e) { e.log_size = 17; }, MPR_CMD_SYN_LOG_SIZE},
      {"base 0", [](mpr_cmd_create_eq& e) { e.base = 0; }, MPR_CMD_SYN_ADDRESS},
      {"base misaligned", [](mpr_cmd_create_eq& e) { e.base = 0x200020; }, MPR_CMD_SYN_ADDRESS},
      {"vector 32", [](mpr_cmd_create_eq& e) { e.vector = 32; }, MPR_CMD_SYN_VECTOR},
  };
  for (const Case& k : cases) {
    mpr_cmd c = create_eq_cmd();
    k.mutate(c.u.create_eq);
    EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, k.syndrome)) << k.what;
  }
  mpr_cmd c = create_eq_cmd();
  c.u.create_eq.log_size = 16;
  c.u.create_eq.vector = 31;
  const mpr_cmd_comp r = exec(c);
  EXPECT_TRUE(HasStatus(r, MPR_CMD_OK)) << "the largest values are accepted";
  EXPECT_EQ(r.out[0], 0u) << "failed attempts took no EQ";
}

TEST_F(FirmwareTest, CreateEqNoResources) {
  NicLimits l = test_limits();
  l.max_eq = 2;
  rebuild(l);
  EXPECT_EQ(create_eq(), 0u);
  EXPECT_EQ(create_eq(), 1u);
  EXPECT_TRUE(HasStatus(exec(create_eq_cmd()), MPR_CMD_NO_RESOURCES));
  ASSERT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, 0)), MPR_CMD_OK));
  EXPECT_EQ(create_eq(), 0u);
}

TEST_F(FirmwareTest, DestroyEqWithACqIsBusy) {
  const uint32_t eqn = create_eq();
  const uint32_t cqn = create_cq(eqn);
  EXPECT_EQ(hal_->ctx.eq(eqn)->num_cqs, 1u);
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, eqn)), MPR_CMD_BUSY));
  EXPECT_NE(hal_->ctx.eq(eqn), nullptr);
  ASSERT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, cqn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.eq(eqn)->num_cqs, 0u);
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, eqn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.eq(eqn), nullptr);
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, eqn)), MPR_CMD_BAD_HANDLE));
}

TEST_F(FirmwareTest, DestroyEqBadHandle) {
  create_eq();
  for (uint32_t bad : {1u, 7u, 8u, 0xffffffffu})
    EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, bad)), MPR_CMD_BAD_HANDLE)) << bad;
}

// ---------------------------------------------------------------------------
// CREATE_CQ, DESTROY_CQ
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, CreateCqFillsTheContext) {
  const uint32_t eqn = create_eq();
  const uint32_t eqn2 = create_eq();
  const mpr_cmd_comp r = exec(create_cq_cmd(eqn2));
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(r.out[0], 0u);
  const mpr_cqc* q = hal_->ctx.cq(0);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->cqn, 0u);
  EXPECT_EQ(q->base, 0x210000u);
  EXPECT_EQ(q->dbrec, 0x220004u);
  EXPECT_EQ(q->log_size, 8);
  EXPECT_EQ(q->eqn, eqn2);
  EXPECT_EQ(q->uar_index, 5u);
  EXPECT_EQ(q->pi, 0u);
  EXPECT_EQ(q->arm, 0);
  EXPECT_EQ(q->num_qps, 0u);
  EXPECT_EQ(hal_->ctx.eq(eqn2)->num_cqs, 1u);
  EXPECT_EQ(hal_->ctx.eq(eqn)->num_cqs, 0u);
  EXPECT_EQ(q->log_cqe_size, 5) << "0 asks for 32-byte slots";
  EXPECT_EQ(q->flags, 0);
  EXPECT_EQ(create_cq(eqn), 1u);
  mpr_cmd c = create_cq_cmd(eqn);
  c.u.create_cq.log_cqe_size = 7;
  c.u.create_cq.flags = MPR_CQ_F_INLINE_RECV;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.cq(2)->log_cqe_size, 7);
  EXPECT_EQ(hal_->ctx.cq(2)->flags, MPR_CQ_F_INLINE_RECV);
}

TEST_F(FirmwareTest, CreateCqParameterErrors) {
  const uint32_t eqn = create_eq();
  struct Case {
    const char* what;
    void (*mutate)(mpr_cmd_create_cq&);
    uint8_t status;
    uint32_t syndrome;
  };
  const Case cases[] = {
      {"log_size 0", [](mpr_cmd_create_cq& q) { q.log_size = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"log_size 23 > max_cqe", [](mpr_cmd_create_cq& q) { q.log_size = 23; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"log_size 25", [](mpr_cmd_create_cq& q) { q.log_size = 25; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"log_size 64", [](mpr_cmd_create_cq& q) { q.log_size = 64; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"log_size 0xffffffff", [](mpr_cmd_create_cq& q) { q.log_size = 0xffffffff; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE},
      {"base 0", [](mpr_cmd_create_cq& q) { q.base = 0; }, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS},
      {"base misaligned", [](mpr_cmd_create_cq& q) { q.base = 0x210010; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"dbrec misaligned", [](mpr_cmd_create_cq& q) { q.dbrec = 0x220002; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"uar index = num_uar_pages", [](mpr_cmd_create_cq& q) { q.uar_index = 1024; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR},
      {"unknown eq", [](mpr_cmd_create_cq& q) { q.eqn = 5; }, MPR_CMD_BAD_HANDLE, MPR_CMD_SYN_NONE},
      {"CQE slot of 16 B", [](mpr_cmd_create_cq& q) { q.log_cqe_size = 4; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"CQE slot of 256 B", [](mpr_cmd_create_cq& q) { q.log_cqe_size = 8; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"inline receive in 32-byte slots",
       [](mpr_cmd_create_cq& q) { q.flags = MPR_CQ_F_INLINE_RECV; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"unknown flag", [](mpr_cmd_create_cq& q) { q.log_cqe_size = 6, q.flags = 0x82; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED},
      {"reserved", [](mpr_cmd_create_cq& q) { q.rsvd = 1; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_RESERVED},
  };
  for (const Case& k : cases) {
    mpr_cmd c = create_cq_cmd(eqn);
    k.mutate(c.u.create_cq);
    EXPECT_TRUE(HasStatus(exec(c), k.status, k.syndrome)) << k.what;
  }
  EXPECT_EQ(hal_->ctx.eq(eqn)->num_cqs, 0u);
  mpr_cmd c = create_cq_cmd(eqn);
  c.u.create_cq.log_size = 22;  // == max_cqe
  c.u.create_cq.uar_index = 1023;
  const mpr_cmd_comp r = exec(c);
  EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(r.out[0], 0u);
}

TEST_F(FirmwareTest, CreateCqNoResources) {
  NicLimits l = test_limits();
  l.max_cq = 2;
  rebuild(l);
  const uint32_t eqn = create_eq();
  EXPECT_EQ(create_cq(eqn), 0u);
  EXPECT_EQ(create_cq(eqn), 1u);
  EXPECT_TRUE(HasStatus(exec(create_cq_cmd(eqn)), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->ctx.eq(eqn)->num_cqs, 2u) << "a failed CREATE_CQ holds no EQ reference";
}

TEST_F(FirmwareTest, DestroyCqWithAQpIsBusy) {
  make_objects();
  const uint32_t qpn = create_qp();
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 2u) << "send and receive CQ are the same";
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, cqn_)), MPR_CMD_BUSY));
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, qpn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 0u);
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, cqn_)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.cq(cqn_), nullptr);
  EXPECT_EQ(hal_->ctx.eq(eqn_)->num_cqs, 0u);
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, cqn_)), MPR_CMD_BAD_HANDLE));
}

TEST_F(FirmwareTest, DestroyCqBadHandle) {
  create_cq(create_eq());
  for (uint32_t bad : {1u, 63u, 64u, 0xffffffffu})
    EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, bad)), MPR_CMD_BAD_HANDLE)) << bad;
}

// ---------------------------------------------------------------------------
// CREATE_QP, DESTROY_QP
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, CreateQpFillsTheContext) {
  make_objects();
  const uint32_t cq2 = create_cq(eqn_);
  const mpr_cmd_comp r = exec(create_qp_cmd(pdn_, cqn_, cq2));
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_EQ(r.out[0], kFirstQpn);
  const mpr_qpc* q = hal_->ctx.qp(kFirstQpn);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->qpn, kFirstQpn);
  EXPECT_EQ(q->sq_base, 0x300000u);
  EXPECT_EQ(q->rq_base, 0x310000u);
  EXPECT_EQ(q->pdn, pdn_);
  EXPECT_EQ(q->send_cqn, cqn_);
  EXPECT_EQ(q->recv_cqn, cq2);
  EXPECT_EQ(q->uar_index, 7u);
  EXPECT_EQ(q->max_inline, 64u);
  EXPECT_EQ(q->qp_type, MPR_QPT_RC);
  EXPECT_EQ(q->state, MPR_QPS_RESET);
  EXPECT_EQ(q->sq_log_size, 8);
  EXPECT_EQ(q->sq_log_stride, 8);
  EXPECT_EQ(q->rq_log_size, 7);
  EXPECT_EQ(q->rq_log_stride, 5);
  EXPECT_EQ(q->transport, MPR_TRANSPORT_GBN) << "DEFAULT resolves to the configured engine";
  EXPECT_EQ(q->sq_sig_all, 1);
  EXPECT_EQ(q->valid, 1);
  EXPECT_EQ(q->sq_pi, 0u);
  EXPECT_EQ(q->rq_pi, 0u);
  const mpr_qp_attr zero{};
  EXPECT_EQ(std::memcmp(&q->attr, &zero, sizeof zero), 0);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn_), 1u);
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 1u);
  EXPECT_EQ(hal_->ctx.cq(cq2)->num_qps, 1u);
  EXPECT_EQ(hal_->ctx.qp_count(), 1u);
  EXPECT_TRUE(hal_->changes.empty()) << "creation is not a state transition";

  mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
  c.u.create_qp.transport = MPR_TRANSPORT_GBN;
  const mpr_cmd_comp r2 = exec(c);
  ASSERT_TRUE(HasStatus(r2, MPR_CMD_OK));
  EXPECT_EQ(r2.out[0], kFirstQpn + 1);
  EXPECT_EQ(hal_->ctx.qp(kFirstQpn + 1)->transport, MPR_TRANSPORT_GBN);
}

TEST_F(FirmwareTest, CreateQpParameterErrors) {
  make_objects();
  struct Case {
    const char* what;
    void (*mutate)(mpr_cmd_create_qp&);
    uint8_t status;
    uint32_t syndrome;
  };
  const Case cases[] = {
      {"qp type 5 (none: RC 2, UC 3, UD 4)", [](mpr_cmd_create_qp& q) { q.qp_type = 5; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_QP_TYPE},
      {"qp type 0", [](mpr_cmd_create_qp& q) { q.qp_type = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_QP_TYPE},
      {"unknown flag", [](mpr_cmd_create_qp& q) { q.flags = 2; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_RESERVED},
      {"srqn without the SRQ flag", [](mpr_cmd_create_qp& q) { q.srqn = 1; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_RESERVED},
      {"SRQ flag with a receive ring of its own",
       [](mpr_cmd_create_qp& q) { q.flags = MPR_CREATE_QP_F_SRQ; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_SRQ},
      {"MP-RDMA not offered", [](mpr_cmd_create_qp& q) { q.transport = MPR_TRANSPORT_MP_RDMA; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT},
      {"DCQCN not offered", [](mpr_cmd_create_qp& q) { q.transport = MPR_TRANSPORT_DCQCN; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT},
      {"IRN not offered", [](mpr_cmd_create_qp& q) { q.transport = MPR_TRANSPORT_IRN; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT},
      {"transport 200", [](mpr_cmd_create_qp& q) { q.transport = 200; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_TRANSPORT},
      {"sq_log_size 0", [](mpr_cmd_create_qp& q) { q.sq_log_size = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"sq_log_size 15 > max_qp_wr", [](mpr_cmd_create_qp& q) { q.sq_log_size = 15; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE},
      {"rq_log_size 0", [](mpr_cmd_create_qp& q) { q.rq_log_size = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"rq_log_size 15", [](mpr_cmd_create_qp& q) { q.rq_log_size = 15; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"sq stride 32", [](mpr_cmd_create_qp& q) { q.sq_log_stride = 5; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"sq stride 2048", [](mpr_cmd_create_qp& q) { q.sq_log_stride = 11; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"rq stride 8", [](mpr_cmd_create_qp& q) { q.rq_log_stride = 3; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"rq stride 2048", [](mpr_cmd_create_qp& q) { q.rq_log_stride = 11; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"sq_base 0", [](mpr_cmd_create_qp& q) { q.sq_base = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"sq_base misaligned", [](mpr_cmd_create_qp& q) { q.sq_base = 0x300008; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"rq_base 0", [](mpr_cmd_create_qp& q) { q.rq_base = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"rq_base misaligned", [](mpr_cmd_create_qp& q) { q.rq_base = 0x310020; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"uar index = num_uar_pages", [](mpr_cmd_create_qp& q) { q.uar_index = 1024; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR},
      {"max_inline above the device limit",
       [](mpr_cmd_create_qp& q) {
         q.sq_log_stride = 10;
         q.max_inline = 513;
       },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH},
      {"max_inline above the WQE room",
       [](mpr_cmd_create_qp& q) {
         q.sq_log_stride = 6;  // 64 - ctrl - raddr - inline header = 28
         q.max_inline = 29;
       },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH},
      {"unknown pd", [](mpr_cmd_create_qp& q) { q.pdn = 9; }, MPR_CMD_BAD_HANDLE, MPR_CMD_SYN_NONE},
      {"unknown send cq", [](mpr_cmd_create_qp& q) { q.send_cqn = 9; }, MPR_CMD_BAD_HANDLE,
       MPR_CMD_SYN_NONE},
      {"unknown recv cq", [](mpr_cmd_create_qp& q) { q.recv_cqn = 9; }, MPR_CMD_BAD_HANDLE,
       MPR_CMD_SYN_NONE},
  };
  for (const Case& k : cases) {
    mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
    k.mutate(c.u.create_qp);
    EXPECT_TRUE(HasStatus(exec(c), k.status, k.syndrome)) << k.what;
  }
  EXPECT_EQ(hal_->ctx.qp_count(), 0u);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn_), 0u);
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 0u);

  // The limits themselves are accepted.
  const Case edges[] = {
      {"largest rings", [](mpr_cmd_create_qp& q) { q.sq_log_size = q.rq_log_size = 14; }, 0, 0},
      {"smallest strides",
       [](mpr_cmd_create_qp& q) {
         q.sq_log_stride = 6;
         q.rq_log_stride = 4;
         q.max_inline = 28;
       },
       0, 0},
      {"largest inline",
       [](mpr_cmd_create_qp& q) {
         q.sq_log_stride = 10;
         q.max_inline = 512;
       },
       0, 0},
  };
  for (const Case& k : edges) {
    mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
    k.mutate(c.u.create_qp);
    EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_OK)) << k.what;
  }
}

// The GSI QP (MPR_QPT_GSI): a UD QP in its context, under an ordinary
// handle, registered as the one that answers to QPN 1; one per NIC, the
// number freed by DESTROY_QP and by a device reset.
TEST_F(FirmwareTest, GsiQpIsAUdQpForQpn1OncePerNic) {
  make_objects();
  auto create = [&](uint8_t qp_type) {
    mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
    c.u.create_qp.qp_type = qp_type;
    return exec(c);
  };
  EXPECT_EQ(hal_->ctx.gsi_qpn(), 0u);
  const mpr_cmd_comp gsi = create(MPR_QPT_GSI);
  ASSERT_TRUE(HasStatus(gsi, MPR_CMD_OK));
  const uint32_t qpn = gsi.out[0];
  EXPECT_GE(qpn, kFirstQpn) << "the handle is an ordinary QP number";
  EXPECT_EQ(hal_->ctx.gsi_qpn(), qpn);
  EXPECT_EQ(hal_->ctx.qp(qpn)->qp_type, MPR_QPT_UD);
  EXPECT_EQ(hal_->ctx.qp(1), nullptr) << "QPN 1 is no handle";
  // A second one is refused and takes no context; UD QPs are unaffected.
  EXPECT_TRUE(HasStatus(create(MPR_QPT_GSI), MPR_CMD_BUSY, MPR_CMD_SYN_QP_TYPE));
  EXPECT_EQ(hal_->ctx.qp_count(), 1u);
  const mpr_cmd_comp ud = create(MPR_QPT_UD);
  ASSERT_TRUE(HasStatus(ud, MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.gsi_qpn(), qpn);
  // Destroying another QP keeps it; destroying it frees the number.
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, ud.out[0])), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.gsi_qpn(), qpn);
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, qpn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.gsi_qpn(), 0u);
  const mpr_cmd_comp again = create(MPR_QPT_GSI);
  ASSERT_TRUE(HasStatus(again, MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.gsi_qpn(), again.out[0]);
  hal_->ctx.clear();
  EXPECT_EQ(hal_->ctx.gsi_qpn(), 0u) << "a device reset forgets it";
}

// A QP runs one of the engines the NIC offers (nic.transport,
// nic.qp_transports, DCQCN with congestion_control dcqcn); QUERY_DEVICE's
// cap_flags name them; DEFAULT is the NIC's own engine; UD QPs have none.
TEST_F(FirmwareTest, CreateQpChoosesAnOfferedEngine) {
  hal_->offer.kinds =
      1u << MPR_TRANSPORT_GBN | 1u << MPR_TRANSPORT_MP_RDMA | 1u << MPR_TRANSPORT_DCQCN;
  hal_->offer.default_kind = MPR_TRANSPORT_MP_RDMA;
  make_objects();
  auto create = [&](uint8_t transport, uint8_t qp_type = MPR_QPT_RC) {
    mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
    c.u.create_qp.transport = transport;
    c.u.create_qp.qp_type = qp_type;
    return exec(c);
  };
  struct Want {
    uint8_t asked, stored;
  };
  for (const Want& w : {Want{MPR_TRANSPORT_DEFAULT, MPR_TRANSPORT_MP_RDMA},
                        Want{MPR_TRANSPORT_GBN, MPR_TRANSPORT_GBN},
                        Want{MPR_TRANSPORT_MP_RDMA, MPR_TRANSPORT_MP_RDMA},
                        Want{MPR_TRANSPORT_DCQCN, MPR_TRANSPORT_DCQCN}}) {
    const mpr_cmd_comp r = create(w.asked);
    ASSERT_TRUE(HasStatus(r, MPR_CMD_OK)) << "transport " << int{w.asked};
    EXPECT_EQ(hal_->ctx.qp(r.out[0])->transport, w.stored) << "transport " << int{w.asked};
  }
  // Not offered, out of range, or an engine for a datagram QP.
  EXPECT_TRUE(HasStatus(create(MPR_TRANSPORT_IRN), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT));
  EXPECT_TRUE(HasStatus(create(40), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_TRANSPORT));
  EXPECT_TRUE(HasStatus(create(MPR_TRANSPORT_MP_RDMA, MPR_QPT_UD), MPR_CMD_BAD_PARAM,
                        MPR_CMD_SYN_TRANSPORT));
  EXPECT_EQ(hal_->ctx.qp_count(), 4u) << "a refused QP takes no context";
  // A UD QP on this NIC is created, with go-back-N's (unused) slot, not the
  // NIC's default MP-RDMA.
  const mpr_cmd_comp ud = create(MPR_TRANSPORT_DEFAULT, MPR_QPT_UD);
  ASSERT_TRUE(HasStatus(ud, MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.qp(ud.out[0])->transport, MPR_TRANSPORT_GBN);

  mpr_cmd q = cmd(MPR_CMD_QUERY_DEVICE);
  q.hdr.out_mailbox = kOutMailbox;
  q.hdr.out_len = sizeof(mpr_device_attr);
  ASSERT_TRUE(HasStatus(exec(q), MPR_CMD_OK));
  mpr_device_attr a;
  std::memcpy(&a, hal_->at(kOutMailbox), sizeof a);
  const uint32_t engines = MPRDMA_BAR0__CAPS__GBN_bm | MPRDMA_BAR0__CAPS__MP_RDMA_bm |
                           MPRDMA_BAR0__CAPS__DCQCN_bm | MPRDMA_BAR0__CAPS__IRN_bm;
  EXPECT_EQ(a.cap_flags & engines, MPRDMA_BAR0__CAPS__GBN_bm | MPRDMA_BAR0__CAPS__MP_RDMA_bm |
                                       MPRDMA_BAR0__CAPS__DCQCN_bm);
}

TEST_F(FirmwareTest, CreateQpNoResources) {
  NicLimits l = test_limits();
  l.max_qp = 2;
  rebuild(l);
  make_objects();
  EXPECT_EQ(create_qp(), kFirstQpn);
  EXPECT_EQ(create_qp(), kFirstQpn + 1);
  EXPECT_TRUE(HasStatus(exec(create_qp_cmd(pdn_, cqn_, cqn_)), MPR_CMD_NO_RESOURCES));
  EXPECT_EQ(hal_->ctx.pd_refs(pdn_), 2u);
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 4u);
}

TEST_F(FirmwareTest, QpnsAreLowestFree) {
  make_objects();
  EXPECT_EQ(create_qp(), 2u);
  EXPECT_EQ(create_qp(), 3u);
  EXPECT_EQ(create_qp(), 4u);
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, 3)), MPR_CMD_OK));
  EXPECT_EQ(create_qp(), 3u);
  EXPECT_EQ(create_qp(), 5u);
  // The same for CQs and EQs.
  EXPECT_EQ(create_cq(eqn_), 1u);
  EXPECT_EQ(create_cq(eqn_), 2u);
  ASSERT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_CQ, 1)), MPR_CMD_OK));
  EXPECT_EQ(create_cq(eqn_), 1u);
  EXPECT_EQ(create_eq(), 1u);
  EXPECT_EQ(create_eq(), 2u);
  ASSERT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_EQ, 1)), MPR_CMD_OK));
  EXPECT_EQ(create_eq(), 1u);
}

TEST_F(FirmwareTest, DestroyQpReleasesEverything) {
  make_objects();
  const uint32_t qpn = qp_in(MPR_QPS_RTS);
  hal_->changes.clear();
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, qpn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->destroyed, std::vector<uint32_t>{qpn});
  EXPECT_TRUE(hal_->changes.empty());
  EXPECT_EQ(hal_->ctx.qp(qpn), nullptr);
  EXPECT_EQ(hal_->ctx.qp_count(), 0u);
  EXPECT_EQ(hal_->ctx.pd_refs(pdn_), 0u);
  EXPECT_EQ(hal_->ctx.cq(cqn_)->num_qps, 0u);
  EXPECT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, qpn)), MPR_CMD_BAD_HANDLE));
  EXPECT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_BAD_HANDLE));
  EXPECT_EQ(hal_->destroyed.size(), 1u);
  // The QPN is reused, starting from RESET with no attributes.
  EXPECT_EQ(create_qp(), qpn);
  EXPECT_EQ(state_of(qpn), MPR_QPS_RESET);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.dest_qpn, 0u);
}

TEST_F(FirmwareTest, DestroyQpBadHandle) {
  make_objects();
  create_qp();
  for (uint32_t bad : {0u, 1u, 3u, 65u, 66u, 0xffffffu, 0xffffffffu})
    EXPECT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, bad)), MPR_CMD_BAD_HANDLE)) << bad;
  EXPECT_TRUE(hal_->destroyed.empty());
}

// ---------------------------------------------------------------------------
// QUERY_QP
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, QueryQpReturnsTheAttributesByteForByte) {
  make_objects();
  const uint32_t qpn = qp_in(MPR_QPS_RTS);
  hal_->fill(kOutMailbox, kSentinel, 128);
  mpr_cmd c = qpn_cmd(MPR_CMD_QUERY_QP, qpn);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = 128;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));

  const mpr_qp_attr i = init_attr(), r = rtr_attr(), s = rts_attr();
  mpr_qp_attr want{};
  want.attr_mask = 0;
  want.qp_state = MPR_QPS_RTS;
  want.cur_state = MPR_QPS_RTS;
  want.access_flags = i.access_flags;
  want.pkey_index = i.pkey_index;
  want.port_num = i.port_num;
  want.path_mtu = r.path_mtu;
  want.dest_qpn = r.dest_qpn;
  want.rq_psn = r.rq_psn;
  want.max_dest_rd_atomic = r.max_dest_rd_atomic;
  want.min_rnr_timer = r.min_rnr_timer;
  want.sgid_index = r.sgid_index;
  want.hop_limit = r.hop_limit;
  want.traffic_class = r.traffic_class;
  want.udp_sport = r.udp_sport;
  std::memcpy(want.dgid, r.dgid, 16);
  std::memcpy(want.dmac, r.dmac, 6);
  want.timeout = s.timeout;
  want.retry_cnt = s.retry_cnt;
  want.rnr_retry = s.rnr_retry;
  want.sq_psn = s.sq_psn;
  want.max_rd_atomic = s.max_rd_atomic;
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &want, sizeof want), 0);
  for (size_t k = sizeof want; k < 128; ++k) ASSERT_EQ(hal_->at(kOutMailbox)[k], kSentinel) << k;
}

TEST_F(FirmwareTest, QueryQpErrors) {
  make_objects();
  const uint32_t qpn = create_qp();
  mpr_cmd c = qpn_cmd(MPR_CMD_QUERY_QP, qpn + 1);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_qp_attr);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_HANDLE));
  c = qpn_cmd(MPR_CMD_QUERY_QP, qpn);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_qp_attr) - 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  c = qpn_cmd(MPR_CMD_QUERY_QP, qpn);
  c.hdr.out_mailbox = kOutside;
  c.hdr.out_len = sizeof(mpr_qp_attr);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));
  c = qpn_cmd(MPR_CMD_QUERY_QP, qpn);
  c.hdr.out_len = sizeof(mpr_qp_attr);
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH)) << "no mailbox";
}

// ---------------------------------------------------------------------------
// MODIFY_QP: the RC state machine
// ---------------------------------------------------------------------------

TEST_F(FirmwareTest, RcBringUpWithPerftestMasks) {
  make_objects();
  const uint32_t qpn = create_qp();
  ASSERT_TRUE(HasStatus(modify(qpn, init_attr()), MPR_CMD_OK));
  EXPECT_EQ(state_of(qpn), MPR_QPS_INIT);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.access_flags, init_attr().access_flags);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.port_num, 1);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.qp_state, MPR_QPS_INIT);

  ASSERT_TRUE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));
  const mpr_qpc* q = hal_->ctx.qp(qpn);
  EXPECT_EQ(q->state, MPR_QPS_RTR);
  EXPECT_EQ(q->attr.path_mtu, MPR_MTU_1024);
  EXPECT_EQ(q->attr.dest_qpn, 0x123u);
  EXPECT_EQ(q->attr.rq_psn, 0x654321u);
  EXPECT_EQ(q->attr.max_dest_rd_atomic, 4);
  EXPECT_EQ(q->attr.min_rnr_timer, 12);
  EXPECT_EQ(q->attr.hop_limit, 64);
  EXPECT_EQ(q->attr.traffic_class, 0x68);
  EXPECT_EQ(q->attr.udp_sport, 0xD00D);
  EXPECT_EQ(std::memcmp(q->attr.dgid, rtr_attr().dgid, 16), 0);
  EXPECT_EQ(std::memcmp(q->attr.dmac, rtr_attr().dmac, 6), 0);
  EXPECT_EQ(q->attr.sq_psn, 0u) << "not given yet";

  ASSERT_TRUE(HasStatus(modify(qpn, rts_attr()), MPR_CMD_OK));
  EXPECT_EQ(q->state, MPR_QPS_RTS);
  EXPECT_EQ(q->attr.timeout, 14);
  EXPECT_EQ(q->attr.retry_cnt, 7);
  EXPECT_EQ(q->attr.rnr_retry, 7);
  EXPECT_EQ(q->attr.sq_psn, 0x111111u);
  EXPECT_EQ(q->attr.max_rd_atomic, 4);
  EXPECT_EQ(q->attr.rq_psn, 0x654321u) << "earlier attributes are kept";

  const std::vector<StateChange> want = {{qpn, MPR_QPS_RESET, MPR_QPS_INIT},
                                         {qpn, MPR_QPS_INIT, MPR_QPS_RTR},
                                         {qpn, MPR_QPS_RTR, MPR_QPS_RTS}};
  EXPECT_EQ(hal_->changes, want);
}

TEST_F(FirmwareTest, ModifyQpBadHandle) {
  make_objects();
  const uint32_t qpn = create_qp();
  EXPECT_TRUE(HasStatus(modify(qpn + 1, init_attr()), MPR_CMD_BAD_HANDLE));
  EXPECT_TRUE(HasStatus(modify(0, init_attr()), MPR_CMD_BAD_HANDLE));
  EXPECT_TRUE(HasStatus(modify(1, init_attr()), MPR_CMD_BAD_HANDLE));
  EXPECT_TRUE(hal_->changes.empty());
}

// Each required attribute left out of each transition is reported, with
// its bit as the syndrome, and the QP stays where it was.
TEST_F(FirmwareTest, EveryMissingRequiredAttributeIsBadAttr) {
  make_objects();
  struct Step {
    uint8_t from;
    mpr_qp_attr attr;
  };
  const Step steps[] = {
      {MPR_QPS_RESET, init_attr()}, {MPR_QPS_INIT, rtr_attr()}, {MPR_QPS_RTR, rts_attr()}};
  int checked = 0;
  for (const Step& s : steps) {
    const uint32_t qpn = qp_in(s.from);
    hal_->changes.clear();
    const QpTransitionRule rule = qp_transition_rule(s.from, s.attr.qp_state);
    ASSERT_TRUE(rule.allowed);
    EXPECT_EQ(rule.required & s.attr.attr_mask, rule.required) << "perftest's mask suffices";
    for (uint32_t bit = 1; bit; bit <<= 1) {
      if (!(rule.required & bit) || bit == MPR_QP_ATTR_STATE) continue;
      mpr_qp_attr a = s.attr;
      a.attr_mask &= ~bit;
      EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_ATTR, bit))
          << "from " << int(s.from) << " without 0x" << std::hex << bit;
      EXPECT_EQ(state_of(qpn), s.from);
      ++checked;
    }
    // Several missing: the lowest bit is named.
    mpr_qp_attr a = s.attr;
    const uint32_t req = rule.required & ~MPR_QP_ATTR_STATE;
    a.attr_mask &= ~req;
    EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_ATTR, lowest_bit(req)));
    EXPECT_TRUE(hal_->changes.empty());
  }
  EXPECT_EQ(checked, 3 + 6 + 5);
}

TEST_F(FirmwareTest, MissingStateAttributeFromResetIsBadAttr) {
  make_objects();
  const uint32_t qpn = create_qp();
  mpr_qp_attr a = init_attr();
  a.attr_mask &= ~MPR_QP_ATTR_STATE;  // RESET -> RESET, which needs the STATE bit
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_ATTR, MPR_QP_ATTR_STATE));
  EXPECT_EQ(state_of(qpn), MPR_QPS_RESET);
}

TEST_F(FirmwareTest, AttributesNotAllowedInATransitionAreBadAttr) {
  make_objects();
  struct Case {
    const char* what;
    uint8_t from;
    mpr_qp_attr attr;
    uint32_t extra;
  };
  const Case cases[] = {
      {"RESET->INIT with PATH_MTU", MPR_QPS_RESET, init_attr(), MPR_QP_ATTR_PATH_MTU},
      {"RESET->INIT with CUR_STATE", MPR_QPS_RESET, init_attr(), MPR_QP_ATTR_CUR_STATE},
      {"RESET->INIT with SQ_PSN", MPR_QPS_RESET, init_attr(), MPR_QP_ATTR_SQ_PSN},
      {"INIT->RTR with SQ_PSN", MPR_QPS_INIT, rtr_attr(), MPR_QP_ATTR_SQ_PSN},
      {"INIT->RTR with TIMEOUT", MPR_QPS_INIT, rtr_attr(), MPR_QP_ATTR_TIMEOUT},
      {"INIT->RTR with PORT", MPR_QPS_INIT, rtr_attr(), MPR_QP_ATTR_PORT},
      {"RTR->RTS with AV", MPR_QPS_RTR, rts_attr(), MPR_QP_ATTR_AV},
      {"RTR->RTS with DEST_QPN", MPR_QPS_RTR, rts_attr(), MPR_QP_ATTR_DEST_QPN},
      {"RTS->ERR with ACCESS_FLAGS", MPR_QPS_RTS, state_attr(MPR_QPS_ERR),
       MPR_QP_ATTR_ACCESS_FLAGS},
      {"INIT->RESET with PORT", MPR_QPS_INIT, state_attr(MPR_QPS_RESET), MPR_QP_ATTR_PORT},
      {"unknown bit 1<<25", MPR_QPS_RESET, init_attr(), 1u << 25},
  };
  for (const Case& k : cases) {
    const uint32_t qpn = qp_in(k.from);
    hal_->changes.clear();
    mpr_qp_attr a = k.attr;
    a.attr_mask |= k.extra;
    a.cur_state = k.from;  // a matching CUR_STATE, where it is given
    a.port_num = 1;
    EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_ATTR, k.extra)) << k.what;
    EXPECT_EQ(state_of(qpn), k.from) << k.what;
    EXPECT_TRUE(hal_->changes.empty()) << k.what;
  }
}

TEST_F(FirmwareTest, IllegalTransitionsAreBadState) {
  make_objects();
  struct Case {
    uint8_t from;
    mpr_qp_attr attr;
  };
  mpr_qp_attr rtr_from_reset = rtr_attr();
  mpr_qp_attr rts_from_init = rts_attr();
  mpr_qp_attr init_again = init_attr();
  const Case cases[] = {
      {MPR_QPS_RESET, rtr_from_reset},
      {MPR_QPS_RESET, rts_from_init},
      {MPR_QPS_INIT, rts_from_init},
      {MPR_QPS_RTS, rtr_attr()},
      {MPR_QPS_RTR, init_again},
      {MPR_QPS_RTS, init_again},
      {MPR_QPS_ERR, init_again},
      {MPR_QPS_ERR, rtr_attr()},
      {MPR_QPS_RTR, rtr_attr()},  // RTR -> RTR does not exist
      {MPR_QPS_RESET, state_attr(MPR_QPS_SQD)},
      {MPR_QPS_RTS, state_attr(MPR_QPS_SQD)},
      {MPR_QPS_RTS, state_attr(MPR_QPS_SQE)},
  };
  for (const Case& k : cases) {
    const uint32_t qpn = qp_in(k.from);
    hal_->changes.clear();
    EXPECT_TRUE(HasStatus(modify(qpn, k.attr), MPR_CMD_BAD_STATE, MPR_QP_ATTR_STATE))
        << int(k.from) << " -> " << int(k.attr.qp_state);
    EXPECT_EQ(state_of(qpn), k.from);
    EXPECT_TRUE(hal_->changes.empty());
  }
}

TEST_F(FirmwareTest, StateBeyondErrIsBadParam) {
  make_objects();
  const uint32_t qpn = create_qp();
  mpr_qp_attr a = init_attr();
  a.qp_state = 7;
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_PARAM, MPR_QP_ATTR_STATE));
  a.qp_state = 0xff;
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_PARAM, MPR_QP_ATTR_STATE));
  EXPECT_EQ(state_of(qpn), MPR_QPS_RESET);
}

TEST_F(FirmwareTest, CurStateMismatchIsBadState) {
  make_objects();
  const uint32_t qpn = qp_in(MPR_QPS_RTR);
  mpr_qp_attr a = rts_attr();
  a.attr_mask |= MPR_QP_ATTR_CUR_STATE;
  a.cur_state = MPR_QPS_INIT;
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_STATE, MPR_QP_ATTR_CUR_STATE));
  EXPECT_EQ(state_of(qpn), MPR_QPS_RTR);
  a.cur_state = MPR_QPS_RTS;
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_STATE, MPR_QP_ATTR_CUR_STATE));
  a.cur_state = MPR_QPS_RTR;
  EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_OK));
  EXPECT_EQ(state_of(qpn), MPR_QPS_RTS);
  // In RTS -> RTS too.
  mpr_qp_attr b{};
  b.attr_mask = MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_MIN_RNR_TIMER;
  b.cur_state = MPR_QPS_RTR;
  b.min_rnr_timer = 3;
  EXPECT_TRUE(HasStatus(modify(qpn, b), MPR_CMD_BAD_STATE, MPR_QP_ATTR_CUR_STATE));
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.min_rnr_timer, 12);
}

// Out-of-range values are BAD_PARAM naming the attribute's bit; the QP keeps
// its state and attributes.
TEST_F(FirmwareTest, AttributeValueChecks) {
  make_objects();
  struct Case {
    const char* what;
    uint8_t from;
    mpr_qp_attr (*base)();
    void (*mutate)(mpr_qp_attr&);
    uint32_t syndrome;
  };
  const Case cases[] = {
      {"access flag 0x10", MPR_QPS_RESET, init_attr, [](mpr_qp_attr& a) { a.access_flags |= 0x10; },
       MPR_QP_ATTR_ACCESS_FLAGS},
      {"pkey index 1", MPR_QPS_RESET, init_attr, [](mpr_qp_attr& a) { a.pkey_index = 1; },
       MPR_QP_ATTR_PKEY_INDEX},
      {"port 2", MPR_QPS_RESET, init_attr, [](mpr_qp_attr& a) { a.port_num = 2; },
       MPR_QP_ATTR_PORT},
      {"port 0", MPR_QPS_RESET, init_attr, [](mpr_qp_attr& a) { a.port_num = 0; },
       MPR_QP_ATTR_PORT},
      {"path mtu above the port's", MPR_QPS_INIT, rtr_attr,
       [](mpr_qp_attr& a) { a.path_mtu = MPR_MTU_2048; }, MPR_QP_ATTR_PATH_MTU},
      {"path mtu 0", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.path_mtu = 0; },
       MPR_QP_ATTR_PATH_MTU},
      {"rq psn 2^24", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.rq_psn = 0x1000000; },
       MPR_QP_ATTR_RQ_PSN},
      {"dest qpn 2^24", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.dest_qpn = 0x1000000; },
       MPR_QP_ATTR_DEST_QPN},
      {"max dest rd atomic 17", MPR_QPS_INIT, rtr_attr,
       [](mpr_qp_attr& a) { a.max_dest_rd_atomic = 17; }, MPR_QP_ATTR_MAX_DEST_RD_ATOMIC},
      {"min rnr timer 32", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.min_rnr_timer = 32; },
       MPR_QP_ATTR_MIN_RNR_TIMER},
      {"AV: unset sgid", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.sgid_index = 3; },
       MPR_QP_ATTR_AV},
      {"AV: link-local sgid", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.sgid_index = 5; },
       MPR_QP_ATTR_AV},
      {"AV: sgid index beyond the table", MPR_QPS_INIT, rtr_attr,
       [](mpr_qp_attr& a) { a.sgid_index = 200; }, MPR_QP_ATTR_AV},
      {"AV: link-local dgid", MPR_QPS_INIT, rtr_attr,
       [](mpr_qp_attr& a) {
         std::memset(a.dgid, 0, 16);
         a.dgid[0] = 0xfe;
         a.dgid[1] = 0x80;
         a.dgid[15] = 2;
       },
       MPR_QP_ATTR_AV},
      {"AV: dgid prefix ::fffe:", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.dgid[11] = 0xfe; },
       MPR_QP_ATTR_AV},
      {"AV: zero dmac", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { std::memset(a.dmac, 0, 6); },
       MPR_QP_ATTR_AV},
      {"AV: hop limit 0", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.hop_limit = 0; },
       MPR_QP_ATTR_AV},
      {"retry cnt 8", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.retry_cnt = 8; },
       MPR_QP_ATTR_RETRY_CNT},
      {"rnr retry 8", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.rnr_retry = 8; },
       MPR_QP_ATTR_RNR_RETRY},
      {"timeout 32", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.timeout = 32; },
       MPR_QP_ATTR_TIMEOUT},
      {"sq psn 2^24", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.sq_psn = 0x1000000; },
       MPR_QP_ATTR_SQ_PSN},
      {"sq psn all ones", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.sq_psn = 0xffffffff; },
       MPR_QP_ATTR_SQ_PSN},
      {"max rd atomic 17", MPR_QPS_RTR, rts_attr, [](mpr_qp_attr& a) { a.max_rd_atomic = 17; },
       MPR_QP_ATTR_MAX_QP_RD_ATOMIC},
      {"RTS min rnr timer 32", MPR_QPS_RTS, nullptr,
       [](mpr_qp_attr& a) {
         a.attr_mask = MPR_QP_ATTR_MIN_RNR_TIMER;
         a.min_rnr_timer = 32;
       },
       MPR_QP_ATTR_MIN_RNR_TIMER},
      {"reserved byte", MPR_QPS_RESET, init_attr, [](mpr_qp_attr& a) { a.rsvd0 = 1; },
       MPR_CMD_SYN_RESERVED},
      {"reserved word", MPR_QPS_INIT, rtr_attr, [](mpr_qp_attr& a) { a.qkey = 0x100; },
       MPR_CMD_SYN_RESERVED},
  };
  for (const Case& k : cases) {
    const uint32_t qpn = qp_in(k.from);
    hal_->changes.clear();
    const mpr_qp_attr before = hal_->ctx.qp(qpn)->attr;
    mpr_qp_attr a = k.base ? k.base() : mpr_qp_attr{};
    k.mutate(a);
    EXPECT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_BAD_PARAM, k.syndrome)) << k.what;
    EXPECT_EQ(state_of(qpn), k.from) << k.what;
    EXPECT_EQ(std::memcmp(&hal_->ctx.qp(qpn)->attr, &before, sizeof before), 0) << k.what;
    EXPECT_TRUE(hal_->changes.empty()) << k.what;
  }
}

TEST_F(FirmwareTest, AttributeValueLimitsAreAccepted) {
  make_objects();
  hal_->port_info.max_mtu = MPR_MTU_4096;
  const uint32_t qpn = qp_in(MPR_QPS_INIT);
  mpr_qp_attr r = rtr_attr();
  r.path_mtu = MPR_MTU_4096;
  r.rq_psn = 0xffffff;
  r.dest_qpn = 0xffffff;
  r.max_dest_rd_atomic = 16;
  r.min_rnr_timer = 31;
  r.sgid_index = 0;
  ASSERT_TRUE(HasStatus(modify(qpn, r), MPR_CMD_OK));
  mpr_qp_attr s = rts_attr();
  s.timeout = 31;
  s.retry_cnt = 7;
  s.rnr_retry = 0;
  s.sq_psn = 0xffffff;
  s.max_rd_atomic = 16;
  ASSERT_TRUE(HasStatus(modify(qpn, s), MPR_CMD_OK));
  const mpr_qpc* q = hal_->ctx.qp(qpn);
  EXPECT_EQ(q->attr.path_mtu, MPR_MTU_4096);
  EXPECT_EQ(q->attr.sq_psn, 0xffffffu);
  EXPECT_EQ(q->attr.timeout, 31);
  EXPECT_EQ(q->attr.rnr_retry, 0);
}

TEST_F(FirmwareTest, PathMtuIsCheckedAgainstThePortMtu) {
  make_objects();
  hal_->port_info.max_mtu = MPR_MTU_512;
  const uint32_t qpn = qp_in(MPR_QPS_INIT);
  mpr_qp_attr r = rtr_attr();
  r.path_mtu = MPR_MTU_1024;
  EXPECT_TRUE(HasStatus(modify(qpn, r), MPR_CMD_BAD_PARAM, MPR_QP_ATTR_PATH_MTU));
  r.path_mtu = MPR_MTU_512;
  EXPECT_TRUE(HasStatus(modify(qpn, r), MPR_CMD_OK));
}

TEST_F(FirmwareTest, AnyStateToErrAndErrToReset) {
  make_objects();
  for (uint8_t from : {MPR_QPS_RESET, MPR_QPS_INIT, MPR_QPS_RTR, MPR_QPS_RTS}) {
    const uint32_t qpn = qp_in(from);
    hal_->changes.clear();
    ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_OK)) << int(from);
    EXPECT_EQ(state_of(qpn), MPR_QPS_ERR);
    EXPECT_EQ(hal_->ctx.qp(qpn)->attr.qp_state, MPR_QPS_ERR);
    // ERR -> ERR is allowed but is no transition.
    ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_OK));
    ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_RESET)), MPR_CMD_OK));
    EXPECT_EQ(state_of(qpn), MPR_QPS_RESET);
    const std::vector<StateChange> want = {{qpn, from, MPR_QPS_ERR},
                                           {qpn, MPR_QPS_ERR, MPR_QPS_RESET}};
    EXPECT_EQ(hal_->changes, want) << "from " << int(from);
  }
}

TEST_F(FirmwareTest, AnyStateToReset) {
  make_objects();
  for (uint8_t from : {MPR_QPS_INIT, MPR_QPS_RTR, MPR_QPS_RTS}) {
    const uint32_t qpn = qp_in(from);
    hal_->changes.clear();
    ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_RESET)), MPR_CMD_OK)) << int(from);
    EXPECT_EQ(state_of(qpn), MPR_QPS_RESET);
    EXPECT_EQ(hal_->changes, (std::vector<StateChange>{{qpn, from, MPR_QPS_RESET}}));
  }
}

TEST_F(FirmwareTest, ResetClearsTheAttributes) {
  make_objects();
  const uint32_t qpn = qp_in(MPR_QPS_RTS);
  mpr_qpc* q = hal_->ctx.qp(qpn);
  q->sq_pi = 17;  // the data path's doorbell record
  q->rq_pi = 5;
  ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_RESET)), MPR_CMD_OK));
  const mpr_qp_attr zero{};
  EXPECT_EQ(std::memcmp(&q->attr, &zero, sizeof zero), 0);
  EXPECT_EQ(q->sq_pi, 0u);
  EXPECT_EQ(q->rq_pi, 0u);
  // Creation parameters survive.
  EXPECT_EQ(q->sq_base, 0x300000u);
  EXPECT_EQ(q->pdn, pdn_);
  EXPECT_EQ(q->sq_log_size, 8);
  EXPECT_EQ(q->valid, 1);

  // QUERY_QP shows the cleared attributes.
  mpr_cmd c = qpn_cmd(MPR_CMD_QUERY_QP, qpn);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_qp_attr);
  hal_->fill(kOutMailbox, kSentinel, sizeof(mpr_qp_attr));
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &zero, sizeof zero), 0);

  // The QP can be brought up again, and a missing attribute is not
  // satisfied by a value from before the reset.
  ASSERT_TRUE(HasStatus(modify(qpn, init_attr()), MPR_CMD_OK));
  mpr_qp_attr r = rtr_attr();
  r.attr_mask &= ~MPR_QP_ATTR_DEST_QPN;
  EXPECT_TRUE(HasStatus(modify(qpn, r), MPR_CMD_BAD_ATTR, MPR_QP_ATTR_DEST_QPN));
  ASSERT_TRUE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));
  ASSERT_TRUE(HasStatus(modify(qpn, rts_attr()), MPR_CMD_OK));
}

TEST_F(FirmwareTest, SameStateModifyUpdatesOptionalAttributesWithoutACallback) {
  make_objects();
  const uint32_t qpn = qp_in(MPR_QPS_INIT);
  hal_->changes.clear();
  // INIT -> INIT, without the STATE bit.
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_ACCESS_FLAGS;
  a.access_flags = MPR_ACCESS_REMOTE_ATOMIC;
  ASSERT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.access_flags, MPR_ACCESS_REMOTE_ATOMIC);
  // ...and with it.
  a = init_attr();
  a.access_flags = MPR_ACCESS_REMOTE_READ;
  ASSERT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.access_flags, MPR_ACCESS_REMOTE_READ);
  EXPECT_EQ(state_of(qpn), MPR_QPS_INIT);

  ASSERT_TRUE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));
  ASSERT_TRUE(HasStatus(modify(qpn, rts_attr()), MPR_CMD_OK));
  hal_->changes.clear();
  // RTS -> RTS with its optional attributes.
  mpr_qp_attr b{};
  b.attr_mask = MPR_QP_ATTR_STATE | MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_MIN_RNR_TIMER |
                MPR_QP_ATTR_ACCESS_FLAGS;
  b.qp_state = MPR_QPS_RTS;
  b.cur_state = MPR_QPS_RTS;
  b.min_rnr_timer = 1;
  b.access_flags = MPR_ACCESS_REMOTE_WRITE;
  ASSERT_TRUE(HasStatus(modify(qpn, b), MPR_CMD_OK));
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.min_rnr_timer, 1);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.access_flags, MPR_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.sq_psn, 0x111111u) << "untouched";
  EXPECT_TRUE(hal_->changes.empty());
  // But RTS -> RTS may not change the PSNs.
  mpr_qp_attr c{};
  c.attr_mask = MPR_QP_ATTR_SQ_PSN;
  c.sq_psn = 5;
  EXPECT_TRUE(HasStatus(modify(qpn, c), MPR_CMD_BAD_ATTR, MPR_QP_ATTR_SQ_PSN));
  EXPECT_EQ(hal_->ctx.qp(qpn)->attr.sq_psn, 0x111111u);
}

TEST_F(FirmwareTest, StateChangeCallbackOncePerRealTransition) {
  make_objects();
  const uint32_t qpn = create_qp();
  ASSERT_TRUE(HasStatus(modify(qpn, init_attr()), MPR_CMD_OK));
  mpr_qp_attr a{};
  a.attr_mask = MPR_QP_ATTR_PORT;
  a.port_num = 1;
  ASSERT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_OK));  // INIT -> INIT: no transition
  ASSERT_TRUE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));
  EXPECT_FALSE(HasStatus(modify(qpn, rtr_attr()), MPR_CMD_OK));  // failed: no callback
  ASSERT_TRUE(HasStatus(modify(qpn, rts_attr()), MPR_CMD_OK));
  a = {};
  a.attr_mask = MPR_QP_ATTR_MIN_RNR_TIMER;
  ASSERT_TRUE(HasStatus(modify(qpn, a), MPR_CMD_OK));  // RTS -> RTS: no transition
  ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_OK));
  ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_ERR)), MPR_CMD_OK));
  ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_RESET)), MPR_CMD_OK));
  const std::vector<StateChange> want = {
      {qpn, MPR_QPS_RESET, MPR_QPS_INIT}, {qpn, MPR_QPS_INIT, MPR_QPS_RTR},
      {qpn, MPR_QPS_RTR, MPR_QPS_RTS},    {qpn, MPR_QPS_RTS, MPR_QPS_ERR},
      {qpn, MPR_QPS_ERR, MPR_QPS_RESET},
  };
  EXPECT_EQ(hal_->changes, want);
  // RESET -> RESET is reported too (by design: the data path drops any
  // state it still holds for the QP; doing so twice is harmless).
  hal_->changes.clear();
  ASSERT_TRUE(HasStatus(modify(qpn, state_attr(MPR_QPS_RESET)), MPR_CMD_OK));
  EXPECT_EQ(hal_->changes, (std::vector<StateChange>{{qpn, MPR_QPS_RESET, MPR_QPS_RESET}}));
}

// ---------------------------------------------------------------------------
// The transition table itself
// ---------------------------------------------------------------------------

TEST(QpTransitionRule, SpotChecks) {
  constexpr uint32_t S = MPR_QP_ATTR_STATE;
  QpTransitionRule r = qp_transition_rule(MPR_QPS_RESET, MPR_QPS_INIT);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS);
  EXPECT_EQ(r.optional, 0u);

  r = qp_transition_rule(MPR_QPS_INIT, MPR_QPS_RTR);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                            MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_MAX_DEST_RD_ATOMIC |
                            MPR_QP_ATTR_MIN_RNR_TIMER);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_PKEY_INDEX);

  r = qp_transition_rule(MPR_QPS_RTR, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_SQ_PSN | MPR_QP_ATTR_TIMEOUT | MPR_QP_ATTR_RETRY_CNT |
                            MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_MAX_QP_RD_ATOMIC);
  EXPECT_TRUE(r.optional & MPR_QP_ATTR_CUR_STATE);
  EXPECT_TRUE(r.optional & MPR_QP_ATTR_MIN_RNR_TIMER);
  EXPECT_FALSE(r.optional & MPR_QP_ATTR_AV);

  r = qp_transition_rule(MPR_QPS_RTS, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, 0u);
  EXPECT_EQ(r.optional,
            MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_MIN_RNR_TIMER);

  r = qp_transition_rule(MPR_QPS_INIT, MPR_QPS_INIT);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, 0u);

  for (uint8_t from = MPR_QPS_RESET; from <= MPR_QPS_ERR; ++from) {
    for (uint8_t to : {MPR_QPS_RESET, MPR_QPS_ERR}) {
      r = qp_transition_rule(from, to);
      EXPECT_TRUE(r.allowed) << int(from) << "->" << int(to);
      EXPECT_EQ(r.required, S);
      EXPECT_EQ(r.optional, 0u);
    }
    EXPECT_FALSE(qp_transition_rule(from, MPR_QPS_SQD).allowed) << int(from);
    EXPECT_FALSE(qp_transition_rule(from, MPR_QPS_SQE).allowed) << int(from);
  }

  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RESET, MPR_QPS_RTR).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RESET, MPR_QPS_RTS).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_INIT, MPR_QPS_RTS).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RTR, MPR_QPS_RTR).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RTR, MPR_QPS_INIT).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RTS, MPR_QPS_RTR).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_ERR, MPR_QPS_INIT).allowed);
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_ERR, MPR_QPS_RTS).allowed);
  EXPECT_FALSE(qp_transition_rule(7, MPR_QPS_RESET).allowed) << "no state 7";
  EXPECT_FALSE(qp_transition_rule(MPR_QPS_RESET, 7).allowed);
}

// ---------------------------------------------------------------------------
// MAP_ICM: the host pages holding the NIC's context tables
// ---------------------------------------------------------------------------

class IcmTest : public FirmwareTest {
 protected:
  // Starts with nothing mapped, as after a device reset.
  void SetUp() override {
    FirmwareTest::SetUp();
    hal_->ctx.icm().clear();
  }
  void map_all() {
    std::vector<uint64_t> pages;
    for (uint32_t p = 0; p < hal_->ctx.icm().pages(); ++p) pages.push_back(0x7000000 + p * 4096);
    ASSERT_TRUE(HasStatus(exec(map_icm_cmd(0, pages)), MPR_CMD_OK));
  }
};

TEST_F(IcmTest, MapIcmMapsEachPageAtItsIndex) {
  const Icm& icm = hal_->ctx.icm();
  ASSERT_EQ(icm.pages(), 14u);
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(4, {0x5000, 0x9000})), MPR_CMD_OK));
  EXPECT_EQ(icm.mapped_pages(), 2u);
  // Page 4 is the CQC table (after 4 pages of QPCs): CQ 0 at its start, CQ 1
  // 64 B further.
  EXPECT_EQ(icm.table_offset(IcmTable::cqc), 4u * 4096);
  EXPECT_EQ(icm.pa(IcmTable::cqc, 0), std::optional<uint64_t>(0x5000));
  EXPECT_EQ(icm.pa(IcmTable::cqc, 1), std::optional<uint64_t>(0x5040));
  EXPECT_EQ(icm.pa(IcmTable::mpt, 0), std::optional<uint64_t>(0x9000));
  EXPECT_FALSE(icm.pa(IcmTable::qpc, 0).has_value());
  // Mapping again replaces the address.
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(4, {0xa000})), MPR_CMD_OK));
  EXPECT_EQ(icm.pa(IcmTable::cqc, 0), std::optional<uint64_t>(0xa000));
  EXPECT_EQ(icm.mapped_pages(), 2u);
}

TEST_F(IcmTest, MapIcmErrorsChangeNothing) {
  const Icm& icm = hal_->ctx.icm();
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(0, {})), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  std::vector<uint64_t> too_many(MPR_ICM_MAP_MAX + 1, 0x1000);
  mpr_cmd c = map_icm_cmd(0, {0x1000});
  c.u.map_icm.num_chunks = MPR_ICM_MAP_MAX + 1;
  c.hdr.in_len = (MPR_ICM_MAP_MAX + 1) * 8;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  // Beyond the ICM: pages 13 and 14 of 14.
  EXPECT_TRUE(
      HasStatus(exec(map_icm_cmd(13, {0x1000, 0x2000})), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX));
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(14, {0x1000})), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX));
  // in_len disagreeing with num_pages.
  c = map_icm_cmd(0, {0x1000, 0x2000});
  c.hdr.in_len = 8;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
  // One unaligned (or zero) address refuses the whole list.
  EXPECT_TRUE(
      HasStatus(exec(map_icm_cmd(0, {0x1000, 0x2008})), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS));
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(0, {0x1000, 0})), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS));
  // Chunk sizes: 4 KiB .. 4 MiB; first_page a multiple of the chunk's pages;
  // a chunk address aligned to the chunk size; reserved word zero.
  EXPECT_TRUE(
      HasStatus(exec(map_icm_cmd(0, {0x1000}, 11)), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT));
  EXPECT_TRUE(
      HasStatus(exec(map_icm_cmd(0, {0x400000}, 23)), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_PAGE_SHIFT));
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(2, {0x4000}, 14)), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_INDEX));
  EXPECT_TRUE(
      HasStatus(exec(map_icm_cmd(0, {0x2000}, 14)), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS));
  c = map_icm_cmd(0, {0x1000});
  c.u.map_icm.rsvd = 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_RESERVED));
  // The list is not in host memory.
  c = map_icm_cmd(0, {0x1000});
  c.hdr.in_mailbox = kOutside;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_DMA_ERROR, MPR_CMD_SYN_ADDRESS));
  EXPECT_EQ(icm.mapped_pages(), 0u);
}

TEST_F(IcmTest, ChunksMapConsecutivePagesAndMayReachPastTheEnd) {
  const Icm& icm = hal_->ctx.icm();
  // 16 KiB chunks (4 pages) at page 8: pages 8..11, then pages 12..13 and
  // two pages past the end of the 14-page ICM.
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(8, {0x100000, 0x200000}, 14)), MPR_CMD_OK));
  EXPECT_EQ(icm.mapped_pages(), 6u);
  // The MTT table starts at page 6 (after 4 QPC, 1 CQC and 1 MPT pages): page
  // 8 holds MTT entries 1024..1535.
  EXPECT_EQ(icm.table_offset(IcmTable::mtt), 6u * 4096);
  EXPECT_FALSE(icm.pa(IcmTable::mtt, 1023).has_value());
  EXPECT_EQ(icm.pa(IcmTable::mtt, 1024), std::optional<uint64_t>(0x100000));
  EXPECT_EQ(icm.pa(IcmTable::mtt, 4095), std::optional<uint64_t>(0x200000 + 2 * 4096 - 8));
  // A chunk starting beyond the ICM is an error.
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(8, {0x100000, 0x200000, 0x300000}, 14)), MPR_CMD_BAD_PARAM,
                        MPR_CMD_SYN_INDEX));
}

TEST_F(IcmTest, ObjectsNeedTheirIcmEntriesMapped) {
  const uint32_t pdn = alloc_pd();   // PDs live on chip: no ICM needed
  const uint32_t eqn = create_eq();  // so do EQs
  EXPECT_TRUE(HasStatus(exec(create_cq_cmd(eqn)), MPR_CMD_NO_ICM));
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0x10000, 4096, {0x20000})), MPR_CMD_NO_ICM));
  // Nothing was left allocated by the refusals.
  EXPECT_EQ(hal_->ctx.pd_refs(pdn), 0u);
  // Only the CQC page: the CQ is created, the MR (MPT + MTT) still refused.
  EXPECT_TRUE(HasStatus(exec(map_icm_cmd(4, {0x3000})), MPR_CMD_OK));
  const mpr_cmd_comp cq = exec(create_cq_cmd(eqn));
  ASSERT_TRUE(HasStatus(cq, MPR_CMD_OK));
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0x10000, 4096, {0x20000})), MPR_CMD_NO_ICM));
  // A QP needs its QPC page (QPN 2 is entry 0, page 0).
  EXPECT_TRUE(HasStatus(exec(create_qp_cmd(pdn, cq.out[0], cq.out[0])), MPR_CMD_NO_ICM));
  EXPECT_EQ(hal_->ctx.qp_count(), 0u);
  map_all();
  EXPECT_TRUE(HasStatus(exec(reg_mr_cmd(pdn, 0x10000, 4096, {0x20000})), MPR_CMD_OK));
  const mpr_cmd_comp qp = exec(create_qp_cmd(pdn, cq.out[0], cq.out[0]));
  ASSERT_TRUE(HasStatus(qp, MPR_CMD_OK));
  EXPECT_EQ(qp.out[0], kFirstQpn);
}

TEST_F(IcmTest, DeviceResetForgetsTheMap) {
  map_all();
  EXPECT_EQ(hal_->ctx.icm().mapped_pages(), 14u);
  hal_->ctx.clear();
  EXPECT_EQ(hal_->ctx.icm().mapped_pages(), 0u);
}

TEST_F(IcmTest, OpcodeAndStatusNamesIncludeIcm) {
  EXPECT_STREQ(Firmware::opcode_name(MPR_CMD_MAP_ICM), "MAP_ICM");
  EXPECT_STREQ(Firmware::status_name(MPR_CMD_NO_ICM), "NO_ICM");
}

// ---------------------------------------------------------------------------
// CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ; CREATE_QP with an SRQ

class FirmwareSrq : public FirmwareTest {
 protected:
  mpr_cmd create_srq_cmd(uint32_t pdn) {
    mpr_cmd c = cmd(MPR_CMD_CREATE_SRQ);
    mpr_cmd_create_srq& s = c.u.create_srq;
    s.base = 0x320000;
    s.pdn = pdn;
    s.uar_index = 7;
    s.log_size = 6;
    s.log_stride = 6;
    return c;
  }
  uint32_t create_srq() {
    const mpr_cmd_comp r = exec(create_srq_cmd(pdn_));
    EXPECT_TRUE(HasStatus(r, MPR_CMD_OK));
    return r.out[0];
  }
  mpr_cmd srq_qp_cmd(uint32_t srqn) {
    mpr_cmd c = create_qp_cmd(pdn_, cqn_, cqn_);
    c.u.create_qp.flags = MPR_CREATE_QP_F_SRQ;
    c.u.create_qp.srqn = srqn;
    c.u.create_qp.rq_base = 0;
    c.u.create_qp.rq_log_size = 0;
    c.u.create_qp.rq_log_stride = 0;
    return c;
  }
  mpr_cmd modify_srq_cmd(uint32_t srqn, uint32_t mask, uint32_t limit) {
    mpr_cmd c = cmd(MPR_CMD_MODIFY_SRQ);
    c.u.modify_srq.srqn = srqn;
    c.u.modify_srq.attr_mask = mask;
    c.u.modify_srq.limit = limit;
    return c;
  }
};

TEST_F(FirmwareSrq, LifecycleCountsItsQpsAndRefusesToDieWhileUsed) {
  make_objects();
  const uint32_t srqn = create_srq();
  const mpr_srqc* s = hal_->ctx.srq(srqn);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->log_size, 6);
  EXPECT_EQ(s->head, 0) << "the list starts at slot 0";
  const mpr_cmd_comp q = exec(srq_qp_cmd(srqn));
  ASSERT_TRUE(HasStatus(q, MPR_CMD_OK));
  const mpr_qpc* qpc = hal_->ctx.qp(q.out[0]);
  ASSERT_NE(qpc, nullptr);
  EXPECT_EQ(qpc->flags, MPR_CREATE_QP_F_SRQ);
  EXPECT_EQ(qpc->srqn, srqn);

  mpr_cmd_comp info = exec(handle_cmd(MPR_CMD_QUERY_SRQ, srqn));
  ASSERT_TRUE(HasStatus(info, MPR_CMD_OK));
  EXPECT_EQ(info.out[0], 0u) << "no limit armed";
  EXPECT_EQ(info.out[1], 0u) << "nothing posted";
  EXPECT_EQ(info.out[2], 1u) << "one QP attached";
  EXPECT_EQ(info.out[3], 64u);

  // In use: neither the SRQ nor its PD may go.
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_SRQ, srqn)), MPR_CMD_BUSY));
  EXPECT_TRUE(hal_->srqs_destroyed.empty());
  ASSERT_TRUE(HasStatus(exec(qpn_cmd(MPR_CMD_DESTROY_QP, q.out[0])), MPR_CMD_OK));
  mpr_cmd dealloc = cmd(MPR_CMD_DEALLOC_PD);
  dealloc.u.pd.pdn = pdn_;
  EXPECT_TRUE(HasStatus(exec(dealloc), MPR_CMD_BUSY)) << "the SRQ still holds the PD";
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_SRQ, srqn)), MPR_CMD_OK));
  EXPECT_EQ(hal_->srqs_destroyed, std::vector<uint32_t>{srqn});
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_QUERY_SRQ, srqn)), MPR_CMD_BAD_HANDLE));
  EXPECT_TRUE(HasStatus(exec(handle_cmd(MPR_CMD_DESTROY_SRQ, srqn)), MPR_CMD_BAD_HANDLE));
}

TEST_F(FirmwareSrq, CreateParameterErrors) {
  make_objects();
  struct Case {
    const char* what;
    void (*mutate)(mpr_cmd_create_srq&);
    uint8_t status;
    uint32_t syndrome;
  };
  const Case cases[] = {
      {"log_size 0", [](mpr_cmd_create_srq& s) { s.log_size = 0; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LOG_SIZE},
      {"log_size 17 (slots are 16-bit)", [](mpr_cmd_create_srq& s) { s.log_size = 17; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LOG_SIZE},
      {"stride 16 (no room beside the next segment)",
       [](mpr_cmd_create_srq& s) { s.log_stride = 4; }, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_STRIDE},
      {"stride 2048", [](mpr_cmd_create_srq& s) { s.log_stride = 11; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_STRIDE},
      {"base 0", [](mpr_cmd_create_srq& s) { s.base = 0; }, MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS},
      {"base unaligned", [](mpr_cmd_create_srq& s) { s.base += 8; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_ADDRESS},
      {"base in the MSI window", [](mpr_cmd_create_srq& s) { s.base = 0xFEE00000; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_ADDRESS},
      {"UAR page beyond the BAR", [](mpr_cmd_create_srq& s) { s.uar_index = 5000; },
       MPR_CMD_BAD_PARAM, MPR_CMD_SYN_UAR},
      {"limit beyond the ring", [](mpr_cmd_create_srq& s) { s.limit = 65; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_LIMIT},
      {"reserved", [](mpr_cmd_create_srq& s) { s.rsvd0 = 1; }, MPR_CMD_BAD_PARAM,
       MPR_CMD_SYN_RESERVED},
      {"no such PD", [](mpr_cmd_create_srq& s) { s.pdn = 60; }, MPR_CMD_BAD_HANDLE,
       MPR_CMD_SYN_NONE},
  };
  for (const Case& k : cases) {
    mpr_cmd c = create_srq_cmd(pdn_);
    k.mutate(c.u.create_srq);
    EXPECT_TRUE(HasStatus(exec(c), k.status, k.syndrome)) << k.what;
  }
  // Nothing was created: all max_srq (4) still fit.
  for (int i = 0; i < 4; ++i) create_srq();
  EXPECT_TRUE(HasStatus(exec(create_srq_cmd(pdn_)), MPR_CMD_NO_RESOURCES));
}

TEST_F(FirmwareSrq, ModifyArmsTheLimitAndRefusesAResize) {
  make_objects();
  const uint32_t srqn = create_srq();
  EXPECT_TRUE(HasStatus(exec(modify_srq_cmd(srqn, MPR_SRQ_ATTR_MAX_WR, 0)), MPR_CMD_BAD_ATTR,
                        MPR_SRQ_ATTR_MAX_WR));
  EXPECT_TRUE(HasStatus(exec(modify_srq_cmd(srqn, MPR_SRQ_ATTR_LIMIT, 65)), MPR_CMD_BAD_PARAM,
                        MPR_CMD_SYN_LIMIT));
  EXPECT_TRUE(HasStatus(exec(modify_srq_cmd(srqn + 1, MPR_SRQ_ATTR_LIMIT, 8)), MPR_CMD_BAD_HANDLE));
  ASSERT_TRUE(HasStatus(exec(modify_srq_cmd(srqn, MPR_SRQ_ATTR_LIMIT, 8)), MPR_CMD_OK));
  EXPECT_EQ(exec(handle_cmd(MPR_CMD_QUERY_SRQ, srqn)).out[0], 8u);
  ASSERT_TRUE(HasStatus(exec(modify_srq_cmd(srqn, 0, 3)), MPR_CMD_OK)) << "nothing to change";
  EXPECT_EQ(exec(handle_cmd(MPR_CMD_QUERY_SRQ, srqn)).out[0], 8u);
}

TEST_F(FirmwareSrq, QpNamesAnSrqOfItsOwnPd) {
  make_objects();
  const uint32_t srqn = create_srq();
  EXPECT_TRUE(HasStatus(exec(srq_qp_cmd(srqn + 1)), MPR_CMD_BAD_HANDLE)) << "no such SRQ";
  const uint32_t other_pd = alloc_pd();
  const mpr_cmd_comp r = exec(create_srq_cmd(other_pd));
  ASSERT_TRUE(HasStatus(r, MPR_CMD_OK));
  EXPECT_TRUE(HasStatus(exec(srq_qp_cmd(r.out[0])), MPR_CMD_BAD_HANDLE)) << "another PD's SRQ";
  mpr_cmd ring = srq_qp_cmd(srqn);
  ring.u.create_qp.rq_log_size = 7;
  EXPECT_TRUE(HasStatus(exec(ring), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_SRQ))
      << "an SRQ and a receive ring of its own";
  EXPECT_EQ(exec(handle_cmd(MPR_CMD_QUERY_SRQ, srqn)).out[2], 0u) << "no QP was attached";
}

TEST_F(FirmwareSrq, DeviceAttributesAndCapsOfferSrqs) {
  mpr_cmd c = cmd(MPR_CMD_QUERY_DEVICE);
  c.hdr.out_mailbox = kOutMailbox;
  c.hdr.out_len = sizeof(mpr_device_attr);
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  mpr_device_attr a;
  std::memcpy(&a, hal_->at(kOutMailbox), sizeof a);
  EXPECT_EQ(a.max_srq, 4u);
  EXPECT_GT(a.max_srq_wr, 1u);
  EXPECT_EQ(a.max_srq_sge, a.max_sge);
  EXPECT_TRUE(a.cap_flags & MPRDMA_BAR0__CAPS__SRQ_bm);
  // A caller of interface 1.0 asks for its 80 bytes and gets only those.
  hal_->fill(kOutMailbox, kSentinel, sizeof(mpr_device_attr));
  c.hdr.out_len = MPR_DEVICE_ATTR_V1_SIZE;
  ASSERT_TRUE(HasStatus(exec(c), MPR_CMD_OK));
  EXPECT_EQ(std::memcmp(hal_->at(kOutMailbox), &a, MPR_DEVICE_ATTR_V1_SIZE), 0);
  EXPECT_EQ(hal_->at(kOutMailbox)[MPR_DEVICE_ATTR_V1_SIZE], kSentinel) << "nothing beyond";
  c.hdr.out_len = MPR_DEVICE_ATTR_V1_SIZE - 1;
  EXPECT_TRUE(HasStatus(exec(c), MPR_CMD_BAD_PARAM, MPR_CMD_SYN_LENGTH));
}

}  // namespace
}  // namespace mprdma::nic
