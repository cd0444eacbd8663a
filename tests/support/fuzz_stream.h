// The seeded random stream and round count of the fuzz tests.
#pragma once

#include <cstdlib>
#include <random>
#include <string>

namespace mprdma::test::fuzz {

// The test's random stream: fixed per test name, so every run makes the same
// requests. For a longer hunt MPRDMA_FUZZ_SEED (mixed into the seed) and
// MPRDMA_FUZZ_ROUNDS change both; MPRDMA_FUZZ_TRACE=1 prints every round.
inline std::mt19937_64 Stream(std::string name) {
  if (const char* extra = std::getenv("MPRDMA_FUZZ_SEED")) name += extra;
  std::seed_seq seq(name.begin(), name.end());
  return std::mt19937_64(seq);
}
inline int Rounds(int fallback) {
  const char* env = std::getenv("MPRDMA_FUZZ_ROUNDS");
  return env ? std::atoi(env) : fallback;
}
inline bool Trace() { return std::getenv("MPRDMA_FUZZ_TRACE") != nullptr; }

}  // namespace mprdma::test::fuzz
