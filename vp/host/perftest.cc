// PerfTest: set-up, the run over the job's sizes, completion waits, and the
// bandwidth and atomic tests. Latency, flow and RPC tests are in
// perftest_latency.cc, perftest_flows.cc and perftest_rpc.cc; the job's keys
// in job_config.cc.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "vp/host/perftest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "vp/host/perftest_internal.h"
#include "vp/host/verbs.h"

namespace mprdma::host {
namespace perftest_detail {

const char* status_name(uint32_t s) {
  switch (s) {
    case MPR_CQE_SUCCESS:
      return "success";
    case MPR_CQE_LOC_LEN_ERR:
      return "local length error";
    case MPR_CQE_LOC_QP_OP_ERR:
      return "local QP operation error";
    case MPR_CQE_LOC_PROT_ERR:
      return "local protection error";
    case MPR_CQE_WR_FLUSH_ERR:
      return "work request flushed";
    case MPR_CQE_BAD_RESP_ERR:
      return "bad response";
    case MPR_CQE_REM_INV_REQ_ERR:
      return "remote invalid request";
    case MPR_CQE_REM_ACCESS_ERR:
      return "remote access error";
    case MPR_CQE_REM_OP_ERR:
      return "remote operational error";
    case MPR_CQE_RETRY_EXC_ERR:
      return "transport retry counter exceeded";
    case MPR_CQE_RNR_RETRY_EXC_ERR:
      return "RNR retry counter exceeded";
    default:
      return "error";
  }
}

std::string completion_error(const mpr_wc& wc) {
  return std::string("completion with status ") + status_name(wc.status) + " (syndrome " +
         std::to_string(wc.syndrome) + ")";
}

uint8_t mtu_code(uint64_t mtu) {
  switch (mtu) {
    case 256:
      return MPR_MTU_256;
    case 512:
      return MPR_MTU_512;
    case 1024:
      return MPR_MTU_1024;
    case 2048:
      return MPR_MTU_2048;
    default:
      return MPR_MTU_4096;
  }
}

double seconds_since(const sc_core::sc_time& t0) {
  return (sc_core::sc_time_stamp() - t0).to_seconds();
}

}  // namespace perftest_detail

using perftest_detail::completion_error;
using perftest_detail::mtu_code;
using perftest_detail::seconds_since;
using perftest_detail::status_name;

PerfTest::PerfTest(const JobConfig& cfg, ModeledHost& client, ModeledHost& server,
                   core::SimEnv& env, int copy)
    : cfg_(cfg),
      client_host_(client),
      server_host_(server),
      env_(env),
      stream_prefix_("job." + cfg.name + "." + (copy ? "qp" + std::to_string(copy) + "." : "")),
      rng_(env.random.stream(stream_prefix_ + "data")) {}

core::RandomStream& PerfTest::stream(const std::string& what) {
  return env_.random.stream(stream_prefix_ + what);
}

PerfTest::~PerfTest() = default;

bool PerfTest::failed() const {
  for (const SizeResult& r : results_)
    if (!r.error.empty() || !r.data_ok) return true;
  return results_.size() != cfg_.sizes.size();
}

uint64_t PerfTest::buffer_bytes(const JobConfig& cfg) {
  uint64_t m = 8;
  for (const core::Bytes& s : cfg.sizes) m = std::max(m, s.n);
  if (cfg.app == JobConfig::App::atomic_bw)
    m = std::max(m, static_cast<uint64_t>(cfg.counters - 1) * cfg.counter_stride.n + 8);
  if (cfg.transport == JobConfig::QpType::ud)
    m = std::max<uint64_t>(m, MPR_UD_GRH_BYTES);  // GRH space
  // rpc_bw: a 64-byte slot per RECV (send) or per request (uc_write's ring
  // in the server's receive half).
  if (cfg.app == JobConfig::App::rpc_bw)
    m = std::max<uint64_t>(m, static_cast<uint64_t>(cfg.rx_depth) * 64);
  return m;
}

int PerfTest::buffer_halves(const JobConfig& cfg) {
  return cfg.app == JobConfig::App::write_flows ? 1 : 2;
}

PerfTest::EndTables PerfTest::end_tables(const JobConfig& cfg) {
  EndTables t;
  const uint64_t bytes = static_cast<uint64_t>(buffer_halves(cfg)) * buffer_bytes(cfg);
  t.mtt_entries = (bytes + SparseMemory::kPageBytes - 1) / SparseMemory::kPageBytes;
  if (cfg.app == JobConfig::App::rpc_bw && cfg.request == JobConfig::RpcRequest::uc_write)
    t.qps = 2;  // the UD QP of the answers and the UC QP of the requests
  if (cfg.use_srq) t.server_srqs = 1;
  return t;
}

void PerfTest::setup() {
  client_host_.wait_ready();
  server_host_.wait_ready();
  client_ = std::make_unique<Side>(client_host_);
  server_ = std::make_unique<Side>(server_host_);
  const uint32_t access = MPR_ACCESS_LOCAL_WRITE | MPR_ACCESS_REMOTE_WRITE |
                          MPR_ACCESS_REMOTE_READ | MPR_ACCESS_REMOTE_ATOMIC;
  QpCaps caps;
  caps.max_send_wr = static_cast<uint32_t>(std::max<int64_t>(cfg_.tx_depth, 2));
  caps.max_recv_wr = static_cast<uint32_t>(std::max<int64_t>(cfg_.rx_depth, 2));
  caps.max_inline = static_cast<uint32_t>(cfg_.inline_size.n);
  // rpc_bw answers carry their 8-byte number inline (unless header-only).
  if (cfg_.app == JobConfig::App::rpc_bw && cfg_.recv_sges != 0)
    caps.max_inline = std::max<uint32_t>(caps.max_inline, 8);
  caps.max_recv_sge = static_cast<uint32_t>(cfg_.recv_sges);
  const bool ud = cfg_.transport == JobConfig::QpType::ud;
  const bool uc = cfg_.transport == JobConfig::QpType::uc;
  if (ud) caps.qp_type = MPR_QPT_UD;
  if (uc) caps.qp_type = MPR_QPT_UC;
  caps.transport = transport_kind(cfg_.qp_transport);
  for (Side* s : {client_.get(), server_.get()}) {
    s->ctx = std::make_unique<VerbsContext>(s->host.driver(), s->as, s->host.config());
    s->pd = s->ctx->alloc_pd();
    s->half = buffer_bytes(cfg_);  // (end_tables counts what this loop takes)
    const uint64_t bytes = static_cast<uint64_t>(buffer_halves(cfg_)) * s->half;
    s->buf = s->as.alloc(bytes);
    s->mr = s->ctx->reg_mr(s->pd, s->buf, bytes, access);
    const uint32_t cq_entries = static_cast<uint32_t>(caps.max_send_wr + caps.max_recv_wr);
    const uint8_t log_cqe = cfg_.cqe_size.n == 128 ? 7 : cfg_.cqe_size.n == 64 ? 6 : 5;
    s->scq = s->ctx->create_cq(cq_entries, log_cqe);
    s->rcq = s->ctx->create_cq(cq_entries, log_cqe, cfg_.inline_recv && s == server_.get());
    QpCaps side_caps = caps;
    if (cfg_.use_srq && s == server_.get()) {
      s->srq = s->ctx->create_srq(s->pd, caps.max_recv_wr, 1);
      side_caps.srq = s->srq;
    }
    s->qp = s->ctx->create_qp(s->pd, s->scq, s->rcq, side_caps);
  }
  core::RandomStream& psn = stream("psn");
  const auto ci = client_->ctx->local_info(client_->qp, static_cast<uint32_t>(psn.below(1 << 24)));
  const auto si = server_->ctx->local_info(server_->qp, static_cast<uint32_t>(psn.below(1 << 24)));
  if (ud) {
    // Datagrams: each QP is activated alone; the client addresses the
    // server's QP in every WQE (perftest's ud test exchanges the same).
    constexpr uint32_t kQkey = 0x11111111;  // perftest's DEF_QKEY
    client_->ctx->activate_ud(client_->qp, kQkey, ci.psn);
    server_->ctx->activate_ud(server_->qp, kQkey, si.psn);
    client_->peer = VerbsContext::ud_dest(si, kQkey);
    server_->peer = VerbsContext::ud_dest(ci, kQkey);
    if (cfg_.app == JobConfig::App::rpc_bw && cfg_.request == JobConfig::RpcRequest::uc_write) {
      // HERD: requests by UC WRITE into the server's request ring (its
      // receive half); the server's UC QP only receives (RTR).
      QpCaps uc_caps;
      uc_caps.qp_type = MPR_QPT_UC;
      uc_caps.max_send_wr = caps.max_send_wr;
      uc_caps.max_recv_wr = 2;  // no RECV is ever posted: plain WRITEs take none
      uc_caps.max_inline = 8;
      for (Side* s : {client_.get(), server_.get()})
        s->uc_qp = s->ctx->create_qp(s->pd, s->scq, s->rcq, uc_caps);
      const auto cu =
          client_->ctx->local_info(client_->uc_qp, static_cast<uint32_t>(psn.below(1 << 24)));
      const auto su =
          server_->ctx->local_info(server_->uc_qp, static_cast<uint32_t>(psn.below(1 << 24)));
      const uint8_t mtu = mtu_code(cfg_.mtu.n);
      client_->ctx->connect_uc(client_->uc_qp, cu, su, mtu, access);
      server_->ctx->connect_uc(server_->uc_qp, su, cu, mtu, access, 0, /*to_rts=*/false);
      client_->req_va = server_->buf + server_->half;
      client_->req_rkey = server_->mr.key;
    }
    return;
  }
  const uint8_t mtu = mtu_code(cfg_.mtu.n);
  if (uc) {
    // UC: connected like RC, without the acknowledgement attributes.
    client_->ctx->connect_uc(client_->qp, ci, si, mtu, access,
                             static_cast<uint16_t>(cfg_.udp_sport));
    server_->ctx->connect_uc(server_->qp, si, ci, mtu, access);
    return;
  }
  client_->ctx->connect(client_->qp, ci, si, mtu, access, cfg_.timeout, cfg_.retry_cnt, 7, 16,
                        static_cast<uint16_t>(cfg_.udp_sport));
  server_->ctx->connect(server_->qp, si, ci, mtu, access, cfg_.timeout, cfg_.retry_cnt);
}

bool PerfTest::prepare() {
  if (prepared_) return results_.empty();
  prepared_ = true;
  try {
    setup();
  } catch (const std::exception& e) {
    SizeResult r;
    r.error = std::string("set-up failed: ") + e.what();
    results_.push_back(r);
    return false;
  }
  return true;
}

void PerfTest::run() {
  if (!prepare()) return;
  if (sc_core::sc_time_stamp() < cfg_.run_at.sc())
    sc_core::wait(cfg_.run_at.sc() - sc_core::sc_time_stamp());
  for (const core::Bytes& size : cfg_.sizes) {
    SizeResult r;
    if (cfg_.app == JobConfig::App::write_lat)
      r = run_write_lat(size.n);
    else if (cfg_.app == JobConfig::App::read_lat)
      r = run_read_lat(size.n);
    else if (cfg_.app == JobConfig::App::send_lat)
      r = run_send_lat(size.n);
    else if (cfg_.app == JobConfig::App::atomic_bw)
      r = run_atomic(size.n);
    else if (cfg_.app == JobConfig::App::write_flows)
      r = run_flows(size.n);
    else
      r = cfg_.app == JobConfig::App::rpc_bw ? run_rpc(size.n) : run_bw(size.n);
    results_.push_back(r);
    if (!r.error.empty()) break;  // the QP is in ERR: later sizes cannot run
  }
}

int PerfTest::wait_completions_until(Side& s, CompletionQueue* cq, int n, mpr_wc* wc,
                                     const sc_core::sc_time& until) {
  for (;;) {
    const int got = s.ctx->poll_cq(cq, n, wc);
    if (got) return got;
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    if (now >= until) return 0;
    if (cfg_.events) {
      s.ctx->arm_cq(cq, false);
      sc_core::wait(until - now, cq->event);
    } else {
      sc_core::wait(until - now, cq->written);
    }
  }
}

int PerfTest::wait_completions(Side& s, CompletionQueue* cq, int n, mpr_wc* wc) {
  if (!cfg_.events) return s.ctx->wait_poll(cq, n, wc);
  for (;;) {
    const int got = s.ctx->poll_cq(cq, n, wc);
    if (got) return got;
    s.ctx->arm_cq(cq, false);
    // Arming reports the consumer index; the NIC fires at once if entries
    // are already pending, so no completion is missed between poll and arm.
    sc_core::wait(cq->event);
  }
}

// ------------------------------------------------------------- bandwidth --

SizeResult PerfTest::run_bw(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  Side& s = *server_;
  const bool read = cfg_.app == JobConfig::App::read_bw;
  const bool send = cfg_.app == JobConfig::App::send_bw;

  // Source pattern on the side the data comes from; the destination starts
  // zeroed, so the check proves every byte was moved.
  Side& src = read ? s : c;
  Side& dst = read ? c : s;
  std::vector<uint8_t> pattern(size);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng_.next_u64());
  src.as.write(src.buf, pattern.data(), size);
  dst.as.fill(dst.buf + dst.half, 0, size);

