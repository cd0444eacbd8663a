// The RoCEv2 go-back-N transport engine: requester (PSN grants, cumulative
// ACKs, timer, retries, NAKs, READ responses) and responder (PSN
// classification, ACK coalescing), plus the 24-bit PSN arithmetic.
#include "vp/nic/transport/gbn/gbn_engine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic {
namespace {

using Kind = AckEvent::Kind;
using Error = AckResult::Error;

constexpr uint32_t kQpn = 5;
constexpr uint64_t kTimeout = 1000;

ConnParams params(uint32_t sq_psn = 100, uint32_t rq_psn = 500) {
  ConnParams p;
  p.qpn = kQpn;
  p.dest_qpn = 0x77;
  p.sq_psn = sq_psn;
  p.rq_psn = rq_psn;
  p.ack_timeout_cycles = kTimeout;
  p.retry_cnt = 3;
  p.rnr_retry = 2;
  p.udp_sport = 0xC123;
  p.ack_coalesce = 3;
  return p;
}

AckEvent ack(Kind kind, uint32_t psn, uint32_t ack_limit) {
  AckEvent a;
  a.kind = kind;
  a.psn = psn;
  a.ack_limit = ack_limit;
  return a;
}

class GbnRequesterTest : public ::testing::Test {
 protected:
  void start(const ConnParams& p) {
    p_ = p;
    t_.open(p);
    t_.set_requester(p);
  }
  void SetUp() override { start(params()); }

  uint32_t psn(int64_t offset) const { return psn_add(p_.sq_psn, offset); }

  // Sends `n` single-PSN packets at `now`, checking each grant.
  void send(int n, uint64_t now, bool retransmit = false) {
    for (int i = 0; i < n; ++i) {
      const TxGrant g = t_.next_tx(kQpn, now);
      ASSERT_TRUE(g.send) << "packet " << i;
      EXPECT_EQ(g.psn, t_.snd_nxt(kQpn));
      EXPECT_EQ(g.udp_sport, p_.udp_sport);
      EXPECT_EQ(g.retransmit, retransmit) << "psn " << g.psn;
      t_.on_sent(kQpn, g.psn, 1, now);
    }
  }

  // An ACK whose ack_limit is no constraint (no READ outstanding).
  AckResult plain_ack(uint32_t acked_psn, uint64_t now) {
    return t_.on_ack(kQpn, ack(Kind::ack, acked_psn, psn(1 << 20)), now);
  }

  GbnEngine t_;
  ConnParams p_;
};

TEST(GbnEngine, NameAndStateSize) {
  GbnEngine t;
  EXPECT_STREQ(t.name(), "gbn");
  EXPECT_GT(t.state_bytes(), 0u);
  EXPECT_LE(t.state_bytes(), 64u);
}

TEST(GbnEngine, NoGrantsBeforeTheQpIsARequester) {
  GbnEngine t;
  t.open(params());
  t.set_snd_max(kQpn, 200, 0);
  EXPECT_FALSE(t.next_tx(kQpn, 0).send) << "RTR only: responder, not requester";
  t.set_requester(params());
  t.set_snd_max(kQpn, 102, 0);
  EXPECT_TRUE(t.next_tx(kQpn, 0).send);
}

TEST(GbnEngine, CloseForgetsTheConnection) {
  GbnEngine t;
  t.open(params());
  t.set_requester(params());
  t.close(kQpn);
  EXPECT_THROW(t.snd_una(kQpn), std::out_of_range);
  EXPECT_THROW(t.epsn(kQpn), std::out_of_range);
}

TEST_F(GbnRequesterTest, GrantsPsnsInOrderUpToSndMax) {
  EXPECT_EQ(t_.snd_una(kQpn), psn(0));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(0));
  EXPECT_FALSE(t_.next_tx(kQpn, 0).send) << "nothing to send yet";
  t_.set_snd_max(kQpn, psn(3), 0);
  // A grant is not consumed until the packet is sent.
  EXPECT_EQ(t_.next_tx(kQpn, 0).psn, psn(0));
  EXPECT_EQ(t_.next_tx(kQpn, 0).psn, psn(0));
  for (int i = 0; i < 3; ++i) {
    const TxGrant g = t_.next_tx(kQpn, 10);
    ASSERT_TRUE(g.send);
    EXPECT_EQ(g.psn, psn(i));
    EXPECT_EQ(g.udp_sport, 0xC123);
    EXPECT_FALSE(g.retransmit);
    t_.on_sent(kQpn, g.psn, 1, 10);
    EXPECT_EQ(t_.snd_nxt(kQpn), psn(i + 1));
  }
  EXPECT_FALSE(t_.next_tx(kQpn, 10).send) << "snd_max reached";
  EXPECT_EQ(t_.snd_una(kQpn), psn(0));
  t_.set_snd_max(kQpn, psn(4), 20);
  EXPECT_EQ(t_.next_tx(kQpn, 20).psn, psn(3));
}

