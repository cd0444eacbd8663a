// Seeded random streams, one per named component.
//
// Every random choice in the platform draws from a stream obtained by name
// ("link.h0-h1.loss", "nic0.transport.paths"). A stream's sequence depends
// only on the scenario seed and the stream name, never on creation order or
// on the standard library, so a scenario and seed give the same results bit
// for bit on every machine. The generator is xoshiro256**; the distributions
// are written here because std:: distributions are implementation-defined.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace mprdma::core {

class RandomStream {
 public:
  RandomStream(uint64_t seed, const std::string& name);
  const std::string& name() const { return name_; }
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 bits of resolution.
  double uniform();
  // Uniform integer in [0, n); n > 0. Unbiased (rejection sampling).
  uint64_t below(uint64_t n);
  // Uniform integer in [lo, hi] inclusive.
  int64_t between(int64_t lo, int64_t hi);
  bool bernoulli(double p) { return p > 0.0 && uniform() < p; }
  // Exponential with the given mean (inverse transform).
  double exponential(double mean);
  uint64_t draws() const { return draws_; }

 private:
  std::string name_;
  uint64_t s_[4];
  uint64_t draws_ = 0;
};

class RandomStreams {
 public:
  explicit RandomStreams(uint64_t seed = 1) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  // Returns the stream of that name, creating it on first use.
  RandomStream& stream(const std::string& name);
  const std::map<std::string, std::unique_ptr<RandomStream>>& all() const { return streams_; }

 private:
  uint64_t seed_;
  std::map<std::string, std::unique_ptr<RandomStream>> streams_;
};

// FNV-1a 64-bit hash of a string; stable across platforms.
uint64_t fnv1a64(const std::string& text);

}  // namespace mprdma::core
