// Fields of a Verilated wide value (an array of 32-bit words, LSB first):
// how the C++ side of every engine reads and writes context rows.
#pragma once

#include <cstdint>

namespace mprdma::nic::rtl {

// Bits [lsb, lsb + width) of `words`, width < 64 (at most three words).
inline uint64_t bits(const uint32_t* words, uint32_t lsb, uint32_t width) {
  const uint32_t w = lsb / 32, sh = lsb % 32;
  uint64_t v = words[w] >> sh;
  if (sh + width > 32) v |= uint64_t{words[w + 1]} << (32 - sh);
  if (sh + width > 64) v |= uint64_t{words[w + 2]} << (64 - sh);
  return v & ((uint64_t{1} << width) - 1);
}

// Writes the low `width` bits of `v` at [lsb, lsb + width) of `words`.
inline void set_bits(uint32_t* words, uint32_t lsb, uint32_t width, uint64_t v) {
  for (uint32_t i = 0; i < width; ++i) {
    const uint32_t b = lsb + i;
    const uint32_t m = 1u << (b % 32);
    words[b / 32] = ((v >> i) & 1u) ? words[b / 32] | m : words[b / 32] & ~m;
  }
}

}  // namespace mprdma::nic::rtl
