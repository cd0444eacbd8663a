#include "vp/pcie/pcie_config.h"

#include <cmath>
#include <stdexcept>

namespace mprdma::pcie {
namespace {

constexpr int64_t kMaxTags = 768;  // PCIe 4.0 10-bit tags
const core::Duration kMaxLatency = core::Duration::from_us(100);

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

void PcieConfig::bind(core::Binder& b) {
  b.field("gen", gen,
          "PCIe generation: 1 and 2 run 2.5 and 5 GT/s with 8b/10b coding, 3, 4 and 5 run 8, 16 "
          "and 32 GT/s with 128b/130b",
          1, 5);
  b.field("lanes", lanes, "link width: 1, 2, 4, 8, 16 or 32 lanes", 1, 32, "lanes");
  b.field("max_payload", max_payload,
          "Max_Payload_Size: largest data payload of one write TLP (power of two)", 128, 4096);
  b.field("max_read_request", max_read_request,
          "Max_Read_Request_Size: largest read one request TLP asks for (power of two)", 128,
          4096);
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
          "wire bytes of one DLLP (6 B and 2 B of framing); 0 leaves the data-link layer out",
          0, 64);
  b.field("ack_every", ack_every,
          "TLPs acknowledged by one Ack DLLP, sent the other way", 1, 1024, "TLPs");
  b.field("update_fc_every", update_fc_every,
          "TLPs whose flow-control credits one UpdateFC DLLP returns, the other way", 1, 1024,
          "TLPs");
  for (const std::string& p : shape_problems(*this)) b.error(p);
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

double PcieConfig::encoding_efficiency() const {
  return gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0;
}

double PcieConfig::lane_bytes_per_sec() const {
  return transfer_rate_gtps() * 1e9 * encoding_efficiency() / 8.0;
}

double PcieConfig::link_bytes_per_sec() const {
  return lane_bytes_per_sec() * static_cast<double>(lanes);
}

uint64_t PcieConfig::serialize_ps(uint64_t wire_bytes) const {
  // The ps-per-byte figures are dyadic fractions for the usual widths
  // (gen3 x16: 63.4765625 ps/B), so long double holds them exactly and the
  // small epsilon only absorbs rounding from other widths.
  const long double ps = static_cast<long double>(wire_bytes) * 1e12L /
                         static_cast<long double>(link_bytes_per_sec());
  return static_cast<uint64_t>(std::ceil(ps - 1e-9L));
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
