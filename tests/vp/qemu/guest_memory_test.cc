// GuestMemory against what QEMU's proxy (or anything on its socket) may put
// in SYNC_SYSMEM: regions that wrap, that reach past the end of their file,
// that are not files; then a seeded property test of the whole map against
// a reference model. The everyday cases (reads across regions, remaps under
// access) are in qemu_bridge_test.cc.
#include "vp/qemu/guest_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "qemu_test_util.h"
#include "support/fuzz_stream.h"

namespace mprdma::pcie {
namespace {

using test::MemFile;

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

GuestMemory::Region region(const MemFile& f, uint64_t gpa, uint64_t size, int64_t offset) {
  return GuestMemory::Region{gpa, size, offset, UniqueFd(::dup(f.fd()))};
}

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& e : v) s += "\n  " + e;
  return s;
}

// The review's case: {gpa 0, size 2^64 - 1, offset 4095}. size + 4095 wraps
// to 4094, so 4094 bytes were mapped while the region claimed every
// guest-physical address: a DMA address reached whatever lies after the
// mapping in the simulator. ptr() is asserted first because it only looks
// the address up; the old code's answer is not dereferenced.
TEST(GuestMemory, RegionWhoseSizePlusPageSkewWrapsIsRefused) {
  MemFile f(4 * kKiB);
  struct Case {
    uint64_t gpa, size;
    int64_t offset;
  };
  for (const Case& c :
       {Case{0, kMax, 4095}, Case{50, kMax - 100, 4095}, Case{0, kMax - 4000, 4095}}) {
    SCOPED_TRACE("region gpa " + std::to_string(c.gpa) + " size " + std::to_string(c.size) +
                 " offset " + std::to_string(c.offset));
    GuestMemory m;
    std::vector<GuestMemory::Region> regs;
    regs.push_back(region(f, c.gpa, c.size, c.offset));
    const auto errors = m.replace(std::move(regs));
    for (const uint64_t far : {uint64_t{1} << 40, uint64_t{4 * kKiB}, kMax - 16})
      ASSERT_EQ(m.ptr(far, 8), nullptr)
          << "address 0x" << std::hex << far << " is accepted though at most 4 KiB were mapped";
    ASSERT_TRUE(m.regions().empty());
    ASSERT_EQ(errors.size(), 1u) << joined(errors);
    EXPECT_NE(errors[0].find("region [0x"), std::string::npos) << errors[0];
    EXPECT_NE(errors[0].find("offset 4095"), std::string::npos) << errors[0];
    uint8_t b = 0;
    EXPECT_FALSE(m.read(uint64_t{1} << 40, &b, 1));
    EXPECT_FALSE(m.write(0, &b, 1));
    EXPECT_EQ(m.refused_reads(), 1u);
    EXPECT_EQ(m.refused_writes(), 1u);
  }
}

