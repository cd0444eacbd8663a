#include "vp/qemu/ivshmem_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace mprdma::pcie {
namespace {

bool send_i64(int sock, int64_t v, int fd = -1) {
  // The protocol is little-endian; so is every host this runs on.
  return fd >= 0 ? send_with_fds(sock, &v, sizeof v, &fd, 1) : send_with_fds(sock, &v, sizeof v);
}

}  // namespace

IvshmemServer::IvshmemServer(std::string name, std::string socket_path, unsigned vectors)
    : name_(std::move(name)), path_(std::move(socket_path)), vectors_(vectors) {
  if (vectors_ == 0 || vectors_ > 1024)
    throw std::invalid_argument(name_ + ": ivshmem vectors must be 1..1024");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path)
    throw std::invalid_argument(name_ + ": ivshmem socket path '" + path_ +
                                "' is empty or longer than " +
                                std::to_string(sizeof addr.sun_path - 1) + " bytes");
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  shm_fd_ = make_memfd("mprdma-ivshmem", kShmBytes);
  stop_fd_ = make_eventfd();
  msg_fd_ = make_eventfd();
  listen_fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listen_fd_) throw std::system_error(errno, std::generic_category(), "ivshmem socket");
  ::unlink(path_.c_str());  // a stale socket of an earlier run
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::system_error(errno, std::generic_category(), name_ + ": bind " + path_);
  if (::listen(listen_fd_.get(), 4) != 0)
    throw std::system_error(errno, std::generic_category(), name_ + ": listen " + path_);
  thread_ = std::thread([this] { run(); });
}

IvshmemServer::~IvshmemServer() {
  signal_eventfd(stop_fd_.get());
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

bool IvshmemServer::notify(unsigned v) {
  std::lock_guard<std::mutex> lock(mu_);
  if (v >= vector_fds_.size()) {
    dropped_.fetch_add(1);
    return false;
  }
  signal_eventfd(vector_fds_[v].get());
  notified_.fetch_add(1);
  return true;
}

std::vector<std::string> IvshmemServer::take_messages() {
  drain_eventfd(msg_fd_.get());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  out.swap(messages_);
  return out;
}

void IvshmemServer::note(std::string msg) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(std::move(msg));
  }
  signal_eventfd(msg_fd_.get());
}

void IvshmemServer::run() {
  for (;;) {
    pollfd fds[3] = {{stop_fd_.get(), POLLIN, 0},
                     {listen_fd_.get(), POLLIN, 0},
                     {client_fd_.get(), POLLIN, 0}};  // -1 is ignored by poll
    const int n = ::poll(fds, 3, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      note("poll failed: " + errno_text(errno) + "; ivshmem server stops");
      return;
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) accept_client();
    if (client_fd_ && fds[2].revents) {
      // QEMU never sends anything; data or hang-up both end the session.
      char buf[64];
      const ssize_t r = ::recv(client_fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        drop_client("QEMU closed the ivshmem connection");
      else if (r > 0)
        note("ignored " + std::to_string(r) + " unexpected bytes from the ivshmem client");
    }
  }
  drop_client("");
}

void IvshmemServer::accept_client() {
  UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) {
    note("accept failed: " + errno_text(errno));
    return;
  }
  if (client_fd_) {
    note("refused a second ivshmem client (one QEMU per server)");
    return;  // fd closes
  }
  const int64_t id = next_id_++;
  std::vector<UniqueFd> vecs;
  for (unsigned i = 0; i < vectors_; ++i) vecs.push_back(make_eventfd());
  bool ok = send_i64(fd.get(), kProtocolVersion) && send_i64(fd.get(), id) &&
            send_i64(fd.get(), -1, shm_fd_.get());
  for (unsigned i = 0; ok && i < vectors_; ++i) ok = send_i64(fd.get(), id, vecs[i].get());
  if (!ok) {
    note("sending the set-up to the ivshmem client failed: " + errno_text(errno));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    vector_fds_ = std::move(vecs);
  }
  client_fd_ = std::move(fd);
  peer_id_.store(id);
  accepted_.fetch_add(1);
  connected_.store(true);
  note("ivshmem client connected as peer " + std::to_string(id) + " with " +
       std::to_string(vectors_) + " vectors");
}

void IvshmemServer::drop_client(const std::string& why) {
  if (!client_fd_) return;
  connected_.store(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    vector_fds_.clear();
  }
  client_fd_.reset();
  if (!why.empty()) note(why);
}

}  // namespace mprdma::pcie