TEST_F(GbnRequesterTest, OnSentAdvancesByTheCoveredPsns) {
  t_.set_snd_max(kQpn, psn(10), 0);
  t_.on_sent(kQpn, psn(0), 4, 0);  // a READ request whose response takes 4 PSNs
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(4));
  EXPECT_EQ(t_.next_tx(kQpn, 0).psn, psn(4));
}

TEST_F(GbnRequesterTest, CumulativeAckAdvancesUnaAndReArmsTheTimer) {
  t_.set_snd_max(kQpn, psn(5), 0);
  EXPECT_EQ(t_.wake_at(kQpn), kNever) << "no timer without outstanding packets";
  send(5, 0);
  EXPECT_EQ(t_.wake_at(kQpn), kTimeout);
  // Later sends do not push the deadline out.
  AckResult r = plain_ack(psn(2), 300);
  EXPECT_TRUE(r.progress);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_una(kQpn), psn(3));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(5));
  EXPECT_EQ(t_.wake_at(kQpn), 300 + kTimeout) << "progress restarts the timer";
  // An older (duplicate) ACK changes nothing.
  r = plain_ack(psn(1), 400);
  EXPECT_FALSE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), psn(3));
  EXPECT_EQ(t_.wake_at(kQpn), 300 + kTimeout);
  // Everything acknowledged: the timer stops.
  r = plain_ack(psn(4), 500);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), psn(5));
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
  r = t_.on_timer(kQpn, 10 * kTimeout);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
}

TEST_F(GbnRequesterTest, TimerArmsOnTheFirstSendOnly) {
  t_.set_snd_max(kQpn, psn(5), 0);
  send(1, 50);
  EXPECT_EQ(t_.wake_at(kQpn), 50 + kTimeout);
  send(1, 70);
  EXPECT_EQ(t_.wake_at(kQpn), 50 + kTimeout);
}

TEST_F(GbnRequesterTest, TimeoutRewindsToUnaAndMarksRetransmissions) {
  t_.set_snd_max(kQpn, psn(6), 0);
  send(4, 0);
  plain_ack(psn(0), 100);  // una = 1, deadline 1100
  AckResult r = t_.on_timer(kQpn, 100 + kTimeout - 1);
  EXPECT_FALSE(r.rewound) << "before the deadline";
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(4));
  r = t_.on_timer(kQpn, 100 + kTimeout);
  EXPECT_TRUE(r.rewound);
  EXPECT_FALSE(r.progress);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1));
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
  EXPECT_EQ(t_.wake_at(kQpn), 100 + 2 * kTimeout);
  // PSNs 1..3 are resent as retransmissions, 4 and 5 are new.
  send(3, 1200, /*retransmit=*/true);
  send(2, 1200, /*retransmit=*/false);
  EXPECT_FALSE(t_.next_tx(kQpn, 1200).send);
}

TEST_F(GbnRequesterTest, NoTimeoutWhenTheTimeoutIsZero) {
  ConnParams p = params();
  p.ack_timeout_cycles = 0;
  start(p);
  t_.set_snd_max(kQpn, psn(2), 0);
  send(2, 0);
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
  EXPECT_FALSE(t_.on_timer(kQpn, uint64_t{1} << 50).rewound);
}

TEST_F(GbnRequesterTest, RetryBudgetIsRetryCntTimeoutsWithoutProgress) {
  t_.set_snd_max(kQpn, psn(2), 0);
  send(2, 0);
  uint64_t now = 0;
  for (int i = 0; i < 3; ++i) {
    now += kTimeout;
    ASSERT_EQ(t_.wake_at(kQpn), now);
    const AckResult r = t_.on_timer(kQpn, now);
    EXPECT_TRUE(r.rewound) << "timeout " << i;
    EXPECT_EQ(r.error, Error::none) << "timeout " << i;
    send(2, now, /*retransmit=*/true);
  }
  now += kTimeout;
  const AckResult r = t_.on_timer(kQpn, now);
  EXPECT_EQ(r.error, Error::retry_exceeded);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
}

TEST_F(GbnRequesterTest, RetryCntZeroFailsOnTheFirstTimeout) {
  ConnParams p = params();
  p.retry_cnt = 0;
  start(p);
  t_.set_snd_max(kQpn, psn(1), 0);
  send(1, 0);
  EXPECT_EQ(t_.on_timer(kQpn, kTimeout).error, Error::retry_exceeded);
}

