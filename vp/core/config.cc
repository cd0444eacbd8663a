#include "vp/core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace mprdma::core {
namespace {

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string error_summary(const std::vector<std::string>& errors) {
  if (errors.size() == 1) return errors[0];
  return std::to_string(errors.size()) + " configuration errors:\n" + join(errors, "\n");
}

// Shortest text that reads back as the same double, so documentation and
// JSON show "0.5" rather than "0.50000000000000000".
std::string format_double(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The known key closest to `key`, or "" when none is close enough to be a
// plausible typo (roughly one edit per three characters).
std::string nearest_key(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& k : known) {
    size_t d = edit_distance(key, k);
    size_t limit = std::max<size_t>(1, std::max(key.size(), k.size()) / 3);
    if (d <= limit && (d < best_d || (d == best_d && k < best))) {
      best = k;
      best_d = d;
    }
  }
  return best;
}

const char* kind_name(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Undefined:
      break;
  }
  return "an undefined value";
}

std::string quoted_list(const std::vector<std::string>& items) {
  std::vector<std::string> q;
  for (const auto& s : items) q.push_back("'" + s + "'");
  return join(q, ", ");
}

// Parses a whole-string integer (decimal, or hexadecimal with 0x).
bool parse_integer(const std::string& text, bool is_signed, int64_t* s, uint64_t* u) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  if (!is_signed && text[0] == '-') return false;
  const char* begin = text.c_str();
  const char* digits = begin + ((text[0] == '+' || text[0] == '-') ? 1 : 0);
  int base = (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) ? 16 : 10;
  char* end = nullptr;
  errno = 0;
  if (is_signed)
    *s = std::strtoll(begin, &end, base);
  else
    *u = std::strtoull(begin, &end, base);
  return errno == 0 && end != begin && *end == '\0';
}

}  // namespace

ConfigError::ConfigError(const std::vector<std::string>& errors)
    : std::runtime_error(error_summary(errors)), errors_(errors) {}

// ---------------------------------------------------------------------------
// YamlBinder

