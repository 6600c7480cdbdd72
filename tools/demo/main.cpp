// ringcast-demo: the whole path on one host.
//
//   producer process -> ring (/dev/shm) -> consumer process A
//                                       -> consumer process B (deliberately slow)
//                                       -> relay (in this process, embedded broker)
//                                            -> TCP subscriber 1: redis-cli (if installed)
//                                            -> TCP subscriber 2: a built-in RESP client
//                                            (-> the live page, for whoever opens its URL)
//
// The parent prints each party's progress as it goes, then an accounting
// summary, and exits non-zero unless every party got every message, in order
// and intact.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "parse_flags.hpp"
#include <fmt/format.h>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/relay.hpp"

extern char** environ;

namespace {

using namespace ringcast;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kChannel = "ticks";
constexpr const char* kRedisCli = "/usr/bin/redis-cli";

// Payload: "<seq hex>-<~seq hex>" (33 printable bytes), so every party,
// redis-cli's text output included, can check order and integrity.
std::size_t encode(std::uint64_t seq, std::span<std::byte, kMaxPayload> out) {
  const std::string s = fmt::format("{:016x}-{:016x}", seq, ~seq);
  std::memcpy(out.data(), s.data(), s.size());
  return s.size();
}
std::optional<std::uint64_t> decode(std::string_view p) {
  if (p.size() != 33 || p[16] != '-') return std::nullopt;
  std::uint64_t seq = 0;
  std::uint64_t inv = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    const auto hex = [](char c) -> int {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int a = hex(p[i]);
    const int b = hex(p[17 + i]);
    if (a < 0 || b < 0) return std::nullopt;
    seq = seq << 4 | static_cast<std::uint64_t>(a);
    inv = inv << 4 | static_cast<std::uint64_t>(b);
  }
  if (inv != ~seq) return std::nullopt;
  return seq;
}

// Counts messages and checks that each is the next one, intact.
struct Tally {
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> bad{0};
  void add(std::string_view payload) {
    const auto seq = decode(payload);
    // relaxed: progress counters read by the display loop.
    const std::uint64_t n = received.load(std::memory_order_relaxed);
    if (!seq || *seq != n) bad.fetch_add(1, std::memory_order_relaxed);
    received.store(n + 1, std::memory_order_relaxed);
  }
};

// --- child roles ---------------------------------------------------------------

int run_producer(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "producer: {}\n", ring.error().message()), 1;
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  for (std::uint64_t seq = 0; seq < count; ++seq) {
    const std::size_t n = encode(seq, msg);
    if (const Errc e = ring->push_wait(std::span<const std::byte>(msg.data(), n), 60s, IdleStrategy::spin_then_yield);
        e != Errc::ok) {
      return fmt::print(stderr, "producer: push {}: {}\n", seq, to_string(e)), 1;
    }
  }
  return 0;
}

int run_consumer(const std::string& path, std::uint64_t count, int pause_us) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fmt::print(stderr, "consumer: {}\n", ring.error().message()), 1;
  auto id = ring->register_consumer();
  if (!id) return fmt::print(stderr, "consumer: {}\n", id.error().message()), 1;
  Tally tally;
  const auto check = [&](std::span<const std::byte> p) {
    tally.add(std::string_view(reinterpret_cast<const char*>(p.data()), p.size()));
  };
  while (tally.received.load(std::memory_order_relaxed) < count) {
    // The slow consumer takes small bites and naps between them.
    const BatchResult r = ring->drain(*id, check, pause_us > 0 ? 16 : 4096);
    if (r.count == 0) {
      if (r.status != Errc::empty && r.status != Errc::stalled) return 1;
      std::this_thread::yield();
    } else if (pause_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    }
  }
  return tally.bad.load(std::memory_order_relaxed) == 0 ? 0 : 1;
}