TEST_F(GbnRequesterTest, ProgressRestoresTheRetryBudget) {
  t_.set_snd_max(kQpn, psn(4), 0);
  send(4, 0);
  uint64_t now = 0;
  for (int i = 0; i < 2; ++i) {
    now += kTimeout;
    ASSERT_EQ(t_.on_timer(kQpn, now).error, Error::none);
    send(4, now, true);
  }
  // One retry left; an ACK for PSN 0 restores all three.
  ASSERT_TRUE(plain_ack(psn(0), now).progress);
  for (int i = 0; i < 3; ++i) {
    now = t_.wake_at(kQpn);
    const AckResult r = t_.on_timer(kQpn, now);
    EXPECT_TRUE(r.rewound);
    EXPECT_EQ(r.error, Error::none) << "timeout " << i << " after progress";
    send(3, now, true);
  }
  EXPECT_EQ(t_.on_timer(kQpn, t_.wake_at(kQpn)).error, Error::retry_exceeded);
}

TEST_F(GbnRequesterTest, SequenceNakRewindsToTheNakedPsn) {
  t_.set_snd_max(kQpn, psn(5), 0);
  send(5, 0);
  // The responder expects PSN 2: 0 and 1 are acknowledged, resend from 2.
  AckResult r = t_.on_ack(kQpn, ack(Kind::nak_sequence, psn(2), psn(5)), 100);
  EXPECT_TRUE(r.progress);
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_una(kQpn), psn(2));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(2));
  EXPECT_EQ(t_.wake_at(kQpn), 100 + kTimeout);
  send(3, 100, /*retransmit=*/true);
  EXPECT_FALSE(t_.next_tx(kQpn, 100).send);
}

TEST_F(GbnRequesterTest, SequenceNaksWithoutProgressSpendRetries) {
  t_.set_snd_max(kQpn, psn(3), 0);
  send(3, 0);
  for (int i = 0; i < 3; ++i) {
    const AckResult r = t_.on_ack(kQpn, ack(Kind::nak_sequence, psn(0), psn(3)), 10);
    EXPECT_FALSE(r.progress);
    EXPECT_TRUE(r.rewound);
    EXPECT_EQ(r.error, Error::none) << "NAK " << i;
    send(3, 10, true);
  }
  EXPECT_EQ(t_.on_ack(kQpn, ack(Kind::nak_sequence, psn(0), psn(3)), 10).error,
            Error::retry_exceeded);
}

TEST_F(GbnRequesterTest, RnrNakWaitsTheRnrDelay) {
  t_.set_snd_max(kQpn, psn(3), 0);
  send(3, 0);
  AckEvent e = ack(Kind::nak_rnr, psn(1), psn(3));
  e.rnr_delay_cycles = 500;
  const AckResult r = t_.on_ack(kQpn, e, 100);
  EXPECT_TRUE(r.progress) << "the RNR NAK acknowledges PSN 0";
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1));
  EXPECT_FALSE(t_.next_tx(kQpn, 100).send);
  EXPECT_FALSE(t_.next_tx(kQpn, 599).send);
  EXPECT_EQ(t_.wake_at(kQpn), 600u) << "the RNR wait ends before the ACK timeout";
  const AckResult w = t_.on_timer(kQpn, 600);
  EXPECT_FALSE(w.rewound) << "the end of an RNR wait is no timeout";
  EXPECT_EQ(w.error, Error::none);
  EXPECT_EQ(t_.wake_at(kQpn), 100 + kTimeout);
  const TxGrant g = t_.next_tx(kQpn, 600);
  ASSERT_TRUE(g.send);
  EXPECT_EQ(g.psn, psn(1));
  EXPECT_TRUE(g.retransmit);
}

// A commodity NIC's slow go-back (nic.gbn.go_back_delay): after a sequence
// NAK or a timeout the QP sends nothing for the delay, then resends from the
// NAKed PSN; the wake-up at the end of the delay is no timeout.
TEST(GbnGoBackDelay, HoldsTheResendAfterANakAndATimeout) {
  constexpr uint64_t kDelay = 300;
  GbnEngine t(kDelay);
  const ConnParams p = params();
  t.open(p);
  t.set_requester(p);
  const auto at = [&](int64_t k) { return psn_add(p.sq_psn, k); };
  t.set_snd_max(kQpn, at(4), 0);
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE(t.next_tx(kQpn, 0).send);
    t.on_sent(kQpn, at(k), 1, 0);
  }
  const AckResult r = t.on_ack(kQpn, ack(Kind::nak_sequence, at(1), at(4)), 100);
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(t.snd_nxt(kQpn), at(1));
  EXPECT_FALSE(t.next_tx(kQpn, 100).send);
  EXPECT_FALSE(t.next_tx(kQpn, 100 + kDelay - 1).send);
  EXPECT_EQ(t.wake_at(kQpn), 100 + kDelay) << "the delay ends before the ACK timeout";
  const AckResult w = t.on_timer(kQpn, 100 + kDelay);
  EXPECT_FALSE(w.rewound) << "the end of the delay is no timeout";
  TxGrant g = t.next_tx(kQpn, 100 + kDelay);
  ASSERT_TRUE(g.send);
  EXPECT_EQ(g.psn, at(1));
  EXPECT_TRUE(g.retransmit);
  t.on_sent(kQpn, at(1), 1, 100 + kDelay);

  // The ACK timer (armed at the NAK's progress, cycle 100) sends it back
  // again, with the same delay.
  const uint64_t timeout_at = 100 + kTimeout;
  EXPECT_EQ(t.wake_at(kQpn), timeout_at);
  EXPECT_TRUE(t.on_timer(kQpn, timeout_at).rewound);
  EXPECT_FALSE(t.next_tx(kQpn, timeout_at).send);
  EXPECT_EQ(t.wake_at(kQpn), timeout_at + kDelay);
  t.on_timer(kQpn, timeout_at + kDelay);
  g = t.next_tx(kQpn, timeout_at + kDelay);
  ASSERT_TRUE(g.send);
  EXPECT_EQ(g.psn, at(1));
}

