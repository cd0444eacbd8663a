// Test bench for the modeled hosts: two ModeledHosts ("h0", "h1") whose NICs
// are cabled back to back by one EthLink (optionally lossy), a way to run a
// test body in an SC_THREAD with a simulated-time limit (the test fails
// instead of hanging), and helpers that build connected RC QP pairs with
// registered buffers and check completions and memory.
//
// Everything here that issues verbs must run inside TwoHosts::run().
#pragma once

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <gtest/gtest.h>
#include <mprdma/dp.h>
#include <mprdma/hw.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <systemc>
#include <vector>

#include "support/sim_test.h"
#include "tests/vp/host/relay.h"
#include "vp/core/sim_env.h"
#include "vp/fabric/eth_link.h"
#include "vp/host/host_config.h"
#include "vp/host/modeled_host.h"
#include "vp/host/verbs.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/transport/gbn/gbn_config.h"
#include "vp/pcie/pcie_config.h"

namespace mprdma::test {

constexpr uint32_t kAllAccess = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_WRITE |
                                MPR_ACCESS_REMOTE_READ | MPR_ACCESS_REMOTE_ATOMIC;

inline sc_core::sc_time Us(double v) { return sc_core::sc_time(v, sc_core::SC_US); }
inline sc_core::sc_time Ms(double v) { return sc_core::sc_time(v, sc_core::SC_MS); }

// Bytes from a fixed seed: the same seed gives the same bytes everywhere
// (mt19937_64's output sequence is specified by the standard).
inline std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = gen();
    for (size_t k = 0; k < 8 && i + k < n; ++k) out[i + k] = static_cast<uint8_t>(v >> (8 * k));
  }
  return out;
}

// Compares two byte ranges; on a mismatch names the first differing offset
// and how many bytes differ.
inline ::testing::AssertionResult SameBytes(const std::vector<uint8_t>& got,
                                            const std::vector<uint8_t>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  size_t first = got.size(), diff = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      if (first == got.size()) first = i;
      ++diff;
    }
  if (!diff) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << diff << " of " << got.size() << " bytes differ, first at offset " << first << " (got 0x"
         << std::hex << int(got[first]) << ", want 0x" << int(want[first]) << ")";
}

// One side of a connection: a process (verbs context, own address space)
// with a PD, a registered buffer, a send and a receive CQ and an RC QP.
struct Endpoint {
  host::ModeledHost* host = nullptr;
  host::VerbsContext* ctx = nullptr;
  uint32_t pd = 0;
  uint64_t buf = 0;  // virtual address of the registered buffer
  uint64_t len = 0;
  host::MemoryRegion mr;
  host::CompletionQueue* scq = nullptr;
  host::CompletionQueue* rcq = nullptr;
  host::QueuePair* qp = nullptr;
  uint32_t psn = 0;  // initial send PSN

  host::AddressSpace& as() const { return ctx->address_space(); }
  uint32_t qpn() const { return qp->qpn; }
  mpr_sge sge(uint64_t off, uint32_t n) const { return mpr_sge{buf + off, n, mr.key}; }
  uint64_t va(uint64_t off) const { return buf + off; }
  void put(uint64_t off, const std::vector<uint8_t>& data) const {
    as().write(buf + off, data.data(), data.size());
  }
  std::vector<uint8_t> get(uint64_t off, uint64_t n) const {
    std::vector<uint8_t> out(n);
    as().read(buf + off, out.data(), n);
    return out;
  }
  // Fills the whole buffer with a pattern and returns it (the "before" image).
  std::vector<uint8_t> prefill(uint64_t seed) const {
    std::vector<uint8_t> p = Pattern(len, seed);
    put(0, p);
    return p;
  }
  mpr_qp_attr query() const {
    mpr_qp_attr a{};
    const host::CommandResult r = ctx->query_qp(qp, a);
    EXPECT_TRUE(r.ok()) << "QUERY_QP status " << int(r.status);
    return a;
  }
};

