// File-descriptor helpers shared by the QEMU bridge: an owning fd, eventfds,
// memfds, and sending/receiving small messages with SCM_RIGHTS.
//
// The bridge talks to QEMU over UNIX sockets and hands fds across process
// boundaries; every fd it creates is close-on-exec so that only the fds the
// launcher passes on purpose reach QEMU.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mprdma::pcie {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// A connected AF_UNIX SOCK_STREAM pair, both ends close-on-exec.
// Throws std::system_error.
std::pair<UniqueFd, UniqueFd> make_socketpair();
// A non-blocking, close-on-exec eventfd. Throws std::system_error.
UniqueFd make_eventfd();
// A close-on-exec memfd of `size` bytes. Throws std::system_error.
UniqueFd make_memfd(const char* name, uint64_t size);

// Adds 1 to an eventfd's counter (never blocks: the counter saturates only
// after 2^64-2 unread signals).
void signal_eventfd(int fd);
// Reads and clears an eventfd's counter; returns 0 when it was clear.
uint64_t drain_eventfd(int fd);

// Clears FD_CLOEXEC so that `fd` survives exec. Throws std::system_error.
void set_inheritable(int fd);

// Sends `len` bytes and up to 16 fds in one sendmsg (the fds travel with
// the first byte). Never raises SIGPIPE. Returns false with errno set.
bool send_with_fds(int sock, const void* data, size_t len, const int* fds = nullptr,
                   size_t nfds = 0);

// Reads exactly `len` bytes, collecting any fds that arrive with them
// (close-on-exec, appended to *fds when fds is not null, else closed).
// Blocks. Returns len on success, 0 on EOF before the first byte, -1 on
// error or EOF in the middle (errno is EPIPE then; *error says what).
ssize_t recv_exact(int sock, void* data, size_t len, std::vector<UniqueFd>* fds,
                   std::string* error);

// strerror for errno values, thread-safe.
std::string errno_text(int err);

}  // namespace mprdma::pcie
