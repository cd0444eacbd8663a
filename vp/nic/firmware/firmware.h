// Command-processor firmware: executes admin commands against the context
// memory through the FirmwareHal. Plain C++, no timing, no SystemC.
#pragma once

#include <mprdma/hw.h>

#include <cstdint>

#include "vp/nic/firmware/firmware_hal.h"

namespace mprdma::nic {

class Firmware {
 public:
  explicit Firmware(FirmwareHal& hal) : hal_(hal) {}

  // Serves the admin queue until next_command() returns false.
  void run();
  // Executes one command and returns its completion (owner bit not set).
  mpr_cmd_comp execute(const mpr_cmd& cmd);

  static const char* opcode_name(uint16_t opcode);
  static const char* status_name(uint8_t status);

 private:
  using Comp = mpr_cmd_comp;
  void query_device(const mpr_cmd& cmd, Comp& c);
  void query_port(const mpr_cmd& cmd, Comp& c);
  void set_gid(const mpr_cmd& cmd, Comp& c);
  void map_icm(const mpr_cmd& cmd, Comp& c);
  void alloc_pd(const mpr_cmd& cmd, Comp& c);
  void dealloc_pd(const mpr_cmd& cmd, Comp& c);
  void reg_mr(const mpr_cmd& cmd, Comp& c);
  void dereg_mr(const mpr_cmd& cmd, Comp& c);
  void create_eq(const mpr_cmd& cmd, Comp& c);
  void destroy_eq(const mpr_cmd& cmd, Comp& c);
  void create_cq(const mpr_cmd& cmd, Comp& c);
  void destroy_cq(const mpr_cmd& cmd, Comp& c);
  void create_qp(const mpr_cmd& cmd, Comp& c);
  void modify_qp(const mpr_cmd& cmd, Comp& c);
  void query_qp(const mpr_cmd& cmd, Comp& c);
  void destroy_qp(const mpr_cmd& cmd, Comp& c);
  void create_srq(const mpr_cmd& cmd, Comp& c);
  void modify_srq(const mpr_cmd& cmd, Comp& c);
  void query_srq(const mpr_cmd& cmd, Comp& c);
  void destroy_srq(const mpr_cmd& cmd, Comp& c);
  // CREATE_QP's receive side: its own ring, or an SRQ of its PD. False:
  // `c` says why.
  bool check_receive_side(const mpr_cmd_create_qp& in, Comp& c);
  // Writes `len` bytes of output to the command's out mailbox.
  bool write_output(const mpr_cmd& cmd, Comp& c, const void* data, size_t len);

  FirmwareHal& hal_;
};

// Attribute rules of one QP state transition (IB spec, Table "QP state
// transition properties", for RC QPs).
struct QpTransitionRule {
  bool allowed = false;
  uint32_t required = 0;
  uint32_t optional = 0;
};
QpTransitionRule qp_transition_rule(uint8_t from, uint8_t to);
// The same for a UD QP (ibv_modify_qp's UD column: RESET->INIT needs the
// P_Key index, port and Q_Key; RTR needs only the state; RTS the SQ PSN;
// the Q_Key may change on every later transition; no path attributes).
QpTransitionRule qp_transition_rule_ud(uint8_t from, uint8_t to);
// The same for a UC QP (ib_modify_qp_is_ok's UC column): RC's rules without
// the acknowledgement and READ/atomic attributes (timeout, retry_cnt,
// rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic), which a UC
// QP refuses with BAD_ATTR.
QpTransitionRule qp_transition_rule_uc(uint8_t from, uint8_t to);

}  // namespace mprdma::nic