  uint64_t received = 0;
  std::string server_error;
  bool server_done = !send;
  sc_core::sc_event server_finished;
  if (send) {
    sc_core::sc_spawn([&] {
      server_recv_loop(r.iterations, received, server_error);
      server_done = true;
      server_finished.notify(sc_core::SC_ZERO_TIME);
    });
    sc_core::wait(sc_core::SC_ZERO_TIME);  // let the server post its RECVs first
  }

  mpr_sge sge{};
  sge.addr = read ? c.buf + c.half : c.buf;
  sge.length = static_cast<uint32_t>(size);
  sge.lkey = c.mr.key;
  mpr_send_wr wr{};
  wr.opcode = read                    ? MPR_WQE_RDMA_READ
              : send && cfg_.send_imm ? MPR_WQE_SEND_IMM
              : send                  ? MPR_WQE_SEND
                                      : MPR_WQE_RDMA_WRITE;
  wr.remote_addr = read ? s.buf : s.buf + s.half;
  wr.rkey = s.mr.key;
  wr.sg_list = &sge;
  wr.num_sge = size ? 1 : 0;  // a header-only SEND has no data segment
  if (cfg_.transport == JobConfig::QpType::ud) wr.ud = &c.peer;
  const bool inl = !read && size <= cfg_.inline_size.n && size > 0;

