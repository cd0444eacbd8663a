#include "vp/nic/uarch/sram_budget.h"

#include <limits>
#include <sstream>

namespace mprdma::nic::uarch {
namespace {

// Products and sums saturate instead of wrapping: a silly connection count
// must read as "does not fit", never as a small number that does.
uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::numeric_limits<uint64_t>::max();
  }
  return a * b;
}

uint64_t sat_add(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max()
                                                      : a + b;
}

}  // namespace

SramBudget::SramBudget(uint64_t total_bytes, uint64_t connections)
    : total_(total_bytes), connections_(connections) {
  if (total_ == 0) throw std::invalid_argument("SRAM budget: total size must be > 0 bytes");
}

void SramBudget::add(Region r) {
  if (r.name.empty()) throw std::invalid_argument("SRAM budget: a region needs a name");
  for (const Region& other : regions_) {
    if (other.name == r.name) {
      throw std::invalid_argument("SRAM budget: region '" + r.name + "' added twice");
    }
  }
  regions_.push_back(std::move(r));
}

void SramBudget::add_fixed(const std::string& name, uint64_t bytes) {
  add(Region{name, false, bytes});
}

void SramBudget::add_per_connection(const std::string& name, uint64_t bytes_per_connection) {
  add(Region{name, true, bytes_per_connection});
}

uint64_t SramBudget::region_bytes(const Region& r) const {
  return r.per_connection ? sat_mul(r.bytes, connections_) : r.bytes;
}

uint64_t SramBudget::fixed_bytes() const {
  uint64_t sum = 0;
  for (const Region& r : regions_) {
    if (!r.per_connection) sum = sat_add(sum, r.bytes);
  }
  return sum;
}

uint64_t SramBudget::bytes_per_connection() const {
  uint64_t sum = 0;
  for (const Region& r : regions_) {
    if (r.per_connection) sum = sat_add(sum, r.bytes);
  }
  return sum;
}

uint64_t SramBudget::used_bytes() const {
  uint64_t sum = 0;
  for (const Region& r : regions_) sum = sat_add(sum, region_bytes(r));
  return sum;
}

uint64_t SramBudget::free_bytes() const { return fits() ? total_ - used_bytes() : 0; }

uint64_t SramBudget::overflow_bytes() const { return fits() ? 0 : used_bytes() - total_; }

uint64_t SramBudget::max_connections() const {
  const uint64_t fixed = fixed_bytes();
  if (fixed > total_) return 0;
  const uint64_t per = bytes_per_connection();
  if (per == 0) return std::numeric_limits<uint64_t>::max();
  return (total_ - fixed) / per;
}

std::string SramBudget::check() const {
  if (fits()) return "";
  // Find the first region that ends past the SRAM, in layout order.
  uint64_t offset = 0;
  const Region* culprit = nullptr;
  for (const Region& r : regions_) {
    offset = sat_add(offset, region_bytes(r));
    if (offset > total_) {
      culprit = &r;
      break;
    }
  }
  std::ostringstream m;
  m << "SRAM budget of " << total_ << " B exceeded by " << overflow_bytes() << " B: region '"
    << culprit->name << "' (";
  if (culprit->per_connection) {
    m << connections_ << " connections x " << culprit->bytes << " B = ";
  }
  m << region_bytes(*culprit) << " B) ends at byte " << offset << "; fixed regions take "
    << fixed_bytes() << " B, per-connection state " << bytes_per_connection()
    << " B/connection, so " << max_connections() << " of the " << connections_
    << " connections would fit";
  return m.str();
}

void SramBudget::require_fits() const {
  if (!fits()) throw SramBudgetError(check());
}

std::string SramBudget::report() const {
  std::ostringstream m;
  m << "SRAM " << total_ << " B\n";
  uint64_t offset = 0;
  for (const Region& r : regions_) {
    const uint64_t bytes = region_bytes(r);
    m << "  " << r.name << ": " << bytes << " B at " << offset;
    if (r.per_connection) m << " (" << r.bytes << " B x " << connections_ << " connections)";
    m << "\n";
    offset = sat_add(offset, bytes);
  }
  m << "  used " << used_bytes() << " B, ";
  if (fits()) {
    m << "free " << free_bytes() << " B\n";
  } else {
    m << "OVERFLOW " << overflow_bytes() << " B\n";
  }
  m << "  per connection " << bytes_per_connection() << " B; connections " << connections_
    << " configured, ";
  const uint64_t max = max_connections();
  if (max == std::numeric_limits<uint64_t>::max()) {
    m << "no per-connection state\n";
  } else {
    m << max << " fit\n";
  }
  return m.str();
}

}  // namespace mprdma::nic::uarch
