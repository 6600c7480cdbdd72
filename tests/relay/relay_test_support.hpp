// Helpers for the relay tests: a minimal RESP2 client and nats-server
// instances. Deadlines, polling, temporary directories, loopback sockets and
// child processes come from tests/common; relay_fixture.hpp adds what the
// in-process tests share.
#pragma once

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.hpp"
#include "deadline.hpp"
#include "eventually.hpp"
#include "fd_io.hpp"
#include "tcp_loopback.hpp"
#include "temp_dir.hpp"

namespace ringcast::relay::testing {

using test::ChildProcess;
using test::connect_loopback;
using test::Deadline;
using test::deadline_in;
using test::eventually;
using test::free_port;
using test::ms_left;
using test::TempDir;
using test::wait_accepting;

// Sanitizer builds run the large tests with fewer messages (see CMakeLists).
inline std::uint64_t scaled(std::uint64_t release_count, std::uint64_t sanitizer_count) {
#if defined(RINGCAST_RELAY_SANITIZED)
  (void)release_count;
  return sanitizer_count;
#else
  (void)sanitizer_count;
  return release_count;
#endif
}

// One RESP2 value, decoded in place: views point into the client's buffer and
// stay valid until the next read. Arrays keep their first four elements.
struct RespElem {
  char type = 0;  // '+', '-', ':', '$' (null bulk: '_')
  std::string_view str;
  long long num = 0;
};
struct RespReply {
  char type = 0;  // as RespElem, or '*'
  std::string_view str;
  long long num = 0;
  std::size_t count = 0;
  std::array<RespElem, 4> elems{};
  [[nodiscard]] bool is_message(std::string_view channel = {}) const {
    return type == '*' && count == 3 && elems[0].str == "message" && (channel.empty() || elems[1].str == channel);
  }
};

// Parses one element at p[0..n); returns bytes used, 0 if incomplete.
inline std::size_t parse_elem(const char* p, std::size_t n, RespElem& e) {
  const void* eol_v = std::memchr(p, '\n', n);
  if (eol_v == nullptr) return 0;
  const char* eol = static_cast<const char*>(eol_v);
  const std::size_t line = static_cast<std::size_t>(eol - p) + 1;  // includes \r\n
  e.type = p[0];
  const std::string_view body(p + 1, line - 3);
  if (e.type == '$') {
    const long long len = std::strtoll(std::string(body).c_str(), nullptr, 10);
    if (len < 0) {
      e.type = '_';
      return line;
    }
    const auto l = static_cast<std::size_t>(len);
    if (n < line + l + 2) return 0;
    e.str = std::string_view(p + line, l);
    return line + l + 2;
  }
  e.str = body;
  if (e.type == ':') e.num = std::strtoll(std::string(body).c_str(), nullptr, 10);
  return line;
}

inline std::size_t parse_reply(const char* p, std::size_t n, RespReply& r) {
  if (n == 0) return 0;
  if (p[0] != '*') {
    RespElem e;
    const std::size_t used = parse_elem(p, n, e);
    if (used == 0) return 0;
    r.type = e.type;
    r.str = e.str;
    r.num = e.num;
    r.count = 0;
    return used;
  }
  const void* eol_v = std::memchr(p, '\n', n);
  if (eol_v == nullptr) return 0;
  const std::size_t head = static_cast<std::size_t>(static_cast<const char*>(eol_v) - p) + 1;
  const long long count = std::strtoll(std::string(p + 1, head - 3).c_str(), nullptr, 10);
  std::size_t used = head;
  r.type = '*';
  r.count = count < 0 ? 0 : static_cast<std::size_t>(count);
  for (std::size_t i = 0; i < r.count; ++i) {
    RespElem e;
    const std::size_t u = parse_elem(p + used, n - used, e);
    if (u == 0) return 0;
    if (i < r.elems.size()) r.elems[i] = e;
    used += u;
  }
  return used;
}

// A blocking RESP2 client with deadlines. One thread at a time.
class RespClient {
 public:
  // `rcvbuf` > 0: SO_RCVBUF set before connecting (a deliberately small window).
  explicit RespClient(std::uint16_t port, int rcvbuf = 0) : fd_(connect_loopback(port, rcvbuf)) {}
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;
  ~RespClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] int fd() const { return fd_; }

  bool send(std::initializer_list<std::string_view> args) {
    std::string out(1, '*');
    out += std::to_string(args.size());
    out += "\r\n";
    for (const auto a : args) {
      out += '$';
      out += std::to_string(a.size());
      out += "\r\n";
      out.append(a);
      out += "\r\n";
    }
    return test::send_all(fd_, out);
  }

  // The next reply, or nullopt at EOF / deadline.
  std::optional<RespReply> next(Deadline d) {
    for (;;) {
      RespReply r;
      const std::size_t used = parse_reply(buf_.data() + pos_, buf_.size() - pos_, r);
      if (used > 0) {
        pos_ += used;
        return r;
      }
      if (!read_more(d, 1 << 16)) return std::nullopt;
    }
  }