  const uint32_t ci0 = c.qp->dp.sq.ci;
  uint64_t unrung = 0;  // posted WQEs not yet announced by a doorbell (post_list)
  uint64_t posted = 0;
  const sc_core::sc_time t0 = sc_core::sc_time_stamp();
  // With a duration, posting stops at the first signalled message after the
  // deadline (so the last one posted is signalled) and that count is the
  // run's; until then the target is unbounded.
  const bool timed = cfg_.duration.ps != 0;
  const sc_core::sc_time deadline = t0 + cfg_.duration.sc();
  if (timed) r.iterations = UINT64_MAX;
  // Offered load: message i is due at t0 + i * size * 8 / rate.
  const bool paced = cfg_.rate.bps > 0;
  const double interval_ps = paced ? double(size) * 8.0 / cfg_.rate.bps * 1e12 : 0.0;
  auto due = [&](uint64_t i) {
    return t0 + sc_core::sc_time::from_value(static_cast<uint64_t>(double(i) * interval_ps + 0.5));
  };
  // Synchronise messages: one draw per message posted, one ahead, so that
  // stop_wait can signal the message before a synchronise one.
  const bool stop_wait = cfg_.sync_mode == JobConfig::SyncMode::stop_wait;
  core::RandomStream* sync_rng = cfg_.sync_ratio > 0 ? &stream("sync") : nullptr;
  auto draw_sync = [&] { return sync_rng != nullptr && sync_rng->bernoulli(cfg_.sync_ratio); };
  bool cur_sync = draw_sync();
  bool stalled = false;
  sc_core::sc_time stall_since;
  std::vector<mpr_wc> wc(64);
  while (c.qp->dp.sq.ci - ci0 < r.iterations) {
    bool wait_due = false;
    // post_list: a batch starts only when it fits whole (as perftest does).
    const uint64_t batch = static_cast<uint64_t>(cfg_.post_list);
    while (posted < r.iterations &&
           posted - (c.qp->dp.sq.ci - ci0) < static_cast<uint64_t>(cfg_.tx_depth)) {
      if (batch > 1 && unrung == 0 &&
          static_cast<uint64_t>(cfg_.tx_depth) - (posted - (c.qp->dp.sq.ci - ci0)) <
              std::min(batch, r.iterations - posted))
        break;
      if (paced && sc_core::sc_time_stamp() < due(posted)) {
        wait_due = true;
        break;
      }
      if (stop_wait && cur_sync && posted != c.qp->dp.sq.ci - ci0) {
        if (!stalled) stall_since = sc_core::sc_time_stamp();
        stalled = true;
        break;
      }
      if (stalled) {
        r.sync_wait_us += (sc_core::sc_time_stamp() - stall_since).to_seconds() * 1e6;
        stalled = false;
      }
      const bool next_sync = draw_sync();
      wr.wr_id = posted;
      wr.imm_data = __builtin_bswap32(static_cast<uint32_t>(posted));
      wr.flags = (inl ? MPR_WQE_F_INLINE : 0);
      if (cur_sync) {
        ++r.sync_messages;
        if (!stop_wait) wr.flags |= MPR_WQE_F_SYNC;
      }
      const bool last =
          timed && sc_core::sc_time_stamp() >= deadline && (posted + 1) % cfg_.cq_mod == 0;
      if ((posted + 1) % cfg_.cq_mod == 0 || posted + 1 == r.iterations || (stop_wait && next_sync))
        wr.flags |= MPR_WQE_F_SIGNALED;
      if (last) r.iterations = posted + 1;
      int err;
      if (cfg_.wqe_by_mmio) {
        err = c.ctx->post_send_mmio(c.qp, wr);
        if (err > 0) err = 0;
      } else if (cfg_.post_list > 1) {
        err = c.ctx->post_send_no_doorbell(c.qp, wr);
        if (!err && ++unrung == static_cast<uint64_t>(cfg_.post_list)) {
          c.ctx->ring_sq(c.qp);
          unrung = 0;
        }
      } else {
        err = c.ctx->post_send(c.qp, wr);
      }
      if (err) {
        r.error = "post_send failed: " + std::to_string(err);
        return r;
      }
      ++posted;
      cur_sync = next_sync;
    }
    if (unrung) {  // a partial batch: nothing more can be posted for now
      c.ctx->ring_sq(c.qp);
      unrung = 0;
    }
    if (c.qp->dp.sq.ci - ci0 >= r.iterations) break;
    const int n = wait_due ? wait_completions_until(c, c.scq, static_cast<int>(wc.size()),
                                                    wc.data(), due(posted))
                           : wait_completions(c, c.scq, static_cast<int>(wc.size()), wc.data());
    for (int i = 0; i < n; ++i)
      if (wc[i].status != MPR_CQE_SUCCESS) {
        r.error = completion_error(wc[i]);
        return r;
      }
  }
  r.seconds = seconds_since(t0);
  while (!server_done) sc_core::wait(server_finished);
  if (!server_error.empty()) {
    r.error = "server: " + server_error;
    return r;
  }
  const double total = double(size) * double(r.iterations);
  if (r.seconds > 0) {
    r.bw_gbps = total * 8 / r.seconds / 1e9;
    r.bw_MBps = total / r.seconds / 1048576.0;
    r.msg_rate_mpps = double(r.iterations) / r.seconds / 1e6;
  }
  std::vector<uint8_t> got(size);
  dst.as.read(dst.buf + dst.half, got.data(), size);
  if (cfg_.transport == JobConfig::QpType::uc && !send && got != pattern && size) {
    // UC: the client's completions say only that the packets left (the
    // run's time ends there, as perftest's UC test measures it); wait for
    // the last WRITE to land, woken by the NIC's DMA writes into the
    // destination, for at most kUcLandingLimitUs of simulated time (a lost
    // packet leaves the data check failing).
    constexpr double kUcLandingLimitUs = 1000;
    const sc_core::sc_time limit =
        sc_core::sc_time_stamp() + sc_core::sc_time(kUcLandingLimitUs, sc_core::SC_US);
    sc_core::sc_event landed;
    pcie::RootComplex& rc = dst.host.root_complex();
    const uint64_t kPage = SparseMemory::kPageBytes;
    for (uint64_t va = dst.buf + dst.half, end = va + size; va < end;) {
      const uint64_t chunk = std::min(end - va, kPage - va % kPage);
      rc.add_write_watch(dst.as.translate(va), chunk, &landed);
      va += chunk;
    }
    while (got != pattern && sc_core::sc_time_stamp() < limit) {
      sc_core::wait(limit - sc_core::sc_time_stamp(), landed);
      dst.as.read(dst.buf + dst.half, got.data(), size);
    }
    rc.remove_write_watch(&landed);
  }
  r.data_ok = got == pattern;
  if (!r.data_ok) r.error = "destination buffer differs from the source";
  return r;
}

