// Applications modeled on perftest (linux-rdma/perftest): bandwidth and
// latency of RDMA WRITE, READ and SEND, and atomic bandwidth, between a
// client and a server host, over one RC QP, for a list of message sizes.
//
// They follow perftest's method: bandwidth tests keep tx_depth requests
// outstanding and signal one in cq_mod; they are timed from the first post
// to the last completion. write_lat is a ping-pong in which each side polls
// the last byte of its receive buffer; send_lat a SEND/RECV ping-pong;
// latency is half the round trip (read_lat: the whole READ). Out-of-band
// connection set-up (perftest's TCP exchange) takes no simulated time here.
//
// Unlike perftest, every run also checks the data: after each size, the
// destination buffer must equal the source pattern byte for byte (for
// atomics: the remote counter must hold the expected value).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/sim_env.h"
#include "vp/core/units.h"
#include "vp/host/flow_sizes.h"
#include "vp/host/modeled_host.h"
#include "vp/host/verbs.h"

namespace mprdma::host {

struct JobConfig {
  std::string name;
  // false: checked like the others but not run (the scenario loader drops
  // it), so that a sweep can vary which jobs take part.
  bool enabled = true;
  enum class App {
    write_bw,
    read_bw,
    send_bw,
    write_lat,
    read_lat,
    send_lat,
    atomic_bw,
    rpc_bw,
    write_flows
  };
  // The scenario names of App's values (app_name() and the binder).
  static const std::vector<std::pair<const char*, App>>& apps();
  static const char* app_name(App a);
  App app = App::write_bw;
  std::string client;
  std::string server;
  std::vector<core::Bytes> sizes{core::Bytes{65536}};
  int64_t iterations = 1000;
  int64_t tx_depth = 128;      // outstanding requests of the bandwidth tests
  int64_t rx_depth = 512;      // RECVs kept posted by send tests
  int64_t cq_mod = 100;        // signal one send in cq_mod
  core::Bytes inline_size{0};  // messages up to this size are sent inline
  core::Bytes mtu{1024};       // path MTU of the QP
  enum class AtomicOp { fetch_add, cmp_swap };
  AtomicOp atomic_op = AtomicOp::fetch_add;
  bool events = false;         // wait on completion events instead of polling
  core::Duration start{0};     // not before this time...
  bool after_previous = true;  // ...and not before the previous job ended
  uint8_t timeout = 14;        // IB local ACK timeout exponent
  uint8_t retry_cnt = 7;
  // Bandwidth tests (write_bw, read_bw): post for this long, then drain
  // (perftest's -D); `iterations` is then the number of messages posted.
  // 0: run `iterations` messages.
  core::Duration duration{0};
  // RoCEv2 UDP source port of the client's QP (0: the NIC derives it from
  // the QPNs). With ECMP it chooses the path; the platform sets it from
  // `via` when that names a link.
  int64_t udp_sport = 0;
  std::string via;  // a link the client's packets must cross (platform.cc)
  // Bandwidth tests: offered load. Message i is posted no earlier than
  // i * size * 8 / rate after the first post (periodic arrivals of the
  // payload at `rate`); a message that finds tx_depth outstanding waits as
  // before, so a run that cannot keep up becomes closed-loop. 0: unpaced
  // (perftest); the key cannot be set to 0, leave it out.
  core::Bandwidth rate{0};
  // write_bw: each message is a synchronise message with probability
  // sync_ratio, drawn from the seeded stream "job.<name>.sync" (one draw per
  // message posted, in order). sync_mode "flag": the WRITE carries
  // MPR_WQE_F_SYNC (MP-RDMA delays it in the NIC; go-back-N ignores it);
  // "stop_wait": the application posts it only once every earlier message
  // of the connection has completed (the message before it is signalled for
  // that) and does not set the flag (the paper's MP-RDMA (Stop-Wait)).
  double sync_ratio = 0;
  enum class SyncMode { flag, stop_wait };
  SyncMode sync_mode = SyncMode::flag;
  // Bandwidth tests: run as this many connections, each a copy of the test
  // with its own QPs, CQs, buffers and tx_depth (like that many perftest
  // processes): set up one after another, started together, results
  // aggregated (bytes of all over the time from the common start to the
  // last end). Needs exactly one size.
  int64_t qps = 1;
  // atomic_bw: the atomics go (counter_pick) to this many 8-byte counters of
  // the server's buffer, `counter_stride` bytes apart (Kalia et al.'s Z
  // counters; a stride of 4096 puts every counter on the same low 12
  // address bits). More than one counter needs fetch_add.
  // Bandwidth tests: how send WQEs reach the NIC. wqe_by_mmio: each WQE is
  // written into the QP's UAR page (WQE by MMIO, no doorbell, no DMA read of
  // it); post_list B: B WQEs are posted, then one doorbell (perftest's
  // --post_list), and the NIC reads them by DMA.
  bool wqe_by_mmio = false;
  int64_t post_list = 1;
  // send_bw: "ud" runs it over UD QPs (datagram SENDs with the server's
  // address in every WQE, one packet per message, no ACKs; the server's
  // RECVs leave 40 bytes of GRH space before the data). write_bw, send_bw:
  // "uc" over UC QPs (no ACKs: a WQE completes once its packets left).
  enum class QpType { rc, ud, uc };
  QpType transport = QpType::rc;
  // rpc_bw: how requests reach the server. send: UD SENDs into RECVs (a CQE
  // per request at the server); uc_write: HERD (Kalia et al., SIGCOMM'14,
  // ATC'16 §4.2): each client connection has a UC QP connected to one of
  // the server's, and WRITEs its 8-byte request (inline, a nonzero sequence
  // number that marks the slot valid) into its own ring of 64-byte slots in
  // the server's memory; the server thread polls that memory (no CQE),
  // answers as with send (UD SENDs, one doorbell per poll).
  enum class RpcRequest { send, uc_write };
  RpcRequest request = RpcRequest::send;
  // RC: the QPs' transport engine (CREATE_QP's transport): "default" (the
  // NIC's nic.transport), gbn, dcqcn, mprdma or irn.
  std::string qp_transport = "default";
  // send_bw: every SEND carries a 4-byte immediate, its message number
  // (low 32 bits), which the server checks in order; with size 0 it is a
  // header-only SEND (Kalia et al.).
  bool send_imm = false;
  // send_bw: scatter entries of the server's RECVs (1, or 0 for header-only
  // RECVs: 16-byte WQEs that take only SENDs without payload).
  int64_t recv_sges = 1;
  // CQE slots of the job's CQs (32, 64 or 128 bytes); inline_recv: the
  // server's receive CQ takes receives of up to cqe_size - 32 bytes inside
  // its CQEs (inline RECV; needs cqe_size >= 64).
  core::Bytes cqe_size{32};
  bool inline_recv = false;
  // send_bw: the server's QP takes its RECVs from a shared receive queue of
  // rx_depth WQEs (perftest's --use_srq); each connection of qps > 1 has
  // its own, as that many perftest processes would.
  bool use_srq = false;
  int64_t counters = 1;
  core::Bytes counter_stride{8};
  // atomic_bw: which counter each atomic targets: "round_robin" (0, 1, ..,
  // counters - 1, 0, ..) or "random" (uniform, drawn from the seeded stream
  // job.<name>[.qp<copy>].counters, as Kalia et al.'s clients pick them).
  enum class CounterPick { round_robin, random };
  CounterPick counter_pick = CounterPick::round_robin;
  // write_flows: flow sizes from this distribution (a built-in one,
  // FlowSizes::named, or one of the scenario's flow_size_cdfs), and the
  // group whose FCT histograms (flows.<group>.*) the job's flows join.
  std::string flow_sizes = "web_search";
  // Not a key: the CDF of a scenario-defined flow_sizes, filled in when the
  // scenario is checked (empty: flow_sizes is built in).
  std::vector<FlowSizes::Point> flow_size_cdf;
  std::string flow_group = "all";
  // write_flows: slowdown = FCT / (ideal_base + bytes * 8 / ideal_rate),
  // the flow's time alone on an idle network (ideal_rate 0: no slowdown).
  core::Bandwidth ideal_rate{0};
  core::Duration ideal_base{0};
  // The measured part starts at this time at the earliest; set-up (QPs,
  // buffers, connection) happens before it. Jobs whose set-up takes
  // different times can so start together. 0: right after set-up.
  core::Duration run_at{0};
  void bind(core::Binder& b);
  bool is_latency() const;
};

struct SizeResult {
  uint64_t bytes = 0;
  uint64_t iterations = 0;
  double seconds = 0;          // simulated duration of the run
  double bw_gbps = 0;          // payload bits per second / 1e9
  double bw_MBps = 0;          // payload bytes per second / 2^20 (perftest's MB)
  double msg_rate_mpps = 0;    // messages per second / 1e6
  uint64_t sync_messages = 0;  // messages posted as synchronise (sync_ratio)
  double sync_wait_us = 0;     // stop_wait: time posting waited for completions
  // Latency in microseconds (latency tests).
  double t_min = 0, t_max = 0, t_typical = 0, t_avg = 0, t_stdev = 0, t_p99 = 0, t_p999 = 0;
  bool data_ok = false;
  std::string error;  // empty if the run completed
  // write_flows: payload moved, its messages being of different sizes (0:
  // the run's messages were all `bytes` long).
  uint64_t payload = 0;
  double payload_bytes() const {
    return payload ? double(payload) : double(bytes) * double(iterations);
  }
};

class PerfTest {
 public:
  // Bytes of each half (send, receive) of one connection's buffer on each
  // host: the largest message, or what the app needs beside it.
  static uint64_t buffer_bytes(const JobConfig& cfg);
  // Halves of that buffer each side has: 2, a send and a receive half, for
  // the tests that move data both ways or check it on either side; 1 for
  // write_flows, whose client only reads its source and whose server only
  // takes the writes (a web-search workload's 30 MB largest flow would
  // otherwise map, and register in the MTT, 30 MB per end never touched).
  static int buffer_halves(const JobConfig& cfg);
  // What setup() takes of a NIC's tables for one connection end (on the
  // client and on the server alike): one MR over its buffer halves (their
  // 4 KiB pages are MTT entries), one QP, a send and a receive CQ.
  struct EndTables {
    uint64_t mtt_entries = 0;
    uint64_t mrs = 1, qps = 1, cqs = 2;  // qps: 2 for rpc_bw's uc_write (UD + UC)
    uint64_t server_srqs = 0;            // on the server end only: use_srq
  };
  static EndTables end_tables(const JobConfig& cfg);
  // `copy` numbers the connections of a job with qps > 1; copy 0 draws
  // from the streams job.<name>.*, copy k > 0 from job.<name>.qp<k>.*.
  PerfTest(const JobConfig& cfg, ModeledHost& client, ModeledHost& server, core::SimEnv& env,
           int copy = 0);
  ~PerfTest();
  // Creates the QPs and connects them (SC_THREAD context); false, with the
  // failure recorded as the result, if that failed. run() calls it if needed.
  bool prepare();
  // Runs every size (SC_THREAD context). Never throws: failures are recorded.
  void run();
  const std::vector<SizeResult>& results() const { return results_; }
  const JobConfig& config() const { return cfg_; }
  bool failed() const;

