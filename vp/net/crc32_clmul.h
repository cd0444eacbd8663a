// CRC-32 (IEEE 802.3, reflected) by carry-less multiplication.
//
// The table-driven crc32_update (icrc.h) spends about a byte per cycle; every
// frame's ICRC is computed when it is built and checked when it arrives, so
// on long runs that was ~9 % of the simulator's time. With PCLMULQDQ the
// message is folded 64 bytes at a time into four 128-bit remainders (each
// step: two carry-less products by x^k mod P and an XOR), the four are folded
// into one, and the last 16 bytes plus the tail go through the table. Same
// function, same result, bit for bit; unit-tested against a bitwise CRC.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mprdma::net {

// Whether this CPU has PCLMULQDQ (checked once).
bool crc32_clmul_available();

// The same contract as crc32_update (no inversions, chainable). Requires
// crc32_clmul_available() and len >= kCrc32ClmulMinBytes.
constexpr size_t kCrc32ClmulMinBytes = 64;
uint32_t crc32_update_clmul(uint32_t reg, const uint8_t* data, size_t len);

}  // namespace mprdma::net
