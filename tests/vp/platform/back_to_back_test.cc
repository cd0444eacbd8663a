// The main demo scenario, scenarios/modeled/back-to-back.yaml, end to end:
// WRITE goodput against the RoCEv2 limit, every job's data check,
// determinism, and an independent decoder (tshark) on its pcap.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/sim_test.h"
#include "vp/core/results.h"
#include "vp/net/roce_codec.h"
#include "vp/platform/platform.h"
#include "vp/platform/report.h"
#include "vp/platform/scenario.h"

namespace mprdma::platform {
namespace {

std::string demo_path() {
  const char* s = std::getenv("MPRDMA_SOURCE_DIR");
  return std::string(s ? s : ".") + "/scenarios/modeled/back-to-back.yaml";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BackToBack : public test::SimTest {
 protected:
  // Runs `cfg` in a fresh kernel, writing results (and pcaps) to `dir`.
  nlohmann::json run(const ScenarioConfig& cfg, const std::string& dir) {
    core::reset_kernel();
    env = std::make_unique<core::SimEnv>(static_cast<uint64_t>(cfg.seed));
    env->out_dir = dir;
    std::filesystem::create_directories(dir);
    Platform p(cfg, *env);
    EXPECT_TRUE(p.run()) << "jobs did not finish before end_time";
    EXPECT_TRUE(p.all_ok());
    for (const JobOutcome& o : p.outcomes())
      for (const host::SizeResult& r : o.results) {
        EXPECT_TRUE(r.error.empty()) << o.name << " " << r.bytes << ": " << r.error;
        EXPECT_TRUE(r.data_ok) << o.name << " " << r.bytes << ": data check failed";
      }
    nlohmann::json doc = results_document(p, *env, demo_path());
    core::write_results(dir, doc, env->stats);
    return doc;
  }
};

// Goodput RoCEv2 leaves of a 40 Gb/s wire for one WRITE message of `size`
// bytes at path MTU `mtu`, from the header sizes of the codec.
double write_goodput_limit_gbps(double line_gbps, uint64_t size, uint64_t mtu) {
  using net::Opcode;
  const uint64_t packets = (size + mtu - 1) / mtu;
  uint64_t wire = 0;
  for (uint64_t k = 0; k < packets; ++k) {
    const uint64_t payload = std::min(mtu, size - k * mtu);
    const Opcode op = packets == 1       ? Opcode::RDMA_WRITE_ONLY
                      : k == 0           ? Opcode::RDMA_WRITE_FIRST
                      : k + 1 == packets ? Opcode::RDMA_WRITE_LAST
                                         : Opcode::RDMA_WRITE_MIDDLE;
    const uint64_t frame =
        std::max<uint64_t>(net::roce_frame_bytes(op, payload), net::kEthMinFrameBytes);
    wire += frame + net::kEthFcsBytes + net::kEthPreambleBytes + net::kEthIfgBytes;
  }
  return line_gbps * double(size) / double(wire);
}

TEST_F(BackToBack, WriteGoodputIsWithinFivePercentOfTheRoceLimit) {
  const ScenarioConfig cfg = load_scenario(demo_path());
  const nlohmann::json doc =
      run(cfg, testing::TempDir() + std::to_string(getpid()) + "_b2b_metric");
  ASSERT_TRUE(doc["metrics"].contains("write_bw_gbps_65536"));
  const double measured = doc["metrics"]["write_bw_gbps_65536"].get<double>();
  const double limit = write_goodput_limit_gbps(40.0, 65536, cfg.jobs.at(0).mtu.n);
  EXPECT_NEAR(limit, 37.03, 0.05);  // sanity of the arithmetic itself
  EXPECT_LE(measured, limit * 1.0001) << "faster than the wire allows";
  EXPECT_GE(measured, limit * 0.95) << "measured " << measured << " Gb/s, limit " << limit;
  // The results document carries what the schema promises.
  for (const char* key : {"schema", "scenario", "seed", "sim_time_s", "metrics", "flows", "nics",
                          "links", "pcie", "config"})
    EXPECT_TRUE(doc.contains(key)) << key;
  EXPECT_TRUE(doc["nics"].contains("h0"));
  EXPECT_TRUE(doc["links"].contains("wire"));
  EXPECT_TRUE(doc["missing_metrics"].empty()) << doc["missing_metrics"];
  // Small messages are bound by the NIC and PCIe, not the wire: rate below
  // the 64-byte wire rate but far above zero.
  const double mpps = doc["metrics"]["write_msg_rate_mpps_64"].get<double>();
  EXPECT_GT(mpps, 1.0);
  EXPECT_LT(mpps, 40e9 / 8 / (128 + 24) / 1e6);
}

TEST_F(BackToBack, SameSeedGivesByteIdenticalResults) {
  ScenarioConfig cfg = load_scenario(demo_path());
  // Fewer iterations keep the test short; every job and size still runs.
  for (host::JobConfig& j : cfg.jobs) j.iterations = std::min<int64_t>(j.iterations, 40);
  const std::string a = testing::TempDir() + std::to_string(getpid()) + "_b2b_det_a",
                    b = testing::TempDir() + std::to_string(getpid()) + "_b2b_det_b";
  run(cfg, a);
  run(cfg, b);
  EXPECT_EQ(slurp(a + "/results.json"), slurp(b + "/results.json"));
  EXPECT_EQ(slurp(a + "/wire.pcap"), slurp(b + "/wire.pcap"));
  // A different seed changes the run (initial PSNs and data patterns).
  cfg.seed = 2;
  const std::string c = testing::TempDir() + std::to_string(getpid()) + "_b2b_det_c";
  run(cfg, c);
  EXPECT_NE(slurp(a + "/wire.pcap"), slurp(c + "/wire.pcap"));
}

struct Frame {
  unsigned opcode, qp, psn;
};

// Reads the BTH of every frame straight from the pcap bytes: an independent
// account of what the NICs sent.
std::vector<Frame> frames_of(const std::string& pcap) {
  const std::string bytes = slurp(pcap);
  std::vector<Frame> out;
  size_t off = 24;  // global header
  while (off + 16 <= bytes.size()) {
    uint32_t incl;
    std::memcpy(&incl, bytes.data() + off + 8, 4);
    const unsigned char* f = reinterpret_cast<const unsigned char*>(bytes.data() + off + 16);
    const size_t bth = 14 + 20 + 8;
    out.push_back({f[bth], (unsigned(f[bth + 5]) << 16) | (unsigned(f[bth + 6]) << 8) | f[bth + 7],
                   (unsigned(f[bth + 9]) << 16) | (unsigned(f[bth + 10]) << 8) | f[bth + 11]});
    off += 16 + incl;
  }
  return out;
}

std::string run_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  *status = pclose(p);
  return out;
}

TEST_F(BackToBack, TsharkDecodesEveryOpcodeAndPsnTheNicsSent) {
  ScenarioConfig cfg = load_scenario(demo_path());
  for (host::JobConfig& j : cfg.jobs) j.iterations = std::min<int64_t>(j.iterations, 20);
  const std::string dir = testing::TempDir() + std::to_string(getpid()) + "_b2b_tshark";
  const nlohmann::json doc = run(cfg, dir);
  const std::vector<Frame> sent = frames_of(dir + "/wire.pcap");
  const uint64_t tx = doc["nics"]["h0"]["mac.tx_packets"].get<uint64_t>() +
                      doc["nics"]["h1"]["mac.tx_packets"].get<uint64_t>();
  ASSERT_EQ(sent.size(), tx);

  int status = -1;
  // rpcordma would try to read SEND payloads as RPC-over-RDMA; they are not.
  const std::string base = "tshark -n --disable-protocol rpcordma -r " + dir + "/wire.pcap";
  const std::string err_file = dir + "/tshark.err";
  const std::string fields = run_command(
      base +
          " -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn"
          " 2>" +
          err_file,
      &status);
  ASSERT_EQ(status, 0) << "tshark failed (is the tshark package installed?):\n" << slurp(err_file);
  std::istringstream lines(fields);
  std::string line;
  size_t i = 0;
  std::map<unsigned, int> opcodes;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, sent.size());
    unsigned op = 0, qp = 0, psn = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%u\t%x\t%u", &op, &qp, &psn), 3) << line;
    EXPECT_EQ(op, sent[i].opcode) << "frame " << i + 1;
    EXPECT_EQ(qp, sent[i].qp) << "frame " << i + 1;
    EXPECT_EQ(psn, sent[i].psn) << "frame " << i + 1;
    ++opcodes[op];
    ++i;
  }
  EXPECT_EQ(i, sent.size());
  // The demo exercises WRITE, READ, SEND, atomics and their responses.
  for (net::Opcode op :
       {net::Opcode::RDMA_WRITE_FIRST, net::Opcode::RDMA_WRITE_MIDDLE, net::Opcode::RDMA_WRITE_LAST,
        net::Opcode::RDMA_WRITE_ONLY, net::Opcode::RDMA_READ_REQUEST,
        net::Opcode::RDMA_READ_RESPONSE_FIRST, net::Opcode::RDMA_READ_RESPONSE_LAST,
        net::Opcode::RDMA_READ_RESPONSE_ONLY, net::Opcode::SEND_ONLY, net::Opcode::SEND_FIRST,
        net::Opcode::SEND_LAST, net::Opcode::ACKNOWLEDGE, net::Opcode::FETCH_ADD,
        net::Opcode::COMPARE_SWAP, net::Opcode::ATOMIC_ACKNOWLEDGE})
    EXPECT_GT(opcodes[static_cast<unsigned>(op)], 0) << net::to_string(op);

  const std::string bad = run_command(
      base + " -Y '_ws.malformed || _ws.expert.severity >= error' 2>" + err_file, &status);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(bad.empty()) << "tshark flagged frames:\n" << bad.substr(0, 2000);
}

}  // namespace
}  // namespace mprdma::platform
