// Flow-size distributions for flow workloads (write_flows): an empirical
// CDF of flow sizes, sampled by inverse transform with linear interpolation
// between its points, as datacenter-transport simulations conventionally
// draw them (pFabric, HPCC, the IRN and MP-RDMA evaluations).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vp/core/config.h"
#include "vp/core/random.h"
#include "vp/core/units.h"

namespace mprdma::host {

class FlowSizes {
 public:
  struct Point {
    uint64_t bytes;  // flow size
    double cdf;      // P(size <= bytes)
  };
  // Points in increasing size and non-decreasing probability, the last at
  // probability 1; throws std::invalid_argument naming what is wrong.
  explicit FlowSizes(std::vector<Point> points);
  // A built-in distribution by name: "web_search" (DCTCP). Throws
  // std::invalid_argument for an unknown name.
  static const FlowSizes& named(const std::string& name);
  static std::vector<std::string> names();

  // One flow size, at least 1 byte: one uniform draw from `rng`.
  uint64_t draw(core::RandomStream& rng) const;
  // The exact mean of what draw() returns (before rounding), in bytes.
  double mean_bytes() const { return mean_; }
  uint64_t max_bytes() const { return points_.back().bytes; }
  const std::vector<Point>& points() const { return points_; }

 private:
  std::vector<Point> points_;
  double mean_ = 0;
};

// A flow-size distribution a scenario defines (its flow_size_cdfs list), for
// the flow_sizes key of its write_flows jobs: any workload the built-ins do
// not cover (Hadoop, data mining, storage), written as CDF points.
struct FlowSizeCdfConfig {
  struct PointEntry {
    core::Bytes bytes{0};
    double cdf = 0;
    void bind(core::Binder& b);
  };
  std::string name;
  std::vector<PointEntry> points;
  void bind(core::Binder& b);
  // The distribution; throws std::invalid_argument for a malformed CDF.
  FlowSizes distribution() const;
};

}  // namespace mprdma::host