// A region longer than its memfd mapped fine and raised SIGBUS (killing the
// simulator) on the first DMA to its tail. The test asserts on the map
// before any access, so the old code fails here rather than crashing.
TEST(GuestMemory, RegionLongerThanItsFileIsRefused) {
  MemFile f(64 * kKiB);
  GuestMemory m;
  std::vector<GuestMemory::Region> regs;
  regs.push_back(region(f, 0, kMiB, 0));                 // 1 MiB over a 64 KiB file
  regs.push_back(region(f, 2 * kMiB, 64 * kKiB, 4096));  // its last 4 KiB past the end
  regs.push_back(region(f, 4 * kMiB, 60 * kKiB, 4096));  // ends exactly at the end: fine
  const auto errors = m.replace(std::move(regs));
  const auto kept = m.regions();
  ASSERT_EQ(kept.size(), 1u) << "regions reaching past the end of their file were mapped; "
                                "the first access to their tail raises SIGBUS"
                             << joined(errors);
  EXPECT_EQ(kept[0].gpa, 4 * kMiB);
  ASSERT_EQ(errors.size(), 2u) << joined(errors);
  EXPECT_NE(errors[0].find("region [0x0, 0x100000)"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("65536 bytes"), std::string::npos)
      << "names the file size: " << errors[0];
  EXPECT_NE(errors[1].find("region [0x200000, 0x210000) at offset 4096"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[1].find("reaches byte 69632"), std::string::npos) << errors[1];
  uint8_t buf[8] = {};
  EXPECT_FALSE(m.read(kMiB - 8, buf, 8)) << "the refused region's tail is not backed";
  EXPECT_FALSE(m.write(2 * kMiB, buf, 8));
  std::memset(f.at(64 * kKiB - 8), 0x3c, 8);
  ASSERT_TRUE(m.read(4 * kMiB + 60 * kKiB - 8, buf, 8)) << "the last bytes of the file";
  EXPECT_EQ(buf[7], 0x3c);
}

// fstat gives no size for a pipe or a character device, so nothing could
// promise that an access there is backed: refused by name.
TEST(GuestMemory, RegionsOfFdsThatAreNotRegularFilesAreRefused) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  std::vector<GuestMemory::Region> regs;
  regs.push_back(GuestMemory::Region{0, 4 * kKiB, 0, std::move(rd)});
  regs.push_back(GuestMemory::Region{kMiB, 4 * kKiB, 0, UniqueFd(::open("/dev/zero", O_RDWR))});
  GuestMemory m;
  const auto errors = m.replace(std::move(regs));
  EXPECT_TRUE(m.regions().empty());
  ASSERT_EQ(errors.size(), 2u) << joined(errors);
  for (const std::string& e : errors)
    EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
}

// The top of the address space: a region may end at 2^64 - 1 (its end is
// representable); accesses that would wrap past 2^64 are refused whole.
TEST(GuestMemory, RegionAtTheTopOfTheAddressSpace) {
  MemFile f(8 * kKiB);
  GuestMemory m;
  std::vector<GuestMemory::Region> regs;
  regs.push_back(region(f, kMax - 8 * kKiB, 8 * kKiB, 0));      // [2^64 - 8193, 2^64 - 1)
  regs.push_back(region(f, kMax - 4 * kKiB + 1, 4 * kKiB, 0));  // would end at 2^64
  const auto errors = m.replace(std::move(regs));
  ASSERT_EQ(errors.size(), 1u) << joined(errors);
  EXPECT_NE(errors[0].find("64-bit address space"), std::string::npos) << errors[0];
  std::memset(f.at(8 * kKiB - 8), 0x77, 8);
  uint8_t buf[16] = {};
  ASSERT_TRUE(m.read(kMax - 8, buf, 8));
  EXPECT_EQ(buf[0], 0x77);
  EXPECT_FALSE(m.read(kMax - 8, buf, 9)) << "byte 2^64 - 1 is not backed";
  EXPECT_FALSE(m.read(kMax - 4, buf, 16)) << "wraps to address 0";
  EXPECT_EQ(m.ptr(kMax - 8, 9), nullptr);
  EXPECT_NE(m.ptr(kMax - 8, 8), nullptr);
}

// ---------------------------------------------------------------------------
// Property test: random SYNC_SYSMEM-like region lists against a reference
// model. Properties: replace() never crashes and refuses exactly the
// invalid regions (and the later of overlapping ones); every accepted
// region lies inside its file; read/write/ptr accept exactly the accesses
// the model covers (addresses and lengths around region ends and 2^64),
// move exactly the model's bytes, and count every refusal; no write lands
// anywhere but where the model says.

class RandomFile {
 public:
  RandomFile(uint64_t size, std::mt19937_64& rng)
      : size_(size), fd_(make_memfd("prop-ram", size)), shadow_(size) {
    if (size_) {
      void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
      if (p == MAP_FAILED) throw std::runtime_error("mmap memfd");
      base_ = static_cast<uint8_t*>(p);
    }
    for (uint8_t& b : shadow_) b = static_cast<uint8_t>(rng());
    if (size_) std::memcpy(base_, shadow_.data(), size_);
  }
  ~RandomFile() {
    if (base_) ::munmap(base_, size_);
  }
  RandomFile(const RandomFile&) = delete;
  RandomFile& operator=(const RandomFile&) = delete;

  uint64_t size() const { return size_; }
  int fd() const { return fd_.get(); }
  // What the file must hold: its first contents plus the writes the model
  // accepted.
  std::vector<uint8_t>& shadow() { return shadow_; }
  bool matches_shadow() const {
    return size_ == 0 || std::memcmp(base_, shadow_.data(), size_) == 0;
  }

 private:
  uint64_t size_;
  UniqueFd fd_;
  std::vector<uint8_t> shadow_;
  uint8_t* base_ = nullptr;
};

struct InputRegion {
  uint64_t gpa, size;
  int64_t offset;
  size_t file;
};

// Byte ranges the model says are backed, by first gpa.
struct ModelRegion {
  uint64_t size;
  size_t file;
  uint64_t offset;
};
using Model = std::map<uint64_t, ModelRegion>;

// The spec of GuestMemory::replace, written from the header comment.
Model model_of(const std::vector<InputRegion>& in,
               const std::vector<std::unique_ptr<RandomFile>>& files) {
  std::vector<std::pair<uint64_t, ModelRegion>> valid;
  for (const InputRegion& r : in) {
    if (r.size == 0 || r.offset < 0) continue;
    if (r.size > kMax - r.gpa) continue;  // gpa + size would pass 2^64
    const uint64_t off = static_cast<uint64_t>(r.offset);
    if (r.size > files[r.file]->size() || off > files[r.file]->size() - r.size) continue;
    valid.push_back({r.gpa, ModelRegion{r.size, r.file, off}});
  }
  std::stable_sort(valid.begin(), valid.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  Model m;
  // Greedy in gpa order: a region overlapping the last one kept is left out.
  bool have = false;
  uint64_t last_gpa = 0, last_size = 0;
  for (const auto& [gpa, r] : valid) {
    if (have && gpa - last_gpa < last_size) continue;
    m.emplace(gpa, r);
    have = true;
    last_gpa = gpa;
    last_size = r.size;
  }
  return m;
}

// The model region holding byte `pa`, or end().
Model::const_iterator holding(const Model& m, uint64_t pa) {
  auto it = m.upper_bound(pa);
  if (it == m.begin()) return m.end();
  --it;
  return pa - it->first < it->second.size ? it : m.end();
}

// [pa, pa + len) wholly backed; a zero-length access needs `pa` backed.
bool model_covers(const Model& m, uint64_t pa, uint64_t len) {
  if (len == 0) return holding(m, pa) != m.end();
  if (len - 1 > kMax - pa) return false;
  const uint64_t last = pa + (len - 1);
  for (uint64_t a = pa;;) {
    const auto it = holding(m, a);
    if (it == m.end()) return false;
    const uint64_t region_last = it->first + (it->second.size - 1);
    if (region_last >= last) return true;
    a = region_last + 1;
  }
}

// The shadow byte behind a backed gpa.
uint8_t& model_byte(const Model& m, std::vector<std::unique_ptr<RandomFile>>& files, uint64_t pa) {
  const auto it = holding(m, pa);
  return files[it->second.file]->shadow()[it->second.offset + (pa - it->first)];
}

std::string describe(const std::vector<InputRegion>& in,
                     const std::vector<std::unique_ptr<RandomFile>>& files) {
  std::ostringstream os;
  for (size_t i = 0; i < files.size(); ++i) os << " file" << i << "=" << files[i]->size() << "B";
  for (const InputRegion& r : in)
    os << "\n  {gpa " << hex(r.gpa) << ", size " << hex(r.size) << ", offset " << r.offset
       << ", file" << r.file << "}";
  return os.str();
}

TEST(GuestMemoryProperty, RandomRegionListsAgreeWithAReferenceModel) {
  auto rng = test::fuzz::Stream("guest_memory_map");
  const int rounds = test::fuzz::Rounds(400);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  GuestMemory mem;
  uint64_t accesses = 0, accepted_accesses = 0, spanning = 0, accepted_regions = 0,
           offered_regions = 0;
  for (int round = 0; round < rounds && !::testing::Test::HasFailure(); ++round) {
    // Files: empty, a few bytes, odd sizes, a few pages.
    std::vector<std::unique_ptr<RandomFile>> files;
    const size_t nfiles = 1 + pick(3);
    for (size_t i = 0; i < nfiles; ++i) {
      const uint64_t size = pick(10) == 0 ? 0
                            : pick(2)     ? (1 + pick(16)) * page
                                          : 1 + pick(12 * kKiB);
      files.push_back(std::make_unique<RandomFile>(size, rng));
    }
    // Regions: mostly plausible, adjacent or overlapping; then sizes and
    // offsets past the file, near 2^63 and 2^64, zero, negative.
    std::vector<InputRegion> in(pick(9));
    for (size_t i = 0; i < in.size(); ++i) {
      InputRegion& r = in[i];
      r.file = pick(files.size());
      const uint64_t fsize = files[r.file]->size();
      switch (pick(10)) {
        case 0:
        case 1:
        case 2:
          r.offset = static_cast<int64_t>(pick(fsize / page + 1) * page);
          break;
        case 3:
        case 4:
          r.offset = static_cast<int64_t>(pick(fsize + 1));
          break;
        case 5:
          r.offset = 0;
          break;
        case 6:
          r.offset =
              pick(2) ? -static_cast<int64_t>(1 + pick(page)) : std::numeric_limits<int64_t>::min();
          break;
        case 7:
          r.offset = std::numeric_limits<int64_t>::max() - static_cast<int64_t>(pick(2 * page));
          break;
        case 8:
          r.offset = static_cast<int64_t>(page - 1 - pick(2));
          break;
        default:
          r.offset = static_cast<int64_t>(rng());
          break;
      }
      const uint64_t off = r.offset < 0 ? 0 : static_cast<uint64_t>(r.offset);
      const uint64_t room = off <= fsize ? fsize - off : 0;  // bytes left in the file
      const InputRegion* prev = i ? &in[i - 1] : nullptr;
      switch (pick(16)) {
        case 4:
          r.size = room;
          break;
        case 5:
          r.size = 0;
          break;
        case 6:
          r.size = room + 1 + pick(2 * page);
          break;
        case 7:
          r.size = kMax - pick(2 * page);
          break;
        case 8:
          r.size = (uint64_t{1} << 63) + pick(3) - 1;
          break;
        case 9:
          r.size = kMax - static_cast<uint64_t>(r.offset < 0 ? 0 : r.offset) + 1 + pick(page);
          break;
        case 10:
          r.size = rng();
          break;
        default:
          r.size = 1 + pick(room);
          break;
      }
      switch (pick(10)) {
        case 0:
        case 1:
        case 2:
          r.gpa =
              prev && prev->size <= kMax - prev->gpa ? prev->gpa + prev->size : pick(256 * kKiB);
          break;
        case 3:  // overlapping the previous one
          r.gpa = prev ? prev->gpa + pick(prev->size) : 0;
          break;
        case 4:
        case 5:
          r.gpa = pick(256 * kKiB);
          break;
        case 6:
          r.gpa = kMax - pick(64 * kKiB);
          break;
        case 7:  // ending at 2^64 or just before
          r.gpa = kMax - r.size + 1 - pick(2);
          break;
        case 8:
          r.gpa = (uint64_t{1} << 32) - pick(8 * kKiB);
          break;
        default:
          r.gpa = rng();
          break;
      }
    }
    SCOPED_TRACE("round " + std::to_string(round) + ":" + describe(in, files));
    if (test::fuzz::Trace()) std::printf("round %d:%s\n", round, describe(in, files).c_str());

    std::vector<GuestMemory::Region> regs;
    for (const InputRegion& r : in)
      regs.push_back(
          GuestMemory::Region{r.gpa, r.size, r.offset, UniqueFd(::dup(files[r.file]->fd()))});
    const std::vector<std::string> errors = mem.replace(std::move(regs));
    mem.release_retired();
    const Model model = model_of(in, files);
    offered_regions += in.size();
    accepted_regions += model.size();

    // The map is the model's; each region lies inside its file.
    const auto got = mem.regions();
    ASSERT_EQ(got.size(), model.size()) << joined(errors);
    size_t k = 0;
    uint64_t bytes = 0;
    for (const auto& [gpa, r] : model) {
      EXPECT_EQ(got[k].gpa, gpa);
      EXPECT_EQ(got[k].size, r.size);
      EXPECT_LE(r.offset + r.size, files[r.file]->size()) << "region inside its file";
      EXPECT_LE(r.size - 1, kMax - gpa) << "region does not wrap";
      bytes += r.size;
      ++k;
    }
    EXPECT_EQ(mem.mapped_bytes(), bytes);
    EXPECT_EQ(errors.size(), in.size() - model.size()) << joined(errors);
    for (const std::string& e : errors) EXPECT_EQ(e.rfind("region [", 0), 0u) << e;
    if (::testing::Test::HasFailure()) break;
    // Each region's first and last bytes are the file's bytes at its offset
    // (a mapping past the end of its file would fault here).
    for (const auto& [gpa, r] : model) {
      uint8_t b = 0;
      ASSERT_TRUE(mem.read(gpa, &b, 1));
      ASSERT_EQ(b, files[r.file]->shadow()[r.offset]);
      ASSERT_TRUE(mem.read(gpa + (r.size - 1), &b, 1));
      ASSERT_EQ(b, files[r.file]->shadow()[r.offset + r.size - 1]);
    }

    // Accesses: around region starts and ends, across neighbours, near 2^64,
    // anywhere; lengths 0 to a few pages, and huge ones for ptr().
    std::vector<uint64_t> starts;
    for (const auto& [gpa, r] : model) starts.push_back(gpa);
    const uint64_t refused_r0 = mem.refused_reads(), refused_w0 = mem.refused_writes();
    uint64_t refused_r = 0, refused_w = 0;
    std::vector<uint8_t> buf, data;
    for (int a = 0; a < 48; ++a) {
      uint64_t pa;
      const auto near_region =
          starts.empty() ? model.end() : model.find(starts[pick(starts.size())]);
      switch (near_region == model.end() ? 9 : pick(10)) {
        case 0:
        case 1:
        case 2:
          pa = near_region->first + pick(near_region->second.size);
          break;
        case 3:
        case 4:
          pa = near_region->first + near_region->second.size - 1 - pick(64);
          break;
        case 5:
          pa = near_region->first - 1 - pick(64);
          break;
        case 6:
          pa = near_region->first;
          break;
        case 7:
          pa = kMax - pick(128);
          break;
        default:
          pa = pick(4) ? pick(512 * kKiB) : rng();
          break;
      }
      const unsigned op = static_cast<unsigned>(pick(3));
      uint64_t len;
      switch (pick(8)) {
        case 0:
          len = 0;
          break;
        case 1:
          len = 1 + pick(3 * page);
          break;
        case 2:
          len = op == 2 ? kMax - pick(3) : 1 + pick(64);
          break;  // huge: ptr() only
        default:
          len = 1 + pick(64);
          break;
      }
      ++accesses;
      const bool covered = model_covers(model, pa, len);
      accepted_accesses += covered;
      spanning += covered && len > 1 && holding(model, pa) != holding(model, pa + (len - 1));
      SCOPED_TRACE("access " + std::to_string(a) + ": " +
                   (op == 0   ? "read"
                    : op == 1 ? "write"
                              : "ptr") +
                   " at " + hex(pa) + " of " + hex(len) + " bytes");
      if (op == 0) {
        buf.assign(len, 0xee);
        const bool ok = mem.read(pa, buf.data(), len);
        ASSERT_EQ(ok, covered);
        refused_r += !ok;
        for (uint64_t i = 0; ok && i < len; ++i)
          ASSERT_EQ(buf[i], model_byte(model, files, pa + i)) << "byte " << i;
        if (!ok) {
          for (uint8_t b : buf) ASSERT_EQ(b, 0xee) << "a refused read copies nothing";
        }
      } else if (op == 1) {
        data.resize(len);
        for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
        const bool ok = mem.write(pa, data.data(), len);
        ASSERT_EQ(ok, covered);
        refused_w += !ok;
        for (uint64_t i = 0; ok && i < len; ++i) model_byte(model, files, pa + i) = data[i];
      } else {
        const auto it = holding(model, pa);
        const bool contiguous = it != model.end() && len <= it->second.size - (pa - it->first);
        uint8_t* p = mem.ptr(pa, len);
        ASSERT_EQ(p != nullptr, contiguous);
        if (p && len) {
          ASSERT_EQ(*p, model_byte(model, files, pa));
        }
      }
    }
    EXPECT_EQ(mem.refused_reads() - refused_r0, refused_r);
    EXPECT_EQ(mem.refused_writes() - refused_w0, refused_w);
    for (size_t i = 0; i < files.size(); ++i)
      EXPECT_TRUE(files[i]->matches_shadow())
          << "file" << i << " holds bytes no accepted write put there";
  }
  std::printf(
      "%d rounds: %llu of %llu regions accepted, %llu of %llu accesses backed (%llu across "
      "two regions)\n",
      rounds, static_cast<unsigned long long>(accepted_regions),
      static_cast<unsigned long long>(offered_regions),
      static_cast<unsigned long long>(accepted_accesses), static_cast<unsigned long long>(accesses),
      static_cast<unsigned long long>(spanning));
}

}  // namespace
}  // namespace mprdma::pcie