// Starts this executable with `args`. The demo has threads running by then, so
// the child calls only async-signal-safe functions before exec (argv is built
// first). It dies with the demo, however the demo ends (PR_SET_PDEATHSIG; if the
// demo died before prctl, getppid() has changed).
pid_t spawn_self(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

// --- TCP subscribers -------------------------------------------------------------

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads one RESP2 array of bulk strings from `buf` at `pos`; returns false if incomplete.
bool parse_array(const std::string& buf, std::size_t& pos, std::vector<std::string_view>& out) {
  out.clear();
  std::size_t p = pos;
  const auto line = [&](std::size_t& at) -> std::optional<std::string_view> {
    const auto eol = buf.find("\r\n", at);
    if (eol == std::string::npos) return std::nullopt;
    std::string_view l(buf.data() + at, eol - at);
    at = eol + 2;
    return l;
  };
  const auto head = line(p);
  if (!head || head->empty() || (*head)[0] != '*') return false;
  const long n = std::strtol(std::string(head->substr(1)).c_str(), nullptr, 10);
  for (long i = 0; i < n; ++i) {
    const auto h = line(p);
    if (!h || h->empty()) return false;
    if ((*h)[0] == ':') {
      out.push_back(h->substr(1));
      continue;
    }
    const auto len = static_cast<std::size_t>(std::strtol(std::string(h->substr(1)).c_str(), nullptr, 10));
    if (buf.size() < p + len + 2) return false;
    out.emplace_back(buf.data() + p, len);
    p += len + 2;
  }
  pos = p;
  return true;
}

// A built-in subscriber: SUBSCRIBE, then tally every message until `stop`.
class BuiltinSubscriber {
 public:
  bool start(std::uint16_t port) {
    fd_ = connect_loopback(port);
    if (fd_ < 0) return false;
    const std::string cmd = fmt::format("*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{}\r\n", std::strlen(kChannel), kChannel);
    if (::send(fd_, cmd.data(), cmd.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(cmd.size())) return false;
    thread_ = std::thread([this] { run(); });
    // The confirmation arrives before any message on the channel.
    const auto deadline = SteadyClock::now() + 10s;
    while (!subscribed_.load(std::memory_order_acquire) && SteadyClock::now() < deadline) std::this_thread::sleep_for(1ms);
    return subscribed_.load(std::memory_order_acquire);
  }
  void stop() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  ~BuiltinSubscriber() { stop(); }
  Tally tally;

 private:
  void run() {
    std::string buf;
    std::size_t pos = 0;
    std::vector<std::string_view> parts;
    char tmp[1 << 16];
    // relaxed: a stop flag.
    while (!stop_.load(std::memory_order_relaxed)) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return;
      buf.append(tmp, static_cast<std::size_t>(n));
      while (parse_array(buf, pos, parts)) {
        if (parts.size() == 3 && parts[0] == "message") {
          tally.add(parts[2]);
        } else if (parts.size() == 3 && parts[0] == "subscribe") {
          // release: pairs with the acquire load in start().
          subscribed_.store(true, std::memory_order_release);
        }
      }
      buf.erase(0, pos);
      pos = 0;
    }
  }
  int fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> subscribed_{false};
};

// redis-cli subscribe, its stdout on a pipe. Non-tty output prints each reply
// element on its own line: "message", channel, payload.
class RedisCliSubscriber {
 public:
  bool start(std::uint16_t port) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    const std::string p = std::to_string(port);
    std::vector<std::string> args{kRedisCli, "-p", p, "subscribe", kChannel};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, kRedisCli, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    fd_ = fds[0];
    if (rc != 0) {
      pid_ = -1;
      return false;
    }
    thread_ = std::thread([this] { run(); });
    const auto deadline = SteadyClock::now() + 10s;
    while (!subscribed_.load(std::memory_order_acquire) && SteadyClock::now() < deadline) std::this_thread::sleep_for(1ms);
    return subscribed_.load(std::memory_order_acquire);
  }
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (thread_.joinable()) thread_.join();  // ends at EOF on the pipe
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  ~RedisCliSubscriber() { stop(); }
  Tally tally;

 private:
  void run() {
    std::string buf;
    std::vector<std::string> group;
    char tmp[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n <= 0) return;
      buf.append(tmp, static_cast<std::size_t>(n));
      std::size_t start = 0;
      for (std::size_t eol; (eol = buf.find('\n', start)) != std::string::npos; start = eol + 1) {
        group.emplace_back(buf, start, eol - start);
        if (group.size() < 3) continue;
        if (group[0] == "message") {
          tally.add(group[2]);
        } else if (group[0] == "subscribe") {
          subscribed_.store(true, std::memory_order_release);  // release: pairs with start()
        }
        group.clear();
      }
      buf.erase(0, start);
    }
  }
  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread thread_;
  std::atomic<bool> subscribed_{false};
};

// --- the demo ----------------------------------------------------------------------

