#include "vp/core/log.h"

#include <iostream>
#include <map>
#include <stdexcept>
#include <systemc>
#include <utility>
#include <vector>

namespace mprdma::core {
namespace {

struct Registry {
  std::map<std::string, std::unique_ptr<LogChannel>> channels;
  std::vector<std::pair<std::string, LogLevel>> rules;
  std::ostream* sink = nullptr;
};

Registry& registry() {
  static Registry r;
  return r;
}

bool glob_match(const char* pattern, const char* text) {
  if (*pattern == '\0') return *text == '\0';
  if (*pattern == '*') {
    for (const char* t = text;; ++t) {
      if (glob_match(pattern + 1, t)) return true;
      if (*t == '\0') return false;
    }
  }
  return *pattern == *text && glob_match(pattern + 1, text + 1);
}

LogLevel level_for(const std::string& name) {
  LogLevel level = LogLevel::warn;
  for (const auto& [pattern, l] : registry().rules)
    if (glob_match(pattern.c_str(), name.c_str())) level = l;
  return level;
}

}  // namespace

LogLevel parse_log_level(const std::string& text) {
  static const std::pair<const char*, LogLevel> kNames[] = {
      {"off", LogLevel::off},   {"error", LogLevel::error}, {"warn", LogLevel::warn},
      {"info", LogLevel::info}, {"debug", LogLevel::debug}, {"trace", LogLevel::trace}};
  for (const auto& [n, l] : kNames)
    if (text == n) return l;
  throw std::invalid_argument("unknown log level '" + text +
                              "' (expected off, error, warn, info, debug or trace)");
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::off:
      return "off";
    case LogLevel::error:
      return "error";
    case LogLevel::warn:
      return "warn";
    case LogLevel::info:
      return "info";
    case LogLevel::debug:
      return "debug";
    case LogLevel::trace:
      return "trace";
  }
  return "?";
}

void LogChannel::write(LogLevel level, const std::string& message) const {
  std::ostream& os = Log::sink();
  if (sc_core::sc_get_status() & (sc_core::SC_RUNNING | sc_core::SC_PAUSED))
    os << '[' << sc_core::sc_time_stamp().to_string() << "] ";
  os << log_level_name(level) << ' ' << name_ << ": " << message << '\n';
}

LogChannel& Log::channel(const std::string& name) {
  auto& slot = registry().channels[name];
  if (!slot) {
    slot = std::make_unique<LogChannel>(name);
    slot->set_level(level_for(name));
  }
  return *slot;
}

void Log::configure(const std::string& spec) {
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string pattern = eq == std::string::npos ? "*" : item.substr(0, eq);
    std::string level = eq == std::string::npos ? item : item.substr(eq + 1);
    registry().rules.emplace_back(pattern, parse_log_level(level));
  }
  for (auto& [name, ch] : registry().channels) ch->set_level(level_for(name));
}

void Log::reset() {
  registry().rules.clear();
  for (auto& [name, ch] : registry().channels) ch->set_level(LogLevel::warn);
}

void Log::set_sink(std::ostream* sink) { registry().sink = sink; }

std::ostream& Log::sink() { return registry().sink ? *registry().sink : std::cerr; }

}  // namespace mprdma::core
