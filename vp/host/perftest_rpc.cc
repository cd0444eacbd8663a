// PerfTest's rpc_bw: Kalia et al.'s sequencer over UD, requests by UD SEND
// or (request uc_write) by HERD's UC WRITEs into the server's memory.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <algorithm>
#include <string>
#include <vector>

#include "vp/host/perftest.h"
#include "vp/host/perftest_internal.h"

namespace mprdma::host {

using perftest_detail::seconds_since;
using perftest_detail::status_name;

// rpc_bw: Kalia et al.'s sequencer (§4.2) over UD. Each RECV of either side
// has its own 64-byte slot in the receive half (GRH, then the payload), so
// that an answer is read after later ones have landed. Sizes 0: header-only
// requests and answers (the number is the answer's immediate); otherwise
// the answer carries the number as an 8-byte inline payload.
// request uc_write (HERD): request i of a connection is an 8-byte UC WRITE
// of the value i + 1 into slot i mod depth of the server's request ring
// (64-byte slots at the start of its receive half); the client has at most
// depth requests unanswered, so a slot is rewritten only after the server
// took (cleared) it.
namespace {
constexpr uint64_t kRpcSlot = 64;
}  // namespace

bool PerfTest::post_rpc_answer(uint64_t answered, uint64_t count, uint64_t& unsignaled,
                               std::string& error) {
  Side& s = *server_;
  const bool ho = cfg_.recv_sges == 0;
  // The send queue must have room: retire answers already sent.
  mpr_wc swc[64];
  while (mpr_dp_sq_space(&s.qp->dp) == 0) {
    s.ctx->ring_sq(s.qp);
    wait_completions(s, s.scq, 64, swc);
  }
  const uint64_t seq_value = s.host.next_sequence();
  s.as.write(s.buf + (answered % 8) * 8, &seq_value, 8);
  mpr_sge sge{s.buf + (answered % 8) * 8, 8, s.mr.key};
  mpr_send_wr wr{};
  wr.opcode = ho ? MPR_WQE_SEND_IMM : MPR_WQE_SEND;
  wr.ud = &s.peer;
  wr.sg_list = ho ? nullptr : &sge;
  wr.num_sge = ho ? 0 : 1;
  wr.imm_data = __builtin_bswap32(static_cast<uint32_t>(seq_value));
  wr.wr_id = answered;
  wr.flags = ho ? 0 : MPR_WQE_F_INLINE;
  if (++unsignaled == static_cast<uint64_t>(cfg_.cq_mod) || answered + 1 == count) {
    wr.flags |= MPR_WQE_F_SIGNALED;
    unsignaled = 0;
  }
  if (const int err = s.ctx->post_send_no_doorbell(s.qp, wr)) {
    error = "answer post_send failed: " + std::to_string(err);
    return false;
  }
  return true;
}

// One RECV of rpc_bw into `slot` of the side's receive half, without the
// doorbell (both sides post per poll, then ring once).
int PerfTest::post_rpc_recv(Side& side, uint64_t slot, bool header_only) {
  mpr_sge sge{side.buf + side.half + slot * kRpcSlot, static_cast<uint32_t>(kRpcSlot), side.mr.key};
  mpr_recv_wr rwr{slot, &sge, header_only ? 0u : 1u};
  return side.ctx->post_recv_no_doorbell(side.qp, rwr);
}

void PerfTest::rpc_server_loop(uint64_t count, std::string& error) {
  Side& s = *server_;
  const bool ho = cfg_.recv_sges == 0;
  const uint64_t depth = std::min<uint64_t>(count, static_cast<uint64_t>(cfg_.rx_depth));
  // RECVs are re-posted per poll, behind one doorbell.
  auto post_recv = [&](uint64_t slot) { return post_rpc_recv(s, slot, ho); };
  uint64_t posted = 0;
  for (; posted < depth; ++posted)
    if (post_recv(posted)) {
      error = "post_recv failed";
      return;
    }
  s.ctx->ring_rq(s.qp);
  std::vector<mpr_wc> wc(64), swc(64);
  uint64_t answered = 0, unsignaled = 0;
  while (answered < count) {
    const int batch = std::min<int>(static_cast<int>(wc.size()), static_cast<int>(cfg_.post_list));
    const int n = wait_completions(s, s.rcq, batch, wc.data());
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != MPR_CQE_SUCCESS) {
        error = std::string("request completion with status ") + status_name(wc[i].status);
        return;
      }
      if (!post_rpc_answer(answered, count, unsignaled, error)) return;
      ++answered;
      if (posted < count) {  // the slot takes a later request
        if (post_recv(wc[i].wr_id)) {
          error = "post_recv failed";
          return;
        }
        ++posted;
      }
    }
    // The answers of one poll go behind one doorbell (batching), and so do
    // the RECVs it re-posted.
    s.ctx->ring_sq(s.qp);
    s.ctx->ring_rq(s.qp);
    // Retire signalled answers without waiting.
    while (s.ctx->poll_cq(s.scq, static_cast<int>(swc.size()), swc.data()) > 0) {
    }
  }
}