struct YamlBinder::Impl {
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
    bool used = false;
  };
  // One struct being bound. `present` is false when the section is absent
  // (or was rejected): its fields then keep their defaults.
  struct Frame {
    std::string path;
    bool present = false;
    YAML::Mark mark;  // of the mapping, or of the nearest present ancestor
    std::vector<Entry> entries;
    std::vector<std::string> known;
  };
  // One list of structs being bound.
  struct ListFrame {
    std::string path;
    YAML::Node seq;
    bool present = false;
  };
  struct Error {
    int line, column;
    size_t seq;
    std::string text;
  };

  std::string file;
  std::vector<Frame> frames;
  std::vector<ListFrame> lists;
  std::vector<Error> errors;
  bool finished = false;

  static std::string child_path(const std::string& parent, const std::string& key) {
    return parent.empty() ? key : parent + "." + key;
  }

  void add_error(YAML::Mark mark, const std::string& path, const std::string& message) {
    // A null mark (empty document) is reported at the start of the file.
    int line = mark.is_null() ? 1 : mark.line + 1;
    int column = mark.is_null() ? 1 : mark.column + 1;
    std::string text = file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
    if (!path.empty()) text += path + ": ";
    text += message;
    errors.push_back(Error{line, column, errors.size(), std::move(text)});
  }

  // Opens a mapping as a new frame; duplicate and non-string keys are
  // reported here, once per mapping.
  void push_map(const std::string& path, const YAML::Node& node, YAML::Mark fallback) {
    Frame f;
    f.path = path;
    f.present = node.IsDefined() && (node.IsMap() || node.IsNull());
    f.mark = node.IsMap() ? node.Mark() : fallback;
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        // By value: yaml-cpp's operator-> hands out a temporary, and a
        // reference into it dangles at the end of this statement.
        const YAML::Node k = it->first;
        if (!k.IsScalar()) {
          add_error(k.Mark(), path, "keys must be plain names, got " + std::string(kind_name(k)));
          continue;
        }
        auto dup = std::find_if(f.entries.begin(), f.entries.end(),
                                [&](const Entry& e) { return e.key == k.Scalar(); });
        if (dup != f.entries.end()) {
          add_error(k.Mark(), child_path(path, k.Scalar()),
                    "duplicate key '" + k.Scalar() + "' (first given at line " +
                        std::to_string(dup->key_node.Mark().line + 1) + ")");
          continue;
        }
        f.entries.push_back(Entry{k.Scalar(), k, it->second});
      }
    }
    frames.push_back(std::move(f));
  }

  void pop_map() {
    Frame& f = frames.back();
    if (f.present) {
      std::vector<std::string> sorted = f.known;
      std::sort(sorted.begin(), sorted.end());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      for (const auto& e : f.entries) {
        if (e.used) continue;
        std::string msg = "unknown key '" + e.key + "' " +
                          (f.path.empty() ? std::string("at the top level") : "in " + f.path);
        msg += sorted.empty() ? " (no keys are accepted here)"
                              : " (known keys: " + join(sorted, ", ") + ")";
        std::string guess = nearest_key(e.key, sorted);
        if (!guess.empty()) msg += "; did you mean '" + guess + "'?";
        add_error(e.key_node.Mark(), child_path(f.path, e.key), msg);
      }
    }
    frames.pop_back();
  }

  // The value under `key` in the current frame, marking the key as known
  // and used. Returns false when the key is absent (keep the default).
  bool lookup(const char* key, Entry** out) {
    Frame& f = frames.back();
    f.known.push_back(key);
    if (!f.present) return false;
    for (auto& e : f.entries) {
      if (e.key == key) {
        e.used = true;
        *out = &e;
        return true;
      }
    }
    return false;
  }

  // Where to report a problem with an entry's value: the value itself, or
  // the key when the value is empty (yaml-cpp marks a null value at the
  // next token, which can be on a later line).
  static YAML::Mark value_mark(const Entry& e) {
    return e.value.IsNull() || e.value.Mark().is_null() ? e.key_node.Mark() : e.value.Mark();
  }

  // The scalar text of an entry, or an error naming what was expected.
  bool scalar(const Entry& e, const std::string& path, const char* expected, std::string* out) {
    if (e.value.IsScalar()) {
      *out = e.value.Scalar();
      return true;
    }
    add_error(value_mark(e), path,
              std::string("expected ") + expected + ", got " + kind_name(e.value));
    return false;
  }

  template <class Parse>
  void bind_scalar(const char* key, const char* expected, Parse parse) {
    Entry* e = nullptr;
    if (!lookup(key, &e)) return;
    std::string path = child_path(frames.back().path, key);
    std::string text;
    if (!scalar(*e, path, expected, &text)) return;
    std::string problem = parse(text);
    if (!problem.empty()) add_error(value_mark(*e), path, problem);
  }
};

namespace {

// " (ns)" after "expected an integer", or nothing without a unit.
std::string in_unit(const char* unit) {
  return unit && *unit ? std::string(" (") + unit + ")" : std::string();
}

std::string with_unit(const std::string& value, const char* unit) {
  return unit && *unit ? value + " " + unit : value;
}

template <class T>
std::string range_text(T min, T max, const char* unit, std::string (*fmt)(T)) {
  const bool has_min = min != std::numeric_limits<T>::lowest();
  const bool has_max = max != std::numeric_limits<T>::max();
  if (has_min && has_max)
    return "allowed range is " + fmt(min) + " to " + with_unit(fmt(max), unit);
  if (has_min) return "must be at least " + with_unit(fmt(min), unit);
  if (has_max) return "must be at most " + with_unit(fmt(max), unit);
  return "";
}

std::string fmt_i64(int64_t v) { return std::to_string(v); }
std::string fmt_u64(uint64_t v) { return std::to_string(v); }
std::string fmt_bytes(uint64_t v) { return to_string(Bytes{v}); }
std::string fmt_duration(uint64_t v) { return to_string(Duration{v}); }

bool unbounded_double(double v) { return std::isinf(v) || std::fabs(v) >= DBL_MAX; }

std::string double_range_text(double min, double max, const char* unit) {
  const bool has_min = !unbounded_double(min);
  const bool has_max = !unbounded_double(max);
  if (has_min && has_max)
    return "allowed range is " + format_double(min) + " to " + with_unit(format_double(max), unit);
  if (has_min) return "must be at least " + with_unit(format_double(min), unit);
  if (has_max) return "must be at most " + with_unit(format_double(max), unit);
  return "";
}

}  // namespace

