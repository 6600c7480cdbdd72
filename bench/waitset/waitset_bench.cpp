// One consumer process reading many rings (issue 38): a WaitSet against a
// thread per ring and against iceoryx's WaitSet, and a single ring's
// recv_wait as the reference.
//
//   ringcast-waitset-bench [--rings 16] [--rate 10000] [--seconds 5] [--mode all]
//
// Each ring has its own producer process (forked before the consumer starts
// any thread), which pushes its CLOCK_MONOTONIC send time every 1/rate
// seconds (absolute sleeps, timer slack 1 ns). The consumer records, per
// message, receive time minus send time, its own CPU time (user + system,
// all its threads) over the run, its voluntary context switches per message
// received (its sleeps: a futex_waitv that returns at once is not one), and
// its producers' CPU time together, each also per message received (us/msg,
// prod us). Modes:
// waitset (one thread, one WaitSet over every ring, try_recv until empty),
// threads (one thread per ring, recv_wait with the default strategy), single
// (one ring, one recv_wait thread, at the same rate), iceoryx (one
// iceoryx 2.0 publisher per producer process and one subscriber each in the
// consumer, all in one iox::popo::WaitSet, take() until empty; lossless like
// the rings: WAIT_FOR_CONSUMER and BLOCK_PRODUCER, queues of 256 messages,
// iceoryx's most, against the rings' 1024). One line per mode.
//
// The iceoryx mode starts and stops its own iox-roudi (bench/common/roudi.hpp)
// and is skipped, with the reason, in a build without iceoryx or while
// another RouDi runs. Its consumer is a child process of the harness, as
// RouDi sends SIGTERM to every process still registered when it stops; the
// consumer forks its producers before it joins RouDi (a forked child would
// inherit its runtime, one per process). CPU and wall time are measured
// from 200 ms before the first send in every mode, after the consumer has
// attached (iceoryx: subscribed, which takes RouDi a discovery cycle or
// more, hence its longer setup lead). RouDi's own CPU is not counted.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "child_process.hpp"
#include "histogram.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/wait_set.hpp"
#include "roudi.hpp"

#ifdef RINGCAST_BENCH_ROUDI
#include "iceoryx_hoofs/log/logmanager.hpp"
#include "iceoryx_posh/popo/untyped_publisher.hpp"
#include "iceoryx_posh/popo/untyped_subscriber.hpp"
#include "iceoryx_posh/popo/wait_set.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"
#endif

namespace {

using namespace ringcast;
using bench::LatencyHistogram;
using namespace std::chrono_literals;

std::int64_t now_ns() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void sleep_until(std::int64_t at) {
  struct timespec ts {
    static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)
  };
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}

// Setup time before the first send, and the part of it that is measured.
constexpr std::int64_t kRingLead = 200'000'000;
constexpr std::int64_t kIceoryxLead = 3'000'000'000;
constexpr std::int64_t kMeasuredLead = 200'000'000;
// Messages an iceoryx subscriber queues: iceoryx 2.0's most.
constexpr std::uint64_t kIceoryxQueue = 256;

struct Usage {
  std::int64_t cpu_ns;  // user + system, all threads
  std::int64_t sleeps;  // voluntary context switches: a futex sleep each, here
};

Usage usage() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto us = [](const timeval& t) { return std::int64_t{t.tv_sec} * 1'000'000 + t.tv_usec; };
  return {(us(ru.ru_utime) + us(ru.ru_stime)) * 1000, ru.ru_nvcsw};
}

// A producer's schedule: `count` messages at `rate` per second, starting at
// `start` (CLOCK_MONOTONIC ns); send(t) sends one carrying its send time t
// and returns false on an error. Returns false after such an error.
template <class Send>
bool produce(std::uint64_t count, int rate, std::int64_t start, Send send) {
  ::prctl(PR_SET_TIMERSLACK, 1UL);
  const std::int64_t interval = 1'000'000'000 / rate;
  for (std::uint64_t i = 0; i < count; ++i) {
    sleep_until(start + static_cast<std::int64_t>(i) * interval);
    if (!send(now_ns())) return false;
  }
  return true;
}

// The producer process of one ring.
[[noreturn]] void produce_ring(const std::string& path, std::uint64_t count, int rate, std::int64_t start) {
  auto ring = BroadcastRing::open(path);
  if (!ring || !ring->claim_producer()) _exit(2);
  std::array<std::byte, kMaxPayload> msg{};
  const bool ok = produce(count, rate, start, [&](std::int64_t sent) {
    std::memcpy(msg.data(), &sent, 8);
    return ring->push_wait(msg, 10s) == Errc::ok;
  });
  _exit(ok ? 0 : 3);
}

