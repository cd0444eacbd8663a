// The IRN golden model: selective retransmission (only the lost PSN goes
// again), the two timeouts, BDP-FC, the receiver's ACK/NACK, and a property
// test over random lossy, reordering networks.
#include "vp/nic/transport/irn/irn_model.h"

#include <gtest/gtest.h>

#include <map>
#include <queue>
#include <random>
#include <vector>

namespace mprdma::nic {
namespace {

IrnParams params(uint32_t bdp = 16) {
  IrnParams p;
  p.bdp_packets = bdp;
  p.rto_low_cycles = 1000;
  p.rto_high_cycles = 5000;
  return p;
}

std::vector<IrnTx> drain(IrnSender& s, uint64_t now, size_t max = 1000) {
  std::vector<IrnTx> out;
  IrnTx tx;
  while (out.size() < max && s.next(tx)) {
    s.on_sent(tx, now);
    out.push_back(tx);
  }
  return out;
}

TEST(Irn, OnlyTheLostPsnIsRetransmitted) {
  IrnSender s(params(16), 100);
  IrnReceiver r(16, 100);
  s.set_snd_max(110);
  ASSERT_EQ(drain(s, 0).size(), 10u);
  // PSN 103 is lost; the others arrive in order.
  for (uint32_t psn = 100; psn < 110; ++psn) {
    if (psn == 103) continue;
    const IrnRxResult res = r.on_data(psn, psn == 109);
    ASSERT_TRUE(res.send_ack);
    EXPECT_EQ(res.ack.nack, psn > 103) << psn;
    EXPECT_EQ(res.ack.cum, psn < 103 ? psn + 1 : 103u) << psn;
    s.on_ack(res.ack, 10 + psn);
  }
  EXPECT_TRUE(s.in_recovery());
  EXPECT_EQ(s.snd_una(), 103u);
  s.set_snd_max(112);
  const std::vector<IrnTx> again = drain(s, 200);
  // 103 again, then new data; none of the SACKed PSNs.
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].psn, 103u);
  EXPECT_TRUE(again[0].retx);
  EXPECT_EQ(again[1].psn, 110u);
  EXPECT_FALSE(again[1].retx);
  EXPECT_EQ(s.counters().retransmits, 1u);
  // The retransmission fills the hole: cumulative ACK jumps, recovery ends.
  const IrnRxResult fill = r.on_data(103, false);
  EXPECT_EQ(fill.ack.cum, 110u);
  ASSERT_EQ(fill.completed.size(), 1u);
  EXPECT_EQ(fill.completed[0], 109u);
  s.on_ack(fill.ack, 300);
  EXPECT_FALSE(s.in_recovery());
  EXPECT_EQ(s.snd_una(), 110u);
}

TEST(Irn, TimeoutIsLowWithFewPacketsInFlightAndHighOtherwise) {
  IrnSender s(params(16), 0);
  s.set_snd_max(3);
  drain(s, 0);
  EXPECT_EQ(s.wake_at(), 1000u);  // 3 in flight: RTO_low
  s.set_snd_max(10);
  drain(s, 10);
  EXPECT_EQ(s.wake_at(), 10u + 5000u);  // 10 in flight: RTO_high
  s.on_timer(5010);
  EXPECT_EQ(s.counters().rto_high, 1u);
  // Everything unacknowledged goes again.
  const std::vector<IrnTx> again = drain(s, 5010);
  ASSERT_EQ(again.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(again[i].psn, i);
    EXPECT_TRUE(again[i].retx);
  }
}

TEST(Irn, BdpFlowControlCapsPacketsInFlight) {
  IrnSender s(params(8), 0);
  s.set_snd_max(100);
  EXPECT_EQ(drain(s, 0).size(), 8u);
  EXPECT_EQ(s.in_flight(), 8u);
  EXPECT_GE(s.counters().bdp_stalls, 1u);
  s.on_ack({3, false, 0}, 5);  // 0..2 acknowledged: three more may go
  EXPECT_EQ(drain(s, 5).size(), 3u);
  IrnParams off = params(8);
  off.bdp_fc = false;
  IrnSender u(off, 0);
  u.set_snd_max(100);
  EXPECT_EQ(drain(u, 0).size(), 100u);
}

