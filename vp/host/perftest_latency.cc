// PerfTest's latency tests: write_lat, read_lat and send_lat (ping-pong or
// one at a time, as perftest), and their percentile summary.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "vp/host/perftest.h"
#include "vp/host/perftest_internal.h"

namespace mprdma::host {

using perftest_detail::completion_error;
using perftest_detail::seconds_since;
using perftest_detail::status_name;

std::vector<uint8_t> PerfTest::random_pattern(uint64_t size) {
  std::vector<uint8_t> pattern(size);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng_.next_u64());
  return pattern;
}

void PerfTest::finish_latency(SizeResult& r, std::vector<double>& us) {
  if (us.empty()) return;
  summarize_latency(r, us);
  core::Histogram& h =
      env_.stats.histogram("flow." + cfg_.name + ".latency_us_" + std::to_string(r.bytes), "us",
                           "Per-iteration latency of job " + cfg_.name);
  for (double v : us) h.record(v);
}

void PerfTest::summarize_latency(SizeResult& r, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  double sum = 0;
  for (double v : us) sum += v;
  r.t_min = us.front();
  r.t_max = us.back();
  r.t_typical = us[n / 2];
  r.t_avg = sum / double(n);
  double var = 0;
  for (double v : us) var += (v - r.t_avg) * (v - r.t_avg);
  r.t_stdev = std::sqrt(var / double(n));
  auto pct = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(n)));
    return us[std::min(n, std::max<size_t>(rank, 1)) - 1];
  };
  r.t_p99 = pct(99.0);
  r.t_p999 = pct(99.9);
}

SizeResult PerfTest::run_write_lat(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  if (size == 0) {
    r.error = "write_lat needs a size of at least 1 byte (it polls the last byte)";
    return r;
  }
  Side& c = *client_;
  Side& s = *server_;
  // Each side polls the last byte of its receive half for the iteration tag.
  std::vector<uint8_t> pattern = random_pattern(size);
  sc_core::sc_event client_seen, server_seen;
  c.host.root_complex().add_write_watch(c.as.translate(c.buf + c.half + size - 1), 1, &client_seen);
  s.host.root_complex().add_write_watch(s.as.translate(s.buf + s.half + size - 1), 1, &server_seen);
  auto tag_of = [](uint64_t i) { return static_cast<uint8_t>(1 + i % 255); };
  auto post_write = [&](Side& from, Side& to, uint64_t i) {
    pattern[size - 1] = tag_of(i);
    from.as.write(from.buf, pattern.data(), size);
    mpr_sge sge{from.buf, static_cast<uint32_t>(size), from.mr.key};
    mpr_send_wr wr{};
    wr.opcode = MPR_WQE_RDMA_WRITE;
    wr.flags = MPR_WQE_F_SIGNALED | (size <= cfg_.inline_size.n ? MPR_WQE_F_INLINE : 0);
    wr.remote_addr = to.buf + to.half;
    wr.rkey = to.mr.key;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return from.ctx->post_send(from.qp, wr);
  };
  auto wait_tag = [&](Side& side, sc_core::sc_event& ev, uint8_t tag) {
    for (;;) {
      uint8_t v;
      side.as.read(side.buf + side.half + size - 1, &v, 1);
      if (v == tag) return;
      sc_core::wait(ev);
    }
  };
  auto drain = [&](Side& side, std::string& err) {
    mpr_wc wc[16];
    int n;
    while ((n = side.ctx->poll_cq(side.scq, 16, wc)) > 0)
      for (int i = 0; i < n; ++i)
        if (wc[i].status != MPR_CQE_SUCCESS) err = status_name(wc[i].status);
  };
  c.as.fill(c.buf + c.half, 0, size);
  s.as.fill(s.buf + s.half, 0, size);

  std::string server_error;
  bool server_done = false;
  sc_core::sc_event server_finished;
  sc_core::sc_spawn([&] {
    for (uint64_t i = 0; i < r.iterations && server_error.empty(); ++i) {
      wait_tag(s, server_seen, tag_of(i));
      if (post_write(s, c, i)) server_error = "post_send failed";
      drain(s, server_error);
    }
    server_done = true;
    server_finished.notify(sc_core::SC_ZERO_TIME);
  });

  std::vector<double> us;
  std::string client_error;
  for (uint64_t i = 0; i < r.iterations; ++i) {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    if (post_write(c, s, i)) {
      r.error = "post_send failed";
      break;
    }
    wait_tag(c, client_seen, tag_of(i));
    us.push_back(seconds_since(t0) * 1e6 / 2);
    drain(c, client_error);
    if (!client_error.empty() || !server_error.empty()) break;
  }
  while (!server_done) sc_core::wait(server_finished);
  c.host.root_complex().remove_write_watch(&client_seen);
  s.host.root_complex().remove_write_watch(&server_seen);
  if (r.error.empty() && !client_error.empty()) r.error = "client completion: " + client_error;
  if (r.error.empty() && !server_error.empty()) r.error = "server: " + server_error;
  finish_latency(r, us);
  std::vector<uint8_t> got(size);
  c.as.read(c.buf + c.half, got.data(), size);
  pattern[size - 1] = tag_of(r.iterations - 1);
  r.data_ok = r.error.empty() && got == pattern;
  return r;
}

