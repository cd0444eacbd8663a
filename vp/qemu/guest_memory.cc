#include "vp/qemu/guest_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
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

// How a region is mmap'd: mmap wants a page-aligned file offset, so the
// mapping starts `skew` bytes before the region.
struct Placement {
  off_t file_offset;
  size_t len;
  uint64_t skew;
};

// Checks a SYNC_SYSMEM region (see the header); fills *p and returns an
// empty string, or returns why the region is refused.
std::string check_region(const GuestMemory::Region& r, uint64_t page, Placement* p) {
  constexpr uint64_t kMaxOff = static_cast<uint64_t>(std::numeric_limits<off_t>::max());
  constexpr uint64_t kMaxLen = std::numeric_limits<size_t>::max();
  if (r.size == 0) return "size 0";
  if (r.offset < 0) return "negative file offset";
  if (r.size > std::numeric_limits<uint64_t>::max() - r.gpa)
    return "gpa + size passes the end of the 64-bit address space";
  const uint64_t offset = static_cast<uint64_t>(r.offset);
  if (offset > kMaxOff || r.size > kMaxOff - offset)
    return "offset + size passes the largest file offset";
  const uint64_t skew = offset % page;
  if (r.size > kMaxLen - skew) return "size + page offset does not fit the address space";
  struct stat st;
  if (::fstat(r.fd.get(), &st) != 0) return "fstat failed: " + errno_text(errno);
  if (!S_ISREG(st.st_mode))
    return "fd is not a regular file (mode " + hex(st.st_mode & S_IFMT) +
           "): its size cannot be checked";
  const uint64_t file_size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (offset + r.size > file_size)
    return "reaches byte " + std::to_string(offset + r.size) + " of its file, which has only " +
           std::to_string(file_size) + " bytes";
  *p = Placement{static_cast<off_t>(offset - skew), static_cast<size_t>(r.size + skew), skew};
  return {};
}

// "region [gpa, end) at offset N", printable whatever the numbers are.
std::string describe(const GuestMemory::Region& r) {
  const bool wraps = r.size > std::numeric_limits<uint64_t>::max() - r.gpa;
  return "region [" + hex(r.gpa) + ", " +
         (wraps ? hex(r.gpa) + " + " + hex(r.size) : hex(r.gpa + r.size)) + ") at offset " +
         std::to_string(r.offset);
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
  // Compared as an offset into the region, never as gpa + size: this
  // holds whatever the numbers.
  return pa - it->gpa < it->size ? &*it : nullptr;
}

bool GuestMemory::Map::covers(uint64_t pa, size_t len) const {
  if (len == 0) return find(pa) != nullptr;
  // The last byte must not wrap past 2^64 back to low addresses.
  if (len - 1 > std::numeric_limits<uint64_t>::max() - pa) return false;
  uint64_t a = pa;
  uint64_t left = len;
  while (left > 0) {
    const Mapping* m = find(a);
    if (!m) return false;
    // find() guarantees a - m->gpa < m->size, so this is at least 1.
    const uint64_t n = std::min<uint64_t>(left, m->size - (a - m->gpa));
    left -= n;
    if (left > 0) a += n;  // no wrap: a + left - 1 <= pa + len - 1
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
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (Region& r : regions) {
    Placement at{};
    const std::string bad = check_region(r, page, &at);
    if (!bad.empty()) {
      errors.push_back(describe(r) + ": " + bad + "; left out");
      continue;
    }
    void* p =
        ::mmap(nullptr, at.len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd.get(), at.file_offset);
    if (p == MAP_FAILED) {
      errors.push_back(describe(r) + ": mmap failed: " + errno_text(errno) + "; left out");
      continue;
    }
    map->regions.push_back(Mapping{r.gpa, r.size, static_cast<uint8_t*>(p) + at.skew, p, at.len});
    r.fd.reset();  // the mapping holds the memory; the fd is no longer needed
  }
  // Stable: of two regions at the same gpa, the earlier one QEMU listed wins.
  std::stable_sort(map->regions.begin(), map->regions.end(),
                   [](const Mapping& a, const Mapping& b) { return a.gpa < b.gpa; });
  for (size_t i = 1; i < map->regions.size();) {
    const Mapping& prev = map->regions[i - 1];
    const Mapping& cur = map->regions[i];
    if (cur.gpa - prev.gpa < prev.size) {  // cur.gpa >= prev.gpa (sorted)
      errors.push_back("region [" + hex(cur.gpa) + ", " + hex(cur.gpa + cur.size) + ") overlaps [" +
                       hex(prev.gpa) + ", " + hex(prev.gpa + prev.size) + "); left out");
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

bool GuestMemory::backed(uint64_t pa, uint64_t len) const {
  const auto map = snapshot();
  return map && len <= std::numeric_limits<size_t>::max() &&
         map->covers(pa, static_cast<size_t>(len));
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
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, m->size - (pa - m->gpa)));
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
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, m->size - (pa - m->gpa)));
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