void PerfTest::rpc_herd_server_loop(uint64_t count, std::string& error) {
  Side& s = *server_;
  const uint64_t depth = std::min<uint64_t>(count, static_cast<uint64_t>(cfg_.rx_depth));
  const uint64_t ring = s.buf + s.half;
  s.as.fill(ring, 0, depth * kRpcSlot);
  // The thread polls the ring in host memory. Re-reading memory that has
  // not changed finds nothing, so the simulated thread sleeps until the NIC's
  // next DMA write into the ring lands (what a busy poll would see first),
  // and each poll that finds requests costs the CPU poll_overhead, as a CQ
  // poll that returns completions does.
  sc_core::sc_event written;
  pcie::RootComplex& rc = s.host.root_complex();
  const uint64_t kPage = SparseMemory::kPageBytes;
  for (uint64_t va = ring, end = ring + depth * kRpcSlot; va < end;) {
    const uint64_t chunk = std::min(end - va, kPage - va % kPage);
    rc.add_write_watch(s.as.translate(va), chunk, &written);
    va += chunk;
  }
  const uint64_t batch = static_cast<uint64_t>(std::min<int64_t>(64, cfg_.post_list));
  const uint64_t zero = 0;
  std::vector<mpr_wc> swc(64);
  uint64_t answered = 0, unsignaled = 0;
  while (answered < count && error.empty()) {
    // The requests in order: slot k holds request k's number + 1 once it
    // has landed (0 when empty).
    uint64_t n = 0;
    while (n < batch && answered + n < count) {
      uint64_t v = 0;
      s.as.read(ring + ((answered + n) % depth) * kRpcSlot, &v, 8);
      if (v != answered + n + 1) break;
      ++n;
    }
    if (n == 0) {
      sc_core::wait(written);
      continue;
    }
    if (s.host.config().poll_overhead.ps) sc_core::wait(s.host.config().poll_overhead.sc());
    for (uint64_t i = 0; i < n; ++i) {
      s.as.write(ring + (answered % depth) * kRpcSlot, &zero, 8);  // the slot is free again
      if (!post_rpc_answer(answered, count, unsignaled, error)) break;
      ++answered;
    }
    // The answers of one poll go behind one doorbell (batching).
    s.ctx->ring_sq(s.qp);
    while (s.ctx->poll_cq(s.scq, static_cast<int>(swc.size()), swc.data()) > 0) {
    }
  }
  rc.remove_write_watch(&written);
}

