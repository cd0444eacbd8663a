// Small file helpers for tests that read back what the model wrote.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
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

// The paths temp_path() handed out, removed (files and directories) when
// the test process ends: ctest runs every case in a process of its own, so
// nothing a case wrote outlives it in the temp directory. Set
// MPRDMA_KEEP_TEST_FILES to keep them for a look.
class TempPaths {
 public:
  ~TempPaths() {
    if (std::getenv("MPRDMA_KEEP_TEST_FILES")) return;
    std::error_code ec;
    for (const std::string& p : paths_) std::filesystem::remove_all(p, ec);
  }
  void add(const std::string& path) { paths_.push_back(path); }

 private:
  std::vector<std::string> paths_;
};

inline TempPaths& temp_paths() {
  static TempPaths paths;
  return paths;
}

// A path in the test temp directory, unique per test and process (ctest
// runs cases in parallel processes), ending in `suffix`; removed at exit.
inline std::string temp_path(const std::string& suffix) {
  // A parameterised test's name contains '/': not a directory here.
  std::string test = testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : test)
    if (c == '/') c = '_';
  const std::string path = testing::TempDir() + test + "_" + std::to_string(getpid()) + suffix;
  temp_paths().add(path);
  return path;
}

// Writes `text` to temp_path("_" + name) and returns its path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = temp_path("_" + name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace mprdma::test
