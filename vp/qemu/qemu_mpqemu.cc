#include "vp/qemu/qemu_mpqemu.h"

#include <sys/socket.h>

#include <cstring>

namespace mprdma::pcie::mpqemu {

std::string cmd_name(int32_t cmd) {
  switch (cmd) {
    case kSyncSysmem:
      return "SYNC_SYSMEM";
    case kRet:
      return "RET";
    case kPciCfgWrite:
      return "PCI_CFGWRITE";
    case kPciCfgRead:
      return "PCI_CFGREAD";
    case kBarWrite:
      return "BAR_WRITE";
    case kBarRead:
      return "BAR_READ";
    case kSetIrqfd:
      return "SET_IRQFD";
    case kDeviceReset:
      return "DEVICE_RESET";
  }
  return "cmd " + std::to_string(cmd);
}

bool send(int sock, int32_t cmd, const void* payload, size_t size, const int* fds, size_t nfds) {
  if (size > kMaxPayload) {
    errno = EMSGSIZE;
    return false;
  }
  // One buffer, one sendmsg: the receiver reads the header with its fds
  // first, so header and fds must not be split across sends.
  uint8_t buf[sizeof(Header) + kMaxPayload];
  Header h{cmd, 0, size};
  std::memcpy(buf, &h, sizeof h);
  if (size) std::memcpy(buf + sizeof h, payload, size);
  return send_with_fds(sock, buf, sizeof h + size, fds, nfds);
}

RecvStatus recv(int sock, Message* msg, std::string* error) {
  Header h{};
  msg->fds.clear();
  const ssize_t n = recv_exact(sock, &h, sizeof h, &msg->fds, error);
  if (n == 0) return RecvStatus::kEof;
  if (n < 0) return RecvStatus::kError;
  if (h.size > kMaxPayload) {
    if (error)
      *error = mpqemu::cmd_name(h.cmd) + " announces " + std::to_string(h.size) +
               " payload bytes (at most 192)";
    return RecvStatus::kError;
  }
  msg->cmd = h.cmd;
  msg->size = h.size;
  if (h.size) {
    const ssize_t m = recv_exact(sock, msg->payload, h.size, &msg->fds, error);
    if (m <= 0) {
      if (m == 0 && error) *error = "connection closed after a message header";
      return RecvStatus::kError;
    }
  }
  return RecvStatus::kOk;
}

}  // namespace mprdma::pcie::mpqemu