struct PairOptions {
  host::QpCaps caps;
  uint32_t send_cq_entries = 256;
  uint32_t recv_cq_entries = 256;
  bool send_cq_record = true;  // the send CQ has a consumer-index record
  uint64_t buf_bytes = 256 << 10;
  uint32_t access = kAllAccess;  // MR access and the QPs' remote access
  uint8_t path_mtu = MPR_MTU_1024;
  uint32_t psn0 = 0x1000;  // initial send PSN of the side on h0
  uint32_t psn1 = 0x2000;  // initial send PSN of the side on h1
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t max_rd_atomic = 16;
  bool connect = true;
};

struct QpPair {
  Endpoint a;  // on h0
  Endpoint b;  // on h1
};

// What a completion must look like, field by field.
struct WcExpect {
  uint64_t wr_id = 0;
  uint32_t status = MPR_CQE_SUCCESS;
  uint32_t opcode = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;
  uint32_t qpn = 0;
  uint32_t flags = 0;
  uint32_t syndrome = MPR_SYN_NONE;
  uint32_t wqe_index = 0;
  int is_recv = 0;
};

inline void ExpectWc(const mpr_wc& wc, const WcExpect& e, const std::string& what = "") {
  SCOPED_TRACE("completion " + what);
  EXPECT_EQ(wc.wr_id, e.wr_id);
  EXPECT_EQ(wc.status, e.status);
  EXPECT_EQ(wc.opcode, e.opcode);
  EXPECT_EQ(wc.byte_len, e.byte_len);
  EXPECT_EQ(wc.imm_data, e.imm_data);
  EXPECT_EQ(wc.qpn, e.qpn);
  EXPECT_EQ(wc.flags, e.flags);
  EXPECT_EQ(wc.syndrome, e.syndrome);
  EXPECT_EQ(wc.wqe_index, e.wqe_index);
  EXPECT_EQ(wc.is_recv, e.is_recv);
}

// Fields of the 32-byte CQE that mpr_wc does not carry: reserved for RC.
inline void ExpectRawCqeClean(const mpr_cqe& c) {
  EXPECT_EQ(c.src_qp, 0u);
  EXPECT_EQ(c.qpn >> 24, 0u) << "qpn bits 31:24 are reserved";
  EXPECT_EQ(c.rsvd0, 0u);
  EXPECT_EQ(c.rsvd1, 0u);
  EXPECT_EQ(c.rsvd2[0] | c.rsvd2[1] | c.rsvd2[2], 0);
  EXPECT_EQ(c.owner & ~1u, 0u);
}

// A test parameter naming a transport, and after '_' an implementation of
// it other than the golden model ("mprdma_lockstep"): the transport, and
// the implementation ("model" when none is named).
inline std::string BaseTransport(const std::string& param) {
  return param.substr(0, param.find('_'));
}
inline std::string TransportImpl(const std::string& param) {
  const size_t u = param.find('_');
  return u == std::string::npos ? "model" : param.substr(u + 1);
}

class TwoHosts {
 public:
  struct Options {
    double loss = 0.0;
    uint64_t nic_mtu = 1024;
    core::Duration go_back_delay{};  // nic.gbn.go_back_delay of both NICs
    core::Bandwidth rate{40e9};
    // nic.transport of both NICs, or dcqcn (gbn + DCQCN); "<transport>_<impl>"
    // also sets nic.transport_impl (mprdma_lockstep: the RTL receiver in
    // lockstep with the golden model).
    std::string transport = "gbn";
    // Two links with a Relay between them instead of one cable (relay.h).
    bool relay = false;
    // Applied to both NICs' configurations last (e.g. smaller caches).
    std::function<void(nic::NicConfig&)> nic;
  };

