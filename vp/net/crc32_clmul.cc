#include "vp/net/crc32_clmul.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "vp/net/icrc.h"

namespace mprdma::net {

#if defined(__x86_64__)
namespace {

// Layout. A 128-bit remainder V holds message bits with bit k standing for
// x^(127-k) (the first byte's least significant bit is the highest power, as
// in the reflected CRC), so its low quadword L carries the coefficients of
// x^127..x^64 and its high quadword H those of x^63..x^0:
// V(x) = L(x) x^64 + H(x), where a quadword q means sum q_i x^(63-i).
//
// Moving V forward over T more bits multiplies it by x^T. Modulo P:
// L x^(T+64) + H x^T == L (x^(T+63) mod P) x + H (x^(T-1) mod P) x. A
// carry-less product of two quadwords a, b (each bit i standing for
// x^(63-i)) has bit k standing for x^(126-k): one power short of the layout,
// which is exactly the spare factor x above. So each constant is
// x^(T+63) mod P or x^(T-1) mod P written with bit j standing for x^(63-j),
// and the products land in V's layout with no shift.

// x^n mod P, P = x^32 + 0x04C11DB7 (bit d of the result is x^d).
constexpr uint64_t xpow_mod(unsigned n) {
  uint64_t r = 1;
  for (unsigned i = 0; i < n; ++i) {
    r <<= 1;
    if (r & (uint64_t{1} << 32)) r ^= 0x104C11DB7ull;
  }
  return r;
}

// Bit d moves to bit 63 - d.
constexpr uint64_t reflect64(uint64_t v) {
  uint64_t r = 0;
  for (int i = 0; i < 64; ++i)
    if (v & (uint64_t{1} << i)) r |= uint64_t{1} << (63 - i);
  return r;
}

constexpr uint64_t fold_constant(unsigned n) { return reflect64(xpow_mod(n)); }

// Over 128 bits (one block) and over 512 bits (four blocks in parallel).
constexpr uint64_t kFold128Lo = fold_constant(128 + 63), kFold128Hi = fold_constant(128 - 1);
constexpr uint64_t kFold512Lo = fold_constant(512 + 63), kFold512Hi = fold_constant(512 - 1);

__attribute__((target("pclmul,sse2"))) inline __m128i fold(__m128i v, __m128i k) {
  const __m128i lo = _mm_clmulepi64_si128(v, k, 0x00);  // L * constant for L
  const __m128i hi = _mm_clmulepi64_si128(v, k, 0x11);  // H * constant for H
  return _mm_xor_si128(lo, hi);
}

__attribute__((target("pclmul,sse2"))) uint32_t update(uint32_t reg, const uint8_t* p, size_t len) {
  const __m128i k128 =
      _mm_set_epi64x(static_cast<long long>(kFold128Hi), static_cast<long long>(kFold128Lo));
  const __m128i k512 =
      _mm_set_epi64x(static_cast<long long>(kFold512Hi), static_cast<long long>(kFold512Lo));
  auto load = [](const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); };
  // The register enters as the message's first 32 bits XORed with it:
  // reg x^n + M x^32 == (reg x^(n-32) + M) x^32.
  __m128i v0 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(reg)));
  __m128i v1 = load(p + 16), v2 = load(p + 32), v3 = load(p + 48);
  p += 64;
  len -= 64;
  while (len >= 64) {
    v0 = _mm_xor_si128(fold(v0, k512), load(p));
    v1 = _mm_xor_si128(fold(v1, k512), load(p + 16));
    v2 = _mm_xor_si128(fold(v2, k512), load(p + 32));
    v3 = _mm_xor_si128(fold(v3, k512), load(p + 48));
    p += 64;
    len -= 64;
  }
  __m128i v = _mm_xor_si128(fold(v0, k128), v1);
  v = _mm_xor_si128(fold(v, k128), v2);
  v = _mm_xor_si128(fold(v, k128), v3);
  while (len >= 16) {
    v = _mm_xor_si128(fold(v, k128), load(p));
    p += 16;
    len -= 16;
  }
  // v is congruent to everything so far: its CRC from a zero register,
  // then the tail, is the answer.
  uint8_t rest[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(rest), v);
  return crc32_update_table(crc32_update_table(0, rest, sizeof rest), p, len);
}

}  // namespace

bool crc32_clmul_available() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
  return has;
}

uint32_t crc32_update_clmul(uint32_t reg, const uint8_t* data, size_t len) {
  return update(reg, data, len);
}

#else

bool crc32_clmul_available() { return false; }
uint32_t crc32_update_clmul(uint32_t reg, const uint8_t* data, size_t len) {
  return crc32_update_table(reg, data, len);
}

#endif

}  // namespace mprdma::net