struct Run {
  LatencyHistogram latency;
  std::int64_t cpu = 0;
  std::int64_t sleeps = 0;
  std::int64_t wall = 0;
  std::uint64_t received = 0;
  std::int64_t producers_cpu = 0;  // all producer processes together
  std::uint64_t missed_wakes = 0;  // iceoryx: see IceoryxConsumer::receive
};

void record(LatencyHistogram& h, std::span<const std::byte> buf) {
  std::int64_t sent = 0;
  std::memcpy(&sent, buf.data(), 8);
  h.record(static_cast<std::uint64_t>(std::max<std::int64_t>(now_ns() - sent, 0)));
}

#ifdef RINGCAST_BENCH_ROUDI
// Joins RouDi under a name unique on the host; the library logs warnings only.
void init_iceoryx(const char* role) {
  iox::log::LogManager::GetLogManager().SetDefaultLogLevel(iox::log::LogLevel::kWarn,
                                                           iox::log::LogLevelOutput::kHideLogLevel);
  const std::string name = fmt::format("ringcast-waitset-{}-{}", role, ::getpid());
  iox::runtime::PoshRuntime::initRuntime(iox::RuntimeName_t(iox::cxx::TruncateToCapacity, name.c_str()));
}

iox::capro::ServiceDescription iceoryx_service(int i) {
  const std::string instance = std::to_string(i);
  return {"ringcast-waitset-bench", iox::capro::IdString_t(iox::cxx::TruncateToCapacity, instance.c_str()), "data"};
}

// The producer process of one iceoryx publisher. It leaves through exit(),
// so that its runtime leaves RouDi; what it published stays queued for the
// consumer.
[[noreturn]] void produce_iceoryx(int i, std::uint64_t count, int rate, std::int64_t start) {
  init_iceoryx("producer");
  bool ok = false;
  {
    iox::popo::PublisherOptions o;
    o.historyCapacity = 0;
    o.subscriberTooSlowPolicy = iox::popo::ConsumerTooSlowPolicy::WAIT_FOR_CONSUMER;
    iox::popo::UntypedPublisher publisher(iceoryx_service(i), o);
    ok = produce(count, rate, start, [&](std::int64_t sent) {
      auto loan = publisher.loan(kMaxPayload, 8);
      if (loan.has_error()) return false;
      std::memcpy(loan.value(), &sent, 8);
      publisher.publish(loan.value());  // yields while the subscriber's queue is full
      return true;
    });
  }
  std::exit(ok ? 0 : 3);
}

// The consumer of the iceoryx mode: one subscriber per producer, all in one
// WaitSet, each drained with take() when the WaitSet names it.
class IceoryxConsumer {
 public:
  // Joins RouDi and subscribes; throws if a subscription is not up by
  // `deadline` (CLOCK_MONOTONIC ns), as a message sent before it is lost.
  IceoryxConsumer(int n, std::int64_t deadline) {
    init_iceoryx("consumer");
    iox::popo::SubscriberOptions o;
    static_assert(kIceoryxQueue <= iox::MAX_SUBSCRIBER_QUEUE_CAPACITY);
    o.queueCapacity = kIceoryxQueue;
    o.queueFullPolicy = iox::popo::QueueFullPolicy::BLOCK_PRODUCER;
    for (int i = 0; i < n; ++i)
      subscribers_.push_back(std::make_unique<iox::popo::UntypedSubscriber>(iceoryx_service(i), o));
    waitset_.emplace();
    for (std::size_t i = 0; i < subscribers_.size(); ++i) {
      while (subscribers_[i]->getSubscriptionState() != iox::SubscribeState::SUBSCRIBED) {
        if (now_ns() > deadline) throw std::runtime_error("iceoryx: not subscribed in time");
        std::this_thread::sleep_for(1ms);
      }
      if (waitset_->attachState(*subscribers_[i], iox::popo::SubscriberState::HAS_DATA, i).has_error()) {
        throw std::runtime_error("iceoryx: WaitSet::attachState");
      }
    }
  }

