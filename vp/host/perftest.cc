#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "vp/host/perftest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>

#include "vp/host/flow_sizes.h"
#include "vp/host/verbs.h"

namespace mprdma::host {
namespace {

const char* status_name(uint32_t s) {
  switch (s) {
    case MPR_CQE_SUCCESS: return "success";
    case MPR_CQE_LOC_LEN_ERR: return "local length error";
    case MPR_CQE_LOC_QP_OP_ERR: return "local QP operation error";
    case MPR_CQE_LOC_PROT_ERR: return "local protection error";
    case MPR_CQE_WR_FLUSH_ERR: return "work request flushed";
    case MPR_CQE_BAD_RESP_ERR: return "bad response";
    case MPR_CQE_REM_INV_REQ_ERR: return "remote invalid request";
    case MPR_CQE_REM_ACCESS_ERR: return "remote access error";
    case MPR_CQE_REM_OP_ERR: return "remote operational error";
    case MPR_CQE_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case MPR_CQE_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "error";
  }
}

// A failed completion as a run's error: its status and the NIC's syndrome.
std::string completion_error(const mpr_wc& wc) {
  return std::string("completion with status ") + status_name(wc.status) + " (syndrome " +
         std::to_string(wc.syndrome) + ")";
}

uint8_t mtu_code(uint64_t mtu) {
  switch (mtu) {
    case 256: return MPR_MTU_256;
    case 512: return MPR_MTU_512;
    case 1024: return MPR_MTU_1024;
    case 2048: return MPR_MTU_2048;
    default: return MPR_MTU_4096;
  }
}

double seconds_since(const sc_core::sc_time& t0) {
  return (sc_core::sc_time_stamp() - t0).to_seconds();
}

}  // namespace

void JobConfig::bind(core::Binder& b) {
  b.field("name", name, "Job name: results and metrics refer to it.");
  b.choice("app", app,
           {"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat", "atomic_bw",
            "rpc_bw", "write_flows"},
           "perftest-like application. write_flows: a flow workload, not a perftest: RDMA "
           "WRITE flows (one message each) whose sizes are drawn from flow_sizes (stream "
           "job.<name>[.qp<copy>].flow_sizes) and which arrive as a Poisson process offering "
           "`rate` of payload (stream ...arrivals) for `duration`; at most tx_depth are "
           "outstanding, later arrivals wait in order; each flow's completion time (arrival to "
           "its completion polled) goes to the histograms flow.<job>.fct_us and "
           "flows.<flow_group>.fct_us[.small|.medium|.large] (below 100 KB, 100 KB to 10 MB, "
           "above 10 MB); the destination is checked at the end. "
           "rpc_bw: Kalia et al.'s sequencer over UD: the client "
           "keeps tx_depth requests outstanding (SENDs of the size; 0 with recv_sges 0: "
           "header-only), the server answers each with the next number of its host's counter "
           "(an 8-byte inline payload, or the immediate when header-only), the answers of one "
           "poll (at most post_list) behind one doorbell, RECVs re-posted per poll behind one "
           "doorbell on both sides; the client checks its numbers grow. "
           "The rate counts answers.");
  b.field("client", client, "Host that issues the requests.");
  b.field("server", server, "Host that answers them.");
  b.field("enabled", enabled,
          "false: the job is checked but not run, as if it were not in the list (a later job's "
          "after_previous then waits for the enabled one before it); metrics naming it are "
          "left out. For sweeps that vary which jobs run, e.g. an incast's degree.");
  b.field("sizes", sizes, "Message sizes, run one after the other.", 0, uint64_t{1} << 31);
  b.field("iterations", iterations, "Messages per size.", 1, int64_t{1} << 32);
  b.field("tx_depth", tx_depth, "Outstanding requests of the bandwidth tests.", 1, 16384);
  b.field("rx_depth", rx_depth, "RECV WQEs kept posted by the SEND tests.", 1, 16384);
  b.field("cq_mod", cq_mod, "Signal one request in cq_mod (bandwidth tests).", 1, 16384);
  b.field("inline_size", inline_size, "Messages up to this size are sent inline.", 0, 1000);
  b.field("mtu", mtu, "Path MTU of the QP (256..4096, at most the NIC's).", 256, 4096);
  b.choice("atomic_op", atomic_op, {"fetch_add", "cmp_swap"}, "Atomic of atomic_bw.");
  b.field("events", events,
          "Wait for completion events (interrupts) instead of busy polling the CQ.");
  b.field("start", start, "Earliest start time of the job.");
  b.field("after_previous", after_previous,
          "Start only after the previous job of the scenario has ended.");
  int64_t t = timeout, r = retry_cnt;
  b.field("timeout", t, "IB local ACK timeout exponent: 4.096 us * 2^timeout.", 1, 31);
  b.field("retry_cnt", r, "Retransmissions before a WQE fails with retry exceeded.", 0, 7);
  timeout = static_cast<uint8_t>(t);
  retry_cnt = static_cast<uint8_t>(r);
  b.field("duration", duration,
          "Bandwidth tests (write_bw, read_bw): post messages for this long, then wait for the "
          "outstanding ones (perftest's -D); the result's iterations are the messages posted. "
          "0: run 'iterations' messages.");
  b.field("udp_sport", udp_sport,
          "RoCEv2 UDP source port of the client's QP, which ECMP hashes (0: the NIC derives it "
          "from the QP numbers).",
          0, 65535);
  b.field("via", via,
          "A fabric link the client's packets must cross, e.g. t0-s3: the platform picks the "
          "lowest UDP source port from 0xC000 whose ECMP path (the switches' own hash, so any "
          "seed) crosses it in the client-to-server direction; not with udp_sport.");
  b.field("rate", rate,
          "Bandwidth tests: offered load, the payload rate at which messages are posted "
          "(message i no earlier than i * size * 8 / rate after the first post; tx_depth still "
          "bounds the outstanding ones, so a run that cannot keep up becomes closed-loop). "
          "Not set (0bps): unpaced, as perftest. write_flows: the mean payload rate its "
          "Poisson arrivals offer (required).");
  b.field("sync_ratio", sync_ratio,
          "write_bw: fraction of the messages posted as synchronise messages, each chosen with "
          "this probability from the seeded stream job.<name>.sync (deterministic per seed).",
          0.0, 1.0);
  b.choice("sync_mode", sync_mode, {"flag", "stop_wait"},
           "How a synchronise message is sent: flag = the WRITE carries MPR_WQE_F_SYNC (MP-RDMA "
           "delays it by its synchronise interval; go-back-N ignores the flag); stop_wait = the "
           "application posts it only after every earlier message of the connection has "
           "completed, without the flag (the paper's MP-RDMA (Stop-Wait)).");
  b.field("qps", qps,
          "Connections: the test runs as this many copies, each with its own QPs, CQs, "
          "buffers and tx_depth (like that many perftest processes), set up one after "
          "another and started together; the job's result aggregates them (all bytes over "
          "the time from the common start to the last end). Bandwidth tests, one size; "
          "write_flows: each connection offers rate / qps.",
          1, 65536, "connections");
  b.field("wqe_by_mmio", wqe_by_mmio,
          "Bandwidth tests: write each send WQE into the QP's UAR page (WQE by MMIO, "
          "BlueFlame-style) instead of ringing the doorbell.");
  b.field("post_list", post_list,
          "Bandwidth tests: post this many WQEs behind one doorbell (perftest --post_list).",
          1, 4096, "WQEs");
  b.choice("transport", transport, {"rc", "ud"},
           "send_bw: rc = one RC connection per copy; ud = UD QPs, every SEND a datagram "
           "(payload at most the MTU, no ACKs, the server's RECVs take 40 bytes of GRH first).");
  b.choice("qp_transport", qp_transport, {"default", "gbn", "dcqcn", "mprdma", "irn"},
           "RC: the transport engine of the job's QPs (CREATE_QP's transport): default is "
           "the NICs' nic.transport; another must be offered by both NICs (nic.transport or "
           "nic.qp_transports; dcqcn is go-back-N on NICs with congestion_control dcqcn).");
  b.field("send_imm", send_imm,
           "send_bw: every SEND carries a 4-byte immediate, its message number, which the "
           "server checks in order (SEND with immediate; with size 0 a header-only SEND).");
  b.field("recv_sges", recv_sges,
          "send_bw: scatter entries of each of the server's RECVs: 1, or 0 for header-only "
          "RECVs (16-byte RECV WQEs; they take SENDs without payload only, placing nothing "
          "but the CQE).",
          0, 1, "entries");
  b.field("cqe_size", cqe_size,
          "CQE slot of every CQ of the job: 32, 64 or 128 bytes (Connect-IB writes 64-byte "
          "CQEs); the whole slot is written per completion.",
          32, 128);
  b.field("inline_recv", inline_recv,
          "send_bw: the server's receive CQ takes receives of at most cqe_size - 32 bytes "
          "(UD: the 40-byte GRH included) inside the CQE slot, no payload DMA; the data path "
          "copies them to the RECV's buffer when it polls (inline RECV). Needs cqe_size >= 64.");
  b.field("counters", counters,
          "atomic_bw: atomics go to this many 8-byte counters, chosen by counter_pick "
          "(fetch_add for more than one); every counter is checked at the end (their sum is "
          "the count).",
          1, 1 << 20, "counters");
  b.field("counter_stride", counter_stride,
          "atomic_bw: bytes between consecutive counters (a multiple of 8; 4096 puts them all "
          "on the same low 12 address bits).",
          8, uint64_t{1} << 20);
  b.choice("counter_pick", counter_pick, {"round_robin", "random"},
           "atomic_bw: the counter of each atomic: round_robin = 0, 1, .., counters - 1, 0, ..; "
           "random = uniform over the counters, from the seeded stream "
           "job.<name>[.qp<copy>].counters (Kalia et al.'s clients pick at random).");
  b.field("flow_sizes", flow_sizes,
          "write_flows: flow-size distribution, built in or named in the scenario's "
          "flow_size_cdfs. Built in: web_search, DCTCP's web-search workload (15 % below "
          "10 KB, 3 % above 10 MB, at most 30 MB, mean 1.71 MB; vp/host/flow_sizes.cc).");
  b.field("flow_group", flow_group,
          "write_flows: the flows.<group>.* FCT histograms this job's flows are counted in "
          "(jobs of one experiment share a group; one job per client-server pair makes an "
          "all-to-all workload, each pair a Poisson process).");
  b.field("ideal_rate", ideal_rate,
          "write_flows: payload rate of one flow alone on an idle network (e.g. 36.2Gbps on "
          "40 Gb/s links with 1 KB frames): with ideal_base, each flow's slowdown, FCT / "
          "(ideal_base + bytes * 8 / ideal_rate), goes to flow.<job>.slowdown and "
          "flows.<group>.slowdown. Not set: no slowdown.");
  b.field("ideal_base", ideal_base,
          "write_flows: the fixed part of a flow's idle-network time (a one-packet flow's "
          "completion time on the path, measured unloaded).");
  b.field("run_at", run_at,
          "The measured part starts at this time at the earliest (set-up happens before "
          "it), so that jobs whose set-up takes different times start together. 0: right "
          "after set-up.");
  if (b.reading()) {
    if (mtu.n & (mtu.n - 1)) b.error("mtu must be a power of two");
    if (rate.bps < 0) b.error("rate must not be negative");
    if (rate.bps > 0 && app != "write_bw" && app != "read_bw" && app != "send_bw" &&
        app != "write_flows")
      b.error("rate applies to write_bw, read_bw, send_bw and write_flows only");
    if (sync_ratio > 0 && app != "write_bw") b.error("sync_ratio applies to write_bw only");
    if (duration.ps && app != "write_bw" && app != "read_bw" && app != "write_flows")
      b.error("duration applies to write_bw, read_bw and write_flows only");
    if (app == "write_flows") {
      if (!rate.bps) b.error("write_flows needs rate (the offered load)");
      if (!duration.ps) b.error("write_flows needs duration (how long flows arrive)");
      if (flow_group.empty() || flow_group.find_first_of(".,()|* ") != std::string::npos)
        b.error("flow_group must be a name without dots, commas, parentheses or spaces");
      // The one "size" is the largest flow: the buffers' size and the key of
      // the job's result (job.<size>.<field>).
      // (a scenario's own distribution: set when the scenario resolves it)
      const std::vector<std::string> builtin = FlowSizes::names();
      if (std::find(builtin.begin(), builtin.end(), flow_sizes) != builtin.end())
        sizes = {core::Bytes{FlowSizes::named(flow_sizes).max_bytes()}};
      if (ideal_base.ps && !ideal_rate.bps) b.error("ideal_base needs ideal_rate");
    } else if (flow_sizes != "web_search" || flow_group != "all" || ideal_rate.bps ||
               ideal_base.ps) {
      b.error("flow_sizes, flow_group, ideal_rate and ideal_base apply to write_flows only");
    }
    if (!via.empty() && udp_sport) b.error("give either via or udp_sport, not both");
    if (qps > 1 && app != "write_bw" && app != "read_bw" && app != "send_bw" &&
        app != "atomic_bw" && app != "rpc_bw" && app != "write_flows")
      b.error("qps applies to the bandwidth tests only (write_bw, read_bw, send_bw, atomic_bw, "
              "rpc_bw)");
    if (qps > 1 && sizes.size() != 1) b.error("qps > 1 needs exactly one size");
    if ((counters > 1 || counter_stride.n != 8 || counter_pick != "round_robin") &&
        app != "atomic_bw")
      b.error("counters, counter_stride and counter_pick apply to atomic_bw only");
    if (counters > 1 && atomic_op != "fetch_add") b.error("counters > 1 needs atomic_op fetch_add");
    if (counter_stride.n % 8) b.error("counter_stride must be a multiple of 8");
    if ((wqe_by_mmio || post_list > 1) && app != "write_bw" && app != "read_bw" &&
        app != "send_bw" && app != "rpc_bw")
      b.error("wqe_by_mmio and post_list apply to write_bw, read_bw, send_bw and rpc_bw only");
    if (wqe_by_mmio && app == "rpc_bw") b.error("rpc_bw posts by doorbell (post_list)");
    if (wqe_by_mmio && post_list > 1) b.error("give either wqe_by_mmio or post_list, not both");
    if (transport == "ud" && app != "send_bw" && app != "rpc_bw")
      b.error("transport ud applies to send_bw and rpc_bw only");
    if (app == "rpc_bw" && transport != "ud") b.error("rpc_bw needs transport ud");
    if (app == "rpc_bw" && sizes.size() != 1) b.error("rpc_bw takes one size");
    if (app == "rpc_bw")
      for (const core::Bytes& s : sizes)
        if (s.n > 24) b.error("rpc_bw requests carry at most 24 bytes");
    if ((send_imm || recv_sges != 1) && app != "send_bw" && app != "rpc_bw")
      b.error("send_imm and recv_sges apply to send_bw and rpc_bw only");
    if (cqe_size.n != 32 && cqe_size.n != 64 && cqe_size.n != 128)
      b.error("cqe_size must be 32, 64 or 128 bytes");
    if (inline_recv && app != "send_bw") b.error("inline_recv applies to send_bw only");
    if (inline_recv && cqe_size.n < 64) b.error("inline_recv needs cqe_size 64 or 128");
    if (recv_sges == 0)
      for (const core::Bytes& s : sizes)
        if (s.n) b.error("recv_sges 0 (header-only RECVs) needs sizes of 0 bytes");
    // As perftest does: a signal must fall inside every window of tx_depth
    // requests, or the sender would wait for a completion never asked for.
    cq_mod = std::min(cq_mod, tx_depth);
    if (app == "atomic_bw") sizes = {core::Bytes{8}};
  }
}

bool JobConfig::is_latency() const {
  return app == "write_lat" || app == "read_lat" || app == "send_lat";
}

// One side of the connection: a process with its context and resources.
struct PerfTest::Side {
  Side(ModeledHost& h) : host(h), as(h.new_address_space()) {}
  ModeledHost& host;
  AddressSpace& as;
  std::unique_ptr<VerbsContext> ctx;
  uint32_t pd = 0;
  uint64_t buf = 0;  // [send half | receive half]
  uint64_t half = 0;
  MemoryRegion mr;
  CompletionQueue* scq = nullptr;
  CompletionQueue* rcq = nullptr;
  QueuePair* qp = nullptr;
  mpr_wqe_ud peer{};  // transport ud: the other side's address
};

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
  if (cfg.app == "atomic_bw")
    m = std::max(m, static_cast<uint64_t>(cfg.counters - 1) * cfg.counter_stride.n + 8);
  if (cfg.transport == "ud") m = std::max<uint64_t>(m, MPR_UD_GRH_BYTES);  // GRH space
  if (cfg.app == "rpc_bw") m = std::max<uint64_t>(m, static_cast<uint64_t>(cfg.rx_depth) * 64);
  return m;
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
  if (cfg_.app == "rpc_bw" && cfg_.recv_sges != 0)
    caps.max_inline = std::max<uint32_t>(caps.max_inline, 8);
  caps.max_recv_sge = static_cast<uint32_t>(cfg_.recv_sges);
  const bool ud = cfg_.transport == "ud";
  if (ud) caps.qp_type = MPR_QPT_UD;
  caps.transport = transport_kind(cfg_.qp_transport);
  for (Side* s : {client_.get(), server_.get()}) {
    s->ctx = std::make_unique<VerbsContext>(s->host.driver(), s->as, s->host.config());
    s->pd = s->ctx->alloc_pd();
    s->half = buffer_bytes(cfg_);
    s->buf = s->as.alloc(2 * s->half);
    s->mr = s->ctx->reg_mr(s->pd, s->buf, 2 * s->half, access);
    const uint32_t cq_entries = static_cast<uint32_t>(caps.max_send_wr + caps.max_recv_wr);
    const uint8_t log_cqe = cfg_.cqe_size.n == 128 ? 7 : cfg_.cqe_size.n == 64 ? 6 : 5;
    s->scq = s->ctx->create_cq(cq_entries, log_cqe);
    s->rcq = s->ctx->create_cq(cq_entries, log_cqe, cfg_.inline_recv && s == server_.get());
    s->qp = s->ctx->create_qp(s->pd, s->scq, s->rcq, caps);
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
    return;
  }
  const uint8_t mtu = mtu_code(cfg_.mtu.n);
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
    if (cfg_.app == "write_lat")
      r = run_write_lat(size.n);
    else if (cfg_.app == "read_lat")
      r = run_read_lat(size.n);
    else if (cfg_.app == "send_lat")
      r = run_send_lat(size.n);
    else if (cfg_.app == "atomic_bw")
      r = run_atomic(size.n);
    else if (cfg_.app == "write_flows")
      r = run_flows(size.n);
    else
      r = cfg_.app == "rpc_bw" ? run_rpc(size.n) : run_bw(size.n);
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
  const bool read = cfg_.app == "read_bw";
  const bool send = cfg_.app == "send_bw";

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
  if (cfg_.transport == "ud") wr.ud = &c.peer;
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
  const bool stop_wait = cfg_.sync_mode == "stop_wait";
  core::RandomStream* sync_rng =
      cfg_.sync_ratio > 0 ? &stream("sync") : nullptr;
  auto draw_sync = [&] { return sync_rng != nullptr && sync_rng->bernoulli(cfg_.sync_ratio); };
  bool cur_sync = draw_sync();
  bool stalled = false;
  sc_core::sc_time stall_since;
  std::vector<mpr_wc> wc(64);
  while (c.qp->dp.sq.ci - ci0 < r.iterations) {
    bool wait_due = false;
    // post_list: a batch starts only when it fits whole (as perftest does).
    const uint64_t batch = static_cast<uint64_t>(cfg_.post_list);
    while (posted < r.iterations && posted - (c.qp->dp.sq.ci - ci0) <
                                        static_cast<uint64_t>(cfg_.tx_depth)) {
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
      const bool last = timed && sc_core::sc_time_stamp() >= deadline &&
                        (posted + 1) % cfg_.cq_mod == 0;
      if ((posted + 1) % cfg_.cq_mod == 0 || posted + 1 == r.iterations ||
          (stop_wait && next_sync))
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
    const int n =
        wait_due ? wait_completions_until(c, c.scq, static_cast<int>(wc.size()), wc.data(),
                                          due(posted))
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
  r.data_ok = got == pattern;
  if (!r.data_ok) r.error = "destination buffer differs from the source";
  return r;
}

// ----------------------------------------------------------------- flows --

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
  env_.stats.histogram("flow." + cfg_.name + ".fct_us", "us",
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
  env_.stats.histogram("flow." + cfg_.name + ".slowdown", "",
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
  wr.remote_addr = s.buf + s.half;
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
    const int n = arrivals_left ? wait_completions_until(c, c.scq, static_cast<int>(wc.size()),
                                                         wc.data(), next)
                                : wait_completions(c, c.scq, static_cast<int>(wc.size()),
                                                   wc.data());
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
    s.as.read(s.buf + s.half + off, got.data(), n);
    for (uint64_t i = 0; i < n && r.data_ok; ++i) r.data_ok = got[i] == flow_byte(off + i, salt);
    off += n;
  }
  if (!r.data_ok) r.error = "destination buffer differs from the source";
  return r;
}

void PerfTest::server_recv_loop(uint64_t count, uint64_t& received, std::string& error) {
  Side& s = *server_;
  // UD: the datagram lands after 40 bytes of GRH, which take the end of
  // the (unused) send half, so the data still starts at buf + half.
  const bool ud = cfg_.transport == "ud";
  const uint64_t grh = ud ? MPR_UD_GRH_BYTES : 0;
  mpr_sge sge{s.buf + s.half - grh, static_cast<uint32_t>(s.half + grh), s.mr.key};
  const bool header_only = cfg_.recv_sges == 0;
  mpr_recv_wr rwr{0, &sge, header_only ? 0u : 1u};
  const uint64_t depth = std::min<uint64_t>(count, static_cast<uint64_t>(cfg_.rx_depth));
  uint64_t posted = 0;
  for (; posted < depth; ++posted)
    if (s.ctx->post_recv(s.qp, rwr)) {
      error = "post_recv failed";
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
      if (ud && (wc[i].src_qp != client_->qp->qpn ||
                 !(wc[i].flags & MPR_CQE_F_GRH) != header_only)) {
        error = "UD receive completion from QP " + std::to_string(wc[i].src_qp) +
                " (expected " + std::to_string(client_->qp->qpn) + ") or with GRH flag " +
                std::to_string(!!(wc[i].flags & MPR_CQE_F_GRH));
        return;
      }
      if (header_only && wc[i].byte_len != 0) {
        error = "header-only RECV completed with " + std::to_string(wc[i].byte_len) + " bytes";
        return;
      }
      // send_imm: the immediates are the message numbers, in order.
      if (cfg_.send_imm &&
          (!(wc[i].flags & MPR_CQE_F_IMM) ||
           __builtin_bswap32(wc[i].imm_data) != static_cast<uint32_t>(received))) {
        error = "RECV " + std::to_string(received) + " completed with immediate " +
                ((wc[i].flags & MPR_CQE_F_IMM)
                     ? std::to_string(__builtin_bswap32(wc[i].imm_data))
                     : std::string("none"));
        return;
      }
      ++received;
      if (posted < count) {
        s.ctx->post_recv(s.qp, rwr);
        ++posted;
      }
    }
  }
}

// --------------------------------------------------------------- latency --

void PerfTest::finish_latency(SizeResult& r, std::vector<double>& us) {
  if (us.empty()) return;
  summarize_latency(r, us);
  core::Histogram& h = env_.stats.histogram(
      "flow." + cfg_.name + ".latency_us_" + std::to_string(r.bytes), "us",
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
  std::vector<uint8_t> pattern(size);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng_.next_u64());
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
  std::vector<uint8_t> pattern(size);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng_.next_u64());
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
      r.error = std::string("completion with status ") + status_name(wc.status);
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
  std::vector<uint8_t> pattern(size);
  for (auto& b : pattern) b = static_cast<uint8_t>(rng_.next_u64());
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

// --------------------------------------------------------------- atomics --

// ------------------------------------------------------------------- rpc --

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
  mpr_sge sge{side.buf + side.half + slot * kRpcSlot, static_cast<uint32_t>(kRpcSlot),
              side.mr.key};
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

SizeResult PerfTest::run_atomic(uint64_t) {
  SizeResult r;
  r.bytes = 8;
  r.iterations = static_cast<uint64_t>(cfg_.iterations);
  Side& c = *client_;
  Side& s = *server_;
  const bool cas = cfg_.atomic_op == "cmp_swap";
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
  const bool random_pick = cfg_.counter_pick == "random";
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
      wr.flags = ((posted + 1) % cfg_.cq_mod == 0 || posted + 1 == r.iterations)
                     ? MPR_WQE_F_SIGNALED
                     : 0;
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