TEST(GbnGoBackDelay, ZeroResendsAtOnce) {
  GbnEngine t;
  const ConnParams p = params();
  t.open(p);
  t.set_requester(p);
  t.set_snd_max(kQpn, psn_add(p.sq_psn, 2), 0);
  for (int k = 0; k < 2; ++k) t.on_sent(kQpn, psn_add(p.sq_psn, k), 1, 0);
  EXPECT_TRUE(t.on_ack(kQpn, ack(Kind::nak_sequence, p.sq_psn, psn_add(p.sq_psn, 2)), 50).rewound);
  EXPECT_TRUE(t.next_tx(kQpn, 50).send);
}

TEST_F(GbnRequesterTest, RnrRetryCountsRnrNaks) {
  t_.set_snd_max(kQpn, psn(1), 0);
  send(1, 0);
  uint64_t now = 0;
  AckEvent e = ack(Kind::nak_rnr, psn(0), psn(1));
  e.rnr_delay_cycles = 10;
  for (int i = 0; i < 2; ++i) {
    const AckResult r = t_.on_ack(kQpn, e, now);
    EXPECT_EQ(r.error, Error::none) << "RNR NAK " << i;
    EXPECT_TRUE(r.rewound);
    now += 10;
    t_.on_timer(kQpn, now);
    send(1, now, true);
  }
  EXPECT_EQ(t_.on_ack(kQpn, e, now).error, Error::rnr_exceeded);
}

TEST_F(GbnRequesterTest, RnrRetrySevenIsInfinite) {
  ConnParams p = params();
  p.rnr_retry = 7;
  start(p);
  t_.set_snd_max(kQpn, psn(1), 0);
  send(1, 0);
  AckEvent e = ack(Kind::nak_rnr, psn(0), psn(1));
  e.rnr_delay_cycles = 10;
  uint64_t now = 0;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(t_.on_ack(kQpn, e, now).error, Error::none) << "RNR NAK " << i;
    now += 10;
    send(1, now, true);
  }
}

TEST_F(GbnRequesterTest, ProgressRestoresTheRnrBudget) {
  // IB: the RNR retry count, like the transport retry count, is reloaded
  // whenever the requester makes forward progress (a long transfer may meet
  // many RNR episodes, each within the budget).
  t_.set_snd_max(kQpn, psn(10), 0);
  send(10, 0);
  uint64_t now = 0;
  for (int k = 0; k < 4; ++k) {
    // Two RNR NAKs (the budget) for the same PSN...
    AckEvent e = ack(Kind::nak_rnr, psn(k), psn(10));
    e.rnr_delay_cycles = 10;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(t_.on_ack(kQpn, e, now).error, Error::none) << "episode " << k << " NAK " << i;
      now += 10;
      send(10 - k, now, true);
    }
    // ...then it is acknowledged.
    ASSERT_TRUE(plain_ack(psn(k), now).progress);
  }
}

TEST_F(GbnRequesterTest, FatalNakIsAnError) {
  t_.set_snd_max(kQpn, psn(3), 0);
  send(3, 0);
  const AckResult r = t_.on_ack(kQpn, ack(Kind::nak_fatal, psn(1), psn(3)), 10);
  EXPECT_EQ(r.error, Error::fatal_nak);
  EXPECT_TRUE(r.progress) << "PSN 0 before it was acknowledged";
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
}

TEST_F(GbnRequesterTest, ReadResponsesInOrderAreAccepted) {
  t_.set_snd_max(kQpn, psn(4), 0);
  t_.on_sent(kQpn, psn(0), 4, 0);  // READ, 4 response packets
  for (int i = 0; i < 4; ++i) {
    const AckResult r = t_.on_ack(kQpn, ack(Kind::read_response, psn(i), psn(i)), 10 + i);
    EXPECT_TRUE(r.accept) << i;
    EXPECT_TRUE(r.progress) << i;
    EXPECT_FALSE(r.rewound) << i;
    EXPECT_EQ(t_.snd_una(kQpn), psn(i + 1));
  }
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
}

