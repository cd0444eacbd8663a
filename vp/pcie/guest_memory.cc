#include "vp/pcie/guest_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace mprdma::pcie {
namespace {

// Copies ascending so that the last bytes of a record land last (see the
// header). Aligned 8-byte words are stored atomically; the guest's vCPU
// thread reads this memory concurrently.
void ordered_copy(uint8_t* dst, const uint8_t* src, size_t len) {
  size_t i = 0;
  while (i < len && (reinterpret_cast<uintptr_t>(dst + i) & 7)) {
    __atomic_store_n(dst + i, src[i], __ATOMIC_RELAXED);
    ++i;
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, src + i, 8);
    __atomic_store_n(reinterpret_cast<uint64_t*>(dst + i), w, __ATOMIC_RELAXED);
  }
  for (; i < len; ++i) __atomic_store_n(dst + i, src[i], __ATOMIC_RELAXED);
  // Release: the stores above become visible before anything the simulator
  // signals afterwards (an interrupt eventfd write, a BAR read reply).
  __atomic_thread_fence(__ATOMIC_RELEASE);
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace

GuestMemory::Map::~Map() {
  for (const Mapping& m : regions) ::munmap(m.map_addr, m.map_len);
}

const GuestMemory::Mapping* GuestMemory::Map::find(uint64_t pa) const {
  auto it = std::upper_bound(regions.begin(), regions.end(), pa,
                             [](uint64_t a, const Mapping& m) { return a < m.gpa; });
  if (it == regions.begin()) return nullptr;
  --it;
  return pa - it->gpa < it->size ? &*it : nullptr;
}

bool GuestMemory::Map::covers(uint64_t pa, size_t len) const {
  uint64_t a = pa;
  uint64_t left = len;
  if (len == 0) return find(pa) != nullptr;
  if (pa + len < pa) return false;  // wraps
  while (left > 0) {
    const Mapping* m = find(a);
    if (!m) return false;
    const uint64_t n = std::min<uint64_t>(left, m->gpa + m->size - a);
    a += n;
    left -= n;
  }
  return true;
}

GuestMemory::~GuestMemory() = default;

std::shared_ptr<const GuestMemory::Map> GuestMemory::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_;
}

void GuestMemory::install(std::shared_ptr<const Map> map) {
  std::lock_guard<std::mutex> lock(mu_);
  if (map_) retired_.push_back(std::move(map_));
  map_ = std::move(map);
  generation_.fetch_add(1);
}

std::vector<std::string> GuestMemory::replace(std::vector<Region> regions) {
  std::vector<std::string> errors;
  auto map = std::make_shared<Map>();
  const long page = ::sysconf(_SC_PAGESIZE);
  for (Region& r : regions) {
    const std::string what = "region [" + hex(r.gpa) + ", " + hex(r.gpa + r.size) + ")";
    if (r.size == 0 || r.offset < 0 || r.gpa + r.size < r.gpa) {
      errors.push_back(what + " at offset " + std::to_string(r.offset) + ": invalid");
      continue;
    }
    // mmap wants a page-aligned file offset; QEMU's are, but do not rely on
    // it.
    const uint64_t skew = static_cast<uint64_t>(r.offset) % static_cast<uint64_t>(page);
    const size_t len = static_cast<size_t>(r.size + skew);
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd.get(),
                     static_cast<off_t>(r.offset - static_cast<int64_t>(skew)));
    if (p == MAP_FAILED) {
      errors.push_back(what + ": mmap failed: " + errno_text(errno));
      continue;
    }
    map->regions.push_back(Mapping{r.gpa, r.size, static_cast<uint8_t*>(p) + skew, p, len});
    r.fd.reset();  // the mapping holds the memory; the fd is no longer needed
  }
  std::sort(map->regions.begin(), map->regions.end(),
            [](const Mapping& a, const Mapping& b) { return a.gpa < b.gpa; });
  for (size_t i = 1; i < map->regions.size();) {
    const Mapping& prev = map->regions[i - 1];
    const Mapping& cur = map->regions[i];
    if (cur.gpa < prev.gpa + prev.size) {
      errors.push_back("region [" + hex(cur.gpa) + ", " + hex(cur.gpa + cur.size) + ") overlaps [" +
                       hex(prev.gpa) + ", " + hex(prev.gpa + prev.size) + "): left out");
      ::munmap(cur.map_addr, cur.map_len);
      map->regions.erase(map->regions.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    ++i;
  }
  install(std::move(map));
  return errors;
}

void GuestMemory::clear() { install(std::make_shared<Map>()); }

void GuestMemory::release_retired() {
  std::vector<std::shared_ptr<const Map>> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old.swap(retired_);
  }
  // Unmapped here, outside the lock, when the last reference goes.
}

bool GuestMemory::read(uint64_t pa, void* dst, size_t len) {
  const auto map = snapshot();
  if (!map || !map->covers(pa, len)) {
    refused_reads_.fetch_add(1);
    return false;
  }
  auto* out = static_cast<uint8_t*>(dst);
  while (len > 0) {
    const Mapping* m = map->find(pa);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, m->gpa + m->size - pa));
    std::memcpy(out, m->host + (pa - m->gpa), n);
    out += n;
    pa += n;
    len -= n;
  }
  return true;
}

bool GuestMemory::write(uint64_t pa, const void* src, size_t len) {
  const auto map = snapshot();
  if (!map || !map->covers(pa, len)) {
    refused_writes_.fetch_add(1);
    return false;
  }
  const auto* in = static_cast<const uint8_t*>(src);
  while (len > 0) {
    const Mapping* m = map->find(pa);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, m->gpa + m->size - pa));
    ordered_copy(m->host + (pa - m->gpa), in, n);
    in += n;
    pa += n;
    len -= n;
  }
  return true;
}

uint8_t* GuestMemory::ptr(uint64_t pa, size_t len) {
  const auto map = snapshot();
  if (!map) return nullptr;
  const Mapping* m = map->find(pa);
  if (!m || len > m->size - (pa - m->gpa)) return nullptr;
  // The map stays alive after `map` goes out of scope: either it is
  // current, or it is parked in retired_ until release_retired().
  return m->host + (pa - m->gpa);
}

std::vector<GuestMemory::RegionInfo> GuestMemory::regions() const {
  std::vector<RegionInfo> out;
  const auto map = snapshot();
  if (map)
    for (const Mapping& m : map->regions) out.push_back(RegionInfo{m.gpa, m.size});
  return out;
}

uint64_t GuestMemory::mapped_bytes() const {
  uint64_t n = 0;
  for (const RegionInfo& r : regions()) n += r.size;
  return n;
}

}  // namespace mprdma::pcie