  TwoHosts(core::SimEnv& env, const Options& opt) : env_(env) {
    host_cfg_.memory = core::Bytes{uint64_t{4} << 30};
    link_cfg_.name = "h0-h1";
    link_cfg_.loss = opt.loss;
    link_cfg_.rate = opt.rate;
    for (int i = 0; i < 2; ++i) {
      nic::NicConfig& n = nic_cfg_[i];
      n.name = "h" + std::to_string(i);
      n.mac = {0x02, 0x00, 0x00, 0x00, 0x00, static_cast<uint8_t>(i + 1)};
      n.ip = 0x0A000000u + static_cast<uint32_t>(i + 1);
      n.mtu = core::Bytes{opt.nic_mtu};
      n.port_speed_mbps = static_cast<uint32_t>(opt.rate.bps / 1e6);
      n.engines.get<nic::GbnConfig>().go_back_delay = opt.go_back_delay;
      // "dcqcn" is go-back-N under the NIC's DCQCN rate control.
      const std::string base = BaseTransport(opt.transport);
      n.transport = base == "dcqcn" ? "gbn" : base;
      if (base == "dcqcn") n.congestion_control = "dcqcn";
      n.transport_impl = TransportImpl(opt.transport);
      if (opt.nic) opt.nic(n);
    }
    for (int i = 0; i < 2; ++i)
      hosts_[i] = std::make_unique<host::ModeledHost>(nic_cfg_[i].name.c_str(), host_cfg_,
                                                      nic_cfg_[i], pcie_cfg_, env_);
    link_ = std::make_unique<fabric::EthLink>("link", link_cfg_, env_);
    hosts_[0]->nic().attach(link_.get(), 0);
    if (!opt.relay) {
      hosts_[1]->nic().attach(link_.get(), 1);
      return;
    }
    fabric::LinkConfig second = link_cfg_;
    second.name = "relay-h1";
    link2_ = std::make_unique<fabric::EthLink>("link2", second, env_);
    relay_ = std::make_unique<Relay>("relay", *link_, *link2_);
    hosts_[1]->nic().attach(link2_.get(), 1);
  }

  // Verbs contexts go first: their destructors talk to the hosts.
  ~TwoHosts() { contexts_.clear(); }

  // True once an exception escaped into the kernel (run() failed the test).
  bool escaped() const { return escaped_; }

  host::ModeledHost& h(int i) { return *hosts_[i]; }
  host::ModeledHost& h0() { return *hosts_[0]; }
  host::ModeledHost& h1() { return *hosts_[1]; }
  fabric::EthLink& link() { return *link_; }
  Relay& relay() { return *relay_; }  // with Options::relay only
  core::SimEnv& env() { return env_; }

  // Value of a statistics counter; a missing counter fails the test.
  uint64_t counter(const std::string& path) const {
    const core::Counter* c = env_.stats.find_counter(path);
    EXPECT_NE(c, nullptr) << "no counter " << path;
    return c ? c->value() : 0;
  }

  // Runs `body` in an SC_THREAD once both hosts are up, and simulates until
  // it returns. If it has not returned after `limit` of simulated time (from
  // now), the test fails and the thread is killed. Returns true if the body
  // finished (an exception thrown by it is a failure, reported with its
  // message).
  bool run(const std::function<void()>& body, sc_core::sc_time limit = Ms(500)) {
    bool done = false;
    std::string error;
    sc_core::sc_spawn_options opt;
    opt.set_stack_size(1 << 20);
    sc_core::sc_process_handle h = sc_core::sc_spawn(
        [&] {
          try {
            hosts_[0]->wait_ready();
            hosts_[1]->wait_ready();
            body();
          } catch (const sc_core::sc_unwind_exception&) {
            throw;  // killed: let SystemC unwind the thread
          } catch (const std::exception& e) {
            error = e.what();
          }
          done = true;
        },
        sc_core::sc_gen_unique_name("test_body"), &opt);
    const sc_core::sc_time end = sc_core::sc_time_stamp() + limit;
    const sc_core::sc_time slice = Us(200);
    // Input from a guest, a peer or QEMU never throws out of a block
    // (vp/nic/nic.md): an exception that reaches the kernel fails the test
    // here, with its text, and ends it (the kernel cannot go on after one).
    try {
      while (!done && sc_core::sc_time_stamp() < end &&
             sc_core::sc_get_status() != sc_core::SC_STOPPED)
        sc_core::sc_start(std::min(slice, end - sc_core::sc_time_stamp()));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "an exception escaped a block into the SystemC kernel at "
                    << sc_core::sc_time_stamp() << ": " << e.what();
      escaped_ = true;
      return false;
    }
    if (!error.empty()) ADD_FAILURE() << "test body threw: " << error;
    if (!done) {
      ADD_FAILURE() << "test body did not finish within " << limit << " of simulated time (now "
                    << sc_core::sc_time_stamp() << ")";
      // A process may only be killed from simulation context: do it from a
      // one-shot method, which unwinds the body's stack.
      if (!h.terminated()) {
        sc_core::sc_spawn_options kill_opt;
        kill_opt.spawn_method();
        sc_core::sc_spawn([h]() mutable { h.kill(); }, sc_core::sc_gen_unique_name("reaper"),
                          &kill_opt);
        sc_core::sc_start(sc_core::SC_ZERO_TIME);
      }
    }
    return done && error.empty();
  }

