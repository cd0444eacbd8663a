// Configuration sections of plug-ins a struct does not know by type: a NIC's
// transport engines and congestion controls register themselves (with their
// section's defaults) and NicConfig holds whatever sections the registries
// give it, under the plug-in's name. Copies are deep, so configurations stay
// values (a scenario's hosts each get their own).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vp/core/config.h"

namespace mprdma::core {

class PluginSection {
 public:
  virtual ~PluginSection() = default;
  virtual std::unique_ptr<PluginSection> clone() const = 0;
  virtual void bind(Binder& b) = 0;
};

// The section of a plug-in whose parameters are a struct T with bind().
template <class T>
class PluginSectionOf final : public PluginSection {
 public:
  PluginSectionOf() = default;
  explicit PluginSectionOf(const T& v) : value(v) {}
  std::unique_ptr<PluginSection> clone() const override {
    return std::make_unique<PluginSectionOf>(value);
  }
  void bind(Binder& b) override { value.bind(b); }
  T value;
};

// Sections by plug-in name, in the order they were added (the order their
// keys are documented and reported in).
class PluginSections {
 public:
  PluginSections() = default;
  PluginSections(const PluginSections& o) { *this = o; }
  PluginSections& operator=(const PluginSections& o);
  PluginSections(PluginSections&&) = default;
  PluginSections& operator=(PluginSections&&) = default;

  // Adds (or replaces) the section of `name`.
  void set(const std::string& name, std::unique_ptr<PluginSection> section);
  PluginSection* find(const std::string& name) const;
  size_t size() const { return items_.size(); }
  const std::string& name(size_t i) const { return items_[i].first; }
  PluginSection& at(size_t i) const { return *items_[i].second; }

  // The parameters of plug-in T::kName (std::logic_error when it has none or
  // they are of another type: a programming error, not a scenario's).
  template <class T>
  T& get() {
    return of<T>(T::kName);
  }
  template <class T>
  const T& get() const {
    return of<T>(T::kName);
  }

 private:
  template <class T>
  T& of(const char* name) const {
    auto* s = dynamic_cast<PluginSectionOf<T>*>(find(name));
    if (!s) throw std::logic_error(std::string("no configuration section '") + name + "'");
    return s->value;
  }
  std::vector<std::pair<std::string, std::unique_ptr<PluginSection>>> items_;
};

}  // namespace mprdma::core
