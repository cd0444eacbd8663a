// Typed, documented configuration bound from YAML, to documentation and to
// JSON by one description per struct.
//
// Every configurable struct has a member
//     void bind(mprdma::core::Binder& b);
// that names each field once, with its key, documentation, unit and limits.
// The field's default is the struct's member initialiser. Three binders walk
// that description:
//   YamlBinder  fills the struct from a scenario file and reports every
//               unknown key, wrong type or out-of-range value with the
//               file, line and key path;
//   DocBinder   writes the Markdown reference of every key and its default
//               (docs/scenario-reference.md is generated with it);
//   JsonBinder  writes the effective values into results.json.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "vp/core/units.h"

namespace YAML {
class Node;
}

namespace mprdma::core {

// One or more configuration errors, each "file:line:col: key.path: message".
class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::vector<std::string>& errors);
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

class Binder {
 public:
  virtual ~Binder() = default;

  virtual void field(const char* key, bool& v, const char* doc) = 0;
  virtual void field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
                     const char* unit = "") = 0;
  virtual void field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
                     const char* unit = "") = 0;
  virtual void field(const char* key, double& v, const char* doc, double min, double max,
                     const char* unit = "") = 0;
  virtual void field(const char* key, std::string& v, const char* doc) = 0;
  virtual void field(const char* key, Duration& v, const char* doc, Duration min = Duration{0},
                     Duration max = Duration{UINT64_MAX}) = 0;
  virtual void field(const char* key, Bandwidth& v, const char* doc) = 0;
  virtual void field(const char* key, Frequency& v, const char* doc) = 0;
  virtual void field(const char* key, Bytes& v, const char* doc, uint64_t min = 0,
                     uint64_t max = UINT64_MAX) = 0;
  // A string restricted to `choices`.
  virtual void choice(const char* key, std::string& v, const std::vector<std::string>& choices,
                      const char* doc) = 0;
  // An enum restricted to named values: the scenario spells a name, the
  // model holds the enum (no string compares in model code). `options`
  // lists every value of E with its name.
  template <class E>
  void choice(const char* key, E& v, const std::vector<std::pair<const char*, E>>& options,
              const char* doc) {
    std::vector<std::string> names;
    std::string current;
    for (const auto& [name, value] : options) {
      names.emplace_back(name);
      if (value == v) current = name;
    }
    choice(key, current, names, doc);
    for (const auto& [name, value] : options)
      if (current == name) v = value;
  }
  // A list of sizes (e.g. message sizes to sweep).
  virtual void field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min = 0,
                     uint64_t max = UINT64_MAX) = 0;
  // A map from names to strings (e.g. metric name -> result field).
  virtual void field(const char* key, std::map<std::string, std::string>& v, const char* doc) = 0;
  // A list of scalars kept as their YAML text (e.g. values a sweep gives a
  // key). Not pure: binders that do not know it (test doubles) skip it.
  virtual void field(const char* key, std::vector<std::string>& v, const char* doc) {
    (void)key, (void)v, (void)doc;
  }

  // A nested struct under `key`.
  template <class T>
  void section(const char* key, T& obj, const char* doc) {
    if (enter_section(key, doc)) {
      obj.bind(*this);
      leave_section();
    }
  }

  // A list of structs under `key`.
  template <class T>
  void list(const char* key, std::vector<T>& items, const char* doc) {
    ListPlan plan = begin_list(key, doc, items.size());
    if (plan.describe_prototype) {
      T prototype;
      enter_item(0);
      prototype.bind(*this);
      leave_item();
    } else if (plan.bind) {
      items.resize(plan.count);
      for (size_t i = 0; i < plan.count; ++i) {
        enter_item(i);
        items[i].bind(*this);
        leave_item();
      }
    }
    end_list();
  }

  // Adds an error attributed to the current struct (for cross-field checks
  // made inside bind(), such as "min must not exceed max").
  virtual void error(const std::string& message) = 0;
  // True when the binder is filling values (YamlBinder).
  virtual bool reading() const { return false; }

 protected:
  struct ListPlan {
    bool describe_prototype = false;  // DocBinder: describe one element
    bool bind = false;                // bind `count` elements
    size_t count = 0;
  };
  virtual bool enter_section(const char* key, const char* doc) = 0;
  virtual void leave_section() = 0;
  virtual ListPlan begin_list(const char* key, const char* doc, size_t current) = 0;
  virtual void enter_item(size_t index) = 0;
  virtual void leave_item() = 0;
  virtual void end_list() = 0;
};

