// PerfTest's write_flows: flows of a size distribution arriving as a
// Poisson process, and their completion-time histograms.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "vp/host/flow_sizes.h"
#include "vp/host/perftest.h"
#include "vp/host/perftest_internal.h"

namespace mprdma::host {

using perftest_detail::completion_error;
using perftest_detail::seconds_since;

namespace {

// Byte i of a write_flows source buffer: a function of the offset and a
// per-run salt, so that a 30 MB flow needs no pattern copy in memory and the
// destination can be checked piecewise.
uint8_t flow_byte(uint64_t i, uint64_t salt) {
  return static_cast<uint8_t>(((i + salt) * 0x9E3779B97F4A7C15ull) >> 56);
}

// Size classes of the FCT histograms (the MP-RDMA paper's small and large).
const char* flow_class(uint64_t bytes) {
  if (bytes < 100000) return "small";
  return bytes > 10000000 ? "large" : "medium";
}

}  // namespace

void PerfTest::record_fct(uint64_t bytes, double fct_us) {
  const std::string group = "flows." + cfg_.flow_group + ".fct_us";
  env_.stats
      .histogram("flow." + cfg_.name + ".fct_us", "us",
                 "Flow completion times of job " + cfg_.name + " (arrival to completion)")
      .record(fct_us);
  env_.stats.histogram(group, "us", "Flow completion times of flow group " + cfg_.flow_group)
      .record(fct_us);
  const std::string cls = flow_class(bytes);
  env_.stats
      .histogram(group + "." + cls, "us",
                 "Flow completion times of the " + cls + " flows of group " + cfg_.flow_group +
                     " (small < 100 KB, large > 10 MB)")
      .record(fct_us);
  if (!cfg_.ideal_rate.bps) return;
  const double ideal_us =
      cfg_.ideal_base.sc().to_seconds() * 1e6 + double(bytes) * 8.0 / cfg_.ideal_rate.bps * 1e6;
  const double slowdown = fct_us / ideal_us;
  env_.stats
      .histogram("flow." + cfg_.name + ".slowdown", "",
                 "Flow slowdowns of job " + cfg_.name + " (FCT / idle-network time)")
      .record(slowdown);
  env_.stats
      .histogram("flows." + cfg_.flow_group + ".slowdown", "",
                 "Flow slowdowns of flow group " + cfg_.flow_group)
      .record(slowdown);
}

SizeResult PerfTest::run_flows(uint64_t max_size) {
  SizeResult r;
  r.bytes = max_size;
  Side& c = *client_;
  Side& s = *server_;
  const FlowSizes dist = cfg_.flow_size_cdf.empty() ? FlowSizes::named(cfg_.flow_sizes)
                                                    : FlowSizes(cfg_.flow_size_cdf);
  core::RandomStream& size_rng = stream("flow_sizes");
  core::RandomStream& gap_rng = stream("arrivals");
  // Poisson arrivals offering `rate` of payload on average, shared by the
  // job's qps connections (each a Poisson process of rate / qps, together
  // one of `rate`).
  const double mean_gap_ps =
      dist.mean_bytes() * 8.0 / cfg_.rate.bps * 1e12 * double(std::max<int64_t>(cfg_.qps, 1));
  const uint64_t salt = rng_.next_u64();
  uint64_t pattern_len = 0;  // source bytes written so far (the largest flow yet)
  auto extend_pattern = [&](uint64_t len) {
    std::vector<uint8_t> chunk;
    while (pattern_len < len) {
      const uint64_t n = std::min<uint64_t>(len - pattern_len, 1 << 16);
      chunk.resize(n);
      for (uint64_t i = 0; i < n; ++i) chunk[i] = flow_byte(pattern_len + i, salt);
      c.as.write(c.buf + pattern_len, chunk.data(), n);
      pattern_len += n;
    }
  };

  struct Flow {
    sc_core::sc_time arrival;
    uint64_t bytes;
  };
  std::deque<Flow> waiting, outstanding;  // arrived, not posted; posted, in order
  mpr_sge sge{};
  sge.addr = c.buf;
  sge.lkey = c.mr.key;
  mpr_send_wr wr{};
  wr.opcode = MPR_WQE_RDMA_WRITE;
  wr.remote_addr = s.buf;  // the server's one half (buffer_halves)
  wr.rkey = s.mr.key;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  const sc_core::sc_time t0 = sc_core::sc_time_stamp();
  const sc_core::sc_time deadline = t0 + cfg_.duration.sc();
  auto gap = [&] {
    return sc_core::sc_time::from_value(
        static_cast<uint64_t>(gap_rng.exponential(mean_gap_ps) + 0.5));
  };
  sc_core::sc_time next = t0 + gap();
  std::vector<double> fct_us;
  std::vector<mpr_wc> wc(64);
  uint64_t posted = 0;
  while (true) {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    for (; next <= now && next < deadline; next += gap())
      waiting.push_back({next, dist.draw(size_rng)});
    while (!waiting.empty() && outstanding.size() < static_cast<size_t>(cfg_.tx_depth)) {
      const Flow f = waiting.front();
      waiting.pop_front();
      extend_pattern(f.bytes);
      sge.length = static_cast<uint32_t>(f.bytes);
      wr.wr_id = posted++;
      wr.flags = MPR_WQE_F_SIGNALED;
      if (const int err = c.ctx->post_send(c.qp, wr)) {
        r.error = "post_send failed: " + std::to_string(err);
        return r;
      }
      outstanding.push_back(f);
    }
    const bool arrivals_left = next < deadline;
    if (!arrivals_left && waiting.empty() && outstanding.empty()) break;
    if (outstanding.empty()) {  // idle until the next arrival
      sc_core::wait(next - now);
      continue;
    }
    const int n =
        arrivals_left
            ? wait_completions_until(c, c.scq, static_cast<int>(wc.size()), wc.data(), next)
            : wait_completions(c, c.scq, static_cast<int>(wc.size()), wc.data());
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != MPR_CQE_SUCCESS) {
        r.error = completion_error(wc[i]);
        return r;
      }
      const Flow f = outstanding.front();  // an RC send queue completes in order
      outstanding.pop_front();
      const double us = (sc_core::sc_time_stamp() - f.arrival).to_seconds() * 1e6;
      fct_us.push_back(us);
      record_fct(f.bytes, us);
      r.payload += f.bytes;
      ++r.iterations;
    }
  }
  r.seconds = seconds_since(t0);
  if (r.seconds > 0) {
    r.bw_gbps = double(r.payload) * 8 / r.seconds / 1e9;
    r.bw_MBps = double(r.payload) / r.seconds / 1048576.0;
    r.msg_rate_mpps = double(r.iterations) / r.seconds / 1e6;
  }
  summarize_latency(r, fct_us);
  // Every flow wrote the source's first bytes to the same place: the
  // destination must now hold the longest flow's worth of the pattern.
  std::vector<uint8_t> got;
  r.data_ok = true;
  for (uint64_t off = 0; off < pattern_len && r.data_ok;) {
    const uint64_t n = std::min<uint64_t>(pattern_len - off, 1 << 16);
    got.resize(n);
    s.as.read(s.buf + off, got.data(), n);
    for (uint64_t i = 0; i < n && r.data_ok; ++i) r.data_ok = got[i] == flow_byte(off + i, salt);
    off += n;
  }
  if (!r.data_ok) r.error = "destination buffer differs from the source";
  return r;
}

}  // namespace mprdma::host
