// Integration: the responder's atomic unit with its lock table
// (nic.atomics, vp/nic/uarch/atomic_lock_table.h). Four connections run
// FETCH_ADD(1) round robin over 16 counters 8 B apart (16 lock buckets)
// between two modeled hosts. With one bucket every atomic waits for the
// one before it; with 4096 buckets on bits 0-11 they overlap and the rate
// is several times higher; counters 4096 B apart share their low 12 bits
// and serialise again. Every counter must end at exactly the number of
// adds sent to it (atomics never lost or executed twice, whatever overlaps).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "support/log_capture.h"
#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario(int buckets, int stride, const std::string& extra_job = "") {
  return "name: locks\n"
         "end_time: 100ms\n"
         "nic: {mtu: 1024, atomics: {lock_buckets: " +
         std::to_string(buckets) +
         "}}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n"
         "  - {name: a, app: atomic_bw, client: h0, server: h1, iterations: 200, tx_depth: 16, "
         "cq_mod: 1, qps: 4, counters: 16, counter_stride: " +
         std::to_string(stride) + extra_job + "}\n";
}

class AtomicLocks : public test::ScenarioRun {
 protected:
  host::SizeResult run_job(const std::string& text) {
    EXPECT_TRUE(run(text));
    return result();
  }
};

TEST_F(AtomicLocks, BucketsDecideWhichAtomicsOverlap) {
  const host::SizeResult one = run_job(scenario(1, 8));
  EXPECT_TRUE(one.data_ok) << one.error;
  EXPECT_EQ(one.iterations, 800u);
  EXPECT_EQ(counter("nic.h1.responder.atomics"), 800u);
  const uint64_t conflicts_one = counter("nic.h1.atomics.lock_conflicts");
  EXPECT_GT(conflicts_one, 700u) << "one lock: nearly every atomic waits";
  // One read-modify-write (~0.42 us) at a time: at most ~2.5 M/s.
  EXPECT_LT(one.msg_rate_mpps, 2.6);

  const host::SizeResult many = run_job(scenario(4096, 8));
  EXPECT_TRUE(many.data_ok) << many.error;
  EXPECT_LT(counter("nic.h1.atomics.lock_conflicts"), conflicts_one / 2);
  EXPECT_GT(many.msg_rate_mpps, 4 * one.msg_rate_mpps) << "16 buckets in parallel";

  const host::SizeResult same_low_bits = run_job(scenario(4096, 4096));
  EXPECT_TRUE(same_low_bits.data_ok) << same_low_bits.error;
  EXPECT_GT(counter("nic.h1.atomics.lock_conflicts"), 700u);
  EXPECT_NEAR(same_low_bits.msg_rate_mpps, one.msg_rate_mpps, 0.05 * one.msg_rate_mpps);
}

// The order of the server's 8-byte DMA reads and writes of two atomics sent
// back to back on one connection (counters 0 and 1, `stride` bytes apart),
// from the PCIe link's trace log: "R<k>" is the read of counter k, "W<k>"
// its write. Only addresses that are both read and written with 8 bytes
// count (the counters); they must be exactly the two counters.
class AtomicRmwOrder : public test::ScenarioRun {
 protected:
  std::vector<std::string> rmw_order(int buckets, int stride);
};

std::vector<std::string> AtomicRmwOrder::rmw_order(int buckets, int stride) {
  std::string text;
  bool ok = false;
  {
    test::LogCapture log("pcie.h1=trace");
    ok =
        run("name: order\n"
            "end_time: 10ms\n"
            "nic: {mtu: 1024, atomics: {lock_buckets: " +
            std::to_string(buckets) +
            "}}\n"
            "hosts: [{name: h0}, {name: h1}]\n"
            "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
            "jobs:\n"
            "  - {name: a, app: atomic_bw, client: h0, server: h1, iterations: 2, tx_depth: 2, "
            "cq_mod: 1, counters: 2, counter_stride: " +
            std::to_string(stride) + "}\n");
    text = log.text();
  }
  EXPECT_TRUE(ok);
  EXPECT_TRUE(result().data_ok) << result().error;
  // (kind, address) of every 8-byte DMA read and write, in simulated order.
  std::vector<std::pair<char, uint64_t>> events;
  std::map<uint64_t, int> seen;  // bit 0: read, bit 1: written
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line.find("pcie.h1:") == std::string::npos) continue;
    char kind = 0;
    size_t at = std::string::npos;
    if ((at = line.find("dma read 0x")) != std::string::npos) {
      kind = 'R';
      at += 11;
    } else if ((at = line.find("dma_write 0x")) != std::string::npos) {
      kind = 'W';
      at += 12;
    } else {
      continue;
    }
    size_t end = 0;
    const uint64_t addr = std::stoull(line.substr(at), &end, 16);
    if (line.compare(at + end, 5, " 8 B ") != 0 && line.compare(at + end, 5, " 8 B,") != 0)
      continue;
    events.emplace_back(kind, addr);
    seen[addr] |= kind == 'R' ? 1 : 2;
  }
  // Counter 0's atomic arrives first, so its address is read first. The
  // buffer's pages need not be contiguous in physical memory, but the low 12
  // bits of the physical address are those of the virtual one.
  std::vector<uint64_t> counters;
  for (const auto& [kind, addr] : events)
    if (seen[addr] == 3 && std::find(counters.begin(), counters.end(), addr) == counters.end())
      counters.push_back(addr);
  EXPECT_EQ(counters.size(), 2u) << text.substr(0, 4000);
  if (counters.size() != 2) return {};
  EXPECT_EQ((counters[1] - counters[0]) & 4095, static_cast<uint64_t>(stride) & 4095);
  std::vector<std::string> order;
  for (const auto& [kind, addr] : events)
    if (addr == counters[0] || addr == counters[1])
      order.push_back(std::string(1, kind) + (addr == counters[0] ? "0" : "1"));
  return order;
}

