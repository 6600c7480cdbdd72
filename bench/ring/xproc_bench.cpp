// ringcast_bench_xproc: the cross-process harness of issue 3.
//
// One producer process (this one) and N consumer processes (fork + exec of
// this same binary with --role consumer) move 52-byte messages through
//  * ringcast: a BroadcastRing file in /dev/shm (batch API: try_push_batch /
//    drain; single API: try_push / try_recv),
//  * zmq: ZeroMQ XPUB/SUB over ipc:// (XPUB so the producer can wait until
//    every subscription has arrived, XPUB_NODROP so nothing is dropped),
//  * boost: one Boost.Interprocess message_queue per consumer (it is not a
//    broadcast primitive, so the producer sends each message N times).
// Every consumer verifies every byte of every message (bench/ring/workload.hpp)
// and the run fails if one does not verify or arrive.
//
// Two modes:
//  * saturation: the producer sends as fast as the transport takes messages;
//    throughput = messages / (last consumer's last receive - first send). The
//    payload carries the time its batch of 32 was built; consumers sample the
//    latency of one message in --sample-every.
//  * rate: open loop at --rate messages/s. Message i carries its intended send
//    time t0 + i/rate, and the producer never waits for anything but that
//    time, so a stall on either side shows up in the latency of every
//    message it delayed (no coordinated omission). Every message's latency is
//    recorded.
// Output: a short table on stdout and, with --json, every run with its
// latency percentiles and histogram (tools/plot-latency.sh plots it).
#include <signal.h>
#include <unistd.h>
#include <zmq.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/interprocess/ipc/message_queue.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "child_process.hpp"
#include "deadline.hpp"
#include "histogram.hpp"
#include "process_report.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "sched_slice.hpp"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

namespace bip = boost::interprocess;

constexpr std::size_t kPushBatch = 32;    // messages built (and stamped) together
constexpr std::size_t kDrainMax = 256;    // drain() budget per call
constexpr int kReportFd = STDOUT_FILENO;  // consumer -> harness: a pipe the harness reads

enum class Transport { kRingcast, kZmq, kBoost };
enum class Api { kBatch, kSingle };
enum class Mode { kSaturation, kRate };

const char* name(Transport t) {
  return t == Transport::kRingcast ? "ringcast" : t == Transport::kZmq ? "zmq" : "boost";
}
const char* name(Api a) { return a == Api::kBatch ? "batch" : "single"; }
const char* name(Mode m) { return m == Mode::kSaturation ? "saturation" : "rate"; }
const char* name(Idle i) { return i == Idle::kSpin ? "spin" : i == Idle::kYield ? "yield" : "block"; }
constexpr auto kWaitTimeout = std::chrono::seconds(1);  // recv_wait/push_wait slice (block mode)

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ringcast_bench_xproc: %s\n", what.c_str());
  std::exit(2);
}

// What one consumer sends back through its pipe: plain bytes, after the 'R'
// that says it has attached.
struct ConsumerReport {
  std::uint64_t received = 0;
  std::uint64_t bad = 0;  // messages that did not verify
  std::uint64_t first_bad_seq = 0;
  std::uint64_t first_ns = 0;  // CLOCK_MONOTONIC at the first receive
  std::uint64_t last_ns = 0;   // ... and at the last
  std::uint64_t stalls = 0;    // ringcast: receives that returned stalled (retried)
  std::uint64_t cpu_ns = 0;    // user + system CPU time of the consumer process
  LatencyHistogram latency;
};
static_assert(std::is_trivially_copyable_v<ConsumerReport>, "sent as bytes");

// Names of the shared resources of one run (unique per harness pid and run).
struct Names {
  std::string ring_path, zmq_endpoint, zmq_path, queue_prefix;
  static Names make(long pid, int run) {
    Names n;
    const std::string tag = fmt::format("ringcast-bench-{}-{}", pid, run);
    n.ring_path = "/dev/shm/" + tag;
    n.zmq_path = "/tmp/" + tag + ".ipc";
    n.zmq_endpoint = "ipc://" + n.zmq_path;
    n.queue_prefix = tag + "-q";
    return n;
  }
  [[nodiscard]] std::string queue(int i) const { return fmt::format("{}{}", queue_prefix, i); }
};

// ===========================================================================
// Consumer process
// ===========================================================================

struct ConsumerArgs {
  Transport transport = Transport::kRingcast;
  Api api = Api::kBatch;
  Mode mode = Mode::kSaturation;
  Idle idle = Idle::kSpin;
  std::uint64_t messages = 0;
  std::uint64_t sample_every = 64;
  std::uint64_t capacity = 4096;
  int index = 0;
  int cpu = -1;
  std::int64_t slice_us = 0;  // ringcast: set_waiter_slice; peers: their thread's slice if > 0
  Names names;
};

