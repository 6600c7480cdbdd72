#include "broker/guarantees/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include <fmt/format.h>

namespace ringcast::broker {

namespace {

// The pid the holder wrote, or 0 (empty: it is between its flock and its write).
long holder_pid(int fd) noexcept {
  char buf[24];
  const ssize_t n = pread(fd, buf, sizeof buf, 0);
  long pid = 0;
  if (n > 0) (void)std::from_chars(buf, buf + n, pid);
  return pid;
}

}  // namespace

tl::expected<DirLock, HistoryError> DirLock::acquire(const std::string& dir) {
  const std::string path = fmt::format("{}/{}", dir, kDirLockFile);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return tl::unexpected(
        HistoryError{HistoryError::Code::kIo, errno, fmt::format("history dir {}: open {}", dir, path)});
  }
  DirLock lock(fd);
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno == EWOULDBLOCK) {
    const long pid = holder_pid(fd);
    return tl::unexpected(HistoryError{
        HistoryError::Code::kLocked, 0,
        fmt::format("history dir {}: in use by another broker ({}, which holds the lock on {}); two brokers on one "
                    "--data-dir would overwrite each other's history",
                    dir, pid > 0 ? fmt::format("pid {}", pid) : std::string("pid unknown"), path)});
  }
  if (rc != 0) {
    return tl::unexpected(
        HistoryError{HistoryError::Code::kIo, errno, fmt::format("history dir {}: flock {}", dir, path)});
  }
  // A hint for the refusal above; the lock, not the content, is what counts.
  const std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return tl::unexpected(
        HistoryError{HistoryError::Code::kIo, errno, fmt::format("history dir {}: write {}", dir, path)});
  }
  return lock;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ringcast::broker