YamlBinder::YamlBinder(const YAML::Node& root, std::string file) : impl_(std::make_unique<Impl>()) {
  impl_->file = std::move(file);
  if (root.IsDefined() && !root.IsMap() && !root.IsNull()) {
    impl_->add_error(root.Mark(), "",
                     std::string("the document must be a mapping of keys, got ") + kind_name(root));
    impl_->push_map("", YAML::Node(YAML::NodeType::Undefined), root.Mark());
    impl_->frames.back().present = false;
  } else {
    impl_->push_map("", root, root.Mark());
  }
}

YamlBinder::~YamlBinder() = default;

void YamlBinder::finish() {
  if (!impl_->finished) {
    impl_->finished = true;
    while (!impl_->frames.empty()) impl_->pop_map();
  }
  if (impl_->errors.empty()) return;
  // Report in file order, like a compiler; equal positions keep the order
  // in which they were found.
  std::vector<Impl::Error> sorted = impl_->errors;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Impl::Error& a, const Impl::Error& b) {
    return std::tie(a.line, a.column, a.seq) < std::tie(b.line, b.column, b.seq);
  });
  std::vector<std::string> lines;
  for (const auto& e : sorted) lines.push_back(e.text);
  throw ConfigError(lines);
}

void YamlBinder::error(const std::string& message) {
  if (impl_->frames.empty()) {
    impl_->add_error(YAML::Mark::null_mark(), "", message);
    return;
  }
  const Impl::Frame& f = impl_->frames.back();
  impl_->add_error(f.mark, f.path, message);
}

void YamlBinder::field(const char* key, bool& v, const char* doc) {
  impl_->bind_scalar(key, "true or false", [&](const std::string& text) -> std::string {
    if (text == "true") {
      v = true;
    } else if (text == "false") {
      v = false;
    } else {
      return "expected true or false, got '" + text + "'";
    }
    return "";
  });
}

void YamlBinder::field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
                       const char* unit) {
  impl_->bind_scalar(key, "an integer", [&](const std::string& text) -> std::string {
    int64_t x = 0;
    uint64_t unused = 0;
    if (!parse_integer(text, true, &x, &unused))
      return "expected an integer" + in_unit(unit) + ", got '" + text + "'";
    if (x < min || x > max)
      return with_unit(text, unit) + " is out of range: " + range_text(min, max, unit, fmt_i64);
    v = x;
    return "";
  });
}

void YamlBinder::field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
                       const char* unit) {
  impl_->bind_scalar(key, "a non-negative integer", [&](const std::string& text) -> std::string {
    int64_t unused = 0;
    uint64_t x = 0;
    if (!parse_integer(text, false, &unused, &x))
      return "expected a non-negative integer" + in_unit(unit) + ", got '" + text + "'";
    if (x < min || x > max)
      return with_unit(text, unit) + " is out of range: " + range_text(min, max, unit, fmt_u64);
    v = x;
    return "";
  });
}

void YamlBinder::field(const char* key, double& v, const char* doc, double min, double max,
                       const char* unit) {
  impl_->bind_scalar(key, "a number", [&](const std::string& text) -> std::string {
    const char* s = text.c_str();
    char* end = nullptr;
    double x = std::strtod(s, &end);
    if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || end == s ||
        *end != '\0' || !std::isfinite(x))
      return "expected a number" + in_unit(unit) + ", got '" + text + "'";
    if (x < min || x > max)
      return with_unit(text, unit) + " is out of range: " + double_range_text(min, max, unit);
    v = x;
    return "";
  });
}

