#include "vp/core/plugin_sections.h"

namespace mprdma::core {

PluginSections& PluginSections::operator=(const PluginSections& o) {
  if (this == &o) return *this;
  items_.clear();
  for (const auto& [name, section] : o.items_) items_.emplace_back(name, section->clone());
  return *this;
}

void PluginSections::set(const std::string& name, std::unique_ptr<PluginSection> section) {
  for (auto& [n, s] : items_)
    if (n == name) {
      s = std::move(section);
      return;
    }
  items_.emplace_back(name, std::move(section));
}

PluginSection* PluginSections::find(const std::string& name) const {
  for (const auto& [n, s] : items_)
    if (n == name) return s.get();
  return nullptr;
}

}  // namespace mprdma::core
