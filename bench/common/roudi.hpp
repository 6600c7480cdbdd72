// iox-roudi, the iceoryx daemon, for one benchmark run (bench/large,
// bench/waitset): started as a child of the harness with a memory pool per
// message size, stopped and its configuration removed when the handle goes.
//
// A target that links iceoryx defines RINGCAST_BENCH_ROUDI (the daemon's
// path, found by bench/CMakeLists.txt); without it start_roudi() says the
// binary was built without iceoryx, so a harness can skip that peer.
//
// RouDi: one per host in iceoryx 2.0 (it holds /tmp/roudi.lock and serves
// the socket /tmp/roudi), so a run refuses to start a second one.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "child_process.hpp"

namespace ringcast::bench {

struct PoolNeed {
  std::size_t size = 0;      // message bytes
  std::uint64_t chunks = 0;  // chunks the pool must hold
};

// A running iox-roudi, with its stderr in a log file next to its
// configuration in a temporary directory.
class Roudi {
 public:
  Roudi(std::string dir, test::ChildProcess process) : dir_(std::move(dir)), process_(std::move(process)) {}
  Roudi(const Roudi&) = delete;
  Roudi& operator=(const Roudi&) = delete;
  // SIGTERM: RouDi removes its shared memory and socket before it exits.
  ~Roudi() {
    (void)process_.stop(SIGTERM);
    std::remove((dir_ + "/roudi.toml").c_str());
    std::remove((dir_ + "/roudi.log").c_str());
    ::rmdir(dir_.c_str());
  }

 private:
  std::string dir_;
  test::ChildProcess process_;
};

// Starts iox-roudi with a pool per message size (rounded up to 64 bytes) and
// waits until it is ready. On failure (built without iceoryx, another RouDi
// on this host, a start error) returns nullptr and says why in `why_not`.
inline std::unique_ptr<Roudi> start_roudi(const std::vector<PoolNeed>& pools, std::string& why_not) {
#ifndef RINGCAST_BENCH_ROUDI
  (void)pools;
  why_not = "built without iceoryx (install iceoryx and libiceoryx-posh-dev, then reconfigure)";
  return nullptr;
#else
  // Another process holding RouDi's host-wide lock.
  if (const int fd = ::open("/tmp/roudi.lock", O_RDONLY | O_CLOEXEC); fd >= 0) {
    const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
    ::close(fd);  // also drops our lock if we got it
    if (held) {
      why_not = "another iox-roudi runs on this host (iceoryx 2.0 allows one per host)";
      return nullptr;
    }
  }
  std::map<std::size_t, std::uint64_t> chunks;  // ascending sizes, as RouDi wants them
  for (const PoolNeed& p : pools) chunks[(p.size + 63) / 64 * 64] += p.chunks;
  std::string config = "[general]\nversion = 1\n\n[[segment]]\n";
  for (const auto& [size, count] : chunks)
    config += fmt::format("\n[[segment.mempool]]\nsize = {}\ncount = {}\n", size, count);

  char dir_template[] = "/tmp/ringcast-roudi-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  if (dir == nullptr) {
    why_not = "mkdtemp failed";
    return nullptr;
  }
  const std::string config_path = std::string(dir) + "/roudi.toml";
  const std::string log_path = std::string(dir) + "/roudi.log";
  std::ofstream(config_path) << config;
  // exec: the child is RouDi itself, so stop() signals RouDi and not a shell.
  const std::string command =
      fmt::format("exec {} -c {} -l warning -m off 2>{}", RINGCAST_BENCH_ROUDI, config_path, log_path);
  test::ChildProcess process = test::ChildProcess::spawn({"/bin/sh", "-c", command}, {.out = test::Stream::kPipe});
  const bool ready = process.running() && process.read_stdout_until("RouDi is ready for clients",
                                                                    test::deadline_in(std::chrono::seconds(10)));
  if (!ready) {
    std::ifstream log(log_path);
    why_not = "iox-roudi did not start: " + std::string(std::istreambuf_iterator<char>(log), {});
  }
  auto daemon = std::make_unique<Roudi>(dir, std::move(process));
  if (!ready) return nullptr;  // ~Roudi stops it and removes the directory
  return daemon;
#endif
}

}  // namespace ringcast::bench
