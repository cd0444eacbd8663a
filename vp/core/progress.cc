#include "vp/core/progress.h"

#include <cstdio>
#include <ostream>
#include <utility>

namespace mprdma::core {
namespace {

std::chrono::nanoseconds steady_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

// Simulated time in the largest unit that keeps at least one integer digit.
std::string sim_time_text(uint64_t ps) {
  static const std::pair<const char*, double> kUnits[] = {
      {"s", 1e12}, {"ms", 1e9}, {"us", 1e6}, {"ns", 1e3}};
  char buf[48];
  for (const auto& [unit, scale] : kUnits) {
    if (static_cast<double>(ps) >= scale) {
      std::snprintf(buf, sizeof buf, "%.3f %s", static_cast<double>(ps) / scale, unit);
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%llu ps", static_cast<unsigned long long>(ps));
  return buf;
}

std::string rate_text(double per_s) {
  char buf[48];
  if (per_s >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", per_s / 1e9);
  else if (per_s >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", per_s / 1e6);
  else if (per_s >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2fk", per_s / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f", per_s);
  return buf;
}

}  // namespace

ProgressReporter::ProgressReporter(std::ostream& os, bool enabled)
    : ProgressReporter(os, enabled, steady_now) {}

ProgressReporter::ProgressReporter(std::ostream& os, bool enabled, Clock clock,
                                   uint32_t check_every, std::chrono::nanoseconds redraw_interval)
    : os_(os),
      enabled_(enabled),
      clock_(std::move(clock)),
      check_every_(check_every ? check_every : 1),
      redraw_interval_(redraw_interval) {
  if (enabled_) start_ = last_draw_ = now_ = clock_();
}

void ProgressReporter::update(uint64_t sim_time_ps, uint64_t events) {
  if (!enabled_) return;
  sim_ps_ = sim_time_ps;
  events_ = events;
  if (++calls_ < check_every_) return;
  calls_ = 0;
  now_ = clock_();
  if (now_ - last_draw_ < redraw_interval_) return;
  last_draw_ = now_;
  draw();
}

std::string ProgressReporter::line() const {
  const double wall_s = std::chrono::duration<double>(now_ - start_).count();
  const double sim_s = static_cast<double>(sim_ps_) / 1e12;
  char buf[160];
  std::string text = "sim " + sim_time_text(sim_ps_);
  std::snprintf(buf, sizeof buf, " | wall %.1f s", wall_s);
  text += buf;
  text +=
      " | " + (wall_s > 0 ? rate_text(static_cast<double>(events_) / wall_s) : "-") + " events/s";
  if (sim_s > 0) {
    const double slowdown = wall_s / sim_s;
    // Slowdowns of simulations span 1e-2 to 1e7; no exponent notation.
    std::snprintf(buf, sizeof buf, slowdown >= 100 ? " | slowdown %.0fx" : " | slowdown %.2fx",
                  slowdown);
    text += buf;
  } else {
    text += " | slowdown -";
  }
  return text;
}

void ProgressReporter::draw() {
  std::string text = line();
  const size_t width = text.size();
  // Blank out what is left of a longer previous line.
  if (width < last_width_) text.append(last_width_ - width, ' ');
  last_width_ = width;
  os_ << '\r' << text << std::flush;
  ++redraws_;
}

void ProgressReporter::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  now_ = clock_();
  draw();
  os_ << '\n' << std::flush;
}

}  // namespace mprdma::core
