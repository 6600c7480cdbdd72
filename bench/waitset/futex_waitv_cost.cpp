// What one futex_waitv(2) costs by the number of words it takes: the price a
// WaitSet pays per sleep for each member (docs/benchmarks.md, "Many rings
// into one consumer").
//
//   ringcast-futex-waitv-cost [--calls 100000] [--repetitions 7]
//
// Each word is a shared futex (no FUTEX_PRIVATE_FLAG, as the rings' are) on
// its own page of its own /dev/shm file, as 16 rings' data_wait lines are.
// The last word's expected value is wrong, so every call looks up every
// word's key, queues on the words before it and returns EAGAIN without
// sleeping: the setup a sleep pays, without the sleep. Prints the thread's
// CPU time per call, the least of the repetitions (the host is shared).
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

std::int64_t thread_cpu_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU per futex_waitv call by its number of shared words"};
  int calls = 100'000;
  int repetitions = 7;
  app.add_option("--calls", calls, "calls per repetition")->check(CLI::Range(1, 100'000'000));
  app.add_option("--repetitions", repetitions, "repetitions per word count")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  constexpr std::size_t kWords = 32;
  std::array<std::uint32_t*, kWords> word{};
  for (std::size_t i = 0; i < kWords; ++i) {
    const std::string path = fmt::format("/dev/shm/ringcast-futex-waitv-cost-{}-{}", ::getpid(), i);
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, 4096) != 0) return 2;
    void* page = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    ::unlink(path.c_str());
    if (page == MAP_FAILED) return 2;
    word[i] = static_cast<std::uint32_t*>(page);  // zero-filled
  }
  struct timespec deadline {};
  ::clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += 3600;
  fmt::print("{:>5} {:>12} {:>14}\n", "words", "ns per call", "ns per word");
  for (const std::size_t n : std::array<std::size_t, 6>{1, 2, 4, 8, 16, 32}) {
    std::array<struct futex_waitv, kWords> v{};
    for (std::size_t i = 0; i < n; ++i) {
      v[i].uaddr = reinterpret_cast<std::uintptr_t>(word[i]);
      v[i].val = i + 1 == n ? 1 : 0;  // the last one differs: EAGAIN
      v[i].flags = FUTEX_32;
    }
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (int r = 0; r < repetitions; ++r) {
      const std::int64_t start = thread_cpu_ns();
      for (int c = 0; c < calls; ++c) {
        if (::syscall(SYS_futex_waitv, v.data(), static_cast<unsigned>(n), 0U, &deadline, CLOCK_MONOTONIC) >= 0 ||
            errno != EAGAIN) {
          fmt::print(stderr, "futex_waitv: expected EAGAIN, errno {}\n", errno);
          return 1;
        }
      }
      best = std::min(best, thread_cpu_ns() - start);
    }
    const double per_call = static_cast<double>(best) / calls;
    fmt::print("{:>5} {:>12.0f} {:>14.0f}\n", n, per_call, per_call / static_cast<double>(n));
  }
  return 0;
}