 private:
  struct Side;
  void setup();
  SizeResult run_bw(uint64_t size);
  SizeResult run_flows(uint64_t max_size);
  void record_fct(uint64_t bytes, double fct_us);
  SizeResult run_write_lat(uint64_t size);
  SizeResult run_read_lat(uint64_t size);
  SizeResult run_send_lat(uint64_t size);
  SizeResult run_atomic(uint64_t size);
  SizeResult run_rpc(uint64_t size);
  void rpc_server_loop(uint64_t count, std::string& error);
  // rpc_bw with request uc_write: the server thread polls its request
  // region (woken by the NIC's DMA writes into it) instead of a CQ.
  void rpc_herd_server_loop(uint64_t count, std::string& error);
  // Posts (no doorbell) the answer to request `answered` on the server's UD
  // QP, making room in its send queue first; false with `error` set.
  bool post_rpc_answer(uint64_t answered, uint64_t count, uint64_t& unsignaled, std::string& error);
  int post_rpc_recv(Side& side, uint64_t slot, bool header_only);
  void server_recv_loop(uint64_t count, uint64_t& received, std::string& error);
  int wait_completions(Side& s, CompletionQueue* cq, int n, mpr_wc* wc);
  // Like wait_completions, but returns 0 once `until` has come.
  int wait_completions_until(Side& s, CompletionQueue* cq, int n, mpr_wc* wc,
                             const sc_core::sc_time& until);
  void finish_latency(SizeResult& r, std::vector<double>& samples_us);
  // `size` bytes drawn from the job's data stream (a latency test's payload).
  std::vector<uint8_t> random_pattern(uint64_t size);
  // The t_* fields from the samples (sorted in place).
  static void summarize_latency(SizeResult& r, std::vector<double>& samples_us);
  core::RandomStream& stream(const std::string& what);

  JobConfig cfg_;
  ModeledHost& client_host_;
  ModeledHost& server_host_;
  core::SimEnv& env_;
  std::string stream_prefix_;  // job.<name>. or job.<name>.qp<k>.
  core::RandomStream& rng_;
  bool prepared_ = false;
  std::unique_ptr<Side> client_, server_;
  std::vector<SizeResult> results_;
};

}  // namespace mprdma::host
