// Go-back-N of one NIC on the Verilated engine (nic.transport_impl rtl), or
// on the engine in lockstep with GbnEngine (lockstep): a TransportEngine
// whose every call is one operation of gbn_qp_engine.sv, issued at the NIC
// cycle of the call and read out a cycle later (idle cycles skipped).
//
// A QP gets the lowest free context row when it opens (RTR) and gives it
// back when it closes; a QP that opens when every row is held fails with
// EngineContextExhausted (the NIC reports QP_FATAL). The decisions are part
// of the requester's and responder's per-packet stages, which the NIC
// charges whatever the implementation: timing and results stay the golden
// model's. Counters nic.<host>.transport.rtl.operations and .cycles;
// waveforms (env.rtl_traces) in <out_dir>/rtl-<nic>.fst; a lockstep
// divergence stops the run with std::runtime_error naming NIC, QP and row.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vp/core/sim_env.h"
#include "vp/nic/rtl/mp_rdma_rx_nic.h"
#include "vp/nic/transport/transport_engine.h"

namespace mprdma::nic::rtl {

std::unique_ptr<TransportEngine> make_gbn_engine(RxImplMode mode, uint64_t go_back_delay_cycles,
                                                 const std::string& nic, core::SimEnv& env,
                                                 uint64_t period_ps = 4000);

class GbnQpRtl;
// The Verilated engine behind an engine make_gbn_engine() made (null for
// any other), for fault injection in tests.
GbnQpRtl* gbn_engine_rtl(TransportEngine& engine);

}  // namespace mprdma::nic::rtl
