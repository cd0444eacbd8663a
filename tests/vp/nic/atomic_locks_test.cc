// Integration: the responder's atomic unit with its lock table
// (nic.atomics, vp/nic/uarch/atomic_lock_table.h). Four connections run
// FETCH_ADD(1) round robin over 16 counters 8 B apart (16 lock buckets)
// between two modeled hosts. With one bucket every atomic waits for the
// one before it; with 4096 buckets on bits 0-11 they overlap and the rate
// is several times higher; counters 4096 B apart share their low 12 bits
// and serialise again. Every counter must end at exactly the number of
// adds sent to it (atomics never lost or executed twice, whatever overlaps).
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario(int buckets, int stride, const std::string& extra_job = "") {
  return "name: locks\n"
         "end_time: 100ms\n"
         "nic: {mtu: 1024, atomics: {lock_buckets: " + std::to_string(buckets) + "}}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n"
         "  - {name: a, app: atomic_bw, client: h0, server: h1, iterations: 200, tx_depth: 16, "
         "cq_mod: 1, qps: 4, counters: 16, counter_stride: " + std::to_string(stride) + extra_job +
         "}\n";
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

TEST_F(AtomicLocks, CountersAreCheckedAndOnlyForAtomics) {
  EXPECT_NE(config_error(scenario(4096, 8, ", atomic_op: cmp_swap")).find("needs atomic_op fetch_add"),
            std::string::npos);
  EXPECT_NE(config_error(scenario(4096, 12)).find("multiple of 8"), std::string::npos);
  EXPECT_NE(config_error(scenario(3, 8)).find("lock_buckets must be a power of two"),
            std::string::npos);
  std::string w = scenario(4096, 8);
  w.replace(w.find("app: atomic_bw"), 14, "app: write_bw, sizes: [64]");
  EXPECT_NE(config_error(w).find("counters and counter_stride apply to atomic_bw only"),
            std::string::npos);
}

}  // namespace
}  // namespace mprdma::platform
