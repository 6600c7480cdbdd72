#include "membarrier.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace ringcast::detail {
namespace {

long membarrier(int cmd) noexcept { return ::syscall(SYS_membarrier, cmd, 0, 0); }

bool query_and_register() noexcept {
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0) return false;
  constexpr long kNeeded = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  if ((supported & kNeeded) != kNeeded) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
}

}  // namespace

bool register_light_side() noexcept {
  // The answer is cached per pid: registration belongs to the address space,
  // and a child forked after we registered has a new one (exec resets it too).
  // +pid: registered; -pid: failed. Two threads racing both register, which
  // is idempotent.
  static std::atomic<long> cache{0};
  const long pid = ::getpid();
  // relaxed: the cached value carries no other data.
  const long cached = cache.load(std::memory_order_relaxed);
  if (cached == pid || cached == -pid) return cached == pid;
  const bool ok = query_and_register();
  // relaxed: as for the load; a racing thread at worst registers again.
  cache.store(ok ? pid : -pid, std::memory_order_relaxed);
  return ok;
}

bool heavy_barrier() noexcept {
  // The calling process need not be registered to issue the command.
  return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}

}  // namespace ringcast::detail
