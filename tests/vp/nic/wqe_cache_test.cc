// Integration: the NIC's send-WQE cache (nic.cache.wqe). 16 connections keep
// N 64-byte READs outstanding: a READ response needs its WQE again, which
// hits while the window fits the 256 lines and misses (a re-read of the WQE
// from the send ring, counted in dma.wqe_read_bytes) once it does not.
// WRITEs never look their WQE up again.
#include <gtest/gtest.h>

#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario(const std::string& app, int window) {
  return "name: wqe\n"
         "end_time: 100ms\n"
         "nic: {mtu: 1024}\n"
         "hosts: [{name: h0}, {name: h1}]\n"
         "links: [{name: wire, a: h0, b: h1, rate: 40Gbps, delay: 200ns}]\n"
         "jobs:\n"
         "  - {name: j, app: " +
         app +
         ", client: h0, server: h1, sizes: [64], inline_size: 64, "
         "iterations: 200, cq_mod: 1, qps: 16, tx_depth: " +
         std::to_string(window) + "}\n";
}

class WqeCache : public test::ScenarioRun {};

TEST_F(WqeCache, ReadResponsesMissOnceTheWindowOutgrowsTheCache) {
  ASSERT_TRUE(run(scenario("read_bw", 4)));
  EXPECT_TRUE(result().data_ok);
  const uint64_t fetched = counter("nic.h0.dma.wqe_read_bytes");
  EXPECT_EQ(counter("nic.h0.cache.wqe.hits"), 16u * 200);
  EXPECT_EQ(counter("nic.h0.cache.wqe.misses"), 0u);
  // Ring slots of 128 B (room for 64 B inline): every WQE read once, by its
  // fetch.
  EXPECT_EQ(fetched, 16u * 200 * 128) << "every WQE read once, by its fetch";
  const double fits = result().msg_rate_mpps;

  ASSERT_TRUE(run(scenario("read_bw", 32)));
  EXPECT_TRUE(result().data_ok);
  const uint64_t misses = counter("nic.h0.cache.wqe.misses");
  EXPECT_GT(misses, 16u * 200 / 2);
  // Each miss read the WQE again.
  EXPECT_EQ(counter("nic.h0.dma.wqe_read_bytes"), 16u * 200 * 128 + misses * 128);
  EXPECT_LT(result().msg_rate_mpps, fits / 2);
}

TEST_F(WqeCache, WritesNeverLookTheirWqeUpAgain) {
  ASSERT_TRUE(run(scenario("write_bw", 32)));
  EXPECT_TRUE(result().data_ok);
  EXPECT_EQ(counter("nic.h0.cache.wqe.hits") + counter("nic.h0.cache.wqe.misses"), 0u);
}

}  // namespace
}  // namespace mprdma::platform
