// ringcast-cluster-fanout-bench: fan-out across a 3-node cluster, ringcast
// against Redis Cluster in the same run with the same client code (issue 36,
// "Targets").
//
// The harness starts both clusters itself on free loopback ports, in a temp
// dir, and stops them at the end:
//   * ringcast: 3 nats-servers joined by routes (each routes to the other two),
//     and 3 ringcast-broker nodes, node i with --cluster on nats-server i
//     (docs/cluster.md);
//   * Redis Cluster: 3 redis-server --cluster-enabled yes, no replicas, the
//     slots spread by redis-cli --cluster create.
// One run: N subscribers of one channel, subscriber i on node i % 3, all
// confirmed before anything is published; then probe messages on the channel
// until every subscriber has seen one (a confirmation does not wait for
// interest to cross NATS routes: docs/cluster.md, "When a subscription is
// confirmed"); then the measured phase, from one publisher on node 1:
//   * throughput: PUBLISH pipelined with at most --window replies outstanding,
//     never looking at the subscribers (whatever paces it is the cluster), for
//     --seconds;
//   * latency (--latency-rate > 0): that many 52 B messages/s, each carrying
//     its send time.
// Deliveries/s count every delivery over the time from the first publish to
// the last delivery. Every message carries its sequence number; every
// subscriber checks it got each one once, in order, and counts what arrived
// after the publisher stopped (late), what never arrived within the drain
// (missing) and what came out of order. ringcast's nodes also count in INFO cluster what they saw lost
// (cluster_lost) during the measured phase.
// Runs alternate (ringcast, redis, ringcast, ...) so load from elsewhere falls
// on both alike; the tables give each system's median run and the ratio.
#include <fcntl.h>
#include <poll.h>
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
#include <fmt/chrono.h>
#include <fmt/format.h>

#include "alternate.hpp"
#include "epoll_set.hpp"
#include "histogram.hpp"
#include "loopback.hpp"
#include "process_report.hpp"
#include "resp_client.hpp"
#include "temp_dir.hpp"

namespace {

using namespace ringcast::bench;
using ringcast::test::append_resp_command;
using ringcast::test::RespClient;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kNodes = 3;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

void progress(const std::string& line) { fmt::print(stderr, "[{:%T}] {}\n", std::chrono::system_clock::now(), line); }

// ---- the clusters --------------------------------------------------------------

// A running cluster: every process it is made of (their CPU time is its cost)
// and the RESP port of each of its nodes, node 1 first.
struct Cluster {
  std::string name;
  bool ringcast = false;
  std::vector<ChildProcess> processes;
  std::vector<int> ports;
  std::vector<std::string> logs;  // redis: each node's log file

  // How many times `needle` occurs in the nodes' logs so far.
  std::uint64_t count_in_logs(std::string_view needle) const {
    std::uint64_t n = 0;
    for (const auto& path : logs) {
      std::ifstream in(path);
      for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos ? 1U : 0U;
    }
    return n;
  }

  // Stops the processes last started first (brokers before their NATS
  // servers, so no node logs a lost connection on the way out).
  void stop() {
    while (!processes.empty()) processes.pop_back();
  }

  double cpu_seconds_total() const {
    double s = 0;
    for (const auto& p : processes) s += cpu_seconds(p.pid());
    return s;
  }
};

// One section of INFO from `port` ("" if it could not be read).
std::string info(int port, const char* section) {
  RespClient c(static_cast<std::uint16_t>(port));
  const auto reply = c.call({"INFO", section});
  return reply && reply->type == '$' ? std::string(reply->str) : std::string();
}

// A "key:value" field of an INFO text, or -1 if absent.
long long info_field(const std::string& text, const std::string& key) {
  const auto at = text.find("\r\n" + key + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + key.size() + 3));
}

// Sum over the nodes of one INFO cluster counter.
long long cluster_counter(const Cluster& c, const std::string& key) {
  long long sum = 0;
  for (const int port : c.ports) sum += std::max(0LL, info_field(info(port, "cluster"), key));
  return sum;
}

