// Child processes and sockets for the broker's integration tests: spawn the
// broker executable or redis-cli with a stdout pipe, read with deadlines, and
// always reap.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace ringcast::broker::testing {

using Deadline = std::chrono::steady_clock::time_point;
inline Deadline deadline_in(std::chrono::milliseconds d) { return std::chrono::steady_clock::now() + d; }
inline int ms_left(Deadline d) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Reads from `fd` into `buf` until `needle` appears or the deadline passes.
inline bool read_until(int fd, std::string& buf, std::string_view needle, Deadline d) {
  while (buf.find(needle) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    const int left = ms_left(d);
    if (left == 0 || ::poll(&p, 1, left) <= 0) return false;
    char tmp[65536];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0) return buf.find(needle) != std::string::npos;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until EOF (true) or the deadline (false); appends what it read.
inline bool read_to_eof(int fd, std::string& buf, Deadline d) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int left = ms_left(d);
    if (left == 0 || ::poll(&p, 1, left) <= 0) return false;
    char tmp[65536];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  Child(Child&& o) noexcept : pid_(o.pid_), out_(o.out_), buf_(std::move(o.buf_)) {
    o.pid_ = -1;
    o.out_ = -1;
  }
  Child& operator=(Child&& o) noexcept {
    if (this != &o) {
      (void)stop(SIGKILL);
      pid_ = std::exchange(o.pid_, -1);
      out_ = std::exchange(o.out_, -1);
      buf_ = std::move(o.buf_);
    }
    return *this;
  }
  ~Child() { (void)stop(SIGKILL); }

  // Starts argv[0] with stdout (and stderr, when `merge_stderr`) on a pipe.
  static Child spawn(const std::vector<std::string>& argv, bool merge_stderr = false) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (merge_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    Child c;
    if (posix_spawn(&c.pid_, argv[0].c_str(), &fa, nullptr, args.data(), environ) != 0) c.pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    c.out_ = fds[0];
    return c;
  }

  [[nodiscard]] bool running() const { return pid_ > 0; }
  [[nodiscard]] int out_fd() const { return out_; }
  std::string& output() { return buf_; }
  bool read_until(std::string_view needle, Deadline d) { return testing::read_until(out_, buf_, needle, d); }

  // Sends `sig`, waits up to 10 s (then SIGKILL), reaps. Returns the wait
  // status, or nullopt if there was no child.
  std::optional<int> stop(int sig = SIGTERM) {
    if (pid_ <= 0) return std::nullopt;
    ::kill(pid_, sig);
    int status = 0;
    const Deadline d = deadline_in(std::chrono::seconds(10));
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (ms_left(d) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // bounded reap poll, not a sync stand-in
    }
    pid_ = -1;
    if (out_ >= 0) ::close(out_);
    out_ = -1;
    return status;
  }

  // Waits for a child that exits by itself (redis-cli publish).
  std::optional<int> wait_exit(Deadline d) {
    if (pid_ <= 0) return std::nullopt;
    int status = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return status;
      }
      if (ms_left(d) == 0) return std::nullopt;
      (void)testing::read_until(out_, buf_, "\x01never", deadline_in(std::chrono::milliseconds(10)));
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buf_;
};

// Starts the broker executable on 127.0.0.1 port 0 and learns its port.
class BrokerProcess {
 public:
  explicit BrokerProcess(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{BROKER_EXE, "--port", "0", "--io-threads", "2"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = Child::spawn(argv);
    if (child_.read_until("\n", deadline_in(std::chrono::seconds(20)))) {
      const std::string& out = child_.output();
      const auto colon = out.rfind(':');
      if (colon != std::string::npos) port_ = std::stoi(out.substr(colon + 1));
    }
  }
  [[nodiscard]] int port() const { return port_; }
  // SIGTERM and reap; the exit status must be a clean 0 (sanitizer reports in
  // the child make it non-zero).
  std::optional<int> stop() { return child_.stop(SIGTERM); }

 private:
  Child child_;
  int port_ = 0;
};

inline int connect_to(int port, int rcvbuf = 0) {
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
  return fd;
}

inline bool send_all(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace ringcast::broker::testing
