// Fuzzing of the admin queue: 2000 commands with random fields (known
// opcodes mostly, unknown ones now and then; handles drawn small so that
// they often name live objects, or at random; random mailbox bytes) go to
// the NIC through the modeled driver. The kernel-only set-up commands that
// move the NIC's memory or identity (MAP_ICM, SET_GID, DESTROY_EQ) are left
// out: the driver issues them once at start and a random one would, rightly,
// take the device away from it. Every command must complete within the
// driver's timeout with a status the interface defines, and afterwards a
// new QP pair must work byte-exactly on both NICs.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <map>

#include "support/log_capture.h"
#include "tests/vp/host/fuzz_support.h"

namespace mprdma::test {
namespace {

TEST_F(TwoHostsTest, RandomAdminCommandsAllCompleteAndTheNicStillWorks) {
  std::mt19937_64 rng = fuzz::Stream("admin");
  const int kCommands = fuzz::Rounds(2000);
  std::map<int, int> statuses;
  LogCapture log("");  // the firmware logs every refusal
  Run(
      [&] {
        static const uint16_t kOps[] = {
            MPR_CMD_NOP,       MPR_CMD_QUERY_DEVICE, MPR_CMD_QUERY_PORT, MPR_CMD_QUERY_COUNTERS,
            MPR_CMD_ALLOC_PD,  MPR_CMD_DEALLOC_PD,   MPR_CMD_REG_MR,     MPR_CMD_DEREG_MR,
            MPR_CMD_CREATE_EQ, MPR_CMD_CREATE_CQ,    MPR_CMD_DESTROY_CQ, MPR_CMD_CREATE_QP,
            MPR_CMD_MODIFY_QP, MPR_CMD_QUERY_QP,     MPR_CMD_DESTROY_QP};
        for (int i = 0; i < kCommands && !::testing::Test::HasFailure(); ++i) {
          mpr_cmd cmd{};
          cmd.hdr.opcode = rng() % 5 ? kOps[rng() % (sizeof kOps / sizeof kOps[0])]
                                     : static_cast<uint16_t>(rng() % 0x40);
          if (cmd.hdr.opcode == MPR_CMD_MAP_ICM || cmd.hdr.opcode == MPR_CMD_SET_GID ||
              cmd.hdr.opcode == MPR_CMD_DESTROY_EQ)
            cmd.hdr.opcode = MPR_CMD_NOP;
          for (uint8_t& b : cmd.u.raw) b = static_cast<uint8_t>(rng());
          if (rng() % 2) {
            // Small values where handles, states and sizes live.
            for (size_t w = 0; w < 6; ++w) {
              const uint32_t v = static_cast<uint32_t>(rng() % 12);
              std::memcpy(cmd.u.raw + 4 * w, &v, 4);
            }
          }
          std::vector<uint8_t> in(rng() % 3 ? 0 : rng() % 512);
          for (uint8_t& b : in) b = static_cast<uint8_t>(rng());
          std::vector<uint8_t> out(256);
          const int h = static_cast<int>(rng() % 2);
          SCOPED_TRACE("command " + std::to_string(i) + " opcode " +
                       std::to_string(cmd.hdr.opcode) + " on h" + std::to_string(h));
          host::CommandResult r;
          try {
            r = bench->h(h).driver().execute(cmd, in.empty() ? nullptr : in.data(), in.size(),
                                             out.data(), out.size());
          } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
            break;
          }
          EXPECT_LE(r.status, MPR_CMD_NO_ICM) << "a status the interface does not define";
          ++statuses[r.status];
        }
        // The NICs still serve new objects, and the objects' traffic.
        QpPair p = bench->make_pair();
        ExpectHealthy(p, 91);
      },
      Ms(60000));
  for (const auto& [status, n] : statuses)
    std::cout << "  status " << status << ": " << n << " commands\n";
  // Both successes and each kind of refusal happened.
  EXPECT_GE(statuses[MPR_CMD_OK], kCommands / 20);
  EXPECT_GE(statuses[MPR_CMD_BAD_OPCODE], 1);
  EXPECT_GE(statuses[MPR_CMD_BAD_HANDLE], 1);
  EXPECT_GE(statuses[MPR_CMD_BAD_PARAM], 1);
}

}  // namespace
}  // namespace mprdma::test