std::optional<Cluster> start_ringcast(const std::string& broker, const std::string& nats, unsigned io_threads) {
  Cluster c{"ringcast", true, {}, {}, {}};
  std::vector<int> client(kNodes);
  std::vector<int> route(kNodes);
  for (std::size_t i = 0; i < kNodes; ++i) {
    client[i] = free_port();
    route[i] = free_port();
  }
  for (std::size_t i = 0; i < kNodes; ++i) {
    std::string routes;
    for (std::size_t j = 0; j < kNodes; ++j) {
      if (j != i) routes += fmt::format("{}nats://127.0.0.1:{}", routes.empty() ? "" : ",", route[j]);
    }
    c.processes.push_back(ChildProcess::spawn(
        {nats, "-a", "127.0.0.1", "-p", std::to_string(client[i]), "--cluster",
         fmt::format("nats://127.0.0.1:{}", route[i]), "--cluster_name", "ringcast-bench", "--routes", routes},
        kQuiet));
    if (!c.processes.back().running() || !wait_accepting(client[i])) {
      fmt::print(stderr, "nats-server {} did not start ({})\n", i + 1, nats);
      return std::nullopt;
    }
  }
  for (std::size_t i = 0; i < kNodes; ++i) {
    const int port = free_port();
    c.processes.push_back(
        ChildProcess::spawn({broker, "--port", std::to_string(port), "--io-threads", std::to_string(io_threads),
                             "--cluster", fmt::format("nats://127.0.0.1:{}", client[i])},
                            kQuiet));
    c.ports.push_back(port);
    if (!c.processes.back().running() || !wait_accepting(port) ||
        !eventually([&] { return info_field(info(port, "cluster"), "cluster_connected") == 1; },
                    std::chrono::seconds(20), std::chrono::milliseconds(20))) {
      fmt::print(stderr, "ringcast-broker {} did not join the cluster ({})\n", i + 1, broker);
      return std::nullopt;
    }
  }
  return c;
}

std::optional<Cluster> start_redis(const std::string& server, const std::string& cli, const std::string& dir) {
  Cluster c{"redis", false, {}, {}, {}};
  std::vector<std::string> create{cli, "--cluster", "create"};
  for (std::size_t i = 0; i < kNodes; ++i) {
    const int port = free_port();
    c.processes.push_back(ChildProcess::spawn({server,
                                               "--port",
                                               std::to_string(port),
                                               "--bind",
                                               "127.0.0.1",
                                               "--cluster-enabled",
                                               "yes",
                                               "--cluster-port",
                                               std::to_string(free_port()),
                                               "--cluster-config-file",
                                               fmt::format("nodes-{}.conf", port),
                                               "--dir",
                                               dir,
                                               "--save",
                                               "",
                                               "--appendonly",
                                               "no",
                                               "--daemonize",
                                               "no",
                                               "--logfile",
                                               fmt::format("{}/redis-{}.log", dir, port)},
                                              kQuiet));
    c.ports.push_back(port);
    c.logs.push_back(fmt::format("{}/redis-{}.log", dir, port));
    if (!c.processes.back().running() || !wait_accepting(port)) {
      fmt::print(stderr, "redis-server {} did not start ({})\n", i + 1, server);
      return std::nullopt;
    }
    create.push_back(fmt::format("127.0.0.1:{}", port));
  }
  create.push_back("--cluster-yes");
  auto creator = ChildProcess::spawn(create, kQuiet);
  const auto rc = creator.wait_exit(ringcast::test::deadline_in(std::chrono::seconds(60)));
  const bool ok = rc && *rc == 0 &&
                  eventually(
                      [&] {
                        for (const int port : c.ports) {
                          RespClient k(static_cast<std::uint16_t>(port));
                          const auto r = k.call({"CLUSTER", "INFO"});
                          if (!r || r->type != '$' || r->str.find("cluster_state:ok") == std::string_view::npos ||
                              r->str.find("cluster_known_nodes:3") == std::string_view::npos) {
                            return false;
                          }
                        }
                        return true;
                      },
                      std::chrono::seconds(30), std::chrono::milliseconds(50));
  if (!ok) {
    fmt::print(stderr, "redis-cli --cluster create did not make a cluster ({})\n", cli);
    return std::nullopt;
  }
  return c;
}

// ---- the subscribers -----------------------------------------------------------

// Payload: send time (ns), then sequence number; probes have kProbe set.
constexpr std::size_t kStampBytes = 2 * sizeof(std::int64_t);
constexpr std::uint64_t kProbe = std::uint64_t{1} << 63;

