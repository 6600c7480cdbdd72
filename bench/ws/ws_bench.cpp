// ringcast-ws-bench: WebSocket fan-out and idle WebSocket memory, against
// ringcast-broker (--ws-port, PopSub JSON frames) and nats-server's WebSocket
// listener (NATS protocol inside frames), same client code, one run.
//
// Fan-out: N WebSocket subscribers of one topic, read by one epoll thread with
// large reads that parses frame headers and each payload's 34-byte stamp
// (stamp.hpp) only. One publisher on each server's NATIVE TCP protocol (RESP
// PUBLISH pipelined to ringcast's --port; NATS PUB to nats-server's client
// port) writes as fast as the server accepts, for --messages or --seconds; then
// we wait until every subscriber has everything or nothing arrived for
// --settle-ms. We report delivered messages/s (sum over subscribers, from the
// first publish to the last delivery), messages lost (N x published -
// delivered), sequence gaps and reorderings, p50/p99 publish-to-receive
// latency (queueing included: the publisher never waits), and the share of a
// core the reader thread used. Each cell alternates the servers (A B A B ...)
// and reports each one's median run and the ratio.
//
// Idle: --connections K WebSocket connections, each subscribed (to a common
// topic or one of its own) and confirmed, against a freshly started server;
// the server's VmRSS before and after gives bytes per connection. Server
// "popsub" is ringcast-broker with clients that speak PopSub's own dialect
// (no subprotocol: every subscription QoS 1), idle mode only.
//
// TLS (--tls): the subscribers' WebSocket connections are wss://, against
// ringcast-broker --ws-tls and nats-server's `websocket { tls {...} }`, with
// a throwaway CA (tls_client.hpp); the publisher stays on each server's plain
// native port, alike for both, so the servers' TLS work is the fan-out's. The
// fan-out table then also gives each server's CPU-seconds per GB of payload
// delivered (/proc/<pid>/stat utime + stime around the run).
//
// QoS 1 (--mode qos1, ringcast only): acking WebSocket subscribers and a QoS 1
// WebSocket publisher (qos1_run.hpp).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
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
#include "epoll_set.hpp"
#include "histogram.hpp"
#include "loopback.hpp"
#include "qos1_run.hpp"
#include "resp_client.hpp"
#include "stamp.hpp"
#include "subscriber.hpp"
#include "temp_dir.hpp"
#include "tls_client.hpp"

