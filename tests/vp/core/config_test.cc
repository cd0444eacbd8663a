#include "vp/core/config.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/files.h"

namespace mprdma::core {
namespace {

struct NicCfg {
  Bytes mtu{4096};
  Bandwidth rate = Bandwidth::gbps(100);
  Duration latency = Duration::from_ns(500);
  bool ecn = true;
  void bind(Binder& b) {
    b.field("mtu", mtu, "Maximum transfer unit", 256, 9216);
    b.field("rate", rate, "Line rate");
    b.field("latency", latency, "Pipeline latency", Duration::from_ns(1), Duration::from_us(100));
    b.field("ecn", ecn, "Mark congestion | with ECN");
  }
};

struct HostCfg {
  std::string name = "h";
  uint64_t cores = 4;
  NicCfg nic;
  void bind(Binder& b) {
    b.field("name", name, "Host name");
    b.field("cores", cores, "CPU cores", 1, 64, "cores");
    b.section("nic", nic, "The host's NIC");
  }
};

struct Scenario {
  int64_t offset = -5;
  double load = 0.5;
  std::string mode = "rc";
  Frequency clock = Frequency::mhz(250);
  Duration warmup{0};
  std::vector<Bytes> sizes{Bytes{4096}, Bytes{65536}};
  std::map<std::string, std::string> metrics{{"goodput", "flow.a.goodput"}};
  uint64_t lo = 1, hi = 10;
  NicCfg default_nic;
  std::vector<HostCfg> hosts;
  void bind(Binder& b) {
    b.field("offset", offset, "Signed offset", -100, 100, "ns");
    b.field("load", load, "Offered load", 0.0, 1.0);
    b.choice("mode", mode, {"rc", "uc", "ud"}, "Transport service");
    b.field("clock", clock, "NIC clock");
    b.field("warmup", warmup, "Warm-up time");
    b.field("sizes", sizes, "Message sizes", 1, 1 << 20);
    b.field("metrics", metrics, "Metric name to result field");
    b.field("lo", lo, "Lower bound", 0, 1000);
    b.field("hi", hi, "Upper bound", 0, 1000);
    b.section("default_nic", default_nic, "NIC used when a host names none");
    b.list("hosts", hosts, "The hosts");
    if (b.reading() && lo > hi) b.error("lo (" + std::to_string(lo) + ") must not exceed hi");
  }
};

Scenario bind_ok(const std::string& yaml) {
  Scenario s;
  YamlBinder b(YAML::Load(yaml), "t.yaml");
  b.bind_root(s);
  return s;
}

// The errors the document produces (empty when it binds cleanly).
std::vector<std::string> errors_of(const std::string& yaml) {
  Scenario s;
  try {
    YamlBinder b(YAML::Load(yaml), "t.yaml");
    b.bind_root(s);
  } catch (const ConfigError& e) {
    return e.errors();
  }
  return {};
}

// The single error the document produces.
std::string error_of(const std::string& yaml) {
  std::vector<std::string> errors = errors_of(yaml);
  EXPECT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  return errors.empty() ? "" : errors[0];
}

TEST(ConfigYaml, EmptyDocumentKeepsDefaults) {
  Scenario s = bind_ok("");
  EXPECT_EQ(s.offset, -5);
  EXPECT_EQ(s.mode, "rc");
  EXPECT_EQ(s.default_nic.mtu.n, 4096u);
  EXPECT_TRUE(s.hosts.empty());
  ASSERT_EQ(s.sizes.size(), 2u);
}

TEST(ConfigYaml, AbsentKeysKeepDefaultsPresentOnesAreParsed) {
  Scenario s = bind_ok(
      "offset: -7\n"
      "load: 0.25\n"
      "mode: ud\n"
      "clock: 1GHz\n"
      "warmup: 2us\n"
      "sizes: [1KiB, 2048, 1MiB]\n"
      "metrics: {x: flow.j.x}\n"
      "default_nic:\n"
      "  mtu: 9000\n"
      "  ecn: false\n");
  EXPECT_EQ(s.offset, -7);
  EXPECT_DOUBLE_EQ(s.load, 0.25);
  EXPECT_EQ(s.mode, "ud");
  EXPECT_DOUBLE_EQ(s.clock.hz, 1e9);
  EXPECT_EQ(s.warmup.ps, 2000000u);
  ASSERT_EQ(s.sizes.size(), 3u);
  EXPECT_EQ(s.sizes[0].n, 1024u);
  EXPECT_EQ(s.sizes[1].n, 2048u);
  EXPECT_EQ(s.sizes[2].n, 1048576u);
  EXPECT_EQ(s.metrics, (std::map<std::string, std::string>{{"x", "flow.j.x"}}));
  EXPECT_EQ(s.default_nic.mtu.n, 9000u);
  EXPECT_FALSE(s.default_nic.ecn);
  // Untouched fields of a present section keep their defaults.
  EXPECT_DOUBLE_EQ(s.default_nic.rate.bps, 100e9);
  EXPECT_EQ(s.default_nic.latency.ps, 500000u);
  EXPECT_EQ(s.lo, 1u);
}

TEST(ConfigYaml, ListOfStructs) {
  Scenario s = bind_ok(
      "hosts:\n"
      "  - name: a\n"
      "  - name: b\n"
      "    cores: 8\n"
      "    nic: {mtu: 1KiB, rate: 25Gbps, latency: 1.5us}\n");
  ASSERT_EQ(s.hosts.size(), 2u);
  EXPECT_EQ(s.hosts[0].name, "a");
  EXPECT_EQ(s.hosts[0].cores, 4u);
  EXPECT_EQ(s.hosts[0].nic.mtu.n, 4096u);
  EXPECT_EQ(s.hosts[1].name, "b");
  EXPECT_EQ(s.hosts[1].cores, 8u);
  EXPECT_EQ(s.hosts[1].nic.mtu.n, 1024u);
  EXPECT_DOUBLE_EQ(s.hosts[1].nic.rate.bps, 25e9);
  EXPECT_EQ(s.hosts[1].nic.latency.ps, 1500000u);
}

TEST(ConfigYaml, ZeroDurationMayBeBareButOthersNeedAUnit) {
  EXPECT_EQ(bind_ok("warmup: 0\n").warmup.ps, 0u);
  EXPECT_EQ(error_of("offset: 1\nwarmup: 5\n"),
            "t.yaml:2:9: warmup: '5' needs a time unit: ps, ns, us, ms or s (e.g. 1.5us)");
}

TEST(ConfigYaml, BoolMustBeTrueOrFalse) {
  EXPECT_EQ(error_of("default_nic:\n  ecn: yes\n"),
            "t.yaml:2:8: default_nic.ecn: expected true or false, got 'yes'");
}

TEST(ConfigYaml, IntegerErrors) {
  EXPECT_EQ(error_of("offset: 1.5\n"), "t.yaml:1:9: offset: expected an integer (ns), got '1.5'");
  EXPECT_EQ(error_of("offset: 101\n"),
            "t.yaml:1:9: offset: 101 ns is out of range: allowed range is -100 to 100 ns");
  EXPECT_EQ(error_of("lo: -1\n"), "t.yaml:1:5: lo: expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of("hosts:\n  - cores: 0\n"),
            "t.yaml:2:12: hosts[0].cores: 0 cores is out of range: allowed range is 1 to 64 "
            "cores");
}

TEST(ConfigYaml, NumberErrors) {
  EXPECT_EQ(error_of("load: lots\n"), "t.yaml:1:7: load: expected a number, got 'lots'");
  EXPECT_EQ(error_of("load: 1.5\n"),
            "t.yaml:1:7: load: 1.5 is out of range: allowed range is 0 to 1");
}

TEST(ConfigYaml, UnitErrorsAndRanges) {
  EXPECT_EQ(error_of("clock: 250\n"),
            "t.yaml:1:8: clock: '250' needs a frequency unit: Hz, kHz, MHz or GHz (e.g. 250MHz)");
  EXPECT_EQ(error_of("default_nic:\n  rate: 40GB\n"),
            "t.yaml:2:9: default_nic.rate: '40GB' needs a rate unit: bps, Kbps, Mbps, Gbps or "
            "Tbps (e.g. 40Gbps)");
  EXPECT_EQ(error_of("default_nic:\n  mtu: 10KiB\n"),
            "t.yaml:2:8: default_nic.mtu: '10KiB' is out of range: allowed range is 256B to "
            "9KiB");
  EXPECT_EQ(error_of("default_nic:\n  latency: 1ms\n"),
            "t.yaml:2:12: default_nic.latency: '1ms' is out of range: allowed range is 1ns to "
            "100us");
  EXPECT_EQ(error_of("sizes: [1KiB, 2MiB]\n"),
            "t.yaml:1:15: sizes[1]: '2MiB' is out of range: allowed range is 1B to 1MiB");
}

TEST(ConfigYaml, ChoiceListsAllowedValues) {
  EXPECT_EQ(error_of("mode: rd\n"),
            "t.yaml:1:7: mode: 'rd' is not allowed; expected one of 'rc', 'uc', 'ud'; did you "
            "mean 'rc'?");
  EXPECT_EQ(error_of("mode: reliable\n"),
            "t.yaml:1:7: mode: 'reliable' is not allowed; expected one of 'rc', 'uc', 'ud'");
}

TEST(ConfigYaml, UnknownKeySuggestsNearestKnownKey) {
  EXPECT_EQ(error_of("hosts:\n  - name: a\n  - name: b\n    nic:\n      mtuu: 1500\n"),
            "t.yaml:5:7: hosts[1].nic.mtuu: unknown key 'mtuu' in hosts[1].nic (known keys: "
            "ecn, latency, mtu, rate); did you mean 'mtu'?");
  EXPECT_EQ(error_of("\nbogus: 1\n"),
            "t.yaml:2:1: bogus: unknown key 'bogus' at the top level (known keys: clock, "
            "default_nic, hi, hosts, lo, load, metrics, mode, offset, sizes, warmup)");
}

TEST(ConfigYaml, WrongKindsNameTheExpectedKind) {
  EXPECT_EQ(error_of("default_nic: 5\n"),
            "t.yaml:1:14: default_nic: expected a mapping (section 'default_nic'), got a scalar");
  EXPECT_EQ(error_of("hosts: {name: a}\n"),
            "t.yaml:1:8: hosts: expected a list of mappings, got a mapping");
  EXPECT_EQ(error_of("hosts:\n  - a\n"),
            "t.yaml:2:5: hosts[0]: each item must be a mapping, got a scalar");
  EXPECT_EQ(error_of("sizes: 4KiB\n"),
            "t.yaml:1:8: sizes: expected a list of sizes (e.g. [4KiB, 64KiB]), got a scalar");
  EXPECT_EQ(error_of("metrics: [a]\n"),
            "t.yaml:1:10: metrics: expected a mapping of names to strings, got a list");
  EXPECT_EQ(error_of("mode: [rc]\n"), "t.yaml:1:7: mode: expected a string, got a list");
  EXPECT_EQ(error_of("load:\n"), "t.yaml:1:1: load: expected a number, got nothing (null)");
  EXPECT_EQ(error_of("- a\n"), "t.yaml:1:1: the document must be a mapping of keys, got a list");
}

TEST(ConfigYaml, DuplicateKeysAreReported) {
  EXPECT_EQ(error_of("lo: 1\nhi: 2\nlo: 3\n"),
            "t.yaml:3:1: lo: duplicate key 'lo' (first given at line 1)");
}

TEST(ConfigYaml, CrossFieldErrorIsAttributedToTheStruct) {
  EXPECT_EQ(error_of("lo: 20\nhi: 10\n"), "t.yaml:1:1: lo (20) must not exceed hi");
}

TEST(ConfigYaml, AllErrorsAreCollectedInFileOrder) {
  std::vector<std::string> errors = errors_of(
      "hosts:\n"
      "  - cores: 100\n"
      "    nic: {ecn: maybe}\n"
      "mode: xx\n"
      "offset: abc\n");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].rfind("t.yaml:2:12: hosts[0].cores:", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("t.yaml:3:16: hosts[0].nic.ecn:", 0), 0u) << errors[1];
  EXPECT_EQ(errors[2].rfind("t.yaml:4:7: mode:", 0), 0u) << errors[2];
  EXPECT_EQ(errors[3].rfind("t.yaml:5:9: offset:", 0), 0u) << errors[3];
  // what() carries every message too.
  try {
    bind_ok("mode: xx\noffset: abc\n");
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("2 configuration errors"), std::string::npos);
    EXPECT_NE(what.find("t.yaml:1:7: mode:"), std::string::npos);
    EXPECT_NE(what.find("t.yaml:2:9: offset:"), std::string::npos);
  }
}

class ConfigFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    return test::write_temp(name, text);
  }
};

TEST_F(ConfigFile, LoadsAndBindsWithTheFileName) {
  std::string path = write("cfg_ok.yaml", "mode: uc\nhosts:\n  - cores: 65\n");
  Scenario s;
  YamlBinder b(load_yaml_file(path), path);
  try {
    b.bind_root(s);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].rfind(path + ":3:12: hosts[0].cores: 65 cores is out of range", 0), 0u)
        << e.errors()[0];
  }
  EXPECT_EQ(s.mode, "uc");
}

TEST_F(ConfigFile, SyntaxErrorNamesFileAndPosition) {
  std::string path = write("cfg_bad.yaml", "a: 1\nb: [1, 2\nc: 3\n");
  try {
    load_yaml_file(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.errors().size(), 1u);
    EXPECT_EQ(e.errors()[0].rfind(path + ":3:2: YAML syntax error: ", 0), 0u) << e.errors()[0];
  }
}

TEST_F(ConfigFile, MissingFileNamesThePath) {
  const std::string path = ::testing::TempDir() + "/no_such_dir/none.yaml";
  try {
    load_yaml_file(path);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": cannot open file", 0), 0u) << e.what();
  }
}

TEST(ConfigDoc, DocumentsEveryKeyWithCanonicalDefaults) {
  Scenario s;
  s.hosts.resize(3);  // documented once, via the prototype
  DocBinder d("Scenario reference");
  const std::string md = d.describe(s);
  EXPECT_EQ(md.rfind("# Scenario reference\n", 0), 0u);
  for (const char* key :
       {"offset", "load", "mode", "clock", "warmup", "sizes", "metrics", "lo", "hi", "default_nic",
        "hosts", "mtu", "rate", "latency", "ecn", "name", "cores", "nic"})
    EXPECT_NE(md.find(std::string("| `") + key + "` |"), std::string::npos) << key;
  for (const char* heading :
       {"## Top level", "## `default_nic`", "## `hosts[]`", "## `hosts[].nic`"})
    EXPECT_NE(md.find(std::string("\n") + heading + "\n"), std::string::npos) << heading;
  EXPECT_EQ(md.find("## `hosts[].nic`"), md.rfind("## `hosts[].nic`"));
  EXPECT_NE(md.find("| key | type | default | limits | description |"), std::string::npos);
  EXPECT_NE(md.find("| `mtu` | size | `4KiB` | 256B to 9KiB | Maximum transfer unit |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| `rate` | rate | `100Gbps` |"), std::string::npos);
  EXPECT_NE(md.find("| `latency` | duration | `500ns` | 1ns to 100us |"), std::string::npos);
  EXPECT_NE(md.find("| `cores` | integer (cores) | `4` | 1 to 64 |"), std::string::npos);
  EXPECT_NE(md.find("| `mode` | choice | `rc` | one of: rc, uc, ud |"), std::string::npos);
  EXPECT_NE(md.find("| `sizes` | list of sizes | `[4KiB, 64KiB]` |"), std::string::npos);
  EXPECT_NE(md.find("Mark congestion \\| with ECN"), std::string::npos);
  // Deterministic.
  Scenario s2;
  DocBinder d2("Scenario reference");
  EXPECT_EQ(d2.describe(s2), md);
}

