// ringcast-broker-bench: one publisher and N subscribers over loopback, against
// ringcast-broker and redis-server in the same run with the same client code.
//
// Throughput: the publisher pipelines PUBLISH as fast as the slowest subscriber
// allows (at most --window messages ahead of it, so neither server ever hits its
// output-buffer limit), for --seconds; we report delivered messages/s (sum over
// subscribers) and deliveries per server CPU-second (/proc/<pid>/stat).
// With --unpaced W the publisher instead keeps W PUBLISH replies outstanding and
// never waits for deliveries, as a real client would (issue 12): then we also
// report subscribers disconnected, messages lost, server CPU-seconds per GB
// delivered, and ringcast's publisher stalls (INFO stats).
// Latency: the publisher offers --rate messages/s, each carrying its send time
// and sequence number; subscribers record receive - send for every delivery; we
// report p50/p99 over deliveries, how many of the alternated run pairs ringcast
// won on p99, and the fan-out timeline: when the first and the last of the N
// deliveries of one message arrived.
//
// With --tls every client (subscribers and publisher) connects to the
// server's TLS port instead (ringcast-broker --tls-port, redis-server
// --tls-port), verifying a throwaway CA's certificate (tls_client.hpp): the
// same run, the same client code, user-space OpenSSL on both sides (issue 28,
// part 5). INFO is still read on the plain port.
//
// Every message frame has the same size for a given channel and payload, so the
// subscribers find frame boundaries by arithmetic (resp_message_size) instead of
// parsing RESP.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "alternate.hpp"
#include "byte_stream.hpp"
#include "epoll_set.hpp"
#include "loopback.hpp"
#include "resp_client.hpp"
#include "temp_dir.hpp"
#include "tls_client.hpp"

