// Configuration of one PCIe link (root port <-> endpoint).
//
// Defaults describe the PCIe 3.0 x16 link of Kalia et al. (ATC'16): 984.6 MB/s
// per lane after 128b/130b encoding, request TLP overhead Pr = 26 B,
// completion overhead Pc = 22 B, 128 B read completions. See pcie.md for the
// latency defaults and what is modelled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/units.h"
#include "vp/pcie/tlp.h"

namespace mprdma::pcie {

struct PcieConfig {
  // PCIe generation 1..5: 2.5, 5, 8, 16, 32 GT/s per lane.
  int64_t gen = 3;
  // Link width; one of 1, 2, 4, 8, 16, 32.
  int64_t lanes = 16;
  // Max_Payload_Size: largest data payload of a write TLP.
  core::Bytes max_payload{256};
  // Max_Read_Request_Size: largest read one request TLP may ask for.
  core::Bytes max_read_request{512};
  // Read completion boundary: completions are cut at multiples of it.
  core::Bytes read_completion_boundary{128};
  // Bytes added to every request TLP (header, sequence number, LCRC,
  // framing): Kalia's Pr.
  core::Bytes request_overhead{26};
  // Bytes added to every completion TLP: Kalia's Pc.
  core::Bytes completion_overhead{22};
  // One-way time from the last byte leaving the sender to it being usable
  // at the receiver: PHY/SerDes pipelines both ends, data-link layer, root
  // port. 150 ns each way with 100 ns of memory service gives about 410 ns
  // for a small DMA read on an idle link, within the few-hundred-ns range
  // measured for DMA reads on Xeon hosts (Neugebauer et al., SIGCOMM'18).
  core::Duration latency = core::Duration::from_ns(150);
  // Root complex service time of a read request (memory/LLC access and
  // completion formation): from the request's arrival to its first
  // completion being ready to go downstream.
  core::Duration memory_latency = core::Duration::from_ns(100);
  // Read tags of the endpoint: request TLPs in flight at once. 256 is what
  // 8-bit Extended Tags give; fewer caps read bandwidth at tags*MRRS/RTT.
  int64_t max_outstanding_reads = 256;
  // Data-link layer: every DLLP is 8 bytes on the wire (6 B of DLLP and 2 B
  // of framing). The receiver of TLPs acknowledges them with an Ack DLLP per
  // `ack_every` TLPs and returns their flow-control credits with an
  // UpdateFC DLLP per `update_fc_every` TLPs, in the other direction. Both
  // are our choices (the spec lets the receiver coalesce); with TLPs of
  // ~100 B they make DLLPs ~4 % of TLP bytes, Kalia's "< 5 %".
  core::Bytes dllp_bytes{8};
  int64_t ack_every = 4;
  int64_t update_fc_every = 4;

  void bind(core::Binder& b);

  // Transfer rate of one lane in GT/s, and the line-code efficiency
  // (8b/10b for gen 1-2, 128b/130b from gen 3).
  double transfer_rate_gtps() const;
  double encoding_efficiency() const;
  // Data bytes per second one lane / the whole link carries after encoding
  // (gen3: 8e9 * 128/130 / 8 = 984.6 MB/s per lane).
  double lane_bytes_per_sec() const;
  double link_bytes_per_sec() const;
  // Picoseconds to serialise `wire_bytes` on the link, rounded up.
  uint64_t serialize_ps(uint64_t wire_bytes) const;

  TlpRules tlp_rules() const;
  // Every problem with the values (empty when valid); validate() throws
  // std::invalid_argument listing them.
  std::vector<std::string> problems() const;
  void validate() const;
};

}  // namespace mprdma::pcie