// Verifies and records one message; returns true when the run is complete.
class Receiver {
 public:
  Receiver(const ConsumerArgs& a, ConsumerReport& r) : a_(a), r_(r) {}
  bool on_message(std::span<const std::byte> m) noexcept {
    if (r_.received == 0) r_.first_ns = monotonic_ns();
    if (!verify_message(m, expected_)) [[unlikely]] {
      if (r_.bad++ == 0) r_.first_bad_seq = expected_;
      expected_ = m.size() >= 8 ? message_seq(m) : expected_;
    }
    if (a_.mode == Mode::kRate || expected_ % a_.sample_every == 0) {
      const std::uint64_t now = monotonic_ns();
      const std::uint64_t stamp = message_stamp(m);
      r_.latency.record(now > stamp ? now - stamp : 0);
    }
    ++expected_;
    ++r_.received;
    if (r_.received == a_.messages) {
      r_.last_ns = monotonic_ns();
      return true;
    }
    return false;
  }

 private:
  const ConsumerArgs& a_;
  ConsumerReport& r_;
  std::uint64_t expected_ = 0;
};

void signal_ready() {
  const char ready = 'R';
  if (!write_all(kReportFd, &ready, 1)) fail("consumer: ready pipe");
}

void consume_ringcast(const ConsumerArgs& a, ConsumerReport& report) {
  auto ring = BroadcastRing::open(a.names.ring_path);
  if (!ring) fail("consumer: open " + a.names.ring_path + ": " + ring.error().message());
  ring->set_waiter_slice(std::chrono::microseconds(a.slice_us));
  auto id = ring->register_consumer();
  if (!id) fail("consumer: register_consumer: " + id.error().message());
  signal_ready();
  Receiver rx(a, report);
  Backoff backoff(a.idle);
  bool done = false;
  alignas(8) std::array<std::byte, kMaxPayload> out{};
  while (!done) {
    if (a.idle == Idle::kBlock) {
      // Drain what is there; when nothing is, sleep on the futex for the next one.
      if (a.api == Api::kBatch) {
        const BatchResult r = ring->drain(
            *id, [&](std::span<const std::byte> m) noexcept { done = rx.on_message(m) || done; }, kDrainMax);
        if (r.count != 0 || done) continue;
      }
      const RecvResult r = ring->recv_wait(*id, out, {kWaitTimeout, IdleStrategy::kSpinThenBlock});
      if (r.status == Errc::ok) {
        done = rx.on_message(std::span<const std::byte>(out.data(), r.length));
      } else if (r.status == Errc::stalled) {
        ++report.stalls;
      } else if (r.status != Errc::timed_out && r.status != Errc::empty) {
        fail(fmt::format("consumer: recv_wait: {}", to_string(r.status)));
      }
      continue;
    }
    if (a.api == Api::kBatch) {
      const BatchResult r = ring->drain(
          *id, [&](std::span<const std::byte> m) noexcept { done = rx.on_message(m) || done; }, kDrainMax);
      if (r.count == 0) {
        // stalled: the producer was preempted between the odd and the even
        // version store of a slot (common on a loaded 2-core machine); retry.
        if (r.status == Errc::stalled) ++report.stalls;
        else if (r.status != Errc::empty) fail(fmt::format("consumer: drain: {}", to_string(r.status)));
        backoff.pause();
      } else {
        backoff.reset();
      }
    } else {
      const RecvResult r = ring->try_recv(*id, out);
      if (r.status == Errc::ok) {
        done = rx.on_message(std::span<const std::byte>(out.data(), r.length));
        backoff.reset();
      } else if (r.status == Errc::empty || r.status == Errc::stalled) {
        if (r.status == Errc::stalled) ++report.stalls;
        backoff.pause();
      } else {
        fail(fmt::format("consumer: try_recv: {}", to_string(r.status)));
      }
    }
  }
}

void consume_zmq(const ConsumerArgs& a, ConsumerReport& report) {
  void* ctx = zmq_ctx_new();
  void* sub = zmq_socket(ctx, ZMQ_SUB);
  const int hwm = static_cast<int>(a.capacity);  // as the publisher's SNDHWM
  zmq_setsockopt(sub, ZMQ_RCVHWM, &hwm, sizeof hwm);
  if (zmq_connect(sub, a.names.zmq_endpoint.c_str()) != 0) fail(std::string("zmq_connect: ") + zmq_strerror(errno));
  zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
  signal_ready();
  Receiver rx(a, report);
  alignas(8) std::array<std::byte, 64> buf{};
  for (;;) {
    const int n = zmq_recv(sub, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(std::string("zmq_recv: ") + zmq_strerror(errno));
    }
    if (rx.on_message(std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)))) break;
  }
  zmq_close(sub);
  zmq_ctx_term(ctx);
}

