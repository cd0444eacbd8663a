// Unit: the MODIFY_QP rules of UD QPs (qp_transition_rule_ud), the UD
// column of ibv_modify_qp: RESET->INIT needs the P_Key index, port and
// Q_Key; INIT->RTR only the state; RTR->RTS the SQ PSN; the Q_Key may change
// later; no path attribute (AV, MTU, dest QPN, RQ PSN, timeouts) is allowed.
#include <gtest/gtest.h>
#include <mprdma/hw.h>

#include "vp/nic/firmware/firmware.h"

namespace mprdma::nic {
namespace {

constexpr uint32_t S = MPR_QP_ATTR_STATE;

TEST(FirmwareUd, TransitionRules) {
  QpTransitionRule r = qp_transition_rule_ud(MPR_QPS_RESET, MPR_QPS_INIT);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_PORT | MPR_QP_ATTR_QKEY);
  EXPECT_EQ(r.optional, 0u);
  r = qp_transition_rule_ud(MPR_QPS_INIT, MPR_QPS_RTR);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_PKEY_INDEX | MPR_QP_ATTR_QKEY);
  r = qp_transition_rule_ud(MPR_QPS_RTR, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.required, S | MPR_QP_ATTR_SQ_PSN);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_QKEY);
  r = qp_transition_rule_ud(MPR_QPS_RTS, MPR_QPS_RTS);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.optional, MPR_QP_ATTR_CUR_STATE | MPR_QP_ATTR_QKEY);
  constexpr uint32_t kPath = MPR_QP_ATTR_AV | MPR_QP_ATTR_PATH_MTU | MPR_QP_ATTR_DEST_QPN |
                             MPR_QP_ATTR_RQ_PSN | MPR_QP_ATTR_TIMEOUT | MPR_QP_ATTR_RETRY_CNT |
                             MPR_QP_ATTR_RNR_RETRY | MPR_QP_ATTR_ACCESS_FLAGS;
  for (uint8_t from = MPR_QPS_RESET; from <= MPR_QPS_RTS; ++from)
    for (uint8_t to = MPR_QPS_RESET; to <= MPR_QPS_RTS; ++to) {
      const QpTransitionRule k = qp_transition_rule_ud(from, to);
      EXPECT_EQ((k.required | k.optional) & kPath, 0u) << int(from) << "->" << int(to);
    }
  EXPECT_FALSE(qp_transition_rule_ud(MPR_QPS_RESET, MPR_QPS_RTR).allowed);
  EXPECT_FALSE(qp_transition_rule_ud(MPR_QPS_INIT, MPR_QPS_RTS).allowed);
  EXPECT_FALSE(qp_transition_rule_ud(MPR_QPS_RTS, MPR_QPS_SQD).allowed);
  EXPECT_TRUE(qp_transition_rule_ud(MPR_QPS_RTS, MPR_QPS_ERR).allowed);
  EXPECT_TRUE(qp_transition_rule_ud(MPR_QPS_ERR, MPR_QPS_RESET).allowed);
  // The RC rules are unchanged: RC's RESET->INIT has no Q_Key.
  EXPECT_EQ(qp_transition_rule(MPR_QPS_RESET, MPR_QPS_INIT).required & MPR_QP_ATTR_QKEY, 0u);
}

}  // namespace
}  // namespace mprdma::nic