void YamlBinder::field(const char* key, std::string& v, const char* doc) {
  impl_->bind_scalar(key, "a string", [&](const std::string& text) -> std::string {
    v = text;
    return "";
  });
}

void YamlBinder::field(const char* key, Duration& v, const char* doc, Duration min, Duration max) {
  impl_->bind_scalar(key, "a duration (e.g. 1.5us)", [&](const std::string& text) -> std::string {
    Duration d;
    try {
      d = parse_duration(text);
    } catch (const UnitError& e) {
      return e.what();
    }
    if (d.ps < min.ps || d.ps > max.ps)
      return "'" + text +
             "' is out of range: " + range_text<uint64_t>(min.ps, max.ps, "", fmt_duration);
    v = d;
    return "";
  });
}

void YamlBinder::field(const char* key, Bandwidth& v, const char* doc) {
  impl_->bind_scalar(key, "a rate (e.g. 40Gbps)", [&](const std::string& text) -> std::string {
    try {
      v = parse_bandwidth(text);
    } catch (const UnitError& e) {
      return e.what();
    }
    return "";
  });
}

void YamlBinder::field(const char* key, Frequency& v, const char* doc) {
  impl_->bind_scalar(key, "a frequency (e.g. 250MHz)", [&](const std::string& text) -> std::string {
    try {
      v = parse_frequency(text);
    } catch (const UnitError& e) {
      return e.what();
    }
    return "";
  });
}

namespace {
// Parses and range-checks one size; returns the problem or "".
std::string parse_size(const std::string& text, uint64_t min, uint64_t max, Bytes* out) {
  try {
    *out = parse_bytes(text);
  } catch (const UnitError& e) {
    return e.what();
  }
  if (out->n < min || out->n > max)
    return "'" + text + "' is out of range: " + range_text<uint64_t>(min, max, "", fmt_bytes);
  return "";
}
}  // namespace

void YamlBinder::field(const char* key, Bytes& v, const char* doc, uint64_t min, uint64_t max) {
  impl_->bind_scalar(key, "a size (e.g. 4KiB)", [&](const std::string& text) -> std::string {
    Bytes b;
    std::string problem = parse_size(text, min, max, &b);
    if (problem.empty()) v = b;
    return problem;
  });
}

void YamlBinder::choice(const char* key, std::string& v, const std::vector<std::string>& choices,
                        const char* doc) {
  impl_->bind_scalar(key, "a string", [&](const std::string& text) -> std::string {
    if (std::find(choices.begin(), choices.end(), text) != choices.end()) {
      v = text;
      return "";
    }
    std::string msg = "'" + text + "' is not allowed; expected one of " + quoted_list(choices);
    std::string guess = nearest_key(text, choices);
    if (!guess.empty()) msg += "; did you mean '" + guess + "'?";
    return msg;
  });
}

void YamlBinder::field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min,
                       uint64_t max) {
  Impl::Entry* e = nullptr;
  if (!impl_->lookup(key, &e)) return;
  const std::string path = Impl::child_path(impl_->frames.back().path, key);
  if (!e->value.IsSequence()) {
    impl_->add_error(
        Impl::value_mark(*e), path,
        std::string("expected a list of sizes (e.g. [4KiB, 64KiB]), got ") + kind_name(e->value));
    return;
  }
  std::vector<Bytes> out;
  bool ok = true;
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    if (!item.IsScalar()) {
      impl_->add_error(item.Mark().is_null() ? e->value.Mark() : item.Mark(), item_path,
                       std::string("expected a size (e.g. 4KiB), got ") + kind_name(item));
      ok = false;
      continue;
    }
    Bytes b;
    std::string problem = parse_size(item.Scalar(), min, max, &b);
    if (!problem.empty()) {
      impl_->add_error(item.Mark(), item_path, problem);
      ok = false;
    }
    out.push_back(b);
  }
  if (ok) v = std::move(out);
}

