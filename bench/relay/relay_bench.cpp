// ringcast-relay-bench: what the relay path costs on top of the broker.
//
//   relay:  this process pushes into a ring -> ringcast-relay (embedded broker) -> N TCP subscribers
//   broker: this process pipelines PUBLISH over TCP -> ringcast-broker -> the same N TCP subscribers
//
// Same N, payload, channel, I/O threads, flow-control window and subscriber
// code (an epoll thread counting fixed-size frames) for both. The publisher
// stays at most --window messages ahead of the slowest subscriber, so no queue
// reaches its limit and nothing is dropped. We report delivered messages/s
// (sum over subscribers), deliveries per server CPU-second (/proc/<pid>/stat)
// and the relay/broker ratio (issue 5 asks for >= 0.80).
//
// The subscriber side mirrors bench/broker/broker_bench.cpp, which is one
// self-contained file and not factored for reuse.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "alternate.hpp"
#include "epoll_set.hpp"
#include "loopback.hpp"
#include "resp_client.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace {

using namespace ringcast::bench;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// N subscribers on one epoll thread, counting frames of a known size.
class Subscribers {
 public:
  Subscribers(int port, int n, const std::string& channel, std::size_t payload)
      : frame_size_(ringcast::test::resp_message_size(channel, payload)) {
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<Sub>();
      ringcast::test::RespClient c(static_cast<std::uint16_t>(port));
      s->fd = c.subscribe(channel) ? c.release() : -1;
      ok_ = ok_ && s->fd >= 0;
      ::fcntl(s->fd, F_SETFL, O_NONBLOCK);
      subs_.push_back(std::move(s));
    }
    thread_ = std::thread([this] { run(); });
  }
  ~Subscribers() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
    for (auto& s : subs_) ::close(s->fd);
  }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::uint64_t min_received() const {
    std::uint64_t m = UINT64_MAX;
    // relaxed: progress counters for flow control.
    for (const auto& s : subs_) m = std::min(m, s->received.load(std::memory_order_relaxed));
    return m;
  }
  [[nodiscard]] std::uint64_t total_received() const {
    std::uint64_t t = 0;
    for (const auto& s : subs_) t += s->received.load(std::memory_order_relaxed);
    return t;
  }

 private:
  struct Sub {
    int fd = -1;
    std::size_t partial = 0;  // bytes of an incomplete frame already read
    std::atomic<std::uint64_t> received{0};
  };
  void run() {
    EpollSet ep(subs_.size(), [&](std::size_t i) { return subs_[i]->fd; });
    std::vector<epoll_event> evs(256);
    std::vector<char> tmp(1 << 18);
    while (!stop_.load(std::memory_order_relaxed)) {  // relaxed: a stop flag
      const int n = ep.wait(evs, 20);
      for (int k = 0; k < n; ++k) {
        Sub& s = *subs_[evs[static_cast<std::size_t>(k)].data.u64];
        for (;;) {
          const ssize_t r = ::read(s.fd, tmp.data(), tmp.size());
          if (r <= 0) break;
          const std::size_t bytes = s.partial + static_cast<std::size_t>(r);
          s.received.fetch_add(bytes / frame_size_, std::memory_order_relaxed);
          s.partial = bytes % frame_size_;
          if (static_cast<std::size_t>(r) < tmp.size()) break;
        }
      }
    }
  }
  const std::size_t frame_size_;
  std::vector<std::unique_ptr<Sub>> subs_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool ok_ = true;
};

struct Result {
  double delivered_per_s = 0;
  double per_cpu_s = 0;
  std::uint64_t delivered = 0;
};

// Runs the publisher loop (publish_batch(k) publishes k messages) for `seconds`,
// then lets deliveries land and measures.
template <class PublishBatch, class Idle>
Result measure(pid_t server, Subscribers& subs, double seconds, std::size_t window, PublishBatch&& publish_batch,
               Idle&& idle) {
  const double cpu0 = cpu_seconds(server);
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  std::uint64_t published = 0;
  while (Clock::now() < end) {
    if (published - subs.min_received() > window) {
      idle();
      continue;
    }
    published += publish_batch(32);
  }
  const auto settle = Clock::now() + 5s;
  while (subs.min_received() < published && Clock::now() < settle) {
    idle();
    std::this_thread::sleep_for(1ms);
  }
  const auto t1 = Clock::now();
  const double cpu1 = cpu_seconds(server);
  Result r;
  r.delivered = subs.total_received();
  r.delivered_per_s = static_cast<double>(r.delivered) / std::chrono::duration<double>(t1 - t0).count();
  r.per_cpu_s = cpu1 > cpu0 ? static_cast<double>(r.delivered) / (cpu1 - cpu0) : 0;
  return r;
}

