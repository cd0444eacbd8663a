// DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015): the reaction point (RP, the sending QP's rate controller)
// and the notification point (NP, the receiver's CNP generator), as plain
// C++ timed in NIC cycles. No SystemC, no packets, no statistics: the NIC
// glue (requester, responder) calls these classes with the current cycle,
// and the same code is the golden model for an RTL implementation.
//
// The congestion point (CP, ECN marking by RED in the switches) is the
// fabric's (vp/fabric/switch.cc). Parameters, defaults and their sources are
// in vp/nic/transport/transport.md ("DCQCN").
#pragma once

#include <cstdint>
#include <unordered_map>

namespace mprdma::nic {

// Parameters of one reaction point, in NIC cycles, bytes and bits per
// second (see DcqcnConfig for the scenario keys and their units).
struct DcqcnRpParams {
  double cycles_per_second = 250e6;  // NIC clock: converts rates into cycles
  double line_rate_bps = 40e9;       // the port rate: a flow starts here
  double min_rate_bps = 10e6;        // Rc never goes below this
  double g = 1.0 / 256;              // alpha gain
  double initial_alpha = 1.0;        // alpha before the first CNP
  uint64_t alpha_interval = 13750;   // K: alpha decays once per K without CNP (cycles)
  uint64_t rate_timer = 13750;       // T: one rate-increase event per T (cycles)
  uint64_t byte_counter = 10000000;  // B: one rate-increase event per B bytes sent
  uint32_t fast_recovery = 5;        // F: fast-recovery stages
  double rate_ai_bps = 40e6;         // R_AI: additive increase step
  double rate_hai_bps = 400e6;       // R_HAI: hyper increase step
};

// Reaction point: one sending flow (QP). Starts unlimited at line rate.
// Timers are evaluated lazily but exactly: every call first applies, in
// order, every alpha and rate-increase timer expiry at or before `now`, so
// no periodic event is needed while the QP is idle.
class DcqcnRp {
 public:
  enum class Stage { unlimited, fast_recovery, additive, hyper };

  explicit DcqcnRp(const DcqcnRpParams& p);

  // A CNP for this flow arrived at cycle `now`: Rt <- Rc,
  // Rc <- max(min_rate, Rc (1 - alpha/2)), alpha <- (1-g) alpha + g; the
  // timer, the byte counter and both stage counters restart.
  void on_cnp(uint64_t now);
  // A packet of `wire_bytes` (frame, FCS, preamble and gap) started at cycle
  // `now`: counts towards the byte counter and, while the rate is limited,
  // sets the earliest start of the next packet to now + wire_bytes * 8 / Rc.
  void on_sent(uint64_t wire_bytes, uint64_t now);
  // Applies the timer expiries up to `now` (the accessors below then show
  // the state at `now`). `now` may not go backwards.
  void advance(uint64_t now);

  // First cycle at which the next packet may start (0 when unlimited).
  uint64_t tx_allowed_at() const;

  bool limited() const { return limited_; }
  double rate_bps() const { return rc_; }    // Rc, current rate
  double target_bps() const { return rt_; }  // Rt, target rate
  double alpha() const { return alpha_; }
  uint32_t timer_events() const { return t_count_; }  // since the last CNP
  uint32_t byte_events() const { return bc_count_; }  // since the last CNP
  Stage stage() const;
  uint64_t cuts() const { return cuts_; }

 private:
  void increase();  // one rate-increase event (timer or byte counter)

  DcqcnRpParams p_;
  double rc_, rt_, alpha_;
  bool limited_ = false;        // rate limiter engaged (a CNP was received)
  bool alpha_running_ = false;  // alpha timer started by the first CNP
  uint64_t alpha_ref_ = 0;      // start of the current alpha interval
  uint64_t t_next_ = 0;         // next rate-increase timer expiry
  uint32_t t_count_ = 0, bc_count_ = 0;
  uint64_t bytes_ = 0;    // bytes towards the next byte-counter event
  double next_tx_ = 0.0;  // earliest start of the next packet (cycles)
  uint64_t now_ = 0;
  uint64_t cuts_ = 0;
};

// Notification point: CNP generation at the receiver. A CE-marked packet of
// a flow asks for a CNP at once unless one was sent for that flow less than
// `min_interval` cycles before.
class DcqcnNp {
 public:
  explicit DcqcnNp(uint64_t min_interval_cycles) : min_interval_(min_interval_cycles) {}
  // A CE-marked packet of `flow` arrived at `now`: true if a CNP is due.
  bool on_ce(uint32_t flow, uint64_t now);
  void forget(uint32_t flow) { last_.erase(flow); }
  void reset() { last_.clear(); }

 private:
  uint64_t min_interval_;
  std::unordered_map<uint32_t, uint64_t> last_;  // flow -> cycle of its last CNP
};

}  // namespace mprdma::nic
