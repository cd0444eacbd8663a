// What every registry of named plug-ins shares (transport engines,
// congestion controls): entries in registration order, found by name, and
// each one's configuration section at its defaults. The registries add
// their own checks in add() and their own lookups.
#pragma once

#include <string>
#include <vector>

#include "vp/core/plugin_sections.h"

namespace mprdma::core {

// Entry: has `std::string name` and `make_section` (a callable giving a
// std::unique_ptr<PluginSection>, or empty for no section).
template <typename Entry>
class PluginRegistry {
 public:
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(const std::string& name) const {
    for (const Entry& e : entries_)
      if (e.name == name) return &e;
    return nullptr;
  }
  // The names, in registration order.
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const Entry& e : entries_) n.push_back(e.name);
    return n;
  }
  // Every entry's section, at its defaults.
  PluginSections default_sections() const {
    PluginSections s;
    for (const Entry& e : entries_)
      if (e.make_section) s.set(e.name, e.make_section());
    return s;
  }

 protected:
  PluginRegistry() = default;
  std::vector<Entry> entries_;
};

}  // namespace mprdma::core