void PerfTest::server_recv_loop(uint64_t count, uint64_t& received, std::string& error) {
  Side& s = *server_;
  // UD: the datagram lands after 40 bytes of GRH, which take the end of
  // the (unused) send half, so the data still starts at buf + half.
  const bool ud = cfg_.transport == JobConfig::QpType::ud;
  const uint64_t grh = ud ? MPR_UD_GRH_BYTES : 0;
  mpr_sge sge{s.buf + s.half - grh, static_cast<uint32_t>(s.half + grh), s.mr.key};
  const bool header_only = cfg_.recv_sges == 0;
  mpr_recv_wr rwr{0, &sge, header_only ? 0u : 1u};
  const uint64_t depth = std::min<uint64_t>(count, static_cast<uint64_t>(cfg_.rx_depth));
  // use_srq: the RECVs go to the QP's shared receive queue.
  auto post = [&] {
    return s.srq ? s.ctx->post_srq_recv(s.srq, rwr) : s.ctx->post_recv(s.qp, rwr);
  };
  uint64_t posted = 0;
  for (; posted < depth; ++posted)
    if (post()) {
      error = s.srq ? "post_srq_recv failed" : "post_recv failed";
      return;
    }
  std::vector<mpr_wc> wc(64);
  while (received < count) {
    const int n = wait_completions(s, s.rcq, static_cast<int>(wc.size()), wc.data());
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != MPR_CQE_SUCCESS) {
        error = std::string("receive completion with status ") + status_name(wc[i].status);
        return;
      }
      // UD: the sender's QP, and the GRH unless nothing is placed
      // (header-only).
      if (ud &&
          (wc[i].src_qp != client_->qp->qpn || !(wc[i].flags & MPR_CQE_F_GRH) != header_only)) {
        error = "UD receive completion from QP " + std::to_string(wc[i].src_qp) + " (expected " +
                std::to_string(client_->qp->qpn) + ") or with GRH flag " +
                std::to_string(!!(wc[i].flags & MPR_CQE_F_GRH));
        return;
      }
      if (header_only && wc[i].byte_len != 0) {
        error = "header-only RECV completed with " + std::to_string(wc[i].byte_len) + " bytes";
        return;
      }
      // send_imm: the immediates are the message numbers, in order.
      if (cfg_.send_imm && (!(wc[i].flags & MPR_CQE_F_IMM) ||
                            __builtin_bswap32(wc[i].imm_data) != static_cast<uint32_t>(received))) {
        error = "RECV " + std::to_string(received) + " completed with immediate " +
                ((wc[i].flags & MPR_CQE_F_IMM) ? std::to_string(__builtin_bswap32(wc[i].imm_data))
                                               : std::string("none"));
        return;
      }
      // The SRQ's completions name the QP that took the WQE.
      if (s.srq && wc[i].qpn != s.qp->qpn) {
        error = "SRQ receive completion on QP " + std::to_string(wc[i].qpn) + " (expected " +
                std::to_string(s.qp->qpn) + ")";
        return;
      }
      ++received;
      if (posted < count) {
        if (post()) {
          error = s.srq ? "post_srq_recv failed" : "post_recv failed";
          return;
        }
        ++posted;
      }
    }
  }
}

