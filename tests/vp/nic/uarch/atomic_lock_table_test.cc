// AtomicLockTable: the bucket mapping (Connect-IB-like 4096 buckets on bits
// 0-11, ConnectX-3-like single bucket), FIFO granting, conflict counters and
// parameter checks. A small closed-loop model at the end shows the K5 shape:
// flat rate with one bucket, rising with the number of counters with 4096.
#include "vp/nic/uarch/atomic_lock_table.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace mprdma::nic::uarch {
namespace {

AtomicLockTableParams connect_ib() { return AtomicLockTableParams{4096, 0}; }
AtomicLockTableParams connectx3() { return AtomicLockTableParams{1, 0}; }

TEST(AtomicLockTable, BucketIsTheLowAddressBitsAboveLowBit) {
  const AtomicLockTable t(connect_ib());
  EXPECT_EQ(t.bucket_of(0x0), 0u);
  EXPECT_EQ(t.bucket_of(0xABC), 0xABCu);
  EXPECT_EQ(t.bucket_of(0x12345ABC), 0xABCu);
  EXPECT_EQ(t.bucket_of(0xFFFF'FFFF'FFFF'FFFFull), 0xFFFu);
  const AtomicLockTable shifted(AtomicLockTableParams{256, 3});  // bits 3-10
  EXPECT_EQ(shifted.bucket_of(0x8), 1u);
  EXPECT_EQ(shifted.bucket_of(0x7), 0u) << "bits below low_bit are ignored";
  EXPECT_EQ(shifted.bucket_of(0x7F8), 0xFFu);
  EXPECT_EQ(shifted.bucket_of(0x800), 0u) << "bit 11 is above the index";
}

TEST(AtomicLockTable, SameLow12BitsCollideWith4096Buckets) {
  AtomicLockTable t(connect_ib());
  const uint64_t a = 0x1000'0040, b = 0x2000'7040;  // same low 12 bits 0x040
  ASSERT_EQ(a & 0xFFF, b & 0xFFF);
  EXPECT_EQ(t.bucket_of(a), t.bucket_of(b));
  EXPECT_TRUE(t.acquire(a, 1));
  EXPECT_FALSE(t.acquire(b, 2)) << "different addresses, same bucket: serialised";
  EXPECT_EQ(t.counters().conflicts, 1u);
  EXPECT_EQ(t.release(a, 1), std::optional<uint64_t>(2));
  EXPECT_EQ(t.holder(t.bucket_of(b)), std::optional<uint64_t>(2));
}

TEST(AtomicLockTable, DifferentLow12BitsDoNotCollideWith4096Buckets) {
  AtomicLockTable t(connect_ib());
  const uint64_t a = 0x1000'0040, b = 0x1000'0048;  // adjacent 8-byte counters
  EXPECT_NE(t.bucket_of(a), t.bucket_of(b));
  EXPECT_TRUE(t.acquire(a, 1));
  EXPECT_TRUE(t.acquire(b, 2));
  EXPECT_EQ(t.counters().conflicts, 0u);
  EXPECT_EQ(t.held_buckets(), 2u);
  EXPECT_EQ(t.release(a, 1), std::nullopt);
  EXPECT_EQ(t.release(b, 2), std::nullopt);
  EXPECT_EQ(t.held_buckets(), 0u);
}

TEST(AtomicLockTable, OneBucketSerialisesEverything) {
  AtomicLockTable t(connectx3());
  std::vector<uint64_t> addrs = {0x0, 0x8, 0x1000, 0xDEAD'BEE8, 0xFFFF'FFF8};
  EXPECT_TRUE(t.acquire(addrs[0], 0));
  for (uint64_t i = 1; i < addrs.size(); ++i) {
    EXPECT_EQ(t.bucket_of(addrs[i]), 0u);
    EXPECT_FALSE(t.acquire(addrs[i], i)) << "address " << addrs[i];
  }
  EXPECT_EQ(t.waiters(0), 4u);
  EXPECT_EQ(t.counters().conflicts, 4u);
  EXPECT_EQ(t.counters().max_waiters, 4u);
}

TEST(AtomicLockTable, WaitersAreGrantedInFifoOrder) {
  AtomicLockTable t(connectx3());
  EXPECT_TRUE(t.acquire(0x10, 7));
  EXPECT_FALSE(t.acquire(0x20, 3));
  EXPECT_FALSE(t.acquire(0x30, 9));
  EXPECT_FALSE(t.acquire(0x40, 1));
  // The order of arrival, not of op ids or addresses.
  EXPECT_EQ(t.release(0x10, 7), std::optional<uint64_t>(3));
  EXPECT_EQ(t.release(0x20, 3), std::optional<uint64_t>(9));
  EXPECT_TRUE(t.acquire(0x50, 4) == false) << "a newcomer queues behind the waiters";
  EXPECT_EQ(t.release(0x30, 9), std::optional<uint64_t>(1));
  EXPECT_EQ(t.release(0x40, 1), std::optional<uint64_t>(4));
  EXPECT_EQ(t.release(0x50, 4), std::nullopt);
  EXPECT_FALSE(t.held(0));
  EXPECT_EQ(t.counters().acquires, 5u);
  EXPECT_EQ(t.counters().releases, 5u);
}

TEST(AtomicLockTable, ReleasingALockNotHeldIsAnError) {
  AtomicLockTable t(connect_ib());
  EXPECT_THROW(t.release(0x40, 1), std::logic_error);
  EXPECT_TRUE(t.acquire(0x40, 1));
  EXPECT_FALSE(t.acquire(0x40, 2));
  EXPECT_THROW(t.release(0x40, 2), std::logic_error) << "a waiter does not hold it";
  EXPECT_EQ(t.holder(0x40), std::optional<uint64_t>(1));
}

TEST(AtomicLockTable, ParametersAreValidated) {
  EXPECT_THROW(AtomicLockTable(AtomicLockTableParams{0, 0}), std::invalid_argument);
  EXPECT_THROW(AtomicLockTable(AtomicLockTableParams{4095, 0}), std::invalid_argument);
  EXPECT_THROW(AtomicLockTable(AtomicLockTableParams{4096, 64}), std::invalid_argument);
  EXPECT_NO_THROW(AtomicLockTable(AtomicLockTableParams{1, 63}));
  EXPECT_EQ(AtomicLockTable(connect_ib()).sram_bytes(), 512u);
  EXPECT_EQ(AtomicLockTable(connectx3()).sram_bytes(), 1u);
}

// Closed-loop K5 sketch: `clients` ops always in flight, each on a counter
// drawn round-robin from Z counters `stride` bytes apart; an op holds its
// lock for one PCIe read-modify-write of `rmw` cycles. Returns the ops
// completed before cycle `horizon`.
uint64_t closed_loop_ops(const AtomicLockTableParams& p, uint64_t z, uint64_t clients, uint64_t rmw,
                         uint64_t horizon, uint64_t stride = 8) {
  AtomicLockTable t(p);
  struct Op {
    uint64_t addr, done_at;
    bool running;
  };
  std::vector<Op> ops(clients);
  uint64_t next_counter = 0, completed = 0;
  auto issue = [&](uint64_t id, uint64_t now) {
    ops[id].addr = 0x10000 + stride * (next_counter++ % z);
    ops[id].running = t.acquire(ops[id].addr, id);
    ops[id].done_at = now + rmw;
  };
  for (uint64_t id = 0; id < clients; ++id) issue(id, 0);
  for (uint64_t now = 0; now < horizon; ++now) {
    for (uint64_t id = 0; id < clients; ++id) {
      if (!ops[id].running || ops[id].done_at != now) continue;
      ++completed;
      if (auto next = t.release(ops[id].addr, id)) {
        ops[*next].running = true;
        ops[*next].done_at = now + rmw;
      }
      issue(id, now);
    }
  }
  return completed;
}

TEST(AtomicLockTable, ClosedLoopRateIsFlatWithOneBucketAndRisesWith4096) {
  const uint64_t clients = 16, rmw = 100, horizon = 10000;
  const uint64_t cx3_z1 = closed_loop_ops(connectx3(), 1, clients, rmw, horizon);
  const uint64_t cx3_z16 = closed_loop_ops(connectx3(), 16, clients, rmw, horizon);
  const uint64_t cib_z1 = closed_loop_ops(connect_ib(), 1, clients, rmw, horizon);
  const uint64_t cib_z16 = closed_loop_ops(connect_ib(), 16, clients, rmw, horizon);
  EXPECT_EQ(cx3_z1, horizon / rmw - 1);  // one op per RMW; the last ends at the horizon
  EXPECT_EQ(cx3_z16, cx3_z1) << "one bucket: flat in Z";
  EXPECT_EQ(cib_z1, cx3_z1) << "Z = 1 serialises on any table";
  EXPECT_GE(cib_z16, 15 * cib_z1) << "16 counters in 16 buckets run in parallel";
  // 16 page-aligned counters (4 KiB apart) share the low 12 bits: serialised
  // again, the paper's lock-placement pitfall.
  EXPECT_EQ(closed_loop_ops(connect_ib(), 16, clients, rmw, horizon, 4096), cx3_z1);
}

}  // namespace
}  // namespace mprdma::nic::uarch
