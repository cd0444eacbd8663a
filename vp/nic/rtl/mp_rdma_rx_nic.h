// The MP-RDMA receivers of one NIC on the Verilated engine
// (nic.transport_impl rtl), or on the engine in lockstep with the golden
// models (lockstep): an MpRxImpl for MpRdmaEngine.
//
// Rows of the engine's context RAM go to connections as they open (the
// lowest free row first, so runs repeat) and come back when they close. The
// engine is clocked only while an operation is in it: each decision is one
// operation issued at the NIC cycle of the call and read out one cycle
// later; the cycles in between are skipped, not clocked. The decision is
// part of the responder's per-packet stage (latency.rx_packet), which the
// NIC charges around the call whatever the implementation: the RTL's
// latency (one cycle) fits in it, and so the timing, and every result,
// stays that of the golden model.
//
// Waveforms: when env.rtl_traces names the NIC, the engine writes every
// cycle it is clocked inside the window into <out_dir>/rtl-<nic>.fst, time
// in the NIC's clock (`period_ps`), idle stretches skipped.
//
// Counters under nic.<host>.transport.rtl.: operations issued and cycles
// clocked. Lockstep stops the run at the first divergence with
// std::runtime_error carrying the report (NIC, QP, context row, operation,
// both outcomes, both contexts, the row's last operations) and, when the
// run has an output directory, an FST of the engine replaying the last
// operations up to the divergent one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vp/core/sim_env.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_rx_impl.h"

namespace mprdma::nic::rtl {

enum class RxImplMode { rtl, lockstep };

// std::invalid_argument when the RTL cannot run this receiver: a bitmap of
// another length than the RTL's L (`transport` names the transport, for the
// message).
std::unique_ptr<MpRxImpl> make_rx_impl(RxImplMode mode, const std::string& transport,
                                       uint32_t bitmap_slots, MpOverflowNack overflow_nack,
                                       const std::string& nic, core::SimEnv& env,
                                       uint64_t period_ps = 4000);

class MpRxRtl;
// The Verilated engine behind an implementation make_rx_impl() made (null
// for any other), for fault injection in tests.
MpRxRtl* rx_impl_engine(MpRxImpl& impl);

}  // namespace mprdma::nic::rtl
