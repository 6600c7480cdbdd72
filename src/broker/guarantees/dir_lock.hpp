// The lock that makes a --data-dir one broker's (docs/guarantees.md,
// "Persistence"): an exclusive flock(2) on DIR/broker.lock, taken before the
// history is read or written and held for the life of the store. Two brokers
// on one directory would each number offsets from their own view of a
// channel's top and overwrite each other's history; the second is refused at
// start instead, with the holder's pid, which the holder writes into the file.
//
// The lock belongs to the open file description, so the kernel releases it
// when the holder exits in any way (kill -9 included): a restart never finds
// a stale lock, and the file's content is only a hint. O_CLOEXEC keeps a
// program the process execs from inheriting it (and so holding it on).
//
// Thread safety: none needed; created once at start, destroyed at the end.
#pragma once

#include <string>

#include <tl/expected.hpp>

#include "broker/guarantees/history_store.hpp"

namespace ringcast::broker {

// The lock file's name inside the directory.
inline constexpr std::string_view kDirLockFile = "broker.lock";

class DirLock {
 public:
  // Creates DIR/broker.lock if missing and locks it without waiting. Fails with
  // kLocked ("in use by another broker (pid N)") when another process, or
  // another DirLock in this one, holds it; kIo if the file cannot be opened.
  [[nodiscard]] static tl::expected<DirLock, HistoryError> acquire(const std::string& dir);

  DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();  // closing the file releases the lock

 private:
  explicit DirLock(int fd) noexcept : fd_(fd) {}
  int fd_;
};

}  // namespace ringcast::broker
