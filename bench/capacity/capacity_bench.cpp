// ringcast-capacity-bench: one ringcast-broker at its limit. As many idle
// subscribed connections as the machine allows (RESP and WebSocket, a fresh
// broker for each), then:
//   - broker memory per connection: VmRSS after - before, over N; the kernel's
//     TCP memory (/proc/net/sockstat) per connection too;
//   - the fan-out of one message to all N: first and last arrival after the
//     PUBLISH left the publisher (several single messages, one at a time);
//   - sustained messages/s at that N: M messages published as fast as the
//     broker takes them, until every subscriber has every one;
//   - a NEW client's round trips meanwhile: a fresh connection every
//     --probe-ms, its subscribe (and for WebSocket its upgrade) confirmed and
//     one PING answered, against the same probe on the idle broker.
//
// What limits N: every process here, the broker too, may hold RLIMIT_NOFILE
// descriptors (the hard limit; raising it needs CAP_SYS_RESOURCE). The broker
// needs one per connection plus its own (listeners, epoll, eventfds), so N is
// its limit minus those, the publisher and the probe. The clients are spread
// over several processes for the same reason, and over several 127.x source
// addresses when N exceeds what one address's ephemeral ports can reach.
// Loopback only. Everything started here is stopped on exit, on Ctrl-C too,
// and client sockets are closed with a reset so that no TIME_WAIT is left.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "client_worker.hpp"
#include "connect_from.hpp"
#include "control_channel.hpp"
#include "histogram.hpp"
#include "loopback.hpp"
#include "resp_client.hpp"
#include "stamp.hpp"
#include "subscriber.hpp"
#include "ws_client.hpp"

namespace {

using namespace ringcast::bench;
using namespace ringcast::bench::capacity;
using ringcast::test::deadline_in;
using Clock = std::chrono::steady_clock;

extern "C" void on_stop_signal(int) { stop_requested = 1; }

// SIGINT/SIGTERM set stop_requested; blocking calls return EINTR (no
// SA_RESTART), so every wait here notices within its poll step.
void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

bool stopping() { return stop_requested != 0; }

std::string mib(double b) { return fmt::format("{:.1f} MiB", b / (1 << 20)); }

// A number from a "Key: value ..." line of a /proc file, or -1.
long long proc_field(const std::string& path, const std::string& key, int column = 1) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream words(line.substr(key.size()));
    std::string w;
    for (int i = 0; i < column && words >> w; ++i) {
    }
    try {
      return std::stoll(w);
    } catch (...) {
      return -1;
    }
  }
  return -1;
}

// Bytes of the kernel's per-socket objects, host-wide (/proc/slabinfo, root
// only): the caches every TCP connection adds to on each end (the socket, its
// inode, its epoll entry), active objects x object size. -1 if unreadable.
long long socket_slab_bytes() {
  std::ifstream in("/proc/slabinfo");
  std::string line;
  long long total = 0;
  bool any = false;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    long long active = 0;
    long long all = 0;
    long long size = 0;
    words >> name >> active >> all >> size;
    if (name == "TCP" || name == "sock_inode_cache" || name == "eventpoll_epi") {
      total += active * size;
      any = true;
    }
  }
  return any ? total : -1;
}

std::size_t open_fds(pid_t pid) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// ---- limits ---------------------------------------------------------------------

struct Limits {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
  bool raisable = false;  // the hard limit can go up (CAP_SYS_RESOURCE)
  int port_low = 0;
  int port_high = 0;
  int ports = 0;
  long long mem_available = 0;  // bytes
};

Limits read_limits() {
  Limits l;
  raise_fd_limit();
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  l.soft = r.rlim_cur;
  l.hard = r.rlim_max;
  rlimit more = r;
  more.rlim_max = r.rlim_max + 1;
  l.raisable = ::setrlimit(RLIMIT_NOFILE, &more) == 0;
  if (l.raisable) ::setrlimit(RLIMIT_NOFILE, &r);  // leave it as it was
  l.ports = ephemeral_ports(&l.port_low, &l.port_high);
  l.mem_available = proc_field("/proc/meminfo", "MemAvailable:") * 1024;
  return l;
}

// ---- the broker ---------------------------------------------------------------------

struct Broker {
  ChildProcess process;
  int port = 0;
  int ws_port = 0;
  std::size_t own_fds = 0;     // descriptors it holds with no client connected
  std::uint64_t fd_limit = 0;  // its RLIMIT_NOFILE (inherited)
};

