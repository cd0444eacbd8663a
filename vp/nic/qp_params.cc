#include "vp/nic/qp_params.h"

namespace mprdma::nic {

namespace {
uint32_t ipv4_of_gid(const uint8_t* gid) {
  return (uint32_t{gid[12]} << 24) | (uint32_t{gid[13]} << 16) | (uint32_t{gid[14]} << 8) | gid[15];
}
}  // namespace

net::RoceFields qp_base_fields(const mpr_qpc& q, const NicConfig& cfg,
                               const ContextMemory& contexts) {
  net::RoceFields f;
  const mpr_qp_attr& a = q.attr;
  f.src_mac.b = cfg.mac;
  for (int i = 0; i < 6; ++i) f.dst_mac.b[i] = a.dmac[i];
  // A connected QP sends from the GID of its address vector. A datagram
  // QP has none (MODIFY_QP takes no AV for UD, and a UD WQE carries no
  // source GID): it sends from the port's address, not from whatever GID 0
  // is (the interface's IPv6 link-local address, whose last four bytes are
  // no IPv4 address): the receiver answers the source address of a
  // datagram, e.g. the connection manager's MADs on the GSI QP.
  const uint8_t* sgid = q.qp_type == MPR_QPT_UD ? nullptr : contexts.gid(a.sgid_index);
  f.src_ip = sgid ? ipv4_of_gid(sgid) : cfg.ip;
  f.dst_ip = ipv4_of_gid(a.dgid);
  f.dscp = a.traffic_class >> 2;
  f.ecn = cfg.ecn ? 2 : 0;  // ECT(0) = 0b10
  f.ttl = a.hop_limit ? a.hop_limit : 64;
  f.udp_sport = a.udp_sport ? a.udp_sport : default_udp_sport(q.qpn, a.dest_qpn);
  f.dest_qp = a.dest_qpn;
  return f;
}

uint16_t default_udp_sport(uint32_t qpn, uint32_t dest_qpn) {
  uint32_t h = (qpn * 0x9E3779B1u) ^ (dest_qpn * 0x85EBCA77u);
  h ^= h >> 15;
  return static_cast<uint16_t>(0xC000 | (h & 0x3FFF));
}

uint32_t mtu_bytes(uint8_t code) {
  return code >= MPR_MTU_256 && code <= MPR_MTU_4096 ? 128u << code : 0;
}

uint64_t ack_timeout_ps(uint8_t timeout) {
  if (timeout == 0) return 0;
  return uint64_t{4096000} << timeout;  // 4.096 us in ps, times 2^timeout
}

uint64_t rnr_timer_ps(uint8_t code) {
  // IB spec table of RNR NAK timer values, in units of 10 ns.
  static const uint32_t kTenNs[32] = {
      65536000, 1000,    2000,    3000,     4000,     6000,     8000,     12000,
      16000,    24000,   32000,   48000,    64000,    96000,    128000,   192000,
      256000,   384000,  512000,  768000,   1024000,  1536000,  2048000,  3072000,
      4096000,  6144000, 8192000, 12288000, 16384000, 24576000, 32768000, 49152000};
  return uint64_t{kTenNs[code & 31]} * 10000;
}

ConnParams conn_params(const mpr_qpc& q, const NicConfig& cfg, const net::RoceFields& base) {
  ConnParams p;
  p.qpn = q.qpn;
  p.dest_qpn = q.attr.dest_qpn;
  p.sq_psn = q.attr.sq_psn;
  p.rq_psn = q.attr.rq_psn;
  const uint64_t timeout = ack_timeout_ps(q.attr.timeout);
  p.ack_timeout_cycles = timeout ? (timeout + cfg.period_ps() - 1) / cfg.period_ps() : 0;
  p.retry_cnt = q.attr.retry_cnt;
  p.rnr_retry = q.attr.rnr_retry;
  p.udp_sport = base.udp_sport;
  p.ack_coalesce = static_cast<uint32_t>(cfg.ack_coalesce);
  p.engine = q.transport;
  return p;
}

}  // namespace mprdma::nic
