// A Binder for unit tests of bind() functions: records every key with its
// documentation, limits and unit, lets a test override integer-like values
// ("what if the scenario said lanes: 12") and collects bind() errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vp/core/config.h"

namespace mprdma::test {

class RecordingBinder : public core::Binder {
 public:
  struct Key {
    std::string doc;
    double min = 0, max = 0;
    std::string unit;
  };
  std::map<std::string, Key> keys;
  // Values to store into integer, size and duration (ps) fields by key.
  std::map<std::string, uint64_t> set;
  std::vector<std::string> errors;

  void field(const char* k, bool&, const char* doc) override { put(k, doc); }
  void field(const char* k, int64_t& v, const char* doc, int64_t mn, int64_t mx,
             const char* unit) override {
    put(k, doc, double(mn), double(mx), unit);
    if (set.count(k)) v = static_cast<int64_t>(set[k]);
  }
  void field(const char* k, uint64_t& v, const char* doc, uint64_t mn, uint64_t mx,
             const char* unit) override {
    put(k, doc, double(mn), double(mx), unit);
    if (set.count(k)) v = set[k];
  }
  void field(const char* k, double&, const char* doc, double mn, double mx,
             const char* unit) override {
    put(k, doc, mn, mx, unit);
  }
  void field(const char* k, std::string&, const char* doc) override { put(k, doc); }
  void field(const char* k, core::Duration& v, const char* doc, core::Duration,
             core::Duration) override {
    put(k, doc);
    if (set.count(k)) v.ps = set[k];
  }
  void field(const char* k, core::Bandwidth&, const char* doc) override { put(k, doc); }
  void field(const char* k, core::Frequency&, const char* doc) override { put(k, doc); }
  void field(const char* k, core::Bytes& v, const char* doc, uint64_t mn, uint64_t mx) override {
    put(k, doc, double(mn), double(mx));
    if (set.count(k)) v.n = set[k];
  }
  void choice(const char* k, std::string&, const std::vector<std::string>&,
              const char* doc) override {
    put(k, doc);
  }
  void field(const char* k, std::vector<core::Bytes>&, const char* doc, uint64_t,
             uint64_t) override {
    put(k, doc);
  }
  void field(const char* k, std::map<std::string, std::string>&, const char* doc) override {
    put(k, doc);
  }
  void error(const std::string& message) override { errors.push_back(message); }
  bool reading() const override { return true; }

 protected:
  bool enter_section(const char*, const char*) override { return true; }
  void leave_section() override {}
  ListPlan begin_list(const char*, const char*, size_t) override { return {}; }
  void enter_item(size_t) override {}
  void leave_item() override {}
  void end_list() override {}

 private:
  void put(const char* k, const char* doc, double mn = 0, double mx = 0, const char* unit = "") {
    keys[k] = Key{doc, mn, mx, unit};
  }
};

}  // namespace mprdma::test
