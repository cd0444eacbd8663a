#include "vp/core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace mprdma::core {
namespace {

// Splits "12.5 us" into 12.5 and "us". Throws if there is no number.
std::pair<double, std::string> split(const std::string& text, const char* what) {
  const char* s = text.c_str();
  while (std::isspace(static_cast<unsigned char>(*s))) ++s;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v)) throw UnitError("'" + text + "' is not a " + what);
  std::string unit(end);
  size_t a = unit.find_first_not_of(" \t");
  size_t b = unit.find_last_not_of(" \t");
  unit = a == std::string::npos ? "" : unit.substr(a, b - a + 1);
  if (v < 0) throw UnitError("'" + text + "': a " + std::string(what) + " cannot be negative");
  return {v, unit};
}

std::string trim_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

}  // namespace

uint64_t Bandwidth::serialize_ps(uint64_t bytes) const {
  if (!(bps > 0)) throw std::logic_error("serialisation at a zero rate");
  // A whole number of picoseconds per byte (1, 10, 25, 40, 100 Gb/s ...:
  // 8e12 / bps is then exact in double): an integer product. This is the
  // hot path of every link and port; the long double division below costs
  // x87 rounding-mode switches on each call.
  const double ps_per_byte = 8.0e12 / bps;
  if (ps_per_byte < 9.0e15) {
    const uint64_t whole = static_cast<uint64_t>(ps_per_byte);
    if (static_cast<double>(whole) == ps_per_byte) return bytes * whole;
  }
  // Otherwise 8e12 * bytes / bps, rounded up.
  const long double ps = static_cast<long double>(bytes) * 8.0e12L / static_cast<long double>(bps);
  return static_cast<uint64_t>(std::ceil(ps - 1e-9L));
}

Duration parse_duration(const std::string& text) {
  auto [v, unit] = split(text, "duration (e.g. 1.5us)");
  static const std::pair<const char*, double> kUnits[] = {
      {"ps", 1.0}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}};
  for (const auto& [u, scale] : kUnits)
    if (unit == u) return Duration{static_cast<uint64_t>(std::llround(v * scale))};
  if (unit.empty() && v == 0) return Duration{0};
  throw UnitError("'" + text + "' needs a time unit: ps, ns, us, ms or s (e.g. 1.5us)");
}

Bandwidth parse_bandwidth(const std::string& text) {
  auto [v, unit] = split(text, "rate (e.g. 40Gbps)");
  static const std::pair<const char*, double> kUnits[] = {
      {"bps", 1.0}, {"Kbps", 1e3}, {"Mbps", 1e6}, {"Gbps", 1e9}, {"Tbps", 1e12}};
  for (const auto& [u, scale] : kUnits)
    if (unit == u) {
      // 1 bps .. 100 Tbps: the fastest Ethernet is 1.6 Tbps, and beyond
      // the bound frames serialise in under a picosecond (PFC's pause
      // quanta too: a pause refreshed every picosecond runs for ever);
      // below it a jumbo frame would take longer than a run can count.
      const double bps = v * scale;
      if (v == 0) throw UnitError("'" + text + "': a rate must be positive");
      if (bps < 1.0 || bps > 100e12)
        throw UnitError("'" + text + "' is out of range: a rate is 1bps to 100Tbps");
      return Bandwidth{bps};
    }
  throw UnitError("'" + text + "' needs a rate unit: bps, Kbps, Mbps, Gbps or Tbps (e.g. 40Gbps)");
}

Frequency parse_frequency(const std::string& text) {
  auto [v, unit] = split(text, "frequency (e.g. 250MHz)");
  static const std::pair<const char*, double> kUnits[] = {
      {"Hz", 1.0}, {"KHz", 1e3}, {"kHz", 1e3}, {"MHz", 1e6}, {"GHz", 1e9}};
  for (const auto& [u, scale] : kUnits)
    if (unit == u) {
      // At most 100 GHz (a 10 ps cycle): cycles are whole picoseconds, and
      // a clock whose cycle rounds to nothing would run a pipeline in zero
      // time.
      const double hz = v * scale;
      if (v == 0) throw UnitError("'" + text + "': a frequency must be positive");
      if (hz < 1.0 || hz > 100e9)
        throw UnitError("'" + text + "' is out of range: a frequency is 1Hz to 100GHz");
      return Frequency{hz};
    }
  throw UnitError("'" + text + "' needs a frequency unit: Hz, kHz, MHz or GHz (e.g. 250MHz)");
}

Bytes parse_bytes(const std::string& text) {
  auto [v, unit] = split(text, "size (e.g. 4KiB)");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1.0},   {"B", 1.0},      {"KB", 1e3},        {"MB", 1e6},
      {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  for (const auto& [u, scale] : kUnits)
    if (unit == u) {
      double bytes = v * scale;
      if (bytes != std::floor(bytes))
        throw UnitError("'" + text + "' is not a whole number of bytes");
      return Bytes{static_cast<uint64_t>(bytes)};
    }
  throw UnitError("'" + text + "' has an unknown size unit: use B, KB, MB, GB, KiB, MiB or GiB");
}

std::string to_string(const Duration& d) {
  if (d.ps == 0) return "0s";
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"s", 1000000000000ull}, {"ms", 1000000000ull}, {"us", 1000000ull}, {"ns", 1000ull}};
  // The largest unit in which the value has at most three decimals, written
  // with integer arithmetic: "%.12g" on a double dropped the picoseconds of
  // long durations (2500000000001 ps came out as "2500000000ns").
  for (const auto& [u, scale] : kUnits) {
    const uint64_t step = scale / 1000;
    if (d.ps < scale || d.ps % step != 0) continue;
    std::string text = std::to_string(d.ps / scale);
    const uint64_t thousandths = d.ps % scale / step;
    if (thousandths) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "%03u", static_cast<unsigned>(thousandths));
      std::string frac(buf);
      frac.erase(frac.find_last_not_of('0') + 1);
      text += "." + frac;
    }
    text += u;
    // Beyond 2^53 ps the parser's double arithmetic cannot return the exact
    // value; the plain picosecond form is then as good as any.
    if (parse_duration(text).ps == d.ps) return text;
    break;
  }
  return std::to_string(d.ps) + "ps";
}

std::string to_string(const Bandwidth& b) {
  static const std::pair<const char*, double> kUnits[] = {
      {"Tbps", 1e12}, {"Gbps", 1e9}, {"Mbps", 1e6}, {"Kbps", 1e3}};
  for (const auto& [u, scale] : kUnits)
    if (b.bps >= scale) return trim_number(b.bps / scale) + u;
  return trim_number(b.bps) + "bps";
}

std::string to_string(const Frequency& f) {
  static const std::pair<const char*, double> kUnits[] = {{"GHz", 1e9}, {"MHz", 1e6}, {"kHz", 1e3}};
  for (const auto& [u, scale] : kUnits)
    if (f.hz >= scale) return trim_number(f.hz / scale) + u;
  return trim_number(f.hz) + "Hz";
}

std::string to_string(const Bytes& b) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"GiB", 1ull << 30}, {"MiB", 1ull << 20}, {"KiB", 1ull << 10}};
  for (const auto& [u, scale] : kUnits)
    if (b.n >= scale && b.n % scale == 0) return std::to_string(b.n / scale) + u;
  return std::to_string(b.n) + "B";
}

}  // namespace mprdma::core
