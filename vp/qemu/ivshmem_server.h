// The ivshmem server for one QEMU's ivshmem-doorbell device: the NIC's
// interrupt lines.
//
// QEMU's `-chardev socket,path=P -device ivshmem-doorbell,chardev=...,
// vectors=N` connects to P at start-up and expects the ivshmem server
// protocol (QEMU's docs/specs/ivshmem-spec and contrib/ivshmem-server):
// little-endian int64 messages, some carrying one fd as SCM_RIGHTS:
//   1. the protocol version, 0 (no fd);
//   2. the client's own peer id (no fd);
//   3. -1 with the shared-memory fd (its size must be a power of two:
//      it becomes the device's BAR2);
//   4. then "peer id with an eventfd" messages; the n-th one for the
//      client's own id is the eventfd of its MSI-X vector n-1.
// QEMU reads 1-3 synchronously while realizing the device and 4 later in
// its main loop; vector fds sent before the shared memory would reach a
// device that has not allocated its vectors yet, hence this order.
//
// We are the only other party: QEMU is given its own vector eventfds and
// notify(v) writes eventfd v, which QEMU turns into MSI-X vector v of the
// ivshmem function (if the guest enabled MSI-X and bus mastering there).
// No other peers exist, so no peer fds are advertised.
//
// The server runs on its own thread (QEMU blocks in device realize until
// the first three messages arrive, before any simulation runs). One client
// at a time; a second connection is refused (closed) while one is active.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vp/qemu/qemu_fd.h"

namespace mprdma::pcie {

class IvshmemServer {
 public:
  static constexpr uint64_t kShmBytes = 4096;
  static constexpr int64_t kProtocolVersion = 0;

  // `name` labels messages (the host's name). Binds and listens on
  // `socket_path` (an existing socket file there is replaced) and starts
  // the server thread. Throws std::system_error / std::invalid_argument.
  IvshmemServer(std::string name, std::string socket_path, unsigned vectors);
  ~IvshmemServer();
  IvshmemServer(const IvshmemServer&) = delete;
  IvshmemServer& operator=(const IvshmemServer&) = delete;

  // Raises vector `v` in the connected QEMU (any thread, never blocks).
  // Returns false, and counts a drop, when no client is connected or `v`
  // is out of range.
  bool notify(unsigned v);

  bool connected() const { return connected_.load(); }
  // Peer id given to the current (or last) client, -1 before the first.
  int64_t peer_id() const { return peer_id_.load(); }
  unsigned vectors() const { return vectors_; }
  const std::string& path() const { return path_; }
  uint64_t notified() const { return notified_.load(); }
  uint64_t dropped() const { return dropped_.load(); }
  uint64_t clients_accepted() const { return accepted_.load(); }

  // Messages from the server thread ("client connected", errors), taken
  // by the simulation thread to log them through its channel.
  std::vector<std::string> take_messages();
  // Readable while messages wait (take_messages() drains it).
  int message_fd() const { return msg_fd_.get(); }

 private:
  void run();
  void accept_client();
  void drop_client(const std::string& why);
  void note(std::string msg);

  std::string name_, path_;
  unsigned vectors_;
  UniqueFd listen_fd_, shm_fd_, stop_fd_, msg_fd_;
  UniqueFd client_fd_;  // server thread only
  std::mutex mu_;       // guards vector_fds_ and messages_
  std::vector<UniqueFd> vector_fds_;
  std::vector<std::string> messages_;
  std::atomic<bool> connected_{false};
  std::atomic<int64_t> peer_id_{-1};
  int64_t next_id_ = 0;
  std::atomic<uint64_t> notified_{0}, dropped_{0}, accepted_{0};
  std::thread thread_;
};

}  // namespace mprdma::pcie
