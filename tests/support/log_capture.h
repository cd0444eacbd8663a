// Sends every log channel's output to a string for the life of the object
// (a test that asserts on what a block logs), with the levels of `spec`
// (empty: as they are); restores stderr and the default levels after, even
// when an assertion ends the test early.
#pragma once

#include <cstddef>
#include <sstream>
#include <string>

#include "vp/core/log.h"

namespace mprdma::test {

class LogCapture {
 public:
  explicit LogCapture(const std::string& spec) {
    core::Log::set_sink(&text_);
    if (!spec.empty()) core::Log::configure(spec);
  }
  ~LogCapture() {
    core::Log::set_sink(nullptr);
    core::Log::reset();
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::string text() const { return text_.str(); }
  // Occurrences of `what` in everything logged so far.
  size_t count(const std::string& what) const {
    const std::string s = text_.str();
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  }

 private:
  std::ostringstream text_;
};

}  // namespace mprdma::test
