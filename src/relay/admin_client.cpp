#include "relay/admin_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ringcast::relay {

namespace {

using SteadyClock = std::chrono::steady_clock;

int ms_left(SteadyClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// A socket closed on every path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

int connect_with_deadline(const std::string& host_in, std::uint16_t port, SteadyClock::time_point deadline) {
  std::string host = host_in;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (::inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof *a4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    family = AF_INET6;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof *a6;
  } else {
    return -1;
  }
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t elen = sizeof err;
    if (::poll(&p, 1, ms_left(deadline)) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 ||
        err != 0) {
      ::close(fd);
      return -1;
    }
  }
  return fd;
}

bool send_all(int fd, std::string_view data, SteadyClock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, ms_left(deadline)) != 1) return false;
  }
  return true;
}

// Reads RESP2 replies of the simple kinds the admin commands produce.
class Reader {
 public:
  Reader(int fd, SteadyClock::time_point deadline) : fd_(fd), deadline_(deadline) {}

  // One reply: "+..." and "-..." as their line (with the type byte), "$n" as
  // the bulk's bytes prefixed by '$'. nullopt on error or timeout.
  std::optional<std::string> reply() {
    auto line = read_line();
    if (!line || line->empty()) return std::nullopt;
    if ((*line)[0] != '$') return line;
    const long n = std::strtol(line->c_str() + 1, nullptr, 10);
    if (n < 0) return std::string("$");
    if (!fill(static_cast<std::size_t>(n) + 2)) return std::nullopt;
    std::string out = "$" + buf_.substr(0, static_cast<std::size_t>(n));
    buf_.erase(0, static_cast<std::size_t>(n) + 2);
    return out;
  }

 private:
  std::optional<std::string> read_line() {
    for (;;) {
      const auto eol = buf_.find("\r\n");
      if (eol != std::string::npos) {
        std::string line = buf_.substr(0, eol);
        buf_.erase(0, eol + 2);
        return line;
      }
      if (!more()) return std::nullopt;
    }
  }
  bool fill(std::size_t n) {
    while (buf_.size() < n) {
      if (!more()) return false;
    }
    return true;
  }
  bool more() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, ms_left(deadline_)) != 1) return false;
    char tmp[16384];
    const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
    buf_.append(tmp, static_cast<std::size_t>(n));
    return true;
  }

  int fd_;
  SteadyClock::time_point deadline_;
  std::string buf_;
};

std::string command(std::initializer_list<std::string_view> args) {
  std::string out = fmt::format("*{}\r\n", args.size());
  for (const auto a : args) out += fmt::format("${}\r\n{}\r\n", a.size(), a);
  return out;
}

}  // namespace

std::optional<std::string> fetch_client_list(const std::string& host, std::uint16_t port,
                                             const std::string& password, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  Fd fd(connect_with_deadline(host, port, deadline));
  if (fd.get() < 0) return std::nullopt;
  std::string out;
  if (!password.empty()) out += command({"AUTH", password});
  out += command({"CLIENT", "SETNAME", kAdminClientName});
  out += command({"CLIENT", "LIST"});
  if (!send_all(fd.get(), out, deadline)) return std::nullopt;
  Reader reader(fd.get(), deadline);
  if (!password.empty()) {
    const auto r = reader.reply();
    if (!r || *r != "+OK") return std::nullopt;
  }
  const auto named = reader.reply();
  if (!named || *named != "+OK") return std::nullopt;
  auto list = reader.reply();
  if (!list || list->empty() || (*list)[0] != '$') return std::nullopt;
  return list->substr(1);
}

std::vector<ClientFields> parse_client_list(std::string_view body) {
  std::vector<ClientFields> rows;
  while (!body.empty()) {
    const auto eol = body.find('\n');
    std::string_view line = body.substr(0, eol);
    body.remove_prefix(eol == std::string_view::npos ? body.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    ClientFields row;
    while (!line.empty()) {
      const auto sp = line.find(' ');
      const std::string_view field = line.substr(0, sp);
      line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
      const auto eq = field.find('=');
      if (eq == std::string_view::npos) continue;
      row.emplace(std::string(field.substr(0, eq)), std::string(field.substr(eq + 1)));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ringcast::relay
