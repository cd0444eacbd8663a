// JobConfig: the keys of a scenario's jobs and their checks.
#include <algorithm>
#include <string>
#include <vector>

#include "vp/host/flow_sizes.h"
#include "vp/host/perftest.h"
#include "vp/nic/transport/engine_registry.h"

namespace mprdma::host {

const std::vector<std::pair<const char*, JobConfig::App>>& JobConfig::apps() {
  static const std::vector<std::pair<const char*, App>> a = {
      {"write_bw", App::write_bw},   {"read_bw", App::read_bw},   {"send_bw", App::send_bw},
      {"write_lat", App::write_lat}, {"read_lat", App::read_lat}, {"send_lat", App::send_lat},
      {"atomic_bw", App::atomic_bw}, {"rpc_bw", App::rpc_bw},     {"write_flows", App::write_flows},
  };
  return a;
}

const char* JobConfig::app_name(App app) {
  for (const auto& [name, value] : apps())
    if (value == app) return name;
  return "?";
}

void JobConfig::bind(core::Binder& b) {
  b.field("name", name, "Job name: results and metrics refer to it.");
  b.choice("app", app, apps(),
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
           "The rate counts answers. With request uc_write the requests are HERD's UC WRITEs "
           "into the server's memory instead (see request).");
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
  b.choice("atomic_op", atomic_op,
           {{"fetch_add", AtomicOp::fetch_add}, {"cmp_swap", AtomicOp::cmp_swap}},
           "Atomic of atomic_bw.");
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
  b.choice("sync_mode", sync_mode, {{"flag", SyncMode::flag}, {"stop_wait", SyncMode::stop_wait}},
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
          "Bandwidth tests: post this many WQEs behind one doorbell (perftest --post_list).", 1,
          4096, "WQEs");
  b.choice("transport", transport, {{"rc", QpType::rc}, {"ud", QpType::ud}, {"uc", QpType::uc}},
           "send_bw: rc = one RC connection per copy; ud = UD QPs, every SEND a datagram "
           "(payload at most the MTU, no ACKs, the server's RECVs take 40 bytes of GRH first). "
           "write_bw, send_bw: uc = one UC connection per copy (no ACKs, no retransmission, no "
           "rate control: a WQE completes once its packets left; a lost packet loses its "
           "message; send_bw needs rx_depth >= iterations, UC having no RNR NAK). rpc_bw: ud "
           "(its answers are UD SENDs).");
  b.choice("request", request, {{"send", RpcRequest::send}, {"uc_write", RpcRequest::uc_write}},
           "rpc_bw: how requests reach the server. send = UD SENDs into RECVs (a receive CQE "
           "per request); uc_write = HERD (Kalia et al., ATC'16 §4.2): each connection adds a "
           "UC QP pair, the client RDMA WRITEs its 8-byte request (inline; a nonzero sequence "
           "number that marks the slot valid) into its own ring of rx_depth 64-byte slots in "
           "the server's memory, and the server thread polls that ring (it wakes on the NIC's "
           "DMA writes into it and pays poll_overhead per poll that finds requests; no CQE), "
           "clears each slot it takes and answers by UD SEND as with send. Needs sizes [8].");
  b.choice("qp_transport", qp_transport, nic::EngineRegistry::instance().qp_transport_names(),
           "RC: the transport engine of the job's QPs (CREATE_QP's transport, by its name in "
           "<mprdma/hw.h>): default is the NICs' nic.transport; another must be offered by "
           "both NICs (nic.transport or nic.qp_transports; dcqcn is go-back-N paced by the "
           "NICs' nic.congestion_control, which must not be none).");
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
  b.field("use_srq", use_srq,
          "send_bw: the server's QP takes its RECVs from a shared receive queue of rx_depth "
          "WQEs, posted with post_srq_recv (perftest's --use_srq); with qps > 1 each "
          "connection has its own SRQ, as that many perftest processes would. RC and UC.");
  b.field("counters", counters,
          "atomic_bw: atomics go to this many 8-byte counters, chosen by counter_pick "
          "(fetch_add for more than one); every counter is checked at the end (their sum is "
          "the count).",
          1, 1 << 20, "counters");
  b.field("counter_stride", counter_stride,
          "atomic_bw: bytes between consecutive counters (a multiple of 8; 4096 puts them all "
          "on the same low 12 address bits).",
          8, uint64_t{1} << 20);
  b.choice("counter_pick", counter_pick,
           {{"round_robin", CounterPick::round_robin}, {"random", CounterPick::random}},
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
    if (rate.bps > 0 && app != App::write_bw && app != App::read_bw && app != App::send_bw &&
        app != App::write_flows)
      b.error("rate applies to write_bw, read_bw, send_bw and write_flows only");
    if (sync_ratio > 0 && app != App::write_bw) b.error("sync_ratio applies to write_bw only");
    if (duration.ps && app != App::write_bw && app != App::read_bw && app != App::write_flows)
      b.error("duration applies to write_bw, read_bw and write_flows only");
    if (app == App::write_flows) {
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
    } else if (flow_sizes != JobConfig{}.flow_sizes || flow_group != JobConfig{}.flow_group ||
               ideal_rate.bps || ideal_base.ps) {
      b.error("flow_sizes, flow_group, ideal_rate and ideal_base apply to write_flows only");
    }
    if (!via.empty() && udp_sport) b.error("give either via or udp_sport, not both");
    if (qps > 1 && app != App::write_bw && app != App::read_bw && app != App::send_bw &&
        app != App::atomic_bw && app != App::rpc_bw && app != App::write_flows)
      b.error(
          "qps applies to the bandwidth tests only (write_bw, read_bw, send_bw, atomic_bw, "
          "rpc_bw)");
    if (qps > 1 && sizes.size() != 1) b.error("qps > 1 needs exactly one size");
    if ((counters > 1 || counter_stride.n != 8 || counter_pick != CounterPick::round_robin) &&
        app != App::atomic_bw)
      b.error("counters, counter_stride and counter_pick apply to atomic_bw only");
    if (counters > 1 && atomic_op != AtomicOp::fetch_add)
      b.error("counters > 1 needs atomic_op fetch_add");
    if (counter_stride.n % 8) b.error("counter_stride must be a multiple of 8");
    if ((wqe_by_mmio || post_list > 1) && app != App::write_bw && app != App::read_bw &&
        app != App::send_bw && app != App::rpc_bw)
      b.error("wqe_by_mmio and post_list apply to write_bw, read_bw, send_bw and rpc_bw only");
    if (wqe_by_mmio && app == App::rpc_bw) b.error("rpc_bw posts by doorbell (post_list)");
    if (wqe_by_mmio && post_list > 1) b.error("give either wqe_by_mmio or post_list, not both");
    if (transport == QpType::ud && app != App::send_bw && app != App::rpc_bw)
      b.error("transport ud applies to send_bw and rpc_bw only");
    if (app == App::rpc_bw && transport != QpType::ud) b.error("rpc_bw needs transport ud");
    if (transport == QpType::uc && app != App::write_bw && app != App::send_bw)
      b.error("transport uc applies to write_bw and send_bw only");
    if (transport == QpType::uc && app == App::send_bw && rx_depth < iterations)
      b.error(
          "send_bw over transport uc needs rx_depth >= iterations: UC has no RNR NAK, a SEND "
          "finding no RECV is lost and the server would wait for it for ever");
    if (transport == QpType::uc && qp_transport != "default" && qp_transport != "gbn")
      b.error("qp_transport applies to RC: UC QPs have no transport engine");
    if (request != RpcRequest::send && app != App::rpc_bw)
      b.error("request applies to rpc_bw only");
    if (request == RpcRequest::uc_write)
      for (const core::Bytes& s : sizes)
        if (s.n != 8) b.error("request uc_write carries 8-byte requests: sizes must be [8]");
    if (app == App::rpc_bw && sizes.size() != 1) b.error("rpc_bw takes one size");
    if (app == App::rpc_bw)
      for (const core::Bytes& s : sizes)
        if (s.n > 24) b.error("rpc_bw requests carry at most 24 bytes");
    if ((send_imm || recv_sges != 1) && app != App::send_bw && app != App::rpc_bw)
      b.error("send_imm and recv_sges apply to send_bw and rpc_bw only");
    if (cqe_size.n != 32 && cqe_size.n != 64 && cqe_size.n != 128)
      b.error("cqe_size must be 32, 64 or 128 bytes");
    if (inline_recv && app != App::send_bw) b.error("inline_recv applies to send_bw only");
    if (inline_recv && cqe_size.n < 64) b.error("inline_recv needs cqe_size 64 or 128");
    if (use_srq && app != App::send_bw) b.error("use_srq applies to send_bw only");
    if (use_srq && transport == QpType::ud)
      b.error("use_srq applies to RC and UC: UD QPs take their RECVs from their own queue");
    if (recv_sges == 0)
      for (const core::Bytes& s : sizes)
        if (s.n) b.error("recv_sges 0 (header-only RECVs) needs sizes of 0 bytes");
    // As perftest does: a signal must fall inside every window of tx_depth
    // requests, or the sender would wait for a completion never asked for.
    cq_mod = std::min(cq_mod, tx_depth);
    if (app == App::atomic_bw) sizes = {core::Bytes{8}};
  }
}

bool JobConfig::is_latency() const {
  return app == App::write_lat || app == App::read_lat || app == App::send_lat;
}

}  // namespace mprdma::host