using Order = std::vector<std::string>;

// One lock: the second atomic's read is issued only after the first one's
// write (the write releases the lock and the next read follows it on the link).
TEST_F(AtomicRmwOrder, OneBucketSerialisesTheReadModifyWrites) {
  EXPECT_EQ(rmw_order(1, 8), (Order{"R0", "W0", "R1", "W1"}));
}

// 4096 buckets: counters 8 B apart have their own locks, so the second read
// goes out while the first atomic still waits for its read completion.
TEST_F(AtomicRmwOrder, DifferentBucketsOverlap) {
  EXPECT_EQ(rmw_order(4096, 8), (Order{"R0", "R1", "W0", "W1"}));
}

// 4096 buckets on bits 0-11: counters 4096 B apart share a bucket.
TEST_F(AtomicRmwOrder, SameLow12BitsSerialise) {
  EXPECT_EQ(rmw_order(4096, 4096), (Order{"R0", "W0", "R1", "W1"}));
  // The lock is the address's low 12 bits, not the page: 4104 B apart overlap.
  EXPECT_EQ(rmw_order(4096, 4104), (Order{"R0", "R1", "W0", "W1"}));
}

// Counters picked at random from the job's seeded stream, eight connections
// with 16 atomics each in flight over 4 buckets: the atomics overlap and
// queue, and every counter still ends at the number of adds sent to it
// (perftest's data check), whose sum is the number of atomics.
TEST_F(AtomicLocks, RandomCountersUnderConcurrencyAddUpExactly) {
  std::string text = scenario(4096, 8, ", counter_pick: random");
  text.replace(text.find("qps: 4"), 6, "qps: 8");
  text.replace(text.find("counters: 16"), 12, "counters: 4");
  const host::SizeResult r = run_job(text);
  EXPECT_TRUE(r.data_ok) << r.error;
  EXPECT_EQ(r.iterations, 1600u);
  EXPECT_EQ(counter("nic.h1.responder.atomics"), 1600u);
  EXPECT_GT(counter("nic.h1.atomics.lock_conflicts"), 100u) << "the atomics did contend";
  EXPECT_GT(counter("nic.h1.atomics.lock_max_queue"), 1u);
}

// The read-modify-write buffers (nic.atomics.max_outstanding) bound the
// unit when the locks do not: 16 buckets for 64 atomics in flight, but two
// buffers let only two read-modify-writes run at once, and both stay taken
// while atomics queue. The sum of their hold times says so.
TEST_F(AtomicLocks, BuffersBoundTheUnitWhenLocksDoNot) {
  const host::SizeResult wide = run_job(scenario(4096, 8));
  EXPECT_TRUE(wide.data_ok) << wide.error;
  std::string text = scenario(4096, 8);
  text.replace(text.find("lock_buckets: 4096}"), 19, "lock_buckets: 4096, max_outstanding: 2}");
  const host::SizeResult two = run_job(text);
  EXPECT_TRUE(two.data_ok) << two.error;
  EXPECT_EQ(counter("nic.h1.responder.atomics"), 800u);
  // Two read-modify-writes of ~0.42 us at a time: at most ~4.8 M/s.
  EXPECT_LT(two.msg_rate_mpps, 5.0);
  EXPECT_GT(wide.msg_rate_mpps, 2 * two.msg_rate_mpps);
  // Both buffers busy for (nearly) the whole run.
  const double busy_s = static_cast<double>(counter("nic.h1.atomics.buffer_busy_ps")) * 1e-12;
  EXPECT_GT(busy_s, 0.9 * 2 * two.seconds);
  EXPECT_LE(busy_s, 2 * two.seconds * 1.01);
}

TEST_F(AtomicLocks, CountersAreCheckedAndOnlyForAtomics) {
  EXPECT_NE(
      config_error(scenario(4096, 8, ", atomic_op: cmp_swap")).find("needs atomic_op fetch_add"),
      std::string::npos);
  EXPECT_NE(config_error(scenario(4096, 12)).find("multiple of 8"), std::string::npos);
  EXPECT_NE(config_error(scenario(3, 8)).find("lock_buckets must be a power of two"),
            std::string::npos);
  std::string w = scenario(4096, 8);
  w.replace(w.find("app: atomic_bw"), 14, "app: write_bw, sizes: [64]");
  EXPECT_NE(
      config_error(w).find("counters, counter_stride and counter_pick apply to atomic_bw only"),
      std::string::npos);
  EXPECT_NE(config_error(scenario(4096, 8, ", counter_pick: zipf")).find("counter_pick"),
            std::string::npos);
}

}  // namespace
}  // namespace mprdma::platform
