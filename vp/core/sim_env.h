// What every block of one simulation shares: its statistics, its seeded
// random streams and where it may write artefacts (pcap files, waveforms).
// One SimEnv per simulation; blocks receive it by reference at construction.
#pragma once

#include <cstdint>
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
};

}  // namespace mprdma::core
