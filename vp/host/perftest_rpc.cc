// PerfTest's rpc_bw: Kalia et al.'s sequencer over UD.
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
namespace {
constexpr uint64_t kRpcSlot = 64;
}  // namespace

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
  uint64_t seq_value = 0;
  mpr_sge sge{0, 8, s.mr.key};
  mpr_send_wr wr{};
  wr.opcode = ho ? MPR_WQE_SEND_IMM : MPR_WQE_SEND;
  wr.ud = &s.peer;
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
      // The send queue must have room: retire answers already sent.
      while (mpr_dp_sq_space(&s.qp->dp) == 0) {
        s.ctx->ring_sq(s.qp);
        wait_completions(s, s.scq, static_cast<int>(swc.size()), swc.data());
      }
      seq_value = s.host.next_sequence();
      s.as.write(s.buf + (answered % 8) * 8, &seq_value, 8);
      sge.addr = s.buf + (answered % 8) * 8;
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
        return;
      }
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

SizeResult PerfTest::run_rpc(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  const bool ho = cfg_.recv_sges == 0;
  std::string server_error;
  bool server_done = false;
  sc_core::sc_event server_finished;
  sc_core::sc_spawn([&] {
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

  const sc_core::sc_time t0 = sc_core::sc_time_stamp();
  uint64_t sent = 0, answered = 0, unrung = 0, last = 0;
  r.data_ok = true;
  std::vector<mpr_wc> wc(64), swc(64);
  while (answered < r.iterations) {
    // Retire sent requests (signalled ones free their send-queue slots).
    while (c.ctx->poll_cq(c.scq, static_cast<int>(swc.size()), swc.data()) > 0) {
    }
    while (sent < r.iterations && sent - answered < window && mpr_dp_sq_space(&c.qp->dp) > 0 &&
           sent - answered < depth) {
      wr.wr_id = sent;
      wr.imm_data = __builtin_bswap32(static_cast<uint32_t>(sent));
      wr.flags = inl ? MPR_WQE_F_INLINE : 0;
      if ((sent + 1) % static_cast<uint64_t>(cfg_.cq_mod) == 0 || sent + 1 == r.iterations)
        wr.flags |= MPR_WQE_F_SIGNALED;
      if (const int err = c.ctx->post_send_no_doorbell(c.qp, wr)) {
        r.error = "post_send failed: " + std::to_string(err);
        return r;
      }
      ++sent;
      if (++unrung == static_cast<uint64_t>(cfg_.post_list)) {
        c.ctx->ring_sq(c.qp);
        unrung = 0;
      }
    }
    if (unrung) {
      c.ctx->ring_sq(c.qp);
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
