// Unit: the MODIFY_QP rules of UC QPs (qp_transition_rule_uc), the UC
// column of Linux's ib_modify_qp_is_ok: RESET->INIT needs the P_Key index,
// port and access flags; INIT->RTR the path (AV, MTU, dest QPN, RQ PSN);
// RTR->RTS the SQ PSN; the acknowledgement and READ/atomic attributes
// (timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic,
// max_dest_rd_atomic) are neither required nor allowed anywhere.
#include <gtest/gtest.h>
#include <mprdma/hw.h>

#include "vp/nic/firmware/firmware.h"

namespace mprdma::nic {
namespace {

constexpr uint32_t S = MPR_QP_ATTR_STATE;

TEST(FirmwareUc, TransitionRules) {
  QpTransitionRule r = qp_transition_rule_uc(MPR_QPS_RESET, MPR_QPS_INIT);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_ACCESS_FLAGS);
  r = qp_transition_rule_uc(MPR_QPS_INIT, MPR_QPS_RTR);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required,
            S | MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN | MPR_QP_ATTR_RQ_PSN);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_ACCESS_FLAGS | MPR_QP_ATTR_PKEY_INDEX);
  r = qp_transition_rule_uc(MPR_QPS_RTR, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_SQ_PSN);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS);
  r = qp_transition_rule_uc(MPR_QPS_RTS, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_ACCESS_FLAGS);
  constexpr uint32_t kNotUc = MPR_QP_ATTR_TIMEOUT | MPR_QP_ATTR_RETRY_CNT | MPR_QP_ATTR_RNR_RETRY |
                              MPR_QP_ATTR_MIN_RNR_TIMER | MPR_QP_ATTR_MAX_QP_RD_ATOMIC |
                              MPR_QP_ATTR_MAX_DEST_RD_ATOMIC | MPR_QP_ATTR_QKEY;
  for (uint8_t from = MPR_QPS_RESET; from <= MPR_QPS_ERR; ++from)
    for (uint8_t to = MPR_QPS_RESET; to <= MPR_QPS_ERR; ++to) {
      const QpTransitionRule k = qp_transition_rule_uc(from, to);
      EXPECT_EQ((k.required | k.optional) & kNotUc, 0u) << int(from) << "->" << int(to);
    }
  EXPECT_FALSE(qp_transition_rule_uc(MPR_QPS_RESET, MPR_QPS_RTR).allowed);
  EXPECT_FALSE(qp_transition_rule_uc(MPR_QPS_INIT, MPR_QPS_RTS).allowed);
  EXPECT_FALSE(qp_transition_rule_uc(MPR_QPS_RTS, MPR_QPS_RTR).allowed);
  EXPECT_TRUE(qp_transition_rule_uc(MPR_QPS_RTS, MPR_QPS_ERR).allowed);
  EXPECT_TRUE(qp_transition_rule_uc(MPR_QPS_ERR, MPR_QPS_RESET).allowed);
  // RC still requires what UC refuses.
  EXPECT_NE(qp_transition_rule(MPR_QPS_RTR, MPR_QPS_RTS).required & MPR_QP_ATTR_TIMEOUT, 0u);
}

}  // namespace
}  // namespace mprdma::nic