TEST(Irn, ReceiverDropsBeyondItsBitmapAndAcksDuplicates) {
  IrnReceiver r(8, 0);
  EXPECT_EQ(r.on_data(8, false).verdict, IrnRxResult::Verdict::drop);
  EXPECT_EQ(r.on_data(7, false).verdict, IrnRxResult::Verdict::place);
  const IrnRxResult dup = r.on_data(7, false);
  EXPECT_EQ(dup.verdict, IrnRxResult::Verdict::duplicate);
  EXPECT_TRUE(dup.send_ack);
  EXPECT_EQ(dup.ack.cum, 0u);
  EXPECT_THROW(IrnReceiver(12, 0), std::invalid_argument);
}

TEST(Irn, AReadRequestCoversItsResponsesPsns) {
  // Sender: a READ of 40 responses moves snd_nxt by 40, even with a
  // bitmap of 16 (BDP-FC then waits for the responses).
  IrnParams p;
  p.bdp_packets = 16;
  IrnSender s(p, 0);
  s.set_snd_max(50);
  IrnTx tx;
  ASSERT_TRUE(s.next(tx));
  s.on_sent(tx, 0, 40);
  EXPECT_EQ(s.snd_nxt(), 40u);
  EXPECT_FALSE(s.next(tx));  // 40 in flight >= 16
  // Receiver: in order, the head moves past all of them at once, and the
  // READ's last PSN is its message tail.
  IrnReceiver r(16, 0);
  const IrnRxResult a = r.on_data(0, true, 40);
  EXPECT_EQ(a.verdict, IrnRxResult::Verdict::place);
  EXPECT_EQ(r.epsn(), 40u);
  ASSERT_EQ(a.completed.size(), 1u);
  EXPECT_EQ(a.completed[0], 39u);
  // Out of order, a READ must fit the bitmap: 3 PSNs at 45 fit (45..47 <
  // 40 + 16), 10 at 50 do not.
  EXPECT_EQ(r.on_data(45, true, 3).verdict, IrnRxResult::Verdict::place);
  EXPECT_EQ(r.on_data(50, true, 10).verdict, IrnRxResult::Verdict::drop);
  // A re-request of one response of the first READ is a duplicate.
  EXPECT_EQ(r.on_data(7, true, 1).verdict, IrnRxResult::Verdict::duplicate);
  // Filling 40..44 completes through the READ at 45..47.
  const IrnRxResult b = r.on_data(40, true, 5);
  EXPECT_EQ(r.epsn(), 48u);
  ASSERT_EQ(b.completed.size(), 2u);
  EXPECT_EQ(b.completed[1], 47u);
}

TEST(Irn, ExtraStateIsTheBitmapsAndThreePsns) {
  uint32_t bytes = 0;
  for (const auto& f : IrnSender::extra_state(64)) bytes += f.bytes;
  for (const auto& f : IrnReceiver::extra_state(64)) bytes += f.bytes;
  EXPECT_EQ(bytes, 8u + 3 + 3 + 3 + 1 + 8 + 8);
}