void consume_boost(const ConsumerArgs& a, ConsumerReport& report) {
  bip::message_queue mq(bip::open_only, a.names.queue(a.index).c_str());
  signal_ready();
  Receiver rx(a, report);
  alignas(8) std::array<std::byte, kMessageBytes> buf{};
  for (;;) {
    bip::message_queue::size_type got = 0;
    unsigned priority = 0;
    mq.receive(buf.data(), buf.size(), got, priority);
    if (rx.on_message(std::span<const std::byte>(buf.data(), got))) break;
  }
}

int consumer_main(const ConsumerArgs& a) {
  if (!pin_to_cpu(a.cpu)) fail(fmt::format("consumer: cannot pin to cpu {}", a.cpu));
  // A peer's consumer given the slice ringcast's waits take (--peer-slice-us).
  if (a.transport != Transport::kRingcast) detail::cap_thread_slice(std::chrono::microseconds(a.slice_us));
  auto report = std::make_unique<ConsumerReport>();
  try {
    switch (a.transport) {
      case Transport::kRingcast:
        consume_ringcast(a, *report);
        break;
      case Transport::kZmq:
        consume_zmq(a, *report);
        break;
      case Transport::kBoost:
        consume_boost(a, *report);
        break;
    }
  } catch (const std::exception& e) {
    fail(std::string("consumer: ") + e.what());
  }
  report->cpu_ns = process_cpu_ns();
  return write_all(kReportFd, report.get(), sizeof *report) ? 0 : 3;
}

// ===========================================================================
// Harness (producer process)
// ===========================================================================

struct Scenario {
  Transport transport;
  Api api;
  Mode mode;
  int consumers;
  double rate;  // messages/s, rate mode
  std::uint64_t messages;
};

struct Options {
  std::vector<std::string> transports{"ringcast", "zmq", "boost"};
  std::vector<int> consumer_counts{1, 2, 4};
  std::vector<std::string> apis{"batch", "single"};
  std::vector<std::string> modes{"saturation", "rate"};
  std::uint64_t messages = 10'000'000;      // ringcast saturation runs
  std::uint64_t peer_messages = 1'000'000;  // zmq and boost saturation runs (an order slower)
  std::uint64_t rate_messages = 50'000;
  double rate_seconds = 0;  // > 0: rate runs send rate x this many messages
  std::vector<double> rates{100'000};
  std::uint64_t capacity = 4096;
  std::uint64_t sample_every = 64;
  int repetitions = 3;
  int producer_cpu = -1;
  std::vector<int> consumer_cpus;
  std::string idle = "auto";
  bool wakeups = false;                                        // create the ring with CreateOptions::wakeups
  std::int64_t waiter_slice_us = kDefaultWaiterSlice.count();  // ringcast handles' set_waiter_slice
  std::int64_t peer_slice_us = 0;                              // > 0: zmq/boost consumers' slice
  std::string json_path;
  int timeout_s = 600;
};

struct RunResult {
  Scenario s;
  int repetition = 0;
  Idle idle = Idle::kSpin;
  double seconds = 0;           // first send -> last consumer's last receive
  double producer_seconds = 0;  // first send -> last send returned
  std::uint64_t received = 0;   // over all consumers
  std::uint64_t bad = 0;
  std::uint64_t stalls = 0;     // ringcast receives that found a slot mid-write past the spin (retried)
  std::uint64_t full_hits = 0;  // send attempts that found the transport full
  std::uint64_t send_calls = 0;
  std::uint64_t consumer_cpu_ns = 0;  // over all consumers
  LatencyHistogram latency;
  // Mean CPU use of one consumer over the run, in % of one CPU.
  [[nodiscard]] double consumer_cpu_pct() const {
    return seconds > 0 && s.consumers > 0
               ? 100.0 * static_cast<double>(consumer_cpu_ns) * 1e-9 / (seconds * s.consumers)
               : 0.0;
  }
  [[nodiscard]] double msgs_per_sec() const { return static_cast<double>(s.messages) / seconds; }
};

// The watchdog: a stuck run ends the harness, and the consumers die with it
// (test::ChildProcess starts them with PR_SET_PDEATHSIG).
void on_alarm(int) {
  const char msg[] = "ringcast_bench_xproc: timeout, the consumers die with the harness\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(4);
}

// The producer side of one transport. send() returns once every message in
// `msgs` has been accepted, counting attempts that found the transport full.
class Producer {
 public:
  virtual ~Producer() = default;
  virtual void send(std::span<const Message> msgs) = 0;
  std::uint64_t full_hits = 0;
  std::uint64_t send_calls = 0;
};

class RingcastProducer final : public Producer {
 public:
  RingcastProducer(BroadcastRing& ring, Api api, Idle idle) : ring_(ring), api_(api), idle_(idle), backoff_(idle) {}
  void send(std::span<const Message> msgs) override {
    if (api_ == Api::kSingle) {
      for (const Message& m : msgs) {
        ++send_calls;
        if (ring_.try_push(m.span()) == Errc::ok) continue;
        ++full_hits;
        if (idle_ == Idle::kBlock) {
          wait_push(m);
          continue;
        }
        for (;;) {
          backoff_.pause();
          const Errc e = ring_.try_push(m.span());
          if (e == Errc::ok) break;
          if (e != Errc::full) fail(fmt::format("try_push: {}", to_string(e)));
        }
        backoff_.reset();
      }
      return;
    }
    std::array<std::span<const std::byte>, kPushBatch> spans;
    for (std::size_t done = 0; done < msgs.size();) {
      const std::size_t n = std::min(kPushBatch, msgs.size() - done);
      for (std::size_t i = 0; i < n; ++i) spans[i] = msgs[done + i].span();
      const BatchResult r = ring_.try_push_batch(std::span(spans.data(), n));
      ++send_calls;
      done += r.count;
      if (r.status == Errc::full) {
        ++full_hits;
        if (idle_ == Idle::kBlock) {
          wait_push(msgs[done]);  // sleeps until there is room, pushes one
          ++done;
        } else {
          backoff_.pause();
        }
      } else if (r.status != Errc::ok) {
        fail(fmt::format("try_push_batch: {}", to_string(r.status)));
      } else {
        backoff_.reset();
      }
    }
  }