// The size of the RESP2 value (an array of bulk strings and integers, or a
// scalar) at the front of `p`: 0 if incomplete, SIZE_MAX if not RESP. How a
// frame other than the run's messages (a loss notice) is stepped over.
std::size_t resp_value_size(const char* p, std::size_t n) {
  const auto line = [&](std::size_t at) -> std::size_t {  // end of the line at `at`, past "\r\n"; 0: incomplete
    const void* cr = at < n ? std::memchr(p + at, '\r', n - at) : nullptr;
    if (cr == nullptr) return 0;
    const auto end = static_cast<std::size_t>(static_cast<const char*>(cr) - p) + 2;
    return end <= n ? end : 0;
  };
  const auto scalar = [&](std::size_t at) -> std::size_t {
    const std::size_t end = line(at);
    if (end == 0) return 0;
    if (p[at] != '$') return (p[at] == ':' || p[at] == '+' || p[at] == '-') ? end : SIZE_MAX;
    const long long len = std::atoll(p + at + 1);
    if (len < 0) return end;
    const std::size_t total = end + static_cast<std::size_t>(len) + 2;
    return total <= n ? total : 0;
  };
  if (n == 0) return 0;
  if (p[0] != '*') return scalar(0);
  std::size_t at = line(0);
  if (at == 0) return 0;
  for (long long i = std::atoll(p + 1); i > 0; --i) {
    const std::size_t end = scalar(at);
    if (end == 0 || end == SIZE_MAX) return end;
    at = end;
  }
  return at;
}

// One subscriber connection and what it saw. The reader thread alone writes
// every field; the atomics are also read by the main thread while it runs
// (relaxed: progress counters), the rest after the reader is joined.
struct Sub {
  int fd = -1;
  bool remote = false;  // on another node than the publisher
  std::string buf;
  std::atomic<std::uint64_t> received{0};  // the run's messages, however ordered
  std::atomic<bool> probed{false};
  std::atomic<bool> closed{false};
  std::uint64_t next = 0;        // the sequence number expected next
  std::uint64_t disordered = 0;  // messages below `next` (late after a skip, or twice)
  std::uint64_t late = 0;        // arrived after the publisher stopped
  std::uint64_t other = 0;       // frames that are not the run's messages (loss notices)
};

struct Result {
  // Deliveries per second from the first publish to the last delivery (the
  // drain included: a cluster that acknowledges publishes before delivering
  // them is not credited for what it still owes).
  double delivered_per_s = 0;
  double offered_per_s = 0;  // published x subscribers, per second
  double per_cpu_s = 0;      // deliveries per CPU-second of the cluster's processes
  double client_cpu = 0;     // this harness's CPU-seconds per second (1 = a core): is the client the limit?
  std::uint64_t published = 0;
  std::uint64_t late_local = 0, late_remote = 0;        // arrived after the publisher stopped
  std::uint64_t missing_local = 0, missing_remote = 0;  // published - received, after the drain
  std::uint64_t disordered = 0;
  std::uint64_t closed = 0;
  std::uint64_t closed_for_buffer = 0;  // redis: clients its log says it closed for the output-buffer limit
  std::uint64_t other_frames = 0;
  double drain_ms = -1;                  // publisher stopped to last delivery; -1: not all arrived
  long long cluster_lost = -1;           // ringcast: INFO cluster_lost over the measured phase
  long long probe_phase_lost = -1;       // ringcast: cluster_lost while interest crossed the routes
  double probe_ms = 0;                   // first probe to every subscriber having one
  LatencyHistogram local_ns, remote_ns;  // latency mode
  std::string error;
};

// What redis-server logs when it closes a client for its output-buffer limit
// (client-output-buffer-limit pubsub 32mb 8mb 60 by default).
constexpr std::string_view kOutputBufferClose = "closed ASAP for overcoming of output buffer limits";

struct Options {
  int subscribers = 99;
  double seconds = 3;
  std::size_t window = 64;
  double rate = 0;  // > 0: latency mode
};

