#include "vp/qemu/qemu_config_space.h"

#include <stdexcept>
#include <string>

namespace mprdma::pcie {
namespace {

void put16(std::array<uint8_t, PciConfigSpace::kSize>& r, uint32_t at, uint16_t v) {
  r[at] = static_cast<uint8_t>(v);
  r[at + 1] = static_cast<uint8_t>(v >> 8);
}

void put32(std::array<uint8_t, PciConfigSpace::kSize>& r, uint32_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) r[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

bool valid_access(uint32_t offset, int len) {
  return (len == 1 || len == 2 || len == 4) && offset < PciConfigSpace::kSize &&
         offset + static_cast<uint32_t>(len) <= PciConfigSpace::kSize;
}

// Command register bits software may set: memory space, bus master, parity
// error response, SERR# enable, INTx disable. No I/O BARs, so I/O space is
// hardwired to 0.
constexpr uint16_t kCommandWritable = 0x0002 | 0x0004 | 0x0040 | 0x0100 | 0x0400;

}  // namespace

PciConfigSpace::PciConfigSpace(const Identity& id, const std::array<uint32_t, kNumBars>& bar_sizes)
    : id_(id), bar_sizes_(bar_sizes) {
  for (int i = 0; i < kNumBars; ++i) {
    const uint32_t s = bar_sizes_[i];
    if (s != 0 && (s < 16 || (s & (s - 1)) != 0))
      throw std::invalid_argument("BAR" + std::to_string(i) + " size " + std::to_string(s) +
                                  " is not a power of two >= 16");
  }
  reset();
}

void PciConfigSpace::reset() {
  regs_.fill(0);
  wmask_.fill(0);
  put16(regs_, 0x00, id_.vendor);
  put16(regs_, 0x02, id_.device);
  regs_[0x08] = id_.revision;
  regs_[0x09] = static_cast<uint8_t>(id_.class_code);
  regs_[0x0a] = static_cast<uint8_t>(id_.class_code >> 8);
  regs_[0x0b] = static_cast<uint8_t>(id_.class_code >> 16);
  regs_[0x0e] = id_.header_type;
  put16(regs_, 0x2c, id_.subsystem_vendor);
  put16(regs_, 0x2e, id_.subsystem);
  // Status stays 0: no capability list, no errors to report.
  put16(wmask_, kCommand, kCommandWritable);
  wmask_[0x0c] = 0xff;  // cache line size
  wmask_[0x0d] = 0xff;  // latency timer
  wmask_[0x3c] = 0xff;  // interrupt line (scratch for software; pin is 0)
  for (int i = 0; i < kNumBars; ++i)
    if (bar_sizes_[i]) put32(wmask_, kBar0 + 4 * i, ~(bar_sizes_[i] - 1));
  // Expansion ROM (0x30) and CardBus CIS (0x28) are not implemented: they
  // read 0 whatever is written, which is how sizing finds them absent.
}

std::optional<uint32_t> PciConfigSpace::read(uint32_t offset, int len) const {
  if (!valid_access(offset, len)) return std::nullopt;
  uint32_t v = 0;
  for (int i = 0; i < len; ++i) v |= static_cast<uint32_t>(regs_[offset + i]) << (8 * i);
  return v;
}

bool PciConfigSpace::write(uint32_t offset, uint32_t value, int len) {
  if (!valid_access(offset, len)) return false;
  for (int i = 0; i < len; ++i) {
    const uint8_t m = wmask_[offset + i];
    const uint8_t b = static_cast<uint8_t>(value >> (8 * i));
    regs_[offset + i] = static_cast<uint8_t>((regs_[offset + i] & ~m) | (b & m));
  }
  return true;
}

uint32_t PciConfigSpace::dword(uint32_t offset) const { return *read(offset, 4); }

uint16_t PciConfigSpace::command() const { return static_cast<uint16_t>(*read(kCommand, 2)); }

uint64_t PciConfigSpace::bar_base(int i) const {
  if (i < 0 || i >= kNumBars || bar_sizes_[i] == 0) return 0;
  return dword(kBar0 + 4 * i) & ~uint32_t{0xf};
}

int PciConfigSpace::decode(uint64_t addr, uint64_t len, uint64_t* offset) const {
  if (!memory_enabled() || len == 0) return -1;
  for (int i = 0; i < kNumBars; ++i) {
    const uint64_t base = bar_base(i);
    if (base == 0) continue;
    const uint64_t size = bar_sizes_[i];
    if (addr >= base && addr - base < size && len <= size - (addr - base)) {
      if (offset) *offset = addr - base;
      return i;
    }
  }
  return -1;
}

}  // namespace mprdma::pcie