std::optional<Broker> start_broker(const std::string& exe, unsigned io_threads, std::size_t max_connections,
                                   const std::vector<std::string>& extra) {
  Broker b;
  b.port = free_port();
  b.ws_port = free_port();
  std::vector<std::string> argv{exe,
                                "--bind",
                                "127.0.0.1",
                                "--port",
                                std::to_string(b.port),
                                "--ws-port",
                                std::to_string(b.ws_port),
                                "--io-threads",
                                std::to_string(io_threads),
                                "--max-connections",
                                std::to_string(max_connections)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  b.process = ChildProcess::spawn(argv, kQuiet);
  if (!b.process.running() || !wait_accepting(b.port) || !wait_accepting(b.ws_port)) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    fmt::print(stderr, "ringcast-broker did not start; run it by hand to see why: {}\n", cmd);
    return std::nullopt;
  }
  // The two probe connections of wait_accepting close asynchronously: wait
  // until the count settles.
  std::size_t last = 0;
  ringcast::test::eventually(
      [&] {
        const std::size_t n = open_fds(b.process.pid());
        const bool same = n == last;
        last = n;
        return same;
      },
      std::chrono::seconds(5), std::chrono::milliseconds(100));
  b.own_fds = last;
  b.fd_limit =
      static_cast<std::uint64_t>(proc_field(fmt::format("/proc/{}/limits", b.process.pid()), "Max open files", 1));
  return b;
}

// ---- client processes --------------------------------------------------------------

struct Client {
  ChildProcess process;
  ControlChannel control;
  int connections = 0;
  int connected = 0;
  bool ready = false;
};

std::optional<Client> start_client(const ClientOptions& o) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::nullopt;
  ::fcntl(pair[1], F_SETFD, 0);  // the child's end survives exec; nothing else does
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> argv{exe,
                                "client",
                                "--protocol",
                                o.protocol == Protocol::kWs ? "ws" : "resp",
                                "--port",
                                std::to_string(o.port),
                                "--connections",
                                std::to_string(o.connections),
                                "--first-index",
                                std::to_string(o.first_index),
                                "--sources",
                                std::to_string(o.sources),
                                "--channel",
                                o.channel,
                                "--payload",
                                std::to_string(o.payload),
                                "--control-fd",
                                std::to_string(pair[1])};
  Client c{
      ChildProcess::spawn(argv, {.out = ringcast::test::Stream::kDiscard, .err = ringcast::test::Stream::kInherit}),
      ControlChannel(pair[0]), o.connections};
  ::close(pair[1]);
  if (!c.process.running()) return std::nullopt;
  return c;
}

void stop_clients(std::vector<Client>& clients) {
  for (auto& c : clients) c.control.send("quit\n");
  for (auto& c : clients) {
    if (!c.process.wait_exit(deadline_in(std::chrono::seconds(20)))) (void)c.process.stop(SIGTERM);
  }
  clients.clear();
}

// ---- the publisher -------------------------------------------------------------------

class Publisher {
 public:
  Publisher(int port, std::string channel, std::size_t payload) : channel_(std::move(channel)) {
    fd_ = connect_from(source_address(0), port);
    head_ = "*3\r\n" + ringcast::test::resp_bulk("PUBLISH") + ringcast::test::resp_bulk(channel_) +
            fmt::format("${}\r\n", payload);
    message_ = head_ + std::string(payload, 'p') + "\r\n";
  }
  ~Publisher() {
    if (fd_ >= 0) close_reset(fd_);
  }
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  [[nodiscard]] bool ok() const { return fd_ >= 0; }

  // Publishes `count` messages and returns the steady-clock time of the first
  // write. rate == 0: pipelined in batches of 64 stamped just before each
  // batch is written, as fast as the broker takes them; rate > 0: one at a
  // time, message i at first + i / rate.
  std::int64_t publish(std::uint64_t count, double rate = 0) {
    const std::uint64_t batch_size = rate > 0 ? 1 : 64;
    std::string batch;
    std::int64_t first = 0;
    for (std::uint64_t done = 0; done < count;) {
      const std::uint64_t n = std::min(batch_size, count - done);
      batch.clear();
      if (rate > 0 && first != 0) {
        const auto due = first + static_cast<std::int64_t>(static_cast<double>(done) * 1e9 / rate);
        std::this_thread::sleep_for(std::chrono::nanoseconds(std::max<std::int64_t>(0, due - now_ns())));
      }
      const std::int64_t t = now_ns();
      for (std::uint64_t i = 0; i < n; ++i) {
        const std::size_t at = batch.size() + head_.size();
        batch += message_;
        ws::write_stamp(batch.data() + at, seq_++, t);
      }
      if (first == 0) first = t;
      if (!ringcast::test::send_all(fd_, batch)) break;
      done += n;
      pending_ += n;
    }
    return first;
  }

  // Reads the replies to everything published so far: each is the number of
  // subscribers the broker delivered to. Returns how many replies were not
  // `expected` (or did not come within `timeout`).
  std::uint64_t check_replies(std::size_t expected, std::chrono::milliseconds timeout) {
    const std::string want = fmt::format(":{}\r\n", expected);
    const auto d = deadline_in(timeout);
    std::uint64_t wrong = 0;
    while (pending_ > 0) {
      const auto nl = in_.find('\n');
      if (nl == std::string::npos) {
        if (ringcast::test::read_some(fd_, in_, d) <= 0) break;
        continue;
      }
      if (in_.compare(0, nl + 1, want) != 0) ++wrong;
      in_.erase(0, nl + 1);
      --pending_;
    }
    wrong += pending_;
    pending_ = 0;
    return wrong;
  }

