#include "vp/pcie/tlp.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mprdma::pcie {
namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_access(uint64_t addr, uint64_t len) {
  if (len == 0) throw std::invalid_argument("PCIe access of zero bytes");
  if (addr + len < addr)
    throw std::invalid_argument("PCIe access wraps the 64-bit address space");
}

// Calls fn(chunk_addr, chunk_len) for the pieces of [addr, addr + len) cut
// at every multiple of `boundary` (a power of two).
template <class Fn>
void for_each_chunk(uint64_t addr, uint64_t len, uint64_t boundary, Fn&& fn) {
  const uint64_t end = addr + len;
  uint64_t a = addr;
  while (a < end) {
    const uint64_t next = (a & ~(boundary - 1)) + boundary;
    // `next` wraps to 0 only in the top block, where `end` (which
    // check_access keeps below 2^64) comes first anyway.
    const uint64_t stop = (next == 0 || next > end) ? end : next;
    fn(a, stop - a);
    a = stop;
  }
}

void add(TlpTotals& t, uint64_t wire) {
  ++t.tlps;
  t.wire_bytes += wire;
  t.last_wire_bytes = wire;
}

}  // namespace

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

uint64_t dword_span(uint64_t addr, uint64_t len) {
  if (len == 0) return 0;
  const uint64_t first = addr & ~(kDwordBytes - 1);
  const uint64_t last = (addr + len - 1) & ~(kDwordBytes - 1);
  return last - first + kDwordBytes;
}

std::vector<Tlp> split_read_requests(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  std::vector<Tlp> out;
  for_each_chunk(addr, len, rules.max_read_request, [&](uint64_t a, uint64_t n) {
    out.push_back(Tlp{a, n, rules.request_overhead});
  });
  return out;
}

std::vector<Tlp> split_completions(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  std::vector<Tlp> out;
  for_each_chunk(addr, len, rules.read_completion_boundary, [&](uint64_t a, uint64_t n) {
    out.push_back(Tlp{a, n, dword_span(a, n) + rules.completion_overhead});
  });
  return out;
}

std::vector<Tlp> split_writes(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  std::vector<Tlp> out;
  for_each_chunk(addr, len, rules.max_payload, [&](uint64_t a, uint64_t n) {
    out.push_back(Tlp{a, n, dword_span(a, n) + rules.request_overhead});
  });
  return out;
}

TlpTotals read_request_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  TlpTotals t;
  for_each_chunk(addr, len, rules.max_read_request,
                 [&](uint64_t, uint64_t) { add(t, rules.request_overhead); });
  return t;
}

TlpTotals completion_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  TlpTotals t;
  for_each_chunk(addr, len, rules.read_completion_boundary, [&](uint64_t a, uint64_t n) {
    add(t, dword_span(a, n) + rules.completion_overhead);
  });
  return t;
}

TlpTotals write_totals(uint64_t addr, uint64_t len, const TlpRules& rules) {
  check_access(addr, len);
  TlpTotals t;
  for_each_chunk(addr, len, rules.max_payload, [&](uint64_t a, uint64_t n) {
    add(t, dword_span(a, n) + rules.request_overhead);
  });
  return t;
}

}  // namespace mprdma::pcie