void YamlBinder::field(const char* key, std::map<std::string, std::string>& v, const char* doc) {
  Impl::Entry* e = nullptr;
  if (!impl_->lookup(key, &e)) return;
  const std::string path = Impl::child_path(impl_->frames.back().path, key);
  if (e->value.IsNull()) {
    v.clear();
    return;
  }
  if (!e->value.IsMap()) {
    impl_->add_error(
        Impl::value_mark(*e), path,
        std::string("expected a mapping of names to strings, got ") + kind_name(e->value));
    return;
  }
  std::map<std::string, std::string> out;
  bool ok = true;
  for (auto it = e->value.begin(); it != e->value.end(); ++it) {
    // By value: a reference into yaml-cpp's temporary from operator-> dangles.
    const YAML::Node k = it->first;
    const YAML::Node val = it->second;
    if (!k.IsScalar()) {
      impl_->add_error(k.Mark(), path,
                       "keys must be plain names, got " + std::string(kind_name(k)));
      ok = false;
      continue;
    }
    const std::string item_path = path + "." + k.Scalar();
    if (out.count(k.Scalar())) {
      impl_->add_error(k.Mark(), item_path, "duplicate key '" + k.Scalar() + "'");
      ok = false;
      continue;
    }
    if (!val.IsScalar()) {
      impl_->add_error(val.IsNull() ? k.Mark() : val.Mark(), item_path,
                       std::string("expected a string, got ") + kind_name(val));
      ok = false;
      continue;
    }
    out[k.Scalar()] = val.Scalar();
  }
  if (ok) v = std::move(out);
}

void YamlBinder::field(const char* key, std::vector<std::string>& v, const char* doc) {
  Impl::Entry* e = nullptr;
  if (!impl_->lookup(key, &e)) return;
  const std::string path = Impl::child_path(impl_->frames.back().path, key);
  if (e->value.IsNull()) {
    v.clear();
    return;
  }
  if (!e->value.IsSequence()) {
    impl_->add_error(Impl::value_mark(*e), path,
                     std::string("expected a list of values, got ") + kind_name(e->value));
    return;
  }
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < e->value.size(); ++i) {
    const YAML::Node item = e->value[i];
    if (!item.IsScalar()) {
      impl_->add_error(item.Mark().is_null() ? e->value.Mark() : item.Mark(),
                       path + "[" + std::to_string(i) + "]",
                       std::string("expected a single value, got ") + kind_name(item));
      ok = false;
      continue;
    }
    out.push_back(item.Scalar());
  }
  if (ok) v = std::move(out);
}

bool YamlBinder::enter_section(const char* key, const char* doc) {
  Impl::Entry* e = nullptr;
  const Impl::Frame& parent = impl_->frames.back();
  const std::string path = Impl::child_path(parent.path, key);
  const YAML::Mark parent_mark = parent.mark;
  if (!impl_->lookup(key, &e)) {
    // Absent: bind() still runs so that cross-field checks and derived
    // values see the defaults, but every field keeps its default.
    impl_->push_map(path, YAML::Node(YAML::NodeType::Undefined), parent_mark);
    return true;
  }
  if (!e->value.IsMap() && !e->value.IsNull()) {
    impl_->add_error(
        Impl::value_mark(*e), path,
        std::string("expected a mapping (section '") + key + "'), got " + kind_name(e->value));
    return false;
  }
  // An empty section ("nic:" with everything commented out) is an empty
  // mapping.
  impl_->push_map(path, e->value, e->value.IsMap() ? e->value.Mark() : e->key_node.Mark());
  return true;
}

void YamlBinder::leave_section() { impl_->pop_map(); }

Binder::ListPlan YamlBinder::begin_list(const char* key, const char* doc, size_t current) {
  Impl::Entry* e = nullptr;
  const std::string path = Impl::child_path(impl_->frames.back().path, key);
  Impl::ListFrame lf;
  lf.path = path;
  ListPlan plan;
  if (impl_->lookup(key, &e)) {
    if (e->value.IsSequence()) {
      lf.seq = e->value;
      lf.present = true;
      plan.bind = true;
      plan.count = e->value.size();
    } else if (e->value.IsNull()) {
      // "hosts:" with no items: an empty list.
      plan.bind = true;
      plan.count = 0;
    } else {
      impl_->add_error(Impl::value_mark(*e), path,
                       std::string("expected a list of mappings, got ") + kind_name(e->value));
    }
  }
  impl_->lists.push_back(std::move(lf));
  return plan;
}