namespace {

using namespace ringcast::bench;
using ringcast::test::append_resp_command;
using ringcast::test::resp_message_payload_offset;
using ringcast::test::resp_message_size;
using ringcast::test::RespClient;
using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// ---- servers ---------------------------------------------------------------

struct Server {
  std::string name;
  ChildProcess process;
  int port = 0;
  int tls_port = 0;  // with --tls: where the clients connect
};

// --tls: the certificates (dir/ca.crt, server.crt, server.key) and the client.
struct Tls {
  std::string dir;
  std::unique_ptr<TlsClient> client;
};

std::optional<Server> start_ringcast(const std::string& exe, unsigned io_threads, const std::vector<std::string>& extra,
                                     const Tls* tls) {
  const int port = free_port();
  const int tls_port = tls != nullptr ? free_port() : 0;
  std::vector<std::string> argv{exe, "--port", std::to_string(port), "--io-threads", std::to_string(io_threads)};
  if (tls != nullptr) {
    argv.insert(argv.end(), {"--tls-port", std::to_string(tls_port), "--tls-cert-file", tls->dir + "/server.crt",
                             "--tls-key-file", tls->dir + "/server.key"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  Server s{"ringcast-broker", ChildProcess::spawn(argv, kQuiet), port, tls_port};
  if (!s.process.running() || !wait_accepting(port) || (tls != nullptr && !wait_accepting(tls_port))) {
    return std::nullopt;
  }
  return s;
}

// redis-server with its defaults, persistence off, as a user would run it for
// pub/sub; with `tls` also its TLS port (client certificates not asked for).
std::optional<Server> start_redis(const std::string& exe, const Tls* tls) {
  const int port = free_port();
  const int tls_port = tls != nullptr ? free_port() : 0;
  std::vector<std::string> argv{exe,      "--port", std::to_string(port), "--bind", "127.0.0.1",
                                "--save", "",       "--appendonly",       "no",     "--daemonize",
                                "no"};
  if (tls != nullptr) {
    argv.insert(argv.end(),
                {"--tls-port", std::to_string(tls_port), "--tls-cert-file", tls->dir + "/server.crt", "--tls-key-file",
                 tls->dir + "/server.key", "--tls-ca-cert-file", tls->dir + "/ca.crt", "--tls-auth-clients", "no"});
  }
  Server s{"redis-server", ChildProcess::spawn(argv, kQuiet), port, tls_port};
  if (!s.process.running() || !wait_accepting(port) || (tls != nullptr && !wait_accepting(tls_port))) {
    return std::nullopt;
  }
  return s;
}

// A client connection: plain to server.port, or TLS to server.tls_port
// (handshake done, socket non-blocking). nullptr if it failed.
std::unique_ptr<ByteStream> connect_client(const Server& server, const Tls* tls) {
  const int fd = ringcast::test::connect_loopback(tls != nullptr ? server.tls_port : server.port);
  if (fd < 0) return nullptr;
  if (tls == nullptr) return std::make_unique<PlainStream>(fd);
  std::string error;
  auto stream = tls->client->connect(fd, ringcast::test::deadline_in(std::chrono::seconds(10)), error);
  if (!stream) {
    fmt::print(stderr, "{}: {}\n", server.name, error);
    ::close(fd);
  }
  return stream;
}

// A subscriber of `ch` over `io`, confirmed (the reply read whole, so the
// next byte is the first delivery's). False if the server did not confirm.
bool subscribe(ByteStream& io, const std::string& ch) {
  std::string req;
  append_resp_command(req, {"SUBSCRIBE", ch});
  const std::string confirm = "*3\r\n$9\r\nsubscribe\r\n$" + std::to_string(ch.size()) + "\r\n" + ch + "\r\n:1\r\n";
  if (!send_all(io, req)) return false;
  std::string got;
  const auto d = ringcast::test::deadline_in(std::chrono::seconds(10));
  while (got.size() < confirm.size()) {
    if (read_some(io, got, d) <= 0) return false;
  }
  return got == confirm;
}

// ---- one measurement ---------------------------------------------------------

struct Result {
  double delivered_per_s = 0;
  double deliveries_per_cpu_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  // Over the messages every subscriber received: the first and the last arrival.
  double first_p50_us = 0;
  double last_p50_us = 0;
  std::uint64_t delivered = 0;
  // --unpaced only.
  std::uint64_t disconnects = 0;  // subscribers whose socket the server closed
  std::uint64_t lost = 0;         // published x subscribers - delivered
  double cpu_s_per_gb = 0;        // server CPU-seconds per GB of message frames delivered
  std::uint64_t stalls = 0;       // ringcast INFO publisher_stalls during the run
  double stall_ms = 0;            // ringcast INFO publisher_stall_usec during the run
  bool has_stalls = false;
  std::string error;  // set: a client could not connect or subscribe; nothing was measured
};

// One "key:value" of INFO stats, or -1 if the server does not report it.
long long info_stat(int port, const std::string& key) {
  RespClient c(static_cast<std::uint16_t>(port));
  const auto reply = c.call({"INFO", "stats"});
  if (!reply || reply->type != '$') return -1;
  const std::string in(reply->str);
  const auto at = in.find("\r\n" + key + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(in.substr(at + key.size() + 3));
}

// The latency-mode payload: send time, then sequence number.
constexpr std::size_t kStampBytes = 2 * sizeof(std::int64_t);

double percentile_us(std::vector<std::int64_t>& ns, double q) {
  if (ns.empty()) return 0;
  std::sort(ns.begin(), ns.end());
  return static_cast<double>(ns[static_cast<std::size_t>(static_cast<double>(ns.size() - 1) * q)]) / 1000.0;
}

// First and last arrival of each message, from its deliveries.
class FanoutTimeline {
 public:
  explicit FanoutTimeline(std::size_t messages)
      : first_(messages, INT64_MAX), last_(messages, INT64_MIN), count_(messages, 0) {}

  void record(std::uint64_t seq, std::int64_t latency_ns) {
    if (seq >= count_.size()) return;  // beyond the sized horizon: p50/p99 still count it
    first_[seq] = std::min(first_[seq], latency_ns);
    last_[seq] = std::max(last_[seq], latency_ns);
    ++count_[seq];
  }

  void report(int subscribers, Result& r) const {
    std::vector<std::int64_t> first;
    std::vector<std::int64_t> last;
    for (std::size_t i = 0; i < count_.size(); ++i) {
      if (count_[i] != static_cast<std::uint32_t>(subscribers)) continue;
      first.push_back(first_[i]);
      last.push_back(last_[i]);
    }
    r.first_p50_us = percentile_us(first, 0.5);
    r.last_p50_us = percentile_us(last, 0.5);
  }

 private:
  std::vector<std::int64_t> first_;
  std::vector<std::int64_t> last_;
  std::vector<std::uint32_t> count_;
};

struct Sub {
  std::unique_ptr<ByteStream> io;
  std::string buf;
  std::size_t pos = 0;
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> disconnected{false};
};

Result run(const Server& server, int subscribers, std::size_t payload, double seconds, double rate, std::size_t window,
           std::size_t unpaced, const Tls* tls) {
  const std::string ch = "bench";
  const std::size_t fsize = resp_message_size(ch, payload);
  const std::size_t ts_off = resp_message_payload_offset(ch, payload);
  std::vector<std::unique_ptr<Sub>> subs;
  auto close_subs = [&] {
    for (auto& s : subs) {
      if (!s->io) continue;
      const int fd = s->io->fd();
      s->io.reset();
      ::close(fd);
    }
  };
  auto failed = [&](std::string why) {
    close_subs();
    Result r;
    r.error = std::move(why);
    return r;
  };
  for (int i = 0; i < subscribers; ++i) {
    auto s = std::make_unique<Sub>();
    s->io = connect_client(server, tls);
    const bool ok = s->io && subscribe(*s->io, ch);
    if (s->io) ::fcntl(s->io->fd(), F_SETFL, O_NONBLOCK);
    subs.push_back(std::move(s));
    if (!ok) return failed(fmt::format("{}: subscriber {} could not subscribe", server.name, i));
  }
  const std::unique_ptr<ByteStream> pub_io = connect_client(server, tls);
  if (!pub_io) return failed(fmt::format("{}: the publisher could not connect", server.name));
  ByteStream& pub = *pub_io;
  ::fcntl(pub.fd(), F_SETFL, O_NONBLOCK);

  const bool latency_mode = rate > 0;
  std::atomic<bool> stop_readers{false};
  std::vector<std::int64_t> latencies;
  latencies.reserve(latency_mode ? static_cast<std::size_t>(rate * seconds * subscribers) + 1024 : 0);
  FanoutTimeline timeline(latency_mode ? static_cast<std::size_t>(rate * seconds) + 1024 : 0);
  std::thread reader([&] {
    EpollSet ep(subs.size(), [&](std::size_t i) { return subs[i]->io->fd(); });
    std::vector<epoll_event> evs(256);
    std::vector<char> tmp(1 << 18);
    // relaxed: a stop flag.
    while (!stop_readers.load(std::memory_order_relaxed)) {
      const int n = ep.wait(evs, 20);
      for (int k = 0; k < n; ++k) {
        Sub& s = *subs[evs[static_cast<std::size_t>(k)].data.u64];
        for (;;) {
          const ssize_t r = s.io->read(tmp.data(), tmp.size());
          if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            // relaxed: read after the join.
            s.disconnected.store(true, std::memory_order_relaxed);
            ep.remove(s.io->fd());
            break;
          }
          if (r < 0) break;
          std::uint64_t frames = 0;
          if (latency_mode) {
            // Low rate: reassemble frames to read each send timestamp.
            const std::int64_t t = now_ns();
            s.buf.append(tmp.data(), static_cast<std::size_t>(r));
            while (s.buf.size() - s.pos >= fsize) {
              std::int64_t sent = 0;
              std::uint64_t seq = 0;
              std::memcpy(&sent, s.buf.data() + s.pos + ts_off, sizeof sent);
              std::memcpy(&seq, s.buf.data() + s.pos + ts_off + sizeof sent, sizeof seq);
              latencies.push_back(t - sent);
              timeline.record(seq, t - sent);
              s.pos += fsize;
              ++frames;
            }
            s.buf.erase(0, s.pos);
            s.pos = 0;
          } else {
            // Throughput: frames have a fixed size, so counting bytes counts
            // frames; the client touches no payload byte and cannot be the
            // bottleneck it would otherwise become.
            const std::size_t before = s.pos / fsize;
            s.pos += static_cast<std::size_t>(r);
            frames = s.pos / fsize - before;
          }
          // relaxed: a progress counter read by the publisher for flow control.
          s.received.fetch_add(frames, std::memory_order_relaxed);
          if (static_cast<std::size_t>(r) < tmp.size()) break;
        }
      }
    }
  });

  std::uint64_t published = 0;
  std::string payload_bytes(payload, 'p');
  auto append_publish = [&](std::string& out) {
    const std::int64_t t = now_ns();
    std::memcpy(payload_bytes.data(), &t, sizeof t);
    std::memcpy(payload_bytes.data() + sizeof t, &published, sizeof published);
    ++published;
    append_resp_command(out, {"PUBLISH", ch, payload_bytes});
  };
  auto min_received = [&] {
    std::uint64_t m = UINT64_MAX;
    for (const auto& s : subs) m = std::min(m, s->received.load(std::memory_order_relaxed));
    return m;
  };
  char sink[1 << 16];
  auto drain_replies = [&] {
    while (pub.read(sink, sizeof sink) > 0) {
    }
  };

  const long long stalls0 = info_stat(server.port, "publisher_stalls");
  const long long stall_us0 = info_stat(server.port, "publisher_stall_usec");
  const double cpu0 = cpu_seconds(server.process.pid());
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  std::string out;
  std::uint64_t replies = 0;
  // Counts replies (one line each: ":<n>\r\n", or an error line).
  auto count_replies = [&] {
    for (;;) {
      const ssize_t n = pub.read(sink, sizeof sink);
      if (n <= 0) return;
      replies += static_cast<std::uint64_t>(std::count(sink, sink + n, '\n'));
    }
  };
  if (unpaced > 0 && !latency_mode) {
    // As a pipelining client: at most `unpaced` replies outstanding, never a look
    // at the subscribers. Whatever paces it is the server.
    while (Clock::now() < end) {
      count_replies();
      if (published - replies >= unpaced) {
        pollfd p{pub.fd(), POLLIN, 0};
        ::poll(&p, 1, 1);
        continue;
      }
      out.clear();
      const std::uint64_t room = unpaced - (published - replies);
      for (std::uint64_t i = 0; i < std::min<std::uint64_t>(room, 32); ++i) append_publish(out);
      (void)send_all(pub, out);
    }
  } else if (!latency_mode) {
    while (Clock::now() < end) {
      if (published - min_received() > window) {
        // Sleep, not spin: on a small machine a spinning publisher takes the CPU
        // the server and the subscribers need (a window is milliseconds of work).
        drain_replies();
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        continue;
      }
      out.clear();
      for (int i = 0; i < 32; ++i) append_publish(out);
      (void)send_all(pub, out);
      drain_replies();
    }
  } else {
    const auto interval = std::chrono::duration<double>(1.0 / rate);
    auto next = t0;
    while (Clock::now() < end) {
      std::this_thread::sleep_until(next);
      out.clear();
      // Catch up if the sleep overslept, so the offered rate holds on average.
      while (next <= Clock::now() && out.size() < (1u << 20)) {
        append_publish(out);
        next += std::chrono::duration_cast<Clock::duration>(interval);
      }
      (void)send_all(pub, out);
      drain_replies();
    }
  }
  // Let in-flight deliveries land (bounded), then measure.
  auto settled = [&] {
    for (const auto& s : subs) {
      // relaxed: progress counters and flags.
      if (!s->disconnected.load(std::memory_order_relaxed) && s->received.load(std::memory_order_relaxed) < published) {
        return false;
      }
    }
    return true;
  };
  const auto settle = Clock::now() + std::chrono::seconds(5);
  while (!settled() && Clock::now() < settle) {
    drain_replies();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto t1 = Clock::now();
  const double cpu1 = cpu_seconds(server.process.pid());
  stop_readers.store(true, std::memory_order_relaxed);
  reader.join();

  Result r;
  for (const auto& s : subs) r.delivered += s->received.load(std::memory_order_relaxed);
  const double elapsed = std::chrono::duration<double>(t1 - t0).count();
  r.delivered_per_s = static_cast<double>(r.delivered) / elapsed;
  r.deliveries_per_cpu_s = cpu1 > cpu0 ? static_cast<double>(r.delivered) / (cpu1 - cpu0) : 0;
  const double gb = static_cast<double>(r.delivered) * static_cast<double>(fsize) / 1e9;
  r.cpu_s_per_gb = gb > 0 ? (cpu1 - cpu0) / gb : 0;
  for (const auto& s : subs) r.disconnects += s->disconnected.load(std::memory_order_relaxed) ? 1u : 0u;
  const std::uint64_t expected = published * static_cast<std::uint64_t>(subscribers);
  r.lost = expected > r.delivered ? expected - r.delivered : 0;
  const long long stalls1 = info_stat(server.port, "publisher_stalls");
  const long long stall_us1 = info_stat(server.port, "publisher_stall_usec");
  r.has_stalls = stalls0 >= 0 && stalls1 >= 0;
  if (r.has_stalls) {
    r.stalls = static_cast<std::uint64_t>(stalls1 - stalls0);
    r.stall_ms = static_cast<double>(stall_us1 - stall_us0) / 1000.0;
  }
  r.p50_us = percentile_us(latencies, 0.5);
  r.p99_us = percentile_us(latencies, 0.99);
  timeline.report(subscribers, r);
  close_subs();
  ::close(pub.fd());
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcast-broker vs redis-server: one publisher, N subscribers, loopback"};
  std::string broker_exe = kDefaultBrokerExe;
  std::string redis_exe = "/usr/bin/redis-server";
  std::vector<int> subscribers{1, 10, 100};
  std::vector<std::size_t> payloads{52, 512, 4096};
  double seconds = 2.0;
  double rate = 1000.0;
  std::vector<int> latency_subscribers{1, 10, 100};
  std::size_t window = 2000;
  unsigned io_threads = 0;
  int repeat = 1;
  bool ringcast_only = false;
  std::size_t unpaced = 0;
  bool no_latency = false;
  std::vector<std::string> broker_args;
  std::vector<std::string> peer_broker_args;
  bool use_tls = false;
  std::string tls_certs;
  app.add_flag("--tls", use_tls,
               "Every client over TLS: to ringcast-broker --tls-port and redis-server --tls-port (a throwaway CA "
               "and server certificate are made unless --tls-certs has them)");
  app.add_option("--tls-certs", tls_certs,
                 "With --tls: directory with ca.crt, server.crt and server.key (made there if absent)");
  app.add_option("--unpaced", unpaced,
                 "Throughput with a publisher that keeps this many PUBLISH replies outstanding and never waits "
                 "for deliveries (0: the paced publisher, --window)")
      ->capture_default_str();
  app.add_flag("--no-latency", no_latency, "Skip the latency table");
  app.add_option("--broker-arg", broker_args,
                 "Extra ringcast-broker flag (repeatable), e.g. --broker-arg=--pace-bytes=0");
  app.add_option("--peer-broker-arg", peer_broker_args,
                 "Compare against a second ringcast-broker with this extra flag (repeatable) instead of "
                 "redis-server, e.g. history off vs on; the 'redis' columns are then that broker's")
      ->allow_extra_args(false);
  app.add_flag("--ringcast-only", ringcast_only, "Measure ringcast-broker alone (for profiling)");
  app.add_option("--broker", broker_exe, "ringcast-broker executable")->capture_default_str();
  app.add_option("--redis", redis_exe, "redis-server executable")->capture_default_str();
  app.add_option("--subscribers", subscribers, "Subscriber counts for the throughput table");
  app.add_option("--payloads", payloads, "Payload sizes in bytes (each carries a send time and a sequence number)")
      ->check(CLI::Range(kStampBytes, std::size_t{64} << 20));
  app.add_option("--seconds", seconds, "Duration of each measurement")->capture_default_str();
  app.add_option("--rate", rate, "Offered publish rate (msgs/s) for the latency table")->capture_default_str();
  app.add_option("--latency-subscribers", latency_subscribers, "Subscriber counts for the latency table");
  app.add_option("--window", window, "Most messages the publisher may run ahead of the slowest subscriber")
      ->capture_default_str();
  app.add_option("--io-threads", io_threads, "ringcast-broker I/O threads (0 = cores)")->capture_default_str();
  app.add_option("--repeat", repeat, "Runs per cell; the median is reported")->capture_default_str();
  int client_cpu = -1;
  int server_cpu = -1;
  app.add_option("--client-cpu", client_cpu, "Run the load generator on this CPU only (-1: anywhere)")
      ->capture_default_str();
  app.add_option("--server-cpu", server_cpu, "Run both servers, every thread, on this CPU only (-1: anywhere)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  ::signal(SIGPIPE, SIG_IGN);

  if (!pin(0, client_cpu)) {
    fmt::print(stderr, "cannot pin the load generator to CPU {}\n", client_cpu);
    return 1;
  }
  std::unique_ptr<ringcast::test::TempDir> cert_dir;
  std::optional<Tls> tls_setup;
  if (use_tls) {
    if (tls_certs.empty()) {
      cert_dir = std::make_unique<ringcast::test::TempDir>();
      tls_certs = cert_dir->path();
    }
    if (!make_bench_certs(tls_certs)) {
      fmt::print(stderr, "could not make certificates in {} (openssl CLI)\n", tls_certs);
      return 1;
    }
    tls_setup = Tls{tls_certs, std::make_unique<TlsClient>(tls_certs + "/ca.crt")};
    if (!tls_setup->client->ok()) {
      fmt::print(stderr, "cannot load {}/ca.crt\n", tls_certs);
      return 1;
    }
  }
  const Tls* tls = tls_setup ? &*tls_setup : nullptr;
  auto rc = start_ringcast(broker_exe, io_threads, broker_args, tls);
  auto rd = peer_broker_args.empty() ? start_redis(redis_exe, tls)
                                     : start_ringcast(broker_exe, io_threads, peer_broker_args, tls);
  if (!peer_broker_args.empty()) {
    std::string flags;
    for (const std::string& a : peer_broker_args) flags += " " + a;
    fmt::print("Peer: ringcast-broker with{} (its figures are in the 'redis' columns)\n\n", flags);
  }
  if (!rc || !rd) {
    fmt::print(stderr, "could not start {}\n", !rc ? broker_exe : redis_exe);
    return 1;  // a server that did start is killed on the way out
  }
  // The servers have started all their threads by the time they accept.
  if (!pin(rc->process.pid(), server_cpu) || !pin(rd->process.pid(), server_cpu)) {
    fmt::print(stderr, "cannot pin the servers to CPU {}\n", server_cpu);
    return 1;
  }
  // Runs the two servers alternately (A B A B ...), so load from elsewhere on
  // the machine falls on both alike, and reports each one's median run and in
  // how many of the pairs ringcast had the lower p99.
  struct Pair {
    Result ringcast;
    Result redis;
    int p99_wins = 0;
  };
  auto pair = [&](int n, std::size_t p, double r) {
    std::vector<std::function<Result()>> servers{[&] { return run(*rc, n, p, seconds, r, window, unpaced, tls); }};
    if (!ringcast_only) servers.emplace_back([&] { return run(*rd, n, p, seconds, r, window, unpaced, tls); });
    const auto runs = alternate<Result>(repeat, servers);
    for (const auto& server_runs : runs) {
      for (const Result& x : server_runs) {
        if (!x.error.empty()) fmt::print(stderr, "{}\n", x.error);
      }
    }
    Pair out;
    for (int i = 0; !ringcast_only && i < repeat; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (runs[0][k].p99_us < runs[1][k].p99_us) ++out.p99_wins;
    }
    auto less = [r](const Result& a, const Result& b) {
      return r > 0 ? a.p99_us < b.p99_us : a.delivered_per_s < b.delivered_per_s;
    };
    out.ringcast = median_by(runs[0], less);
    if (!ringcast_only) out.redis = median_by(runs[1], less);
    return out;
  };

  if (unpaced > 0) {
    fmt::print("## Throughput{}, unpaced publisher: {} PUBLISH replies outstanding, no wait on deliveries\n\n",
               tls != nullptr ? " over TLS (every client)" : "", unpaced);
    fmt::print(
        "| subscribers | payload B | ringcast msgs/s | redis msgs/s | ratio | ringcast disconnected / lost "
        "| redis disconnected / lost | ringcast stalls (n / ms) | ringcast CPU-s/GB | redis CPU-s/GB |\n");
    fmt::print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    fmt::print("## Throughput{}: delivered messages/s (publisher pipelined, <= {} ahead of the slowest subscriber)\n\n",
               tls != nullptr ? " over TLS (every client)" : "", window);
    fmt::print(
        "| subscribers | payload B | ringcast msgs/s | redis msgs/s | ratio | ringcast deliveries/CPU-s | redis "
        "deliveries/CPU-s |\n");
    fmt::print("|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (int n : subscribers) {
    for (std::size_t p : payloads) {
      const Pair t = pair(n, p, 0);
      const Result& a = t.ringcast;
      const Result& b = t.redis;
      if (unpaced > 0) {
        fmt::print("| {} | {} | {} | {} | {:.2f}x | {} / {} | {} / {} | {} | {:.2f} | {:.2f} |\n", n, p,
                   si(a.delivered_per_s), si(b.delivered_per_s), a.delivered_per_s / std::max(1.0, b.delivered_per_s),
                   a.disconnects, a.lost, b.disconnects, b.lost,
                   a.has_stalls ? fmt::format("{} / {:.0f}", a.stalls, a.stall_ms) : std::string("-"), a.cpu_s_per_gb,
                   b.cpu_s_per_gb);
        std::fflush(stdout);
        continue;
      }
      fmt::print("| {} | {} | {} | {} | {:.2f}x | {} | {} |\n", n, p, si(a.delivered_per_s), si(b.delivered_per_s),
                 a.delivered_per_s / std::max(1.0, b.delivered_per_s), si(a.deliveries_per_cpu_s),
                 si(b.deliveries_per_cpu_s));
      std::fflush(stdout);
    }
  }
  if (no_latency) {
    (void)rc->process.stop();
    (void)rd->process.stop();
    return 0;
  }
  fmt::print("\n## Latency{} at {} msgs/s offered (publish to receive, every delivery)\n\n",
             tls != nullptr ? " over TLS" : "", rate);
  fmt::print(
      "Medians of {} alternated run pairs; 'first'/'last': when the first and the last of the N deliveries\n"
      "of one message arrived (p50 over messages).\n\n",
      repeat);
  fmt::print(
      "| subscribers | payload B | ringcast p50 us | ringcast p99 us | redis p50 us | redis p99 us "
      "| pairs with lower ringcast p99 | ringcast first / last us | redis first / last us |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int n : latency_subscribers) {
    for (std::size_t p : payloads) {
      const auto [a, b, wins] = pair(n, p, rate);
      fmt::print("| {} | {} | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {} of {} | {:.0f} / {:.0f} | {:.0f} / {:.0f} |\n", n,
                 p, a.p50_us, a.p99_us, b.p50_us, b.p99_us, wins, repeat, a.first_p50_us, a.last_p50_us, b.first_p50_us,
                 b.last_p50_us);
      std::fflush(stdout);
    }
  }
  (void)rc->process.stop();
  (void)rd->process.stop();
  return 0;
}
