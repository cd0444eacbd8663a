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

// The receive buffers of one end of the link, as the flow-control credits
// it advertises for the TLPs coming to it (data-link layer, per credit type:
// one header credit per TLP, one data credit per 16 B of payload). 0 means
// infinite: the transmitter never waits, and the receiver sends no UpdateFC
// for that type.
//
// Defaults (our choice): 127 header and 2047 data credits for posted and
// non-posted TLPs, the largest a port may advertise without scaled flow
// control (8-bit / 12-bit fields, at most half of their range outstanding);
// with the link's 150 ns each way the credit loop is ~0.35 us, and these
// pools cover it for every stream the platform makes (a 32-header pool,
// usual in FPGA endpoints, would hold back-to-back 64 B MMIO lines).
// Completion credits are infinite: the spec requires endpoints to advertise
// infinite completion credits (they only issue reads they have room for:
// here, the read tags), and root ports do too (e.g. Intel's R-Tile).
struct PcieReceiverConfig {
  int64_t posted_header = 127;
  int64_t posted_data = 2047;
  int64_t non_posted_header = 127;
  int64_t non_posted_data = 2047;
  int64_t completion_header = 0;
  int64_t completion_data = 0;
  // From a TLP's arrival (the end of `latency`) to the receiver freeing its
  // buffer; its credits go back with the next UpdateFC. 0: `latency`
  // already runs to the point of use.
  core::Duration processing{0};

  void bind(core::Binder& b);
  // Header and data credits of `type` (0 = infinite).
  uint64_t header_credits(FcType type) const;
  uint64_t data_credits(FcType type) const;
};

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
  // Data-link layer: every DLLP is 8 bytes on the wire (4 B, a 16-bit CRC
  // and 2 B of framing). The receiver of TLPs acknowledges them with an Ack
  // DLLP per `ack_every` TLPs and returns the credits of each finite credit
  // type with an UpdateFC DLLP per `update_fc_every` TLPs of that type (or
  // at once when the transmitter is about to run out, as the spec demands),
  // in the other direction. The counts are our choices (the spec lets the
  // receiver coalesce); Kalia (after Xilinx WP350) assumes one Ack and one
  // UpdateFC per 4-5 TLPs, DLLPs under 5 % of the traffic.
  core::Bytes dllp_bytes{8};
  int64_t ack_every = 4;
  int64_t update_fc_every = 4;
  // Receive buffers of the root port (credits for upstream TLPs: DMA
  // writes, MSIs, read requests, MMIO read completions) and of the endpoint
  // (downstream: MMIO writes and reads, DMA read completions).
  PcieReceiverConfig root_port;
  PcieReceiverConfig endpoint;

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