TEST_F(GbnRequesterTest, OutOfOrderReadResponseRewindsOnce) {
  t_.set_snd_max(kQpn, psn(4), 0);
  t_.on_sent(kQpn, psn(0), 4, 0);
  ASSERT_TRUE(t_.on_ack(kQpn, ack(Kind::read_response, psn(0), psn(0)), 10).accept);
  // Response 1 is lost: 2 and 3 arrive.
  AckResult r = t_.on_ack(kQpn, ack(Kind::read_response, psn(2), psn(1)), 11);
  EXPECT_FALSE(r.accept);
  EXPECT_FALSE(r.progress);
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1));
  r = t_.on_ack(kQpn, ack(Kind::read_response, psn(3), psn(1)), 12);
  EXPECT_FALSE(r.accept);
  EXPECT_FALSE(r.rewound) << "one go-back per lost response";
  // The re-issued READ (from PSN 1) is answered in order.
  const TxGrant g = t_.next_tx(kQpn, 13);
  ASSERT_TRUE(g.send);
  EXPECT_EQ(g.psn, psn(1));
  EXPECT_TRUE(g.retransmit);
  t_.on_sent(kQpn, psn(1), 3, 13);
  // A duplicate of the accepted response 0 is neither placed nor a rewind.
  r = t_.on_ack(kQpn, ack(Kind::read_response, psn(0), psn(1)), 14);
  EXPECT_FALSE(r.accept);
  EXPECT_FALSE(r.rewound);
  for (int i = 1; i < 4; ++i)
    EXPECT_TRUE(t_.on_ack(kQpn, ack(Kind::read_response, psn(i), psn(i)), 15).accept) << i;
  EXPECT_EQ(t_.snd_una(kQpn), psn(4));
}

TEST_F(GbnRequesterTest, AtomicAckIsAcceptedInOrder) {
  t_.set_snd_max(kQpn, psn(2), 0);
  send(2, 0);
  AckResult r = t_.on_ack(kQpn, ack(Kind::atomic_ack, psn(1), psn(0)), 5);
  EXPECT_FALSE(r.accept);
  EXPECT_TRUE(r.rewound);
  r = t_.on_ack(kQpn, ack(Kind::atomic_ack, psn(0), psn(0)), 6);
  EXPECT_TRUE(r.accept);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
}

TEST_F(GbnRequesterTest, AckBeyondAckLimitIsClampedAndRewindsOnce) {
  // WRITE at 0, READ at 1..2 (response missing), WRITE at 3.
  t_.set_snd_max(kQpn, psn(4), 0);
  t_.on_sent(kQpn, psn(0), 1, 0);
  t_.on_sent(kQpn, psn(1), 2, 0);
  t_.on_sent(kQpn, psn(3), 1, 0);
  // The responder acknowledges up to 3: the READ's response was lost.
  AckResult r = t_.on_ack(kQpn, ack(Kind::ack, psn(3), psn(1)), 50);
  EXPECT_TRUE(r.progress);
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1)) << "clamped at the missing response";
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1));
  // The same ACK again (a duplicate) does not go back a second time.
  r = t_.on_ack(kQpn, ack(Kind::ack, psn(3), psn(1)), 60);
  EXPECT_FALSE(r.progress);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
  // After a timeout, a new loss may rewind again.
  t_.on_sent(kQpn, psn(1), 2, 70);
  ASSERT_TRUE(t_.on_timer(kQpn, t_.wake_at(kQpn)).rewound);
  t_.on_sent(kQpn, psn(1), 2, 2000);
  r = t_.on_ack(kQpn, ack(Kind::ack, psn(3), psn(1)), 2100);
  EXPECT_TRUE(r.rewound);
}

TEST_F(GbnRequesterTest, AckAtTheLimitIsNotClamped) {
  t_.set_snd_max(kQpn, psn(3), 0);
  send(3, 0);
  const AckResult r = t_.on_ack(kQpn, ack(Kind::ack, psn(1), psn(2)), 10);
  EXPECT_TRUE(r.progress);
  EXPECT_FALSE(r.rewound);
  EXPECT_EQ(t_.snd_una(kQpn), psn(2));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(3));
}

