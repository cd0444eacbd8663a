// Named log channels with run-time levels.
//
// Every block logs through a channel named after it ("nic0.requester",
// "pcie", ...). Levels are set at run time with a spec such as
// "*=warn,nic*.requester=debug,pcie=trace" (--log on the command line or the
// scenario's log: key); later entries win, so a catch-all goes first.
// Messages go to stderr by default, prefixed with the simulated time when a
// simulation is running.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <sstream>
#include <string>

namespace mprdma::core {

enum class LogLevel : uint8_t { off = 0, error, warn, info, debug, trace };

// Parses "error", "warn", ... ; throws std::invalid_argument naming the text.
LogLevel parse_log_level(const std::string& text);
const char* log_level_name(LogLevel level);

class LogChannel {
 public:
  explicit LogChannel(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  bool enabled(LogLevel level) const { return level <= level_ && level != LogLevel::off; }
  LogLevel level() const { return level_; }
  void set_level(LogLevel level) { level_ = level; }
  void write(LogLevel level, const std::string& message) const;

 private:
  std::string name_;
  LogLevel level_ = LogLevel::warn;
};

// Registry of channels. Channels are created on first use and live for the
// whole process, so blocks may keep references to them.
class Log {
 public:
  static LogChannel& channel(const std::string& name);
  // Applies a spec "pattern=level,pattern=level"; patterns use '*' as a
  // wildcard. Later entries win. Also applied to channels created later.
  static void configure(const std::string& spec);
  // Restores every channel to the default level (warn) and forgets specs.
  static void reset();
  // Where messages go (nullptr restores stderr). Not owned.
  static void set_sink(std::ostream* sink);
  static std::ostream& sink();
};

// Keeps a message that can repeat per packet (a guest pointing the NIC at
// bad memory) from flooding the log: the first `burst` occurrences pass,
// then one in `every`, which reports how many were suppressed since.
class LogRateLimit {
 public:
  explicit LogRateLimit(uint64_t burst = 10, uint64_t every = 1000)
      : burst_(burst), every_(every) {}
  // True if this occurrence should be logged; `suppressed` is set to the
  // number of occurrences dropped since the last one logged.
  bool allow(uint64_t* suppressed) {
    const uint64_t n = ++count_;
    if (n <= burst_ || (n - burst_) % every_ == 0) {
      *suppressed = n - 1 - last_logged_;
      last_logged_ = n;
      return true;
    }
    return false;
  }

 private:
  uint64_t burst_, every_;
  uint64_t count_ = 0, last_logged_ = 0;
};

}  // namespace mprdma::core

// Formats lazily: the stream expression is evaluated only if the level is on.
#define MPR_LOG(channel, lvl, expr)                                      \
  do {                                                                   \
    if ((channel).enabled(::mprdma::core::LogLevel::lvl)) {              \
      std::ostringstream mpr_log_os_;                                    \
      mpr_log_os_ << expr;                                               \
      (channel).write(::mprdma::core::LogLevel::lvl, mpr_log_os_.str()); \
    }                                                                    \
  } while (0)
