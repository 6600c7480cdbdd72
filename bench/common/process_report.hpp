// What the cross-process harnesses share (bench/ring/xproc_bench.cpp,
// bench/large/large_bench.cpp): a harness execs its own binary again in
// another role (self_exe), the child reports back as plain bytes on its
// stdout pipe (write_all), with its CPU time (process_cpu_ns), and the JSON
// context quotes a line of a host command (host_line: the CPU model, the
// kernel).
#pragma once

#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace ringcast::bench {

// Writes all `n` bytes to a pipe or file, retrying on EINTR and short writes.
// False once the reader is gone or on another error.
inline bool write_all(int fd, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// User + system CPU time of this process so far, in nanoseconds.
inline std::uint64_t process_cpu_ns() noexcept {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto ns = [](const timeval& tv) {
    return static_cast<std::uint64_t>(tv.tv_sec) * 1'000'000'000 + static_cast<std::uint64_t>(tv.tv_usec) * 1'000;
  };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

// The running binary's path (/proc/self/exe), or nullopt if it cannot be read.
inline std::optional<std::string> self_exe() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return std::nullopt;
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

// `s` with '"' and '\' escaped and control characters dropped, for the
// inside of a JSON string.
inline std::string json_escape(std::string_view s) {
  std::string escaped;
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) continue;
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

// The first line of a shell command's output, without its line end and
// escaped for a JSON string (json_escape); empty if the command printed nothing.
inline std::string host_line(const char* cmd) {
  std::string out;
  if (FILE* f = ::popen(cmd, "r")) {
    std::array<char, 256> buf{};
    if (std::fgets(buf.data(), buf.size(), f) != nullptr) out = buf.data();
    ::pclose(f);
  }
  return json_escape(out);
}

}  // namespace ringcast::bench