 private:
  void wait_push(const Message& m) {
    for (;;) {
      const Errc e = ring_.push_wait(m.span(), {kWaitTimeout, IdleStrategy::kSpinThenBlock});
      if (e == Errc::ok) return;
      if (e != Errc::timed_out && e != Errc::full) fail(fmt::format("push_wait: {}", to_string(e)));
    }
  }

  BroadcastRing& ring_;
  Api api_;
  Idle idle_;
  Backoff backoff_;
};

class ZmqProducer final : public Producer {
 public:
  explicit ZmqProducer(void* socket) : socket_(socket) {}
  void send(std::span<const Message> msgs) override {
    for (const Message& m : msgs) {
      ++send_calls;
      bool counted = false;
      // XPUB_NODROP: EAGAIN when a subscriber's pipe is at its high-water mark.
      while (zmq_send(socket_, m.bytes, kMessageBytes, ZMQ_DONTWAIT) < 0) {
        if (errno != EAGAIN && errno != EINTR) fail(std::string("zmq_send: ") + zmq_strerror(errno));
        if (!counted) ++full_hits;
        counted = true;
        backoff_.pause();
      }
      backoff_.reset();
    }
  }

 private:
  void* socket_;
  Backoff backoff_{Idle::kYield};  // the I/O thread needs the core to drain
};

class BoostProducer final : public Producer {
 public:
  explicit BoostProducer(std::vector<std::unique_ptr<bip::message_queue>>& queues) : queues_(queues) {}
  void send(std::span<const Message> msgs) override {
    for (const Message& m : msgs) {
      for (auto& q : queues_) {
        ++send_calls;
        if (q->try_send(m.bytes, kMessageBytes, 0)) continue;
        ++full_hits;
        q->send(m.bytes, kMessageBytes, 0);  // blocks on the queue's condition variable
      }
    }
  }

