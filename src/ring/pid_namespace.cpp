#include "pid_namespace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

namespace ringcast::detail {

std::uint64_t own_pid_namespace() noexcept {
  // Cached per pid: a process stays in its namespace, but a child forked
  // after unshare(CLONE_NEWPID) starts in a new one. The inode is stored
  // before the pid, so a reader that sees its own pid sees its inode; a
  // reader that sees another pid recomputes.
  static std::atomic<std::uint64_t> cached_ns{0};
  static std::atomic<long> cached_pid{0};
  const long pid = ::getpid();
  // acquire: pairs with the release store below, so the inode is this pid's.
  if (cached_pid.load(std::memory_order_acquire) == pid) return cached_ns.load(std::memory_order_relaxed);
  struct stat st {};
  const std::uint64_t ns = ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
  // relaxed, then release: a racing thread computes the same value.
  cached_ns.store(ns, std::memory_order_relaxed);
  cached_pid.store(pid, std::memory_order_release);
  return ns;
}

bool pid_namespace_is_ours(std::uint64_t pidns) noexcept {
  const std::uint64_t ours = own_pid_namespace();
  return pidns == 0 || ours == 0 || pidns == ours;
}

}  // namespace ringcast::detail
