// Transaction-layer packet arithmetic: how a DMA or MMIO access is cut into
// TLPs, and how many bytes each TLP puts on the link.
//
// Pure functions, no SystemC: the link model calls them to account traffic
// and time, and tests check them against hand-computed figures (Kalia et al.,
// ATC'16, Appendix A).
//
// Splitting rules (all sizes are powers of two that divide 4096, so cutting
// at multiples of them never lets a TLP cross a 4 KiB boundary, which PCIe
// forbids for requests):
//   * Read requests: cut at every multiple of max_read_request (MRRS). A
//     request starting mid-block runs to the next MRRS-aligned address, so
//     only the first (and last) request of an access can be short.
//     Wire bytes: request_overhead (Pr) only; a read request carries no data.
//   * Read completions: each request is answered by completions cut at every
//     multiple of the read completion boundary (RCB). The first completion
//     runs from the request address to the next RCB-aligned address (it is
//     shorter when the request is not RCB-aligned), the next ones carry a
//     full RCB, the last one the remainder. Real root complexes may combine
//     several RCBs into one completion; Kalia measured 128 B completions
//     ("read completion combining size" Crc = 128), which this rule with
//     RCB = 128 reproduces. Wire bytes: data + completion_overhead (Pc).
//   * Writes (DMA writes, MSIs and MMIO writes): cut at every multiple of
//     max_payload (MPS). Wire bytes: data + request_overhead (Pr).
// Data on the wire is whole double words: a TLP addressing bytes [a, a+n)
// carries the DWs that cover them (byte enables mark the rest). For the
// DW-aligned accesses of Kalia's arithmetic this is exactly n.
#pragma once

#include <cstdint>
#include <vector>

namespace mprdma::pcie {

inline constexpr uint64_t kPcieBoundary = 4096;
inline constexpr uint64_t kDwordBytes = 4;

// x86 MSI window: a posted write here is an interrupt message, not memory.
inline constexpr uint64_t kMsiWindowBase = 0xFEE00000ull;
inline constexpr uint64_t kMsiWindowEnd = 0xFEF00000ull;  // exclusive
inline bool is_msi_address(uint64_t addr) { return addr >= kMsiWindowBase && addr < kMsiWindowEnd; }

// The splitting parameters, in bytes. validate() throws std::invalid_argument
// unless the three sizes are powers of two in [kDwordBytes, 4096] and
// max_read_request >= read_completion_boundary (true of every real PCIe
// setting: MRRS is at least 128 B, RCB 64 or 128 B).
struct TlpRules {
  uint64_t max_payload = 256;
  uint64_t max_read_request = 512;
  uint64_t read_completion_boundary = 128;
  uint64_t request_overhead = 26;     // Pr
  uint64_t completion_overhead = 22;  // Pc
  void validate() const;
};

enum class TlpKind : uint8_t {
  mmio_write,           // CPU store to a BAR (downstream)
  mmio_read,            // CPU load: request downstream, completion upstream
  dma_read_request,     // device read request (upstream)
  dma_read_completion,  // completion with host data (downstream)
  dma_write,            // device write to host memory (upstream)
  msi,                  // device write to the MSI window (upstream)
};
inline constexpr int kTlpKinds = 6;
const char* tlp_kind_name(TlpKind kind);

struct Tlp {
  uint64_t addr = 0;        // first byte addressed
  uint64_t len = 0;         // bytes requested (read request) or carried
  uint64_t wire_bytes = 0;  // bytes on the link: overhead + whole DWs of data
};

// Sum over the TLPs of one access, without building them.
struct TlpTotals {
  uint64_t tlps = 0;
  uint64_t wire_bytes = 0;
  uint64_t last_wire_bytes = 0;  // of the last TLP (when it starts serialising)
};

// Bytes of the double words covering [addr, addr + len).
uint64_t dword_span(uint64_t addr, uint64_t len);

// Flow control (data-link layer). A receiver advertises its buffers per
// class of TLP as header credits (one per TLP) and data credits (one per
// 4 DW = 16 B of payload, rounded up).
enum class FcType : uint8_t { posted, non_posted, completion };
inline constexpr int kFcTypes = 3;
const char* fc_type_name(FcType type);
inline constexpr uint64_t kFcDataCreditBytes = 16;
// Data credits of a TLP carrying `data_bytes` (whole DWs) of payload.
inline constexpr uint64_t fc_data_credits(uint64_t data_bytes) {
  return (data_bytes + kFcDataCreditBytes - 1) / kFcDataCreditBytes;
}
// The class a TLP of `kind` belongs to. mmio_read is a request downstream
// and a completion upstream.
FcType fc_type_of(TlpKind kind, bool downstream);

// All functions below throw std::invalid_argument for len == 0 (PCIe's
// zero-length read is a flush, which nothing here needs) or for an access
// that wraps the 64-bit address space.
std::vector<Tlp> split_read_requests(uint64_t addr, uint64_t len, const TlpRules& rules);
std::vector<Tlp> split_completions(uint64_t addr, uint64_t len, const TlpRules& rules);
std::vector<Tlp> split_writes(uint64_t addr, uint64_t len, const TlpRules& rules);

TlpTotals read_request_totals(uint64_t addr, uint64_t len, const TlpRules& rules);
// Completions answering a read of (addr, len). For a read made of several
// requests this equals the sum over its requests, because MRRS is a
// multiple of RCB, so every request cut is also a completion cut.
TlpTotals completion_totals(uint64_t addr, uint64_t len, const TlpRules& rules);
TlpTotals write_totals(uint64_t addr, uint64_t len, const TlpRules& rules);

// The same TLPs one at a time, without building a vector: fn(const Tlp&)
// is called for each, in order. Same exceptions as above.
namespace detail {
void check_access(uint64_t addr, uint64_t len);
// fn(chunk_addr, chunk_len) for [addr, addr + len) cut at every multiple of
// `boundary` (a power of two).
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
}  // namespace detail

template <class Fn>
void for_each_read_request(uint64_t addr, uint64_t len, const TlpRules& rules, Fn&& fn) {
  detail::check_access(addr, len);
  detail::for_each_chunk(addr, len, rules.max_read_request,
                         [&](uint64_t a, uint64_t n) { fn(Tlp{a, n, rules.request_overhead}); });
}
template <class Fn>
void for_each_completion(uint64_t addr, uint64_t len, const TlpRules& rules, Fn&& fn) {
  detail::check_access(addr, len);
  detail::for_each_chunk(addr, len, rules.read_completion_boundary, [&](uint64_t a, uint64_t n) {
    fn(Tlp{a, n, dword_span(a, n) + rules.completion_overhead});
  });
}
template <class Fn>
void for_each_write(uint64_t addr, uint64_t len, const TlpRules& rules, Fn&& fn) {
  detail::check_access(addr, len);
  detail::for_each_chunk(addr, len, rules.max_payload, [&](uint64_t a, uint64_t n) {
    fn(Tlp{a, n, dword_span(a, n) + rules.request_overhead});
  });
}

}  // namespace mprdma::pcie