  // A new verbs context (with its own address space) on host i. In a thread.
  host::VerbsContext& new_context(int i) {
    host::AddressSpace& as = hosts_[i]->new_address_space();
    contexts_.push_back(
        std::make_unique<host::VerbsContext>(hosts_[i]->driver(), as, hosts_[i]->config()));
    return *contexts_.back();
  }

  // An endpoint on host i: context, PD, buffer, MR, CQs and a QP in RESET.
  Endpoint make_endpoint(int i, const PairOptions& o) {
    Endpoint e;
    e.host = hosts_[i].get();
    e.ctx = &new_context(i);
    e.pd = e.ctx->alloc_pd();
    e.len = o.buf_bytes;
    e.buf = e.as().alloc(o.buf_bytes);
    e.mr = e.ctx->reg_mr(e.pd, e.buf, o.buf_bytes, o.access);
    e.scq = e.ctx->create_cq(o.send_cq_entries, 0, false, o.send_cq_record);
    e.rcq = e.ctx->create_cq(o.recv_cq_entries);
    e.qp = e.ctx->create_qp(e.pd, e.scq, e.rcq, o.caps);
    e.psn = i == 0 ? o.psn0 : o.psn1;
    return e;
  }

  // RESET -> INIT -> RTR -> RTS on both sides, with the options' PSNs.
  void connect(Endpoint& a, Endpoint& b, const PairOptions& o) {
    const auto ai = a.ctx->local_info(a.qp, a.psn);
    const auto bi = b.ctx->local_info(b.qp, b.psn);
    a.ctx->connect(a.qp, ai, bi, o.path_mtu, o.access, o.timeout, o.retry_cnt, o.rnr_retry,
                   o.max_rd_atomic);
    b.ctx->connect(b.qp, bi, ai, o.path_mtu, o.access, o.timeout, o.retry_cnt, o.rnr_retry,
                   o.max_rd_atomic);
  }

  QpPair make_pair(const PairOptions& o = PairOptions()) {
    QpPair p;
    p.a = make_endpoint(0, o);
    p.b = make_endpoint(1, o);
    if (o.connect) connect(p.a, p.b, o);
    return p;
  }

 private:
  core::SimEnv& env_;
  host::HostConfig host_cfg_;
  nic::NicConfig nic_cfg_[2];
  pcie::PcieConfig pcie_cfg_;
  fabric::LinkConfig link_cfg_;
  std::unique_ptr<host::ModeledHost> hosts_[2];
  std::unique_ptr<fabric::EthLink> link_;
  std::unique_ptr<fabric::EthLink> link2_;
  std::unique_ptr<Relay> relay_;
  std::vector<std::unique_ptr<host::VerbsContext>> contexts_;
  bool escaped_ = false;
};

