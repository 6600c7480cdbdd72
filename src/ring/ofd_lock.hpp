// Open-file-description locks that stand for roles in a ring (the producer,
// each consumer entry). The kernel releases them when the last descriptor of
// the open file description closes, including when the holder is killed, so
// liveness needs no pid (no pid-reuse race) and no heartbeat thread.
//
// Each role locks one byte far past the end of any ring file (locks may lie
// beyond EOF), so the locks never interact with the file's contents.
// Locks of two open() calls conflict even inside one process; a descriptor
// shared through fork() shares its locks (see docs/reliability.md).
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace ringcast::detail {

inline constexpr off_t kLockBase = off_t{1} << 40;
inline constexpr off_t kProducerLock = kLockBase;
[[nodiscard]] inline constexpr off_t consumer_lock(std::uint32_t id) noexcept {
  return kLockBase + 1 + static_cast<off_t>(id);
}

// Takes the write lock on [offset, offset+1) without blocking. Returns 0, or
// EAGAIN when another open file description holds it, or another errno.
[[nodiscard]] int try_lock(int fd, off_t offset) noexcept;
void unlock(int fd, off_t offset) noexcept;
// True when an open file description other than fd's holds the lock.
[[nodiscard]] bool held_by_other(int fd, off_t offset) noexcept;

}  // namespace ringcast::detail
