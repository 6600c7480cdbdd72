// TCP on 127.0.0.1 for tests and benchmarks: a free port for a server the
// test starts, a client connection, and waiting for a server to accept.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "eventually.hpp"

namespace ringcast::test {

// A port nothing listens on right now (the kernel's pick for port 0). Another
// process may take it before the caller binds it; tests that can bind port 0
// themselves should.
inline std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A blocking connection to 127.0.0.1:`port` with TCP_NODELAY, or -1. `rcvbuf`
// > 0: SO_RCVBUF set before connecting (a deliberately small window, which
// also stops the kernel's autotuning). The caller closes it.
inline int connect_loopback(int port, int rcvbuf = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Tries to connect until a server accepts on `port` (true) or `timeout` passes:
// nothing tells the test when the server is listening.
inline bool wait_accepting(int port, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  return eventually(
      [port] {
        const int fd = connect_loopback(port);
        if (fd >= 0) ::close(fd);
        return fd >= 0;
      },
      timeout, std::chrono::milliseconds(5));
}

}  // namespace ringcast::test
