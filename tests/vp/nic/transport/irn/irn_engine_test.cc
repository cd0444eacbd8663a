// IRN behind the transport-engine interface, the explicit READ
// acknowledgements: what the requester's engine answers for READ responses
// (a Read ACK or NACK for the responder, SACKs without a recovery of its
// own), how it reads a plain ACK that passes a missing response, and the
// responder's side (queued responses, Read NACKs, retransmissions). The
// golden models themselves are tested in irn_model_test.cc.
#include "vp/nic/transport/irn/irn_engine.h"

#include <gtest/gtest.h>

#include <optional>

namespace mprdma::nic {
namespace {

constexpr uint32_t kQpn = 0x40;

IrnParams params(bool read_acks = true) {
  IrnParams p;
  p.bdp_packets = 64;
  p.rto_low_cycles = 1000;
  p.rto_high_cycles = 5000;
  p.read_acks = read_acks;
  return p;
}

ConnParams conn() {
  ConnParams c;
  c.qpn = kQpn;
  c.sq_psn = 100;
  c.rq_psn = 500;
  c.udp_sport = 0xC123;
  return c;
}

// A requester with a READ of 4 responses (PSNs 100..103) and then a
// 2-packet WRITE (104, 105), all sent.
class IrnReadAcks : public ::testing::Test {
 protected:
  void start(bool read_acks) {
    t_.emplace(params(read_acks));
    t_->open(conn());
    t_->set_requester(conn());
    t_->set_snd_max(kQpn, 106, 0);
    TxGrant g = t_->next_tx(kQpn, 1);
    ASSERT_TRUE(g.send);
    ASSERT_EQ(g.psn, 100u);
    t_->on_sent(kQpn, 100, 4, 1);
    for (uint32_t p = 104; p < 106; ++p) {
      g = t_->next_tx(kQpn, 2);
      ASSERT_EQ(g.psn, p);
      t_->on_sent(kQpn, p, 1, 2);
    }
  }
  AckResult response(uint32_t psn, uint32_t ack_limit, uint64_t now = 10) {
    AckEvent ev;
    ev.kind = AckEvent::Kind::read_response;
    ev.psn = psn;
    ev.ack_limit = ack_limit;
    return t_->on_ack(kQpn, ev, now);
  }
  std::optional<IrnEngine> t_;
};

TEST_F(IrnReadAcks, ResponsesAreAcknowledgedToTheResponderNotRecoveredHere) {
  start(true);
  EXPECT_TRUE(t_->traits().explicit_read_acks);
  AckResult r = response(100, 100);
  EXPECT_TRUE(r.accept);
  EXPECT_TRUE(r.progress);
  ASSERT_TRUE(r.send_read_ack);
  EXPECT_FALSE(r.read_ack.nack);
  EXPECT_EQ(r.read_ack.aack, 100u);  // every response up to 100
  EXPECT_EQ(r.read_ack.sack, 100u);
  EXPECT_EQ(r.read_ack.echo_vp, 0xC123);
  // 101 is lost: 102 arrives after a gap, a Read NACK; the requester does
  // not ask again itself.
  r = response(102, 101);
  EXPECT_TRUE(r.accept);
  ASSERT_TRUE(r.send_read_ack);
  EXPECT_TRUE(r.read_ack.nack);
  EXPECT_EQ(r.read_ack.sack, 102u);
  EXPECT_EQ(r.read_ack.aack, 100u);
  EXPECT_FALSE(t_->next_tx(kQpn, 11).send);
  EXPECT_FALSE(t_->sender(kQpn)->in_recovery());
  // The responder's retransmission of 101 arrives: una passes 102 too.
  r = response(101, 101);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_->snd_una(kQpn), 103u);
  // A copy of 101 (sent again before the Read ACK reached the responder)
  // is acknowledged again and not placed twice.
  r = response(101, 103);
  EXPECT_FALSE(r.accept);
  EXPECT_TRUE(r.send_read_ack);
  EXPECT_EQ(r.read_ack.aack, 102u);
}

TEST_F(IrnReadAcks, WithoutThemTheRequesterAsksAgain) {
  start(false);
  EXPECT_FALSE(t_->traits().explicit_read_acks);
  response(100, 100);
  const AckResult r = response(102, 101);
  EXPECT_FALSE(r.send_read_ack);
  EXPECT_TRUE(t_->sender(kQpn)->in_recovery());
  const TxGrant g = t_->next_tx(kQpn, 11);
  EXPECT_TRUE(g.send);
  EXPECT_TRUE(g.retransmit);
  EXPECT_EQ(g.psn, 101u);  // a READ request for that one response
}

// The responder ACKs the WRITE (104, 105) while responses 101 and 103 are
// missing: the requester acknowledges up to 101 and SACKs what is not a
// missing response, still without a recovery; the responses' arrival then
// completes everything.
TEST_F(IrnReadAcks, AnAckPastMissingResponsesSacksTheRest) {
  start(true);
  response(100, 100);
  response(102, 101);
  AckEvent ev;
  ev.kind = AckEvent::Kind::ack;
  ev.has_ext = true;
  ev.ext.aack = 105;
  ev.ext.sack = 105;
  ev.ack_limit = 101;
  ev.missing_responses = {101, 103};
  AckResult r = t_->on_ack(kQpn, ev, 12);
  EXPECT_FALSE(r.send_read_ack);
  EXPECT_FALSE(t_->sender(kQpn)->in_recovery());
  EXPECT_EQ(t_->snd_una(kQpn), 101u);
  EXPECT_TRUE(t_->sender(kQpn)->sacked(104));
  EXPECT_TRUE(t_->sender(kQpn)->sacked(105));
  EXPECT_FALSE(t_->sender(kQpn)->sacked(103));
  EXPECT_FALSE(t_->next_tx(kQpn, 13).send);
  response(101, 101);
  EXPECT_EQ(t_->snd_una(kQpn), 103u);
  r = response(103, 103);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_->snd_una(kQpn), 106u);
  // An atomic's answer among the missing: the requester recovers (asks
  // again), as without Read ACKs.
  start(true);
  response(100, 100);
  ev.missing_atomic = true;
  t_->on_ack(kQpn, ev, 14);
  EXPECT_TRUE(t_->sender(kQpn)->in_recovery());
}