SizeResult PerfTest::run_rpc(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  const bool ho = cfg_.recv_sges == 0;
  std::string server_error;
  bool server_done = false;
  sc_core::sc_event server_finished;
  const bool herd = cfg_.request == JobConfig::RpcRequest::uc_write;
  sc_core::sc_spawn([&] {
    if (herd)
      rpc_herd_server_loop(r.iterations, server_error);
    else
      rpc_server_loop(r.iterations, server_error);
    server_done = true;
    server_finished.notify(sc_core::SC_ZERO_TIME);
  });
  sc_core::wait(sc_core::SC_ZERO_TIME);  // the server posts its RECVs first

  const uint64_t window = static_cast<uint64_t>(cfg_.tx_depth);
  const uint64_t depth = std::min<uint64_t>(r.iterations, static_cast<uint64_t>(cfg_.rx_depth));
  auto post_recv = [&](uint64_t slot) { return post_rpc_recv(c, slot, ho); };
  uint64_t posted = 0;
  for (; posted < depth; ++posted)
    if (post_recv(posted)) {
      r.error = "post_recv failed";
      return r;
    }
  c.ctx->ring_rq(c.qp);
  std::vector<uint8_t> request(size);
  for (auto& b : request) b = static_cast<uint8_t>(rng_.next_u64());
  if (size) c.as.write(c.buf, request.data(), size);
  mpr_sge sge{c.buf, static_cast<uint32_t>(size), c.mr.key};
  mpr_send_wr wr{};
  wr.opcode = cfg_.send_imm || ho ? MPR_WQE_SEND_IMM : MPR_WQE_SEND;
  wr.sg_list = size ? &sge : nullptr;
  wr.num_sge = size ? 1 : 0;
  wr.ud = &c.peer;
  const bool inl = size > 0 && size <= cfg_.inline_size.n;
  // HERD: the request is an inline UC WRITE of its number + 1 into its slot.
  QueuePair* req_qp = herd ? c.uc_qp : c.qp;
  mpr_sge req_sge{c.buf, 8, c.mr.key};
  mpr_send_wr req{};
  req.opcode = MPR_WQE_RDMA_WRITE;
  req.rkey = c.req_rkey;
  req.sg_list = &req_sge;
  req.num_sge = 1;

  const sc_core::sc_time t0 = sc_core::sc_time_stamp();
  uint64_t sent = 0, answered = 0, unrung = 0, last = 0;
  r.data_ok = true;
  std::vector<mpr_wc> wc(64), swc(64);
  while (answered < r.iterations) {
    // Retire sent requests (signalled ones free their send-queue slots).
    while (c.ctx->poll_cq(c.scq, static_cast<int>(swc.size()), swc.data()) > 0) {
    }
    while (sent < r.iterations && sent - answered < window && mpr_dp_sq_space(&req_qp->dp) > 0 &&
           sent - answered < depth) {
      const bool signaled =
          (sent + 1) % static_cast<uint64_t>(cfg_.cq_mod) == 0 || sent + 1 == r.iterations;
      int err;
      if (herd) {
        const uint64_t marker = sent + 1;
        c.as.write(c.buf, &marker, 8);  // copied into the WQE (inline) at the post
        req.wr_id = sent;
        req.remote_addr = c.req_va + (sent % depth) * kRpcSlot;
        req.flags = MPR_WQE_F_INLINE | (signaled ? MPR_WQE_F_SIGNALED : 0);
        err = c.ctx->post_send_no_doorbell(req_qp, req);
      } else {
        wr.wr_id = sent;
        wr.imm_data = __builtin_bswap32(static_cast<uint32_t>(sent));
        wr.flags = (inl ? MPR_WQE_F_INLINE : 0) | (signaled ? MPR_WQE_F_SIGNALED : 0);
        err = c.ctx->post_send_no_doorbell(req_qp, wr);
      }
      if (err) {
        r.error = "post_send failed: " + std::to_string(err);
        return r;
      }
      ++sent;
      if (++unrung == static_cast<uint64_t>(cfg_.post_list)) {
        c.ctx->ring_sq(req_qp);
        unrung = 0;
      }
    }
    if (unrung) {
      c.ctx->ring_sq(req_qp);
      unrung = 0;
    }
    const int n = wait_completions(c, c.rcq, static_cast<int>(wc.size()), wc.data());
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != MPR_CQE_SUCCESS) {
        r.error = std::string("answer completion with status ") + status_name(wc[i].status);
        return r;
      }
      // The numbers this client gets only grow (one server thread answers
      // it, in order, from the host's counter).
      uint64_t seq = 0;
      if (ho) {
        seq = __builtin_bswap32(wc[i].imm_data);
        if (!(wc[i].flags & MPR_CQE_F_IMM) || wc[i].byte_len != 0) r.data_ok = false;
        if (seq <= (last & 0xffffffffu) && last < 0xffffffffu) r.data_ok = false;
      } else {
        c.as.read(c.buf + c.half + wc[i].wr_id * kRpcSlot + MPR_UD_GRH_BYTES, &seq, 8);
        if (wc[i].byte_len != MPR_UD_GRH_BYTES + 8 || seq <= last) r.data_ok = false;
      }
      last = seq;
      ++answered;
      if (posted < r.iterations) {
        if (post_recv(wc[i].wr_id)) {
          r.error = "post_recv failed";
          return r;
        }
        ++posted;
      }
    }
    c.ctx->ring_rq(c.qp);
  }
  r.seconds = seconds_since(t0);
  while (!server_done) sc_core::wait(server_finished);
  if (!server_error.empty()) {
    r.error = "server: " + server_error;
    return r;
  }
  if (!r.data_ok) r.error = "an answer's sequence number did not grow";
  if (r.seconds > 0) {
    r.msg_rate_mpps = double(r.iterations) / r.seconds / 1e6;
    r.bw_gbps = double(size) * double(r.iterations) * 8 / r.seconds / 1e9;
    r.bw_MBps = double(size) * double(r.iterations) / r.seconds / 1048576.0;
  }
  return r;
}

}  // namespace mprdma::host
