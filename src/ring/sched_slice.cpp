#include "sched_slice.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace ringcast::detail {
namespace {

// struct sched_attr of sched_setattr(2), spelled out: glibc declares it only
// from 2.41, and <linux/sched/types.h> clashes with <sched.h>.
struct SchedAttr {
  std::uint32_t size;
  std::uint32_t sched_policy;
  std::uint64_t sched_flags;
  std::int32_t sched_nice;
  std::uint32_t sched_priority;
  std::uint64_t sched_runtime;  // a SCHED_OTHER thread's slice since Linux 6.12, ns
  std::uint64_t sched_deadline;
  std::uint64_t sched_period;
  std::uint32_t sched_util_min;
  std::uint32_t sched_util_max;
};
static_assert(sizeof(SchedAttr) == 56, "SCHED_ATTR_SIZE_VER1");
constexpr std::uint64_t kResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK

bool get_attr(SchedAttr& attr) noexcept { return ::syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) == 0; }

}  // namespace

std::optional<ThreadSchedule> thread_schedule() noexcept {
  SchedAttr attr{};
  if (!get_attr(attr)) return std::nullopt;
  return ThreadSchedule{static_cast<int>(attr.sched_policy), attr.sched_nice,
                        std::chrono::nanoseconds(attr.sched_runtime)};
}

void cap_thread_slice(std::chrono::microseconds slice) noexcept {
  // The value this thread was last capped to (0: never): the attempt is made
  // once per value, whatever its outcome.
  thread_local std::int64_t attempted_us = 0;
  if (slice.count() <= 0 || attempted_us == slice.count()) return;
  attempted_us = slice.count();
  SchedAttr attr{};
  if (!get_attr(attr)) return;
  const auto want_ns = static_cast<std::uint64_t>(slice.count()) * 1000;
  // Older kernels report a slice of 0 here, and so are left alone.
  if (attr.sched_policy != SCHED_OTHER || attr.sched_runtime <= want_ns) return;
  SchedAttr next{};
  next.size = sizeof next;
  next.sched_policy = SCHED_OTHER;
  next.sched_flags = attr.sched_flags & kResetOnFork;
  next.sched_nice = attr.sched_nice;
  next.sched_runtime = want_ns;
  // Refused (a seccomp filter, a kernel that rejects sched_runtime): the
  // thread keeps its slice, which only costs latency.
  (void)::syscall(SYS_sched_setattr, 0, &next, 0);
}

}  // namespace ringcast::detail