// One sender, one receiver, random delay per packet (reordering), data and
// ACK loss: every PSN is placed once, every message completes once in
// order, and the sender finishes.
void run_lossy(uint64_t seed, double loss, double ack_loss, bool bdp_fc) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  IrnParams p = params(32);
  p.bdp_fc = bdp_fc;
  const uint32_t isn = static_cast<uint32_t>(gen() & kPsnMask);
  IrnSender s(p, isn);
  IrnReceiver r(32, isn);
  const uint32_t total = 2000;
  std::vector<bool> tail(total);
  for (uint32_t i = 0; i < total; ++i) tail[i] = i + 1 == total || gen() % 4 == 0;
  struct Ev {
    uint64_t at, seq;
    bool is_ack;
    IrnTx tx;
    IrnAck ack;
    bool operator>(const Ev& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q;
  uint64_t seq = 0, now = 0;
  std::map<uint32_t, int> placed;
  std::vector<uint32_t> completed;
  s.set_snd_max(psn_add(isn, total));
  // The sender's port sends one packet every 10 cycles.
  uint64_t port_free = 0;
  auto pump = [&] {
    IrnTx tx;
    while (s.next(tx)) {
      port_free = std::max(port_free, now) + 10;
      s.on_sent(tx, port_free);
      if (u(gen) >= loss) q.push(Ev{port_free + 300 + gen() % 200, seq++, false, tx, {}});
    }
  };
  pump();
  for (int steps = 0; !s.done() && steps < 1000000; ++steps) {
    const uint64_t t_ev = q.empty() ? kNever : q.top().at;
    if (s.wake_at() <= t_ev) {
      ASSERT_NE(s.wake_at(), kNever) << "stalled";
      now = s.wake_at();
      s.on_timer(now);
      pump();
      continue;
    }
    const Ev e = q.top();
    q.pop();
    now = e.at;
    if (e.is_ack) {
      s.on_ack(e.ack, now);
    } else {
      const uint32_t idx = static_cast<uint32_t>(psn_diff(e.tx.psn, isn));
      const IrnRxResult res = r.on_data(e.tx.psn, tail[idx]);
      if (res.verdict == IrnRxResult::Verdict::place) ++placed[e.tx.psn];
      for (uint32_t t : res.completed) completed.push_back(t);
      if (res.send_ack && u(gen) >= ack_loss)
        q.push(Ev{now + 300 + gen() % 200, seq++, true, {}, res.ack});
    }
    pump();
  }
  ASSERT_TRUE(s.done()) << "una " << s.snd_una() << " nxt " << s.snd_nxt();
  ASSERT_EQ(placed.size(), total);
  for (const auto& [psn, n] : placed) ASSERT_EQ(n, 1) << psn;
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < total; ++i)
    if (tail[i]) want.push_back(psn_add(isn, i));
  EXPECT_EQ(completed, want);
}

TEST(IrnProperty, EveryPsnPlacedOnceAndMessagesCompleteInOrderUnderLoss) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE(seed);
    run_lossy(seed, 0.0, 0.0, true);
    run_lossy(seed, 0.02, 0.0, true);
    run_lossy(seed, 0.05, 0.05, true);
  }
}

// ---- explicit READ acknowledgements: the responder's side ----

// A READ of 8 responses at PSN 200, all sent; the requester got 200..202,
// missed 203 and got 204: its Read NACK (cum 203, SACK 204) makes the
// responder send 203 again, and only 203, once per recovery.
TEST(IrnReadResponder, AReadNackResendsOnlyTheMissingResponse) {
  IrnReadResponder r(params());
  r.add_read(200, 8);
  for (uint32_t p = 200; p < 208; ++p) r.on_sent(p, 10);
  EXPECT_EQ(r.in_flight(), 8u);
  r.on_ack({203, false, 202}, 20);  // in-order Read ACKs up to 202
  EXPECT_EQ(r.in_flight(), 5u);
  uint32_t psn = 0;
  EXPECT_FALSE(r.next_retx(psn));
  r.on_ack({203, true, 204}, 21);
  EXPECT_TRUE(r.in_recovery());
  ASSERT_TRUE(r.next_retx(psn));
  EXPECT_EQ(psn, 203u);
  r.on_sent(psn, 22);
  EXPECT_FALSE(r.next_retx(psn));  // once per recovery
  r.on_ack({203, true, 205}, 23);  // 205 arrived: 203 is still on its way
  EXPECT_FALSE(r.next_retx(psn));
  EXPECT_EQ(r.counters().retransmits, 1u);
  r.on_ack({206, false, 203}, 30);  // the retransmission arrived
  EXPECT_FALSE(r.in_recovery());
  EXPECT_TRUE(r.pending(200));
  r.on_ack({208, false, 207}, 31);
  EXPECT_FALSE(r.pending(200));
  EXPECT_EQ(r.in_flight(), 0u);
  EXPECT_EQ(r.wake_at(), kNever);
}

