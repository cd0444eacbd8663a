#include "vp/nic/nic_config.h"

namespace mprdma::nic {

void NicLatencies::bind(core::Binder& b) {
  b.field("doorbell", doorbell, "Decode a doorbell and schedule its QP.", 0, 1000000, "cycles");
  b.field("wqe_parse", wqe_parse, "Parse, validate and translate one fetched WQE.", 0, 1000000,
          "cycles");
  b.field("tx_packet", tx_packet,
          "Schedule and build one outgoing packet; bounds the packet rate of the NIC.", 1,
          1000000, "cycles");
  b.field("rx_packet", rx_packet, "Parse, look up and check one incoming packet.", 1, 1000000,
          "cycles");
  b.field("ack_process", ack_process, "Process one ACK, NAK or response in the requester.", 0,
          1000000, "cycles");
  b.field("cqe", cqe, "Build one CQE or EQE before its DMA write.", 0, 1000000, "cycles");
  b.field("command", command,
          "Firmware execution time of one admin command, not counting its DMA.", 0, 100000000,
          "cycles");
  b.field("reset", reset, "Device reset until STATUS.READY is set again.", 1, 100000000,
          "cycles");
}

void NicLimits::bind(core::Binder& b) {
  b.field("max_qp", max_qp, "Queue pairs.", 1, 1 << 20);
  b.field("max_cq", max_cq, "Completion queues.", 1, 1 << 20);
  b.field("max_eq", max_eq, "Event queues (one MSI-X vector each, at most 32).", 1, 32);
  b.field("max_pd", max_pd, "Protection domains.", 1, 1 << 20);
  b.field("max_mr", max_mr, "Memory regions.", 1, 1 << 24);
  b.field("max_mtt", max_mtt, "Page translation entries over all memory regions.", 1,
          int64_t{1} << 32);
  b.field("max_qp_wr", max_qp_wr, "WQEs per send or receive queue.", 2, 32768);
  b.field("max_sge", max_sge, "Scatter/gather entries per WQE.", 1, 60);
  b.field("max_inline", max_inline, "Inline payload per send WQE.", 0, 1000, "bytes");
  b.field("max_cqe", max_cqe, "Entries per completion queue.", 2, 1 << 24);
  b.field("max_rd_atomic", max_rd_atomic, "Outstanding READ and atomic requests per QP.", 1, 255);
  b.field("max_gids", max_gids, "Entries of the GID table.", 1, 256);
  b.field("num_uar_pages", num_uar_pages, "4 KiB doorbell pages in BAR2.", 2, 65535);
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
          "T: one rate-increase event per interval since the last CNP (paper: 55 us).", us1,
          s1);
  b.field("byte_counter", byte_counter,
          "B: one rate-increase event per this many bytes sent (wire bytes) since the last "
          "CNP (paper: 10 MB).",
          1, uint64_t{1} << 40);
  b.field("fast_recovery_stages", fast_recovery_stages,
          "F: rate-increase events of fast recovery, Rc <- (Rt + Rc)/2, before additive "
          "increase (paper: 5).",
          0, 1000, "events");
  b.field("rate_ai", rate_ai, "R_AI: additive increase of the target rate per event (paper: "
                              "40 Mbps).");
  b.field("rate_hai", rate_hai,
          "R_HAI: hyper increase of the target rate, times the events beyond F of the slower "
          "counter (not given by the paper: 10 R_AI, QCN's ratio).");
  b.field("min_rate", min_rate,
          "Floor of the current rate (not in the paper: 10 Mbps).");
  if (rate_ai.bps <= 0 || rate_hai.bps <= 0 || min_rate.bps <= 0)
    b.error("rate_ai, rate_hai and min_rate must be positive");
}

void NicConfig::bind(core::Binder& b) {
  b.field("clock", clock, "NIC core clock; every pipeline latency is a whole number of cycles.");
  b.field("mtu", mtu, "Largest path MTU of the port (256, 512, 1024, 2048 or 4096).", 256, 4096);
  if (mtu.n & (mtu.n - 1)) b.error("mtu must be a power of two between 256 and 4096");
  b.field("ecn", ecn,
          "Send every RoCEv2 packet ECN-capable (ECT(0)), as NICs with RoCE ECN enabled do; "
          "switches then mark CE (counted in mac.ce_rx of the receiver); congestion_control "
          "dcqcn reacts to the marks. Off: Not-ECT, never marked.");
  b.choice("transport", transport, {"gbn"},
           "Transport engine of QPs that do not choose one: gbn is RoCEv2 go-back-N.");
  b.choice("congestion_control", congestion_control, {"none", "dcqcn"},
           "Per-QP rate control beside the transport engine: none, or dcqcn (the receiver "
           "answers CE-marked requests with CNPs, the sender paces each QP at its DCQCN rate; "
           "parameters under dcqcn).");
  b.section("dcqcn", dcqcn, "DCQCN parameters (used with congestion_control: dcqcn).");
  b.field("tx_pipeline_depth", tx_pipeline_depth,
          "Packets in flight between the scheduler and the wire (payload DMA reads included).",
          1, 1024, "packets");
  b.field("wqe_fetch_batch", wqe_fetch_batch, "Send WQEs fetched by one DMA read.", 1, 64,
          "WQEs");
  b.field("max_outstanding_wqes", max_outstanding_wqes,
          "Fetched send WQEs per QP not yet completed.", 1, 4096, "WQEs");
  b.field("rq_prefetch", rq_prefetch, "Receive WQEs fetched ahead of need per QP.", 0, 64,
          "WQEs");
  b.field("ack_coalesce", ack_coalesce,
          "The responder ACKs every N in-order packets, and always the last packet of a "
          "message.",
          1, 1024, "packets");
  b.section("latency", latency, "Cycle cost of each pipeline stage.");
  b.section("limits", limits, "Object table sizes reported by QUERY_DEVICE.");
}

}  // namespace mprdma::nic