namespace {

using namespace ringcast::bench;
using ringcast::bench::ws::Dialect;
using ringcast::bench::ws::Subscriber;
using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// ---- servers ---------------------------------------------------------------

struct Server {
  std::string name;
  Dialect dialect;
  ChildProcess process;
  int publish_port = 0;  // RESP (ringcast) or NATS client protocol
  int ws_port = 0;
  std::unique_ptr<ringcast::test::TempDir> dir;  // nats-server's config file
};

struct Options {
  std::string broker_exe;
  std::string nats_exe = "/usr/sbin/nats-server";
  unsigned io_threads = 0;
  std::vector<std::string> broker_args;
  std::optional<std::string> token;
  int server_cpu = -1;
  // --tls: the certificates' directory and the client that trusts its CA.
  std::string tls_dir;
  std::unique_ptr<TlsClient> tls;
};

// A WebSocket subscriber on a new connection to `server`'s WebSocket port,
// over TLS with --tls. nullptr (error set) if the connection failed.
std::unique_ptr<Subscriber> connect_subscriber(const Server& server, const Options& o, LatencyHistogram* latency,
                                               std::string& error) {
  const int fd = ringcast::test::connect_loopback(server.ws_port);
  if (fd < 0) {
    error = fmt::format("cannot connect to the WebSocket port: {}", std::strerror(errno));
    return nullptr;
  }
  if (!o.tls) return std::make_unique<Subscriber>(server.dialect, fd, latency);
  auto io = o.tls->connect(fd, ringcast::test::deadline_in(std::chrono::seconds(10)), error);
  if (!io) {
    ::close(fd);
    return nullptr;
  }
  return std::make_unique<Subscriber>(server.dialect, std::move(io), latency);
}

// Starts `which` ("ringcast", "popsub" or "nats") on free loopback ports and waits until
// both of its ports accept. `max_connections` > 0: ringcast's
// --max-connections (its default, 10000, would refuse the idle run's last few).
std::optional<Server> start(const std::string& which, const Options& o, int max_connections = 0) {
  Server s;
  s.publish_port = free_port();
  s.ws_port = free_port();
  std::vector<std::string> argv;
  if (which == "ringcast" || which == "popsub") {
    s.name = which == "popsub" ? "ringcast-broker, PopSub's dialect" : "ringcast-broker";
    s.dialect = which == "popsub" ? Dialect::kPopSubOwn : Dialect::kPopSub;
    argv = {o.broker_exe,
            "--port",
            std::to_string(s.publish_port),
            "--ws-port",
            std::to_string(s.ws_port),
            "--io-threads",
            std::to_string(o.io_threads)};
    if (max_connections > 0) argv.insert(argv.end(), {"--max-connections", std::to_string(max_connections)});
    if (o.tls) {
      argv.insert(argv.end(), {"--ws-tls", "--tls-cert-file", o.tls_dir + "/server.crt", "--tls-key-file",
                               o.tls_dir + "/server.key"});
    }
    argv.insert(argv.end(), o.broker_args.begin(), o.broker_args.end());
  } else {
    s.name = "nats-server";
    s.dialect = Dialect::kNats;
    s.dir = std::make_unique<ringcast::test::TempDir>();
    const std::string conf = s.dir->file("nats.conf");
    const std::string ws_tls =
        o.tls ? fmt::format("tls {{\n    cert_file: \"{}/server.crt\"\n    key_file: \"{}/server.key\"\n  }}",
                            o.tls_dir, o.tls_dir)
              : std::string("no_tls: true");
    std::ofstream(conf) << fmt::format("listen: 127.0.0.1:{}\nwebsocket {{\n  host: 127.0.0.1\n  port: {}\n  {}\n}}\n",
                                       s.publish_port, s.ws_port, ws_tls);
    argv = {o.nats_exe, "-c", conf};
  }
  s.process = ChildProcess::spawn(argv, kQuiet);
  bool exited = !s.process.running();
  const bool up = eventually(
      [&] {
        exited = exited || s.process.wait_exit(ringcast::test::deadline_in(std::chrono::milliseconds(0))).has_value();
        return exited || (wait_accepting(s.publish_port, std::chrono::milliseconds(0)) &&
                          wait_accepting(s.ws_port, std::chrono::milliseconds(0)));
      },
      std::chrono::seconds(20), std::chrono::milliseconds(5));
  if (!up || exited) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    fmt::print(stderr, "{} {} at start; run it by hand to see why: {}\n", s.name,
               exited ? "exited" : "did not accept within 20 s", cmd);
    return std::nullopt;
  }
  if (!pin(s.process.pid(), o.server_cpu)) {
    fmt::print(stderr, "cannot pin {} to CPU {}\n", s.name, o.server_cpu);
    return std::nullopt;
  }
  return s;
}

// ---- the publisher -----------------------------------------------------------

// One publish in the server's native protocol, and where its stamp goes.
struct PublishTemplate {
  std::string bytes;
  std::size_t stamp_at = 0;
};

PublishTemplate publish_template(Dialect d, const std::string& topic, std::size_t payload) {
  PublishTemplate t;
  const std::string filler(payload, 'p');
  t.bytes = d == Dialect::kNats ? fmt::format("PUB {} {}\r\n{}\r\n", topic, payload, filler)
                                : ringcast::test::resp_command({"PUBLISH", topic, filler});
  t.stamp_at = t.bytes.size() - payload - 2;  // the payload's first byte
  return t;
}

// ---- one fan-out measurement ------------------------------------------------

