// Typed quantities with units, and their parsing from scenario text.
//
// Scenario values carry their unit ("40Gbps", "1.5us", "250MHz", "4KiB");
// a bare number is accepted only where the unit is unambiguous (bytes,
// counts). Binary prefixes (KiB, MiB, GiB) are powers of 1024, decimal ones
// (KB, MB, GB, Gbps) powers of 1000.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <systemc>

namespace mprdma::core {

// Time in picoseconds.
struct Duration {
  uint64_t ps = 0;
  static Duration from_ps(uint64_t v) { return Duration{v}; }
  static Duration from_ns(double v) { return Duration{static_cast<uint64_t>(v * 1e3 + 0.5)}; }
  static Duration from_us(double v) { return Duration{static_cast<uint64_t>(v * 1e6 + 0.5)}; }
  double ns() const { return static_cast<double>(ps) / 1e3; }
  double us() const { return static_cast<double>(ps) / 1e6; }
  double seconds() const { return static_cast<double>(ps) / 1e12; }
  sc_core::sc_time sc() const { return sc_core::sc_time::from_value(ps); }
  bool operator==(const Duration& o) const { return ps == o.ps; }
};

// Data rate in bits per second.
struct Bandwidth {
  double bps = 0.0;
  static Bandwidth gbps(double v) { return Bandwidth{v * 1e9}; }
  double gbps() const { return bps / 1e9; }
  // Picoseconds to serialise `bytes` at this rate, rounded up.
  uint64_t serialize_ps(uint64_t bytes) const;
  bool operator==(const Bandwidth& o) const { return bps == o.bps; }
};

// Frequency in hertz.
struct Frequency {
  double hz = 0.0;
  static Frequency mhz(double v) { return Frequency{v * 1e6}; }
  uint64_t period_ps() const { return static_cast<uint64_t>(1e12 / hz + 0.5); }
  bool operator==(const Frequency& o) const { return hz == o.hz; }
};

// A size in bytes.
struct Bytes {
  uint64_t n = 0;
  bool operator==(const Bytes& o) const { return n == o.n; }
};

// Parsers. On bad text they throw UnitError with a message that names the
// expected form; callers add the file, line and key.
struct UnitError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Duration parse_duration(const std::string& text);
Bandwidth parse_bandwidth(const std::string& text);
Frequency parse_frequency(const std::string& text);
Bytes parse_bytes(const std::string& text);

// Canonical text forms ("1.5us", "40Gbps", "250MHz", "4KiB"), which parse back
// to the same value.
std::string to_string(const Duration& d);
std::string to_string(const Bandwidth& b);
std::string to_string(const Frequency& f);
std::string to_string(const Bytes& b);

}  // namespace mprdma::core