 private:
  int fd_ = -1;
  std::string channel_;
  std::string head_;
  std::string message_;
  std::uint64_t seq_ = 0;
  std::uint64_t pending_ = 0;  // replies not read yet
  std::string in_;
};

// ---- the new-client probe ---------------------------------------------------------

struct ProbeStats {
  LatencyHistogram subscribe;  // connect + (upgrade +) subscribe confirmed
  LatencyHistogram ping;       // one PING round trip on that fresh connection
  int failed = 0;
  std::string error;
};

// A server frame sink that notes a pong.
struct PongSink {
  bool pong = false;
  void begin(ringcast::bench::ws::Opcode op, bool, std::uint64_t) { pong = pong || op == ws::Opcode::kPong; }
  void data(const char*, std::size_t) {}
  void end() {}
};

// One fresh connection: its subscribe and PING round trips, recorded.
void probe_once(Protocol p, int port, ProbeStats& s) {
  const auto d = deadline_in(std::chrono::seconds(10));
  const std::int64_t t0 = now_ns();
  const int fd = connect_from(source_address(0), port);
  if (fd < 0) {
    ++s.failed;
    s.error = fmt::format("connect: {}", std::strerror(errno));
    return;
  }
  std::string error;
  std::int64_t t1 = 0;
  bool ok = false;
  if (p == Protocol::kWs) {
    ws::Subscriber sub(ws::Dialect::kPopSub, fd, nullptr);
    if (sub.subscribe(port, "probe", std::nullopt, d, error)) {
      t1 = now_ns();
      ringcast::test::send_all(fd, ws::client_frame(ws::Opcode::kPing, "probe"));
      ws::FrameReader frames;
      PongSink sink;
      std::string in;
      while (!sink.pong && ringcast::test::read_some(fd, in, d) > 0) {
        frames.feed(in.data(), in.size(), sink);
        in.clear();
      }
      ok = sink.pong;
      if (!ok) error = "no pong";
    }
  } else {
    const std::string confirm = ringcast::test::resp_subscribe_reply("probe");
    const std::string pong = "*2\r\n" + ringcast::test::resp_bulk("pong") + ringcast::test::resp_bulk("");
    std::string in;
    ringcast::test::send_all(fd, ringcast::test::resp_command({"SUBSCRIBE", "probe"}));
    while (in.size() < confirm.size() && ringcast::test::read_some(fd, in, d) > 0) {
    }
    if (in == confirm) {
      t1 = now_ns();
      in.clear();
      ringcast::test::send_all(fd, ringcast::test::resp_command({"PING"}));
      while (in.size() < pong.size() && ringcast::test::read_some(fd, in, d) > 0) {
      }
      ok = in == pong;
      if (!ok) error = fmt::format("PING reply {:?}", in);
    } else {
      error = fmt::format("SUBSCRIBE reply {:?}", in);
    }
  }
  const std::int64_t t2 = now_ns();
  close_reset(fd);
  if (!ok) {
    ++s.failed;
    s.error = error;
    return;
  }
  s.subscribe.record(static_cast<std::uint64_t>(t1 - t0));
  s.ping.record(static_cast<std::uint64_t>(t2 - t1));
}

// Probes every `interval` on its own thread until stopped.
class Prober {
 public:
  Prober(Protocol p, int port, std::chrono::milliseconds interval)
      : thread_([this, p, port, interval] {
          // relaxed: a stop flag; the stats are read after the join.
          while (!stop_.load(std::memory_order_relaxed) && !stopping()) {
            probe_once(p, port, stats_);
            std::this_thread::sleep_for(interval);
          }
        }) {}
  ProbeStats finish() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
    return stats_;
  }

 private:
  std::atomic<bool> stop_{false};
  ProbeStats stats_;  // written by the thread, read after the join
  std::thread thread_;
};

// ---- rounds -------------------------------------------------------------------------

struct RoundResult {
  bool complete = false;   // every live connection got its messages
  std::int64_t first = 0;  // first completion (ns, steady clock)
  std::int64_t last = 0;   // last completion
  std::uint64_t complete_connections = 0;
  std::uint64_t alive = 0;
  std::uint64_t gaps = 0;    // sequence gaps + reorderings, cumulative
  double client_cpu = 0;     // CPU-seconds of all client processes during the round
  LatencyHistogram latency;  // send to receive, every delivery of the round
  std::string error;
};