 private:
  std::vector<std::unique_ptr<bip::message_queue>>& queues_;
};

RunResult run_one(const Options& o, const Scenario& s, int repetition, int run_index) {
  RunResult res;
  res.s = s;
  res.repetition = repetition;
  const unsigned busy = static_cast<unsigned>(s.consumers) + 1;
  res.idle = o.idle == "spin"                    ? Idle::kSpin
             : o.idle == "yield"                 ? Idle::kYield
             : o.idle == "block"                 ? Idle::kBlock
             : default_idle(busy) == Idle::kSpin ? Idle::kSpin
                                                 : Idle::kBlock;
  if (s.transport != Transport::kRingcast && res.idle == Idle::kBlock) res.idle = Idle::kYield;  // peers block anyway
  const Names names = Names::make(static_cast<long>(::getpid()), run_index);

  // --- the transport, created before any consumer attaches ---------------
  std::optional<BroadcastRing> ring;
  void* zctx = nullptr;
  void* zpub = nullptr;
  std::vector<std::unique_ptr<bip::message_queue>> queues;
  std::unique_ptr<Producer> producer;
  switch (s.transport) {
    case Transport::kRingcast: {
      CreateOptions co;
      co.replace = true;
      co.wakeups = o.wakeups;  // blocking works without it (membarrier); see docs/memory-ordering.md
      auto r = BroadcastRing::create(names.ring_path, o.capacity, co);
      if (!r) fail("create " + names.ring_path + ": " + r.error().message());
      ring.emplace(std::move(*r));
      ring->set_waiter_slice(std::chrono::microseconds(o.waiter_slice_us));
      producer = std::make_unique<RingcastProducer>(*ring, s.api, res.idle);
      break;
    }
    case Transport::kZmq: {
      zctx = zmq_ctx_new();
      zpub = zmq_socket(zctx, ZMQ_XPUB);
      const int one = 1;
      const int hwm = static_cast<int>(o.capacity);
      const int timeout_ms = 10'000;
      zmq_setsockopt(zpub, ZMQ_SNDHWM, &hwm, sizeof hwm);
      zmq_setsockopt(zpub, ZMQ_XPUB_NODROP, &one, sizeof one);
      zmq_setsockopt(zpub, ZMQ_XPUB_VERBOSE, &one, sizeof one);
      zmq_setsockopt(zpub, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
      if (zmq_bind(zpub, names.zmq_endpoint.c_str()) != 0) fail(std::string("zmq_bind: ") + zmq_strerror(errno));
      producer = std::make_unique<ZmqProducer>(zpub);
      break;
    }
    case Transport::kBoost:
      for (int i = 0; i < s.consumers; ++i) {
        bip::message_queue::remove(names.queue(i).c_str());
        queues.push_back(
            std::make_unique<bip::message_queue>(bip::create_only, names.queue(i).c_str(), o.capacity, kMessageBytes));
      }
      producer = std::make_unique<BoostProducer>(queues);
      break;
  }

  // --- consumers -----------------------------------------------------------
  // Each consumer is this binary again, its stdout a pipe (kReportFd) and its
  // stderr ours.
  const std::optional<std::string> self = self_exe();
  if (!self) fail("readlink /proc/self/exe");
  const std::string& exe = *self;
  std::vector<test::ChildProcess> children;
  for (int i = 0; i < s.consumers; ++i) {
    const int cpu =
        o.consumer_cpus.empty() ? -1 : o.consumer_cpus[static_cast<std::size_t>(i) % o.consumer_cpus.size()];
    const std::string slice_us =
        std::to_string(s.transport == Transport::kRingcast ? o.waiter_slice_us : o.peer_slice_us);
    children.push_back(test::ChildProcess::spawn({exe,
                                                  "--role",
                                                  "consumer",
                                                  "--transport",
                                                  name(s.transport),
                                                  "--api",
                                                  name(s.api),
                                                  "--mode",
                                                  name(s.mode),
                                                  "--idle",
                                                  name(res.idle),
                                                  "--messages",
                                                  std::to_string(s.messages),
                                                  "--sample-every",
                                                  std::to_string(o.sample_every),
                                                  "--capacity",
                                                  std::to_string(o.capacity),
                                                  "--index",
                                                  std::to_string(i),
                                                  "--cpu",
                                                  std::to_string(cpu),
                                                  "--slice-us",
                                                  slice_us,
                                                  "--ring-path",
                                                  names.ring_path,
                                                  "--zmq-endpoint",
                                                  names.zmq_endpoint,
                                                  "--queue-prefix",
                                                  names.queue_prefix},
                                                 {.out = test::Stream::kPipe, .err = test::Stream::kInherit}));
    if (!children.back().running()) fail("cannot start a consumer: " + exe);
  }
  ::alarm(static_cast<unsigned>(o.timeout_s));
  const test::Deadline deadline = test::deadline_in(std::chrono::seconds(o.timeout_s));  // the alarm comes first
  for (test::ChildProcess& c : children) {
    if (!c.read_stdout_until("R", deadline)) fail("a consumer failed to attach (see its message above)");
  }
  if (s.transport == Transport::kZmq) {
    // One subscription message per subscriber (XPUB_VERBOSE): after these,
    // nothing the producer sends can be lost to the slow-joiner race.
    for (int i = 0; i < s.consumers; ++i) {
      std::array<char, 16> sub{};
      if (zmq_recv(zpub, sub.data(), sub.size(), 0) < 1 || sub[0] != 1) fail("zmq: subscription did not arrive");
    }
  }

  // --- produce ---------------------------------------------------------------
  if (!pin_to_cpu(o.producer_cpu)) fail(fmt::format("cannot pin the producer to cpu {}", o.producer_cpu));
  std::array<Message, kPushBatch> batch;
  const std::uint64_t t0 = monotonic_ns();
  if (s.mode == Mode::kSaturation) {
    for (std::uint64_t seq = 0; seq < s.messages;) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kPushBatch, s.messages - seq));
      const std::uint64_t stamp = monotonic_ns();
      for (std::size_t i = 0; i < n; ++i) fill_message(batch[i], seq + i, stamp);
      producer->send(std::span<const Message>(batch.data(), n));
      seq += n;
    }
  } else {
    const double period_ns = 1e9 / s.rate;
    for (std::uint64_t seq = 0; seq < s.messages; ++seq) {
      const std::uint64_t intended = t0 + static_cast<std::uint64_t>(static_cast<double>(seq) * period_ns);
      while (monotonic_ns() < intended) cpu_relax();
      fill_message(batch[0], seq, intended);
      producer->send(std::span<const Message>(batch.data(), 1));
    }
  }
  const std::uint64_t t_sent = monotonic_ns();

  // --- collect -----------------------------------------------------------------
  std::uint64_t last_ns = 0;
  auto report = std::make_unique<ConsumerReport>();
  for (test::ChildProcess& c : children) {
    const std::optional<int> status = c.wait_exit(deadline);  // reads the report meanwhile
    const std::string& out = c.stdout_text();
    if (out.size() != 1 + sizeof *report) fail("a consumer died before reporting");
    std::memcpy(report.get(), out.data() + 1, sizeof *report);
    if (test::exit_code(status) != 0) fail("a consumer exited abnormally");
    res.received += report->received;
    res.bad += report->bad;
    res.stalls += report->stalls;
    res.consumer_cpu_ns += report->cpu_ns;
    if (report->bad != 0) {
      std::fprintf(stderr, "consumer: %llu bad messages, first at seq %llu\n",
                   static_cast<unsigned long long>(report->bad),
                   static_cast<unsigned long long>(report->first_bad_seq));
    }
    last_ns = std::max(last_ns, report->last_ns);
    res.latency.merge(report->latency);
  }
  ::alarm(0);
  res.seconds = static_cast<double>(last_ns - t0) * 1e-9;
  res.producer_seconds = static_cast<double>(t_sent - t0) * 1e-9;
  res.full_hits = producer->full_hits;
  res.send_calls = producer->send_calls;

  // --- tear down ---------------------------------------------------------------
  producer.reset();
  if (ring) {
    ring.reset();
    ::unlink(names.ring_path.c_str());
  }
  if (zpub != nullptr) {
    const int linger = 0;
    zmq_setsockopt(zpub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(zpub);
    zmq_ctx_term(zctx);
    ::unlink(names.zmq_path.c_str());
  }
  for (int i = 0; i < static_cast<int>(queues.size()); ++i) bip::message_queue::remove(names.queue(i).c_str());
  return res;
}

