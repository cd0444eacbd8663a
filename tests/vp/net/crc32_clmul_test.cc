// The carry-less-multiplication CRC-32 against a bitwise one (the
// polynomial's definition, one bit at a time), and against the table path,
// over lengths that exercise every loop of it and chained segments.
#include "vp/net/crc32_clmul.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "vp/net/icrc.h"

namespace mprdma::net {
namespace {

uint32_t bitwise_update(uint32_t reg, const uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    reg ^= p[i];
    for (int b = 0; b < 8; ++b) reg = (reg & 1u) ? (reg >> 1) ^ 0xEDB88320u : reg >> 1;
  }
  return reg;
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32Clmul, KnownCheckValue) {
  // "123456789" repeated to reach the folding path; CRC-32 of the 9-byte
  // string is the standard check value 0xCBF43926.
  const uint8_t nine[] = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  EXPECT_EQ(crc32(nine, sizeof nine), 0xCBF43926u);
  std::vector<uint8_t> many;
  for (int i = 0; i < 20; ++i) many.insert(many.end(), nine, nine + sizeof nine);
  EXPECT_EQ(crc32(many.data(), many.size()),
            ~bitwise_update(0xFFFFFFFFu, many.data(), many.size()));
}

TEST(Crc32Clmul, MatchesTheBitwiseCrcOnEveryLengthAndRegister) {
  if (!crc32_clmul_available()) GTEST_SKIP() << "this CPU has no PCLMULQDQ";
  std::mt19937 rng(7);
  const std::vector<uint8_t> data = random_bytes(rng, 4200);
  // Every length from the minimum through 300 (all tail sizes, one to four
  // 64-byte rounds), then frame sizes, each from a few offsets (alignment)
  // and registers (zero, all ones, random).
  std::vector<size_t> lengths;
  for (size_t n = kCrc32ClmulMinBytes; n <= 300; ++n) lengths.push_back(n);
  for (size_t n : {1024u, 1050u, 1130u, 2048u, 4096u}) lengths.push_back(n);
  for (size_t n : lengths) {
    for (size_t off : {0u, 1u, 7u, 13u}) {
      for (uint32_t reg : {0u, 0xFFFFFFFFu, static_cast<uint32_t>(rng())}) {
        const uint8_t* p = data.data() + off;
        const uint32_t want = bitwise_update(reg, p, n);
        ASSERT_EQ(crc32_update_clmul(reg, p, n), want) << "len " << n << " offset " << off;
        ASSERT_EQ(crc32_update_table(reg, p, n), want) << "len " << n << " offset " << off;
        ASSERT_EQ(crc32_update(reg, p, n), want) << "len " << n << " offset " << off;
      }
    }
  }
}

TEST(Crc32Clmul, ChainedSegmentsEqualOnePass) {
  std::mt19937 rng(11);
  const std::vector<uint8_t> data = random_bytes(rng, 3000);
  const uint32_t whole = crc32_update(0xFFFFFFFFu, data.data(), data.size());
  for (size_t cut : {1u, 63u, 64u, 65u, 100u, 1500u, 2999u}) {
    const uint32_t first = crc32_update(0xFFFFFFFFu, data.data(), cut);
    EXPECT_EQ(crc32_update(first, data.data() + cut, data.size() - cut), whole) << "cut " << cut;
  }
  EXPECT_EQ(whole, bitwise_update(0xFFFFFFFFu, data.data(), data.size()));
}

}  // namespace
}  // namespace mprdma::net