// Arms every client for `k` messages per connection, calls publish(), and
// waits (up to `timeout`) until every client reports its connections done.
template <class Publish>
RoundResult run_round(std::vector<Client>& clients, std::uint64_t k, Publish&& publish, std::chrono::seconds timeout) {
  RoundResult r;
  r.first = INT64_MAX;
  r.last = INT64_MIN;
  for (auto& c : clients) c.control.send(fmt::format("round {}\n", k));
  for (auto& c : clients) {
    const auto line = c.control.read_line(deadline_in(std::chrono::seconds(30)));
    if (!line || *line != "armed") {
      r.error = "a client did not arm";
      return r;
    }
  }
  publish();
  const auto d = deadline_in(timeout);
  std::size_t done = 0;
  for (auto& c : clients) {
    const auto line = c.control.read_line(d);
    if (!line || line->rfind("done ", 0) != 0) break;
    std::istringstream in(line->substr(5));
    std::int64_t first = 0;
    std::int64_t last = 0;
    std::uint64_t complete = 0;
    std::uint64_t alive = 0;
    std::uint64_t received = 0;
    std::uint64_t gaps = 0;
    double cpu = 0;
    std::size_t bytes = 0;
    in >> first >> last >> complete >> alive >> received >> gaps >> cpu >> bytes;
    auto h = std::make_unique<LatencyHistogram>();
    if (bytes != sizeof(LatencyHistogram) || !c.control.read_bytes(h.get(), bytes, d)) break;
    r.latency.merge(*h);
    r.first = std::min(r.first, first);
    r.last = std::max(r.last, last);
    r.complete_connections += complete;
    r.alive += alive;
    r.gaps += gaps;
    r.client_cpu += cpu;
    ++done;
  }
  r.complete = done == clients.size();
  if (!r.complete) {
    r.error = stopping()
                  ? "interrupted"
                  : fmt::format("only {} of {} clients complete after {} s", done, clients.size(), timeout.count());
  }
  return r;
}

// ---- one protocol at the limit ---------------------------------------------------

struct Settings {
  std::string broker_exe;
  std::vector<std::string> broker_args;
  unsigned io_threads = 0;
  int connections = 0;  // 0: as many as the broker's descriptor limit allows
  int clients = 0;      // 0: enough processes for their descriptor limit, at least 2
  int sources = 0;      // 0: enough for the ephemeral port range
  std::size_t payload = 52;
  int single_rounds = 5;
  std::uint64_t messages = 500;
  double rate = 0;  // sustained round: 0 = as fast as the broker takes them
  int probe_ms = 20;
  int idle_probes = 20;
  int settle_ms = 2000;
  int round_timeout_s = 120;
  int overfill = 0;  // connections to try past the limit at the end
};

struct PhaseResult {
  std::string protocol;
  int connections = 0;
  int clients = 0;
  int sources = 0;
  std::size_t broker_own_fds = 0;
  std::uint64_t broker_fd_limit = 0;
  std::size_t broker_fds_after = 0;
  double setup_s = 0;
  double rss_before = 0;
  double rss_after = 0;
  double slab_per_conn = 0;                       // kernel socket objects, both ends (socket_slab_bytes)
  std::vector<std::pair<double, double>> single;  // first / last arrival, us
  RoundResult sustained;
  double sustained_s = 0;              // first publish to last completion
  double broker_cpu_s = 0;             // broker CPU-seconds during the sustained round
  double single_cpu_per_delivery = 0;  // broker CPU-seconds per delivery, one message at a time
  std::uint64_t wrong_replies = 0;
  ProbeStats idle_probe;
  ProbeStats busy_probe;
  int alive_end = 0;
  // Past the limit (--overfill): answered / silent (left in the accept queue)
  // new connections, and the broker's CPU share over 2 s before and while
  // they wait.
  int over_answered = 0;
  int over_silent = 0;
  double cpu_before_over = 0;
  double cpu_during_over = 0;
  std::string error;
};