TEST(ConfigJson, EffectiveValuesInCanonicalForm) {
  Scenario s = bind_ok(
      "warmup: 1.5us\n"
      "hosts:\n"
      "  - name: a\n"
      "    nic: {mtu: 2KiB}\n");
  JsonBinder j;
  nlohmann::json out = j.dump(s);
  EXPECT_EQ(out["offset"], -5);
  EXPECT_EQ(out["load"], 0.5);
  EXPECT_EQ(out["warmup"], "1.5us");
  EXPECT_EQ(out["clock"], "250MHz");
  EXPECT_EQ(out["sizes"], nlohmann::json::array({"4KiB", "64KiB"}));
  EXPECT_EQ(out["metrics"]["goodput"], "flow.a.goodput");
  EXPECT_EQ(out["default_nic"]["rate"], "100Gbps");
  EXPECT_EQ(out["default_nic"]["ecn"], true);
  ASSERT_TRUE(out["hosts"].is_array());
  ASSERT_EQ(out["hosts"].size(), 1u);
  EXPECT_EQ(out["hosts"][0]["name"], "a");
  EXPECT_EQ(out["hosts"][0]["nic"]["mtu"], "2KiB");
  EXPECT_EQ(out["hosts"][0]["cores"], 4);
}

TEST(ConfigJson, RoundTripsThroughYamlBinder) {
  Scenario s = bind_ok(
      "offset: 42\n"
      "load: 0.3\n"
      "mode: uc\n"
      "clock: 312.5MHz\n"
      "warmup: 7ns\n"
      "sizes: [100, 3KiB]\n"
      "metrics: {a: b, c: d}\n"
      "lo: 3\n"
      "hi: 900\n"
      "default_nic: {mtu: 1500, rate: 40Gbps, latency: 250ns, ecn: false}\n"
      "hosts:\n"
      "  - {name: x, cores: 2}\n"
      "  - {name: y, nic: {rate: 400Gbps}}\n");
  JsonBinder j1;
  const nlohmann::json first = j1.dump(s);
  // JSON is YAML, so the dump binds back.
  Scenario back;
  YamlBinder b(YAML::Load(first.dump()), "roundtrip.json");
  b.bind_root(back);
  JsonBinder j2;
  EXPECT_EQ(j2.dump(back), first);
  EXPECT_EQ(back.offset, 42);
  EXPECT_DOUBLE_EQ(back.load, 0.3);
  EXPECT_DOUBLE_EQ(back.clock.hz, 312.5e6);
  EXPECT_EQ(back.default_nic.mtu.n, 1500u);
  ASSERT_EQ(back.hosts.size(), 2u);
  EXPECT_DOUBLE_EQ(back.hosts[1].nic.rate.bps, 400e9);
}

}  // namespace
}  // namespace mprdma::core
