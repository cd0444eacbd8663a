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
inline bool is_msi_address(uint64_t addr) {
  return addr >= kMsiWindowBase && addr < kMsiWindowEnd;
}

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

}  // namespace mprdma::pcie
