#include "vp/nic/nic_config.h"

#include <mprdma/hw.h>

#include <algorithm>
#include <stdexcept>

#include "vp/nic/rate_control/rate_control.h"
#include "vp/nic/transport/engine_registry.h"

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
  b.field("max_srq", max_srq,
          "Shared receive queues (contexts on chip: each costs SRAM, nic.sram srq.contexts).", 1,
          1 << 16);
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
  b.choice("qpn", qpn, {{"lowest_free", QpnPolicy::lowest_free}, {"random", QpnPolicy::random}},
           "QP numbers: lowest_free hands out 2, 3, ... (readable traces, and the UDP source "
           "ports, a hash of the QP numbers, of every reproduction); random keeps the QP's "
           "table index in the low bits and draws the rest of the 24 at random (stream "
           "nic.<name>.handles), so that a peer cannot guess a QP number from another.");
}

core::PluginSections default_rate_control_sections() {
  return RateControlRegistry::instance().default_sections();
}

core::PluginSections default_engine_sections() {
  return EngineRegistry::instance().default_sections();
}

std::string default_transport() {
  for (const EngineEntry& e : EngineRegistry::instance().entries())
    if (e.always_offered) return e.name;
  throw std::logic_error("the engine registry has no always-offered engine");
}

bool NicConfig::offers(const std::string& name) const {
  const EngineEntry* e = EngineRegistry::instance().find(name);
  if (!e) return false;
  if (e->always_offered || name == transport) return true;
  for (const std::string& t : qp_transports)
    if (t == name) return true;
  return false;
}

uint8_t NicConfig::transport_kind(const std::string& name) {
  const EngineEntry* e = EngineRegistry::instance().find(name);
  if (!e) throw std::invalid_argument("unknown transport engine '" + name + "'");
  return e->kind;
}

uint8_t NicConfig::qp_transport_kind(const std::string& name) {
  for (unsigned k = MPR_TRANSPORT_DEFAULT; k < MPR_TRANSPORT_EXPERIMENTAL_FIRST; ++k)
    if (mpr_transport_name(k) && name == mpr_transport_name(k)) return static_cast<uint8_t>(k);
  throw std::invalid_argument("no transport of the ABI is called '" + name + "'");
}

uint32_t NicConfig::transport_kinds() const {
  uint32_t kinds = 0;
  for (const EngineEntry& e : EngineRegistry::instance().entries()) {
    if (!offers(e.name)) continue;
    kinds |= 1u << e.kind;
    if (congestion_control != kNoCongestionControl)
      for (uint8_t k : e.also_kinds) kinds |= 1u << k;
  }
  return kinds;
}