// A NAK acknowledges the PSNs before the one it names, but, like an ACK,
// not past a READ or atomic whose response has not arrived: that response
// was lost and the READ must be resent, not completed without its data.
class GbnNakAfterLostReadTest : public GbnRequesterTest {
 protected:
  void SetUp() override {
    GbnRequesterTest::SetUp();
    // WRITE at 0, READ at 1..2, WRITEs at 3, 4 and 5.
    t_.set_snd_max(kQpn, psn(6), 0);
    t_.on_sent(kQpn, psn(0), 1, 0);
    t_.on_sent(kQpn, psn(1), 2, 0);
    t_.on_sent(kQpn, psn(3), 1, 0);
    t_.on_sent(kQpn, psn(4), 1, 0);
    t_.on_sent(kQpn, psn(5), 1, 0);
  }
  // The READ's responses are lost: the first PSN still without its response.
  uint32_t limit() const { return psn(1); }
};

TEST_F(GbnNakAfterLostReadTest, SequenceNak) {
  // The responder executed 0..3, lost 4 and NAKs it on seeing 5.
  const AckResult r = t_.on_ack(kQpn, ack(Kind::nak_sequence, psn(4), limit()), 10);
  EXPECT_TRUE(r.progress) << "PSN 0 is acknowledged";
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1)) << "not past the READ";
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1)) << "the READ is resent";
}

TEST_F(GbnNakAfterLostReadTest, RnrNak) {
  AckEvent e = ack(Kind::nak_rnr, psn(4), limit());
  e.rnr_delay_cycles = 100;
  const AckResult r = t_.on_ack(kQpn, e, 10);
  EXPECT_TRUE(r.rewound);
  EXPECT_EQ(r.error, Error::none);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(1));
}

TEST_F(GbnNakAfterLostReadTest, FatalNak) {
  const AckResult r = t_.on_ack(kQpn, ack(Kind::nak_fatal, psn(4), limit()), 10);
  EXPECT_EQ(r.error, Error::fatal_nak);
  EXPECT_EQ(t_.snd_una(kQpn), psn(1)) << "the READ did not complete";
}

TEST_F(GbnRequesterTest, NakForAPsnNeverSentIsIgnored) {
  t_.set_snd_max(kQpn, psn(10), 0);
  send(3, 0);
  for (Kind k : {Kind::nak_sequence, Kind::nak_rnr, Kind::nak_fatal}) {
    AckEvent e = ack(k, psn(5), psn(10));
    e.rnr_delay_cycles = 100;
    const AckResult r = t_.on_ack(kQpn, e, 10);
    EXPECT_FALSE(r.progress) << int(k);
    EXPECT_FALSE(r.rewound) << int(k);
    EXPECT_EQ(r.error, Error::none) << int(k);
    EXPECT_EQ(t_.snd_una(kQpn), psn(0)) << "PSNs 3 and 4 were never sent";
    EXPECT_EQ(t_.snd_nxt(kQpn), psn(3));
  }
  EXPECT_TRUE(t_.next_tx(kQpn, 10).send) << "no RNR wait was started";
  // A NAK naming the next PSN to send acknowledges everything sent.
  const AckResult r = t_.on_ack(kQpn, ack(Kind::nak_sequence, psn(3), psn(10)), 20);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), psn(3));
}

TEST_F(GbnRequesterTest, AckForAPsnNeverSentIsIgnored) {
  t_.set_snd_max(kQpn, psn(10), 0);
  send(3, 0);
  for (uint32_t bad : {psn(3), psn(4), psn(1000)}) {
    const AckResult r = t_.on_ack(kQpn, ack(Kind::ack, bad, psn(1 << 20)), 10);
    EXPECT_FALSE(r.progress) << bad;
    EXPECT_FALSE(r.rewound) << bad;
    EXPECT_EQ(r.error, Error::none);
    EXPECT_FALSE(t_.on_ack(kQpn, ack(Kind::read_response, bad, psn(0)), 10).accept);
    EXPECT_FALSE(t_.on_ack(kQpn, ack(Kind::atomic_ack, bad, psn(0)), 10).rewound);
  }
  EXPECT_EQ(t_.snd_una(kQpn), psn(0));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(3));
  // "Never sent" is measured against the highest PSN sent, not snd_nxt:
  // after a rewind, ACKs for the earlier transmissions still count.
  ASSERT_TRUE(t_.on_timer(kQpn, kTimeout).rewound);
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(0));
  EXPECT_TRUE(plain_ack(psn(2), kTimeout + 1).progress);
  EXPECT_EQ(t_.snd_una(kQpn), psn(3));
  EXPECT_EQ(t_.snd_nxt(kQpn), psn(3));
}