Result run_broker(const std::string& exe, int n, std::size_t payload, double seconds, std::size_t window,
                  unsigned io_threads) {
  const int port = free_port();
  ChildProcess broker =
      ChildProcess::spawn({exe, "--port", std::to_string(port), "--io-threads", std::to_string(io_threads)}, kQuiet);
  if (!broker.running() || !wait_accepting(port)) return {};
  Result r;
  {
    Subscribers subs(port, n, "bench", payload);
    const int pub = ringcast::test::connect_loopback(port);
    ::fcntl(pub, F_SETFL, O_NONBLOCK);
    const std::string one = ringcast::test::resp_command({"PUBLISH", "bench", std::string(payload, 'p')});
    std::string batch;
    for (int i = 0; i < 32; ++i) batch += one;
    char sink[1 << 16];
    const auto drain = [&] {
      while (::read(pub, sink, sizeof sink) > 0) {
      }
    };
    if (subs.ok()) {
      r = measure(
          broker.pid(), subs, seconds, window,
          [&](int k) {
            ringcast::test::send_all(pub, batch);
            drain();
            return static_cast<std::uint64_t>(k);
          },
          [&] {
            drain();
            // Sleep, not spin: on 2 cores a spinning publisher starves the server and subscribers.
            std::this_thread::sleep_for(std::chrono::microseconds(20));
          });
    }
    ::close(pub);
  }
  (void)broker.stop();
  return r;
}

Result run_relay(const std::string& exe, int n, std::size_t payload, double seconds, std::size_t window,
                 unsigned io_threads) {
  using namespace ringcast;
  const std::string path = fmt::format("/dev/shm/ringcast-relay-bench-{}.ring", ::getpid());
  auto ring = BroadcastRing::create(path, 1 << 16, {.replace = true});
  if (!ring) {
    fmt::print(stderr, "ring: {}\n", ring.error().message());
    return {};
  }
  const int port = free_port();
  ChildProcess relay =
      ChildProcess::spawn({exe, "--ring", path + "=bench", "--listen", fmt::format("127.0.0.1:{}", port),
                           "--io-threads", std::to_string(io_threads)},
                          kQuiet);
  Result r;
  if (relay.running() && wait_accepting(port) && eventually([&] { return ring->active_consumer_count() >= 1; })) {
    Subscribers subs(port, n, "bench", payload);
    std::vector<std::byte> msg(payload, std::byte{'p'});
    if (subs.ok()) {
      r = measure(
          relay.pid(), subs, seconds, window,
          [&](int k) {
            std::uint64_t pushed = 0;
            for (int i = 0; i < k; ++i) pushed += ring->try_push(msg) == Errc::ok ? 1U : 0U;
            return pushed;
          },
          [] {
            // Sleep, not spin: on 2 cores a spinning publisher starves the relay and subscribers.
            std::this_thread::sleep_for(std::chrono::microseconds(20));
          });
    }
  }
  (void)relay.stop();
  ring = BroadcastRing::open(path, {.read_only = true});
  ::unlink(path.c_str());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ring -> ringcast-relay -> N TCP subscribers vs TCP publisher -> ringcast-broker -> N subscribers"};
  std::string broker_exe = kDefaultBrokerExe;
  std::string relay_exe = kDefaultRelayExe;
  int subscribers = 10;
  std::size_t payload = 52;
  double seconds = 3.0;
  std::size_t window = 2000;
  unsigned io_threads = 0;
  int repeat = 3;
  app.add_option("--broker", broker_exe, "ringcast-broker executable")->capture_default_str();
  app.add_option("--relay", relay_exe, "ringcast-relay executable")->capture_default_str();
  app.add_option("--subscribers", subscribers, "TCP subscribers (N)")->capture_default_str();
  app.add_option("--payload", payload, "Payload bytes (<= 52, the ring's slot payload)")
      ->capture_default_str()
      ->check(CLI::Range(1, 52));
  app.add_option("--seconds", seconds, "Duration of each measurement")->capture_default_str();
  app.add_option("--window", window, "Most messages the publisher may run ahead of the slowest subscriber")
      ->capture_default_str();
  app.add_option("--io-threads", io_threads, "Broker I/O threads in both servers (0 = cores)")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs per path, alternating; the median is reported")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);

  // Alternate, so drift in the machine hits both.
  const auto runs = alternate<Result>(
      repeat, {[&] { return run_broker(broker_exe, subscribers, payload, seconds, window, io_threads); },
               [&] { return run_relay(relay_exe, subscribers, payload, seconds, window, io_threads); }});
  const auto by_rate = [](const Result& a, const Result& b) { return a.delivered_per_s < b.delivered_per_s; };
  const Result b = median_by(runs[0], by_rate);
  const Result r = median_by(runs[1], by_rate);
  if (b.delivered == 0 || r.delivered == 0) {
    fmt::print(stderr, "a run delivered nothing (servers not started?)\n");
    return 1;
  }
  fmt::print("| path | subscribers | payload B | delivered msgs/s | deliveries/server CPU-s | vs broker |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|\n");
  fmt::print("| TCP publisher -> ringcast-broker | {} | {} | {} | {} | 1.00x |\n", subscribers, payload,
             si(b.delivered_per_s), si(b.per_cpu_s));
  fmt::print("| ring -> ringcast-relay | {} | {} | {} | {} | {:.2f}x |\n", subscribers, payload, si(r.delivered_per_s),
             si(r.per_cpu_s), r.delivered_per_s / b.delivered_per_s);
  return 0;
}
