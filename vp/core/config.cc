// TEMPORARY during bring-up: replaced by the full binder implementation.
#include "vp/core/config.h"
namespace mprdma::core {
static std::string join(const std::vector<std::string>& e) { std::string s; for (auto& x : e) s += x + "\n"; return s; }
ConfigError::ConfigError(const std::vector<std::string>& errors) : std::runtime_error(join(errors)), errors_(errors) {}
}