// --------------------------------------------------------------- atomics --

SizeResult PerfTest::run_atomic(uint64_t) {
  SizeResult r;
  r.bytes = 8;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  Side& s = *server_;
  const bool cas = cfg_.atomic_op == JobConfig::AtomicOp::cmp_swap;
  const uint64_t zero = 0;
  const uint64_t counters = static_cast<uint64_t>(cfg_.counters);
  const uint64_t stride = cfg_.counter_stride.n;
  for (uint64_t k = 0; k < counters; ++k) s.as.write(s.buf + k * stride, &zero, 8);
  mpr_sge sge{c.buf + c.half, 8, c.mr.key};
  mpr_send_wr wr{};
  wr.opcode = cas ? MPR_WQE_ATOMIC_CAS : MPR_WQE_ATOMIC_FA;
  wr.remote_addr = s.buf;
  wr.rkey = s.mr.key;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const bool random_pick = cfg_.counter_pick == JobConfig::CounterPick::random;
  core::RandomStream* pick = random_pick ? &stream("counters") : nullptr;
  std::vector<uint64_t> sent(counters, 0);  // atomics posted to each counter
  const uint32_t ci0 = c.qp->dp.sq.ci;
  uint64_t posted = 0;
  std::vector<mpr_wc> wc(64);
  const sc_core::sc_time t0 = sc_core::sc_time_stamp();
  while (c.qp->dp.sq.ci - ci0 < r.iterations) {
    while (posted < r.iterations &&
           posted - (c.qp->dp.sq.ci - ci0) < static_cast<uint64_t>(cfg_.tx_depth)) {
      // CAS walks the counter forward: compare i, swap i + 1.
      wr.compare_add = cas ? posted : 1;
      wr.swap = posted + 1;
      const uint64_t k = random_pick ? pick->below(counters) : posted % counters;
      ++sent[k];
      wr.remote_addr = s.buf + k * stride;
      wr.flags =
          ((posted + 1) % cfg_.cq_mod == 0 || posted + 1 == r.iterations) ? MPR_WQE_F_SIGNALED : 0;
      if (c.ctx->post_send(c.qp, wr)) {
        r.error = "post_send failed";
        return r;
      }
      ++posted;
    }
    const int n = wait_completions(c, c.scq, static_cast<int>(wc.size()), wc.data());
    for (int i = 0; i < n; ++i)
      if (wc[i].status != MPR_CQE_SUCCESS) {
        r.error = std::string("completion with status ") + status_name(wc[i].status);
        return r;
      }
  }
  r.seconds = seconds_since(t0);
  if (r.seconds > 0) {
    r.msg_rate_mpps = double(r.iterations) / r.seconds / 1e6;
    r.bw_gbps = 64.0 * double(r.iterations) / r.seconds / 1e9;
    r.bw_MBps = 8.0 * double(r.iterations) / r.seconds / 1048576.0;
  }
  // Atomics on one address execute in order, so a counter ends at exactly
  // the number of atomics sent to it, for FETCH_ADD(1) and the CAS chain;
  // the counters then sum to the iterations (each added 1).
  r.data_ok = true;
  for (uint64_t k = 0; k < counters; ++k) {
    uint64_t counter = 0;
    s.as.read(s.buf + k * stride, &counter, 8);
    const uint64_t want = sent[k];
    if (counter != want) {
      r.data_ok = false;
      r.error = "remote counter " + std::to_string(k) + " is " + std::to_string(counter) +
                ", expected " + std::to_string(want);
      break;
    }
  }
  return r;
}

}  // namespace mprdma::host
