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

void NicConfig::bind(core::Binder& b) {
  b.field("clock", clock, "NIC core clock; every pipeline latency is a whole number of cycles.");
  b.field("mtu", mtu, "Largest path MTU of the port (256, 512, 1024, 2048 or 4096).", 256, 4096);
  if (mtu.n & (mtu.n - 1)) b.error("mtu must be a power of two between 256 and 4096");
  b.field("ecn", ecn,
          "Send every RoCEv2 packet ECN-capable (ECT(0)), as NICs with RoCE ECN enabled do; "
          "switches then mark CE (counted in mac.ce_rx of the receiver). Reacting to marks "
          "(DCQCN) belongs to the transport engine. Off: Not-ECT, never marked.");
  b.choice("transport", transport, {"gbn"},
           "Transport engine of QPs that do not choose one: gbn is RoCEv2 go-back-N.");
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
