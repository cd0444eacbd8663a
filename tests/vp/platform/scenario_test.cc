// The scenario layer: validation errors name file, line and key; every
// scenario in scenarios/ validates.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "support/files.h"

#include "vp/core/config.h"
#include "vp/platform/scenario.h"

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
  const ScenarioConfig cfg =
      load_scenario(path, {"seed=7", "jobs.0.iterations=12", "nic.mtu=4096",
                           "links.0.delay=1us", "jobs.0.sizes=[4096, 128]"});
  EXPECT_EQ(cfg.seed, 7);
  EXPECT_EQ(cfg.jobs.at(0).iterations, 12);
  EXPECT_EQ(cfg.nic.mtu.n, 4096u);
  EXPECT_EQ(cfg.links.at(0).link.delay.ps, 1000000u);
  ASSERT_EQ(cfg.jobs.at(0).sizes.size(), 2u);
  EXPECT_EQ(cfg.jobs.at(0).sizes[1].n, 128u);
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
