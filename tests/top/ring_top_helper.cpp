// A tiny process that plays one role on a ring, for ring-top's cross-process
// tests and for capturing the screen in docs/ring-top.md:
//
//   ring_top_helper [--name COMM] follow  PATH [MSGS_PER_S]  register; read (paced if given)
//   ring_top_helper [--name COMM] stall   PATH               register; never read
//   ring_top_helper [--name COMM] produce PATH MSGS_PER_S    push forever, waiting when full
//   ring_top_helper create PATH CAPACITY                     create (replacing) a ring and exit
//
// A consumer prints "ready <id>\n" on stdout once registered, a producer
// "ready producer\n" once it holds the role. Every role runs until killed: a
// consumer killed with SIGKILL leaves its entry registered with its lock gone,
// which is what ring-top shows as DEAD. --name sets the process name
// (/proc/<pid>/comm) that ring-top displays.
#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ringcast/broadcast_ring.hpp"

namespace {

using SteadyClock = std::chrono::steady_clock;

int usage() {
  std::fprintf(stderr, "usage: ring_top_helper [--name COMM] follow|stall|produce|create PATH [RATE|CAPACITY]\n");
  return 2;
}

void announce(const std::string& what) {
  std::printf("ready %s\n", what.c_str());
  std::fflush(stdout);
}

// Sleeps until the next paced deadline; rate 0 means "as fast as possible".
class Pacer {
 public:
  explicit Pacer(double per_second)
      : period_(per_second > 0
                    ? std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(1.0 / per_second))
                    : SteadyClock::duration::zero()),
        next_(SteadyClock::now()) {}
  void wait() {
    if (period_ == SteadyClock::duration::zero()) return;
    next_ += period_;
    std::this_thread::sleep_until(next_);
  }

 private:
  SteadyClock::duration period_;
  SteadyClock::time_point next_;
};

int consume(const std::string& path, bool read, double rate) {
  auto ring = ringcast::BroadcastRing::open(path);
  if (!ring) {
    std::fprintf(stderr, "ring_top_helper: %s\n", ring.error().message().c_str());
    return 1;
  }
  auto id = ring->register_consumer();
  if (!id) {
    std::fprintf(stderr, "ring_top_helper: %s\n", id.error().message().c_str());
    return 1;
  }
  announce(std::to_string(*id));
  if (!read) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  Pacer pacer(rate);
  // Room for the ring's largest message: a shorter buffer would leave a long
  // one unread (buffer_too_small) and the helper stuck behind it.
  std::vector<std::byte> buf(ring->max_message());
  for (;;) {
    const ringcast::RecvResult r = ring->try_recv(*id, buf);
    if (r.status == ringcast::Errc::ok || r.status == ringcast::Errc::lapped) {
      pacer.wait();
      continue;
    }
    // Idle: nothing published yet. A short nap keeps the helper cheap on the
    // two-core CI machine; it is an idle strategy, not synchronisation.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

int produce(const std::string& path, double rate) {
  auto ring = ringcast::BroadcastRing::open(path);
  if (!ring) {
    std::fprintf(stderr, "ring_top_helper: %s\n", ring.error().message().c_str());
    return 1;
  }
  if (auto r = ring->claim_producer(); !r) {
    std::fprintf(stderr, "ring_top_helper: %s\n", r.error().message().c_str());
    return 1;
  }
  announce("producer");
  Pacer pacer(rate);
  const char payload[] = "tick";
  const auto bytes = std::as_bytes(std::span(payload, sizeof payload - 1));
  for (;;) {
    const ringcast::Errc e = ring->push_wait(bytes, std::chrono::milliseconds(100));
    if (e == ringcast::Errc::ok) pacer.wait();
  }
}

}  // namespace

int main(int argc, char** argv) {
  int arg = 1;
  if (arg + 1 < argc && std::strcmp(argv[arg], "--name") == 0) {
    ::prctl(PR_SET_NAME, argv[arg + 1], 0, 0, 0);
    arg += 2;
  }
  if (argc - arg < 2) return usage();
  const std::string role = argv[arg];
  const std::string path = argv[arg + 1];
  const double rate = argc - arg >= 3 ? std::strtod(argv[arg + 2], nullptr) : 0.0;
  if (role == "follow") return consume(path, true, rate);
  if (role == "stall") return consume(path, false, 0.0);
  if (role == "produce") return produce(path, rate);
  if (role == "create") {
    ringcast::CreateOptions options;
    options.replace = true;
    options.claim_producer = false;
    auto ring = ringcast::BroadcastRing::create(path, static_cast<std::uint64_t>(rate), options);
    if (!ring) {
      std::fprintf(stderr, "ring_top_helper: %s\n", ring.error().message().c_str());
      return 1;
    }
    return 0;
  }
  return usage();
}
