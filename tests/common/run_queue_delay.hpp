// Time lost waiting for a CPU, as the kernel counts it. A wait that a capped
// sleep ended (the ring's wake chain) may be a lost CPU rather than a lost
// wake-up: a thread runnable but not running (run_queue_delay), or this VM's
// virtual CPUs held by the host (cpu_steal), for as long as the cap.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

namespace ringcast::test {

// How long the calling thread has waited on a run queue since it started
// (/proc/thread-self/schedstat, second field); 0 where the kernel keeps no
// schedstat.
inline std::chrono::nanoseconds run_queue_delay() {
  std::ifstream in("/proc/thread-self/schedstat");
  std::uint64_t running_ns = 0;
  std::uint64_t waiting_ns = 0;
  if (!(in >> running_ns >> waiting_ns)) return {};
  return std::chrono::nanoseconds(waiting_ns);
}

// CPU time the host took from this machine's CPUs since boot, summed over
// them (/proc/stat, the "cpu" line's steal field); 0 on bare metal.
inline std::chrono::nanoseconds cpu_steal() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  std::uint64_t field[8] = {};  // user nice system idle iowait irq softirq steal
  if (!(in >> cpu) || cpu != "cpu") return {};
  for (std::uint64_t& f : field) {
    if (!(in >> f)) return {};
  }
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  if (ticks_per_second <= 0) return {};
  return std::chrono::nanoseconds(static_cast<std::int64_t>(field[7]) * 1'000'000'000 / ticks_per_second);
}

}  // namespace ringcast::test
