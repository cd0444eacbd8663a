// The 256-byte conventional PCI configuration space of the NIC function
// as the guest sees it through QEMU's proxy device.
//
// QEMU keeps its own copy (it maps the BARs from it) but forwards every
// guest config read to the device, so this model is what Linux enumerates:
// identity, the multi-function bit, BAR sizing and the command register.
// Header type 0, no capabilities (the proxy has no MSI/MSI-X and no PCIe
// capability; interrupts use the ivshmem-doorbell sibling function).
//
// BARs are 32-bit, non-prefetchable memory BARs of power-of-two size:
// writing all ones reads back the size mask, the low type bits read 0.
// Not thread-safe: QemuProxy serialises access.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace mprdma::pcie {

class PciConfigSpace {
 public:
  static constexpr int kNumBars = 6;
  static constexpr uint32_t kSize = 256;

  // Register offsets used outside this class.
  static constexpr uint32_t kCommand = 0x04;
  static constexpr uint32_t kBar0 = 0x10;
  static constexpr uint16_t kCmdMemory = 1u << 1;
  static constexpr uint16_t kCmdBusMaster = 1u << 2;

  struct Identity {
    uint16_t vendor = 0xC0DE;
    uint16_t device = 0x4D50;
    uint32_t class_code = 0x020000;  // Ethernet controller
    uint8_t revision = 1;
    uint8_t header_type = 0x80;  // type 0, multi-function (function 1 is ivshmem)
    uint16_t subsystem_vendor = 0xC0DE;
    uint16_t subsystem = 0x0001;
  };

  // bar_sizes[i] == 0: BAR i not implemented (reads 0, ignores writes).
  // Otherwise a power of two >= 16. Throws std::invalid_argument.
  PciConfigSpace(const Identity& id, const std::array<uint32_t, kNumBars>& bar_sizes);

  // A read of 1, 2 or 4 bytes wholly inside the 256 bytes (little-endian);
  // nullopt for any other access.
  std::optional<uint32_t> read(uint32_t offset, int len) const;
  // A write of 1, 2 or 4 bytes; read-only bits keep their value. Returns
  // false (and changes nothing) for an invalid access.
  bool write(uint32_t offset, uint32_t value, int len);
  // Power-on state (a PCI reset): command 0, BARs unassigned.
  void reset();

  uint16_t command() const;
  bool memory_enabled() const { return command() & kCmdMemory; }
  bool bus_master() const { return command() & kCmdBusMaster; }
  uint32_t bar_size(int i) const { return bar_sizes_[i]; }
  // Address programmed into BAR i (type bits cleared); 0 when unassigned.
  uint64_t bar_base(int i) const;

  // The BAR that claims all of [addr, addr + len) with memory decoding on,
  // or -1; *offset is the offset inside that BAR. An unassigned BAR (0)
  // claims nothing.
  int decode(uint64_t addr, uint64_t len, uint64_t* offset) const;

 private:
  uint32_t dword(uint32_t offset) const;

  Identity id_;
  std::array<uint32_t, kNumBars> bar_sizes_;
  std::array<uint8_t, kSize> regs_{};
  std::array<uint8_t, kSize> wmask_{};
};

}  // namespace mprdma::pcie
