#include "vp/pcie/tlp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::pcie {
namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void add(TlpTotals& t, uint64_t wire) {
  ++t.tlps;
  t.wire_bytes += wire;
  t.last_wire_bytes = wire;
}

}  // namespace

void detail::check_access(uint64_t addr, uint64_t len) {
  if (len == 0) throw std::invalid_argument("PCIe access of zero bytes");
  if (addr + len < addr) throw std::invalid_argument("PCIe access wraps the 64-bit address space");
}

void TlpRules::validate() const {
  auto check = [](uint64_t v, const char* what) {
    if (!is_pow2(v) || v < kDwordBytes || v > kPcieBoundary)
      throw std::invalid_argument(std::string(what) + " must be a power of two in [4, 4096], got " +
                                  std::to_string(v));
  };
  check(max_payload, "max_payload");
  check(max_read_request, "max_read_request");
  check(read_completion_boundary, "read_completion_boundary");
  if (max_read_request < read_completion_boundary)
    throw std::invalid_argument("max_read_request (" + std::to_string(max_read_request) +
                                ") must not be below read_completion_boundary (" +
                                std::to_string(read_completion_boundary) + ")");
}

const char* tlp_kind_name(TlpKind kind) {
  switch (kind) {
    case TlpKind::mmio_write:
      return "mmio_write";
    case TlpKind::mmio_read:
      return "mmio_read";
    case TlpKind::dma_read_request:
      return "dma_read_request";
    case TlpKind::dma_read_completion:
      return "dma_read_completion";
    case TlpKind::dma_write:
      return "dma_write";
    case TlpKind::msi:
      return "msi";
  }
  return "?";
}

const char* fc_type_name(FcType type) {
  switch (type) {
    case FcType::posted:
      return "posted";
    case FcType::non_posted:
      return "non_posted";
    case FcType::completion:
      return "completion";
  }
  return "?";
}

FcType fc_type_of(TlpKind kind, bool downstream) {
  switch (kind) {
    case TlpKind::mmio_write:
    case TlpKind::dma_write:
    case TlpKind::msi:
      return FcType::posted;
    case TlpKind::mmio_read:
      return downstream ? FcType::non_posted : FcType::completion;
    case TlpKind::dma_read_request:
      return FcType::non_posted;
    case TlpKind::dma_read_completion:
      return FcType::completion;
  }
  return FcType::posted;
}

uint64_t dword_span(uint64_t addr, uint64_t len) {
  if (len == 0) return 0;
  const uint64_t first = addr & ~(kDwordBytes - 1);
  const uint64_t last = (addr + len - 1) & ~(kDwordBytes - 1);
  return last - first + kDwordBytes;
}

std::vector<Tlp> split_read_requests(uint64_t addr, uint64_t len, const TlpRules& rules) {
  std::vector<Tlp> out;
  for_each_read_request(addr, len, rules, [&](const Tlp& t) { out.push_back(t); });
  return out;
}

std::vector<Tlp> split_completions(uint64_t addr, uint64_t len, const TlpRules& rules) {
  std::vector<Tlp> out;
  for_each_completion(addr, len, rules, [&](const Tlp& t) { out.push_back(t); });
  return out;
}

std::vector<Tlp> split_writes(uint64_t addr, uint64_t len, const TlpRules& rules) {
  std::vector<Tlp> out;
  for_each_write(addr, len, rules, [&](const Tlp& t) { out.push_back(t); });
  return out;
}

TlpTotals read_request_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  TlpTotals t;
  for_each_read_request(addr, len, rules, [&](const Tlp& tlp) { add(t, tlp.wire_bytes); });
  return t;
}

TlpTotals completion_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  TlpTotals t;
  for_each_completion(addr, len, rules, [&](const Tlp& tlp) { add(t, tlp.wire_bytes); });
  return t;
}

TlpTotals write_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  TlpTotals t;
  for_each_write(addr, len, rules, [&](const Tlp& tlp) { add(t, tlp.wire_bytes); });
  return t;
}

}  // namespace mprdma::pcie
