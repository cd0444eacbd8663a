#include "vp/core/results.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace mprdma::core {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// The slot a statistic goes to: results[group][owner][key], or
// results["other"][path] when the path does not follow the convention in
// stats.h (too short, or an empty component).
nlohmann::json& slot_for(nlohmann::json& results, const std::string& path) {
  static const std::pair<const char*, const char*> kGroups[] = {{"flow", "flows"},
                                                                {"nic", "nics"},
                                                                {"link", "links"},
                                                                {"pcie", "pcie"},
                                                                {"switch", "switches"}};
  std::vector<std::string> parts = split_path(path);
  if (parts.size() >= 3 && !parts[1].empty()) {
    for (const auto& [prefix, group] : kGroups) {
      if (parts[0] != prefix) continue;
      const std::string key = path.substr(parts[0].size() + 1 + parts[1].size() + 1);
      if (key.empty()) break;
      return results[group][parts[1]][key];
    }
  }
  return results["other"][path];
}

// Shortest decimal text that reads back as the same double.
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Writes via a temporary file and a rename, so a reader never sees a half
// written file and a failed run does not leave a truncated one behind.
void write_file(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw std::runtime_error("cannot write " + path.string() + ": " + ec.message());
  }
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw std::runtime_error("cannot create directory " + dir.string() + ": " +
                             (ec ? ec.message() : std::string("a file is in the way")));
}

std::string pretty(const nlohmann::json& j) {
  // Invalid UTF-8 in a name must not abort the run at the last moment.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string ps_to_seconds_text(uint64_t ps) {
  constexpr uint64_t kPsPerS = 1000000000000ull;
  std::string text = std::to_string(ps / kPsPerS);
  uint64_t frac = ps % kPsPerS;
  if (frac) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%012llu", static_cast<unsigned long long>(frac));
    std::string digits(buf);
    digits.erase(digits.find_last_not_of('0') + 1);
    text += "." + digits;
  }
  return text;
}

std::string series_csv_path(const std::string& stat_path) {
  std::string name = stat_path;
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  // A leading dot would make a hidden file (or "." / ".." a directory).
  if (name.empty() || name[0] == '.') name = "_" + name;
  return "series/" + name + ".csv";
}

nlohmann::json build_results(const RunMeta& meta, const StatsRegistry& stats,
                             const std::map<std::string, double>& metrics,
                             const nlohmann::json& config) {
  nlohmann::json r = nlohmann::json::object();
  r["schema"] = kResultsSchema;
  r["scenario"] = {{"name", meta.scenario_name}, {"file", meta.scenario_file}};
  r["seed"] = meta.seed;
  r["sim_time_s"] = static_cast<double>(meta.sim_time_ps) / 1e12;
  r["metrics"] = nlohmann::json::object();
  for (const auto& [name, value] : metrics) r["metrics"][name] = value;
  for (const char* group : {"flows", "nics", "links", "pcie", "switches", "other"})
    r[group] = nlohmann::json::object();

  for (const auto& [path, c] : stats.counters()) slot_for(r, path) = c->value();
  for (const auto& [path, h] : stats.histograms()) {
    slot_for(r, path) = {{"unit", h->info().unit},      {"count", h->count()},
                         {"mean", h->mean()},           {"min", h->min()},
                         {"p50", h->percentile(50)},    {"p99", h->percentile(99)},
                         {"p999", h->percentile(99.9)}, {"max", h->max()}};
  }
  for (const auto& [path, s] : stats.series()) {
    slot_for(r, path) = {
        {"unit", s->info().unit}, {"points", s->points().size()}, {"csv", series_csv_path(path)}};
  }
  r["config"] = config.is_null() ? nlohmann::json::object() : config;
  return r;
}

void write_results(const std::string& dir, const nlohmann::json& results,
                   const StatsRegistry& stats) {
  const fs::path base(dir);
  make_dirs(base);
  // An earlier run into the same directory must not leave its series
  // beside this one's (another scenario, or sampling off now): the CSVs in
  // series/ are ours to replace.
  const fs::path series_dir = base / "series";
  std::error_code ec;
  if (fs::is_directory(series_dir, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(series_dir, ec))
      if (e.path().extension() == ".csv") fs::remove(e.path(), ec);
    fs::remove(series_dir, ec);  // only if now empty
  }
  if (!stats.series().empty()) make_dirs(series_dir);
  for (const auto& [path, s] : stats.series()) {
    // The unit is a CSV header cell: a comma or line break would shift it.
    std::string unit = s->info().unit.empty() ? "value" : s->info().unit;
    for (char& c : unit)
      if (c == ',' || c == '\n' || c == '\r' || c == '"') c = '_';
    std::string csv = "time_s," + unit + "\n";
    for (const auto& p : s->points())
      csv += ps_to_seconds_text(p.time_ps) + "," + number_text(p.value) + "\n";
    write_file(base / series_csv_path(path), csv);
  }
  write_file(base / "results.json", pretty(results));
}

void write_run_info(const std::string& dir, const nlohmann::json& info) {
  const fs::path base(dir);
  make_dirs(base);
  write_file(base / "run.json", pretty(info));
}

}  // namespace mprdma::core
