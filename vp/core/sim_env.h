// What every block of one simulation shares: its statistics, its seeded
// random streams and where it may write artefacts (pcap files, waveforms).
// One SimEnv per simulation; blocks receive it by reference at construction.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "vp/core/random.h"
#include "vp/core/stats.h"

namespace mprdma::core {

struct SimEnv {
  explicit SimEnv(uint64_t seed = 1) : random(seed) {}
  StatsRegistry stats;
  RandomStreams random;
  // Directory for artefacts; empty means "write none".
  std::string out_dir;
  // Waveforms of the RTL (--trace-rtl): per NIC name, the span of
  // simulated time to record, in ps (to_ps: the end of the run).
  struct TraceWindow {
    uint64_t from_ps = 0;
    uint64_t to_ps = std::numeric_limits<uint64_t>::max();
  };
  std::map<std::string, TraceWindow> rtl_traces;
};

}  // namespace mprdma::core