// Opens `count` more connections to the RESP port of a broker at its limit:
// each sends PING and waits up to 1 s for the reply. Then the broker's CPU
// share over 2 s with the silent ones waiting, against 2 s before.
void overfill(const Broker& b, int count, PhaseResult& res) {
  const double c0 = cpu_seconds(b.process.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double c1 = cpu_seconds(b.process.pid());
  res.cpu_before_over = (c1 - c0) / 2;
  std::vector<int> fds;
  for (int i = 0; i < count && !stopping(); ++i) {
    const int fd = connect_from(source_address(0), b.port);
    if (fd < 0) break;
    fds.push_back(fd);
    std::string in;
    ringcast::test::send_all(fd, ringcast::test::resp_command({"PING"}));
    const bool answered = ringcast::test::read_until(fd, in, "\r\n", deadline_in(std::chrono::seconds(1)));
    (answered ? res.over_answered : res.over_silent) += 1;
  }
  const double c2 = cpu_seconds(b.process.pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  res.cpu_during_over = (cpu_seconds(b.process.pid()) - c2) / 2;
  for (const int fd : fds) close_reset(fd);
}

PhaseResult run_phase(Protocol protocol, const Settings& s, const Limits& limits) {
  PhaseResult res;
  res.protocol = protocol == Protocol::kWs ? "WebSocket" : "RESP";
  const std::string channel = "capacity";
  // Publisher + probe + a margin for a probe connection still closing.
  constexpr std::size_t kReserve = 2 + 8;
  const std::size_t asked = s.connections > 0 ? static_cast<std::size_t>(s.connections) : 0;
  auto broker = start_broker(s.broker_exe, s.io_threads, 100000, s.broker_args);
  if (!broker) {
    res.error = "the broker did not start";
    return res;
  }
  const std::size_t max_n = broker->fd_limit > broker->own_fds + kReserve
                                ? static_cast<std::size_t>(broker->fd_limit) - broker->own_fds - kReserve
                                : 0;
  const std::size_t n = asked > 0 ? std::min(asked, max_n) : max_n;
  if (asked > max_n) {
    fmt::print(stderr, "{}: {} connections asked, the broker can hold {} (limit {} - own {} - reserve {})\n",
               res.protocol, asked, max_n, broker->fd_limit, broker->own_fds, kReserve);
  }
  res.connections = static_cast<int>(n);
  res.broker_own_fds = broker->own_fds;
  res.broker_fd_limit = broker->fd_limit;
  const std::size_t per_client = static_cast<std::size_t>(limits.soft) - 64;
  res.clients = s.clients > 0 ? s.clients : std::max<int>(2, static_cast<int>((n + per_client - 1) / per_client));
  const std::size_t usable_ports = static_cast<std::size_t>(limits.ports) * 9 / 10;
  res.sources = s.sources > 0 ? s.sources : std::max<int>(1, static_cast<int>((n + usable_ports - 1) / usable_ports));
  fmt::print(stderr,
             "{}: the broker (pid {}) holds {} descriptors of its limit {}; with {} kept for the publisher and "
             "the probe that leaves room for {} connections; opening {} from {} client processes and source "
             "addresses 127.0.0.1..127.0.0.{}\n",
             res.protocol, broker->process.pid(), broker->own_fds, broker->fd_limit, kReserve, max_n, n, res.clients,
             res.sources);

  const int data_port = protocol == Protocol::kWs ? broker->ws_port : broker->port;
  // The idle probe first, on the empty broker (its connections come and go).
  for (int i = 0; i < s.idle_probes && !stopping(); ++i) probe_once(protocol, data_port, res.idle_probe);
  std::this_thread::sleep_for(std::chrono::milliseconds(s.settle_ms));
  res.rss_before = static_cast<double>(rss_bytes(broker->process.pid()));
  const long long slab_before = socket_slab_bytes();

  // Connect, with progress.
  std::vector<Client> clients;
  const auto t0 = Clock::now();
  int index = 0;
  for (int i = 0; i < res.clients; ++i) {
    const int share = static_cast<int>(n / static_cast<std::size_t>(res.clients)) +
                      (static_cast<std::size_t>(i) < n % static_cast<std::size_t>(res.clients) ? 1 : 0);
    ClientOptions o{protocol, data_port, share, index, res.sources, channel, s.payload, -1};
    auto c = start_client(o);
    if (!c) {
      res.error = "cannot start a client process";
      stop_clients(clients);
      return res;
    }
    clients.push_back(std::move(*c));
    index += share;
  }
  auto last_print = Clock::now();
  auto last_change = Clock::now();
  int last_total = -1;
  for (;;) {
    std::vector<pollfd> fds;
    for (auto& c : clients) fds.push_back(pollfd{c.control.fd(), POLLIN, 0});
    ::poll(fds.data(), fds.size(), 1000);
    int total = 0;
    int ready = 0;
    for (std::size_t i = 0; i < clients.size(); ++i) {
      Client& c = clients[i];
      if ((fds[i].revents & (POLLIN | POLLHUP)) != 0 && !c.control.pump()) {
        res.error = "a client process exited while connecting";
      }
      while (auto line = c.control.buffered_line()) {
        if (line->rfind("progress ", 0) == 0) c.connected = std::stoi(line->substr(9));
        if (line->rfind("ready ", 0) == 0) {
          c.connected = std::stoi(line->substr(6));
          c.ready = true;
        }
        if (line->rfind("failed ", 0) == 0) res.error = "client: " + line->substr(7);
      }
      total += c.connected;
      ready += c.ready ? 1 : 0;
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    if (total != last_total) {
      last_total = total;
      last_change = Clock::now();
    }
    if (Clock::now() - last_print > std::chrono::seconds(2) || ready == res.clients) {
      last_print = Clock::now();
      fmt::print(stderr, "  {}: {:>6} / {} connected and subscribed, {:.1f} s, broker RSS {}\n", res.protocol, total, n,
                 elapsed, mib(static_cast<double>(rss_bytes(broker->process.pid()))));
    }
    if (ready == res.clients) break;
    if (stopping()) res.error = "interrupted";
    if (Clock::now() - last_change > std::chrono::seconds(60)) res.error = "no connection progress for 60 s";
    if (!res.error.empty()) {
      stop_clients(clients);
      return res;
    }
  }
  res.setup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(s.settle_ms));
  res.rss_after = static_cast<double>(rss_bytes(broker->process.pid()));
  const long long slab_after = socket_slab_bytes();
  res.slab_per_conn =
      slab_before >= 0 && slab_after >= 0 ? static_cast<double>(slab_after - slab_before) / static_cast<double>(n) : 0;
  res.broker_fds_after = open_fds(broker->process.pid());

  Publisher pub(broker->port, channel, s.payload);
  if (!pub.ok()) {
    res.error = "the publisher cannot connect";
    stop_clients(clients);
    return res;
  }
  // One message at a time.
  const double single_cpu0 = cpu_seconds(broker->process.pid());
  for (int i = 0; i < s.single_rounds && !stopping(); ++i) {
    std::int64_t sent = 0;
    const RoundResult r = run_round(
        clients, 1, [&] { sent = pub.publish(1); }, std::chrono::seconds(s.round_timeout_s));
    if (!r.complete) {
      res.error = "single message: " + r.error;
      break;
    }
    res.single.emplace_back(static_cast<double>(r.first - sent) / 1e3, static_cast<double>(r.last - sent) / 1e3);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!res.single.empty()) {
    res.single_cpu_per_delivery = (cpu_seconds(broker->process.pid()) - single_cpu0) /
                                  (static_cast<double>(res.single.size()) * static_cast<double>(n));
  }
  // Sustained, with the new-client probe running.
  if (res.error.empty() && !stopping()) {
    const double cpu0 = cpu_seconds(broker->process.pid());
    Prober prober(protocol, data_port, std::chrono::milliseconds(s.probe_ms));
    std::int64_t sent = 0;
    res.sustained = run_round(
        clients, s.messages, [&] { sent = pub.publish(s.messages, s.rate); }, std::chrono::seconds(s.round_timeout_s));
    res.busy_probe = prober.finish();
    res.sustained_s = static_cast<double>(res.sustained.last - sent) / 1e9;
    res.broker_cpu_s = cpu_seconds(broker->process.pid()) - cpu0;
    if (!res.sustained.complete) res.error = "sustained: " + res.sustained.error;
  }
  res.wrong_replies = pub.check_replies(n, std::chrono::seconds(10));
  // Who is still there: every client's live connections.
  for (auto& c : clients) c.control.send("status\n");
  for (auto& c : clients) {
    const auto line = c.control.read_line(deadline_in(std::chrono::seconds(10)));
    if (line && line->rfind("status ", 0) == 0) {
      std::istringstream in(line->substr(7));
      std::uint64_t complete = 0;
      std::uint64_t alive = 0;
      in >> complete >> alive;
      res.alive_end += static_cast<int>(alive);
    }
  }
  if (s.overfill > 0 && !stopping()) overfill(*broker, s.overfill, res);
  stop_clients(clients);
  (void)broker->process.stop();
  return res;
}

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }

void print_results(const std::vector<PhaseResult>& results, const Settings& s) {
  fmt::print("\n## One broker at its descriptor limit: idle subscribed connections\n\n");
  fmt::print(
      "| protocol | connections | still open at end | broker fds own / limit / at N | client processes | "
      "source addresses | set-up s | conn/s | VmRSS before | VmRSS at N | **broker bytes per connection** | "
      "kernel socket objects per connection (both ends) |\n");
  fmt::print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : results) {
    fmt::print("| {} | {} | {} | {} / {} / {} | {} | {} | {:.1f} | {:.0f} | {} | {} | **{:.0f}** | {:.0f} |\n",
               r.protocol, r.connections, r.alive_end, r.broker_own_fds, r.broker_fd_limit, r.broker_fds_after,
               r.clients, r.sources, r.setup_s, r.connections / std::max(r.setup_s, 1e-9), mib(r.rss_before),
               mib(r.rss_after), (r.rss_after - r.rss_before) / std::max(r.connections, 1), r.slab_per_conn);
  }
  fmt::print(
      "\n## One message to all N ({} B payload, one at a time): first and last arrival after the PUBLISH "
      "was written, us\n\n",
      s.payload);
  fmt::print(
      "| protocol | N | first / last per message | median last | last / N | broker CPU per delivery |\n"
      "|---|---:|---|---:|---:|---:|\n");
  for (const auto& r : results) {
    std::string each;
    std::vector<double> lasts;
    for (const auto& [f, l] : r.single) {
      each += fmt::format("{}{:.0f} / {:.0f}", each.empty() ? "" : ", ", f, l);
      lasts.push_back(l);
    }
    std::sort(lasts.begin(), lasts.end());
    const double med = lasts.empty() ? 0 : lasts[lasts.size() / 2];
    fmt::print("| {} | {} | {} | {:.0f} | {:.2f} us | {:.2f} us |\n", r.protocol, r.connections, each, med,
               med / std::max(r.connections, 1), r.single_cpu_per_delivery * 1e6);
  }
  fmt::print("\n## Sustained: {} messages of {} B to all N, {}\n\n", s.messages, s.payload,
             s.rate > 0 ? fmt::format("published one at a time at {} msgs/s", s.rate)
                        : std::string("published as fast as the broker takes them"));
  fmt::print(
      "| protocol | N | complete | seconds | **messages/s** | deliveries/s | latency p50 / p99 / max ms | "
      "broker CPU share | broker CPU per delivery | client CPU-s | gaps | wrong PUBLISH replies |\n");
  fmt::print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|\n");
  for (const auto& r : results) {
    const auto& x = r.sustained;
    const double rate = r.sustained_s > 0 ? static_cast<double>(s.messages) / r.sustained_s : 0;
    const double deliveries = static_cast<double>(s.messages) * r.connections;
    fmt::print(
        "| {} | {} | {} / {} | {:.2f} | **{}** | {} | {:.1f} / {:.1f} / {:.1f} | {:.0f} % | {:.3f} us | {:.1f} | {} | "
        "{} "
        "|\n",
        r.protocol, r.connections, x.complete_connections, x.alive, r.sustained_s, si(rate), si(rate * r.connections),
        us(x.latency.percentile(0.5)) / 1e3, us(x.latency.percentile(0.99)) / 1e3, us(x.latency.max()) / 1e3,
        100 * r.broker_cpu_s / std::max(r.sustained_s, 1e-9), 1e6 * r.broker_cpu_s / std::max(deliveries, 1.0),
        x.client_cpu, x.gaps, r.wrong_replies);
  }
  fmt::print("\n## A new client meanwhile: a fresh connection every {} ms, its {} confirmed, then one PING\n\n",
             s.probe_ms, "subscribe (WebSocket: upgrade + subscribe)");
  fmt::print("| protocol | when | probes | connect + subscribe p50 / max ms | PING p50 / max ms | failed |\n");
  fmt::print("|---|---|---:|---|---|---:|\n");
  for (const auto& r : results) {
    for (const auto& [when, p] :
         {std::pair<const char*, const ProbeStats*>{"idle broker, no connections", &r.idle_probe},
          {"during the sustained fan-out", &r.busy_probe}}) {
      fmt::print("| {} | {} | {} | {:.2f} / {:.2f} | {:.2f} / {:.2f} | {}{} |\n", r.protocol, when,
                 p->subscribe.count(), us(p->subscribe.percentile(0.5)) / 1e3, us(p->subscribe.max()) / 1e3,
                 us(p->ping.percentile(0.5)) / 1e3, us(p->ping.max()) / 1e3, p->failed,
                 p->error.empty() ? "" : " (" + p->error + ")");
    }
  }
}