// A lost tail has no later response to reveal it: the timeout sends again
// every response in flight, RTO_low with few in flight.
TEST(IrnReadResponder, ATimeoutResendsEveryResponseInFlight) {
  IrnReadResponder r(params());
  r.add_read(10, 4);
  for (uint32_t p = 10; p < 14; ++p) r.on_sent(p, 0);
  r.on_ack({12, false, 11}, 5);
  EXPECT_EQ(r.wake_at(), 5u + 1000u);  // 2 in flight <= N = 3: RTO_low
  uint32_t psn = 0;
  r.on_timer(500);  // early: nothing
  EXPECT_FALSE(r.next_retx(psn));
  r.on_timer(1005);
  EXPECT_EQ(r.counters().rtos, 1u);
  std::vector<uint32_t> again;
  while (r.next_retx(psn)) again.push_back(psn);
  EXPECT_EQ(again, (std::vector<uint32_t>{12, 13}));
}

// READs answered out of PSN order (the first was asked again after its
// request was lost) and PSNs of other requests between them: the table is
// keyed by PSN, so a cumulative PSN acknowledges exactly the responses
// before it, whichever READ they belong to.
TEST(IrnReadResponder, ReadsAnsweredOutOfOrderAreAcknowledgedByPsn) {
  IrnReadResponder r(params());
  r.add_read(120, 4);  // the later READ first
  for (uint32_t p = 120; p < 124; ++p) r.on_sent(p, 0);
  r.add_read(100, 4);  // PSNs 104..119: WRITEs
  for (uint32_t p = 100; p < 104; ++p) r.on_sent(p, 1);
  // The requester has 120..123 SACKed (each Read ACK names its response)
  // while 100.. is missing: NACKs.
  for (uint32_t p = 120; p < 124; ++p) r.on_ack({100, true, p}, 2);
  uint32_t psn = 0;
  std::vector<uint32_t> again;
  while (r.next_retx(psn)) again.push_back(psn);
  // 100..103 were sent after 120..123 but are below them: presumed lost.
  EXPECT_EQ(again, (std::vector<uint32_t>{100, 101, 102, 103}));
  r.on_ack({124, false, 103}, 3);  // everything through 123
  EXPECT_FALSE(r.pending(100));
  EXPECT_FALSE(r.pending(120));
  EXPECT_FALSE(r.in_recovery());
}

// A READ costs the responder what it has in flight, not what it asks for:
// just under 2 GiB at MTU 256 is 8 Mi responses, half the PSN space (the
// hardening review found a byte of state, twice, allocated per response at
// the request). Only the responses
// between the first unacknowledged one and the last one sent have state.
TEST(IrnReadResponder, AHugeReadHoldsStateOnlyForItsResponsesInFlight) {
  IrnReadResponder r(params());
  constexpr uint32_t kResponses = (1u << 23) - 1;
  r.add_read(1000, kResponses);
  EXPECT_EQ(r.window_responses(), 0u);
  for (uint32_t p = 1000; p < 1064; ++p) r.on_sent(p, 0);
  EXPECT_EQ(r.window_responses(), 64u);
  EXPECT_EQ(r.in_flight(), 64u);
  r.on_ack({1032, false, 1031}, 1);
  EXPECT_EQ(r.window_responses(), 32u);
  EXPECT_EQ(r.in_flight(), 32u);
  EXPECT_TRUE(r.pending(1000));
  // A cumulative PSN past every response (sent or not) ends the READ.
  r.on_ack({psn_add(1000, kResponses), false, 1063}, 2);
  EXPECT_FALSE(r.pending(1000));
  EXPECT_EQ(r.window_responses(), 0u);
  EXPECT_EQ(r.in_flight(), 0u);
}

