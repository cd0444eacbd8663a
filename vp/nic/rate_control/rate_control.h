// Rate control as its own seam: a per-QP reaction point beside the
// transport engine, owned by the NIC's TX side (the requester paces each QP
// at its rate, for its requests and its responder's READ responses alike).
// A congestion control is one folder here (dcqcn/, timely/) with a golden
// model in plain C++ and an adapter to this interface, plus one line in
// rate_control.cc's table (RateControlRegistry). Engines with their own window (MP-RDMA,
// EngineTraits::own_congestion_control) are never paced.
//
// Signals a control may react to: CNPs (the receiver's notification point
// answers CE-marked packets, cnp_interval_cycles()), and RTT samples (the
// requester times one packet per QP at a time, from its start to the ACK
// that covers it; a go-back discards the sample, as Karn's rule does).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vp/core/plugin_registry.h"
#include "vp/core/plugin_sections.h"

namespace mprdma::nic {

struct NicConfig;

// One QP's rate controller. Times are NIC cycles.
class RateControl {
 public:
  virtual ~RateControl() = default;
  // A packet of `wire_bytes` (frame, FCS, preamble and gap) started at `now`.
  virtual void on_sent(uint64_t wire_bytes, uint64_t now) = 0;
  // A CNP for this QP arrived (ECN-driven controls).
  virtual void on_cnp(uint64_t /*now*/) {}
  // One RTT sample of this QP (RTT-driven controls).
  virtual void on_rtt(uint64_t /*rtt_cycles*/, uint64_t /*now*/) {}
  // First cycle at which the next packet may start (0 when unlimited).
  virtual uint64_t tx_allowed_at() const = 0;
  virtual double rate_bps() const = 0;
  // Multiplicative decreases so far.
  virtual uint64_t cuts() const = 0;
  // The control's state in one line, for the debug log.
  virtual std::string state() const = 0;
};

// A congestion control of the NIC: how to make each QP's controller, and
// which signals the NIC must produce for it.
class RateControlKind {
 public:
  static constexpr uint64_t kNoCnp = ~uint64_t{0};
  virtual ~RateControlKind() = default;
  // Its statistics go under nic.<host>.<name>.
  virtual const char* name() const = 0;
  virtual std::unique_ptr<RateControl> make() const = 0;
  // Receivers answer a QP's CE-marked packets with a CNP, at most one per
  // this many cycles (DCQCN's notification point); kNoCnp: never.
  virtual uint64_t cnp_interval_cycles() const { return kNoCnp; }
  // The requester feeds RTT samples (on_rtt).
  virtual bool rtt_samples() const { return false; }
};

// A congestion control in the NIC's table: its name (nic.congestion_control's
// value and its section's key), docs, parameters and factory.
struct RateControlEntry {
  std::string name;
  std::string doc;          // what it reacts to, for --help and the docs
  std::string section_doc;  // its section's one line
  std::function<std::unique_ptr<core::PluginSection>()> make_section;  // null: none
  std::function<std::unique_ptr<RateControlKind>(const NicConfig&)> make;
};

// The congestion controls the NIC offers besides "none": a new one is a
// folder here and one line in rate_control.cc (add_builtin_rate_controls),
// or one add() before the scenario is bound.
class RateControlRegistry : public core::PluginRegistry<RateControlEntry> {
 public:
  static RateControlRegistry& instance();
  // std::invalid_argument when the name is taken or it has no factory.
  void add(RateControlEntry entry);

 private:
  RateControlRegistry() = default;
};

// The NIC's congestion control; null for "none".
std::unique_ptr<RateControlKind> make_rate_control(const NicConfig& cfg);

}  // namespace mprdma::nic
