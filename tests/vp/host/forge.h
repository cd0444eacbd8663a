// Frames a hostile peer sends: RoCEv2 packets built field by field with
// valid IP checksums and ICRCs, so that they pass every integrity check of
// the receiving MAC and reach the transport. A test injects them with
// Relay::inject() as if they came from the host on side 0 (h0).
#pragma once

#include <cstdint>
#include <vector>

#include "vp/net/mp_ext.h"
#include "vp/net/roce_codec.h"

namespace mprdma::test {

// The addresses of TwoHosts' hosts (two_hosts.h): h0 is 10.0.0.1 with MAC
// 02:00:00:00:00:01, h1 is 10.0.0.2 with ...:02.
inline net::RoceFields FromH0ToH1() {
  net::RoceFields f;
  f.src_mac.b = {0x02, 0, 0, 0, 0, 0x01};
  f.dst_mac.b = {0x02, 0, 0, 0, 0, 0x02};
  f.src_ip = 0x0A000001;
  f.dst_ip = 0x0A000002;
  f.ecn = 2;  // ECT(0), as the NICs send
  return f;
}

// A frame with `payload` followed by `trailer` (RoceFields::trailer_len is
// set from it).
inline net::PacketPtr Forge(net::RoceFields f, const std::vector<uint8_t>& payload = {},
                            const std::vector<uint8_t>& trailer = {}) {
  std::vector<uint8_t> body(payload);
  body.insert(body.end(), trailer.begin(), trailer.end());
  f.trailer_len = static_cast<uint32_t>(trailer.size());
  return net::build_roce(f, body.empty() ? nullptr : body.data(), body.size());
}

inline std::vector<uint8_t> AckTrailer(const net::MpAckExt& x) {
  std::vector<uint8_t> t(net::kMpAckExtBytes);
  net::put_mp_ack_ext(t.data(), x);
  return t;
}

inline std::vector<uint8_t> DataTrailer(const net::MpDataExt& x) {
  std::vector<uint8_t> t(net::kMpDataExtBytes);
  net::put_mp_data_ext(t.data(), x);
  return t;
}

}  // namespace mprdma::test