// Fills a struct from a YAML mapping. Collects every error; finish() throws a
// ConfigError listing them all (unknown keys included, with a suggestion of
// the nearest known key), sorted by position in the file.
//
// Details: an absent key keeps the default; a section given as an empty
// value ("nic:") is an empty mapping, a list given as an empty value is an
// empty list; a key given twice in one mapping is an error (yaml-cpp keeps
// both entries, so duplicates are detected); an error in a list of sizes or
// a map leaves the whole field at its default.
class YamlBinder : public Binder {
 public:
  // `file` names the document in messages.
  YamlBinder(const YAML::Node& root, std::string file);
  ~YamlBinder() override;

  template <class T>
  void bind_root(T& obj) {
    obj.bind(*this);
    finish();
  }
  void finish();

  void field(const char* key, bool& v, const char* doc) override;
  void field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
             const char* unit) override;
  void field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
             const char* unit) override;
  void field(const char* key, double& v, const char* doc, double min, double max,
             const char* unit) override;
  void field(const char* key, std::string& v, const char* doc) override;
  void field(const char* key, Duration& v, const char* doc, Duration min, Duration max) override;
  void field(const char* key, Bandwidth& v, const char* doc) override;
  void field(const char* key, Frequency& v, const char* doc) override;
  void field(const char* key, Bytes& v, const char* doc, uint64_t min, uint64_t max) override;
  void choice(const char* key, std::string& v, const std::vector<std::string>& choices,
              const char* doc) override;
  void field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min,
             uint64_t max) override;
  void field(const char* key, std::map<std::string, std::string>& v, const char* doc) override;
  void field(const char* key, std::vector<std::string>& v, const char* doc) override;
  void error(const std::string& message) override;
  bool reading() const override { return true; }

 protected:
  bool enter_section(const char* key, const char* doc) override;
  void leave_section() override;
  ListPlan begin_list(const char* key, const char* doc, size_t current) override;
  void enter_item(size_t index) override;
  void leave_item() override;
  void end_list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Loads a YAML file (parse errors become ConfigError with file and line).
YAML::Node load_yaml_file(const std::string& path);

// Writes Markdown: one table per section with key, type, default, unit,
// limits and documentation.
class DocBinder : public Binder {
 public:
  explicit DocBinder(std::string title);
  ~DocBinder() override;
  template <class T>
  std::string describe(T& defaults) {
    defaults.bind(*this);
    return markdown();
  }
  std::string markdown() const;

  void field(const char* key, bool& v, const char* doc) override;
  void field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
             const char* unit) override;
  void field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
             const char* unit) override;
  void field(const char* key, double& v, const char* doc, double min, double max,
             const char* unit) override;
  void field(const char* key, std::string& v, const char* doc) override;
  void field(const char* key, Duration& v, const char* doc, Duration min, Duration max) override;
  void field(const char* key, Bandwidth& v, const char* doc) override;
  void field(const char* key, Frequency& v, const char* doc) override;
  void field(const char* key, Bytes& v, const char* doc, uint64_t min, uint64_t max) override;
  void choice(const char* key, std::string& v, const std::vector<std::string>& choices,
              const char* doc) override;
  void field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min,
             uint64_t max) override;
  void field(const char* key, std::map<std::string, std::string>& v, const char* doc) override;
  void field(const char* key, std::vector<std::string>& v, const char* doc) override;
  void error(const std::string&) override {}

 protected:
  bool enter_section(const char* key, const char* doc) override;
  void leave_section() override;
  ListPlan begin_list(const char* key, const char* doc, size_t current) override;
  void enter_item(size_t index) override;
  void leave_item() override;
  void end_list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes the effective values as JSON, units in their canonical text form.
class JsonBinder : public Binder {
 public:
  JsonBinder();
  ~JsonBinder() override;
  template <class T>
  nlohmann::json dump(T& obj) {
    obj.bind(*this);
    return result();
  }
  nlohmann::json result() const;

  void field(const char* key, bool& v, const char* doc) override;
  void field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
             const char* unit) override;
  void field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
             const char* unit) override;
  void field(const char* key, double& v, const char* doc, double min, double max,
             const char* unit) override;
  void field(const char* key, std::string& v, const char* doc) override;
  void field(const char* key, Duration& v, const char* doc, Duration min, Duration max) override;
  void field(const char* key, Bandwidth& v, const char* doc) override;
  void field(const char* key, Frequency& v, const char* doc) override;
  void field(const char* key, Bytes& v, const char* doc, uint64_t min, uint64_t max) override;
  void choice(const char* key, std::string& v, const std::vector<std::string>& choices,
              const char* doc) override;
  void field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min,
             uint64_t max) override;
  void field(const char* key, std::map<std::string, std::string>& v, const char* doc) override;
  void field(const char* key, std::vector<std::string>& v, const char* doc) override;
  void error(const std::string&) override {}

 protected:
  bool enter_section(const char* key, const char* doc) override;
  void leave_section() override;
  ListPlan begin_list(const char* key, const char* doc, size_t current) override;
  void enter_item(size_t index) override;
  void leave_item() override;
  void end_list() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mprdma::core
