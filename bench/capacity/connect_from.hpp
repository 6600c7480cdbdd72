// Loopback client connections from a chosen 127.x source address, so that one
// destination can take more connections than the ephemeral port range holds
// (each source address has the whole range to itself). The kernel picks the
// port at connect time (IP_BIND_ADDRESS_NO_PORT), so ports are shared by
// 4-tuple as with an unbound connect, instead of being reserved by bind().
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>

#include <fmt/format.h>

namespace ringcast::bench::capacity {

// 127.0.0.<1 + i> for i = 0..253: every 127/8 address is local on Linux
// without configuration.
inline in_addr source_address(int i) {
  in_addr a{};
  a.s_addr = htonl((127U << 24) | static_cast<std::uint32_t>(1 + i));
  return a;
}

inline std::string to_string(in_addr a) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

// A blocking connection from `from` (port chosen by the kernel) to
// 127.0.0.1:`port` with TCP_NODELAY, or -1 with errno set (EADDRNOTAVAIL:
// this source address has no free port left for this destination).
inline int connect_from(in_addr from, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  src.sin_addr = from;
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<std::uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Closes with a reset instead of a FIN (SO_LINGER 0): no TIME_WAIT socket is
// left behind on either side for the next minute.
inline void close_reset(int fd) {
  const linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// The ephemeral port range (net.ipv4.ip_local_port_range): how many
// connections one source address can open to one destination.
inline int ephemeral_ports(int* low = nullptr, int* high = nullptr) {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int lo = 32768;
  int hi = 60999;
  in >> lo >> hi;
  if (low != nullptr) *low = lo;
  if (high != nullptr) *high = hi;
  return hi - lo + 1;
}

}  // namespace ringcast::bench::capacity
