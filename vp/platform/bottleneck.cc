#include "vp/platform/bottleneck.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mprdma::platform {
namespace {

// Ethernet preamble, start delimiter and inter-frame gap: wire bytes a
// frame costs beyond the frame bytes the MAC counts.
constexpr uint64_t kFrameGapBytes = 20;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

uint64_t get(const std::map<std::string, uint64_t>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::optional<BottleneckSpec> parse_bottleneck_metric(const std::string& expr) {
  const std::string e = trim(expr);
  const std::string head = "bottleneck(";
  if (!starts_with(e, head)) return std::nullopt;
  const std::string form = "bottleneck(<host>,<from>,<to>) or bottleneck(<host>)";
  if (e.back() != ')') throw std::invalid_argument("'" + e + "' is not of the form " + form);
  std::vector<std::string> args;
  std::string inner = e.substr(head.size(), e.size() - head.size() - 1);
  size_t start = 0;
  while (true) {
    const size_t comma = inner.find(',', start);
    args.push_back(trim(inner.substr(start, comma == std::string::npos ? comma : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if ((args.size() != 3 && args.size() != 1) || args[0].empty())
    throw std::invalid_argument("'" + e + "' is not of the form " + form);
  BottleneckSpec s;
  s.host = args[0];
  if (args.size() == 1) {
    s.until_jobs_end = true;
    return s;
  }
  try {
    s.from = core::parse_duration(args[1]);
    s.to = core::parse_duration(args[2]);
  } catch (const std::exception& ex) {
    throw std::invalid_argument("'" + e + "': " + ex.what());
  }
  if (s.to.ps <= s.from.ps)
    throw std::invalid_argument("'" + e + "': the window ends before it starts");
  return s;
}

std::vector<ResourceUse> rank_resources(const std::map<std::string, uint64_t>& delta,
                                        const std::string& host, const HostCapacity& cap,
                                        double window_s, double lock_busy_s) {
  std::vector<ResourceUse> out;
  if (window_s <= 0) return out;
  const std::string nic = "nic." + host + ".", pcie = "pcie." + host + ".";

  // PCIe, per direction: every TLP kind's bytes plus the DLLPs.
  for (const char* dir : {"downstream", "upstream"}) {
    const std::string base = pcie + dir + ".";
    std::string top;
    uint64_t top_bytes = 0, bytes = get(delta, base + "dllp.bytes");
    for (const auto& [key, v] : delta) {
      // <base><kind>.bytes, not <base>dllp.bytes and not deeper paths.
      if (!starts_with(key, base) || key.size() <= base.size() + 6) continue;
      const std::string rest = key.substr(base.size());
      if (rest.find('.') != rest.rfind('.') || rest.compare(rest.size() - 6, 6, ".bytes") != 0)
        continue;
      const std::string kind = rest.substr(0, rest.size() - 6);
      if (kind == "dllp") continue;
      bytes += v;
      if (v > top_bytes) top_bytes = v, top = kind;
    }
    if (cap.pcie_bytes_per_s > 0) {
      const double stall =
          static_cast<double>(get(delta, base + "credit_wait_ps")) * 1e-12 / window_s;
      out.push_back({std::string("pcie.") + dir + (top.empty() ? "" : "." + top),
                     static_cast<double>(bytes) / (cap.pcie_bytes_per_s * window_s) + stall,
                     stall});
    }
  }

  // The Ethernet port.
  for (auto [dir, bps] :
       {std::pair<const char*, double>{"tx", cap.port_tx_bps}, {"rx", cap.port_rx_bps}}) {
    if (bps <= 0) continue;
    const std::string m = nic + "mac." + dir;
    const double wire =
        static_cast<double>(get(delta, m + "_bytes") + kFrameGapBytes * get(delta, m + "_packets"));
    out.push_back({std::string("port.") + dir, wire * 8 / (bps * window_s)});
  }

  if (cap.clock_hz > 0) {
    const double cycles = cap.clock_hz * window_s;
    // The busiest processing unit (the lowest index on a tie).
    int busiest = -1;
    uint64_t busy = 0;
    for (uint32_t i = 0; i < cap.pus; ++i) {
      const uint64_t b = get(delta, nic + "pu." + std::to_string(i) + ".busy_cycles");
      if (busiest < 0 || b > busy) busiest = static_cast<int>(i), busy = b;
    }
    if (busiest >= 0)
      out.push_back({"pu." + std::to_string(busiest), static_cast<double>(busy) / cycles});
    out.push_back({"tx_scheduler", static_cast<double>(get(delta, nic + "tx.packets")) *
                                       static_cast<double>(cap.tx_schedule_cycles) / cycles});
    // The in-order receive stage: parsing, or waiting for a cache fill.
    const double parse_s = static_cast<double>(get(delta, nic + "mac.rx_packets")) *
                           static_cast<double>(cap.rx_parse_cycles) / cap.clock_hz;
    std::string name = "rx_stage.parse";
    double top_s = parse_s, total_s = parse_s;
    for (const char* cache : {"qpc", "wqe", "mpt_mtt"}) {
      const double s = static_cast<double>(get(delta, nic + "rx.stall_ps." + cache)) * 1e-12;
      total_s += s;
      if (s > top_s) top_s = s, name = std::string("rx_stage.") + cache + "_miss";
    }
    out.push_back({name, total_s / window_s});
    out.push_back({"completion_unit",
                   static_cast<double>(get(delta, nic + "cq.cqes") + get(delta, nic + "cq.eqes")) *
                       static_cast<double>(cap.cqe_cycles) / cycles});
  }
  if (lock_busy_s > 0) out.push_back({"atomics.lock", lock_busy_s / window_s});
  const uint64_t buffer_ps = get(delta, nic + "atomics.buffer_busy_ps");
  if (cap.atomic_buffers > 0 && buffer_ps > 0)
    out.push_back({"atomics.buffers", static_cast<double>(buffer_ps) * 1e-12 /
                                          (static_cast<double>(cap.atomic_buffers) * window_s)});
  // Ranked on utilisations rounded to 1e-9: resources that do the same work
  // per packet (e.g. the receive stage and the completion unit, one CQE per
  // packet at equal cycle costs) tie exactly, and the order above, not the
  // last bits of two different sums, must decide.
  auto key = [](const ResourceUse& u) { return std::llround(u.utilisation * 1e9); };
  std::stable_sort(out.begin(), out.end(),
                   [&](const ResourceUse& a, const ResourceUse& b) { return key(a) > key(b); });
  return out;
}

std::string bottleneck_name(const std::vector<ResourceUse>& ranking) {
  if (ranking.empty()) return "";
  return ranking.front().utilisation >= kSaturated ? ranking.front().resource : "latency";
}

BottleneckProbe::BottleneckProbe(const core::StatsRegistry& stats, BottleneckSpec spec,
                                 HostCapacity cap, const LockHeld* lock_held_ps)
    : stats_(stats), spec_(std::move(spec)), cap_(cap), lock_held_ps_(lock_held_ps) {}

sc_core::sc_time BottleneckProbe::next_due() const {
  if (taken_ == 0) return sc_core::sc_time(static_cast<double>(spec_.from.ps), sc_core::SC_PS);
  if (taken_ == 1 && !spec_.until_jobs_end)
    return sc_core::sc_time(static_cast<double>(spec_.to.ps), sc_core::SC_PS);
  return sc_core::sc_max_time();
}

void BottleneckProbe::jobs_ended() {
  if (!spec_.until_jobs_end || taken_ != 1) return;  // not started: no window
  observe();
}

void BottleneckProbe::observe() {
  LockHeld& locks = taken_ == 0 ? locks_start_ : locks_end_;
  if (taken_ == 0)
    start_ = snapshot();
  else if (taken_ == 1) {
    end_ = snapshot();
    end_ps_ = static_cast<uint64_t>(sc_core::sc_time_stamp() / sc_core::sc_time(1, sc_core::SC_PS));
  }
  if (taken_ < 2 && lock_held_ps_) locks = *lock_held_ps_;
  ++taken_;
}

std::map<std::string, uint64_t> BottleneckProbe::snapshot() const {
  std::map<std::string, uint64_t> out;
  const std::string nic = "nic." + spec_.host + ".", pcie = "pcie." + spec_.host + ".";
  for (const auto& [path, c] : stats_.counters())
    if (starts_with(path, nic) || starts_with(path, pcie)) out[path] = c->value();
  return out;
}

std::vector<ResourceUse> BottleneckProbe::ranking() const {
  if (taken_ < 2) return {};
  std::map<std::string, uint64_t> delta;
  for (const auto& [path, v] : end_) delta[path] = v - get(start_, path);
  uint64_t lock_busy = 0;
  for (const auto& [bucket, held] : locks_end_) {
    auto it = locks_start_.find(bucket);
    lock_busy = std::max(lock_busy, held - (it == locks_start_.end() ? 0 : it->second));
  }
  const uint64_t to = spec_.until_jobs_end ? end_ps_ : spec_.to.ps;
  if (to <= spec_.from.ps) return {};
  return rank_resources(delta, spec_.host, cap_, static_cast<double>(to - spec_.from.ps) * 1e-12,
                        static_cast<double>(lock_busy) * 1e-12);
}

}  // namespace mprdma::platform
