// Child processes for tests and benchmarks that die with the test.
//
// fork_with_death_signal() is fork() whose child gets SIGKILL when its parent
// dies (PR_SET_PDEATHSIG), so a test process that aborts (a sanitizer report, a
// crash, a timeout kill) leaves no servers or helpers behind. The signal fires
// when the *thread* that forked exits: fork from a thread that outlives the
// child (a test's main thread does). Every fork in tests/ and bench/ goes
// through it.
//
// ChildProcess is a child started with fork+exec through it, its stdout and
// stderr on pipes, on /dev/null or inherited, always killed and reaped.
//
// Thread safety: one thread at a time per ChildProcess. Both may run while
// other threads run: a forked child of a multi-threaded process may call only
// async-signal-safe functions (before exec, for ChildProcess), and the death
// signal set-up calls only those.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deadline.hpp"
#include "fd_io.hpp"

extern char** environ;

namespace ringcast::test {

// Where a child's stdout or stderr goes.
enum class Stream {
  kPipe,     // a pipe this object reads (stdout_text(), stderr_text())
  kDiscard,  // /dev/null
  kInherit,  // the test's own, so it shows in the test log
};

struct SpawnOptions {
  Stream out = Stream::kPipe;
  Stream err = Stream::kInherit;
  std::vector<std::string> env_set{};    // "NAME=value" entries, replacing any NAME
  std::vector<std::string> env_unset{};  // names removed from the environment
  std::string exe{};                     // the file to run; empty: argv[0]
};

// The exit code in a wait status: a normal exit's code, 128 + the signal that
// killed the child (as a shell reports it), or -1 without a status.
inline int exit_code(const std::optional<int>& status) {
  if (!status) return -1;
  if (WIFEXITED(*status)) return WEXITSTATUS(*status);
  if (WIFSIGNALED(*status)) return 128 + WTERMSIG(*status);
  return -1;
}

// In a child of `parent` (its pid, read by the parent before fork): asks for
// SIGKILL when the parent's forking thread exits, or _exit(127) if the parent
// is already gone. The getppid() check closes the race in which the parent
// dies before prctl: the child has then been re-parented and no signal would
// come. Changing the effective or filesystem uid or gid clears the death
// signal: call this again after setuid() and friends. Async-signal-safe.
inline void die_with_parent(pid_t parent) noexcept {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
}

// fork() for tests: returns as fork() does (0 in the child, the child's pid or
// -1 in the parent), and the child dies with the calling thread
// (die_with_parent). Async-signal-safe.
inline pid_t fork_with_death_signal() noexcept {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) die_with_parent(parent);
  return pid;
}

