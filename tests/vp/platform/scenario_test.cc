// The scenario layer: validation errors name file, line and key; every
// scenario in scenarios/ validates.
#include "vp/platform/scenario.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/files.h"
#include "vp/core/config.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_config.h"

namespace mprdma::platform {
namespace {

std::string source_dir() {
  const char* s = std::getenv("MPRDMA_SOURCE_DIR");
  return s ? s : ".";
}

using test::write_temp;

const char* kGood = R"(name: t
hosts:
  - {name: h0}
  - {name: h1}
links:
  - {name: wire, a: h0, b: h1}
jobs:
  - {name: w, app: write_bw, client: h0, server: h1, sizes: [4KiB]}
metrics:
  bw: w.4096.bw_gbps
)";

std::string error_of(const std::string& text) {
  const std::string path = write_temp("scenario.yaml", text);
  try {
    load_scenario(path);
  } catch (const core::ConfigError& e) {
    return e.what();
  }
  return "";
}

// A disabled job is checked like the others, then left out of the run; a
// sweep can turn jobs off (an incast's degree), which every point checks.
TEST(Scenario, DisabledJobsAreCheckedThenDropped) {
  std::string text = kGood;
  text.replace(text.find("metrics:"), 8,
               "  - {name: off, enabled: false, app: read_bw, client: h1, server: h0}\n"
               "  - {name: last, app: send_bw, client: h0, server: h1}\n"
               "metrics:");
  ScenarioConfig cfg = load_scenario(write_temp("disabled.yaml", text));
  ASSERT_EQ(cfg.jobs.size(), 2u);
  EXPECT_EQ(cfg.jobs[0].name, "w");
  EXPECT_EQ(cfg.jobs[1].name, "last");
  cfg = load_scenario(write_temp("disabled.yaml", text),
                      {"jobs.1.enabled=true", "jobs.0.enabled=false"});
  ASSERT_EQ(cfg.jobs.size(), 2u);
  EXPECT_EQ(cfg.jobs[0].name, "off");
  // Still checked: a bad key or host in a disabled job is an error.
  std::string bad = text;
  bad.replace(bad.find("client: h1, server: h0"), 22, "client: h9, server: h0");
  EXPECT_NE(error_of(bad).find("h9"), std::string::npos);
  bad = text;
  bad.replace(bad.find("enabled: false,"), 15, "enabled: false, colour: red,");
  EXPECT_NE(error_of(bad).find("unknown key 'colour'"), std::string::npos);
  // A metric may name a disabled job (the run leaves it out).
  EXPECT_EQ(error_of(text + "  r: off.65536.bw_gbps\n"), "");
}

TEST(Scenario, GoodFileLoads) {
  const std::string path = write_temp("good.yaml", kGood);
  const ScenarioConfig cfg = load_scenario(path);
  EXPECT_EQ(cfg.hosts.size(), 2u);
  EXPECT_EQ(cfg.jobs.at(0).sizes.at(0).n, 4096u);
  EXPECT_EQ(cfg.metrics.at("bw"), "w.4096.bw_gbps");
  EXPECT_EQ(cfg.nic.mtu.n, 1024u);  // documented default kept
}

TEST(Scenario, OverridesSetKeysListEntriesAndNewSections) {
  const std::string path = write_temp("good.yaml", kGood);
  const ScenarioConfig cfg = load_scenario(path, {"seed=7", "jobs.0.iterations=12", "nic.mtu=4096",
                                                  "links.0.delay=1us", "jobs.0.sizes=[4096, 128]"});
  EXPECT_EQ(cfg.seed, 7);
  EXPECT_EQ(cfg.jobs.at(0).iterations, 12);
  EXPECT_EQ(cfg.nic.mtu.n, 4096u);
  EXPECT_EQ(cfg.links.at(0).link.delay.ps, 1000000u);
  ASSERT_EQ(cfg.jobs.at(0).sizes.size(), 2u);
  EXPECT_EQ(cfg.jobs.at(0).sizes[1].n, 128u);
  // "*" sets a key in every item of a list, each its own copy: a later
  // override of one item leaves the others alone.
  std::string text = kGood;
  text.replace(text.find("metrics:"), 0,
               "  - {name: w2, app: write_bw, client: h1, server: h0, sizes: [4KiB]}\n");
  const std::string path2 = write_temp("two-jobs.yaml", text);
  const ScenarioConfig all =
      load_scenario(path2, {"jobs.*.iterations=33", "jobs.*.sizes=[8KiB]", "jobs.1.sizes.0=2KiB",
                            "metrics.bw=w.8192.bw_gbps"});
  ASSERT_EQ(all.jobs.size(), 2u);
  EXPECT_EQ(all.jobs[0].iterations, 33);
  EXPECT_EQ(all.jobs[1].iterations, 33);
  EXPECT_EQ(all.jobs[0].sizes.at(0).n, 8192u);
  EXPECT_EQ(all.jobs[1].sizes.at(0).n, 2048u);
  // Later overrides win; the file is untouched.
  EXPECT_EQ(load_scenario(path, {"seed=1", "seed=2"}).seed, 2);
  EXPECT_EQ(load_scenario(path).seed, 1);
}

TEST(Scenario, BadOverridesAreErrorsThatNameThem) {
  const std::string path = write_temp("good.yaml", kGood);
  auto error = [&](const std::string& o) -> std::string {
    try {
      load_scenario(path, {o});
    } catch (const core::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error("seed").find("--set seed: expected KEY.PATH=VALUE"), std::string::npos);
  EXPECT_NE(error("jobs.5.iterations=1").find("'5' is not an index"), std::string::npos);
  EXPECT_NE(error("name.x=1").find("not a map"), std::string::npos);
  EXPECT_NE(error("nic.*=1").find("'*' stands for every item of a list"), std::string::npos);
  EXPECT_NE(error("jobs.*.nope=1").find("nope"), std::string::npos);
  EXPECT_NE(error("a..b=1").find("empty key"), std::string::npos);
  EXPECT_NE(error("seed=[1").find("not YAML"), std::string::npos);
  // Unknown keys and bad values are checked like the file's own.
  EXPECT_NE(error("nic.mtuu=1024").find("did you mean 'mtu'"), std::string::npos);
  EXPECT_NE(error("seed=-1").find("seed"), std::string::npos);
}

TEST(Scenario, UnknownKeyNamesFileLineAndKey) {
  std::string text = kGood;
  text.replace(text.find("  - {name: h1}"), 14, "  - {name: h1, colour: red}");
  const std::string err = error_of(text);
  EXPECT_NE(err.find("scenario.yaml:4:"), std::string::npos) << err;
  EXPECT_NE(err.find("hosts[1]"), std::string::npos) << err;
  EXPECT_NE(err.find("unknown key 'colour'"), std::string::npos) << err;
}

TEST(Scenario, MistypedNicKeySuggestsTheRightOne) {
  const std::string err = error_of(std::string(kGood) + "nic: {mtuu: 2048}\n");
  EXPECT_NE(err.find("unknown key 'mtuu'"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean 'mtu'"), std::string::npos) << err;
}

TEST(Scenario, WrongTypeAndRangeAreErrors) {
  EXPECT_NE(error_of(std::string(kGood) + "nic: {mtu: 100}\n").find("nic.mtu"), std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "nic: {mtu: 3000}\n").find("power of two"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "nic: {clock: fast}\n").find("nic.clock"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "seed: -3\n").find("seed"), std::string::npos);
  // MTT indices are 32-bit: 2^32 entries used to be accepted and wrap to 0.
  EXPECT_NE(error_of(std::string(kGood) + "nic: {limits: {max_mtt: 4294967296}}\n")
                .find("nic.limits.max_mtt"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kGood) + "nic: {handles: {key_random_bits: 20}}\n")
                .find("too few of a key's 32 bits"),
            std::string::npos);
}

TEST(Scenario, CrossReferencesAreChecked) {
  std::string text = kGood;
  text.replace(text.find("b: h1}"), 6, "b: h9}");
  EXPECT_NE(error_of(text).find("unknown host 'h9'"), std::string::npos);
  text = kGood;
  text.replace(text.find("w.4096"), 6, "w.8192");
  EXPECT_NE(error_of(text).find("has no size 8192"), std::string::npos);
  text = kGood;
  text.replace(text.find("bw_gbps"), 7, "speed");
  EXPECT_NE(error_of(text).find("unknown field 'speed'"), std::string::npos);
  text = kGood;
  text.replace(text.find("server: h1"), 10, "server: h0");
  EXPECT_NE(error_of(text).find("client and server are the same host"), std::string::npos);
}

TEST(Scenario, SeriesTermsFactorsAndAggregatesParse) {
  const auto t =
      parse_metric("avg(link.t0-s3.a2b.gbps,1ms,2.5ms) + -1*avg(nic.h0.mac.tx_gbps,1ms,2.5ms)");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kind, MetricTerm::Kind::kSeriesAvg);
  EXPECT_EQ(t[0].series, std::vector<std::string>{"link.t0-s3.a2b.gbps"});
  EXPECT_EQ(t[0].from.ps, 1000000000u);
  EXPECT_EQ(t[0].to.ps, 2500000000u);
  EXPECT_DOUBLE_EQ(t[0].factor, 1.0);
  EXPECT_DOUBLE_EQ(t[1].factor, -1.0);
  EXPECT_EQ(t[1].series.at(0), "nic.h0.mac.tx_gbps");
  const auto sd = parse_metric("0.5*stdev(switch.a.port8.queue_bytes,5ms,25ms)").at(0);
  EXPECT_EQ(sd.kind, MetricTerm::Kind::kSeriesStdev);
  EXPECT_EQ(sd.series, std::vector<std::string>{"switch.a.port8.queue_bytes"});
  EXPECT_EQ(sd.from.ps, 5000000000u);
  EXPECT_EQ(sd.to.ps, 25000000000u);
  EXPECT_DOUBLE_EQ(sd.factor, 0.5);
  const auto st = parse_metric("settle_us(link.t0-s1.a2b.gbps,9,11.5,250ms,260ms)").at(0);
  EXPECT_EQ(st.kind, MetricTerm::Kind::kSeriesSettle);
  EXPECT_EQ(st.series, std::vector<std::string>{"link.t0-s1.a2b.gbps"});
  EXPECT_DOUBLE_EQ(st.band_lo, 9.0);
  EXPECT_DOUBLE_EQ(st.band_hi, 11.5);
  EXPECT_EQ(st.from.ps, 250000000000u);
  EXPECT_EQ(st.to.ps, 260000000000u);
  EXPECT_EQ(parse_metric("reach_us(a.gbps,1,2,0s,1ms)").at(0).kind, MetricTerm::Kind::kSeriesReach);
  const auto fair = parse_metric("settle_us(jain(a.gbps|b.gbps),0.99,1,0s,1ms)").at(0);
  EXPECT_TRUE(fair.band_of_jain);
  EXPECT_EQ(fair.series, (std::vector<std::string>{"a.gbps", "b.gbps"}));
  EXPECT_DOUBLE_EQ(fair.band_lo, 0.99);
  EXPECT_FALSE(parse_metric("settle_us(a.gbps,1,2,0s,1ms)").at(0).band_of_jain);
  const auto j = parse_metric("jain(a.gbps|b.gbps|c.gbps,0s,10us)").at(0);
  EXPECT_EQ(j.kind, MetricTerm::Kind::kJain);
  EXPECT_EQ(j.series.size(), 3u);
  EXPECT_EQ(parse_metric("0.5*w.4096.bw_gbps").at(0).factor, 0.5);
  EXPECT_EQ(parse_metric("0.5*w.4096.bw_gbps").at(0).job, "w");

  const auto agg = parse_metric_aggregate(" min(jain.n1, jain.up.*) ");
  ASSERT_TRUE(agg);
  EXPECT_EQ(agg->op, "min");
  EXPECT_EQ(agg->args, (std::vector<std::string>{"jain.n1", "jain.up.*"}));
  EXPECT_FALSE(parse_metric_aggregate("w.4096.bw_gbps"));
  EXPECT_EQ(parse_metric_aggregate("average(conn.*)")->op, "average");
  EXPECT_FALSE(parse_metric_aggregate("mean(flows.all.fct_us)"))
      << "mean(<histogram>) is a term, not an aggregate of metrics";
  EXPECT_EQ(aggregate_arg_metrics("jain.up.*", {"jain.n1", "jain.up.1", "jain.up.2", "x"}),
            (std::vector<std::string>{"jain.up.1", "jain.up.2"}));
  EXPECT_EQ(aggregate_arg_metrics("x", {"x", "xy"}), std::vector<std::string>{"x"});

  const auto pc =
      parse_metric("2*pct(nic.t1h0.transport.rx_ood,99.9) + pct(pcie.h0.dma_read_latency,50)");
  ASSERT_EQ(pc.size(), 2u);
  EXPECT_EQ(pc[0].kind, MetricTerm::Kind::kHistPct);
  EXPECT_EQ(pc[0].counter, "nic.t1h0.transport.rx_ood");
  EXPECT_DOUBLE_EQ(pc[0].pct, 99.9);
  EXPECT_DOUBLE_EQ(pc[0].factor, 2.0);
  EXPECT_EQ(pc[1].counter, "pcie.h0.dma_read_latency");
  EXPECT_DOUBLE_EQ(pc[1].pct, 50.0);
  EXPECT_DOUBLE_EQ(parse_metric("pct(a.b,0)").at(0).pct, 0.0);
  EXPECT_DOUBLE_EQ(parse_metric("pct(a.b,100)").at(0).pct, 100.0);
  EXPECT_FALSE(pc[0].windowed);
  const MetricTerm pw = parse_metric("pct(nic.t1h0.transport.rx_ood,99.9,2ms,15ms)").at(0);
  EXPECT_EQ(pw.kind, MetricTerm::Kind::kHistPct);
  EXPECT_TRUE(pw.windowed);
  EXPECT_DOUBLE_EQ(pw.pct, 99.9);
  EXPECT_EQ(pw.from.ps, 2000000000u);
  EXPECT_EQ(pw.to.ps, 15000000000u);
  for (const char* bad :
       {"pct(nic.a.b)", "pct(nic.a.b,99.9,1)", "pct(nic.a.b,)", "pct(,99)", "pct(nic.a.b,100.1)",
        "pct(nic.a.b,-1)", "pct(nic.a.b,p99)", "pct(nic.a.b,99.9x)", "pct(rx_ood,99)",
        "pct(nic.a.,99)", "pct(a.b|c.d,99)", "pct(nic.a.b,99,5ms,2ms)", "pct(nic.a.b,99,1ms,xx)",
        "pct(nic.a.b,99,1ms)", "pct(nic.a.b,99,1ms,2ms,3ms)"})
    EXPECT_THROW(parse_metric(bad), std::invalid_argument) << bad;

  const MetricTerm we = parse_metric("ecn_mark_ratio(a-p0.a2b,6ms,12ms)").at(0);
  EXPECT_EQ(we.kind, MetricTerm::Kind::kEcnRatio);
  EXPECT_TRUE(we.windowed);
  EXPECT_EQ(we.link, "a-p0");
  EXPECT_EQ(we.dir, "a2b");
  EXPECT_EQ(we.from.ps, 6000000000u);
  EXPECT_EQ(we.to.ps, 12000000000u);
  EXPECT_FALSE(parse_metric("link.a-p0.a2b.ecn_mark_ratio").at(0).windowed);
  for (const char* bad : {"ecn_mark_ratio(a-p0.a2b,6ms)", "ecn_mark_ratio(a-p0.up,0s,1ms)",
                          "ecn_mark_ratio(a2b,0s,1ms)", "ecn_mark_ratio(a-p0.a2b,2ms,1ms)",
                          "ecn_mark_ratio(a-p0.a2b,0s,1x)"})
    EXPECT_THROW(parse_metric(bad), std::invalid_argument) << bad;

  const MetricTerm rt = parse_metric("8e-9*rate(nic.t1h0.responder.bytes,2ms,12ms)").at(0);
  EXPECT_EQ(rt.kind, MetricTerm::Kind::kCounterRate);
  EXPECT_EQ(rt.counter, "nic.t1h0.responder.bytes");
  EXPECT_EQ(rt.link, "t1h0");  // the host
  EXPECT_DOUBLE_EQ(rt.factor, 8e-9);
  EXPECT_EQ(rt.from.ps, 2000000000u);
  EXPECT_EQ(rt.to.ps, 12000000000u);
  for (const char* bad :
       {"rate(nic.h0.bytes,1ms)", "rate(pcie.h0.bytes,0s,1ms)", "rate(nic..bytes,0s,1ms)",
        "rate(nic.h0.,0s,1ms)", "rate(nic.h0,0s,1ms)", "rate(nic.h0.bytes,2ms,1ms)",
        "rate(nic.h0.a|b,0s,1ms)", "rate(nic.h0.bytes,0s,1x)"})
    EXPECT_THROW(parse_metric(bad), std::invalid_argument) << bad;

  for (const char* bad : {"avg(a.gbps,1ms)",
                          "avg(a.gbps|b.gbps,0s,1ms)",
                          "avg(a.gbps,2ms,1ms)",
                          "avg(a.gbps,1,2ms)",
                          "jain(a.gbps||b.gbps,0s,1ms)",
                          "x*w.4096.bw_gbps",
                          "min(w.4096.bw_gbps)",
                          "stdev(a.gbps|b.gbps,0s,1ms)",
                          "stdev(a.gbps,0s)",
                          "stdev(a.gbps,1ms,1ms)",
                          "settle_us(a.gbps,0s,1ms)",
                          "settle_us(a.gbps,1,2,3,0s,1ms)",
                          "settle_us(a.gbps,x,2,0s,1ms)",
                          "settle_us(a.gbps,1,,0s,1ms)",
                          "settle_us(a.gbps,1,nan,0s,1ms)",
                          "settle_us(a.gbps|b.gbps,1,2,0s,1ms)",
                          "settle_us(a.gbps,1,2,1ms,1ms)",
                          "reach_us(a.gbps,0s,1ms)",
                          "reach_us(a.gbps,2,1,0s,1ms)",
                          "reach_us(jain(a.gbps),0,1,0s,1ms)",
                          "settle_us(jain(a.gbps||b.gbps),0,1,0s,1ms)",
                          "avg(jain(a.gbps|b.gbps),0s,1ms)"})
    EXPECT_THROW(parse_metric(bad), std::invalid_argument) << bad;
}

TEST(Scenario, CounterRateTermsAreChecked) {
  auto with_metric = [](const std::string& m) { return std::string(kGood) + "  x: " + m + "\n"; };
  EXPECT_EQ(error_of(with_metric("8e-9*rate(nic.h1.responder.bytes,0s,1ms)")), "");
  EXPECT_NE(error_of(with_metric("rate(nic.h7.responder.bytes,0s,1ms)")).find("unknown host 'h7'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("rate(nic.h1.responder.bytes,0s,1ms)") + "sample_interval: 0s\n")
                .find("sample_interval is 0"),
            std::string::npos);
  EXPECT_NE(
      error_of(with_metric("rate(nic.h1.responder.bytes,0s,20s)")).find("ends after end_time"),
      std::string::npos);
  EXPECT_NE(
      error_of(with_metric("rate(nic.h1.bytes)")).find("rate(nic.<host>.<counter>,<from>,<to>)"),
      std::string::npos);
}

TEST(Scenario, SeriesMetricsAreChecked) {
  auto with_metric = [](const std::string& m) { return std::string(kGood) + "  x: " + m + "\n"; };
  EXPECT_EQ(
      error_of(with_metric("avg(link.wire.a2b.gbps,0s,1ms) + avg(nic.h1.mac.rx_gbps,0s,1ms)")), "");
  EXPECT_EQ(error_of(with_metric("jain(nic.h0.mac.tx_gbps|pcie.h1.upstream.gbps,0s,1ms)")), "");
  EXPECT_NE(error_of(with_metric("avg(link.nowire.a2b.gbps,0s,1ms)"))
                .find("unknown series 'link.nowire.a2b.gbps'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("avg(nic.h7.mac.tx_gbps,0s,1ms)")).find("unknown series"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("avg(nic.h0.mac.tx_gbps,0s,1ms)") + "sample_interval: 0s\n")
                .find("sample_interval is 0"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("avg(nic.h0.mac.tx_gbps,0s,20s)")).find("ends after end_time"),
            std::string::npos);
  // stdev(...) is checked like avg(...).
  EXPECT_EQ(error_of(with_metric("stdev(link.wire.a2b.gbps,0s,1ms)")), "");
  EXPECT_NE(error_of(with_metric("stdev(link.nowire.a2b.gbps,0s,1ms)"))
                .find("unknown series 'link.nowire.a2b.gbps'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("stdev(nic.h0.mac.tx_gbps,0s,1ms)") + "sample_interval: 0s\n")
                .find("sample_interval is 0"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("stdev(nic.h0.mac.tx_gbps,0s,20s)")).find("ends after end_time"),
            std::string::npos);
  // settle_us(...) too, and its band must not be upside down.
  EXPECT_EQ(error_of(with_metric("settle_us(link.wire.a2b.gbps,30,40,0s,1ms)")), "");
  EXPECT_NE(error_of(with_metric("settle_us(link.nowire.a2b.gbps,30,40,0s,1ms)"))
                .find("unknown series 'link.nowire.a2b.gbps'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("settle_us(link.wire.a2b.gbps,30,40,0s,20s)"))
                .find("ends after end_time"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("settle_us(link.wire.a2b.gbps,40,30,0s,1ms)"))
                .find("low bound is above its high bound"),
            std::string::npos);
  EXPECT_EQ(
      error_of(with_metric("settle_us(jain(link.wire.a2b.gbps|link.wire.b2a.gbps),0.9,1,0s,1ms)")),
      "");
  EXPECT_NE(
      error_of(with_metric("settle_us(jain(link.wire.a2b.gbps|link.nowire.b2a.gbps),0.9,1,0s,1ms)"))
          .find("unknown series 'link.nowire.b2a.gbps'"),
      std::string::npos);
  EXPECT_NE(error_of(with_metric("reach_us(link.nowire.a2b.gbps,30,40,0s,1ms)"))
                .find("unknown series 'link.nowire.a2b.gbps'"),
            std::string::npos);
  // pct(...): the host (nic., pcie.) or job (flow.) the path names must exist.
  EXPECT_EQ(error_of(with_metric("pct(nic.h1.transport.rx_ood,99.9)")), "");
  EXPECT_EQ(
      error_of(with_metric("pct(pcie.h0.dma_read_latency,50) + pct(flow.w.latency_us_4096,99)")),
      "");
  EXPECT_NE(error_of(with_metric("pct(nic.h7.transport.rx_ood,99.9)")).find("unknown host 'h7'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("pct(pcie.h7.dma_read_latency,99.9)")).find("unknown host 'h7'"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("pct(flow.nojob.latency_us_4096,99)")).find("unknown job 'nojob'"),
            std::string::npos);
  EXPECT_NE(
      error_of(with_metric("pct(nic.h1.transport.rx_ood,101)")).find("not a number in [0, 100]"),
      std::string::npos);
  EXPECT_EQ(error_of(with_metric("max(bw)")), "");
  EXPECT_EQ(error_of(with_metric("min(b*)")), "");
  EXPECT_NE(error_of(with_metric("min(bw, nothing)")).find("'nothing' names no metric"),
            std::string::npos);
  EXPECT_NE(error_of(with_metric("min(x)")).find("'x' names no metric"), std::string::npos);
}

const char* kFabric = R"(name: t
fabric: {topology: mp_rdma_testbed, leaves: 2, spines: 4, hosts_per_leaf: 2}
nic: {transport: mprdma}
hosts:
  - {name: t0h1, nic: {transport: gbn, congestion_control: dcqcn, mprdma.initial_window: 8}}
  - {name: t1h1, nic: {transport: gbn}}
jobs:
  - {name: mp, app: write_bw, client: t0h0, server: t1h0, sizes: [64KiB]}
  - {name: sp, app: write_bw, client: t0h1, server: t1h1, sizes: [64KiB], via: t0-s3, duration: 1ms}
)";

TEST(Scenario, PerHostNicKeysApplyOverTheNicSection) {
  const ScenarioConfig cfg = load_scenario(write_temp("hostnic.yaml", kFabric));
  EXPECT_EQ(cfg.nic_of("t0h0").transport, "mprdma");
  EXPECT_EQ(cfg.nic_of("t0h1").transport, "gbn");
  EXPECT_EQ(cfg.nic_of("t0h1").congestion_control, "dcqcn");
  EXPECT_EQ(cfg.nic_of("t0h1").engines.get<nic::MpRdmaConfig>().initial_window, 8);
  EXPECT_EQ(cfg.nic_of("t1h1").congestion_control, cfg.nic.congestion_control);
  EXPECT_EQ(cfg.nic_of("t1h1").mtu.n, cfg.nic.mtu.n);  // unnamed keys follow nic
  EXPECT_EQ(cfg.jobs.at(1).via, "t0-s3");
  EXPECT_EQ(cfg.jobs.at(1).duration.ps, 1000000000u);
}

TEST(Scenario, PerHostNicKeysViaAndDurationAreChecked) {
  auto err = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return error_of(text);
  };
  std::string e = err(kFabric, "mprdma.initial_window: 8", "colour: red");
  EXPECT_NE(e.find("host 't0h1': nic:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'colour'"), std::string::npos) << e;
  e = err(kFabric, "congestion_control: dcqcn,", "congestion_control: fast,");
  EXPECT_NE(e.find("host 't0h1': nic:"), std::string::npos) << e;
  // MP-RDMA has its own congestion control: the nic section's rule holds per host.
  e = err(kFabric, "{transport: gbn}", "{congestion_control: dcqcn}");
  EXPECT_NE(e.find("host 't1h1': nic:"), std::string::npos) << e;
  e = err(kFabric, "{transport: gbn}", "{transport: irn}");
  EXPECT_NE(e.find("client 't0h1' uses transport gbn but server 't1h1' uses irn"),
            std::string::npos)
      << e;
  e = err(kFabric, "via: t0-s3", "via: t0-s9");
  EXPECT_NE(e.find("via names unknown link 't0-s9'"), std::string::npos) << e;
  e = err(kFabric, "via: t0-s3", "via: t0-s3, udp_sport: 50000");
  EXPECT_NE(e.find("either via or udp_sport"), std::string::npos) << e;
  e = err(kFabric, "app: write_bw, client: t0h1", "app: send_bw, client: t0h1");
  EXPECT_NE(e.find("duration applies to write_bw, read_bw and write_flows only"), std::string::npos)
      << e;
  e = err(kGood, "sizes: [4KiB]", "sizes: [4KiB], via: wire");
  EXPECT_NE(e.find("no fabric"), std::string::npos) << e;
}

// nic.transport_impl, per scenario and per host: an implementation the
// transport has is taken; one it lacks is an error naming both.
TEST(Scenario, TransportImplIsCheckedAgainstTheTransport) {
  auto sub = [](std::string text, const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
    return text;
  };
  std::string text = sub(kFabric, "nic: {transport: mprdma}",
                         "nic: {transport: mprdma, transport_impl: lockstep}");
  text = sub(text, "{name: t1h1, nic: {transport: gbn}}",
             "{name: t1h1, nic: {transport: mprdma, transport_impl: rtl}}");
  text = sub(text, "{transport: gbn, congestion_control: dcqcn, mprdma.initial_window: 8}",
             "{transport_impl: model}");
  const ScenarioConfig cfg = load_scenario(write_temp("impl.yaml", text));
  EXPECT_EQ(cfg.nic_of("t0h0").transport_impl, "lockstep");
  EXPECT_EQ(cfg.nic_of("t0h1").transport_impl, "model");
  EXPECT_EQ(cfg.nic_of("t1h1").transport_impl, "rtl");
  // Go-back-N has an RTL too; IRN has none.
  EXPECT_EQ(load_scenario(write_temp("gbn.yaml", sub(kFabric, "{name: t1h1, nic: {transport: gbn}}",
                                                     "{name: t1h1, nic: {transport: gbn, "
                                                     "transport_impl: rtl}}")))
                .nic_of("t1h1")
                .transport_impl,
            "rtl");
  const std::string e = error_of(sub(kFabric, "{name: t1h1, nic: {transport: gbn}}",
                                     "{name: t1h1, nic: {transport: irn, transport_impl: rtl}}"));
  EXPECT_NE(e.find("host 't1h1': nic:"), std::string::npos) << e;
  EXPECT_NE(e.find("transport_impl rtl: transport irn has no such implementation (it has model)"),
            std::string::npos)
      << e;
  const std::string bad = error_of(
      sub(kFabric, "nic: {transport: mprdma}", "nic: {transport: mprdma, transport_impl: fpga}"));
  EXPECT_NE(bad.find("'fpga' is not allowed; expected one of 'model', 'rtl', 'lockstep'"),
            std::string::npos)
      << bad;
}

// include: files merged beneath the including one: mappings key by key,
// scalars and lists replaced, an empty section changing nothing; relative
// to the including file, nested, and a cycle or a missing file is an error
// naming it.
TEST(Scenario, IncludeMergesASharedDefinitionBeneathTheFile) {
  const std::string dir = test::temp_path("_include");
  std::filesystem::create_directories(dir + "/beds");
  std::ofstream(dir + "/beds/base.yaml") << "end_time: 5ms\n"
                                            "nic: {mtu: 2048, transport: mprdma}\n";
  std::ofstream(dir + "/beds/bed.yaml")
      << "include: base.yaml\n"
         "name: bed\n"
         "seed: 7\n"
         "nic: {mprdma: {initial_window: 60, rto: 320us}}\n"
         "fabric: {topology: mp_rdma_testbed, leaves: 2, spines: 4, hosts_per_leaf: 2,\n"
         "         link: {delay: 1us}, switch: {ecn: {enabled: true, kmin: 20KB}}}\n";
  std::ofstream(dir + "/row.yaml")
      << "include: beds/bed.yaml\n"
         "name: row\n"
         "nic: {mprdma: {rto: 100us}}\n"
         "fabric:\n"
         "  uplink_rate: 10Gbps\n"
         "  switch: {ecn: {kmax: 40KB}}\n"
         "jobs:\n"
         "  - {name: w, app: write_bw, client: t0h0, server: t1h0, sizes: [4KiB]}\n";
  const ScenarioConfig cfg = load_scenario(dir + "/row.yaml");
  EXPECT_EQ(cfg.name, "row");                                    // the row's own scalar
  EXPECT_EQ(cfg.seed, 7);                                        // from the include
  EXPECT_EQ(cfg.end_time.ps, core::Duration::from_us(5000).ps);  // nested include
  EXPECT_EQ(cfg.nic.mtu.n, 2048u);
  EXPECT_EQ(cfg.nic.transport, "mprdma");
  EXPECT_EQ(cfg.include, (std::vector<std::string>{"beds/bed.yaml"}));
  EXPECT_EQ(cfg.fabric.link.delay.ps, core::Duration::from_us(1).ps);
  EXPECT_DOUBLE_EQ(cfg.fabric.uplink_rate.bps, 10e9);
  EXPECT_EQ(cfg.fabric.hosts_per_leaf, 2);
  // Maps merge key by key, however deep.
  EXPECT_TRUE(cfg.fabric.sw.ecn.enabled);
  EXPECT_EQ(cfg.fabric.sw.ecn.kmin.n, 20000u);
  EXPECT_EQ(cfg.fabric.sw.ecn.kmax.n, 40000u);

  // An empty section (comments only) changes nothing.
  std::ofstream(dir + "/empty.yaml") << "include: beds/bed.yaml\n"
                                        "name: e\n"
                                        "fabric:\n"
                                        "  # the testbed as it is\n";
  const ScenarioConfig same = load_scenario(dir + "/empty.yaml");
  EXPECT_EQ(same.fabric.link.delay.ps, core::Duration::from_us(1).ps);
  EXPECT_EQ(same.fabric.hosts_per_leaf, 2);

  std::ofstream(dir + "/missing.yaml") << "include: beds/nope.yaml\nname: m\n";
  std::ofstream(dir + "/a.yaml") << "include: b.yaml\nname: a\n";
  std::ofstream(dir + "/b.yaml") << "include: a.yaml\nname: b\n";
  std::ofstream(dir + "/bad.yaml") << "include: {file: x}\nname: b\n";
  std::ofstream(dir + "/unknown.yaml") << "include: beds/typo.yaml\nname: u\n";
  std::ofstream(dir + "/beds/typo.yaml") << "nic: {mtuu: 1024}\n";
  auto error = [&](const std::string& f) {
    try {
      load_scenario(dir + "/" + f);
    } catch (const core::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("missing.yaml").find("include: no file 'beds/nope.yaml'"), std::string::npos);
  EXPECT_NE(error("a.yaml").find("includes itself"), std::string::npos);
  EXPECT_NE(error("bad.yaml").find("include: expected a file name"), std::string::npos);
  // A bad key in an included file is reported like one in the file.
  EXPECT_NE(error("unknown.yaml").find("mtuu"), std::string::npos);
}

TEST(Scenario, EveryShippedScenarioValidates) {
  int seen = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(source_dir() + "/scenarios")) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    EXPECT_NO_THROW(load_scenario(entry.path().string())) << entry.path();
  }
  EXPECT_GE(seen, 2);
}

}  // namespace
}  // namespace mprdma::platform