TEST(IrnReadResponderEngine, ReadNacksAndTimeoutsDriveTheResponsesSentAgain) {
  IrnEngine t(params(true));
  t.open(conn());
  t.read_queued(kQpn, 500, 3, 0);
  for (uint32_t p = 500; p < 503; ++p) t.read_response_sent(kQpn, p, 1);
  EXPECT_TRUE(t.read_pending(kQpn, 500));
  EXPECT_EQ(t.read_wake_at(kQpn), 1u + 1000u);  // 3 in flight: RTO_low
  AckExt nack;
  nack.aack = 500;
  nack.sack = 502;
  nack.nack = true;
  const AckResult r = t.on_read_ack(kQpn, nack, 5);
  EXPECT_TRUE(r.tx_ready);
  uint32_t psn = 0;
  ASSERT_TRUE(t.next_read_retx(kQpn, psn));
  EXPECT_EQ(psn, 501u);
  t.read_response_sent(kQpn, psn, 6);
  EXPECT_FALSE(t.next_read_retx(kQpn, psn));
  AckExt ack;
  ack.aack = 502;
  ack.sack = 501;
  EXPECT_FALSE(t.on_read_ack(kQpn, ack, 7).tx_ready);
  EXPECT_FALSE(t.read_pending(kQpn, 500));
  EXPECT_EQ(t.read_wake_at(kQpn), kNever);
  // Without Read ACKs there is nothing on this side.
  IrnEngine off(params(false));
  off.open(conn());
  off.read_queued(kQpn, 500, 3, 0);
  EXPECT_FALSE(off.read_pending(kQpn, 500));
  EXPECT_EQ(off.read_wake_at(kQpn), kNever);
}

// A requester that never answers (its QP gone, or it sends no Read ACKs):
// after retry_cnt + 1 timeouts in a row without progress the responder
// gives its READs up instead of sending them again for ever; a Read ACK
// that acknowledges something renews the budget.
TEST(IrnReadResponderEngine, ASilentRequesterIsGivenUpAfterTheRetryBudget) {
  IrnEngine t(params(true));
  ConnParams c = conn();
  c.retry_cnt = 2;
  t.open(c);
  t.read_queued(kQpn, 500, 2, 0);
  t.read_response_sent(kQpn, 500, 0);
  t.read_response_sent(kQpn, 501, 0);
  uint64_t now = 0;
  auto time_out = [&] {
    now = t.read_wake_at(kQpn);
    EXPECT_NE(now, kNever);
    t.on_read_timer(kQpn, now);
    uint32_t psn = 0;
    while (t.next_read_retx(kQpn, psn)) t.read_response_sent(kQpn, psn, now);
  };
  time_out();
  time_out();
  // Progress: 500 arrived. The budget starts again.
  AckExt a;
  a.aack = 500;
  a.sack = 500;
  t.on_read_ack(kQpn, a, now + 1);
  time_out();
  time_out();
  EXPECT_TRUE(t.read_pending(kQpn, 500));
  time_out();  // the third in a row: given up
  EXPECT_FALSE(t.read_pending(kQpn, 500));
  EXPECT_EQ(t.read_wake_at(kQpn), kNever);
}

}  // namespace
}  // namespace mprdma::nic
