// Integration: one NIC, several transport engines. RoCEv2 NICs (go-back-N
// with DCQCN) that also offer MP-RDMA and IRN to their QPs
// (nic.qp_transports) run three connections side by side on the MP-RDMA
// testbed fabric with 1 % loss on every t0 -> spine uplink (so that each
// connection, whatever its paths, loses packets): t0h0 ->
// t1h0 on MP-RDMA, t0h1 -> t1h1 on IRN, t0h2 -> t1h2 on the NIC's default
// (go-back-N under DCQCN). Each job's data must arrive intact and each
// connection must have been carried by its own engine: only MP-RDMA's
// sender counts ACK clocking, only IRN's counts RTO_low timeouts, only the
// go-back-N QP is paced by DCQCN. Bad choices are refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "support/scenario_run.h"

namespace mprdma::platform {
namespace {

std::string scenario_text(const std::string& nic, const std::string& jobs) {
  return "name: per-qp-transport\n"
         "seed: 2\n"
         "end_time: 100ms\n"
         "nic:\n"
         "  mtu: 1024\n" +
         nic +
         "fabric:\n"
         "  topology: mp_rdma_testbed\n"
         "  leaves: 2\n"
         "  spines: 4\n"
         "  hosts_per_leaf: 3\n"
         "  access_rate: 40Gbps\n"
         "  uplink_rate: 40Gbps\n"
         "  link: {delay: 200ns}\n"
         "  switch:\n"
         "    ecn: {enabled: true, kmin: 20KB, kmax: 200KB, pmax: 0.01}\n"
         "    pfc: {enabled: true, lossless_mask: 1}\n"
         "  events:\n"
         "    - {at: 0s, link: t0-s0, action: loss, value: \"0.01\", dir: a2b}\n"
         "    - {at: 0s, link: t0-s1, action: loss, value: \"0.01\", dir: a2b}\n"
         "    - {at: 0s, link: t0-s2, action: loss, value: \"0.01\", dir: a2b}\n"
         "    - {at: 0s, link: t0-s3, action: loss, value: \"0.01\", dir: a2b}\n"
         "jobs:" +
         jobs;
}

const std::string kMixedNic =
    "  transport: gbn\n"
    "  congestion_control: dcqcn\n"
    "  qp_transports: [mprdma, irn]\n";

// Three concurrent connections, one per engine; IRN also reads.
const std::string kMixedJobs = R"(
  - {name: mp, app: write_bw, client: t0h0, server: t1h0, qp_transport: mprdma, sizes: [64KiB], iterations: 40, timeout: 20}
  - {name: irn, app: write_bw, client: t0h1, server: t1h1, qp_transport: irn, sizes: [64KiB], iterations: 40, after_previous: false, timeout: 20}
  - {name: rocev2, app: write_bw, client: t0h2, server: t1h2, sizes: [64KiB], iterations: 40, after_previous: false, timeout: 20}
  - {name: irn_read, app: read_bw, client: t0h1, server: t1h1, qp_transport: irn, sizes: [16KiB], iterations: 40, timeout: 20}
)";

class PerQpTransport : public test::ScenarioRun {
 protected:
  bool has_counter_prefixed(const std::string& prefix) const {
    for (const auto& [path, c] : env->stats.counters())
      if (path.compare(0, prefix.size(), prefix) == 0) return true;
    return false;
  }
  static std::string load_error(const std::string& text) { return config_error(text); }
};

TEST_F(PerQpTransport, ThreeEnginesOnOneNicEachCarryTheirOwnConnection) {
  ASSERT_TRUE(run(scenario_text(kMixedNic, kMixedJobs))) << "a job did not finish";
  const auto& jobs = platform->outcomes();
  ASSERT_EQ(jobs.size(), 4u);
  for (const JobOutcome& o : jobs) {
    SCOPED_TRACE("job " + o.name);
    EXPECT_TRUE(o.finished);
    ASSERT_EQ(o.results.size(), 1u);
    EXPECT_EQ(o.results[0].error, "");
    EXPECT_TRUE(o.results[0].data_ok);
    EXPECT_GT(o.results[0].bw_gbps, 0.0);
  }
  EXPECT_TRUE(platform->all_ok());

  // The lossy links dropped packets of every connection's data...
  uint64_t drops = 0;
  for (int s = 0; s <= 3; ++s) drops += counter("link.t0-s" + std::to_string(s) + ".a2b.drops");
  ASSERT_GT(drops, 0u);
  // ...and each sender recovered its own.
  for (const char* h : {"t0h0", "t0h1", "t0h2"})
    EXPECT_GT(counter(std::string("nic.") + h + ".requester.retransmits"), 0u) << h;

  // MP-RDMA: every NIC has the engine, only t0h0's sender was ACK-clocked
  // and only t1h0's receiver placed packets through the bitmap.
  EXPECT_GT(counter("nic.t0h0.transport.acks"), 0u);
  EXPECT_EQ(counter("nic.t0h1.transport.acks"), 0u);
  EXPECT_EQ(counter("nic.t0h2.transport.acks"), 0u);
  EXPECT_GT(counter("nic.t1h0.transport.rx_messages"), 0u);
  EXPECT_EQ(counter("nic.t1h1.transport.rx_messages"), 0u);
  EXPECT_EQ(counter("nic.t1h2.transport.rx_messages"), 0u);
  // IRN: its timeouts and BDP cap are its own; t1h1 placed the writes and
  // the READ requests (each at most once), the other receivers' IRN side
  // placed nothing. rx_placed is shared by both engines' receivers.
  EXPECT_GT(counter("nic.t0h1.transport.bdp_stalls") + counter("nic.t0h1.transport.rto_low") +
                counter("nic.t0h1.transport.recoveries"),
            0u);
  EXPECT_EQ(counter("nic.t0h0.transport.rto_low") + counter("nic.t0h0.transport.bdp_stalls"), 0u);
  EXPECT_EQ(counter("nic.t0h2.transport.rto_low") + counter("nic.t0h2.transport.bdp_stalls"), 0u);
  EXPECT_GT(counter("nic.t1h1.transport.rx_placed"), 0u);
  EXPECT_EQ(counter("nic.t1h2.transport.rx_placed"), 0u);
  // Go-back-N under DCQCN: only t0h2's QP (and t0h1's IRN QP, which DCQCN
  // paces too) has a reaction point; MP-RDMA's QP has none, and t1h0's
  // notification point sends MP-RDMA no CNPs (ECN is echoed per ACK).
  EXPECT_TRUE(has_counter_prefixed("nic.t0h2.dcqcn.qp"));
  EXPECT_TRUE(has_counter_prefixed("nic.t0h1.dcqcn.qp"));
  EXPECT_FALSE(has_counter_prefixed("nic.t0h0.dcqcn.qp"));
  EXPECT_EQ(counter("nic.t1h0.dcqcn.cnp_tx"), 0u);
  EXPECT_EQ(counter("nic.t0h0.dcqcn.cnp_rx"), 0u);
}

TEST_F(PerQpTransport, RunsAreDeterministic) {
  const std::string text = scenario_text(kMixedNic, kMixedJobs);
  ASSERT_TRUE(run(text));
  std::map<std::string, uint64_t> first;
  for (const auto& [path, c] : env->stats.counters()) first[path] = c->value();
  const uint64_t t1 = platform->sim_time_ps();
  ASSERT_TRUE(run(text));
  std::map<std::string, uint64_t> second;
  for (const auto& [path, c] : env->stats.counters()) second[path] = c->value();
  EXPECT_EQ(platform->sim_time_ps(), t1);
  EXPECT_EQ(first, second);
}

TEST_F(PerQpTransport, ChoicesTheNicsDoNotOfferAreRefusedByName) {
  const std::string job =
      "\n  - {name: j, app: write_bw, client: t0h0, server: t1h0, qp_transport: %s, sizes: [4KiB], "
      "iterations: 4}\n";
  auto jobs = [&](const std::string& t) {
    std::string s = job;
    s.replace(s.find("%s"), 2, t);
    return s;
  };
  // MP-RDMA on go-back-N NICs that do not offer it.
  std::string e = load_error(scenario_text("  transport: gbn\n", jobs("mprdma")));
  EXPECT_NE(e.find("job 'j'"), std::string::npos) << e;
  EXPECT_NE(e.find("qp_transport mprdma is not offered by host 't0h0'"), std::string::npos) << e;
  EXPECT_NE(e.find("nic.qp_transports"), std::string::npos) << e;
  // DCQCN on NICs without DCQCN.
  e = load_error(scenario_text("  transport: gbn\n", jobs("dcqcn")));
  EXPECT_NE(e.find("congestion_control is none"), std::string::npos) << e;
  // An engine name the NIC does not know.
  e = load_error(scenario_text("  qp_transports: [mprdma, tcp]\n", jobs("mprdma")));
  EXPECT_NE(e.find("qp_transports: unknown transport 'tcp'"), std::string::npos) << e;
  // A datagram job has no engine to choose.
  e = load_error(scenario_text(kMixedNic,
                               "\n  - {name: j, app: send_bw, transport: ud, client: "
                               "t0h0, server: t1h0, qp_transport: irn, sizes: [512], "
                               "iterations: 4}\n"));
  EXPECT_NE(e.find("qp_transport is for RC jobs"), std::string::npos) << e;
  // An unknown qp_transport value is a choice error naming the key.
  e = load_error(scenario_text(kMixedNic, jobs("rocev3")));
  EXPECT_NE(e.find("qp_transport"), std::string::npos) << e;
  EXPECT_NE(e.find("rocev3"), std::string::npos) << e;
  // The valid forms load.
  EXPECT_EQ(load_error(scenario_text(kMixedNic, jobs("mprdma"))), "");
  EXPECT_EQ(load_error(scenario_text(kMixedNic, jobs("dcqcn"))), "");
  EXPECT_EQ(load_error(scenario_text("  transport: irn\n", jobs("gbn"))), "");
}

}  // namespace
}  // namespace mprdma::platform
