#include "vp/nic/transport/gbn/gbn_config.h"

namespace mprdma::nic {

void GbnConfig::bind(core::Binder& b) {
  b.field("go_back_delay", go_back_delay,
          "Time from the event that sends a go-back-N requester back (a sequence NAK, a "
          "timeout, a missing READ response) to its first resent packet; the QP sends nothing "
          "meanwhile. 0: a hardware go-back that turns around at once. Commodity RoCE NICs "
          "are much slower to recover: the MP-RDMA paper (§2, citing DCQCN) reports 0.1 % "
          "loss cutting a RoCE flow below ~60 % of its throughput, ~140 us per loss at "
          "40 Gb/s with 1 KB frames (vp/nic/transport/transport.md, \"Go-back-N\").",
          core::Duration{}, core::Duration::from_ps(1000000000000ull));
}

}  // namespace mprdma::nic