  // iceoryx 2.0.3's WaitSet misses wake-ups in this workload: a wait can
  // sleep on while every queue is full and every publisher blocked on it
  // (docs/bench-history/2026-12-07-iceoryx-waitset.md). So the consumer
  // waits at most 10 ms, as a user of it would have to, and then takes from
  // every subscriber; out.missed_wakes counts the timeouts that found
  // messages. Gives up after 10 s without one.
  void receive(Run& out, std::uint64_t total) {
    for (int idle = 0; out.received < total && idle < 1000;) {
      const auto ready = waitset_->timedWait(iox::units::Duration::fromMilliseconds(10));
      const std::uint64_t before = out.received;
      for (const iox::popo::NotificationInfo* n : ready) take_all(*subscribers_[n->getNotificationId()], out);
      if (ready.empty()) {
        for (const auto& s : subscribers_) take_all(*s, out);
        out.missed_wakes += out.received != before ? 1 : 0;
      }
      idle = out.received == before ? idle + 1 : 0;
    }
  }

 private:
  static void take_all(iox::popo::UntypedSubscriber& s, Run& out) {
    for (auto taken = s.take(); !taken.has_error(); taken = s.take()) {
      record(out.latency, std::span(static_cast<const std::byte*>(taken.value()), 8));
      s.release(taken.value());
      ++out.received;
    }
  }

  std::vector<std::unique_ptr<iox::popo::UntypedSubscriber>> subscribers_;
  std::optional<iox::popo::WaitSet<>> waitset_;  // after the subscribers: destroyed, so detached, first
};
#endif

