#include "vp/net/cnp.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "vp/net/icrc.h"
#include "vp/net/roce_headers.h"

namespace mprdma::net {
namespace {

void check(uint64_t v, uint64_t max, const char* what) {
  if (v > max)
    throw std::invalid_argument(std::string("build_cnp: ") + what + " = " + std::to_string(v) +
                                " is out of range");
}

}  // namespace

PacketPtr build_cnp(const RoceFields& f) {
  check(f.dscp, 63, "dscp");
  check(f.ecn, 3, "ecn");
  check(f.dest_qp, 0xFFFFFF, "dest_qp");
  // The BTH of a CNP: BECN set, P_Key and dest QP from `f`; SE, M, PadCnt,
  // FECN, AckReq and the PSN zero.
  RoceFields h = f;
  h.solicited = h.mig_req = h.fecn = h.ack_req = false;
  h.becn = true;
  h.psn = 0;
  auto pkt = std::make_unique<Packet>();
  pkt->data.resize(kCnpFrameBytes);  // zero: the 16 reserved bytes after the BTH
  detail::write_headers(pkt->data.data(), h, kCnpOpcode, 0, kCnpFrameBytes);
  detail::seal(pkt->data.data(), kCnpFrameBytes);
  return pkt;
}

ParseStatus parse_cnp(const uint8_t* d, size_t len, RoceFields& out) {
  out = RoceFields{};
  size_t udp_len = 0;
  const ParseStatus st = detail::check_headers(d, len, udp_len);
  if (st != ParseStatus::ok) return st;
  if (d[kBthOffset] != kCnpOpcode) return ParseStatus::bad_opcode;
  if (udp_len != kUdpHeaderBytes + kBthBytes + kCnpReservedBytes + kIcrcBytes)
    return ParseStatus::bad_length;
  detail::read_headers(d, out);
  out.opcode = static_cast<Opcode>(kCnpOpcode);
  out.payload_offset = static_cast<uint32_t>(kExtOffset);
  out.payload_len = 0;
  return ParseStatus::ok;
}

}  // namespace mprdma::net
