#include "vp/net/mp_ext.h"

#include <stdexcept>
#include <string>

namespace mprdma::net {

namespace {
void put24(uint8_t* p, uint32_t v, const char* what) {
  if (v > 0xFFFFFF) throw std::invalid_argument(std::string(what) + " does not fit 24 bits");
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}
uint32_t get24(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }
}  // namespace

void put_mp_data_ext(uint8_t* d, const MpDataExt& e) {
  put24(d, e.msn, "MP-RDMA MSN");
  put24(d + 3, e.ipsn, "MP-RDMA iPSN");
  d[6] = static_cast<uint8_t>((e.retx ? 1 : 0) | (e.sync ? 2 : 0) | (e.tail ? 4 : 0));
  d[7] = 0;
}

bool get_mp_data_ext(const uint8_t* s, MpDataExt& e) {
  if ((s[6] & ~0x07) || s[7]) return false;
  e.msn = get24(s);
  e.ipsn = get24(s + 3);
  e.retx = s[6] & 1;
  e.sync = s[6] & 2;
  e.tail = s[6] & 4;
  return true;
}

void put_mp_ack_ext(uint8_t* d, const MpAckExt& e) {
  d[0] = static_cast<uint8_t>(e.echo_vp >> 8);
  d[1] = static_cast<uint8_t>(e.echo_vp);
  put24(d + 2, e.sack, "MP-RDMA SACK PSN");
  put24(d + 5, e.aack, "MP-RDMA AACK PSN");
  d[8] = static_cast<uint8_t>((e.ece ? 1 : 0) | (e.retx ? 2 : 0) | (e.nack ? 4 : 0) |
                              (e.read ? 8 : 0));
  d[9] = d[10] = d[11] = 0;
}

bool get_mp_ack_ext(const uint8_t* s, MpAckExt& e) {
  if ((s[8] & ~0x0f) || s[9] || s[10] || s[11]) return false;
  e.echo_vp = static_cast<uint16_t>(s[0] << 8 | s[1]);
  e.sack = get24(s + 2);
  e.aack = get24(s + 5);
  e.ece = s[8] & 1;
  e.retx = s[8] & 2;
  e.nack = s[8] & 4;
  e.read = s[8] & 8;
  return true;
}

}  // namespace mprdma::net