TEST_F(GbnRequesterTest, PsnWrapsAround) {
  start(params(/*sq_psn=*/0xFFFFFE));
  t_.set_snd_max(kQpn, psn_add(0xFFFFFE, 4), 0);
  const uint32_t want[] = {0xFFFFFE, 0xFFFFFF, 0, 1};
  for (uint32_t w : want) {
    const TxGrant g = t_.next_tx(kQpn, 0);
    ASSERT_TRUE(g.send);
    EXPECT_EQ(g.psn, w);
    t_.on_sent(kQpn, g.psn, 1, 0);
  }
  EXPECT_FALSE(t_.next_tx(kQpn, 0).send);
  EXPECT_EQ(t_.snd_nxt(kQpn), 2u);
  // ACK for 0xFFFFFF, across the wrap from una.
  AckResult r = plain_ack(0xFFFFFF, 10);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), 0u);
  EXPECT_FALSE(plain_ack(0xFFFFFE, 11).progress) << "older than una";
  EXPECT_FALSE(plain_ack(2, 12).progress) << "never sent";
  ASSERT_TRUE(t_.on_timer(kQpn, t_.wake_at(kQpn)).rewound);
  EXPECT_EQ(t_.snd_nxt(kQpn), 0u);
  const TxGrant g = t_.next_tx(kQpn, 5000);
  EXPECT_EQ(g.psn, 0u);
  EXPECT_TRUE(g.retransmit);
  r = plain_ack(1, 5001);
  EXPECT_TRUE(r.progress);
  EXPECT_EQ(t_.snd_una(kQpn), 2u);
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
}

TEST_F(GbnRequesterTest, SetRequesterRestartsTheSendState) {
  t_.set_snd_max(kQpn, psn(3), 0);
  send(3, 0);
  start(params(/*sq_psn=*/7));
  EXPECT_EQ(t_.snd_una(kQpn), 7u);
  EXPECT_EQ(t_.snd_nxt(kQpn), 7u);
  EXPECT_EQ(t_.wake_at(kQpn), kNever);
  EXPECT_FALSE(t_.next_tx(kQpn, 0).send);
}

// ---------------------------------------------------------------------------
// Responder
// ---------------------------------------------------------------------------

class GbnResponderTest : public ::testing::Test {
 protected:
  void SetUp() override { t_.open(params()); }
  GbnEngine t_;
};

TEST_F(GbnResponderTest, ClassifyAcceptDuplicateNakThenDrop) {
  EXPECT_EQ(t_.epsn(kQpn), 500u);
  EXPECT_EQ(t_.classify(kQpn, 500, 0), RxVerdict::accept);
  EXPECT_EQ(t_.classify(kQpn, 500, 0), RxVerdict::accept) << "classify alone commits nothing";
  EXPECT_EQ(t_.classify(kQpn, 499, 0), RxVerdict::duplicate);
  EXPECT_EQ(t_.classify(kQpn, 400, 0), RxVerdict::duplicate);
  EXPECT_EQ(t_.classify(kQpn, 502, 0), RxVerdict::nak_sequence);
  EXPECT_EQ(t_.classify(kQpn, 503, 0), RxVerdict::drop);
  EXPECT_EQ(t_.classify(kQpn, 502, 0), RxVerdict::drop);
  EXPECT_EQ(t_.classify(kQpn, 499, 0), RxVerdict::duplicate) << "duplicates are still answered";
  EXPECT_EQ(t_.classify(kQpn, 500, 0), RxVerdict::accept);
  t_.commit(kQpn, 1, false, false, 0);
  EXPECT_EQ(t_.epsn(kQpn), 501u);
  EXPECT_EQ(t_.classify(kQpn, 500, 0), RxVerdict::duplicate);
  // A new gap after progress is NAKed again, once.
  EXPECT_EQ(t_.classify(kQpn, 503, 0), RxVerdict::nak_sequence);
  EXPECT_EQ(t_.classify(kQpn, 504, 0), RxVerdict::drop);
}

TEST_F(GbnResponderTest, AcksAreCoalescedEveryN) {
  // ack_coalesce = 3
  AckDecision d = t_.commit(kQpn, 1, false, false, 0);
  EXPECT_FALSE(d.send);
  d = t_.commit(kQpn, 1, false, false, 0);
  EXPECT_FALSE(d.send);
  d = t_.commit(kQpn, 1, false, false, 0);
  EXPECT_TRUE(d.send);
  EXPECT_EQ(d.psn, 502u) << "the last PSN received in order";
  EXPECT_EQ(t_.epsn(kQpn), 503u);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  d = t_.commit(kQpn, 1, false, false, 0);
  EXPECT_TRUE(d.send);
  EXPECT_EQ(d.psn, 505u);
}

TEST_F(GbnResponderTest, AckReqForcesAnAckAndRestartsTheCount) {
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  AckDecision d = t_.commit(kQpn, 1, true, false, 0);
  EXPECT_TRUE(d.send);
  EXPECT_EQ(d.psn, 501u);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  EXPECT_TRUE(t_.commit(kQpn, 1, false, false, 0).send);
}