namespace {

// "a, b or c"
std::string one_of(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

// Binds `sections`' member for each plug-in with parameters, adding the
// defaults of one registered after this configuration was made.
template <class Entries>
void bind_sections(core::Binder& b, core::PluginSections& sections, const Entries& entries) {
  for (const auto& e : entries) {
    if (!e.make_section) continue;
    if (!sections.find(e.name)) sections.set(e.name, e.make_section());
    b.section(e.name.c_str(), *sections.find(e.name), e.section_doc.c_str());
  }
}

}  // namespace

void NicConfig::bind(core::Binder& b) {
  b.field("clock", clock, "NIC core clock; every pipeline latency is a whole number of cycles.");
  b.field("mtu", mtu, "Largest path MTU of the port (256, 512, 1024, 2048 or 4096).", 256, 4096);
  if (mtu.n & (mtu.n - 1)) b.error("mtu must be a power of two between 256 and 4096");
  b.field("ecn", ecn,
          "Send every RoCEv2 packet ECN-capable (ECT(0)), as NICs with RoCE ECN enabled do; "
          "switches then mark CE (counted in mac.ce_rx of the receiver); congestion_control "
          "dcqcn reacts to the marks. Off: Not-ECT, never marked.");
  const EngineRegistry& engines_reg = EngineRegistry::instance();
  const RateControlRegistry& rc_reg = RateControlRegistry::instance();
  std::string doc =
      "Transport engine of the NIC's RC QPs that do not choose one (CREATE_QP transport "
      "DEFAULT; others: qp_transports), each with its parameters under its own name:";
  for (const EngineEntry& e : engines_reg.entries()) doc += " " + e.name + ", " + e.doc + ";";
  doc.back() = '.';
  b.choice("transport", transport, engines_reg.names(), doc.c_str());
  {
    // Every implementation some engine has; the chosen transport must have it.
    std::vector<std::string> impls;
    std::string impl_doc =
        "How `transport` runs (its implementations in the engine registry; the NIC's other "
        "engines run as their models):";
    for (const EngineEntry& e : engines_reg.entries())
      for (const EngineImpl& i : e.impls) {
        if (std::find(impls.begin(), impls.end(), i.name) == impls.end()) impls.push_back(i.name);
        if (i.name != "model") impl_doc += " " + i.name + " (" + e.name + ": " + i.doc + ");";
      }
    impl_doc.insert(impl_doc.find(':') + 1, " model, the C++ golden model;");
    impl_doc.back() = '.';
    b.choice("transport_impl", transport_impl, impls, impl_doc.c_str());
    if (const EngineEntry* e = engines_reg.find(transport)) {
      std::vector<std::string> own;
      for (const EngineImpl& i : e->impls) own.push_back(i.name);
      if (std::find(own.begin(), own.end(), transport_impl) == own.end())
        b.error("transport_impl " + transport_impl + ": transport " + transport +
                " has no such implementation (it has " + one_of(own) + ")");
    }
  }
  b.choice("rtl_timing", rtl_timing, {"charged", "model"},
           "With transport_impl rtl or lockstep: charged, the RTL engines' cycles beyond the NIC "
           "stage that issues each operation delay its outputs (the sender's packets leave when "
           "the RTL clocked them out); model, the NIC keeps the golden model's timing, so results "
           "equal transport_impl model value for value. Ignored with transport_impl model.");
  std::vector<std::string> controls{kNoCongestionControl};
  std::string cc_doc = "Per-QP rate control beside the transport engine: none";
  for (const RateControlEntry& e : rc_reg.entries()) {
    controls.push_back(e.name);
    cc_doc += "; " + e.name + " (" + e.doc + "; parameters under " + e.name + ")";
  }
  cc_doc += ".";
  b.choice("congestion_control", congestion_control, controls, cc_doc.c_str());
  bind_sections(b, rate_controls, rc_reg.entries());
  const EngineEntry* engine = engines_reg.find(transport);
  if (engine && engine->own_congestion_control && congestion_control != kNoCongestionControl)
    b.error("transport " + transport +
            " has its own congestion control: congestion_control must be none");
  const std::string qp_doc =
      "Further engines a QP may choose when it is created (" + one_of(engines_reg.names()) +
      "; e.g. [mprdma] on a gbn NIC runs MP-RDMA and RoCEv2 connections side by side): "
      "go-back-N and `transport` are always offered. Every QP context line then holds the "
      "largest offered engine's state. The NIC's congestion control paces the QPs of "
      "engines without a window of their own.";
  b.field("qp_transports", qp_transports, qp_doc.c_str());
  for (const std::string& t : qp_transports)
    if (!engines_reg.find(t))
      b.error("qp_transports: unknown transport '" + t + "' (" + one_of(engines_reg.names()) + ")");
  bind_sections(b, engines, engines_reg.entries());
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
  if (handles.qpn == QpnPolicy::random && bits_for(static_cast<uint64_t>(limits.max_qp) + 2) >= 24)
    b.error("handles.qpn random needs limits.max_qp below 2^23 (QP numbers have 24 bits)");
  b.section("pu", pu, "Processing units (per-QP work in parallel across QPs).");
  b.section("atomics", atomics, "The responder's atomic unit: lock buckets.");
  b.section("sram", sram, "On-chip memory budget.");
  b.section("cache", cache, "Context caches over the ICM tables in host memory.");
}

}  // namespace mprdma::nic