void YamlBinder::enter_item(size_t index) {
  const Impl::ListFrame& lf = impl_->lists.back();
  const std::string path = lf.path + "[" + std::to_string(index) + "]";
  if (!lf.present) {
    impl_->push_map(path, YAML::Node(YAML::NodeType::Undefined), impl_->frames.back().mark);
    return;
  }
  const YAML::Node item = lf.seq[index];
  if (!item.IsMap()) {
    impl_->add_error(item.Mark().is_null() ? lf.seq.Mark() : item.Mark(), path,
                     std::string("each item must be a mapping, got ") + kind_name(item));
    impl_->push_map(path, YAML::Node(YAML::NodeType::Undefined), lf.seq.Mark());
    return;
  }
  impl_->push_map(path, item, item.Mark());
}

void YamlBinder::leave_item() { impl_->pop_map(); }

void YamlBinder::end_list() { impl_->lists.pop_back(); }

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({path + ": cannot open file: " + std::strerror(errno)});
  try {
    return YAML::Load(in);
  } catch (const YAML::ParserException& e) {
    throw ConfigError({path + ":" + std::to_string(e.mark.line + 1) + ":" +
                       std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg});
  } catch (const YAML::Exception& e) {
    throw ConfigError({path + ": YAML error: " + e.msg});
  }
}

// ---------------------------------------------------------------------------
// DocBinder

struct DocBinder::Impl {
  struct Row {
    std::string key, type, def, limits, doc;
  };
  struct Section {
    std::string path, doc;
    std::vector<Row> rows;
  };
  std::string title;
  std::vector<Section> sections;  // in the order first entered (pre-order)
  std::vector<size_t> stack;      // indices into sections
  std::vector<std::string> list_paths;

  Section& current() { return sections[stack.back()]; }
  std::string child_path(const std::string& key) {
    const std::string& p = current().path;
    return p.empty() ? key : p + "." + key;
  }
  void row(const char* key, std::string type, std::string def, std::string limits,
           const char* doc) {
    current().rows.push_back(
        Row{key, std::move(type), std::move(def), std::move(limits), doc ? doc : ""});
  }
  void open(const std::string& path, const char* doc) {
    sections.push_back(Section{path, doc ? doc : "", {}});
    stack.push_back(sections.size() - 1);
  }
};

namespace {

// Table cells: a '|' would split the cell and a newline would end the row.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string code(const std::string& text) { return "`" + text + "`"; }

std::string type_with_unit(const char* type, const char* unit) {
  return unit && *unit ? std::string(type) + " (" + unit + ")" : type;
}

template <class T>
std::string doc_limits(T min, T max, std::string (*fmt)(T)) {
  const bool has_min = min != std::numeric_limits<T>::lowest();
  const bool has_max = max != std::numeric_limits<T>::max();
  if (has_min && has_max) return fmt(min) + " to " + fmt(max);
  if (has_min) return ">= " + fmt(min);
  if (has_max) return "<= " + fmt(max);
  return "";
}

}  // namespace

DocBinder::DocBinder(std::string title) : impl_(std::make_unique<Impl>()) {
  impl_->title = std::move(title);
  impl_->open("", "");
}

DocBinder::~DocBinder() = default;

std::string DocBinder::markdown() const {
  std::ostringstream os;
  os << "# " << impl_->title << "\n";
  for (const auto& s : impl_->sections) {
    os << "\n## " << (s.path.empty() ? std::string("Top level") : code(s.path)) << "\n\n";
    if (!s.doc.empty()) os << s.doc << "\n\n";
    if (s.rows.empty()) {
      os << "No keys.\n";
      continue;
    }
    os << "| key | type | default | limits | description |\n";
    os << "|---|---|---|---|---|\n";
    for (const auto& r : s.rows) {
      os << "| " << code(r.key) << " | " << cell(r.type) << " | "
         << (r.def.empty() ? "" : code(cell(r.def))) << " | " << cell(r.limits) << " | "
         << cell(r.doc) << " |\n";
    }
  }
  return os.str();
}

