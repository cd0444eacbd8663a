// The MP-RDMA senders of one NIC on the Verilated engine
// (nic.transport_impl rtl), or on the engine in lockstep with the golden
// model (lockstep): an MpTxImpl for MpRdmaEngine.
//
// Rows of the sender's context RAM go to QPs as they open (the lowest free
// row first) and come back when they close. Each sender event is one
// operation, issued at the NIC cycle of the call and clocked until the
// engine is done (3 cycles, plus one per packet it clocks out); idle
// cycles are skipped.
//
// Timing (TxTiming): an ACK's or RNR NACK's operation is issued when the
// requester's ACK stage starts (latency.ack_process before the call), or
// when the engine finishes the operation before, whichever is later; set_max
// and timer operations at the call. Charged, each packet leaves at the NIC
// cycle the engine clocked it out (MpTx::at), if that is later than the
// call: the RTL's cycles beyond the ACK stage, and the wait for a busy
// engine, delay it. Not charged, packets leave at the call, as the golden
// model's do, and every result is the model's.
//
// The NIC's path LFSR lives in the engine (one per NIC, as in the golden
// model, seeded from the same stream); the engine's row is copied into the
// QP's MpSender after every operation (MpSender::load), so the rest of the
// NIC reads it as before.
//
// Counters under nic.<host>.transport.rtl.: tx_operations, tx_cycles.
// Waveforms (env.rtl_traces) go to <out_dir>/rtl-tx-<nic>.fst. Lockstep
// stops the run at the first divergence with std::runtime_error carrying
// the report, and an FST replay in <out_dir>/lockstep-tx-<nic>.fst.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vp/core/sim_env.h"
#include "vp/nic/rtl/mp_rdma_rx_nic.h"
#include "vp/nic/transport/mp_rdma/mp_rdma_tx_impl.h"

namespace mprdma::nic::rtl {

struct TxTiming {
  bool charged = true;            // nic.rtl_timing charged
  uint64_t ack_stage_cycles = 4;  // latency.ack_process: the stage an ACK's operation overlaps
};

// std::invalid_argument when the engine cannot hold `params` (its timers).
std::unique_ptr<MpTxImpl> make_tx_impl(RxImplMode mode, const MpSenderParams& params, uint32_t seed,
                                       const std::string& nic, core::SimEnv& env,
                                       const TxTiming& timing, uint64_t period_ps = 4000);

class MpTxRtl;
// The Verilated engine behind an implementation make_tx_impl() made (null
// for any other), for fault injection in tests.
MpTxRtl* tx_impl_engine(MpTxImpl& impl);

}  // namespace mprdma::nic::rtl
