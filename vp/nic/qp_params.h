// Derived per-QP parameters: packet addressing from the QP context, and the
// InfiniBand encodings of MTU, ACK timeout and RNR timer.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>

#include "vp/net/roce_codec.h"
#include "vp/nic/context_memory.h"
#include "vp/nic/nic_config.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {

// Header fields common to every packet of the QP (addresses, traffic class,
// UDP source port, destination QP). Opcode-specific fields are left default.
net::RoceFields qp_base_fields(const mpr_qpc& qpc, const NicConfig& cfg,
                               const ContextMemory& contexts);

// The UDP source port when the QP did not choose one: a fixed function of
// the QP numbers, in the dynamic range, so each connection takes one path.
uint16_t default_udp_sport(uint32_t qpn, uint32_t dest_qpn);

// enum mpr_mtu -> bytes (0 for an invalid code).
uint32_t mtu_bytes(uint8_t code);
// Local ACK timeout 4.096 us * 2^timeout; 0 means no timeout (returns 0).
uint64_t ack_timeout_ps(uint8_t timeout);
// IB RNR timer code (0..31) -> picoseconds.
uint64_t rnr_timer_ps(uint8_t code);

// The transport engine's view of a QP, from its context.
ConnParams conn_params(const mpr_qpc& qpc, const NicConfig& cfg, const net::RoceFields& base);

}  // namespace mprdma::nic