void DocBinder::field(const char* key, bool& v, const char* doc) {
  impl_->row(key, "bool", v ? "true" : "false", "true, false", doc);
}

void DocBinder::field(const char* key, int64_t& v, const char* doc, int64_t min, int64_t max,
                      const char* unit) {
  impl_->row(key, type_with_unit("integer", unit), std::to_string(v), doc_limits(min, max, fmt_i64),
             doc);
}

void DocBinder::field(const char* key, uint64_t& v, const char* doc, uint64_t min, uint64_t max,
                      const char* unit) {
  impl_->row(key, type_with_unit("integer", unit), std::to_string(v), doc_limits(min, max, fmt_u64),
             doc);
}

void DocBinder::field(const char* key, double& v, const char* doc, double min, double max,
                      const char* unit) {
  std::string limits;
  const bool has_min = !unbounded_double(min), has_max = !unbounded_double(max);
  if (has_min && has_max)
    limits = format_double(min) + " to " + format_double(max);
  else if (has_min)
    limits = ">= " + format_double(min);
  else if (has_max)
    limits = "<= " + format_double(max);
  impl_->row(key, type_with_unit("number", unit), format_double(v), limits, doc);
}

void DocBinder::field(const char* key, std::string& v, const char* doc) {
  impl_->row(key, "string", "\"" + v + "\"", "", doc);
}

void DocBinder::field(const char* key, Duration& v, const char* doc, Duration min, Duration max) {
  impl_->row(key, "duration", to_string(v), doc_limits<uint64_t>(min.ps, max.ps, fmt_duration),
             doc);
}

void DocBinder::field(const char* key, Bandwidth& v, const char* doc) {
  impl_->row(key, "rate", to_string(v), "1bps to 100Tbps", doc);
}

void DocBinder::field(const char* key, Frequency& v, const char* doc) {
  impl_->row(key, "frequency", to_string(v), "1Hz to 100GHz", doc);
}

void DocBinder::field(const char* key, Bytes& v, const char* doc, uint64_t min, uint64_t max) {
  impl_->row(key, "size", to_string(v), doc_limits<uint64_t>(min, max, fmt_bytes), doc);
}

void DocBinder::choice(const char* key, std::string& v, const std::vector<std::string>& choices,
                       const char* doc) {
  impl_->row(key, "choice", v, "one of: " + join(choices, ", "), doc);
}

void DocBinder::field(const char* key, std::vector<Bytes>& v, const char* doc, uint64_t min,
                      uint64_t max) {
  std::vector<std::string> items;
  for (const auto& b : v) items.push_back(to_string(b));
  std::string limits = doc_limits<uint64_t>(min, max, fmt_bytes);
  impl_->row(key, "list of sizes", "[" + join(items, ", ") + "]",
             limits.empty() ? "" : "each " + limits, doc);
}

void DocBinder::field(const char* key, std::map<std::string, std::string>& v, const char* doc) {
  std::vector<std::string> items;
  for (const auto& [k, val] : v) items.push_back(k + ": " + val);
  impl_->row(key, "map of name to string", "{" + join(items, ", ") + "}", "", doc);
}

void DocBinder::field(const char* key, std::vector<std::string>& v, const char* doc) {
  impl_->row(key, "list of values", "[" + join(v, ", ") + "]", "", doc);
}

bool DocBinder::enter_section(const char* key, const char* doc) {
  const std::string path = impl_->child_path(key);
  impl_->row(key, "section", "", "",
             (std::string(doc ? doc : "") + " (see " + code(path) + ")").c_str());
  impl_->open(path, doc);
  return true;
}

void DocBinder::leave_section() { impl_->stack.pop_back(); }

