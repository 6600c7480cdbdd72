// A load generator's client connection as a byte stream, plain TCP or TLS
// (tls_client.hpp), so that one client code path drives a server's plain and
// TLS ports alike. read() and write() keep the system calls' contract (bytes,
// 0 at EOF, -1 with errno: EAGAIN when a non-blocking socket has nothing or
// is full), so the benchmarks' epoll loops stay as they were; a TLS stream
// only decrypts and encrypts in between.
//
// Ownership: a stream never closes its fd (the caller does, as before); a
// TLS stream frees its SSL. Thread safety: none; one thread at a time.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>

#include "deadline.hpp"

namespace ringcast::bench {

class ByteStream {
 public:
  ByteStream() = default;
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;
  virtual ~ByteStream() = default;

  [[nodiscard]] virtual int fd() const = 0;
  // As ::read: bytes read (up to n), 0 at EOF, -1 with errno set.
  virtual ssize_t read(void* buf, std::size_t n) = 0;
  // As ::send(MSG_NOSIGNAL): bytes taken (a TLS stream may take fewer than n;
  // after -1/EAGAIN call again with the same bytes first), -1 with errno set.
  virtual ssize_t write(const void* buf, std::size_t n) = 0;
  // Decrypted bytes are waiting inside the stream (poll on fd() would miss them).
  [[nodiscard]] virtual bool buffered() const { return false; }
};

class PlainStream final : public ByteStream {
 public:
  explicit PlainStream(int fd) : fd_(fd) {}
  [[nodiscard]] int fd() const override { return fd_; }
  ssize_t read(void* buf, std::size_t n) override { return ::read(fd_, buf, n); }
  ssize_t write(const void* buf, std::size_t n) override { return ::send(fd_, buf, n, MSG_NOSIGNAL); }

 private:
  int fd_;
};

// Writes all of `s`, waiting on a full socket. False once the peer is gone.
inline bool send_all(ByteStream& io, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = io.write(s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{io.fd(), POLLOUT | POLLIN, 0};
      ::poll(&p, 1, 100);
      continue;
    }
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Appends what the stream has, waiting until `d` for the first byte. Returns
// the bytes read, 0 at EOF, -1 with errno set on an error or at the deadline
// (ETIMEDOUT).
inline ssize_t read_some(ByteStream& io, std::string& buf, test::Deadline d) {
  char tmp[65536];
  for (;;) {
    if (!io.buffered()) {
      pollfd p{io.fd(), POLLIN, 0};
      const int ready = ::poll(&p, 1, test::ms_left(d));
      if (ready == 0) errno = ETIMEDOUT;
      if (ready != 1) return -1;
    }
    const ssize_t n = io.read(tmp, sizeof tmp);
    if (n > 0) buf.append(tmp, static_cast<std::size_t>(n));
    // A TLS stream may have read a partial record only: wait again.
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (test::ms_left(d) == 0) {
        errno = ETIMEDOUT;
        return -1;
      }
      continue;
    }
    return n;
  }
}

// Reads into `buf` until `needle` is in it (true), or EOF or the deadline
// comes first (false).
inline bool read_until(ByteStream& io, std::string& buf, std::string_view needle, test::Deadline d) {
  while (buf.find(needle) == std::string::npos) {
    if (read_some(io, buf, d) <= 0) return false;
  }
  return true;
}

}  // namespace ringcast::bench
