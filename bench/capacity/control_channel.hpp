// The line protocol between the capacity harness and its client processes, on
// a socketpair whose child end the client inherits (--control-fd). Text lines
// both ways, plus raw bytes of a known length (a histogram) from the client.
//
//   harness -> client            client -> harness
//                                progress <connected>            while connecting
//                                ready <connected> | failed <connected> <why>
//   round <k>                    armed  (each connection's target: k more messages; the
//                                       harness publishes only after every client is armed)
//                                done <first_ns> <last_ns> <complete> <alive> <received> <gaps> <cpu_s> <bytes>\n
//                                     then <bytes> of LatencyHistogram
//   status                       status <complete> <alive> <received> <gaps>
//   quit (or EOF)                (the client closes everything and exits)
//
// Times are CLOCK_MONOTONIC (steady_clock) nanoseconds, one clock for every
// process on the host.
//
// Thread safety: none; one thread per end.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "deadline.hpp"
#include "fd_io.hpp"

namespace ringcast::bench::capacity {

class ControlChannel {
 public:
  ControlChannel() = default;
  explicit ControlChannel(int fd) : fd_(fd) {}
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;
  ControlChannel(ControlChannel&& o) noexcept : fd_(o.fd_), in_(std::move(o.in_)) { o.fd_ = -1; }
  ~ControlChannel() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int fd() const { return fd_; }

  bool send(std::string_view line) { return test::send_all(fd_, line); }

  // A complete line already read, without '\n'; nullopt if none is buffered.
  std::optional<std::string> buffered_line() {
    const auto nl = in_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = in_.substr(0, nl);
    in_.erase(0, nl + 1);
    return line;
  }

  // Reads what the socket has (it is readable): false at EOF or on an error.
  bool pump() {
    char buf[65536];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (n <= 0) return false;
    in_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  // The next line, waiting until `d`; nullopt at EOF or the deadline.
  std::optional<std::string> read_line(test::Deadline d) {
    for (;;) {
      if (auto line = buffered_line()) return line;
      if (test::read_some(fd_, in_, d) <= 0) return std::nullopt;
    }
  }

  // Exactly `n` raw bytes into `out`, waiting until `d`.
  bool read_bytes(void* out, std::size_t n, test::Deadline d) {
    while (in_.size() < n) {
      if (test::read_some(fd_, in_, d) <= 0) return false;
    }
    std::memcpy(out, in_.data(), n);
    in_.erase(0, n);
    return true;
  }

 private:
  int fd_ = -1;
  std::string in_;
};

}  // namespace ringcast::bench::capacity
