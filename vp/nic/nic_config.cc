#include "vp/nic/nic_config.h"

#include <mprdma/hw.h>

namespace mprdma::nic {

void NicLatencies::bind(core::Binder& b) {
  b.field("doorbell", doorbell, "Decode a doorbell and schedule its QP.", 0, 1000000, "cycles");
  b.field("wqe_parse", wqe_parse, "Parse, validate and translate one fetched WQE.", 0, 1000000,
          "cycles");
  b.field("tx_schedule", tx_schedule,
          "The TX scheduler picks the next QP to send a packet; bounds the NIC's packet rate "
          "over all QPs.",
          1, 1000000, "cycles");
  b.field("tx_packet", tx_packet,
          "Build one outgoing packet, on the QP's processing unit; bounds one PU's packet "
          "rate.",
          1, 1000000, "cycles");
  b.field("rx_parse", rx_parse,
          "The in-order receive stage parses one frame's headers (and fetches its QP context) "
          "before handing it to the QP's processing unit; bounds the NIC's receive rate.",
          1, 1000000, "cycles");
  b.field("rx_packet", rx_packet,
          "Look up and check one incoming packet, on the QP's processing unit.", 1, 1000000,
          "cycles");
  b.field("ack_process", ack_process, "Process one ACK, NAK or response in the requester.", 0,
          1000000, "cycles");
  b.field("cqe", cqe, "Build one CQE or EQE before its DMA write.", 0, 1000000, "cycles");
  b.field("command", command, "Firmware execution time of one admin command, not counting its DMA.",
          0, 100000000, "cycles");
  b.field("reset", reset, "Device reset until STATUS.READY is set again.", 1, 100000000, "cycles");
}

void NicLimits::bind(core::Binder& b) {
  b.field("max_qp", max_qp, "Queue pairs.", 1, 1 << 20);
  b.field("max_cq", max_cq, "Completion queues.", 1, 1 << 20);
  b.field("max_eq", max_eq, "Event queues (one MSI-X vector each, at most 32).", 1, 32);
  b.field("max_pd", max_pd, "Protection domains.", 1, 1 << 20);
  b.field("max_mr", max_mr, "Memory regions.", 1, 1 << 24);
  // MTT indices are 32-bit: 2^32 entries would wrap to 0.
  b.field("max_mtt", max_mtt, "Page translation entries over all memory regions.", 1,
          int64_t{UINT32_MAX});
  b.field("max_qp_wr", max_qp_wr, "WQEs per send or receive queue.", 2, 32768);
  b.field("max_sge", max_sge, "Scatter/gather entries per WQE.", 1, 60);
  b.field("max_inline", max_inline, "Inline payload per send WQE.", 0, 1000, "bytes");
  b.field("max_cqe", max_cqe, "Entries per completion queue.", 2, 1 << 24);
  b.field("max_rd_atomic", max_rd_atomic, "Outstanding READ and atomic requests per QP.", 1, 255);
  b.field("max_gids", max_gids, "Entries of the GID table.", 1, 256);
  b.field("num_uar_pages", num_uar_pages, "4 KiB doorbell pages in BAR2.", 2, 65535);
}

void HandlesConfig::bind(core::Binder& b) {
  b.field("key_random_bits", key_random_bits,
          "Bits of every memory key (lkey/rkey) drawn at random at each registration, from "
          "the stream nic.<name>.handles, below the MPT index: a peer cannot guess a key from "
          "another, and a key kept after DEREG_MR never matches the entry's next region. 0: "
          "the key is the MPT index (a stale key then does).",
          0, 24, "bits");
  b.choice("qpn", qpn, {"lowest_free", "random"},
           "QP numbers: lowest_free hands out 2, 3, ... (readable traces, and the UDP source "
           "ports, a hash of the QP numbers, of every reproduction); random keeps the QP's "
           "table index in the low bits and draws the rest of the 24 at random (stream "
           "nic.<name>.handles), so that a peer cannot guess a QP number from another.");
}

void GbnConfig::bind(core::Binder& b) {
  b.field("go_back_delay", go_back_delay,
          "Time from the event that sends a go-back-N requester back (a sequence NAK, a "
          "timeout, a missing READ response) to its first resent packet; the QP sends nothing "
          "meanwhile. 0: a hardware go-back that turns around at once. Commodity RoCE NICs "
          "are much slower to recover: the MP-RDMA paper (§2, citing DCQCN) reports 0.1 % "
          "loss cutting a RoCE flow below ~60 % of its throughput, ~140 us per loss at "
          "40 Gb/s with 1 KB frames (vp/nic/transport/transport.md, \"Go-back-N\").",
          core::Duration{}, core::Duration::from_ps(1000000000000ull));
}

void DcqcnConfig::bind(core::Binder& b) {
  const core::Duration us1 = core::Duration::from_ps(1000000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("min_cnp_interval", min_cnp_interval,
          "Notification point: at most one CNP per QP per this interval, sent for the first "
          "CE-marked packet after it (paper: N = 50 us).",
          core::Duration{}, s1);
  b.field("g", g, "Reaction point: gain of the alpha average (paper: 1/256).", 1e-6, 1.0);
  b.field("initial_alpha", initial_alpha,
          "Alpha of a QP before its first CNP; the first cut is Rc * (1 - alpha/2) (not in "
          "the paper: 1, the first CNP halves the rate).",
          0.0, 1.0);
  b.field("alpha_update_interval", alpha_update_interval,
          "K: alpha <- (1-g) alpha once per interval without a CNP (paper: 55 us).", us1, s1);
  b.field("rate_increase_timer", rate_increase_timer,
          "T: one rate-increase event per interval since the last CNP (paper: 55 us).", us1, s1);
  b.field("byte_counter", byte_counter,
          "B: one rate-increase event per this many bytes sent (wire bytes) since the last "
          "CNP (paper: 10 MB).",
          1, uint64_t{1} << 40);
  b.field("fast_recovery_stages", fast_recovery_stages,
          "F: rate-increase events of fast recovery, Rc <- (Rt + Rc)/2, before additive "
          "increase (paper: 5).",
          0, 1000, "events");
  b.field("rate_ai", rate_ai,
          "R_AI: additive increase of the target rate per event (paper: "
          "40 Mbps).");
  b.field("rate_hai", rate_hai,
          "R_HAI: hyper increase of the target rate, times the events beyond F of the slower "
          "counter (not given by the paper: 10 R_AI, QCN's ratio).");
  b.field("min_rate", min_rate, "Floor of the current rate (not in the paper: 10 Mbps).");
  if (rate_ai.bps <= 0 || rate_hai.bps <= 0 || min_rate.bps <= 0)
    b.error("rate_ai, rate_hai and min_rate must be positive");
}

void MpRdmaConfig::bind(core::Binder& b) {
  const core::Duration ns1 = core::Duration::from_ps(1000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("initial_window", initial_window,
          "IW: congestion window at start and after idle, spread over IW random virtual paths "
          "(the paper: one BDP).",
          1, 65535, "packets");
  b.field("delta", delta,
          "Delta: out-of-order degree the path selection aims at; snd_ool = snd_ooh - delta "
          "(paper: 32).",
          1, 65536, "packets");
  b.field("bitmap_slots", bitmap_slots,
          "L: slots of the receiver's 2-bit tracking bitmap; a packet beyond rcv_nxt + L is "
          "dropped and NACKed (paper: 64).",
          2, 65536, "packets");
  if (bitmap_slots & (bitmap_slots - 1)) b.error("bitmap_slots must be a power of two");
  b.field("ooo_control", ooo_control,
          "Out-of-order-aware path selection: an ACK whose SACK is below snd_ool lowers cwnd "
          "by one and clocks nothing out on its path. Off: the M8 baseline.");
  b.choice(
      "overflow_nack", overflow_nack, {"every_drop", "once_per_head"},
      "How the receiver answers packets it drops beyond its bitmap (the paper: \"a NACK "
      "will be generated\", not how many): every_drop NACKs each one, naming rcv_nxt, so "
      "the dropped packet's path keeps its ACK clock; once_per_head NACKs the first drop "
      "per rcv_nxt only (3 more bytes of receiver state). vp/nic/transport/transport.md, \"Two "
      "readings of section 3.4's loss recovery\", has what each does to rows M2 and M8.");
  b.choice("recovery_new_data", recovery_new_data, {"after_retransmissions", "after_recovery"},
           "When new data may follow in recovery mode: after_retransmissions, once the "
           "retransmissions from snd_retx have reached `recovery` (ACKs then clock out new "
           "data while they travel); after_recovery, only once snd_una passes `recovery` "
           "(section 3.4 read strictly; an ACK that finds nothing to send meanwhile shrinks "
           "cwnd by one, use it or lose it). Same section of vp/nic/transport/transport.md.");
  b.field(
      "window_reduction", window_reduction,
      "Path window reduction, \"use it or lose it\": an ACK that could clock out a packet "
      "but finds no data to send lowers cwnd by one (the paper). Off: an ablation, cwnd "
      "keeps what such ACKs opened; vp/nic/transport/transport.md, \"When the sender runs out of "
      "data\", measures both.");
  b.field("probe_probability", probe_probability,
          "p: per RTT, the probability of sending one packet to a new random virtual path "
          "instead of the ACK's (the paper gives no value; 1 %).",
          0.0, 1.0);
  b.field("max_packets_per_ack", max_packets_per_ack,
          "Burst control: packets one ACK may clock out; the rest leave on the burst timer "
          "(half an RTT) to random paths (paper: 2).",
          1, 64, "packets");
  b.field("base_rtt", base_rtt,
          "RTT the sender assumes for its burst timer, idle detection, probing period and "
          "synchronise delay (the paper measures none of them; the fabric's base RTT).",
          ns1, s1);
  b.field("idle_rtts", idle_rtts,
          "Restart from IW after this many RTTs without sending "
          "(paper: 3).",
          1, 1000, "RTTs");
  b.field("sync_alpha", sync_alpha,
          "Alpha: a synchronise message waits alpha * delta / (cwnd / RTT) after the message "
          "before it (the paper gives no value; 1).",
          0.0, 100.0);
  b.field("rto", rto,
          "Retransmission timeout: every unacknowledged packet is sent again (the paper gives "
          "no value; 1 ms, about 60 base RTTs, so that loss recovery by NACK comes first).",
          ns1, s1);
  b.field("virtual_paths", virtual_paths,
          "Virtual paths: UDP source ports 0xC000 + [0, N) (power of two, at most 16384). 1: "
          "the QP's own UDP source port (e.g. the one a job's via chose), a single-path "
          "MP-RDMA connection (the paper's SP-RDMA).",
          1, 16384);
  if (virtual_paths & (virtual_paths - 1)) b.error("virtual_paths must be a power of two");
  if (delta > bitmap_slots) b.error("delta must not exceed bitmap_slots");
}

void IrnConfig::bind(core::Binder& b) {
  const core::Duration ns1 = core::Duration::from_ps(1000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("bdp_packets", bdp_packets,
          "BDP of the network in packets: BDP-FC's cap on packets in flight and the length "
          "of the SACK and receive bitmaps (power of two).",
          2, 1 << 20, "packets");
  if (bdp_packets & (bdp_packets - 1)) b.error("bdp_packets must be a power of two");
  b.field("bdp_fc", bdp_fc, "BDP-FC: at most bdp_packets packets in flight per QP.");
  b.field("rto_low", rto_low,
          "Timeout with at most rto_low_threshold packets in flight (paper: 100 us).", ns1, s1);
  b.field("rto_high", rto_high, "Timeout otherwise (paper: 320 us).", ns1, s1);
  b.field("rto_low_threshold", rto_low_threshold, "N of RTO_low (paper: 3).", 0, 1 << 20,
          "packets");
  b.field("read_acks", read_acks,
          "Explicit READ acknowledgements (IRN): the requester answers READ responses with "
          "Read (N)ACKs and the responder sends lost responses again itself, selectively, "
          "on a Read NACK or its own timeout (RTO_low/RTO_high). false: the requester asks "
          "again for missing responses (one READ request per response), a round trip later.");
}

bool NicConfig::offers(const std::string& engine) const {
  if (engine == "gbn" || engine == transport) return true;
  for (const std::string& t : qp_transports)
    if (t == engine) return true;
  return false;
}

uint8_t NicConfig::transport_kind(const std::string& engine) {
  if (engine == "mprdma") return MPR_TRANSPORT_MP_RDMA;
  if (engine == "irn") return MPR_TRANSPORT_IRN;
  return MPR_TRANSPORT_GBN;
}

uint32_t NicConfig::transport_kinds() const {
  uint32_t kinds = 0;
  for (const char* engine : {"gbn", "mprdma", "irn"})
    if (offers(engine)) kinds |= 1u << transport_kind(engine);
  if (congestion_control != kNoCongestionControl) kinds |= 1u << MPR_TRANSPORT_DCQCN;
  return kinds;
}

void NicConfig::bind(core::Binder& b) {
  b.field("clock", clock, "NIC core clock; every pipeline latency is a whole number of cycles.");
  b.field("mtu", mtu, "Largest path MTU of the port (256, 512, 1024, 2048 or 4096).", 256, 4096);
  if (mtu.n & (mtu.n - 1)) b.error("mtu must be a power of two between 256 and 4096");
  b.field("ecn", ecn,
          "Send every RoCEv2 packet ECN-capable (ECT(0)), as NICs with RoCE ECN enabled do; "
          "switches then mark CE (counted in mac.ce_rx of the receiver); congestion_control "
          "dcqcn reacts to the marks. Off: Not-ECT, never marked.");
  b.choice("transport", transport, {"gbn", "mprdma", "irn"},
           "Transport engine of the NIC's RC QPs that do not choose one (CREATE_QP transport "
           "DEFAULT; others: qp_transports): gbn is RoCEv2 go-back-N, mprdma is MP-RDMA "
           "(multi-path; parameters under mprdma), irn is IRN (selective retransmission and "
           "BDP-FC; parameters under irn). mprdma carries READ and atomics as data both "
           "ways (their responses in the responder's own stream).");
  b.choice("congestion_control", congestion_control, {kNoCongestionControl, "dcqcn", "timely"},
           "Per-QP rate control beside the transport engine: none; dcqcn (the receiver "
           "answers CE-marked requests with CNPs, the sender paces each QP at its DCQCN rate; "
           "parameters under dcqcn); or timely (the sender paces each QP at a rate driven by "
           "the gradient of its RTT samples, no switch support; parameters under timely).");
  b.section("dcqcn", dcqcn, "DCQCN parameters (used with congestion_control: dcqcn).");
  b.section("timely", timely, "TIMELY parameters (used with congestion_control: timely).");
  if (transport == "mprdma" && congestion_control != kNoCongestionControl)
    b.error(
        "transport mprdma has its own congestion control: congestion_control must be "
        "none");
  b.field("qp_transports", qp_transports,
          "Further engines a QP may choose when it is created (gbn, mprdma, irn; e.g. "
          "[mprdma] on a gbn NIC runs MP-RDMA and RoCEv2 connections side by side): "
          "go-back-N and `transport` are always offered. Every QP context line then holds the "
          "largest offered engine's state. With congestion_control dcqcn, DCQCN paces the "
          "go-back-N and IRN QPs, never MP-RDMA's, which have their own window.");
  for (const std::string& t : qp_transports)
    if (t != "gbn" && t != "mprdma" && t != "irn")
      b.error("qp_transports: unknown transport '" + t + "' (gbn, mprdma or irn)");
  b.section("gbn", gbn, "Go-back-N parameters (transport gbn, the RoCEv2 baseline).");
  b.section("mprdma", mprdma, "MP-RDMA parameters (transport: mprdma).");
  b.section("irn", irn, "IRN parameters (transport: irn).");
  b.field("tx_pipeline_depth", tx_pipeline_depth,
          "Packets in flight between the scheduler and the wire (payload DMA reads included).", 1,
          1024, "packets");
  b.field("wqe_fetch_batch", wqe_fetch_batch, "Send WQEs fetched by one DMA read.", 1, 64, "WQEs");
  b.field("max_outstanding_wqes", max_outstanding_wqes,
          "Fetched send WQEs per QP not yet completed.", 1, 4096, "WQEs");
  b.field("rq_prefetch", rq_prefetch, "Receive WQEs fetched ahead of need per QP.", 0, 64, "WQEs");
  b.field("ack_coalesce", ack_coalesce,
          "The responder ACKs every N in-order packets, and always the last packet of a "
          "message.",
          1, 1024, "packets");
  b.section("latency", latency, "Cycle cost of each pipeline stage.");
  b.section("limits", limits, "Object table sizes reported by QUERY_DEVICE.");
  b.section("handles", handles, "How memory keys and QP numbers are chosen.");
  if (handles.key_random_bits + bits_for(static_cast<uint64_t>(limits.max_mr)) > 32)
    b.error("handles.key_random_bits " + std::to_string(handles.key_random_bits) +
            " leaves too few of a key's 32 bits for limits.max_mr " +
            std::to_string(limits.max_mr) + " entries");
  if (handles.qpn == "random" && bits_for(static_cast<uint64_t>(limits.max_qp) + 2) >= 24)
    b.error("handles.qpn random needs limits.max_qp below 2^23 (QP numbers have 24 bits)");
  b.section("pu", pu, "Processing units (per-QP work in parallel across QPs).");
  b.section("atomics", atomics, "The responder's atomic unit: lock buckets.");
  b.section("sram", sram, "On-chip memory budget.");
  b.section("cache", cache, "Context caches over the ICM tables in host memory.");
}

}  // namespace mprdma::nic
