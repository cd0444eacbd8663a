// The NIC's on-chip memory budget (issue 6, item 1): one SRAM of a fixed
// size that holds fixed regions (the caches: their sram_bytes()) and
// per-connection regions (transport state such as MP-RDMA's bitmap and
// window), the latter multiplied by the number of connections the NIC is
// configured for. An architect changes the split and sees at once whether it
// fits, by how much it does not, what one connection costs and how many
// connections the rest of the SRAM would hold.
//
// Regions are laid out in the order they are added, fixed ones and
// per-connection ones interleaved as added; the first region that ends past
// the SRAM is the one named as overflowing. Plain arithmetic, no timing.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mprdma::nic::uarch {

// A configuration that does not fit; what() is the check() message.
struct SramBudgetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class SramBudget {
 public:
  struct Region {
    std::string name;
    bool per_connection = false;  // bytes is per connection, times connections()
    uint64_t bytes = 0;           // fixed size, or bytes per connection
  };

  // Throws std::invalid_argument if total_bytes is 0.
  explicit SramBudget(uint64_t total_bytes, uint64_t connections = 0);

  // Names must be unique and non-empty (std::invalid_argument otherwise).
  void add_fixed(const std::string& name, uint64_t bytes);
  void add_per_connection(const std::string& name, uint64_t bytes_per_connection);
  void set_connections(uint64_t connections) { connections_ = connections; }

  uint64_t total_bytes() const { return total_; }
  uint64_t connections() const { return connections_; }
  const std::vector<Region>& regions() const { return regions_; }
  // Bytes one region takes with the configured connection count.
  uint64_t region_bytes(const Region& r) const;
  uint64_t fixed_bytes() const;           // sum of the fixed regions
  uint64_t bytes_per_connection() const;  // sum of the per-connection regions
  uint64_t used_bytes() const;            // fixed + connections * per connection
  // Bytes left after the fixed regions and the configured connections; 0 if
  // the configuration does not fit (see overflow_bytes()).
  uint64_t free_bytes() const;
  uint64_t overflow_bytes() const;  // used - total when it does not fit, else 0
  bool fits() const { return used_bytes() <= total_; }
  // Connections whose per-connection state fits beside the fixed regions:
  // (total - fixed) / bytes_per_connection (0 if the fixed regions alone do
  // not fit; UINT64_MAX if no region is per connection).
  uint64_t max_connections() const;

  // "" when the configuration fits; otherwise one sentence naming the first
  // region that ends past the SRAM, where it ends, by how many bytes the
  // whole configuration overflows and how many connections would fit.
  std::string check() const;
  // Throws SramBudgetError(check()) when the configuration does not fit.
  void require_fits() const;
  // A multi-line table: each region with its offset and size, the total,
  // bytes per connection, connections configured and the maximum.
  std::string report() const;

 private:
  void add(Region r);

  uint64_t total_;
  uint64_t connections_;
  std::vector<Region> regions_;
};

}  // namespace mprdma::nic::uarch