TEST_F(GbnResponderTest, ImplicitAckResetsTheCountWithoutAnAck) {
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  // A READ covering 4 PSNs: its response acknowledges everything so far.
  AckDecision d = t_.commit(kQpn, 4, true, true, 0);
  EXPECT_FALSE(d.send) << "implicit_ack wins over ack_req";
  EXPECT_EQ(t_.epsn(kQpn), 506u);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  EXPECT_FALSE(t_.commit(kQpn, 1, false, false, 0).send);
  d = t_.commit(kQpn, 1, false, false, 0);
  EXPECT_TRUE(d.send);
  EXPECT_EQ(d.psn, 508u);
}

TEST_F(GbnResponderTest, CoalesceOneAcksEveryPacket) {
  ConnParams p = params();
  p.ack_coalesce = 1;
  t_.open(p);
  for (uint32_t i = 0; i < 4; ++i) {
    const AckDecision d = t_.commit(kQpn, 1, false, false, 0);
    EXPECT_TRUE(d.send);
    EXPECT_EQ(d.psn, 500 + i);
  }
}

TEST_F(GbnResponderTest, PsnWrapsAround) {
  t_.open(params(100, /*rq_psn=*/0xFFFFFF));
  EXPECT_EQ(t_.classify(kQpn, 0xFFFFFF, 0), RxVerdict::accept);
  EXPECT_EQ(t_.classify(kQpn, 0, 0), RxVerdict::nak_sequence);
  EXPECT_EQ(t_.classify(kQpn, 1, 0), RxVerdict::drop);
  const AckDecision d = t_.commit(kQpn, 1, true, false, 0);
  EXPECT_TRUE(d.send);
  EXPECT_EQ(d.psn, 0xFFFFFFu);
  EXPECT_EQ(t_.epsn(kQpn), 0u);
  EXPECT_EQ(t_.classify(kQpn, 0, 0), RxVerdict::accept);
  EXPECT_EQ(t_.classify(kQpn, 0xFFFFFF, 0), RxVerdict::duplicate);
  EXPECT_EQ(t_.classify(kQpn, 0xFFFFF0, 0), RxVerdict::duplicate);
  EXPECT_EQ(t_.classify(kQpn, 1, 0), RxVerdict::nak_sequence);
}

TEST_F(GbnResponderTest, RequesterAndResponderAreIndependent) {
  ConnParams p = params();
  t_.set_requester(p);
  t_.set_snd_max(kQpn, 102, 0);
  t_.on_sent(kQpn, 100, 1, 0);
  EXPECT_EQ(t_.classify(kQpn, 500, 0), RxVerdict::accept);
  t_.commit(kQpn, 1, false, false, 0);
  EXPECT_EQ(t_.epsn(kQpn), 501u);
  EXPECT_EQ(t_.snd_nxt(kQpn), 101u);
  EXPECT_EQ(t_.snd_una(kQpn), 100u);
}

// ---------------------------------------------------------------------------
// PSN arithmetic
// ---------------------------------------------------------------------------

TEST(PsnArithmetic, AddWrapsAt24Bits) {
  EXPECT_EQ(psn_add(0, 1), 1u);
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0xFFFFFE, 5), 3u);
  EXPECT_EQ(psn_add(0, -1), 0xFFFFFFu);
  EXPECT_EQ(psn_add(2, -5), 0xFFFFFDu);
  EXPECT_EQ(psn_add(5, int64_t{1} << 24), 5u);
  EXPECT_EQ(psn_add(0x123, -(int64_t{1} << 24)), 0x123u);
  EXPECT_EQ(psn_add(0x1000005, 0), 5u) << "bits above 24 are dropped";
}

TEST(PsnArithmetic, DiffIsASigned24BitDistance) {
  EXPECT_EQ(psn_diff(5, 5), 0);
  EXPECT_EQ(psn_diff(6, 5), 1);
  EXPECT_EQ(psn_diff(5, 6), -1);
  EXPECT_EQ(psn_diff(0, 0xFFFFFF), 1);
  EXPECT_EQ(psn_diff(0xFFFFFF, 0), -1);
  EXPECT_EQ(psn_diff(3, 0xFFFFFE), 5);
  EXPECT_EQ(psn_diff(0x7FFFFF, 0), 0x7FFFFF);
  EXPECT_EQ(psn_diff(0x800000, 0), -0x800000);
  EXPECT_EQ(psn_diff(0, 0x800000), -0x800000);
  EXPECT_EQ(psn_diff(0, 0x7FFFFF), -0x7FFFFF);
  EXPECT_EQ(psn_diff(0x1000005, 5), 0) << "bits above 24 are ignored";
  for (uint32_t a : {0u, 1u, 0x7FFFFFu, 0xFFFFFFu})
    for (int64_t d : {int64_t{-0x7FFFFF}, int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{0x7FFFFF}})
      EXPECT_EQ(psn_diff(psn_add(a, d), a), d) << a << " " << d;
}

}  // namespace
}  // namespace mprdma::nic
