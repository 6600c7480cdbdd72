// TcpGate: a TCP forwarder on 127.0.0.1 that the test opens and shuts, put
// between a client under test and a server the test restarts. It lets a test
// decide *when* the client reaches the restarted server: the relay's NATS
// connection, for one, flushes what libnats buffered during an outage the
// moment it reconnects, so a test that wants to see those messages must have
// its subscriber on the new server first, and a plain restart on the same
// port would race the subscriber against the reconnect.
//
//  * Listens on a port the kernel picks (port()).
//  * Shut (the initial state, and after shut()): a connection is accepted and
//    closed at once; a client sees a failed connect and retries.
//  * Open (open_to(port)): each new connection is forwarded, both ways, to a
//    fresh connection to 127.0.0.1:port. When either side closes, the other
//    is closed too, so a server that dies looks dead to the client.
//
// Thread safety: open_to() and shut() from the test's thread; one accept
// thread and two copy threads per forwarded connection, all joined (after
// their sockets are shut down) by the destructor.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fd_io.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::relay::testing {

class TcpGate {
 public:
  TcpGate() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  TcpGate(const TcpGate&) = delete;
  TcpGate& operator=(const TcpGate&) = delete;
  ~TcpGate() {
    if (listen_fd_ >= 0) ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    if (acceptor_.joinable()) acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (const int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // wakes every copy thread's read()
    }
    for (std::thread& t : copiers_) t.join();
    for (const int fd : fds_) ::close(fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }

  [[nodiscard]] bool ok() const { return port_ != 0; }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  // Connections accepted from now on go to 127.0.0.1:`backend`; earlier ones
  // keep their backend.
  void open_to(std::uint16_t backend) { backend_.store(backend, std::memory_order_release); }
  // Connections accepted from now on are closed at once; forwarded ones are
  // left alone (they end when their server does).
  void shut() { backend_.store(0, std::memory_order_release); }

 private:
  void accept_loop() {
    for (;;) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        return;  // shut down by the destructor
      }
      // acquire: pairs with the release in open_to(), which the test orders
      // after whatever must happen before the client gets through.
      const std::uint16_t backend = backend_.load(std::memory_order_acquire);
      const int server = backend == 0 ? -1 : test::connect_loopback(backend);
      if (server < 0) {
        ::close(client);
        continue;
      }
      std::lock_guard lock(mu_);
      fds_.push_back(client);
      fds_.push_back(server);
      copiers_.emplace_back([client, server] { copy(client, server); });
      copiers_.emplace_back([client, server] { copy(server, client); });
    }
  }

  // Copies `from` to `to` until either ends, then ends both (the fds are
  // closed by the destructor, so a late shutdown() never hits a reused fd).
  static void copy(int from, int to) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::read(from, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (!test::send_all(to, std::string_view(buf, static_cast<std::size_t>(n)))) break;
    }
    ::shutdown(from, SHUT_RDWR);
    ::shutdown(to, SHUT_RDWR);
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<std::uint16_t> backend_{0};
  std::thread acceptor_;
  std::mutex mu_;  // guards fds_ and copiers_ (the acceptor adds, the destructor reads after joining it)
  std::vector<int> fds_;
  std::vector<std::thread> copiers_;
};

}  // namespace ringcast::relay::testing
