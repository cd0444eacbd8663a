// Small file helpers for tests that read back what the model wrote.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

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

// Writes `text` to a file in the test temp directory and returns its path.
// ctest runs test cases in parallel processes: the name carries the test's
// name and the process id, so every file name is unique.
inline std::string write_temp(const std::string& name, const std::string& text) {
  // A parameterised test's name contains '/': not a directory here.
  std::string test = testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : test)
    if (c == '/') c = '_';
  const std::string path = testing::TempDir() + test + "_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace mprdma::test