  // Reads at most `max_bytes` more (waiting until the deadline for some).
  bool read_more(Deadline d, std::size_t max_bytes) {
    if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms_left(d)) != 1) return false;
    const std::size_t old = buf_.size();
    buf_.resize(old + max_bytes);
    const ssize_t n = ::recv(fd_, buf_.data() + old, max_bytes, 0);
    buf_.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    return n > 0;
  }

  // Parses whatever complete replies are buffered, calling f for each.
  template <class F>
  void for_each_buffered(F&& f) {
    for (;;) {
      RespReply r;
      const std::size_t used = parse_reply(buf_.data() + pos_, buf_.size() - pos_, r);
      if (used == 0) return;
      pos_ += used;
      f(r);
    }
  }

  // Sends a command and returns its reply (not for subscribed connections).
  std::optional<RespReply> call(std::initializer_list<std::string_view> args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (!send(args)) return std::nullopt;
    return next(deadline_in(timeout));
  }

  // SUBSCRIBE one channel (or PSUBSCRIBE) and wait for the confirmation.
  bool subscribe(std::string_view channel, bool pattern = false) {
    if (!send({pattern ? "PSUBSCRIBE" : "SUBSCRIBE", channel})) return false;
    const auto r = next(deadline_in(std::chrono::seconds(10)));
    return r && r->type == '*' && r->count == 3 && r->elems[0].str == (pattern ? "psubscribe" : "subscribe");
  }

 private:
  int fd_ = -1;
  std::string buf_;
  std::size_t pos_ = 0;
};

#ifdef NATS_SERVER_EXE
// nats-server on loopback ports the test picked; killed and reaped on destruction.
struct NatsServerOptions {
  std::uint16_t port = 0;      // 0: the server picks a free port (-p -1), read back from its log
  bool cluster = false;        // also listen for routes, on a port the server picks
  std::uint16_t route_to = 0;  // another server's cluster_port(); 0: no route
  std::string jetstream_dir{};  // non-empty: JetStream on (-js), storing under this directory
  std::string server_name{};    // -n: a JetStream cluster needs a unique one per server
  // The route listen port; 0: the server picks. A JetStream cluster needs
  // every server to have a route configured at start, so two JetStream
  // servers each take a port picked beforehand and route to the other's.
  std::uint16_t cluster_port = 0;
};

class NatsServer {
 public:
  // Starts nats-server on loopback and returns once it accepts clients; nullptr
  // when it fails to start. Ports chosen by the server itself, never picked
  // here and released, so no other process can take them in between.
  static std::unique_ptr<NatsServer> start(NatsServerOptions o = {}) {
    auto s = std::make_unique<NatsServer>();
    std::vector<std::string> argv{NATS_SERVER_EXE, "-a", "127.0.0.1", "-p",
                                  o.port == 0 ? "-1" : std::to_string(o.port)};
    if (o.cluster) {
      const std::string listen = o.cluster_port == 0 ? "-1" : std::to_string(o.cluster_port);
      argv.insert(argv.end(), {"--cluster", "nats://127.0.0.1:" + listen, "--cluster_name", "ringcast-test"});
    }
    if (!o.jetstream_dir.empty()) argv.insert(argv.end(), {"-js", "-sd", o.jetstream_dir});
    if (!o.server_name.empty()) argv.insert(argv.end(), {"-n", o.server_name});
    if (o.route_to != 0) {
      argv.insert(argv.end(), {"--routes", "nats://127.0.0.1:" + std::to_string(o.route_to)});
    }
    s->child_ = ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
    const Deadline d = test::deadline_in(std::chrono::seconds(20));
    s->port_ = s->listening_port("client", d);
    if (o.cluster) s->cluster_port_ = s->listening_port("route", d);
    if (s->port_ == 0 || (o.cluster && s->cluster_port_ == 0) || !wait_accepting(s->port_)) return nullptr;
    return s;
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] std::uint16_t cluster_port() const { return cluster_port_; }
  [[nodiscard]] std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  void kill() { (void)child_.stop(SIGKILL); }
  ChildProcess& child() { return child_; }

 private:
  // The port of nats-server's "Listening for <kind> connections on HOST:PORT"
  // log line; 0 if it does not appear by `d`.
  std::uint16_t listening_port(const std::string& kind, Deadline d) {
    const std::string marker = "Listening for " + kind + " connections on 127.0.0.1:";
    const auto line = child_.running() ? child_.read_stderr_line_with(marker, d) : std::nullopt;
    if (!line) return 0;
    return static_cast<std::uint16_t>(std::strtoul(line->c_str() + line->find(marker) + marker.size(), nullptr, 10));
  }
  std::uint16_t port_ = 0;
  std::uint16_t cluster_port_ = 0;
  ChildProcess child_;
};
#endif  // NATS_SERVER_EXE

}  // namespace ringcast::relay::testing
