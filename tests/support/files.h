// Small file helpers for tests that read back what the model wrote.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace mprdma::test {

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A 32-bit value in the host's byte order (pcap files are written in it).
inline uint32_t u32(const std::vector<uint8_t>& d, size_t at) {
  uint32_t v;
  std::memcpy(&v, &d[at], 4);
  return v;
}

}  // namespace mprdma::test