Binder::ListPlan DocBinder::begin_list(const char* key, const char* doc, size_t current) {
  const std::string path = impl_->child_path(key) + "[]";
  impl_->row(key, "list of sections", "", "",
             (std::string(doc ? doc : "") + " (each item: see " + code(path) + ")").c_str());
  impl_->list_paths.push_back(path);
  impl_->open(path, doc);
  ListPlan plan;
  plan.describe_prototype = true;
  return plan;
}

void DocBinder::enter_item(size_t) {}
void DocBinder::leave_item() {}

void DocBinder::end_list() {
  impl_->stack.pop_back();
  impl_->list_paths.pop_back();
}

// ---------------------------------------------------------------------------
// JsonBinder

struct JsonBinder::Impl {
  nlohmann::json root = nlohmann::json::object();
  // Objects or arrays being filled; elements of nlohmann's object maps are
  // stable, and an array only grows while its latest item is on top.
  std::vector<nlohmann::json*> stack{&root};
  nlohmann::json& top() { return *stack.back(); }
};

JsonBinder::JsonBinder() : impl_(std::make_unique<Impl>()) {}
JsonBinder::~JsonBinder() = default;

nlohmann::json JsonBinder::result() const { return impl_->root; }

void JsonBinder::field(const char* key, bool& v, const char*) { impl_->top()[key] = v; }
void JsonBinder::field(const char* key, int64_t& v, const char*, int64_t, int64_t, const char*) {
  impl_->top()[key] = v;
}
void JsonBinder::field(const char* key, uint64_t& v, const char*, uint64_t, uint64_t, const char*) {
  impl_->top()[key] = v;
}
void JsonBinder::field(const char* key, double& v, const char*, double, double, const char*) {
  impl_->top()[key] = v;
}
void JsonBinder::field(const char* key, std::string& v, const char*) { impl_->top()[key] = v; }
void JsonBinder::field(const char* key, Duration& v, const char*, Duration, Duration) {
  impl_->top()[key] = to_string(v);
}
void JsonBinder::field(const char* key, Bandwidth& v, const char*) {
  impl_->top()[key] = to_string(v);
}
void JsonBinder::field(const char* key, Frequency& v, const char*) {
  impl_->top()[key] = to_string(v);
}
void JsonBinder::field(const char* key, Bytes& v, const char*, uint64_t, uint64_t) {
  impl_->top()[key] = to_string(v);
}
void JsonBinder::choice(const char* key, std::string& v, const std::vector<std::string>&,
                        const char*) {
  impl_->top()[key] = v;
}
void JsonBinder::field(const char* key, std::vector<Bytes>& v, const char*, uint64_t, uint64_t) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& b : v) arr.push_back(to_string(b));
  impl_->top()[key] = std::move(arr);
}
void JsonBinder::field(const char* key, std::map<std::string, std::string>& v, const char*) {
  nlohmann::json obj = nlohmann::json::object();
  for (const auto& [k, val] : v) obj[k] = val;
  impl_->top()[key] = std::move(obj);
}

void JsonBinder::field(const char* key, std::vector<std::string>& v, const char*) {
  impl_->top()[key] = v;
}

bool JsonBinder::enter_section(const char* key, const char*) {
  nlohmann::json& obj = impl_->top()[key];
  obj = nlohmann::json::object();
  impl_->stack.push_back(&obj);
  return true;
}

void JsonBinder::leave_section() { impl_->stack.pop_back(); }

Binder::ListPlan JsonBinder::begin_list(const char* key, const char*, size_t current) {
  nlohmann::json& arr = impl_->top()[key];
  arr = nlohmann::json::array();
  impl_->stack.push_back(&arr);
  ListPlan plan;
  plan.bind = true;
  plan.count = current;  // resize() to the same size: the items stay as they are
  return plan;
}

void JsonBinder::enter_item(size_t) {
  nlohmann::json& arr = impl_->top();
  arr.push_back(nlohmann::json::object());
  impl_->stack.push_back(&arr.back());
}

void JsonBinder::leave_item() { impl_->stack.pop_back(); }
void JsonBinder::end_list() { impl_->stack.pop_back(); }

}  // namespace mprdma::core