void print_overfill(const std::vector<PhaseResult>& results, const Settings& s) {
  if (s.overfill <= 0) return;
  fmt::print("\n## Past the limit: {} more connections to the RESP port, each PING given 1 s\n\n", s.overfill);
  fmt::print(
      "| protocol filled | answered | silent (left in the accept queue) | broker CPU share before / while they wait "
      "|\n");
  fmt::print("|---|---:|---:|---|\n");
  for (const auto& r : results) {
    fmt::print("| {} | {} | {} | {:.0f} % / {:.0f} % |\n", r.protocol, r.over_answered, r.over_silent,
               100 * r.cpu_before_over, 100 * r.cpu_during_over);
  }
}

int run_client_command(const ClientOptions& o) {
  catch_stop_signals();
  ClientWorker w(o);
  return w.run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcast-capacity-bench: one ringcast-broker at its limit. Holds as many idle subscribed connections as the "
      "machine allows (RESP, then WebSocket, a fresh broker each; clients in several processes and, when the "
      "ephemeral ports run out, from several 127.x source addresses), then measures broker memory per connection, "
      "the time to fan one message out to all of them, sustained messages/s at that N, and a new client's round "
      "trips during the fan-out. Loopback only. Prints the descriptor limit that caps the count."};
  Settings s;
  s.broker_exe = kDefaultBrokerExe;
  std::vector<std::string> protocols{"resp", "ws"};
  bool smoke = false;
  app.add_option("--protocols", protocols, "Which listeners to fill, in this order")
      ->delimiter(',')
      ->check(CLI::IsMember({"resp", "ws"}))
      ->capture_default_str();
  app.add_option("--connections", s.connections,
                 "Idle subscribed connections (0: as many as the broker's descriptor limit allows)")
      ->capture_default_str();
  app.add_option("--clients", s.clients, "Client processes (0: enough for their descriptor limit, at least 2)")
      ->capture_default_str();
  app.add_option("--sources", s.sources,
                 "Source addresses 127.0.0.1..127.0.0.K, round robin (0: as many as the ephemeral port range needs; "
                 "an address that runs out of ports hands over to the next anyway)")
      ->check(CLI::Range(0, 250))
      ->capture_default_str();
  app.add_option("--payload", s.payload, "Payload bytes (starting with a 34-byte stamp)")
      ->check(CLI::Range(ws::kStampBytes, std::size_t{1} << 16))
      ->capture_default_str();
  app.add_option("--single-rounds", s.single_rounds, "Single messages fanned out one at a time")->capture_default_str();
  app.add_option("--messages", s.messages, "Messages of the sustained round")->capture_default_str();
  app.add_option("--rate", s.rate,
                 "Sustained round: publish one message at a time at this rate (msgs/s); 0: pipelined, as fast as "
                 "the broker takes them")
      ->capture_default_str();
  app.add_option("--probe-ms", s.probe_ms, "Interval between new-client probes during the sustained round")
      ->capture_default_str();
  app.add_option("--idle-probes", s.idle_probes, "Probes against the idle broker first")->capture_default_str();
  app.add_option("--settle-ms", s.settle_ms, "Pause before each VmRSS reading")->capture_default_str();
  app.add_option("--round-timeout-s", s.round_timeout_s, "Give up on a round after this long")->capture_default_str();
  app.add_option("--overfill", s.overfill,
                 "At the end, open this many more connections than fit and report how the broker treats them "
                 "(answered, left waiting, its CPU meanwhile)")
      ->capture_default_str();
  app.add_option("--io-threads", s.io_threads, "ringcast-broker I/O threads (0 = one per core)")->capture_default_str();
  app.add_option("--broker", s.broker_exe, "ringcast-broker executable")->capture_default_str();
  app.add_option("--broker-arg", s.broker_args, "Extra ringcast-broker flag (repeatable)");
  app.add_flag("--smoke", smoke,
               "A quick check that everything works: 300 connections, 2 single messages, 50 sustained, 5 probes");
  ClientOptions client;
  std::string client_protocol = "resp";
  CLI::App* client_cmd = app.add_subcommand("client", "(internal) one client process; started by the harness");
  client_cmd->group("");  // hidden from --help
  client_cmd->add_option("--protocol", client_protocol)->check(CLI::IsMember({"resp", "ws"}));
  client_cmd->add_option("--port", client.port)->required();
  client_cmd->add_option("--connections", client.connections)->required();
  client_cmd->add_option("--first-index", client.first_index);
  client_cmd->add_option("--sources", client.sources)->check(CLI::Range(1, 250));
  client_cmd->add_option("--channel", client.channel)->required();
  client_cmd->add_option("--payload", client.payload)->required();
  client_cmd->add_option("--control-fd", client.control_fd)->required();
  CLI11_PARSE(app, argc, argv);

  if (*client_cmd) {
    client.protocol = client_protocol == "ws" ? Protocol::kWs : Protocol::kResp;
    raise_fd_limit();
    return run_client_command(client);
  }
  if (smoke) {
    s.connections = 300;
    s.single_rounds = 2;
    s.messages = 50;
    s.idle_probes = 5;
    s.settle_ms = 200;
  }
  catch_stop_signals();
  const Limits limits = read_limits();
  fmt::print("load average at start: {}\n", load_average());
  fmt::print(
      "open-file limit (RLIMIT_NOFILE): soft {} / hard {} for this process, every client process and the "
      "broker; the hard limit {} (CAP_SYS_RESOURCE {}), so the broker's descriptors cap N\n",
      limits.soft, limits.hard, limits.raisable ? "can be raised here" : "cannot be raised here",
      limits.raisable ? "present" : "absent");
  fmt::print("ephemeral ports {}-{}: {} connections per source address to one destination; MemAvailable {}\n",
             limits.port_low, limits.port_high, limits.ports, mib(static_cast<double>(limits.mem_available)));
  std::fflush(stdout);

  std::vector<PhaseResult> results;
  for (const auto& p : protocols) {
    if (stopping()) break;
    results.push_back(run_phase(p == "ws" ? Protocol::kWs : Protocol::kResp, s, limits));
    if (!results.back().error.empty()) fmt::print(stderr, "{}: {}\n", results.back().protocol, results.back().error);
  }
  if (stopping()) {
    fmt::print(stderr, "interrupted: the broker and the client processes are stopped\n");
    return 130;
  }
  print_results(results, s);
  print_overfill(results, s);
  fmt::print("\nload average at end: {}\n", load_average());
  bool ok = true;
  for (const auto& r : results) ok = ok && r.error.empty();
  return ok ? 0 : 1;
}
