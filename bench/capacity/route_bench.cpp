// ringcast-nats-route-bench: what one NATS route carries. Two nats-server
// nodes on loopback joined by a route; one publisher on node A writes core NATS
// PUBs as fast as A takes them; one subscriber receives them either on A
// itself ("direct": no route) or on node B ("route": every message crosses
// the A -> B route once). The two paths alternate, runs x each; the median
// run of each is reported, with each server's CPU per message. This is the
// figure the capacity model in docs/scale-out.md needs for "NATS routes":
// the route is one TCP connection between two servers, and one message to
// node B crosses it once however many subscribers B has.
//
// Raw NATS protocol over TCP, no client library: the subscriber parses MSG
// lines and skips payloads, so it costs tens of ns per message.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "alternate.hpp"
#include "loopback.hpp"

namespace {

using namespace ringcast::bench;
using ringcast::test::deadline_in;
using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Node {
  ChildProcess process;
  int port = 0;
  int cluster_port = 0;
};

// nats-server on 127.0.0.1, in cluster "capacity", routed to `route_to` if > 0.
std::optional<Node> start_node(const std::string& exe, int route_to) {
  Node n;
  n.port = free_port();
  n.cluster_port = free_port();
  std::vector<std::string> argv{exe,
                                "-a",
                                "127.0.0.1",
                                "-p",
                                std::to_string(n.port),
                                "--cluster",
                                fmt::format("nats://127.0.0.1:{}", n.cluster_port),
                                "--cluster_name",
                                "capacity"};
  if (route_to > 0) argv.insert(argv.end(), {"--routes", fmt::format("nats://127.0.0.1:{}", route_to)});
  n.process = ChildProcess::spawn(argv, kQuiet);
  if (!n.process.running() || !wait_accepting(n.port)) {
    fmt::print(stderr, "nats-server did not start: {} ...\n", exe);
    return std::nullopt;
  }
  return n;
}

// A NATS client connection, CONNECT sent and the server's INFO read past.
int nats_connect(int port) {
  const int fd = ringcast::test::connect_loopback(port);
  if (fd < 0) return -1;
  std::string in;
  if (!ringcast::test::read_until(fd, in, "\r\n", deadline_in(std::chrono::seconds(10)))) {
    ::close(fd);
    return -1;
  }
  ringcast::test::send_all(fd, "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n");
  return fd;
}

// Reads NATS protocol from a subscriber connection: counts MSGs per sid,
// answers PING. One thread.
class MsgCounter {
 public:
  // Feeds bytes; returns false on -ERR.
  bool feed(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      if (skip_ > 0) {
        const std::size_t take = std::min<std::size_t>(n, skip_);
        skip_ -= take;
        p += take;
        n -= take;
        continue;
      }
      const auto* nl = static_cast<const char*>(std::memchr(p, '\n', n));
      if (nl == nullptr) {
        line_.append(p, n);
        return true;
      }
      const std::size_t len = static_cast<std::size_t>(nl - p) + 1;
      line_.append(p, len);
      p += len;
      n -= len;
      if (line_.rfind("MSG ", 0) == 0) {
        // MSG <subject> <sid> <#bytes>\r\n
        const std::size_t sp1 = line_.find(' ', 4);
        const std::size_t sp2 = line_.find(' ', sp1 + 1);
        const int sid = std::atoi(line_.c_str() + sp1 + 1);
        skip_ = std::strtoull(line_.c_str() + sp2 + 1, nullptr, 10) + 2;
        if (sid == 1) ++messages_;
        if (sid == 2) ++warm_;
      } else if (line_.rfind("PING", 0) == 0) {
        ringcast::test::send_all(fd, "PONG\r\n");
      } else if (line_.rfind("PONG", 0) == 0) {
        ++pongs_;
      } else if (line_.rfind("-ERR", 0) == 0) {
        error_ = line_;
        return false;
      }
      line_.clear();
    }
    return true;
  }
  std::uint64_t messages_ = 0;
  std::uint64_t warm_ = 0;
  std::uint64_t pongs_ = 0;
  std::string error_;

 private:
  std::string line_;
  std::uint64_t skip_ = 0;
};

struct Result {
  double msgs_per_s = 0;
  std::uint64_t published = 0;
  std::uint64_t delivered = 0;
  double cpu_a_us = 0;  // node A CPU per delivered message
  double cpu_b_us = 0;  // node B CPU per delivered message
  std::string error;
};