int run_demo(std::uint64_t count, std::uint64_t capacity, int slow_pause_us) {
  const std::string path = fmt::format("/dev/shm/ringcast-demo-{}.ring", ::getpid());
  auto ring = BroadcastRing::create(path, capacity, {.claim_producer = false});
  if (!ring) return fmt::print(stderr, "demo: {}\n", ring.error().message()), 1;
  fmt::print("ring {}: capacity {}, {} messages\n", path, capacity, count);
  fmt::print("  producer process -> ring -> consumer A, consumer B (slow), relay -> 2 TCP subscribers\n");

  // The relay, in this process: consumer entry 0, embedded broker on a free port.
  relay::RelayConfig rc;
  rc.rings.push_back({path, kChannel, false});
  broker::BrokerConfig bc;
  bc.port = 0;
  bc.io_threads = 1;
  bc.queue_limits.hard_bytes = 256u << 20;  // the whole run fits: accounting must be exact
  bc.queue_limits.soft_bytes = 0;
  bc.ws_port = 0;  // the live page (and WebSocket subscribers) on a free port
  rc.broker = bc;
  std::mutex log_mu;
  rc.log = [&log_mu](relay::LogLevel, std::string_view line) {
    std::lock_guard lock(log_mu);
    fmt::print("  [relay] {}\n", line);
  };
  auto started = relay::Relay::start(rc);
  if (!started) {
    ::unlink(path.c_str());
    return fmt::print(stderr, "demo: relay: {}\n", started.error().message()), 1;
  }
  relay::Relay& relay = **started;
  const std::uint16_t port = relay.broker()->port();
  while (ring->active_consumer_count() < 1) std::this_thread::sleep_for(1ms);
  fmt::print("  relay registered; broker listening on 127.0.0.1:{} (try: redis-cli -p {} subscribe {})\n", port, port,
             kChannel);
  fmt::print("  live page: http://127.0.0.1:{}/?channel={} (a longer run, --count 5000000, leaves time to open it)\n",
             relay.broker()->ws_port(), kChannel);

  RedisCliSubscriber cli;
  BuiltinSubscriber builtin_a;
  BuiltinSubscriber builtin_b;
  const bool have_cli = ::access(kRedisCli, X_OK) == 0;
  Tally* sub_tally[2] = {nullptr, &builtin_a.tally};
  std::string sub_name[2] = {"redis-cli", "built-in client"};
  bool subscribed = false;
  if (have_cli) {
    subscribed = cli.start(port) && builtin_a.start(port);
    sub_tally[0] = &cli.tally;
  } else {
    fmt::print("  ({} not installed: both TCP subscribers are built-in clients)\n", kRedisCli);
    subscribed = builtin_b.start(port) && builtin_a.start(port);
    sub_tally[0] = &builtin_b.tally;
    sub_name[0] = "built-in client";
  }
  if (!subscribed) {
    ::unlink(path.c_str());
    return fmt::print(stderr, "demo: a TCP subscriber could not subscribe\n"), 1;
  }

  std::vector<pid_t> consumers;
  const std::string n = std::to_string(count);
  for (int i = 0; i < 2; ++i) {
    const int pause = i == 1 ? slow_pause_us : 0;
    consumers.push_back(spawn_self({i == 1 ? "demo-slow" : "demo-fast", "--role", "consumer", "--ring", path, "--count", n, "--pause-us",
                                    std::to_string(pause)}));
    // Register in order: relay = entry 0, consumer A = 1, consumer B = 2.
    while (ring->active_consumer_count() < static_cast<std::size_t>(i + 2)) std::this_thread::sleep_for(1ms);
  }
  const auto start = SteadyClock::now();
  const pid_t producer = spawn_self({"demo-producer", "--role", "producer", "--ring", path, "--count", n});

  fmt::print("{:>7}  {:>9}  {:>21}  {:>21}  {:>21}  {:>10}  {:>10}\n", "time", "produced", "relay (taken / lag)",
             "consumer A", "consumer B (slow)", "TCP sub 1", "TCP sub 2");
  const auto deadline = start + std::chrono::seconds(60);
  bool timed_out = false;
  for (;;) {
    const RingStatus s = ring->status();
    const relay::RingStats rs = relay.ring_stats().at(0);
    std::string row = fmt::format("{:>6.1f}s  {:>9}  {:>11} / {:>7}",
                                  std::chrono::duration<double>(SteadyClock::now() - start).count(), s.producer_seq,
                                  rs.relayed, rs.lag);
    bool done = s.producer_seq == count && rs.relayed == count;
    for (std::uint32_t i = 1; i <= 2; ++i) {
      const ConsumerStatus& c = s.consumers[i];
      row += c.active ? fmt::format("  {:>11} / {:>7}", c.cursor, c.lag) : fmt::format("  {:>21}", "done");
      done = done && !c.active;
    }
    for (Tally* t : sub_tally) {
      const std::uint64_t got = t->received.load(std::memory_order_relaxed);
      row += fmt::format("  {:>10}", got);
      done = done && got >= count;
    }
    fmt::print("{}\n", row);
    if (done) break;
    if (SteadyClock::now() > deadline) {
      timed_out = true;
      break;
    }
    std::this_thread::sleep_for(250ms);
  }
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();

  int status = 0;
  if (timed_out) {
    ::kill(producer, SIGKILL);
    for (const pid_t c : consumers) ::kill(c, SIGKILL);
  }
  ::waitpid(producer, &status, 0);
  bool ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  fmt::print("\nsummary ({:.2f} s, {:.2f} M msgs/s end to end)\n", seconds, static_cast<double>(count) / seconds / 1e6);
  fmt::print("  producer                     pushed   {:>9}  {}\n", ring->producer_position(), ok ? "ok" : "FAILED");
  for (std::size_t i = 0; i < consumers.size(); ++i) {
    ::waitpid(consumers[i], &status, 0);
    const bool got_all = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    ok = ok && got_all;
    fmt::print("  consumer {}                   {}\n", i == 0 ? "A" : "B",
               got_all ? fmt::format("received {:>9}  all, in order, intact", count)
                       : std::string("MISSING OR DAMAGED MESSAGES"));
  }
  const relay::RingStats rs = relay.ring_stats().at(0);
  const broker::BrokerStats bs = relay.broker()->stats();
  const std::uint64_t drops = bs.dropped_hard_limit + bs.dropped_soft_limit + bs.dropped_disconnect;
  // Connections beyond the two TCP subscribers are someone watching (the
  // printed redis-cli command, the live page): their deliveries add to the
  // broker's count, and what they miss is theirs, so only the two are exact.
  const std::uint64_t watchers = bs.total_connections - 2;
  const bool relay_ok =
      rs.relayed == count && (watchers == 0 ? rs.deliveries == 2 * count && drops == 0 : rs.deliveries >= 2 * count);
  ok = ok && relay_ok;
  fmt::print("  relay                        relayed  {:>9}  broker deliveries {}, drops {}{}  {}\n", rs.relayed,
             rs.deliveries, drops, watchers == 0 ? "" : fmt::format(" ({} more connection{} watched)", watchers, watchers == 1 ? "" : "s"),
             relay_ok ? "ok" : "FAILED");
  for (int i = 0; i < 2; ++i) {
    const std::uint64_t got = sub_tally[i]->received.load(std::memory_order_relaxed);
    const std::uint64_t bad = sub_tally[i]->bad.load(std::memory_order_relaxed);
    const bool sub_ok = got == count && bad == 0;
    ok = ok && sub_ok;
    fmt::print("  TCP sub {} {:<18} received {:>9}  {}\n", i + 1, fmt::format("({})", sub_name[i]), got,
               sub_ok ? "all, in order, intact" : fmt::format("FAILED ({} out of order or damaged)", bad));
  }
  cli.stop();
  builtin_a.stop();
  builtin_b.stop();
  relay.stop();  // unregisters the relay's consumer (logged above)
  ring = BroadcastRing::open(path, {.read_only = true});  // drop our handle before removing
  ::unlink(path.c_str());
  fmt::print("{}; removed {}\n", ok ? "accounting ok: every party got every message" : "ACCOUNTING FAILED", path);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcast-demo: producer process -> ring -> 2 consumer processes + relay -> 2 TCP subscribers"};
  std::string role = "demo";
  std::string path;
  std::uint64_t count = 200'000;
  std::uint64_t capacity = 4096;
  int pause_us = 20;
  app.add_option("--count,-n", count, "Messages to publish")->capture_default_str();
  app.add_option("--capacity", capacity, "Ring capacity in slots")->capture_default_str();
  app.add_option("--pause-us", pause_us, "Slow consumer's nap after each 16 messages, microseconds")
      ->capture_default_str();
  app.add_option("--role", role, "Internal: demo, producer or consumer")->group("");
  app.add_option("--ring", path, "Internal: ring path for child roles")->group("");
  if (const auto exit_status = ringcast::tools::parse_flags(app, argc, argv)) return *exit_status;
  // A child runs this executable through /proc/self/exe, so the kernel names it
  // "exe"; its argv[0] is its role ("demo-producer", "demo-fast", "demo-slow"),
  // which becomes the name ring-top, top and ps -o comm show.
  if (role != "demo") ::prctl(PR_SET_NAME, argv[0]);
  if (role == "producer") return run_producer(path, count);
  if (role == "consumer") return run_consumer(path, count, pause_us);
  ::signal(SIGPIPE, SIG_IGN);
  return run_demo(count, capacity, pause_us);
}
