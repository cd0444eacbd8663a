// This process's resident memory, for tests that bound what a structure
// costs in RAM (not in time).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace mprdma::test {

// Resident set size in bytes (/proc/self/statm, field 2).
inline uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace mprdma::test