std::vector<Scenario> scenarios(const Options& o) {
  std::vector<Scenario> out;
  auto has = [](const std::vector<std::string>& v, const char* x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const char* mode : {"saturation", "rate"}) {
    if (!has(o.modes, mode)) continue;
    const Mode m = std::string(mode) == "rate" ? Mode::kRate : Mode::kSaturation;
    for (const auto& t : o.transports) {
      const Transport tr = t == "ringcast" ? Transport::kRingcast : t == "zmq" ? Transport::kZmq : Transport::kBoost;
      for (const int n : o.consumer_counts) {
        // ringcast has two APIs; the peers have one each (reported as single).
        // Rate runs send one message at a time, so they use the single API.
        std::vector<Api> apis;
        if (tr == Transport::kRingcast && m == Mode::kSaturation) {
          if (has(o.apis, "batch")) apis.push_back(Api::kBatch);
          if (has(o.apis, "single")) apis.push_back(Api::kSingle);
        } else {
          apis.push_back(Api::kSingle);
        }
        for (const Api a : apis) {
          if (m == Mode::kSaturation) {
            out.push_back({tr, a, m, n, 0.0, tr == Transport::kRingcast ? o.messages : o.peer_messages});
            continue;
          }
          for (const double rate : o.rates) {
            const auto count = o.rate_seconds > 0 ? static_cast<std::uint64_t>(rate * o.rate_seconds) : o.rate_messages;
            out.push_back({tr, a, m, n, rate, std::max<std::uint64_t>(count, 1)});
          }
        }
      }
    }
  }
  return out;
}

template <class T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T{} : v[v.size() / 2];
}

