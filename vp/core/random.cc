#include "vp/core/random.h"

#include <cmath>
#include <stdexcept>

namespace mprdma::core {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

RandomStream::RandomStream(uint64_t seed, const std::string& name) : name_(name) {
  uint64_t x = seed ^ fnv1a64(name);
  for (auto& word : s_) word = splitmix64(x);
}

uint64_t RandomStream::next_u64() {
  ++draws_;
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double RandomStream::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

uint64_t RandomStream::below(uint64_t n) {
  if (n == 0) throw std::invalid_argument("RandomStream::below(0) in stream " + name_);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do {
    v = next_u64();
  } while (v >= limit);
  return v % n;
}

int64_t RandomStream::between(int64_t lo, int64_t hi) {
  if (hi < lo) throw std::invalid_argument("RandomStream::between: empty range in " + name_);
  return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
}

double RandomStream::exponential(double mean) {
  // 1 - u lies in (0, 1], so the log is finite.
  return -mean * std::log(1.0 - uniform());
}

RandomStream& RandomStreams::stream(const std::string& name) {
  auto& slot = streams_[name];
  if (!slot) slot = std::make_unique<RandomStream>(seed_, name);
  return *slot;
}

}  // namespace mprdma::core