Run run(const std::string& mode, int rings, int rate, int seconds) {
  const std::uint64_t count = static_cast<std::uint64_t>(rate) * static_cast<std::uint64_t>(seconds);
  const bool iceoryx = mode == "iceoryx";
  std::vector<BroadcastRing> ring;
  std::vector<ConsumerId> id;
  std::vector<std::string> path;
  for (int i = 0; i < rings && !iceoryx; ++i) {
    path.push_back(fmt::format("/dev/shm/ringcast-waitset-bench-{}-{}", ::getpid(), i));
    auto r = BroadcastRing::create(path.back(), 1024, {.replace = true, .claim_producer = false});
    if (!r) throw std::runtime_error(r.error().message());
    id.push_back(*r->register_consumer());
    ring.push_back(std::move(*r));
  }
  // Producers start together after the setup lead, each offset by a slice of
  // the interval so that their sends do not coincide.
  const std::int64_t start = now_ns() + (iceoryx ? kIceoryxLead : kRingLead);
  std::vector<pid_t> children;
  for (int i = 0; i < rings; ++i) {
    const pid_t pid = test::fork_with_death_signal();
    const std::int64_t at = start + i * (1'000'000'000 / rate) / rings;
#ifdef RINGCAST_BENCH_ROUDI
    if (pid == 0 && iceoryx) produce_iceoryx(i, count, rate, at);
#endif
    if (pid == 0) produce_ring(path[static_cast<std::size_t>(i)], count, rate, at);
    children.push_back(pid);
  }
#ifdef RINGCAST_BENCH_ROUDI
  std::optional<IceoryxConsumer> iceoryx_consumer;
  if (iceoryx) iceoryx_consumer.emplace(rings, start - kMeasuredLead);
#endif
  sleep_until(start - kMeasuredLead);
  Run out;
  const Usage usage0 = usage();
  const std::int64_t wall0 = now_ns();
  const std::uint64_t total = count * static_cast<std::uint64_t>(rings);
  if (mode == "waitset") {
    WaitSet ws;
    for (int i = 0; i < rings; ++i) (void)ws.add(ring[static_cast<std::size_t>(i)], id[static_cast<std::size_t>(i)]);
    std::array<std::size_t, WaitSet::kMaxMembers> ready{};
    std::array<std::byte, kMaxPayload> buf{};
    while (out.received < total) {
      const WaitSetResult w = ws.wait(ready, 10s);
      if (!w) break;
      for (std::size_t k = 0; k < w.count; ++k) {
        for (RecvResult r = ring[ready[k]].try_recv(id[ready[k]], buf); r;
             r = ring[ready[k]].try_recv(id[ready[k]], buf)) {
          record(out.latency, buf);
          ++out.received;
        }
      }
    }
  } else if (mode == "threads") {
    std::vector<LatencyHistogram> per(static_cast<std::size_t>(rings));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < static_cast<std::size_t>(rings); ++i) {
      threads.emplace_back([&, i] {
        std::array<std::byte, kMaxPayload> buf{};
        for (std::uint64_t n = 0; n < count; ++n) {
          if (!ring[i].recv_wait(id[i], buf, 10s)) return;
          record(per[i], buf);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const LatencyHistogram& h : per) out.latency.merge(h);
    out.received = out.latency.count();
  }
#ifdef RINGCAST_BENCH_ROUDI
  if (iceoryx) iceoryx_consumer->receive(out, total);
#endif
  const Usage usage1 = usage();
  out.cpu = usage1.cpu_ns - usage0.cpu_ns;
  out.sleeps = usage1.sleeps - usage0.sleeps;
  out.wall = now_ns() - wall0;
  for (const pid_t pid : children) {
    struct rusage ru {};
    ::wait4(pid, nullptr, 0, &ru);
    out.producers_cpu += (std::int64_t{ru.ru_utime.tv_sec} + ru.ru_stime.tv_sec) * 1'000'000'000 +
                         (std::int64_t{ru.ru_utime.tv_usec} + ru.ru_stime.tv_usec) * 1000;
  }
  for (const std::string& p : path) ::unlink(p.c_str());
  return out;
}

// One line of the table.
// CPU per message (us/msg) is the figure to compare: a run whose producers
// fall behind their schedule (wall well over --seconds) spreads the same work
// over more time, so its CPU % reads lower.
void print_line(const std::string& mode, int n, int rate, const Run& r) {
  const double received = static_cast<double>(std::max<std::uint64_t>(r.received, 1));
  fmt::print(
      "{:<8} {:>5} {:>9} {:>9.1f} {:>9.1f} {:>9.1f} {:>10} {:>9.1f} {:>7.2f} {:>10.2f} {:>12.1f} {:>8.2f} {:>7.2f}\n",
      mode, n, n * rate, static_cast<double>(r.latency.percentile(0.5)) / 1e3,
      static_cast<double>(r.latency.percentile(0.99)) / 1e3, static_cast<double>(r.latency.max()) / 1e3, r.received,
      100.0 * static_cast<double>(r.cpu) / static_cast<double>(r.wall), static_cast<double>(r.cpu) / 1e3 / received,
      static_cast<double>(r.sleeps) / received,
      100.0 * static_cast<double>(r.producers_cpu) / static_cast<double>(r.wall),
      static_cast<double>(r.producers_cpu) / 1e3 / received, static_cast<double>(r.wall) / 1e9);
  if (r.missed_wakes > 0) fmt::print("{:<8} {} waits timed out (10 ms) with messages queued\n", "", r.missed_wakes);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"one consumer reading many rings: WaitSet vs a thread per ring vs iceoryx's WaitSet"};
  int rings = 16;
  int rate = 10'000;
  int seconds = 5;
  std::string mode = "all";
  app.add_option("--rings", rings, "rings, one producer process each")->check(CLI::Range(1, 127));
  app.add_option("--rate", rate, "messages per second per ring")->check(CLI::Range(1, 1'000'000));
  app.add_option("--seconds", seconds, "length of each run")->check(CLI::Range(1, 3600));
  app.add_option("--mode", mode, "waitset, threads, single, iceoryx or all")
      ->check(CLI::IsMember({"waitset", "threads", "single", "iceoryx", "all"}));
  CLI11_PARSE(app, argc, argv);
  fmt::print("{:<8} {:>5} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7} {:>10} {:>12} {:>8} {:>7}\n", "mode", "rings",
             "msgs/s", "p50 us", "p99 us", "max us", "received", "CPU %", "us/msg", "sleeps/msg", "producers %",
             "prod us", "wall s");
  for (const std::string m : {"single", "waitset", "threads", "iceoryx"}) {
    if (mode != "all" && mode != m) continue;
    const int n = m == "single" ? 1 : rings;
    if (m != "iceoryx") {
      print_line(m, n, rate, run(m == "single" ? "threads" : m, n, rate, seconds));
      continue;
    }
    // RouDi with a pool of 64-byte chunks for every queue full at once, plus
    // the ones being published and held; the consumer in a child (top).
    std::string why_not;
    const auto roudi =
        bench::start_roudi({{kMaxPayload, static_cast<std::uint64_t>(n) * (kIceoryxQueue + 8)}}, why_not);
    if (!roudi) {
      fmt::print("iceoryx skipped: {}\n", why_not);
      continue;
    }
    std::fflush(stdout);  // the child leaves through exit(), which flushes what it inherited
    const pid_t consumer = test::fork_with_death_signal();
    if (consumer == 0) {
      print_line(m, n, rate, run(m, n, rate, seconds));
      std::exit(0);  // runs the runtime's destructor: the consumer leaves RouDi
    }
    int status = 0;
    ::waitpid(consumer, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fmt::print("iceoryx failed: wait status {}\n", status);
  }
  return 0;
}