SizeResult PerfTest::run_read_lat(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  Side& s = *server_;
  std::vector<uint8_t> pattern = random_pattern(size);
  s.as.write(s.buf, pattern.data(), size);
  c.as.fill(c.buf + c.half, 0, size);
  mpr_sge sge{c.buf + c.half, static_cast<uint32_t>(size), c.mr.key};
  mpr_send_wr wr{};
  wr.opcode = MPR_WQE_RDMA_READ;
  wr.flags = MPR_WQE_F_SIGNALED;
  wr.remote_addr = s.buf;
  wr.rkey = s.mr.key;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  std::vector<double> us;
  mpr_wc wc;
  for (uint64_t i = 0; i < r.iterations; ++i) {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    if (c.ctx->post_send(c.qp, wr)) {
      r.error = "post_send failed";
      break;
    }
    wait_completions(c, c.scq, 1, &wc);
    if (wc.status != MPR_CQE_SUCCESS) {
      r.error = completion_error(wc);
      break;
    }
    us.push_back(seconds_since(t0) * 1e6);
  }
  finish_latency(r, us);
  std::vector<uint8_t> got(size);
  c.as.read(c.buf + c.half, got.data(), size);
  r.data_ok = r.error.empty() && got == pattern;
  return r;
}

SizeResult PerfTest::run_send_lat(uint64_t size) {
  SizeResult r;
  r.bytes = size;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  Side& s = *server_;
  std::vector<uint8_t> pattern = random_pattern(size);
  c.as.write(c.buf, pattern.data(), size);
  s.as.write(s.buf, pattern.data(), size);
  c.as.fill(c.buf + c.half, 0, size);
  s.as.fill(s.buf + s.half, 0, size);
  auto post_recv = [&](Side& side) {
    mpr_sge sge{side.buf + side.half, static_cast<uint32_t>(side.half), side.mr.key};
    mpr_recv_wr rwr{0, &sge, 1};
    return side.ctx->post_recv(side.qp, rwr);
  };
  auto post_send = [&](Side& side) {
    mpr_sge sge{side.buf, static_cast<uint32_t>(size), side.mr.key};
    mpr_send_wr wr{};
    wr.opcode = MPR_WQE_SEND;
    wr.flags = MPR_WQE_F_SIGNALED | (size <= cfg_.inline_size.n ? MPR_WQE_F_INLINE : 0);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return side.ctx->post_send(side.qp, wr);
  };
  auto wait_recv = [&](Side& side, std::string& err) {
    mpr_wc wc;
    wait_completions(side, side.rcq, 1, &wc);
    if (wc.status != MPR_CQE_SUCCESS) err = status_name(wc.status);
    if (wc.byte_len != size) err = "received " + std::to_string(wc.byte_len) + " bytes";
    mpr_wc sent[16];
    int n;
    while ((n = side.ctx->poll_cq(side.scq, 16, sent)) > 0)
      for (int i = 0; i < n; ++i)
        if (sent[i].status != MPR_CQE_SUCCESS) err = status_name(sent[i].status);
  };
  post_recv(c);
  post_recv(s);
  std::string server_error;
  bool server_done = false;
  sc_core::sc_event server_finished;
  sc_core::sc_spawn([&] {
    for (uint64_t i = 0; i < r.iterations && server_error.empty(); ++i) {
      wait_recv(s, server_error);
      post_recv(s);
      if (post_send(s)) server_error = "post_send failed";
    }
    server_done = true;
    server_finished.notify(sc_core::SC_ZERO_TIME);
  });
  std::vector<double> us;
  std::string client_error;
  for (uint64_t i = 0; i < r.iterations && client_error.empty() && server_error.empty(); ++i) {
    const sc_core::sc_time t0 = sc_core::sc_time_stamp();
    if (post_send(c)) {
      r.error = "post_send failed";
      break;
    }
    wait_recv(c, client_error);
    post_recv(c);
    us.push_back(seconds_since(t0) * 1e6 / 2);
  }
  while (!server_done) sc_core::wait(server_finished);
  if (r.error.empty() && !client_error.empty()) r.error = "client: " + client_error;
  if (r.error.empty() && !server_error.empty()) r.error = "server: " + server_error;
  finish_latency(r, us);
  std::vector<uint8_t> got(size);
  c.as.read(c.buf + c.half, got.data(), size);
  r.data_ok = r.error.empty() && got == pattern;
  return r;
}

}  // namespace mprdma::host
