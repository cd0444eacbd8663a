// Classes of RC request opcodes, as the responder sees them.
#pragma once

#include "vp/net/roce_codec.h"

namespace mprdma::nic {

inline bool is_send(net::Opcode op) { return op <= net::Opcode::SEND_ONLY_WITH_IMMEDIATE; }
inline bool is_write(net::Opcode op) {
  return op >= net::Opcode::RDMA_WRITE_FIRST && op <= net::Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
}
inline bool carries_imm(net::Opcode op) {
  using net::Opcode;
  return op == Opcode::SEND_LAST_WITH_IMMEDIATE || op == Opcode::SEND_ONLY_WITH_IMMEDIATE ||
         op == Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE ||
         op == Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
}
inline bool is_read_response(net::Opcode op) {
  return op >= net::Opcode::RDMA_READ_RESPONSE_FIRST && op <= net::Opcode::RDMA_READ_RESPONSE_ONLY;
}
// First packet of a message.
inline bool starts(net::Opcode op) {
  using net::Opcode;
  return op == Opcode::SEND_FIRST || op == Opcode::SEND_ONLY ||
         op == Opcode::SEND_ONLY_WITH_IMMEDIATE || op == Opcode::RDMA_WRITE_FIRST ||
         op == Opcode::RDMA_WRITE_ONLY || op == Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
}
// Last packet of a message.
inline bool ends(net::Opcode op) {
  using net::Opcode;
  return op == Opcode::SEND_LAST || op == Opcode::SEND_LAST_WITH_IMMEDIATE ||
         op == Opcode::SEND_ONLY || op == Opcode::SEND_ONLY_WITH_IMMEDIATE ||
         op == Opcode::RDMA_WRITE_LAST || op == Opcode::RDMA_WRITE_LAST_WITH_IMMEDIATE ||
         op == Opcode::RDMA_WRITE_ONLY || op == Opcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE;
}

}  // namespace mprdma::nic
