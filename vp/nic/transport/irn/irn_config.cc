#include "vp/nic/transport/irn/irn_config.h"

namespace mprdma::nic {

void IrnConfig::bind(core::Binder& b) {
  const core::Duration ns1 = core::Duration::from_ps(1000);
  const core::Duration s1 = core::Duration::from_ps(1000000000000ull);
  b.field("bdp_packets", bdp_packets,
          "BDP of the network in packets: BDP-FC's cap on packets in flight and the length "
          "of the SACK and receive bitmaps (power of two).",
          2, 1 << 20, "packets");
  if (bdp_packets & (bdp_packets - 1)) b.error("bdp_packets must be a power of two");
  b.field("bdp_fc", bdp_fc, "BDP-FC: at most bdp_packets packets in flight per QP.");
  b.field("rto_low", rto_low,
          "Timeout with at most rto_low_threshold packets in flight (paper: 100 us).", ns1, s1);
  b.field("rto_high", rto_high, "Timeout otherwise (paper: 320 us).", ns1, s1);
  b.field("rto_low_threshold", rto_low_threshold, "N of RTO_low (paper: 3).", 0, 1 << 20,
          "packets");
  b.field("read_acks", read_acks,
          "Explicit READ acknowledgements (IRN): the requester answers READ responses with "
          "Read (N)ACKs and the responder sends lost responses again itself, selectively, "
          "on a Read NACK or its own timeout (RTO_low/RTO_high). false: the requester asks "
          "again for missing responses (one READ request per response), a round trip later.");
}

}  // namespace mprdma::nic