struct Result {
  double delivered_per_s = 0;
  double published_per_s = 0;  // accepted by the server's publish port
  std::uint64_t published = 0;
  std::uint64_t delivered = 0;
  std::uint64_t lost = 0;
  std::uint64_t gaps = 0;
  std::uint64_t reordered = 0;
  std::uint64_t disconnected = 0;       // subscribers the server closed or that saw a protocol error
  std::uint64_t short_subscribers = 0;  // subscribers that received fewer than published
  double p50_us = 0;
  double p99_us = 0;
  double reader_cpu = 0;        // share of one core the subscribers' reader thread used while it ran
  double server_cpu = 0;        // server CPU-seconds per wall second
  double cpu_s_per_gb = 0;      // server CPU-seconds per GB of payload delivered
  double seconds = 0;           // first publish to last delivery
  double longest_pause_ms = 0;  // the longest time with no delivery to any subscriber, after the first
  std::string error;            // the first subscriber error, if any
};

struct Cell {
  int subscribers;
  std::size_t payload;
  std::uint64_t messages;  // 0: for `seconds`
  double seconds;
  int settle_ms;
};

Result run(const Server& server, const Cell& cell, const Options& o) {
  const std::string topic = "bench";
  Result res;
  auto latency = std::make_unique<LatencyHistogram>();
  std::vector<std::unique_ptr<Subscriber>> subs;
  const auto cleanup = [&] {
    for (auto& s : subs) ::close(s->fd());
  };
  for (int i = 0; i < cell.subscribers; ++i) {
    std::string error;
    auto sub = connect_subscriber(server, o, latency.get(), error);
    if (!sub) {
      res.error = error;
      cleanup();
      return res;
    }
    const int fd = sub->fd();
    subs.push_back(std::move(sub));
    if (!subs.back()->subscribe(server.ws_port, topic, o.token, ringcast::test::deadline_in(std::chrono::seconds(10)),
                                error)) {
      res.error = error;
      cleanup();
      return res;
    }
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  const int pub = ringcast::test::connect_loopback(server.publish_port);
  if (server.dialect == Dialect::kNats) {
    ringcast::test::send_all(pub, "CONNECT {\"verbose\":false,\"pedantic\":false}\r\n");
  }
  ::fcntl(pub, F_SETFL, O_NONBLOCK);

  // The reader: all subscribers, one thread. Publishes progress for the
  // publisher's settle check; the tallies are read after the join.
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<std::int64_t> last_delivery{0};
  std::vector<bool> dead(subs.size(), false);
  double reader_cpu = 0;           // written by the reader, read after the join
  std::int64_t longest_pause = 0;  // the longest time between two deliveries (ns); reader-written, read after the join
  std::thread reader([&] {
    const double cpu0 = thread_cpu_seconds();
    const std::int64_t wall0 = now_ns();
    EpollSet ep(subs.size(), [&](std::size_t i) { return subs[i]->fd(); });
    std::vector<epoll_event> evs(256);
    std::vector<char> buf(1 << 18);
    std::uint64_t total = 0;
    std::int64_t last_progress = 0;
    // relaxed: a stop flag; the results are read after the join.
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = ep.wait(evs, 20);
      for (int k = 0; k < n; ++k) {
        const std::size_t i = evs[static_cast<std::size_t>(k)].data.u64;
        Subscriber& s = *subs[i];
        // A few large reads per connection and wakeup, so that one connection
        // with megabytes queued does not hold up the others (level-triggered:
        // the rest is reported again).
        for (int reads = 0; reads < 4; ++reads) {
          const ssize_t r = s.io().read(buf.data(), buf.size());
          if (r < 0 && (errno == EAGAIN || errno == EINTR)) break;
          const std::int64_t t = now_ns();
          const std::uint64_t before = s.tally().received;
          if (r <= 0 || !s.feed(buf.data(), static_cast<std::size_t>(r), t)) {
            dead[i] = true;
            ep.remove(s.fd());
            break;
          }
          if (s.tally().received != before) {
            total += s.tally().received - before;
            if (last_progress > 0) longest_pause = std::max(longest_pause, t - last_progress);
            last_progress = t;
            // relaxed: progress counters, polled by the publisher thread.
            delivered.store(total, std::memory_order_relaxed);
            last_delivery.store(t, std::memory_order_relaxed);
          }
          if (static_cast<std::size_t>(r) < buf.size()) break;
        }
      }
    }
    reader_cpu = (thread_cpu_seconds() - cpu0) / (static_cast<double>(now_ns() - wall0) / 1e9);
  });

  // The publisher: as fast as the server's publish port accepts.
  const PublishTemplate tmpl = publish_template(server.dialect, topic, cell.payload);
  constexpr std::size_t kBatch = 64;
  std::string batch;
  for (std::size_t i = 0; i < kBatch; ++i) batch += tmpl.bytes;
  std::vector<char> sink(1 << 16);
  std::uint64_t published = 0;
  std::size_t sent = batch.size();  // bytes of `batch` already written: none pending
  std::size_t batch_msgs = 0;
  const double cpu0 = cpu_seconds(server.process.pid());
  const std::int64_t t0 = now_ns();
  const std::int64_t end = t0 + static_cast<std::int64_t>(cell.seconds * 1e9);
  auto more = [&] { return cell.messages > 0 ? published < cell.messages : now_ns() < end; };
  while (sent < batch.size() || more()) {
    if (sent == batch.size()) {
      batch_msgs = cell.messages > 0 ? std::min<std::uint64_t>(kBatch, cell.messages - published) : kBatch;
      const std::int64_t t = now_ns();
      for (std::size_t i = 0; i < batch_msgs; ++i) {
        ws::write_stamp(batch.data() + i * tmpl.bytes.size() + tmpl.stamp_at, published + i, t);
      }
      published += batch_msgs;
      sent = batch.size() - batch_msgs * tmpl.bytes.size();
      // The batch is written from `sent` on: move a short batch to the end.
      if (sent > 0) std::memmove(batch.data() + sent, batch.data(), batch_msgs * tmpl.bytes.size());
    }
    const ssize_t w = ::send(pub, batch.data() + sent, batch.size() - sent, MSG_NOSIGNAL);
    const int send_errno = errno;  // before the reads below overwrite it
    if (w > 0) sent += static_cast<std::size_t>(w);
    // Replies (RESP integers; NATS PING) must not pile up behind us.
    for (;;) {
      const ssize_t r = ::read(pub, sink.data(), sink.size());
      if (r <= 0) break;
      if (server.dialect == Dialect::kNats &&
          std::string_view(sink.data(), static_cast<std::size_t>(r)).find("PING\r\n") != std::string_view::npos) {
        ringcast::test::send_all(pub, "PONG\r\n");
      }
    }
    if (w < 0 && send_errno != EAGAIN && send_errno != EINTR) {
      res.error = "the publisher's connection failed";
      published -= batch_msgs;  // approximately: the batch in flight is not counted
      break;
    }
    if (w < 0) {  // full: wait for room, or for replies to read
      pollfd p{pub, POLLOUT | POLLIN, 0};
      ::poll(&p, 1, 10);
    }
  }
  const std::int64_t t_published = now_ns();
  const std::uint64_t expected = published * static_cast<std::uint64_t>(cell.subscribers);
  // Settle: everything delivered, or nothing new for settle_ms.
  std::uint64_t last_seen = 0;
  auto last_change = Clock::now();
  for (;;) {
    // relaxed: progress counter.
    const std::uint64_t d = delivered.load(std::memory_order_relaxed);
    if (d >= expected) break;
    if (d != last_seen) {
      last_seen = d;
      last_change = Clock::now();
    } else if (Clock::now() - last_change > std::chrono::milliseconds(cell.settle_ms)) {
      break;
    }
    for (;;) {  // keep draining replies
      const ssize_t r = ::read(pub, sink.data(), sink.size());
      if (r <= 0) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double cpu1 = cpu_seconds(server.process.pid());
  stop.store(true, std::memory_order_relaxed);
  reader.join();

  // relaxed: written by the joined reader.
  const std::int64_t t_last = std::max(last_delivery.load(std::memory_order_relaxed), t0 + 1);
  res.published = published;
  for (std::size_t i = 0; i < subs.size(); ++i) {
    const ws::Tally& t = subs[i]->tally();
    res.delivered += t.received;
    res.gaps += t.gaps;
    res.reordered += t.reordered;
    if (t.received < published) ++res.short_subscribers;
    if (dead[i]) {
      ++res.disconnected;
      if (res.error.empty()) res.error = subs[i]->error().empty() ? "closed by the server" : subs[i]->error();
    }
  }
  res.lost = expected > res.delivered ? expected - res.delivered : 0;
  const double elapsed = static_cast<double>(t_last - t0) / 1e9;
  res.delivered_per_s = static_cast<double>(res.delivered) / elapsed;
  res.published_per_s = static_cast<double>(published) / (static_cast<double>(t_published - t0) / 1e9);
  res.p50_us = static_cast<double>(latency->percentile(0.5)) / 1000.0;
  res.p99_us = static_cast<double>(latency->percentile(0.99)) / 1000.0;
  res.reader_cpu = reader_cpu;
  res.longest_pause_ms = static_cast<double>(longest_pause) / 1e6;
  res.server_cpu = (cpu1 - cpu0) / elapsed;
  const double gb = static_cast<double>(res.delivered) * static_cast<double>(cell.payload) / 1e9;
  res.cpu_s_per_gb = gb > 0 ? (cpu1 - cpu0) / gb : 0;
  res.seconds = elapsed;
  cleanup();
  ::close(pub);
  return res;
}

// ---- idle connections ---------------------------------------------------------

struct IdleResult {
  std::uint64_t rss_before = 0;
  std::uint64_t rss_after = 0;
  int connected = 0;
  int alive = 0;  // still open at the end
  double setup_s = 0;
  std::string error;
};

IdleResult run_idle(const Server& server, int connections, bool own_topic, int settle_ms, const Options& o) {
  IdleResult res;
  std::vector<std::unique_ptr<Subscriber>> subs;
  subs.reserve(static_cast<std::size_t>(connections));
  res.rss_before = rss_bytes(server.process.pid());
  const auto t0 = Clock::now();
  for (int i = 0; i < connections; ++i) {
    std::string error;
    auto sub = connect_subscriber(server, o, nullptr, error);
    if (!sub) {
      res.error = fmt::format("connection {}: {}", i, error);
      break;
    }
    subs.push_back(std::move(sub));
    const std::string topic = own_topic ? fmt::format("idle.{}", i) : std::string("idle");
    if (!subs.back()->subscribe(server.ws_port, topic, o.token, ringcast::test::deadline_in(std::chrono::seconds(10)),
                                error)) {
      res.error = fmt::format("connection {}: {}", i, error);
      break;
    }
    ++res.connected;
  }
  res.setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  // The server has answered every subscribe; give a garbage-collected
  // runtime the same moment to settle as ours, then read.
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));
  res.rss_after = rss_bytes(server.process.pid());
  // Still open? A server may have written meanwhile (nats-server pings a new
  // client): read and answer that; closed is EOF, an error or a close frame.
  std::vector<pollfd> fds;
  for (const auto& s : subs) fds.push_back(pollfd{s->fd(), POLLIN | POLLRDHUP, 0});
  ::poll(fds.data(), fds.size(), 0);
  std::vector<char> buf(1 << 16);
  for (std::size_t i = 0; i < fds.size(); ++i) {
    bool open = (fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0;
    if (open && (fds[i].revents & POLLIN) != 0) {
      ::fcntl(fds[i].fd, F_SETFL, O_NONBLOCK);
      const ssize_t r = subs[i]->io().read(buf.data(), buf.size());
      // EAGAIN: TLS bytes that were no whole record, or a session ticket only.
      open = (r > 0 && subs[i]->feed(buf.data(), static_cast<std::size_t>(r), 0)) || (r < 0 && errno == EAGAIN);
    }
    res.alive += open ? 1 : 0;
  }
  for (auto& s : subs) ::close(s->fd());
  return res;
}

std::string mib(std::uint64_t b) { return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1 << 20)); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcast-broker vs nats-server over WebSocket: fan-out to N subscribers (publisher on each server's native "
      "TCP protocol) and memory per idle subscribed connection, same client, one run"};
  Options o;
  o.broker_exe = kDefaultBrokerExe;
  std::vector<std::string> servers{"ringcast", "nats"};
  std::string mode = "all";
  std::vector<int> subscribers{1, 10, 100};
  std::vector<std::size_t> payloads{52, 1024};
  std::uint64_t messages = 0;
  double seconds = 2.0;
  int runs = 3;
  int settle_ms = 2000;
  int connections = 10000;
  std::string idle_topic = "common";
  int idle_settle_ms = 2000;
  int client_cpu = -1;
  bool verbose = false;
  bool use_tls = false;
  app.add_flag("--tls", use_tls,
               "Subscribers over wss:// (ringcast-broker --ws-tls, nats-server websocket { tls {} }); a throwaway CA "
               "and server certificate are made unless --tls-certs has them");
  app.add_option("--tls-certs", o.tls_dir,
                 "With --tls: directory with ca.crt, server.crt and server.key (made there if absent)");
  app.add_flag("--verbose", verbose, "Every run's figures on stderr (published, delivered, seconds, CPU)");
  app.add_option("--mode", mode,
                 "fanout, idle, all (both), or qos1 (ringcast only: QoS 1 publisher, acking subscribers)")
      ->check(CLI::IsMember({"fanout", "idle", "all", "qos1"}))
      ->capture_default_str();
  std::size_t qos1_window = 1000;
  app.add_option("--qos1-window", qos1_window, "qos1 mode: publishes the publisher keeps without a puback")
      ->capture_default_str();
  app.add_option("--servers", servers,
                 "Servers to measure, in this order per round; popsub: ringcast-broker with clients in PopSub's "
                 "dialect (idle mode only)")
      ->delimiter(',')
      ->check(CLI::IsMember({"ringcast", "popsub", "nats"}))
      ->capture_default_str();
  app.add_option("--broker", o.broker_exe, "ringcast-broker executable (needs --ws-port)")->capture_default_str();
  app.add_option("--nats", o.nats_exe, "nats-server executable")->capture_default_str();
  app.add_option("--broker-arg", o.broker_args,
                 "Extra ringcast-broker flag (repeatable), e.g. --broker-arg=--pace-bytes=0");
  app.add_option("--io-threads", o.io_threads, "ringcast-broker I/O threads (0 = cores)")->capture_default_str();
  app.add_option("--token", o.token, "Send {\"type\":\"auth\",\"token\":TOKEN} before subscribing (ringcast)");
  app.add_option("--subscribers", subscribers, "Subscriber counts (fan-out)")->delimiter(',')->capture_default_str();
  app.add_option("--payload", payloads, "Payload sizes in bytes (each starts with a 34-byte stamp)")
      ->delimiter(',')
      ->check(CLI::Range(ws::kStampBytes, std::size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--messages", messages, "Messages per run (0: publish for --seconds)")->capture_default_str();
  app.add_option("--seconds", seconds, "Publishing time per run when --messages is 0")->capture_default_str();
  app.add_option("--runs", runs, "Runs per cell and server, alternated; medians reported")->capture_default_str();
  app.add_option("--settle-ms", settle_ms, "After publishing, stop waiting once nothing arrived for this long")
      ->capture_default_str();
  app.add_option("--connections", connections, "Idle WebSocket connections (idle mode)")->capture_default_str();
  app.add_option("--idle-topic", idle_topic, "common: all idle connections on one topic; own: one topic each")
      ->check(CLI::IsMember({"common", "own"}))
      ->capture_default_str();
  app.add_option("--idle-settle-ms", idle_settle_ms, "Wait after the last idle subscribe before reading RSS")
      ->capture_default_str();
  app.add_option("--client-cpu", client_cpu, "Run the load generator on this CPU only (-1: anywhere)")
      ->capture_default_str();
  app.add_option("--server-cpu", o.server_cpu, "Run the servers, every thread, on this CPU only (-1: anywhere)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);
  if (mode != "idle" && std::find(servers.begin(), servers.end(), "popsub") != servers.end()) {
    fmt::print(stderr, "--servers popsub measures idle connections only (--mode idle): its deliveries are owed acks\n");
    return 1;
  }

  // Idle mode needs one fd per connection here and one in the server; the
  // servers inherit the raised limit.
  const std::uint64_t fd_limit = raise_fd_limit();
  if ((mode != "fanout") && fd_limit < static_cast<std::uint64_t>(connections) + 64) {
    fmt::print(stderr, "the open-file limit is {} (hard limit); {} connections need more (ulimit -Hn)\n", fd_limit,
               connections);
    return 1;
  }
  if (!pin(0, client_cpu)) {
    fmt::print(stderr, "cannot pin the load generator to CPU {}\n", client_cpu);
    return 1;
  }
  std::unique_ptr<ringcast::test::TempDir> cert_dir;
  if (use_tls) {
    if (o.tls_dir.empty()) {
      cert_dir = std::make_unique<ringcast::test::TempDir>();
      o.tls_dir = cert_dir->path();
    }
    if (!make_bench_certs(o.tls_dir)) {
      fmt::print(stderr, "could not make certificates in {} (openssl CLI)\n", o.tls_dir);
      return 1;
    }
    o.tls = std::make_unique<TlsClient>(o.tls_dir + "/ca.crt");
    if (!o.tls->ok()) {
      fmt::print(stderr, "cannot load {}/ca.crt\n", o.tls_dir);
      return 1;
    }
  }
  fmt::print("load average at start: {}\n\n", load_average());

  if (mode == "qos1") {
    auto s = start("ringcast", o);
    if (!s) return 1;
    const std::uint64_t n_msgs = messages > 0 ? messages : 100'000;
    fmt::print(
        "## QoS 1 end to end: one WebSocket publisher (qos 1, at most {} without a puback), acking WebSocket "
        "subscribers (qos 1)\n\n{} messages per run, median of {} runs.\n\n",
        qos1_window, n_msgs, runs);
    fmt::print(
        "| N | payload B | deliveries/s | publishes/s | p50 / p99 us | redelivered "
        "|\n|---:|---:|---:|---:|---:|---:|\n");
    for (int n : subscribers) {
      for (std::size_t p : payloads) {
        std::vector<ws::Qos1Result> rs;
        for (int r = 0; r < runs; ++r) {
          rs.push_back(ws::run_qos1(s->ws_port, n, p, n_msgs, qos1_window, settle_ms));
          const ws::Qos1Result& x = rs.back();
          if (!x.error.empty()) fmt::print(stderr, "N={} {} B: {}\n", n, p, x.error);
          if (verbose) {
            fmt::print(stderr, "N={} {} B: published {} ({}/s), delivered {} in {:.2f} s = {}/s, redelivered {}\n", n,
                       p, x.published, si(x.published_per_s), x.delivered, x.seconds, si(x.delivered_per_s),
                       x.redelivered);
          }
        }
        std::sort(rs.begin(), rs.end(), [](const ws::Qos1Result& a, const ws::Qos1Result& b) {
          return a.delivered_per_s < b.delivered_per_s;
        });
        const ws::Qos1Result& m = rs[rs.size() / 2];
        fmt::print("| {} | {} | {} | {} | {:.0f} / {:.0f} | {} |\n", n, p, si(m.delivered_per_s), si(m.published_per_s),
                   m.p50_us, m.p99_us, m.redelivered);
        std::fflush(stdout);
      }
    }
    (void)s->process.stop();
    fmt::print("\nload average at end: {}\n", load_average());
    return 0;
  }

  if (mode != "idle") {
    std::vector<Server> running;
    for (const auto& which : servers) {
      auto s = start(which, o);
      if (!s) return 1;  // a server that did start is killed on the way out
      running.push_back(std::move(*s));
    }
    fmt::print("## WebSocket fan-out{}: delivered messages/s (publisher as fast as the server accepts, {})\n\n",
               o.tls ? " over TLS (wss://; the publisher plain on the native port)" : "",
               messages > 0 ? fmt::format("{} messages per run", messages) : fmt::format("{} s per run", seconds));
    fmt::print(
        "Median of {} runs per server, alternated. lost = N x published - delivered; gaps / reordered from "
        "the per-subscriber sequence; latency includes queueing; reader = share of a core the load "
        "generator's reader used; CPU-s/GB = the server's CPU seconds per GB of payload delivered.\n\n",
        runs);
    std::string head = "| N | payload B |";
    std::string rule = "|---:|---:|";
    for (const auto& s : running) {
      head += fmt::format(
          " {0} msgs/s | {0} lost / gaps / reordered / cut | {0} p50 / p99 us | {0} reader | {0} CPU-s/GB |", s.name);
      rule += "---:|---:|---:|---:|---:|";
    }
    if (running.size() == 2) {
      head += " ratio |";
      rule += "---:|";
    }
    fmt::print("{}\n{}\n", head, rule);
    for (int n : subscribers) {
      for (std::size_t p : payloads) {
        const Cell cell{n, p, messages, seconds, settle_ms};
        std::vector<std::function<Result()>> contestants;
        for (const auto& s : running) contestants.emplace_back([&, sp = &s] { return run(*sp, cell, o); });
        const auto results = alternate<Result>(runs, contestants);
        std::string row = fmt::format("| {} | {} |", n, p);
        std::vector<double> rates;
        for (std::size_t i = 0; i < running.size(); ++i) {
          const Result m = median_by(
              results[i], [](const Result& a, const Result& b) { return a.delivered_per_s < b.delivered_per_s; });
          for (const Result& r : results[i]) {
            if (!r.error.empty()) fmt::print(stderr, "{} N={} {} B: {}\n", running[i].name, n, p, r.error);
            if (verbose) {
              fmt::print(stderr,
                         "{} N={} {} B: published {} ({}/s), delivered {} in {:.2f} s = {}/s, lost {} (subscribers "
                         "short: {}), "
                         "longest pause {:.0f} ms, server CPU "
                         "{:.0f} %, reader {:.0f} %\n",
                         running[i].name, n, p, r.published, si(r.published_per_s), r.delivered, r.seconds,
                         si(r.delivered_per_s), r.lost, r.short_subscribers, r.longest_pause_ms, 100 * r.server_cpu,
                         100 * r.reader_cpu);
            }
          }
          row += fmt::format(" {} | {} / {} / {} / {} | {:.0f} / {:.0f} | {:.0f} % | {:.2f} |", si(m.delivered_per_s),
                             m.lost, m.gaps, m.reordered, m.disconnected, m.p50_us, m.p99_us, 100 * m.reader_cpu,
                             m.cpu_s_per_gb);
          rates.push_back(m.delivered_per_s);
        }
        if (rates.size() == 2) row += fmt::format(" {:.2f}x |", rates[0] / std::max(1.0, rates[1]));
        fmt::print("{}\n", row);
        std::fflush(stdout);
      }
    }
    for (auto& s : running) (void)s.process.stop();
    fmt::print("\n");
  }

  if (mode != "fanout") {
    fmt::print("## Idle WebSocket{} connections: server memory ({} connections, {} topic{})\n\n",
               o.tls ? " TLS (wss://)" : "", connections, idle_topic == "own" ? "one" : "a common",
               idle_topic == "own" ? " each" : "");
    fmt::print("| server | VmRSS before | VmRSS after | bytes per connection | connected / still open | set-up s |\n");
    fmt::print("|---|---:|---:|---:|---:|---:|\n");
    for (const auto& which : servers) {
      auto s = start(which, o, connections + 64);  // fresh: nothing from the fan-out runs in its heap
      if (!s) return 1;
      const IdleResult r = run_idle(*s, connections, idle_topic == "own", idle_settle_ms, o);
      if (!r.error.empty()) fmt::print(stderr, "{}: {}\n", s->name, r.error);
      const double per =
          r.connected > 0 ? (static_cast<double>(r.rss_after) - static_cast<double>(r.rss_before)) / r.connected : 0;
      fmt::print("| {} | {} | {} | {:.0f} | {} / {} | {:.1f} |\n", s->name, mib(r.rss_before), mib(r.rss_after), per,
                 r.connected, r.alive, r.setup_s);
      std::fflush(stdout);
      (void)s->process.stop();
    }
    fmt::print("\n");
  }
  fmt::print("load average at end: {}\n", load_average());
  return 0;
}
