// How long the calling thread has waited on a run queue, runnable but not
// running, since it started (/proc/thread-self/schedstat, second field); 0
// where the kernel keeps no schedstat. A wait that a capped sleep ended may be
// this thread's or another's lost CPU rather than a lost wake-up.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>

namespace ringcast::test {

inline std::chrono::nanoseconds run_queue_delay() {
  std::ifstream in("/proc/thread-self/schedstat");
  std::uint64_t running_ns = 0;
  std::uint64_t waiting_ns = 0;
  if (!(in >> running_ns >> waiting_ns)) return {};
  return std::chrono::nanoseconds(waiting_ns);
}

}  // namespace ringcast::test