std::string json_run(const RunResult& r) {
  std::string hist;
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    const std::uint64_t c = r.latency.bucket_count(i);
    if (c == 0) continue;
    hist +=
        fmt::format("{}[{},{},{}]", hist.empty() ? "" : ",", LatencyHistogram::lower(i), LatencyHistogram::upper(i), c);
  }
  const auto& l = r.latency;
  return fmt::format(
      R"({{"transport":"{}","api":"{}","mode":"{}","consumers":{},"offered_rate":{},"messages":{},)"
      R"("repetition":{},"idle":"{}","seconds":{:.6f},"producer_seconds":{:.6f},"msgs_per_sec":{:.1f},)"
      R"("received":{},"bad":{},"stalls":{},"send_calls":{},"full_hits":{},"consumer_cpu_pct":{:.2f},)"
      R"("latency_ns":{{"samples":{},"min":{},"p50":{},"p90":{},"p99":{},"p999":{},"max":{},"mean":{:.1f}}},)"
      R"("histogram":[{}]}})",
      name(r.s.transport), name(r.s.api), name(r.s.mode), r.s.consumers, r.s.rate, r.s.messages, r.repetition,
      name(r.idle), r.seconds, r.producer_seconds, r.msgs_per_sec(), r.received, r.bad, r.stalls, r.send_calls,
      r.full_hits, r.consumer_cpu_pct(), l.count(), l.min(), l.percentile(0.50), l.percentile(0.90), l.percentile(0.99),
      l.percentile(0.999), l.max(), l.mean(), hist);
}

int harness_main(const Options& o, const std::string& command_line) {
  ::signal(SIGALRM, on_alarm);
  const int policy = ::sched_getscheduler(0);
  const bool realtime = policy == SCHED_FIFO || policy == SCHED_RR;
  const auto list = scenarios(o);
  std::vector<RunResult> results;
  int run_index = 0;
  fmt::print("{:<9} {:<6} {:<10} {:>3} {:>9} {:>8} {:>13} {:>7} {:>9} {:>9} {:>9} {:>10} {:>6} {:>4}\n", "transport",
             "api", "mode", "N", "rate", "idle", "msgs/s", "full%", "p50 ns", "p99 ns", "p99.9 ns", "max ns", "cpu%",
             "bad");
  for (const Scenario& s : list) {
    std::vector<RunResult> reps;
    for (int rep = 0; rep < o.repetitions; ++rep) {
      if (realtime) {
        // Leave the CPUs idle for a moment so that the kernel's real-time
        // throttling (950 ms of every 1 s by default) does not stop a run.
        ::usleep(250'000);
      }
      reps.push_back(run_one(o, s, rep, run_index++));
    }
    std::vector<double> mps, full, cpu;
    std::vector<std::uint64_t> p50, p99, p999, mx;
    std::uint64_t bad = 0;
    for (const RunResult& r : reps) {
      mps.push_back(r.msgs_per_sec());
      cpu.push_back(r.consumer_cpu_pct());
      full.push_back(r.send_calls ? 100.0 * static_cast<double>(r.full_hits) / static_cast<double>(r.send_calls) : 0);
      p50.push_back(r.latency.percentile(0.5));
      p99.push_back(r.latency.percentile(0.99));
      p999.push_back(r.latency.percentile(0.999));
      mx.push_back(r.latency.max());
      bad += r.bad;
    }
    fmt::print("{:<9} {:<6} {:<10} {:>3} {:>9} {:>8} {:>13.0f} {:>7.2f} {:>9} {:>9} {:>9} {:>10} {:>6.1f} {:>4}\n",
               name(s.transport), name(s.api), name(s.mode), s.consumers,
               s.mode == Mode::kRate ? fmt::format("{:.0f}", s.rate) : "-", name(reps.front().idle), median(mps),
               median(full), median(p50), median(p99), median(p999), median(mx), median(cpu), bad);
    std::fflush(stdout);
    for (RunResult& r : reps) {
      if (r.bad != 0 || r.received != r.s.messages * static_cast<std::uint64_t>(r.s.consumers)) {
        fail(fmt::format("verification failed: {} {} N={}: received {} of {}, {} bad", name(r.s.transport),
                         name(r.s.api), r.s.consumers, r.received,
                         r.s.messages * static_cast<std::uint64_t>(r.s.consumers), r.bad));
      }
      results.push_back(std::move(r));
    }
  }
  std::uint64_t verified = 0;
  for (const RunResult& r : results) verified += r.received;
  fmt::print("self-check: {} messages received, every one verified in order, 0 bad\n", verified);

  if (!o.json_path.empty()) {
    std::string runs;
    for (const RunResult& r : results) runs += (runs.empty() ? "" : ",\n") + json_run(r);
    const std::string doc = fmt::format(
        R"({{"context":{{"command":"{}","cpu":"{}","kernel":"{}","cores":{},"capacity":{},"push_batch":{},)"
        R"("drain_max":{},"sample_every":{},"repetitions":{},"producer_cpu":{},"consumer_cpus":"{}","realtime":{}}},)"
        "\n\"runs\":[\n{}\n]}}\n",
        command_line, host_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'"),
        host_line("uname -srm"), std::thread::hardware_concurrency(), o.capacity, kPushBatch, kDrainMax, o.sample_every,
        o.repetitions, o.producer_cpu, fmt::format("{}", fmt::join(o.consumer_cpus, ",")), realtime ? "true" : "false",
        runs);
    FILE* f = std::fopen(o.json_path.c_str(), "w");
    if (f == nullptr || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
      fail("cannot write " + o.json_path);
    }
    fmt::print("wrote {}\n", o.json_path);
  }
  return 0;
}

}  // namespace
}  // namespace ringcast::bench

