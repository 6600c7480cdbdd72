// Blocking reads and writes on a socket or pipe, each bounded by a deadline or
// by the peer: what the tests' clients and child-process pipes share.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "deadline.hpp"

namespace ringcast::test {

// Appends what `fd` has, waiting until `d` for the first byte. Returns the
// bytes read, 0 at EOF, -1 with errno set on an error or at the deadline
// (ETIMEDOUT).
inline ssize_t read_some(int fd, std::string& buf, Deadline d) {
  if (fd < 0) {
    errno = EBADF;
    return -1;
  }
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, ms_left(d));
  if (ready == 0) errno = ETIMEDOUT;
  if (ready != 1) return -1;
  char tmp[65536];
  ssize_t n = 0;
  do {
    n = ::read(fd, tmp, sizeof tmp);
  } while (n < 0 && errno == EINTR);
  if (n > 0) buf.append(tmp, static_cast<std::size_t>(n));
  return n;
}

// Reads from `fd` into `buf` until `needle` is in `buf` (true), or EOF or the
// deadline comes first (false).
inline bool read_until(int fd, std::string& buf, std::string_view needle, Deadline d) {
  while (buf.find(needle) == std::string::npos) {
    if (read_some(fd, buf, d) <= 0) return false;
  }
  return true;
}

// Reads until EOF (true; a connection reset counts as EOF) or the deadline
// (false); appends what it read.
inline bool read_to_eof(int fd, std::string& buf, Deadline d) {
  for (;;) {
    const ssize_t n = read_some(fd, buf, d);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// Sends all of `s` on a socket (no SIGPIPE), blocking or not: a full
// non-blocking socket is waited on. False once the peer is gone.
inline bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace ringcast::test