Result run(const Cluster& cluster, const Options& o, std::size_t payload, int round) {
  Result r;
  const std::string ch = fmt::format("bench-{}-{}", payload, round);  // fresh per run: no state carried over
  const std::string frame = ringcast::test::resp_message(ch, std::string(payload, 'p'));
  const std::size_t ts_off = ringcast::test::resp_message_payload_offset(ch, payload);
  const std::string_view header(frame.data(), ts_off);
  const bool latency_mode = o.rate > 0;

  std::vector<std::unique_ptr<Sub>> subs;
  auto close_all = [&] {
    for (auto& s : subs) {
      if (s->fd >= 0) ::close(s->fd);
    }
  };
  for (std::size_t i = 0; i < static_cast<std::size_t>(o.subscribers); ++i) {
    auto s = std::make_unique<Sub>();
    s->remote = i % kNodes != 0;
    RespClient c(static_cast<std::uint16_t>(cluster.ports[i % kNodes]));
    if (c.ok() && c.subscribe(ch)) s->fd = c.release();
    if (s->fd < 0) {
      close_all();
      r.error = fmt::format("{}: subscriber {} could not subscribe", cluster.name, i);
      return r;
    }
    ::fcntl(s->fd, F_SETFL, O_NONBLOCK);
    subs.push_back(std::move(s));
  }
  const int pub = ringcast::test::connect_loopback(cluster.ports[0]);
  if (pub < 0) {
    close_all();
    r.error = cluster.name + ": the publisher could not connect";
    return r;
  }
  ::fcntl(pub, F_SETFL, O_NONBLOCK);

  std::atomic<bool> stop_reader{false};
  std::atomic<bool> publisher_done{false};
  std::thread reader([&] {
    EpollSet ep(subs.size(), [&](std::size_t i) { return subs[i]->fd; });
    std::vector<epoll_event> evs(256);
    std::vector<char> tmp(1 << 17);
    // relaxed: a stop flag.
    while (!stop_reader.load(std::memory_order_relaxed)) {
      const int n = ep.wait(evs, 20);
      // relaxed: set once by the publisher; a delivery read just after it is
      // counted on time, which errs in neither system's favour.
      const bool done = publisher_done.load(std::memory_order_relaxed);
      for (int k = 0; k < n; ++k) {
        Sub& s = *subs[evs[static_cast<std::size_t>(k)].data.u64];
        const ssize_t got = ::read(s.fd, tmp.data(), tmp.size());
        const std::int64_t t = latency_mode ? now_ns() : 0;
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          s.closed.store(true, std::memory_order_relaxed);  // relaxed: a flag, read after the join too
          ep.remove(s.fd);
          continue;
        }
        if (got < 0) continue;
        s.buf.append(tmp.data(), static_cast<std::size_t>(got));
        std::size_t pos = 0;
        std::uint64_t measured = 0;
        for (;;) {
          const std::size_t avail = s.buf.size() - pos;
          const char* p = s.buf.data() + pos;
          if (avail >= frame.size() && std::memcmp(p, header.data(), header.size()) == 0) {
            std::int64_t sent = 0;
            std::uint64_t seq = 0;
            std::memcpy(&sent, p + ts_off, sizeof sent);
            std::memcpy(&seq, p + ts_off + sizeof sent, sizeof seq);
            pos += frame.size();
            if ((seq & kProbe) != 0) {
              s.probed.store(true, std::memory_order_relaxed);  // relaxed: a flag
              continue;
            }
            if (seq == s.next) {
              ++s.next;
            } else if (seq > s.next) {  // a gap: counted as missing at the end, unless it comes later
              s.next = seq + 1;
            } else {
              ++s.disordered;
            }
            ++measured;
            if (done) ++s.late;
            if (latency_mode) (s.remote ? r.remote_ns : r.local_ns).record(static_cast<std::uint64_t>(t - sent));
            continue;
          }
          const std::size_t size = resp_value_size(p, avail);
          if (size == 0) break;
          if (size == SIZE_MAX) {  // not RESP: count the rest as lost
            s.closed.store(true, std::memory_order_relaxed);
            ep.remove(s.fd);
            pos = s.buf.size();
            break;
          }
          ++s.other;
          pos += size;
        }
        s.buf.erase(0, pos);
        s.received.fetch_add(measured, std::memory_order_relaxed);  // relaxed: a progress counter
      }
    }
  });

  char sink[1 << 16];
  std::uint64_t replies = 0;
  auto count_replies = [&] {  // one line per PUBLISH reply (":n" or an error)
    for (ssize_t n; (n = ::read(pub, sink, sizeof sink)) > 0;) {
      replies += static_cast<std::uint64_t>(std::count(sink, sink + n, '\n'));
    }
  };
  std::string payload_bytes(payload, 'p');
  std::string out;
  auto append_publish = [&](std::uint64_t seq) {
    const std::int64_t t = now_ns();
    std::memcpy(payload_bytes.data(), &t, sizeof t);
    std::memcpy(payload_bytes.data() + sizeof t, &seq, sizeof seq);
    append_resp_command(out, {"PUBLISH", ch, payload_bytes});
  };
  auto all = [&](auto pred) { return std::all_of(subs.begin(), subs.end(), [&](const auto& s) { return pred(*s); }); };

  // Probes until every subscriber has one: interest has crossed every route.
  const auto probe_t0 = Clock::now();
  const long long lost_before_probes = cluster.ringcast ? cluster_counter(cluster, "cluster_lost") : -1;
  std::uint64_t probes = 0;
  bool probed = false;
  while (!(probed = all([](const Sub& s) { return s.probed.load(std::memory_order_relaxed); })) &&
         Clock::now() - probe_t0 < std::chrono::seconds(20)) {
    out.clear();
    append_publish(kProbe | probes++);
    ringcast::test::send_all(pub, out);
    count_replies();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  r.probe_ms = std::chrono::duration<double, std::milli>(Clock::now() - probe_t0).count();
  if (!probed) r.error = cluster.name + ": some subscriber never saw a probe in 20 s";
  // The probes' replies, so the window below starts empty.
  eventually(
      [&] {
        count_replies();
        return replies >= probes;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(1));
  replies -= probes;
  const long long lost0 = cluster.ringcast ? cluster_counter(cluster, "cluster_lost") : -1;
  if (cluster.ringcast) r.probe_phase_lost = lost0 - lost_before_probes;

  const double cpu0 = cluster.cpu_seconds_total();
  const std::uint64_t buffer_closes0 = cluster.count_in_logs(kOutputBufferClose);
  const std::uint64_t client_cpu0 = process_cpu_ns();
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(o.seconds);
  std::uint64_t& published = r.published;
  if (!probed) {
    // nothing measured
  } else if (!latency_mode) {
    while (Clock::now() < end) {
      count_replies();
      if (published - replies >= o.window) {
        pollfd p{pub, POLLIN, 0};
        ::poll(&p, 1, 1);
        continue;
      }
      out.clear();
      const std::uint64_t room = std::min<std::uint64_t>(o.window - (published - replies), 32);
      for (std::uint64_t i = 0; i < room; ++i) append_publish(published++);
      ringcast::test::send_all(pub, out);
    }
  } else {
    const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / o.rate));
    auto next = t0;
    while (Clock::now() < end) {
      std::this_thread::sleep_until(next);
      out.clear();
      // Catch up if the sleep overslept, so the offered rate holds on average.
      while (next <= Clock::now() && out.size() < (1u << 20)) {
        append_publish(published++);
        next += interval;
      }
      ringcast::test::send_all(pub, out);
      count_replies();
    }
  }
  const auto t_end = Clock::now();
  publisher_done.store(true, std::memory_order_relaxed);  // relaxed: read by the reader as a flag

  // Drain: until every subscriber has every message, or nothing has arrived
  // for 3 s (what is still missing then is reported missing).
  auto total = [&] {
    std::uint64_t n = 0;
    for (const auto& s : subs) n += s->received.load(std::memory_order_relaxed);
    return n;
  };
  std::uint64_t last_total = total();
  auto last_progress = Clock::now();
  bool complete = false;
  while (!(complete = all([&](const Sub& s) { return s.received.load(std::memory_order_relaxed) >= published; })) &&
         Clock::now() - last_progress < std::chrono::seconds(3)) {
    count_replies();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const std::uint64_t t = total(); t != last_total) {
      last_total = t;
      last_progress = Clock::now();
    }
  }
  const auto t_last = complete ? Clock::now() : last_progress;
  if (complete) r.drain_ms = std::chrono::duration<double, std::milli>(t_last - t_end).count();
  const double cpu1 = cluster.cpu_seconds_total();
  const std::uint64_t client_cpu1 = process_cpu_ns();
  stop_reader.store(true, std::memory_order_relaxed);
  reader.join();

  std::uint64_t delivered = 0;
  for (const auto& s : subs) {
    const std::uint64_t got = s->received.load(std::memory_order_relaxed);
    delivered += got;
    (s->remote ? r.late_remote : r.late_local) += s->late;
    (s->remote ? r.missing_remote : r.missing_local) += published > got ? published - got : 0;
    r.disordered += s->disordered;
    r.closed += s->closed.load(std::memory_order_relaxed) ? 1U : 0U;
    r.other_frames += s->other;
  }
  const double secs = std::chrono::duration<double>(t_last - t0).count();
  r.delivered_per_s = static_cast<double>(delivered) / secs;
  r.offered_per_s = static_cast<double>(published) * static_cast<double>(o.subscribers) /
                    std::chrono::duration<double>(t_end - t0).count();
  r.client_cpu = static_cast<double>(client_cpu1 - client_cpu0) / 1e9 / secs;
  r.per_cpu_s = cpu1 > cpu0 ? static_cast<double>(delivered) / (cpu1 - cpu0) : 0;
  r.closed_for_buffer = cluster.count_in_logs(kOutputBufferClose) - buffer_closes0;
  if (cluster.ringcast) r.cluster_lost = cluster_counter(cluster, "cluster_lost") - lost0;
  close_all();
  ::close(pub);
  return r;
}

