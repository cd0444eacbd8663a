// BAR0 ordering: a read does not pass earlier posted writes (PCIe), but it
// does not see writes that arrive after it.
#include <gtest/gtest.h>
#include <mprdma/regs_util.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "support/sim_test.h"
#include "vp/nic/nic.h"

namespace mprdma::nic {
namespace {

// The CPU's MMIO port, and a memory that ignores the NIC's DMA (unused here).
struct Cpu : sc_core::sc_module {
  tlm_utils::simple_initiator_socket<Cpu> socket{"socket"};
  tlm_utils::simple_target_socket<Cpu> memory{"memory"};
  explicit Cpu(sc_core::sc_module_name n) : sc_core::sc_module(n) {
    memory.register_b_transport(this, &Cpu::ignore);
  }
  void ignore(tlm::tlm_generic_payload& gp, sc_core::sc_time&) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
  }
};

class HostInterfaceTest : public test::SimTest {
 protected:
  std::unique_ptr<Cpu> cpu;
  void access(Nic& nic, tlm::tlm_command cmd, uint64_t off, uint32_t& v, sc_core::sc_time delay) {
    if (!cpu) {
      cpu = std::make_unique<Cpu>("cpu");
      cpu->socket.bind(nic.mmio_socket());
      nic.dma_socket().bind(cpu->memory);
    }
    tlm::tlm_generic_payload gp;
    gp.set_command(cmd);
    gp.set_address(nic.config().bar0_base + off);
    gp.set_data_ptr(reinterpret_cast<unsigned char*>(&v));
    gp.set_data_length(4);
    cpu->socket->b_transport(gp, delay);
    ASSERT_EQ(gp.get_response_status(), tlm::TLM_OK_RESPONSE);
  }
};

TEST_F(HostInterfaceTest, ReadSeesEarlierWritesOnlyOnceTheyArrived) {
  NicConfig cfg;
  Nic nic("nic", cfg, *env);
  uint32_t v = 0x12345000;
  access(nic, tlm::TLM_WRITE_COMMAND, MPR_BAR0_OFF(AQ_BASE_LO), v,
         sc_core::sc_time(100, sc_core::SC_NS));
  uint32_t early = 0xdead, late = 0xdead;
  // A read arriving before the write still sees the old value ...
  access(nic, tlm::TLM_READ_COMMAND, MPR_BAR0_OFF(AQ_BASE_LO), early,
         sc_core::sc_time(50, sc_core::SC_NS));
  EXPECT_EQ(early, 0u);
  // ... one arriving after it sees the new value, before simulated time
  // has reached the write's arrival.
  access(nic, tlm::TLM_READ_COMMAND, MPR_BAR0_OFF(AQ_BASE_LO), late,
         sc_core::sc_time(150, sc_core::SC_NS));
  EXPECT_EQ(late, 0x12345000u);
  // The write is applied once, in time.
  sc_core::sc_start(sc_core::sc_time(1, sc_core::SC_US));
  uint32_t after = 0;
  access(nic, tlm::TLM_READ_COMMAND, MPR_BAR0_OFF(AQ_BASE_LO), after, sc_core::SC_ZERO_TIME);
  EXPECT_EQ(after, 0x12345000u);
  cpu.reset();
}

// CAPS names the engines the NIC's QPs may choose: go-back-N always, the
// NIC's transport, nic.qp_transports, and DCQCN when the NIC runs it.
TEST_F(HostInterfaceTest, CapsNamesTheOfferedEngines) {
  const uint32_t engines = MPRDMA_BAR0__CAPS__GBN_bm | MPRDMA_BAR0__CAPS__MP_RDMA_bm |
                           MPRDMA_BAR0__CAPS__DCQCN_bm | MPRDMA_BAR0__CAPS__IRN_bm;
  NicConfig plain;
  NicConfig mixed;
  mixed.transport = "irn";
  mixed.congestion_control = "dcqcn";
  mixed.qp_transports = {"mprdma"};
  Nic a("a", plain, *env);
  Nic b("b", mixed, *env);
  uint32_t caps = 0;
  access(a, tlm::TLM_READ_COMMAND, MPR_BAR0_OFF(CAPS), caps, sc_core::SC_ZERO_TIME);
  EXPECT_TRUE(MPR_GET(CAPS, RC, caps));
  EXPECT_EQ(caps & engines, MPRDMA_BAR0__CAPS__GBN_bm);
  cpu.reset();
  access(b, tlm::TLM_READ_COMMAND, MPR_BAR0_OFF(CAPS), caps, sc_core::SC_ZERO_TIME);
  EXPECT_EQ(caps & engines, engines);
  cpu.reset();
}

}  // namespace
}  // namespace mprdma::nic
