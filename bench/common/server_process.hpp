// What the load generators read and set on a server process (or on
// themselves): CPU time, resident memory, CPU affinity and the open-file
// limit, all through /proc and plain system calls.
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <system_error>

#include <fmt/format.h>

namespace ringcast::bench {

// utime + stime of a process, in seconds.
inline double cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = all.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(all.substr(close + 2));
  std::string field;
  unsigned long utime = 0;
  unsigned long stime = 0;
  for (int i = 3; i <= 15; ++i) {
    rest >> field;
    if (i == 14) utime = std::stoul(field);
    if (i == 15) stime = std::stoul(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A process's resident set (VmRSS in /proc/<pid>/status) in bytes, or 0 if it
// cannot be read (the process is gone).
inline std::uint64_t rss_bytes(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmRSS:   1234 kB"
  }
  return 0;
}

// Restricts every thread of `pid` (0: this process's calling thread, which the
// threads and children it starts later inherit) to `cpu`; a negative cpu
// leaves the affinity alone.
inline bool pin(pid_t pid, int cpu) {
  if (cpu < 0) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  if (pid == 0) return ::sched_setaffinity(0, sizeof set, &set) == 0;
  std::error_code ec;
  bool ok = true;
  for (const auto& task : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    ok = ::sched_setaffinity(std::stoi(task.path().filename().string()), sizeof set, &set) == 0 && ok;
  }
  return ok && !ec;
}

// The host's load averages over 1, 5 and 15 minutes ("0.52 1.69 2.43"), which
// every recorded run states next to its figures.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// Raises this process's soft open-file limit to its hard limit; the servers
// it starts afterwards inherit the raised limit. Returns the new soft limit
// (the old one if it could not be raised).
inline std::uint64_t raise_fd_limit() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return 0;
  if (l.rlim_cur < l.rlim_max) {
    rlimit want = l;
    want.rlim_cur = l.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) l = want;
  }
  return l.rlim_cur;
}

}  // namespace ringcast::bench