Result run(const Node& a, const Node& b, bool via_route, std::size_t payload, double seconds, int run_id) {
  Result res;
  const std::string subject = fmt::format("cap.{}.{}", via_route ? "route" : "direct", run_id);
  const Node& sub_node = via_route ? b : a;
  const int sub = nats_connect(sub_node.port);
  const int pub = nats_connect(a.port);
  if (sub < 0 || pub < 0) {
    res.error = "cannot connect";
    return res;
  }
  ringcast::test::send_all(sub, fmt::format("SUB {} 1\r\nSUB {}.warm 2\r\nPING\r\n", subject, subject));
  MsgCounter counter;
  // Interest is in place on the subscriber's node once its PONG comes; on A,
  // once a warm-up message published on A arrives (the route carries SUBs in
  // order, so the measured subject's interest came first).
  const auto warm_deadline = deadline_in(std::chrono::seconds(10));
  char buf[1 << 16];
  while (counter.warm_ == 0 && ringcast::test::ms_left(warm_deadline) > 0) {
    ringcast::test::send_all(pub, fmt::format("PUB {}.warm 1\r\nw\r\n", subject));
    pollfd p{sub, POLLIN, 0};
    if (::poll(&p, 1, 20) == 1) {
      const ssize_t r = ::read(sub, buf, sizeof buf);
      if (r <= 0) break;
      counter.feed(sub, buf, static_cast<std::size_t>(r));
    }
  }
  if (counter.warm_ == 0) {
    res.error = "the subscriber's interest never reached node A";
    ::close(sub);
    ::close(pub);
    return res;
  }
  ::fcntl(sub, F_SETFL, O_NONBLOCK);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::int64_t> last{0};
  std::thread reader([&] {
    std::vector<char> rb(1 << 18);
    // relaxed: a stop flag; the counters are progress for the main thread.
    while (!stop.load(std::memory_order_relaxed)) {
      pollfd p{sub, POLLIN, 0};
      if (::poll(&p, 1, 20) != 1) continue;
      const ssize_t r = ::read(sub, rb.data(), rb.size());
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
      if (r < 0) continue;
      const std::uint64_t before = counter.messages_;
      counter.feed(sub, rb.data(), static_cast<std::size_t>(r));
      if (counter.messages_ != before) {
        delivered.store(counter.messages_, std::memory_order_relaxed);
        last.store(now_ns(), std::memory_order_relaxed);
      }
    }
  });
  std::string one = fmt::format("PUB {} {}\r\n{}\r\n", subject, payload, std::string(payload, 'p'));
  std::string batch;
  for (int i = 0; i < 256; ++i) batch += one;
  const double cpu_a0 = cpu_seconds(a.process.pid());
  const double cpu_b0 = cpu_seconds(b.process.pid());
  const std::int64_t t0 = now_ns();
  const std::int64_t end = t0 + static_cast<std::int64_t>(seconds * 1e9);
  while (now_ns() < end) {
    if (!ringcast::test::send_all(pub, batch)) {
      res.error = "the publisher's connection failed";
      break;
    }
    res.published += 256;
    // nats-server sends the publisher nothing but PONGs and errors: keep
    // its socket drained anyway.
    while (::recv(pub, buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
  }
  // Settle: everything delivered, or nothing new for 2 s.
  std::uint64_t seen = 0;
  auto changed = Clock::now();
  for (;;) {
    // relaxed: progress counter.
    const std::uint64_t d = delivered.load(std::memory_order_relaxed);
    if (d >= res.published) break;
    if (d != seen) {
      seen = d;
      changed = Clock::now();
    } else if (Clock::now() - changed > std::chrono::seconds(2)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stop.store(true, std::memory_order_relaxed);
  reader.join();
  res.delivered = counter.messages_;
  if (!counter.error_.empty()) res.error = counter.error_;
  const double elapsed = static_cast<double>(last.load(std::memory_order_relaxed) - t0) / 1e9;
  res.msgs_per_s = elapsed > 0 ? static_cast<double>(res.delivered) / elapsed : 0;
  const double per = std::max<double>(1, static_cast<double>(res.delivered));
  res.cpu_a_us = (cpu_seconds(a.process.pid()) - cpu_a0) / per * 1e6;
  res.cpu_b_us = (cpu_seconds(b.process.pid()) - cpu_b0) / per * 1e6;
  ::close(sub);
  ::close(pub);
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcast-nats-route-bench: messages/s one NATS route carries. Two nats-server nodes on loopback joined by a "
      "route; a publisher on node A as fast as A takes it; a subscriber on A (direct) or on node B (across the "
      "route), alternated; median runs and each server's CPU per message"};
  std::string nats = "/usr/sbin/nats-server";
  std::vector<std::size_t> payloads{52, 1024};
  double seconds = 2;
  int runs = 3;
  app.add_option("--nats", nats, "nats-server executable")->capture_default_str();
  app.add_option("--payload", payloads, "Payload sizes")->delimiter(',')->capture_default_str();
  app.add_option("--seconds", seconds, "Publishing time per run")->capture_default_str();
  app.add_option("--runs", runs, "Runs per path and payload, alternated")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);

  auto a = start_node(nats, 0);
  if (!a) return 1;
  auto b = start_node(nats, a->cluster_port);
  if (!b) return 1;
  fmt::print("load average at start: {}\n\n", load_average());
  fmt::print(
      "| payload B | path | msgs/s (median of {}) | MB/s of payload | runs, M msgs/s | lost | node A CPU us/msg | "
      "node B CPU us/msg |\n|---:|---|---:|---:|---|---:|---:|---:|\n",
      runs);
  int run_id = 0;
  for (std::size_t p : payloads) {
    std::vector<std::function<Result()>> paths{[&] { return run(*a, *b, false, p, seconds, ++run_id); },
                                               [&] { return run(*a, *b, true, p, seconds, ++run_id); }};
    const auto results = alternate<Result>(runs, paths);
    for (std::size_t i = 0; i < 2; ++i) {
      std::string each;
      for (const auto& r : results[i]) {
        each += fmt::format("{}{:.2f}", each.empty() ? "" : ", ", r.msgs_per_s / 1e6);
        if (!r.error.empty()) fmt::print(stderr, "{}: {}\n", i == 0 ? "direct" : "route", r.error);
      }
      const Result m =
          median_by(results[i], [](const Result& x, const Result& y) { return x.msgs_per_s < y.msgs_per_s; });
      fmt::print("| {} | {} | {} | {:.0f} | {} | {} | {:.2f} | {:.2f} |\n", p,
                 i == 0 ? "direct (sub on A)" : "route (sub on B)", si(m.msgs_per_s),
                 m.msgs_per_s * static_cast<double>(p) / 1e6, each, m.published - m.delivered, m.cpu_a_us, m.cpu_b_us);
      std::fflush(stdout);
    }
  }
  fmt::print("\nload average at end: {}\n", load_average());
  return 0;
}
