// Small helpers shared by the ring tests: temporary directories, byte views,
// files, and child processes that are always reaped.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringcast/layout.hpp"

namespace ringcast::test {

using Buffer = std::array<std::byte, kMaxPayload>;

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A fresh directory under /dev/shm (tmpfs, like production rings), removed on exit.
class TempDir {
 public:
  TempDir() {
    std::string templ = "/dev/shm/ringcast-test-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline unsigned file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777U;
}

inline void make_symlink(const std::string& target, const std::string& link) {
  std::filesystem::create_symlink(target, link);
}

// A child process started with fork+exec, its stdout on a pipe; killed and
// reaped by the destructor if the test did not wait for it.
class Child {
 public:
  explicit Child(std::vector<std::string> argv) {
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
  }
  Child(Child&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), out_(std::exchange(other.out_, -1)) {}
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Reads stdout until a line equal to `line` arrives; false on EOF (the child
  // exited without printing it).
  bool wait_for_line(const std::string& line) {
    std::string current;
    char c = 0;
    while (::read(out_, &c, 1) == 1) {
      if (c != '\n') {
        current += c;
        continue;
      }
      if (current == line) return true;
      current.clear();
    }
    return false;
  }
  // Reads stdout to EOF.
  std::string read_all() {
    std::string all;
    char chunk[4096];
    ssize_t n = 0;
    while ((n = ::read(out_, chunk, sizeof chunk)) > 0) all.append(chunk, static_cast<std::size_t>(n));
    return all;
  }
  // Waits for exit; returns the exit status, or 128+signal.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void kill(int sig) const { ::kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

struct CommandResult {
  int status = -1;
  std::string out;
};

// Runs a shell command line and captures its stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) result.out.append(chunk, n);
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Polls `condition` until it holds or `timeout` passes.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace ringcast::test
