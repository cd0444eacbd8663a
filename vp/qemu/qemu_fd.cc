#include "vp/qemu/qemu_fd.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace mprdma::pcie {
namespace {

constexpr size_t kMaxFdsPerMessage = 16;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::pair<UniqueFd, UniqueFd> make_socketpair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw_errno("socketpair");
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

UniqueFd make_eventfd() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) throw_errno("eventfd");
  return UniqueFd(fd);
}

UniqueFd make_memfd(const char* name, uint64_t size) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd) throw_errno(std::string("memfd_create ") + name);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0)
    throw_errno(std::string("ftruncate memfd ") + name);
  return fd;
}

void signal_eventfd(int fd) {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated: the reader has a wake-up pending
  // anyway, so losing this increment loses nothing.
  ssize_t n;
  do {
    n = ::write(fd, &one, sizeof one);
  } while (n < 0 && errno == EINTR);
}

uint64_t drain_eventfd(int fd) {
  uint64_t v = 0;
  ssize_t n;
  do {
    n = ::read(fd, &v, sizeof v);
  } while (n < 0 && errno == EINTR);
  return n == sizeof v ? v : 0;
}

void set_inheritable(int fd) {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) != 0)
    throw_errno("fcntl(F_SETFD) on fd " + std::to_string(fd));
}

bool send_with_fds(int sock, const void* data, size_t len, const int* fds, size_t nfds) {
  if (nfds > kMaxFdsPerMessage) {
    errno = EINVAL;
    return false;
  }
  iovec iov{const_cast<void*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  if (nfds > 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  size_t sent = 0;
  while (sent < len) {
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    sent += static_cast<size_t>(n);
    // The fds went with the first chunk; the rest is plain data.
    iov.iov_base = static_cast<char*>(const_cast<void*>(data)) + sent;
    iov.iov_len = len - sent;
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
  }
  return true;
}

ssize_t recv_exact(int sock, void* data, size_t len, std::vector<UniqueFd>* fds,
                   std::string* error) {
  size_t got = 0;
  while (got < len) {
    iovec iov{static_cast<char*>(data) + got, len - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      if (error) *error = errno_text(err);
      errno = err;
      return -1;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        UniqueFd owned(fd);
        if (fds) fds->push_back(std::move(owned));
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      if (error) *error = "more file descriptors than expected (control data truncated)";
      errno = EPROTO;
      return -1;
    }
    if (n == 0) {
      if (got == 0) return 0;
      if (error) *error = "connection closed in the middle of a message";
      errno = EPIPE;
      return -1;
    }
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf).
  return ::strerror_r(err, buf, sizeof buf);
}

}  // namespace mprdma::pcie