// Collects exactly `n` completions from `cq`, waiting at most `timeout` of
// simulated time for them; fails the test (and returns fewer) otherwise.
// Every raw CQE is checked for clean reserved fields on the way, unless
// `rc_cqes` is false (UD receive CQEs carry the source QP there).
inline std::vector<mpr_wc> WaitWcs(host::VerbsContext& ctx, host::CompletionQueue* cq, int n,
                                   sc_core::sc_time timeout = Ms(20), bool rc_cqes = true) {
  std::vector<mpr_wc> out;
  const sc_core::sc_time end = sc_core::sc_time_stamp() + timeout;
  while (static_cast<int>(out.size()) < n) {
    const uint32_t mask = (1u << cq->dp.log_size) - 1;
    mpr_cqe raw;
    std::memcpy(&raw, cq->dp.buf + size_t(cq->dp.ci & mask) * sizeof(mpr_cqe), sizeof raw);
    mpr_wc wc{};
    if (ctx.poll_cq(cq, 1, &wc) == 1) {
      if (rc_cqes) ExpectRawCqeClean(raw);
      out.push_back(wc);
      continue;
    }
    if (sc_core::sc_time_stamp() >= end) {
      ADD_FAILURE() << "only " << out.size() << " of " << n << " completions on CQ " << cq->cqn
                    << " within " << timeout;
      break;
    }
    sc_core::wait(end - sc_core::sc_time_stamp(), cq->written);
  }
  return out;
}

inline mpr_wc WaitWc(host::VerbsContext& ctx, host::CompletionQueue* cq,
                     sc_core::sc_time timeout = Ms(20)) {
  std::vector<mpr_wc> v = WaitWcs(ctx, cq, 1, timeout);
  if (v.empty()) {
    mpr_wc none{};
    none.status = 0xffff;  // matches no expectation
    return none;
  }
  return v.front();
}

// True if no completion arrives on `cq` for `quiet` of simulated time.
inline bool StaysEmpty(host::VerbsContext& ctx, host::CompletionQueue* cq,
                       sc_core::sc_time quiet = Us(100)) {
  sc_core::wait(quiet);
  mpr_wc wc{};
  const int got = ctx.poll_cq(cq, 1, &wc);
  EXPECT_EQ(got, 0) << "unexpected completion: wr_id " << wc.wr_id << " status " << wc.status
                    << " opcode " << wc.opcode << " wqe_index " << wc.wqe_index;
  return got == 0;
}

inline mpr_send_wr SendWr(uint64_t wr_id, uint8_t opcode, const mpr_sge* sg, uint32_t nsge,
                          uint8_t flags = MPR_WQE_F_SIGNALED) {
  mpr_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  wr.flags = flags;
  wr.sg_list = sg;
  wr.num_sge = nsge;
  return wr;
}

// A signaled one-SGE WR of `opcode` on `remote`'s buffer at `off` (its MR's
// rkey).
inline mpr_send_wr RemoteWrTo(uint64_t wr_id, uint8_t opcode, const mpr_sge* sg,
                              const Endpoint& remote, uint64_t off) {
  mpr_send_wr wr = SendWr(wr_id, opcode, sg, 1);
  wr.remote_addr = remote.va(off);
  wr.rkey = remote.mr.key;
  return wr;
}

// An MR of `e`'s PD over `pages` 4 KiB frames of its host, with `access`
// (REG_MR straight to the driver, as no verbs call would do it), whose
// frames the host's IOMMU then takes away from the NIC
// (RootComplex::revoke_dma): its key checks pass and every DMA of it fails.
// Its iova and key; the test fails if the NIC refuses it. In a thread.
struct UnbackedMr {
  uint64_t iova = 0;
  uint32_t key = 0;
};
inline UnbackedMr RegisterUnbackedMr(Endpoint& e, uint32_t access, uint32_t pages, uint64_t iova) {
  const std::vector<uint64_t> mtt = e.host->memory().alloc_pages(pages);
  mpr_cmd cmd{};
  cmd.hdr.opcode = MPR_CMD_REG_MR;
  cmd.u.reg_mr.iova = iova;
  cmd.u.reg_mr.length = uint64_t{pages} << 12;
  cmd.u.reg_mr.pdn = e.pd;
  cmd.u.reg_mr.access = access;
  cmd.u.reg_mr.page_shift = 12;
  cmd.u.reg_mr.num_pages = pages;
  const host::CommandResult r = e.host->driver().execute(cmd, mtt.data(), mtt.size() * 8);
  EXPECT_TRUE(r.ok()) << "REG_MR status " << int(r.status);
  for (uint64_t pa : mtt) e.host->root_complex().revoke_dma(pa, 4096);
  return UnbackedMr{iova, static_cast<uint32_t>(r.out0)};
}

