// The wire format of QEMU's multi-process proxy device (x-pci-proxy-dev,
// protocol "mpqemu") as Debian's QEMU 7.2 speaks it, and its framing.
//
// Facts (../../../shared/design/QEMU-BRIDGE.md): every message is a 16-byte
// header {int32 cmd, 4 bytes padding, uint64 size} followed by `size`
// payload bytes (at most 192), in host byte order; file descriptors travel
// as SCM_RIGHTS on the sendmsg that carries the header. QEMU has at most one
// request outstanding per proxy (its io_mutex), so replies need no tag.
//
// The payload structs below are declared here from those facts and checked
// at compile time (size and every field offset), so a layout mistake breaks
// the build instead of corrupting guest accesses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vp/qemu/qemu_fd.h"

namespace mprdma::pcie::mpqemu {

enum Cmd : int32_t {
  kSyncSysmem = 0,   // QEMU -> device, 192 B, one fd per RAM region; no reply
  kRet = 1,          // device -> QEMU, 8 B value
  kPciCfgWrite = 2,  // 12 B; reply RET (all-ones = error)
  kPciCfgRead = 3,   // 12 B; reply RET(value)
  kBarWrite = 4,     // 24 B; reply RET
  kBarRead = 5,      // 24 B; reply RET(value)
  kSetIrqfd = 6,     // 0 B, 2 fds (irq, resample eventfds); no reply
  kDeviceReset = 7,  // 0 B; reply RET
};

// Name of a command for messages ("BAR_READ"), or "cmd <n>".
std::string cmd_name(int32_t cmd);

constexpr size_t kMaxPayload = 192;
constexpr int kMaxRegions = 8;

struct Header {
  int32_t cmd;
  uint32_t pad;
  uint64_t size;
};
static_assert(sizeof(Header) == 16, "mpqemu header is 16 bytes");
static_assert(offsetof(Header, cmd) == 0 && offsetof(Header, size) == 8, "mpqemu header layout");

// Region i is guest-physical [gpa[i], gpa[i] + size[i]) found at offset[i]
// inside fd i. Unused slots are zero.
struct SyncSysmem {
  uint64_t gpa[kMaxRegions];
  uint64_t size[kMaxRegions];
  int64_t offset[kMaxRegions];
};
static_assert(sizeof(SyncSysmem) == 192, "SYNC_SYSMEM payload is 192 bytes");
static_assert(offsetof(SyncSysmem, gpa) == 0 && offsetof(SyncSysmem, size) == 64 &&
                  offsetof(SyncSysmem, offset) == 128,
              "SYNC_SYSMEM layout");

// Config space access: offset 0..255, value (writes), length 1, 2 or 4.
struct PciConf {
  uint32_t addr;
  uint32_t val;
  int32_t len;
};
static_assert(sizeof(PciConf) == 12, "PCI_CFGREAD/WRITE payload is 12 bytes");
static_assert(offsetof(PciConf, addr) == 0 && offsetof(PciConf, val) == 4 &&
                  offsetof(PciConf, len) == 8,
              "PCI config payload layout");

// BAR access: absolute guest-physical address, value (writes, little-endian
// in the low `size` bytes), size 1/2/4/8, memory = 1 for a memory BAR.
struct BarAccess {
  uint64_t addr;
  uint64_t val;
  uint32_t size;
  uint8_t memory;
  uint8_t pad[3];
};
static_assert(sizeof(BarAccess) == 24, "BAR_READ/WRITE payload is 24 bytes");
static_assert(offsetof(BarAccess, addr) == 0 && offsetof(BarAccess, val) == 8 &&
                  offsetof(BarAccess, size) == 16 && offsetof(BarAccess, memory) == 20,
              "BAR access payload layout");

static_assert(sizeof(SyncSysmem) <= kMaxPayload && sizeof(PciConf) <= kMaxPayload &&
                  sizeof(BarAccess) <= kMaxPayload && sizeof(uint64_t) <= kMaxPayload,
              "every payload fits the protocol's 192-byte limit");

struct Message {
  int32_t cmd = 0;
  uint64_t size = 0;
  alignas(8) uint8_t payload[kMaxPayload] = {};
  std::vector<UniqueFd> fds;

  // The payload as T; only valid when size == sizeof(T) (checked by the
  // caller).
  template <class T>
  const T& as() const {
    static_assert(sizeof(T) <= kMaxPayload, "payload type too large");
    return *reinterpret_cast<const T*>(payload);
  }
};

// Sends one message: header, payload and fds in a single sendmsg, as QEMU
// does. Returns false with errno set.
bool send(int sock, int32_t cmd, const void* payload, size_t size, const int* fds = nullptr,
          size_t nfds = 0);

enum class RecvStatus { kOk, kEof, kError };
// Blocks until one whole message has arrived. kEof: the peer closed the
// connection between messages. kError: a broken or oversized message
// (*error says which); the connection is then unusable.
RecvStatus recv(int sock, Message* msg, std::string* error);

}  // namespace mprdma::pcie::mpqemu