class ChildProcess {
 public:
  // Starts argv[0] (a path: PATH is not searched), or options.exe with argv[0]
  // as its name, with stdin on /dev/null.
  // Returns an object that is not running() if a pipe, fork or exec failed.
  static ChildProcess spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {}) {
    ChildProcess c;
    if (argv.empty()) return c;
    // Everything the child uses is built before fork: between fork and exec it
    // may call only async-signal-safe functions (other threads may hold locks).
    const char* exe = options.exe.empty() ? argv[0].c_str() : options.exe.c_str();
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv(*e);
      const std::string_view name = kv.substr(0, kv.find('='));
      bool drop = false;
      for (const auto& u : options.env_unset) drop = drop || name == u;
      for (const auto& s : options.env_set) {
        drop = drop || name == std::string_view(s).substr(0, s.find('='));
      }
      if (!drop) env.emplace_back(kv);
    }
    env.insert(env.end(), options.env_set.begin(), options.env_set.end());
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);

    // Pipes: [0] read end, [1] write end; -1 where unused. All close on exec,
    // so `exec_error` reads EOF once exec succeeded, or the child's errno.
    int out[2] = {-1, -1};
    int err[2] = {-1, -1};
    int exec_error[2] = {-1, -1};
    const int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    bool ok = devnull >= 0 && ::pipe2(exec_error, O_CLOEXEC) == 0;
    if (ok && options.out == Stream::kPipe) ok = ::pipe2(out, O_CLOEXEC) == 0;
    if (ok && options.err == Stream::kPipe) ok = ::pipe2(err, O_CLOEXEC) == 0;
    const pid_t pid = ok ? fork_with_death_signal() : -1;
    if (pid == 0) {
      ::dup2(devnull, STDIN_FILENO);
      if (options.out != Stream::kInherit) {
        ::dup2(options.out == Stream::kPipe ? out[1] : devnull, STDOUT_FILENO);
      }
      if (options.err != Stream::kInherit) {
        ::dup2(options.err == Stream::kPipe ? err[1] : devnull, STDERR_FILENO);
      }
      ::execve(exe, args.data(), envp.data());
      const int e = errno;
      (void)!::write(exec_error[1], &e, sizeof e);
      ::_exit(127);
    }
    for (const int fd : {devnull, out[1], err[1], exec_error[1]}) {
      if (fd >= 0) ::close(fd);
    }
    c.out_.fd = out[0];  // on failure, closed by c's destructor
    c.err_.fd = err[0];
    if (pid > 0) {
      int e = 0;
      ssize_t n = 0;
      do {
        n = ::read(exec_error[0], &e, sizeof e);
      } while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(sizeof e)) {
        ::waitpid(pid, nullptr, 0);  // exec failed: the child is exiting
      } else {
        c.pid_ = pid;
      }
    }
    if (exec_error[0] >= 0) ::close(exec_error[0]);
    return c;
  }

  // Takes over a child that this process started and release()d: stop() and
  // the destructor apply to it again. It has no pipes.
  static ChildProcess adopt(pid_t pid) {
    ChildProcess c;
    c.pid_ = pid;
    return c;
  }

  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& o) noexcept
      : pid_(std::exchange(o.pid_, -1)),
        out_(std::exchange(o.out_, {})),
        err_(std::exchange(o.err_, {})),
        line_pos_(std::exchange(o.line_pos_, 0)) {}
  ChildProcess& operator=(ChildProcess&& o) noexcept {
    if (this != &o) {
      (void)stop(SIGKILL);
      close_pipes();
      pid_ = std::exchange(o.pid_, -1);
      out_ = std::exchange(o.out_, {});
      err_ = std::exchange(o.err_, {});
      line_pos_ = std::exchange(o.line_pos_, 0);
    }
    return *this;
  }
  // SIGKILL and reap, if the child was not reaped yet.
  ~ChildProcess() {
    (void)stop(SIGKILL);
    close_pipes();
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  // True until the child is reaped (it may have exited already).
  [[nodiscard]] bool running() const { return pid_ > 0; }

  // Reads the pipe until `needle` is in its text (true), or EOF or the
  // deadline comes first (false).
  bool read_stdout_until(std::string_view needle, Deadline d) { return read_until(out_.fd, out_.text, needle, d); }
  bool read_stderr_until(std::string_view needle, Deadline d) { return read_until(err_.fd, err_.text, needle, d); }
  // The first whole line of stderr (without '\n') that contains `needle`;
  // nullopt at EOF or the deadline.
  std::optional<std::string> read_stderr_line_with(std::string_view needle, Deadline d) {
    for (;;) {
      const auto at = err_.text.find(needle);
      const auto nl = at == std::string::npos ? at : err_.text.find('\n', at);
      if (nl != std::string::npos) {
        const auto begin = err_.text.rfind('\n', at);
        const auto start = begin == std::string::npos ? 0 : begin + 1;
        return err_.text.substr(start, nl - start);
      }
      if (read_some(err_.fd, err_.text, d) <= 0) return std::nullopt;
    }
  }
  // The line of stdout (without '\n') after the last one this returned;
  // nullopt at EOF or the deadline.
  std::optional<std::string> read_line(Deadline d = deadline_in(std::chrono::seconds(20))) {
    for (;;) {
      const auto nl = out_.text.find('\n', line_pos_);
      if (nl != std::string::npos) {
        std::string line = out_.text.substr(line_pos_, nl - line_pos_);
        line_pos_ = nl + 1;
        return line;
      }
      if (read_some(out_.fd, out_.text, d) <= 0) return std::nullopt;
    }
  }
  // The read end of the stdout pipe (-1 unless Stream::kPipe), for a caller
  // that reads a long stream itself instead of keeping it in stdout_text().
  [[nodiscard]] int stdout_fd() const { return out_.fd; }
  // All read from each pipe so far.
  [[nodiscard]] const std::string& stdout_text() const { return out_.text; }
  [[nodiscard]] const std::string& stderr_text() const { return err_.text; }

  // Waits for the child to exit by itself, reading its pipes meanwhile (a
  // full pipe would block it); then reaps it and reads the pipes to EOF (at
  // most 2 s more). Returns the wait status, or nullopt if the child still
  // runs at the deadline (or there is none).
  std::optional<int> wait_exit(Deadline d) {
    for (;;) {
      if (pid_ <= 0) return std::nullopt;
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        const Deadline eof = deadline_in(std::chrono::seconds(2));
        while ((out_.fd >= 0 || err_.fd >= 0) && ms_left(eof) > 0) pump(ms_left(eof));
        return status;
      }
      if (r < 0 && errno != EINTR) {
        pid_ = -1;  // not our child any more: nothing to wait for
        return std::nullopt;
      }
      if (ms_left(d) == 0) return std::nullopt;
      pump(std::min(ms_left(d), 5));  // also the pause between reap attempts
    }
  }

  // Sends `sig`, waits up to 10 s (then SIGKILL) and reaps, as wait_exit.
  // Returns the wait status, or nullopt if there was no child.
  std::optional<int> stop(int sig = SIGTERM) {
    if (pid_ <= 0) return std::nullopt;
    ::kill(pid_, sig);
    if (auto status = wait_exit(deadline_in(std::chrono::seconds(10)))) return status;
    if (pid_ <= 0) return std::nullopt;
    ::kill(pid_, SIGKILL);  // only a stuck kernel call delays its effect
    return wait_exit(deadline_in(std::chrono::seconds(60)));
  }

  // Lets the child go without stopping it, closing the pipes; the caller
  // must reap the returned pid (adopt() can). -1 if there was no child.
  pid_t release() {
    close_pipes();
    return std::exchange(pid_, -1);
  }

 private:
  struct Pipe {
    int fd = -1;
    std::string text;
  };

  // Reads what the pipes have, waiting up to `timeout_ms` for the first bytes
  // (just waiting, with no pipe open). A pipe at EOF is closed.
  void pump(int timeout_ms) {
    pollfd p[2] = {{out_.fd, POLLIN, 0}, {err_.fd, POLLIN, 0}};  // poll skips fd -1
    if (::poll(p, 2, timeout_ms) <= 0) return;
    Pipe* pipes[2] = {&out_, &err_};
    for (int i = 0; i < 2; ++i) {
      if (p[i].revents == 0) continue;
      if (read_some(pipes[i]->fd, pipes[i]->text, Deadline{}) <= 0) {
        ::close(pipes[i]->fd);
        pipes[i]->fd = -1;
      }
    }
  }
  void close_pipes() {
    for (Pipe* pipe : {&out_, &err_}) {
      if (pipe->fd >= 0) ::close(pipe->fd);
      pipe->fd = -1;
    }
  }

  pid_t pid_ = -1;
  Pipe out_;
  Pipe err_;
  std::size_t line_pos_ = 0;
};

}  // namespace ringcast::test
