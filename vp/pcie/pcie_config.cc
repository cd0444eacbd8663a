#include "vp/pcie/pcie_config.h"

#include <cmath>
#include <stdexcept>

namespace mprdma::pcie {
namespace {

constexpr int64_t kMaxTags = 768;  // PCIe 4.0 10-bit tags
const core::Duration kMaxLatency = core::Duration::from_us(100);
// Flow-control credits: without scaled flow control a receiver may have at
// most 127 header and 2047 data credits outstanding; scaled flow control
// (from PCIe 4.0) multiplies both by up to 16.
constexpr int64_t kMaxHeaderCredits = 127;
constexpr int64_t kMaxDataCredits = 2047;
constexpr int64_t kMaxFcScale = 16;

void check_receiver(const PcieConfig& c, const PcieReceiverConfig& r, const char* side,
                    std::vector<std::string>& out) {
  const int64_t scale = c.gen >= 4 ? kMaxFcScale : 1;
  const int64_t mps_credits = static_cast<int64_t>(c.max_payload.n / kFcDataCreditBytes);
  auto check = [&](const char* key, int64_t v, int64_t max, int64_t min) {
    const std::string name = std::string(side) + "." + key;
    if (v < 0 || v > max * scale)
      out.push_back(
          name + " must be 0 (infinite) to " + std::to_string(max * scale) +
          (scale > 1 ? " (scaled flow control)" : " without scaled flow control (gen 4+)") +
          ", got " + std::to_string(v));
    else if (v != 0 && v < min)
      out.push_back(name + " must be 0 (infinite) or at least " + std::to_string(min) +
                    " (the spec's minimum advertisement" +
                    (min > 1 ? ": one max_payload TLP" : "") + "), got " + std::to_string(v));
  };
  check("posted_header", r.posted_header, kMaxHeaderCredits, 1);
  check("posted_data", r.posted_data, kMaxDataCredits, mps_credits);
  check("non_posted_header", r.non_posted_header, kMaxHeaderCredits, 1);
  check("non_posted_data", r.non_posted_data, kMaxDataCredits, 1);
  check("completion_header", r.completion_header, kMaxHeaderCredits, 1);
  check("completion_data", r.completion_data, kMaxDataCredits, mps_credits);
  if (r.processing.ps > kMaxLatency.ps)
    out.push_back(std::string(side) + ".processing must not exceed 100us");
}

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Checks the binder's per-field limits cannot express (sets, powers of two).
std::vector<std::string> shape_problems(const PcieConfig& c) {
  std::vector<std::string> out;
  switch (c.lanes) {
    case 1:
    case 2:
    case 4:
    case 8:
    case 16:
    case 32:
      break;
    default:
      out.push_back("lanes must be one of 1, 2, 4, 8, 16, 32 (got " + std::to_string(c.lanes) +
                    ")");
  }
  if (!is_pow2(c.max_payload.n))
    out.push_back("max_payload must be a power of two (got " + std::to_string(c.max_payload.n) +
                  " B)");
  if (!is_pow2(c.max_read_request.n))
    out.push_back("max_read_request must be a power of two (got " +
                  std::to_string(c.max_read_request.n) + " B)");
  if (c.read_completion_boundary.n != 64 && c.read_completion_boundary.n != 128)
    out.push_back("read_completion_boundary must be 64 or 128 B (got " +
                  std::to_string(c.read_completion_boundary.n) + " B)");
  return out;
}

}  // namespace

void PcieReceiverConfig::bind(core::Binder& b) {
  const int64_t hmax = kMaxHeaderCredits * kMaxFcScale;
  const int64_t dmax = kMaxDataCredits * kMaxFcScale;
  b.field("posted_header", posted_header,
          "posted header credits (one per TLP: MMIO and DMA writes, MSIs); 0 = infinite; at most "
          "127 below gen 4",
          0, hmax, "credits");
  b.field("posted_data", posted_data,
          "posted data credits (16 B of payload each); 0 = infinite; at least max_payload / 16, "
          "at most 2047 below gen 4",
          0, dmax, "credits");
  b.field("non_posted_header", non_posted_header,
          "non-posted header credits (one per read request TLP); 0 = infinite; at most 127 "
          "below gen 4",
          0, hmax, "credits");
  b.field("non_posted_data", non_posted_data,
          "non-posted data credits (16 B each; no modelled request carries data); 0 = infinite", 0,
          dmax, "credits");
  b.field("completion_header", completion_header,
          "completion header credits; 0 = infinite, which the spec requires of endpoints and "
          "root ports commonly advertise",
          0, hmax, "credits");
  b.field("completion_data", completion_data,
          "completion data credits (16 B each); 0 = infinite; else at least max_payload / 16", 0,
          dmax, "credits");
  b.field("processing", processing,
          "receiver processing time: from a TLP's arrival to its buffer being freed (its credits "
          "go back with the next UpdateFC)",
          core::Duration{0}, kMaxLatency);
}

uint64_t PcieReceiverConfig::header_credits(FcType type) const {
  switch (type) {
    case FcType::posted:
      return static_cast<uint64_t>(posted_header);
    case FcType::non_posted:
      return static_cast<uint64_t>(non_posted_header);
    case FcType::completion:
      return static_cast<uint64_t>(completion_header);
  }
  return 0;
}

uint64_t PcieReceiverConfig::data_credits(FcType type) const {
  switch (type) {
    case FcType::posted:
      return static_cast<uint64_t>(posted_data);
    case FcType::non_posted:
      return static_cast<uint64_t>(non_posted_data);
    case FcType::completion:
      return static_cast<uint64_t>(completion_data);
  }
  return 0;
}

void PcieConfig::bind(core::Binder& b) {
  b.field("gen", gen,
          "PCIe generation: 1 and 2 run 2.5 and 5 GT/s with 8b/10b coding, 3, 4 and 5 run 8, 16 "
          "and 32 GT/s with 128b/130b",
          1, 5);
  b.field("lanes", lanes, "link width: 1, 2, 4, 8, 16 or 32 lanes", 1, 32, "lanes");
  b.field("max_payload", max_payload,
          "Max_Payload_Size: largest data payload of one write TLP (power of two)", 128, 4096);
  b.field("max_read_request", max_read_request,
          "Max_Read_Request_Size: largest read one request TLP asks for (power of two)", 128, 4096);
  b.field("read_completion_boundary", read_completion_boundary,
          "read completion boundary: completions are cut at its multiples (64 or 128 B; Kalia's "
          "128 B completion combining)",
          64, 128);
  b.field("request_overhead", request_overhead,
          "bytes added to every request TLP: header, sequence number, LCRC, framing (Kalia's Pr)",
          0, 256);
  b.field("completion_overhead", completion_overhead,
          "bytes added to every completion TLP (Kalia's Pc)", 0, 256);
  b.field("latency", latency,
          "one-way latency from a TLP's last byte leaving the sender to its use at the receiver "
          "(PHY, data-link layer, root port)",
          core::Duration{0}, kMaxLatency);
  b.field("memory_latency", memory_latency,
          "root complex service time of a DMA read request, from its arrival to its first "
          "completion being ready",
          core::Duration{0}, kMaxLatency);
  b.field("max_outstanding_reads", max_outstanding_reads,
          "read request TLPs the endpoint may have in flight (tags); further requests wait", 1,
          kMaxTags, "tags");
  b.field("dllp_bytes", dllp_bytes,
          "wire bytes of one DLLP (4 B, 16-bit CRC, 2 B of framing); 0: DLLPs take no link time "
          "and are not counted (credits still apply)",
          0, 64);
  b.field("ack_every", ack_every,
          "TLPs acknowledged by one Ack DLLP, sent the other way (our coalescing choice)", 1, 1024,
          "TLPs");
  b.field("update_fc_every", update_fc_every,
          "TLPs of one credit type (posted, non-posted, completion) whose credits one UpdateFC "
          "DLLP returns, the other way; sooner when the sender runs low; none for infinite "
          "credits",
          1, 1024, "TLPs");
  b.section("root_port", root_port,
            "Receive buffers of the root port: flow-control credits for upstream TLPs (DMA "
            "writes, MSIs, read requests, MMIO read completions).");
  b.section("endpoint", endpoint,
            "Receive buffers of the endpoint (the NIC): flow-control credits for downstream TLPs "
            "(MMIO writes and reads, DMA read completions).");
  for (const std::string& p : shape_problems(*this)) b.error(p);
  std::vector<std::string> credits;
  check_receiver(*this, root_port, "root_port", credits);
  check_receiver(*this, endpoint, "endpoint", credits);
  for (const std::string& p : credits) b.error(p);
}

double PcieConfig::transfer_rate_gtps() const {
  switch (gen) {
    case 1:
      return 2.5;
    case 2:
      return 5.0;
    case 3:
      return 8.0;
    case 4:
      return 16.0;
    case 5:
      return 32.0;
  }
  throw std::invalid_argument("PCIe generation must be 1..5 (got " + std::to_string(gen) + ")");
}

double PcieConfig::encoding_efficiency() const { return gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0; }

double PcieConfig::lane_bytes_per_sec() const {
  return transfer_rate_gtps() * 1e9 * encoding_efficiency() / 8.0;
}

double PcieConfig::link_bytes_per_sec() const {
  return lane_bytes_per_sec() * static_cast<double>(lanes);
}

uint64_t PcieConfig::serialize_ps(uint64_t wire_bytes) const {
  // Exactly, in integers: a byte takes 8e6 * enc_den / (MT/s * enc_num *
  // lanes) ps (gen3 x16: 8e6 * 130 / (8000 * 128 * 16) = 63.4765625 ps/B),
  // rounded up. (It was long double arithmetic, which gave the same values
  // for every width in use but cost up to a tenth of a run in x87 rounding
  // instructions on the PCIe hot path.)
  const uint64_t mtps = static_cast<uint64_t>(transfer_rate_gtps() * 1000.0 + 0.5);
  const uint64_t enc_num = gen <= 2 ? 8 : 128, enc_den = gen <= 2 ? 10 : 130;
  const unsigned __int128 num = static_cast<unsigned __int128>(wire_bytes) * 8000000u * enc_den;
  const unsigned __int128 den = static_cast<unsigned __int128>(mtps) * enc_num * lanes;
  return static_cast<uint64_t>((num + den - 1) / den);
}

TlpRules PcieConfig::tlp_rules() const {
  TlpRules r;
  r.max_payload = max_payload.n;
  r.max_read_request = max_read_request.n;
  r.read_completion_boundary = read_completion_boundary.n;
  r.request_overhead = request_overhead.n;
  r.completion_overhead = completion_overhead.n;
  return r;
}

std::vector<std::string> PcieConfig::problems() const {
  std::vector<std::string> out;
  if (gen < 1 || gen > 5) out.push_back("gen must be 1..5 (got " + std::to_string(gen) + ")");
  auto range = [&](const char* key, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi)
      out.push_back(std::string(key) + " must be " + std::to_string(lo) + ".." +
                    std::to_string(hi) + " B (got " + std::to_string(v) + " B)");
  };
  range("max_payload", max_payload.n, 128, 4096);
  range("max_read_request", max_read_request.n, 128, 4096);
  range("request_overhead", request_overhead.n, 0, 256);
  range("completion_overhead", completion_overhead.n, 0, 256);
  if (latency.ps > kMaxLatency.ps) out.push_back("latency must not exceed 100us");
  if (memory_latency.ps > kMaxLatency.ps) out.push_back("memory_latency must not exceed 100us");
  if (max_outstanding_reads < 1 || max_outstanding_reads > kMaxTags)
    out.push_back("max_outstanding_reads must be 1.." + std::to_string(kMaxTags) + " (got " +
                  std::to_string(max_outstanding_reads) + ")");
  if (ack_every < 1 || ack_every > 1024) out.push_back("ack_every must be 1..1024");
  if (update_fc_every < 1 || update_fc_every > 1024)
    out.push_back("update_fc_every must be 1..1024");
  if (dllp_bytes.n > 64) out.push_back("dllp_bytes must not exceed 64 B");
  check_receiver(*this, root_port, "root_port", out);
  check_receiver(*this, endpoint, "endpoint", out);
  for (std::string& p : shape_problems(*this)) out.push_back(std::move(p));
  return out;
}

void PcieConfig::validate() const {
  const std::vector<std::string> p = problems();
  if (p.empty()) return;
  std::string msg = "invalid PCIe configuration:";
  for (const std::string& s : p) msg += "\n  " + s;
  throw std::invalid_argument(msg);
}

}  // namespace mprdma::pcie
