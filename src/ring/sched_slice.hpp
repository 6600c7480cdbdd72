// The calling thread's scheduler slice (Linux >= 6.12: the EEVDF slice of a
// SCHED_OTHER thread, sched_attr.sched_runtime). A thread with a shorter
// slice than the task running on its CPU preempts that task when it wakes,
// instead of waiting for the running task's slice (1.4 ms by default on two
// CPUs) and the tick that notices its end (4 ms at HZ=250). The slice changes
// how soon a thread runs, not its share of the CPU. Why the ring's waits
// shorten it: docs/reliability.md, "Waking on a busy CPU".
#pragma once

#include <chrono>
#include <optional>

namespace ringcast::detail {

// What the scheduler holds for the calling thread (sched_getattr(2)).
struct ThreadSchedule {
  int policy = 0;  // SCHED_OTHER, SCHED_BATCH, SCHED_FIFO, ...
  int nice = 0;
  std::chrono::nanoseconds slice{0};  // 0 on kernels without custom slices
};
std::optional<ThreadSchedule> thread_schedule() noexcept;

// Shortens the calling thread's slice to `slice` (the kernel clamps it to
// 0.1-100 ms) if it is a SCHED_OTHER thread whose slice is longer. It never
// lengthens a slice, never touches a real-time, SCHED_BATCH or SCHED_IDLE
// thread, and keeps the thread's nice value. A no-op on kernels without
// custom slices. One attempt per thread and value: later calls with the same
// value make no system call.
void cap_thread_slice(std::chrono::microseconds slice) noexcept;

}  // namespace ringcast::detail