int main(int argc, char** argv) {
  using namespace ringcast::bench;
  CLI::App app{"ringcast cross-process benchmark: ringcast vs ZeroMQ PUB/SUB vs Boost.Interprocess message_queue"};
  Options o;
  std::string role = "harness";
  ConsumerArgs c;
  std::string transport, api, mode, idle_name;
  app.add_option("--transports", o.transports, "ringcast, zmq, boost")->delimiter(',');
  app.add_option("--consumers", o.consumer_counts, "consumer process counts")->delimiter(',');
  app.add_option("--apis", o.apis, "ringcast APIs at saturation: batch, single")->delimiter(',');
  app.add_option("--modes", o.modes, "saturation, rate")->delimiter(',');
  app.add_option("--messages", o.messages, "messages per ringcast saturation run");
  app.add_option("--peer-messages", o.peer_messages, "messages per zmq/boost saturation run");
  app.add_option("--rate", o.rates, "offered rates of rate runs, messages/s (a list runs each)")->delimiter(',');
  app.add_option("--rate-messages", o.rate_messages, "messages per rate run");
  app.add_option("--rate-seconds", o.rate_seconds, "if > 0: a rate run sends rate x this many messages");
  app.add_flag("--wakeups", o.wakeups, "create the ring with CreateOptions::wakeups (full fences, no membarrier)");
  app.add_option("--capacity", o.capacity, "ring slots / queue messages / ZeroMQ high-water mark");
  app.add_option("--sample-every", o.sample_every, "saturation runs record the latency of one message in N");
  app.add_option("--repetitions", o.repetitions, "runs per scenario (the table shows medians)");
  app.add_option("--pin-producer", o.producer_cpu, "pin the producer to this CPU (-1: no pinning)");
  app.add_option("--pin-consumers", o.consumer_cpus, "pin consumer i to CPU list[i % size]")->delimiter(',');
  app.add_option("--idle", o.idle,
                 "auto (spin when every process has a core, else block), spin, yield (spin then "
                 "sched_yield), block (ringcast: recv_wait/push_wait, the default wait)");
  app.add_option("--waiter-slice-us", o.waiter_slice_us,
                 "ringcast: the scheduler slice its waits give a sleeping thread (set_waiter_slice; "
                 "0: leave threads alone)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--peer-slice-us", o.peer_slice_us,
                 "if > 0: give zmq/boost consumer processes this scheduler slice too (Linux >= 6.12), "
                 "to compare transports under the same setting")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", o.json_path, "write every run as JSON here");
  app.add_option("--timeout", o.timeout_s, "seconds before a stuck run is killed");
  // Consumer role (internal: the harness execs itself with these).
  app.add_option("--role", role)->group("");
  app.add_option("--transport", transport)->group("");
  app.add_option("--api", api)->group("");
  app.add_option("--mode", mode)->group("");
  app.add_option("--index", c.index)->group("");
  app.add_option("--cpu", c.cpu)->group("");
  app.add_option("--slice-us", c.slice_us)->group("");
  app.add_option("--ring-path", c.names.ring_path)->group("");
  app.add_option("--zmq-endpoint", c.names.zmq_endpoint)->group("");
  app.add_option("--queue-prefix", c.names.queue_prefix)->group("");
  CLI11_PARSE(app, argc, argv);

  if (role == "consumer") {
    c.transport = transport == "zmq"     ? Transport::kZmq
                  : transport == "boost" ? Transport::kBoost
                                         : Transport::kRingcast;
    c.api = api == "single" ? Api::kSingle : Api::kBatch;
    c.mode = mode == "rate" ? Mode::kRate : Mode::kSaturation;
    c.idle = o.idle == "yield" ? Idle::kYield : o.idle == "block" ? Idle::kBlock : Idle::kSpin;
    c.messages = o.messages;
    c.sample_every = std::max<std::uint64_t>(o.sample_every, 1);
    c.capacity = o.capacity;
    return consumer_main(c);
  }
  for (const auto& t : o.transports) {
    if (t != "ringcast" && t != "zmq" && t != "boost") fail("unknown transport " + t);
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  return harness_main(o, command_line);
}
