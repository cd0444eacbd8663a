// What the sources of PerfTest (perftest*.cc, one per kind of test) share:
// one side of a connection and the helpers every test uses. Not for users
// of PerfTest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <systemc>

#include "vp/host/perftest.h"
#include "vp/host/verbs.h"

namespace mprdma::host {

// One side of the connection: a process with its context and resources.
struct PerfTest::Side {
  Side(ModeledHost& h) : host(h), as(h.new_address_space()) {}
  ModeledHost& host;
  AddressSpace& as;
  std::unique_ptr<VerbsContext> ctx;
  uint32_t pd = 0;
  uint64_t buf = 0;  // [send half | receive half]; write_flows: one half, both roles
  uint64_t half = 0;
  MemoryRegion mr;
  CompletionQueue* scq = nullptr;
  CompletionQueue* rcq = nullptr;
  QueuePair* qp = nullptr;
  SharedReceiveQueue* srq = nullptr;  // use_srq: the server's RECVs
  mpr_wqe_ud peer{};                  // transport ud: the other side's address
  // rpc_bw, request uc_write: the UC QP requests go by (client) or arrive
  // on (server), and on the client the server's request ring (its first
  // slot's address and the rkey).
  QueuePair* uc_qp = nullptr;
  uint64_t req_va = 0;
  uint32_t req_rkey = 0;
};

namespace perftest_detail {

// A CQE status as text.
const char* status_name(uint32_t s);
// A failed completion as a run's error: its status and the NIC's syndrome.
std::string completion_error(const mpr_wc& wc);
// The MPR_MTU_* code of a path MTU in bytes (4096 for anything larger).
uint8_t mtu_code(uint64_t mtu);
// Simulated seconds since t0.
double seconds_since(const sc_core::sc_time& t0);

}  // namespace perftest_detail
}  // namespace mprdma::host