std::string drain(double ms) { return ms < 0 ? "incomplete" : fmt::format("{:.0f} ms", ms); }
std::string lost(long long n) { return n < 0 ? "-" : std::to_string(n); }

void print_throughput(std::size_t payload, const std::vector<std::vector<Result>>& runs, const Options& o) {
  const std::vector<std::string> names{"ringcast", "redis"};
  fmt::print(
      "\n## {} B payload: {} subscribers over {} nodes, publisher on node 1, window {}, {:.0f} s, medians of {}\n\n",
      payload, o.subscribers, kNodes, o.window, o.seconds, runs[0].size());
  fmt::print(
      "| cluster | deliveries/s | published x subs/s | deliveries/CPU-s | client CPU | late (other nodes / node 1) | "
      "missing (other / node 1) | out of order | closed (for output buffer) | drained in | cluster_lost (probe phase) "
      "| other frames (loss notices) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::vector<double> medians;
  for (std::size_t c = 0; c < runs.size(); ++c) {
    const Result m =
        median_by(runs[c], [](const Result& a, const Result& b) { return a.delivered_per_s < b.delivered_per_s; });
    medians.push_back(m.delivered_per_s);
    fmt::print("| {} | {} | {} | {} | {:.2f} | {} / {} | {} / {} | {} | {} ({}) | {} | {} ({}) | {} |\n", names[c],
               si(m.delivered_per_s), si(m.offered_per_s), si(m.per_cpu_s), m.client_cpu, m.late_remote, m.late_local,
               m.missing_remote, m.missing_local, m.disordered, m.closed, m.closed_for_buffer, drain(m.drain_ms),
               lost(m.cluster_lost), lost(m.probe_phase_lost), m.other_frames);
  }
  if (medians.size() == 2 && medians[1] > 0) {
    int won = 0;
    for (std::size_t i = 0; i < runs[0].size(); ++i)
      won += runs[0][i].delivered_per_s >= 2 * runs[1][i].delivered_per_s;
    fmt::print("\nringcast / redis deliveries/s: {:.2f}x (target >= 2x; >= 2x in {} of {} round pairs)\n",
               medians[0] / medians[1], won, runs[0].size());
  }
  fmt::print("rounds (deliveries/s):");
  for (std::size_t c = 0; c < runs.size(); ++c) {
    fmt::print(" {}", names[c]);
    for (const auto& r : runs[c]) fmt::print(" {}", si(r.delivered_per_s));
    fmt::print(";");
  }
  fmt::print("\n");
}

void print_latency(const std::vector<std::vector<Result>>& runs, const Options& o) {
  const std::vector<std::string> names{"ringcast", "redis"};
  fmt::print("\n## Latency: {:.0f} msgs/s, 52 B, {} subscribers, {:.0f} s, all rounds merged\n\n", o.rate,
             o.subscribers, o.seconds);
  fmt::print(
      "| cluster | other nodes p50 | p99 | node 1 p50 | p99 | missing | out of order | cluster_lost |\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (std::size_t c = 0; c < runs.size(); ++c) {
    LatencyHistogram remote, local;
    std::uint64_t missing = 0, disordered = 0;
    long long cl = 0;
    for (const auto& r : runs[c]) {
      remote.merge(r.remote_ns);
      local.merge(r.local_ns);
      missing += r.missing_remote + r.missing_local;
      disordered += r.disordered;
      cl = r.cluster_lost < 0 ? -1 : cl + r.cluster_lost;
    }
    const auto us = [](std::uint64_t ns) { return fmt::format("{:.0f} us", static_cast<double>(ns) / 1000.0); };
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} |\n", names[c], us(remote.percentile(0.5)),
               us(remote.percentile(0.99)), us(local.percentile(0.5)), us(local.percentile(0.99)), missing, disordered,
               lost(cl));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcast-cluster-fanout-bench: 3 ringcast-broker nodes (--cluster, each on its own nats-server, the servers "
      "joined by routes) vs a 3-node Redis Cluster; one pipelining publisher on node 1, subscribers round-robin over "
      "the nodes, one channel; deliveries/s, order and loss checked per subscriber, and cross-node latency"};
  std::string broker = kDefaultBrokerExe;
  std::string nats = "/usr/sbin/nats-server";
  std::string redis = "/usr/bin/redis-server";
  std::string redis_cli = "/usr/bin/redis-cli";
  unsigned io_threads = 1;
  Options o;
  std::vector<std::size_t> payloads{52, 1024};
  int rounds = 3;
  double rate = 10000;
  app.add_option("--broker", broker, "ringcast-broker executable")->capture_default_str();
  app.add_option("--nats", nats, "nats-server executable")->capture_default_str();
  app.add_option("--redis", redis, "redis-server executable")->capture_default_str();
  app.add_option("--redis-cli", redis_cli, "redis-cli executable (creates the Redis Cluster)")->capture_default_str();
  app.add_option("--io-threads", io_threads, "ringcast-broker I/O threads per node (redis-server: 1)")
      ->capture_default_str();
  app.add_option("--subscribers", o.subscribers, "Subscribers, subscriber i on node i % 3")->capture_default_str();
  app.add_option("--seconds", o.seconds, "Measured seconds per run")->capture_default_str();
  app.add_option("--window", o.window, "Most PUBLISH replies the publisher leaves outstanding")->capture_default_str();
  app.add_option("--payloads", payloads, "Payload sizes in bytes (>= 16)")->delimiter(',')->capture_default_str();
  app.add_option("--rounds", rounds, "Alternated run pairs per case")->capture_default_str();
  app.add_option("--latency-rate", rate, "Latency case: msgs/s at 52 B (0: skip it)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  for (const std::size_t p : payloads) {
    if (p < kStampBytes) {
      fmt::print(stderr, "--payloads: {} B is below the {} B stamp\n", p, kStampBytes);
      return 2;
    }
  }
  raise_fd_limit();
  ::signal(SIGPIPE, SIG_IGN);

  ringcast::test::TempDir dir;
  progress("starting 3 nats-servers (routes) and 3 ringcast-broker nodes");
  auto rc = start_ringcast(broker, nats, io_threads);
  progress("starting 3 redis-servers and creating the Redis Cluster in " + dir.path());
  auto rd = start_redis(redis, redis_cli, dir.path());
  if (!rc || !rd) return 1;
  progress(fmt::format("load average {}", load_average()));

  bool failed = false;
  auto contestant = [&](const Cluster& c, const Options& opt, std::size_t payload, int& round) {
    return [&c, opt, payload, &round, &failed] {
      progress(fmt::format("{} {} B round {}{}", c.name, payload, round / 2 + 1, opt.rate > 0 ? " (latency)" : ""));
      Result r = run(c, opt, payload, round++);
      if (!r.error.empty()) {
        fmt::print(stderr, "{}\n", r.error);
        failed = true;
      } else {
        progress(
            fmt::format("  {} deliveries/s of {} offered; late {}, missing {}, out of order {}, other frames {}, "
                        "probes took {:.0f} ms",
                        si(r.delivered_per_s), si(r.offered_per_s), r.late_remote + r.late_local,
                        r.missing_remote + r.missing_local, r.disordered, r.other_frames, r.probe_ms));
      }
      return r;
    };
  };
  fmt::print("# ringcast-cluster-fanout-bench\n\nload average at start: {}\n", load_average());
  int round = 0;
  for (const std::size_t payload : payloads) {
    const auto runs =
        alternate<Result>(rounds, {contestant(*rc, o, payload, round), contestant(*rd, o, payload, round)});
    print_throughput(payload, runs, o);
    std::fflush(stdout);
  }
  if (rate > 0) {
    Options lo = o;
    lo.rate = rate;
    const auto runs = alternate<Result>(rounds, {contestant(*rc, lo, 52, round), contestant(*rd, lo, 52, round)});
    print_latency(runs, lo);
  }
  fmt::print("\nload average at end: {}\n", load_average());
  progress("stopping both clusters");
  rc->stop();
  rd->stop();
  return failed ? 1 : 0;
}