inline mpr_recv_wr RecvWr(uint64_t wr_id, const mpr_sge* sg, uint32_t nsge) {
  mpr_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = sg;
  wr.num_sge = nsge;
  return wr;
}

// A WRITE and a SEND over a healthy pair, byte-exact, both successful: the
// check that bad input on other queues left this pair alone. In a thread.
inline void ExpectHealthy(QpPair& p, uint64_t seed) {
  SCOPED_TRACE("healthy pair");
  const std::vector<uint8_t> a0 = p.a.prefill(seed), b0 = p.b.prefill(seed + 1);
  mpr_sge r = p.b.sge(8192, 512);
  ASSERT_EQ(p.b.ctx->post_recv(p.b.qp, RecvWr(1, &r, 1)), 0);
  mpr_sge s = p.a.sge(0, 3000);
  ASSERT_EQ(p.a.ctx->post_send(p.a.qp, RemoteWrTo(1, MPR_WQE_RDMA_WRITE, &s, p.b, 100)), 0);
  mpr_sge s2 = p.a.sge(4000, 300);
  ASSERT_EQ(p.a.ctx->post_send(p.a.qp, SendWr(2, MPR_WQE_SEND, &s2, 1)), 0);
  const auto sc = WaitWcs(*p.a.ctx, p.a.scq, 2);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].status, MPR_CQE_SUCCESS);
  EXPECT_EQ(sc[0].byte_len, 3000u);
  EXPECT_EQ(sc[1].status, MPR_CQE_SUCCESS);
  const mpr_wc rc = WaitWc(*p.b.ctx, p.b.rcq);
  EXPECT_EQ(rc.status, MPR_CQE_SUCCESS);
  EXPECT_EQ(rc.byte_len, 300u);
  std::vector<uint8_t> want = b0;
  std::copy(a0.begin(), a0.begin() + 3000, want.begin() + 100);
  std::copy(a0.begin() + 4000, a0.begin() + 4300, want.begin() + 8192);
  EXPECT_TRUE(SameBytes(p.b.get(0, p.b.len), want));
  EXPECT_EQ(p.a.query().qp_state, MPR_QPS_RTS);
  EXPECT_EQ(p.b.query().qp_state, MPR_QPS_RTS);
}

// Fixture: a fresh kernel and SimEnv per test (SimTest), the bench built by
// Build() and destroyed before the next test's kernel reset.
class TwoHostsTest : public SimTest {
 protected:
  void Build(const TwoHosts::Options& opt = TwoHosts::Options()) {
    bench = std::make_unique<TwoHosts>(*env, opt);
  }
  void TearDown() override {
    bench.reset();
    SimTest::TearDown();
  }
  // Runs a test body in simulation (see TwoHosts::run).
  void Run(const std::function<void()>& body, sc_core::sc_time limit = Ms(500)) {
    if (!bench) Build();
    EXPECT_TRUE(bench->run(body, limit));
  }
  std::unique_ptr<TwoHosts> bench;
};

// A bench per transport engine, the test's parameter ("gbn", "dcqcn",
// "mprdma", "irn"); a derived fixture sets `relay_` in its constructor for a
// Relay between the hosts. TransportName names the instances after it.
class PerTransportTest : public TwoHostsTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    TwoHostsTest::SetUp();
    TwoHosts::Options o;
    o.transport = GetParam();
    o.relay = relay_;
    Build(o);
  }
  bool relay_ = false;
};

inline std::string TransportName(const ::testing::TestParamInfo<std::string>& i) { return i.param; }

}  // namespace mprdma::test
