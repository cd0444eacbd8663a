#include "vp/host/flow_sizes.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mprdma::host {
namespace {

// The web-search workload of DCTCP (Alizadeh et al., SIGCOMM 2010, Fig. 4:
// flow sizes of a production search cluster), in the tabulation that
// pFabric, HPCC and the RDMA transport papers simulate with: heavy-tailed,
// ~62 % of flows below 1 MB but most bytes in flows of 1-30 MB; mean
// ~1.71 MB with linear interpolation.
const std::vector<FlowSizes::Point> kWebSearch = {
    {0, 0.0},        {10000, 0.15},   {20000, 0.20},    {30000, 0.30},
    {50000, 0.40},   {80000, 0.53},   {200000, 0.60},   {1000000, 0.70},
    {2000000, 0.80}, {5000000, 0.90}, {10000000, 0.97}, {30000000, 1.0},
};

}  // namespace

FlowSizes::FlowSizes(std::vector<Point> points) : points_(std::move(points)) {
  if (points_.empty()) throw std::invalid_argument("a flow-size CDF needs points");
  for (size_t i = 0; i < points_.size(); ++i) {
    const Point& p = points_[i];
    if (!(p.cdf >= 0.0 && p.cdf <= 1.0))
      throw std::invalid_argument("flow-size CDF point " + std::to_string(i) +
                                  ": probability outside [0, 1]");
    if (i && (p.bytes <= points_[i - 1].bytes || p.cdf < points_[i - 1].cdf))
      throw std::invalid_argument("flow-size CDF point " + std::to_string(i) +
                                  ": sizes must increase and probabilities not decrease");
  }
  if (points_.back().cdf != 1.0)
    throw std::invalid_argument("flow-size CDF must end at probability 1");
  if (points_.back().bytes == 0) throw std::invalid_argument("flow-size CDF of empty flows");
  // Mass below the first point sits at its size; each segment's mass is
  // spread uniformly between its ends (the interpolation draw() uses).
  mean_ = points_.front().cdf * double(points_.front().bytes);
  for (size_t i = 1; i < points_.size(); ++i)
    mean_ += (points_[i].cdf - points_[i - 1].cdf) * 0.5 *
             (double(points_[i].bytes) + double(points_[i - 1].bytes));
}

const FlowSizes& FlowSizes::named(const std::string& name) {
  static const FlowSizes web_search(kWebSearch);
  if (name == "web_search") return web_search;
  throw std::invalid_argument("unknown flow-size distribution '" + name + "'");
}

std::vector<std::string> FlowSizes::names() { return {"web_search"}; }

void FlowSizeCdfConfig::PointEntry::bind(core::Binder& b) {
  b.field("bytes", bytes, "Flow size (e.g. 10KB, 2MB; KB = 1000 bytes).");
  b.field("cdf", cdf, "Probability that a flow is at most this size.", 0.0, 1.0);
}

void FlowSizeCdfConfig::bind(core::Binder& b) {
  b.field("name", name,
          "Name that jobs' flow_sizes give; it may not be a built-in one (web_search).");
  b.list("points", points,
         "The CDF: sizes increasing, probabilities not decreasing, the last 1. A flow's size "
         "is drawn by inverse transform, interpolated linearly between points (mass below the "
         "first point sits at its size), as pFabric's and HPCC's generators draw them.");
  if (!b.reading()) return;
  if (name.empty() || name.find_first_of(".,()|*= ") != std::string::npos)
    b.error(
        "every flow_size_cdfs entry needs a name without dots, commas, parentheses or "
        "spaces");
  const std::vector<std::string> builtin = FlowSizes::names();
  if (std::find(builtin.begin(), builtin.end(), name) != builtin.end())
    b.error("flow_size_cdfs '" + name + "' would hide the built-in distribution of that name");
  try {
    (void)distribution();
  } catch (const std::invalid_argument& e) {
    b.error("flow_size_cdfs '" + name + "': " + e.what());
  }
}

FlowSizes FlowSizeCdfConfig::distribution() const {
  std::vector<FlowSizes::Point> p;
  p.reserve(points.size());
  for (const PointEntry& e : points) p.push_back({e.bytes.n, e.cdf});
  return FlowSizes(std::move(p));
}

uint64_t FlowSizes::draw(core::RandomStream& rng) const {
  const double u = rng.uniform();
  // First point whose probability exceeds u (u < 1 <= the last one's).
  auto it = std::upper_bound(points_.begin(), points_.end(), u,
                             [](double v, const Point& p) { return v < p.cdf; });
  double bytes;
  if (it == points_.begin()) {
    bytes = double(it->bytes);
  } else {
    const Point& lo = *(it - 1);
    const double span = it->cdf - lo.cdf;  // > 0: u lies in [lo.cdf, it->cdf)
    bytes = double(lo.bytes) + (u - lo.cdf) / span * double(it->bytes - lo.bytes);
  }
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(bytes)));
}

}  // namespace mprdma::host