// Property: random READs, random loss of responses and of Read (N)ACKs,
// random delays. A requester model acknowledges as the NIC does (cum =
// first missing response PSN, SACK = the arrival, NACK when out of order).
// Every response reaches the requester, none is acknowledged before it
// arrived, and the table empties.
TEST(IrnReadResponder, EveryResponseArrivesUnderRandomLossAndReordering) {
  uint64_t retransmits = 0, rtos = 0, nacks = 0;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    IrnReadResponder r(params());
    // READs of 1..9 responses with gaps (other requests) between them.
    std::vector<std::pair<uint32_t, uint32_t>> reads;
    uint32_t psn = 0xfffff0 + seed;  // across the 24-bit wrap
    for (int i = 0; i < 6; ++i) {
      const uint32_t n = 1 + rng() % 9;
      reads.emplace_back(psn & kPsnMask, n);
      psn = psn_add(psn, n + rng() % 3);
    }
    std::map<uint32_t, bool> got;  // response PSN -> arrived
    for (auto& [f, n] : reads)
      for (uint32_t k = 0; k < n; ++k) got[psn_add(f, k)] = false;
    auto first_missing = [&] {
      uint32_t best = psn;  // beyond all
      bool any = false;
      for (auto& [f, n] : reads)
        for (uint32_t k = 0; k < n; ++k)
          if (!got[psn_add(f, k)] && (!any || psn_diff(psn_add(f, k), best) < 0)) {
            best = psn_add(f, k);
            any = true;
          }
      return best;
    };
    using Ev = std::pair<uint64_t, std::pair<int, uint32_t>>;  // time, (0 resp / 1 ack, psn)
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> net;
    uint64_t now = 0;
    std::vector<IrnAck> acks;  // by index in the event
    auto send = [&](uint32_t p) {
      r.on_sent(p, now);
      if (rng() % 10 == 0) return;  // lost
      net.push({now + 5 + rng() % 40, {0, p}});
    };
    size_t next_read = 0;
    size_t steps = 0;
    while (steps++ < 20000) {
      // New READs arrive over time, answered in arrival order (shuffled).
      if (next_read < reads.size() && rng() % 4 == 0) {
        const size_t i = next_read + rng() % (reads.size() - next_read);
        std::swap(reads[next_read], reads[i]);
        r.add_read(reads[next_read].first, reads[next_read].second);
        for (uint32_t k = 0; k < reads[next_read].second; ++k)
          send(psn_add(reads[next_read].first, k));
        ++next_read;
      }
      uint32_t p = 0;
      while (r.next_retx(p)) send(p);
      if (net.empty()) {
        if (next_read == reads.size() && r.wake_at() == kNever) break;
        now = std::max(now + 1, r.wake_at() == kNever ? now + 1 : r.wake_at());
        r.on_timer(now);
        continue;
      }
      const Ev e = net.top();
      net.pop();
      now = e.first;
      if (e.second.first == 0) {
        const uint32_t q = e.second.second;
        const uint32_t before = first_missing();
        got[q] = true;
        const IrnAck a{first_missing(), q != before, q};
        acks.push_back(a);
        if (rng() % 10 != 0)  // Read (N)ACKs are lost too
          net.push({now + 5 + rng() % 40, {1, static_cast<uint32_t>(acks.size() - 1)}});
      } else {
        const IrnAck a = acks[e.second.second];
        // The responder never learns of an arrival that did not happen.
        ASSERT_TRUE(got[a.sack]) << "seed " << seed;
        r.on_ack(a, now);
      }
      r.on_timer(now);
    }
    for (auto& [q, arrived] : got) EXPECT_TRUE(arrived) << "seed " << seed << " psn " << q;
    for (auto& [f, n] : reads) EXPECT_FALSE(r.pending(f)) << "seed " << seed;
    EXPECT_EQ(r.in_flight(), 0u) << "seed " << seed;
    retransmits += r.counters().retransmits;
    rtos += r.counters().rtos;
    nacks += r.counters().read_nacks;
  }
  // The losses happened and were recovered both ways.
  EXPECT_GT(nacks, 40u);
  EXPECT_GT(retransmits, 40u);
  EXPECT_GT(rtos, 0u);
}
}  // namespace
}  // namespace mprdma::nic
