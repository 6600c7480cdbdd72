// ringcast_bench_large: large messages (52 B .. 1 MiB) through ringcast and
// its peers, in separate processes, lossless, in one run (issue 26 part 6).
//
// Transports (transport.hpp): ringcast's copying API and its zero-copy
// claim/view API, iceoryx 2.0 (loan/publish/take/release, its receivers
// polling or sleeping in a WaitSet; this harness starts and stops iox-roudi
// itself), ZeroMQ XPUB/SUB over ipc:// with XPUB_NODROP, and
// Boost.Interprocess message_queue (one queue per consumer).
//
// Cells: every message size x consumer count x mode, and in each cell every
// transport once per round, alternated (bench/common/alternate.hpp) so that
// load from elsewhere on a shared machine falls on each alike; tables show
// the median over the rounds. Modes:
//  * latency: open loop at a fixed, modest rate (--rate msgs/s, but at most
//    --rate-bytes B/s). Message i carries its intended send time t0 + i/rate
//    (CLOCK_MONOTONIC) and the producer waits for nothing else, so a stall
//    on either side shows in every message it delays. Every consumer
//    records every message's one-way latency. Receivers wait as each
//    transport's user would: ringcast with the ring's default wait
//    (kSpinThenBlock; --ringcast-wait spin or block to compare), iceoryx both
//    polling and in a WaitSet, ZeroMQ and Boost in their blocking calls.
//  * throughput: the producer sends as fast as the transport takes messages
//    for --seconds; per consumer, messages / (its last receive - the first
//    send), the slowest consumer reported, in msgs/s and GB/s (1e9 B/s).
// Before either, a warm-up of 2 x depth messages (every buffer lapped twice,
// pages faulted in) is sent and drained, unmeasured.
// Each throughput cell also measures this machine's single-core memcpy
// bandwidth for its message size (memcpy_bandwidth.hpp), once per round
// alongside the transports: the yardstick of the copying transports.
//
// Cell protocol (each step bounded by --timeout):
//  1. the harness starts the producer (this binary, --role producer); it
//     creates the transport, blocks SIGUSR1 and writes 'C' on its stdout pipe;
//  2. the harness starts N consumers (--role consumer); each attaches and
//     writes 'R';
//  3. SIGUSR1: the producer waits until the transport is ready (zmq: every
//     subscription arrived) and sends the warm-up; each consumer writes 'W'
//     after its last warm-up message;
//  4. SIGUSR1: the timed phase; the last message is flagged, after which every
//     process writes its report (plain bytes) and exits.
// Every consumer checks every message's sequence number, length and tail
// (message.hpp; every byte with --touch all); a cell with a loss, a duplicate,
// a reordering or a wrong length is reported as FAILED and the run exits 1.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fmt/format.h>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "alternate.hpp"
#include "child_process.hpp"
#include "histogram.hpp"
#include "memcpy_bandwidth.hpp"
#include "message.hpp"
#include "process_report.hpp"
#include "roudi.hpp"
#include "transport.hpp"
#include "workload.hpp"

namespace ringcast::bench {
namespace {

constexpr int kReportFd = STDOUT_FILENO;  // a child's pipe to the harness

enum class Mode : std::uint8_t { kLatency, kThroughput };

struct KindInfo {
  Kind kind;
  const char* name;  // on the command line and in the tables
  std::unique_ptr<Sender> (*make_sender)(const CellSpec&);
  std::unique_ptr<Receiver> (*make_receiver)(const CellSpec&);
};
constexpr KindInfo kKinds[] = {
    {Kind::kRingcastCopy, "ringcast-copy", make_ringcast_sender, make_ringcast_receiver},
    {Kind::kRingcastView, "ringcast-view", make_ringcast_sender, make_ringcast_receiver},
    {Kind::kIceoryxPoll, "iceoryx-poll", make_iceoryx_sender, make_iceoryx_receiver},
    {Kind::kIceoryxWait, "iceoryx-wait", make_iceoryx_sender, make_iceoryx_receiver},
    {Kind::kZmq, "zmq", make_zmq_sender, make_zmq_receiver},
    {Kind::kBoost, "boost", make_boost_sender, make_boost_receiver},
};

const KindInfo& info(Kind k) {
  for (const KindInfo& i : kKinds) {
    if (i.kind == k) return i;
  }
  return kKinds[0];
}
std::optional<Kind> kind_named(const std::string& name) {
  for (const KindInfo& i : kKinds) {
    if (name == i.name) return i.kind;
  }
  return std::nullopt;
}
const char* name(Mode m) { return m == Mode::kLatency ? "latency" : "throughput"; }

std::string size_text(std::size_t b) {
  if (b >= (1U << 20) && b % (1U << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}
std::string ns_text(double ns) {
  if (ns >= 1e6) return fmt::format("{:.2f} ms", ns / 1e6);
  if (ns >= 1e4) return fmt::format("{:.1f} us", ns / 1e3);
  if (ns >= 1e3) return fmt::format("{:.2f} us", ns / 1e3);
  return fmt::format("{:.0f} ns", ns);
}
std::string rate_text(double per_sec) {
  if (per_sec >= 1e6) return fmt::format("{:.2f} M", per_sec / 1e6);
  if (per_sec >= 1e3) return fmt::format("{:.1f} k", per_sec / 1e3);
  return fmt::format("{:.0f}", per_sec);
}

// ===========================================================================
// Producer and consumer processes
// ===========================================================================

// What the producer does in the timed phase (the harness decides).
struct Plan {
  Mode mode = Mode::kLatency;
  std::uint64_t warmup = 0;    // messages before the timed phase
  double rate = 0;             // latency: msgs/s
  std::uint64_t messages = 0;  // latency: how many
  double seconds = 0;          // throughput: for how long
};

struct ProducerReport {
  std::uint64_t t0_ns = 0;      // the timed phase's first send
  std::uint64_t t_end_ns = 0;   // its last send returned
  std::uint64_t sent = 0;       // timed messages
  std::uint64_t full_hits = 0;  // timed sends that found the transport full
  std::uint64_t cpu_ns = 0;     // CPU time of the timed phase
};
static_assert(std::is_trivially_copyable_v<ProducerReport>, "sent as bytes");

struct ConsumerReport {
  std::uint64_t received = 0;  // timed messages
  std::uint64_t bad = 0;       // messages that did not check (message.hpp)
  std::uint64_t first_bad_seq = 0;
  std::uint64_t last_ns = 0;  // when the last message arrived
  std::uint64_t cpu_ns = 0;   // CPU time from the end of the warm-up on
  LatencyHistogram latency;   // latency mode: every timed message
};
static_assert(std::is_trivially_copyable_v<ConsumerReport>, "sent as bytes");

[[noreturn]] void child_fail(const std::string& what) {
  std::fprintf(stderr, "ringcast_bench_large: %s\n", what.c_str());
  std::exit(2);
}

void say(char c) {
  if (!write_all(kReportFd, &c, 1)) child_fail("the harness's pipe is gone");
}

// Waits for the harness's SIGUSR1 (blocked in main() before any thread started).
void wait_for_go() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  const timespec timeout{600, 0};
  while (::sigtimedwait(&set, nullptr, &timeout) < 0) {
    if (errno != EINTR) child_fail("producer: no signal from the harness");
  }
}

int producer_main(const CellSpec& spec, const Plan& plan) {
  std::unique_ptr<Sender> sender = info(spec.kind).make_sender(spec);
  say('C');
  wait_for_go();
  sender->wait_ready();
  std::uint64_t seq = 0;
  for (std::uint64_t i = 0; i < plan.warmup; ++i) {
    const std::uint64_t flags = kWarmup | (i + 1 == plan.warmup ? kLastWarmup : 0);
    sender->send({seq++, monotonic_ns(), flags});
  }
  sender->full_hits = 0;
  wait_for_go();
  ProducerReport report;
  const std::uint64_t cpu_at_start = process_cpu_ns();
  report.t0_ns = monotonic_ns();
  if (plan.mode == Mode::kLatency) {
    const double period_ns = 1e9 / plan.rate;
    for (std::uint64_t i = 0; i < plan.messages; ++i) {
      const std::uint64_t intended = report.t0_ns + static_cast<std::uint64_t>(static_cast<double>(i) * period_ns);
      while (monotonic_ns() < intended) cpu_relax();
      sender->send({seq++, intended, i + 1 == plan.messages ? kLast : 0});
    }
    report.sent = plan.messages;
  } else {
    const std::uint64_t end = report.t0_ns + static_cast<std::uint64_t>(plan.seconds * 1e9);
    // A clock read costs ~25 ns: for small messages, one per 64 sends.
    const std::uint64_t check_every = spec.size >= 4096 ? 1 : 64;
    for (std::uint64_t i = 0;; ++i) {
      const bool last = i % check_every == 0 && monotonic_ns() >= end;
      sender->send({seq++, report.t0_ns, last ? kLast : 0});
      if (last) {
        report.sent = i + 1;
        break;
      }
    }
  }
  report.t_end_ns = monotonic_ns();
  report.full_hits = sender->full_hits;
  report.cpu_ns = process_cpu_ns() - cpu_at_start;
  if (!write_all(kReportFd, &report, sizeof report)) return 3;
  sender.reset();  // zmq: returns once the last messages are handed over
  return 0;
}

class CheckingSink final : public MessageSink {
 public:
  CheckingSink(const CellSpec& spec, Mode mode, ConsumerReport& r) : spec_(spec), mode_(mode), r_(r) {}
  bool on_message(std::span<const std::byte> m) override {
    if (m.size() < kMinMessageBytes) [[unlikely]] {
      note_bad(expected_);
      ++expected_;
      return false;
    }
    const MessageHeader h = read_header(m);
    if (!check_message(m, expected_, spec_.size, spec_.touch)) [[unlikely]] {
      note_bad(expected_);
      expected_ = h.seq;
    }
    ++expected_;
    if ((h.flags & kWarmup) != 0) {
      if ((h.flags & kLastWarmup) != 0) {
        r_.cpu_ns = process_cpu_ns();  // the timed phase's CPU is counted from here
        say('W');
      }
      return false;
    }
    ++r_.received;
    if (mode_ == Mode::kLatency) {
      const std::uint64_t now = monotonic_ns();
      r_.latency.record(now > h.stamp_ns ? now - h.stamp_ns : 0);
    }
    if ((h.flags & kLast) != 0) {
      r_.last_ns = monotonic_ns();
      return true;
    }
    return false;
  }

 private:
  void note_bad(std::uint64_t seq) {
    if (r_.bad++ == 0) r_.first_bad_seq = seq;
  }
  const CellSpec& spec_;
  Mode mode_;
  ConsumerReport& r_;
  std::uint64_t expected_ = 0;
};

int consumer_main(const CellSpec& spec, Mode mode) {
  std::unique_ptr<Receiver> receiver = info(spec.kind).make_receiver(spec);
  say('R');
  auto report = std::make_unique<ConsumerReport>();
  CheckingSink sink(spec, mode, *report);
  receiver->run(sink);
  report->cpu_ns = process_cpu_ns() - report->cpu_ns;
  return write_all(kReportFd, report.get(), sizeof *report) ? 0 : 3;
}

// ===========================================================================
// Harness
// ===========================================================================

struct Options {
  std::vector<std::string> transports{"ringcast-copy", "ringcast-view", "iceoryx-poll", "iceoryx-wait", "zmq", "boost"};
  std::vector<std::size_t> sizes{52, 1024, 64 * 1024, 1024 * 1024};
  std::vector<int> consumer_counts{1, 4};
  std::vector<std::string> modes{"latency", "throughput"};
  int rounds = 3;
  double seconds = 0.5;          // throughput cells
  double latency_seconds = 0.5;  // latency cells
  std::uint64_t min_latency_messages = 1000;
  double rate = 10'000;
  double rate_bytes = 1e9;
  std::uint64_t depth = 256;
  std::uint64_t depth_bytes = 16 << 20;
  std::string touch = "ends";
  std::string ring_wait = "spin-then-block";
  double memcpy_seconds = 0.15;
  std::string json_path;
  int timeout_s = 120;
};

struct Cell {
  std::size_t size = 0;
  int consumers = 1;
  Mode mode = Mode::kLatency;
};

struct RunResult {
  Kind kind = Kind::kRingcastCopy;
  Cell cell;
  int round = 0;
  std::string error;  // empty: the run completed and every message checked
  double rate = 0;    // latency: offered msgs/s
  ProducerReport producer;
  std::uint64_t received = 0;  // over all consumers
  std::uint64_t bad = 0;
  std::uint64_t last_ns = 0;  // the slowest consumer's last receive
  std::uint64_t consumer_cpu_ns = 0;
  LatencyHistogram latency;

  [[nodiscard]] bool ok() const { return error.empty(); }
  [[nodiscard]] double seconds() const {
    return last_ns > producer.t0_ns ? static_cast<double>(last_ns - producer.t0_ns) * 1e-9 : 0;
  }
  // Delivered to each consumer (the slowest one's figure).
  [[nodiscard]] double msgs_per_sec() const {
    return seconds() > 0 ? static_cast<double>(producer.sent) / seconds() : 0;
  }
  [[nodiscard]] double gbps() const { return msgs_per_sec() * static_cast<double>(cell.size) / 1e9; }
  [[nodiscard]] double full_pct() const {
    return producer.sent ? 100.0 * static_cast<double>(producer.full_hits) / static_cast<double>(producer.sent) : 0;
  }
  // Mean CPU of one consumer process over the timed phase (from the end of
  // its warm-up to its last message), % of one CPU.
  [[nodiscard]] double consumer_cpu_pct() const {
    return seconds() > 0 ? 100.0 * static_cast<double>(consumer_cpu_ns) * 1e-9 / (seconds() * cell.consumers) : 0;
  }
};

std::uint64_t depth_for(const Options& o, std::size_t size) {
  return std::max<std::uint64_t>(2, std::min<std::uint64_t>(o.depth, o.depth_bytes / size));
}
double rate_for(const Options& o, std::size_t size) {
  return std::min(o.rate, o.rate_bytes / static_cast<double>(size));
}

class Harness {
 public:
  Harness(const Options& o, std::string exe) : o_(o), exe_(std::move(exe)) {}

  RunResult run(Kind kind, const Cell& cell, int round) {
    if (realtime_) {
      // Leave the CPUs idle for a moment so that the kernel's real-time
      // throttling (950 ms of every 1 s by default) does not stop a cell
      // whose processes spin, as xproc_bench does.
      ::usleep(250'000);
    }
    RunResult res;
    res.kind = kind;
    res.cell = cell;
    res.round = round;
    try {
      run_into(res);
    } catch (const std::exception& e) {
      res.error = e.what();
    }
    return res;
  }

 private:
  void run_into(RunResult& res) {
    const Cell& c = res.cell;
    CellSpec spec;
    spec.kind = res.kind;
    spec.size = c.size;
    spec.consumers = c.consumers;
    spec.depth = depth_for(o_, c.size);
    spec.tag = fmt::format("ringcast-large-{}-{}", ::getpid(), next_tag_++);
    spec.touch = o_.touch == "all" ? Touch::kAll : Touch::kEnds;
    res.rate = rate_for(o_, c.size);
    const auto messages =
        std::max<std::uint64_t>(o_.min_latency_messages, static_cast<std::uint64_t>(res.rate * o_.latency_seconds));
    Cleanup cleanup{spec};
    // What every process of the cell is told, then the producer's plan.
    const std::vector<std::string> common = flag_args({{"--kind", info(spec.kind).name},
                                                       {"--size", std::to_string(spec.size)},
                                                       {"--n", std::to_string(spec.consumers)},
                                                       {"--depth", std::to_string(spec.depth)},
                                                       {"--tag", spec.tag},
                                                       {"--touch", o_.touch},
                                                       {"--mode", name(c.mode)},
                                                       {"--ringcast-wait", o_.ring_wait}});
    std::vector<std::string> pargs = flag_args({{"--role", "producer"},
                                                {"--warmup", std::to_string(2 * spec.depth)},
                                                {"--rate", fmt::format("{}", res.rate)},
                                                {"--messages", std::to_string(messages)},
                                                {"--seconds", fmt::format("{}", o_.seconds)}});
    pargs.insert(pargs.begin(), exe_);
    pargs.insert(pargs.end(), common.begin(), common.end());
    test::ChildProcess producer = test::ChildProcess::spawn(pargs, kPipes);
    std::vector<test::ChildProcess> consumers;
    try {
      drive(res, common, producer, consumers);
    } catch (const std::exception& e) {
      throw std::runtime_error(e.what() + children_said(producer, consumers));
    }
  }

  // Steps 1 to 4 of the cell protocol, then the reports.
  void drive(RunResult& res, const std::vector<std::string>& common, test::ChildProcess& producer,
             std::vector<test::ChildProcess>& consumers) {
    const test::Deadline deadline = test::deadline_in(std::chrono::seconds(o_.timeout_s));
    if (!producer.read_stdout_until("C", deadline)) throw std::runtime_error("the producer did not start");
    for (int i = 0; i < res.cell.consumers; ++i) {
      std::vector<std::string> args = flag_args({{"--role", "consumer"}, {"--index", std::to_string(i)}});
      args.insert(args.begin(), exe_);
      args.insert(args.end(), common.begin(), common.end());
      consumers.push_back(test::ChildProcess::spawn(args, kPipes));
    }
    for (test::ChildProcess& p : consumers) {
      if (!p.read_stdout_until("R", deadline)) throw std::runtime_error("a consumer did not attach");
    }
    ::kill(producer.pid(), SIGUSR1);  // warm up
    for (test::ChildProcess& p : consumers) {
      if (!p.read_stdout_until("W", deadline)) throw std::runtime_error("a consumer did not finish the warm-up");
    }
    ::kill(producer.pid(), SIGUSR1);  // measure

    const auto status = producer.wait_exit(deadline);
    if (test::exit_code(status) != 0 || producer.stdout_text().size() != 1 + sizeof res.producer) {
      throw std::runtime_error(fmt::format("the producer failed (exit {})", test::exit_code(status)));
    }
    std::memcpy(&res.producer, producer.stdout_text().data() + 1, sizeof res.producer);
    auto report = std::make_unique<ConsumerReport>();
    for (test::ChildProcess& p : consumers) {
      const auto cs = p.wait_exit(deadline);
      if (test::exit_code(cs) != 0 || p.stdout_text().size() != 2 + sizeof *report) {
        throw std::runtime_error(fmt::format("a consumer failed (exit {})", test::exit_code(cs)));
      }
      std::memcpy(report.get(), p.stdout_text().data() + 2, sizeof *report);
      res.received += report->received;
      res.bad += report->bad;
      res.last_ns = std::max(res.last_ns, report->last_ns);
      res.consumer_cpu_ns += report->cpu_ns;
      res.latency.merge(report->latency);
      if (report->bad != 0) {
        throw std::runtime_error(
            fmt::format("a consumer got {} bad messages, the first at seq {}", report->bad, report->first_bad_seq));
      }
    }
    const std::uint64_t expected = res.producer.sent * static_cast<std::uint64_t>(res.cell.consumers);
    if (res.received != expected) {
      throw std::runtime_error(fmt::format("received {} of {} messages", res.received, expected));
    }
  }

  // {"--flag", value} pairs as a flat argument list.
  static std::vector<std::string> flag_args(std::initializer_list<std::pair<const char*, std::string>> flags) {
    std::vector<std::string> args;
    for (const auto& [flag, value] : flags) args.insert(args.end(), {flag, value});
    return args;
  }

  // What the children of a failed cell wrote on stderr, after stopping them
  // (iceoryx prints a line as it starts, so a cell that went well is not shown).
  static std::string children_said(test::ChildProcess& producer, std::vector<test::ChildProcess>& consumers) {
    std::string text;
    auto add = [&](test::ChildProcess& p, const std::string& who) {
      (void)p.stop(SIGKILL);
      std::string err = p.stderr_text();
      while (!err.empty() && err.back() == '\n') err.pop_back();
      if (!err.empty()) text += fmt::format("; {} said: {}", who, err);
    };
    add(producer, "the producer");
    for (std::size_t i = 0; i < consumers.size(); ++i) add(consumers[i], fmt::format("consumer {}", i));
    return text;
  }

  inline static const test::SpawnOptions kPipes{.out = test::Stream::kPipe, .err = test::Stream::kPipe};

  // Removes the cell's names however the cell ends.
  struct Cleanup {
    const CellSpec& spec;
    ~Cleanup() {
      remove_ringcast_names(spec.tag);
      remove_zmq_names(spec.tag);
      remove_boost_names(spec.tag, spec.consumers);
    }
  };

  const Options& o_;
  std::string exe_;
  int next_tag_ = 0;
  const bool realtime_ = ::sched_getscheduler(0) == SCHED_FIFO || ::sched_getscheduler(0) == SCHED_RR;
};

// --- reporting ------------------------------------------------------------

template <class F>
double median_of(const std::vector<RunResult>& runs, F metric) {
  std::vector<double> v;
  for (const RunResult& r : runs) {
    if (r.ok()) v.push_back(metric(r));
  }
  return median_by(v, std::less<>{});
}

struct Summary {
  Kind kind = Kind::kRingcastCopy;
  Cell cell;
  int runs = 0;
  int ok_runs = 0;
  std::string error;  // the first failed run's
  double rate = 0;
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  double msgs_per_sec = 0, gbps = 0, full_pct = 0, cpu_pct = 0;
};

Summary summarise(Kind kind, const Cell& cell, const std::vector<RunResult>& runs) {
  Summary s;
  s.kind = kind;
  s.cell = cell;
  s.runs = static_cast<int>(runs.size());
  for (const RunResult& r : runs) {
    if (r.ok()) ++s.ok_runs;
    else if (s.error.empty()) s.error = r.error;
  }
  s.rate = runs.empty() ? 0 : runs.front().rate;
  auto pct = [](double q) { return [q](const RunResult& r) { return static_cast<double>(r.latency.percentile(q)); }; };
  s.p50 = median_of(runs, pct(0.5));
  s.p99 = median_of(runs, pct(0.99));
  s.p999 = median_of(runs, pct(0.999));
  s.max = median_of(runs, [](const RunResult& r) { return static_cast<double>(r.latency.max()); });
  s.msgs_per_sec = median_of(runs, [](const RunResult& r) { return r.msgs_per_sec(); });
  s.gbps = median_of(runs, [](const RunResult& r) { return r.gbps(); });
  s.full_pct = median_of(runs, [](const RunResult& r) { return r.full_pct(); });
  s.cpu_pct = median_of(runs, [](const RunResult& r) { return r.consumer_cpu_pct(); });
  return s;
}

const Summary* find(const std::vector<Summary>& all, Kind k, std::size_t size, int n, Mode m) {
  for (const Summary& s : all) {
    if (s.kind == k && s.cell.size == size && s.cell.consumers == n && s.cell.mode == m && s.ok_runs > 0) return &s;
  }
  return nullptr;
}

// iceoryx's better configuration in a latency cell (the lower p50).
const Summary* best_iceoryx(const std::vector<Summary>& all, std::size_t size, int n) {
  const Summary* poll = find(all, Kind::kIceoryxPoll, size, n, Mode::kLatency);
  const Summary* wait = find(all, Kind::kIceoryxWait, size, n, Mode::kLatency);
  if (poll == nullptr || wait == nullptr) return poll != nullptr ? poll : wait;
  return poll->p50 <= wait->p50 ? poll : wait;
}

std::string iceoryx_text(const Summary& s) {
  return fmt::format("{} ({})", ns_text(s.p50), s.kind == Kind::kIceoryxPoll ? "poll" : "WaitSet");
}

// memcpy in a throughput cell: each figure's median over the cell's rounds.
struct CellCopy {
  Cell cell;
  CopyBandwidth bw;
  int rounds = 0;
};

CellCopy summarise_copy(const Cell& cell, const std::vector<CopyBandwidth>& runs) {
  CellCopy c{cell, runs.empty() ? CopyBandwidth{} : runs.front(), static_cast<int>(runs.size())};
  auto median = [&](double CopyBandwidth::*field) {
    std::vector<double> v;
    for (const CopyBandwidth& b : runs) v.push_back(b.*field);
    return median_by(v, std::less<>{});
  };
  c.bw.hot_gbps = median(&CopyBandwidth::hot_gbps);
  c.bw.ring_gbps = median(&CopyBandwidth::ring_gbps);
  c.bw.far_gbps = median(&CopyBandwidth::far_gbps);
  return c;
}

const CopyBandwidth* find(const std::vector<CellCopy>& all, std::size_t size, int n) {
  for (const CellCopy& c : all) {
    if (c.cell.size == size && c.cell.consumers == n) return &c.bw;
  }
  return nullptr;
}

void print_row(const Summary& s, const std::vector<CellCopy>& copy) {
  const std::string where =
      fmt::format("| {} | {} | {} |", size_text(s.cell.size), s.cell.consumers, info(s.kind).name);
  if (s.ok_runs == 0) {
    fmt::print("{} FAILED: {} |\n", where, s.error);
    return;
  }
  const std::string failed =
      s.error.empty() ? "" : fmt::format(" {} of {} runs FAILED: {} |", s.runs - s.ok_runs, s.runs, s.error);
  if (s.cell.mode == Mode::kLatency) {
    fmt::print("{} {} | {} | {} | {} | {} | {:.0f}% |{}\n", where, rate_text(s.rate), ns_text(s.p50), ns_text(s.p99),
               ns_text(s.p999), ns_text(s.max), s.cpu_pct, failed);
  } else {
    const CopyBandwidth* bw = find(copy, s.cell.size, s.cell.consumers);
    fmt::print("{} {} | {:.2f} | {:.2f}x | {:.1f}% | {:.0f}% |{}\n", where, rate_text(s.msgs_per_sec), s.gbps,
               bw != nullptr && s.gbps > 0 ? bw->ring_gbps / s.gbps : 0.0, s.full_pct, s.cpu_pct, failed);
  }
}

void print_header(Mode m) {
  if (m == Mode::kLatency) {
    fmt::print("\n| size | N | transport | rate msgs/s | p50 | p99 | p99.9 | max | consumer CPU |\n");
    fmt::print("|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  } else {
    fmt::print(
        "\n| size | N | transport | msgs/s per consumer | GB/s per consumer | memcpy (ring size) / this | full% | "
        "consumer CPU |\n");
    fmt::print("|---|---:|---|---:|---:|---:|---:|---:|\n");
  }
}

// The targets of issue 26 for the cells this run has, against iceoryx's
// better configuration per cell. A missing peer or cell leaves its line out.
void print_targets(const std::vector<Summary>& all, const std::vector<CellCopy>& copy, const Options& o) {
  fmt::print("\n| target (issue 26) | N | ringcast | peer | ratio | met |\n|---|---:|---:|---:|---:|---|\n");
  auto line = [](const std::string& what, int n, const std::string& ours, const std::string& theirs, double ratio,
                 bool met) {
    fmt::print("| {} | {} | {} | {} | {:.2f} | {} |\n", what, n, ours, theirs, ratio, met ? "yes" : "**no**");
  };
  for (const int n : o.consumer_counts) {
    for (const Kind k : {Kind::kRingcastCopy, Kind::kRingcastView}) {
      const char* api = k == Kind::kRingcastCopy ? "copy" : "view";
      const Summary* ice52 = best_iceoryx(all, 52, n);
      if (const Summary* s = find(all, k, 52, n, Mode::kLatency); s && ice52) {
        line(fmt::format("52 B p50 ahead of iceoryx ({})", api), n, ns_text(s->p50), iceoryx_text(*ice52),
             s->p50 / ice52->p50, s->p50 < ice52->p50);
      }
      const Summary* ice1k = best_iceoryx(all, 1024, n);
      if (const Summary* s = find(all, k, 1024, n, Mode::kLatency); s && ice1k) {
        line(fmt::format("1 KiB p50 no worse than iceoryx ({})", api), n, ns_text(s->p50), iceoryx_text(*ice1k),
             s->p50 / ice1k->p50, s->p50 <= ice1k->p50);
      }
      for (const Kind peer : {Kind::kZmq, Kind::kBoost}) {
        const Summary* p = find(all, peer, 1024, n, Mode::kThroughput);
        if (const Summary* s = find(all, k, 1024, n, Mode::kThroughput); s && p) {
          line(fmt::format("1 KiB throughput >= 3x {} ({})", info(peer).name, api), n, rate_text(s->msgs_per_sec),
               rate_text(p->msgs_per_sec), s->msgs_per_sec / p->msgs_per_sec, s->msgs_per_sec >= 3 * p->msgs_per_sec);
        }
      }
    }
    for (const std::size_t size : {std::size_t{64} << 10, std::size_t{1} << 20}) {
      const Summary* ice = best_iceoryx(all, size, n);
      if (const Summary* s = find(all, Kind::kRingcastView, size, n, Mode::kLatency); s && ice) {
        line(fmt::format("{} p50 within 1.5x of iceoryx (view)", size_text(size)), n, ns_text(s->p50),
             iceoryx_text(*ice), s->p50 / ice->p50, s->p50 <= 1.5 * ice->p50);
      }
      const CopyBandwidth* bw = find(copy, size, n);
      if (const Summary* s = find(all, Kind::kRingcastCopy, size, n, Mode::kThroughput); s && bw) {
        line(fmt::format("{} copy throughput within 2x of memcpy (through {}; hot {:.1f}, DRAM {:.1f} GB/s)",
                         size_text(size), size_text(bw->ring_bytes), bw->hot_gbps, bw->far_gbps),
             n, fmt::format("{:.2f} GB/s", s->gbps), fmt::format("{:.2f} GB/s", bw->ring_gbps), bw->ring_gbps / s->gbps,
             bw->ring_gbps <= 2 * s->gbps);
      }
    }
  }
}

std::string json_run(const RunResult& r) {
  const LatencyHistogram& l = r.latency;
  return fmt::format(
      R"({{"transport":"{}","size":{},"consumers":{},"mode":"{}","round":{},"ok":{},"error":"{}","rate":{:.1f},)"
      R"("sent":{},"received":{},"seconds":{:.6f},"msgs_per_sec":{:.1f},"gbps":{:.4f},"full_hits":{},)"
      R"("consumer_cpu_pct":{:.2f},"latency_ns":{{"samples":{},"min":{},"p50":{},"p90":{},"p99":{},"p999":{},)"
      R"("max":{},"mean":{:.1f}}}}})",
      info(r.kind).name, r.cell.size, r.cell.consumers, name(r.cell.mode), r.round, r.ok() ? "true" : "false",
      json_escape(r.error), r.rate, r.producer.sent, r.received, r.seconds(), r.msgs_per_sec(), r.gbps(),
      r.producer.full_hits, r.consumer_cpu_pct(), l.count(), l.min(), l.percentile(0.5), l.percentile(0.9),
      l.percentile(0.99), l.percentile(0.999), l.max(), l.mean());
}

void write_json(const Options& o, const std::string& command_line, const std::vector<CellCopy>& copy,
                const std::vector<RunResult>& runs, const std::string& skipped) {
  std::string memcpy_rows;
  for (const CellCopy& c : copy) {
    const CopyBandwidth& b = c.bw;
    memcpy_rows +=
        fmt::format(R"({}{{"size":{},"consumers":{},"rounds":{},"hot_gbps":{:.3f},"ring_gbps":{:.3f},"ring_bytes":{},)"
                    R"("far_gbps":{:.3f},"far_bytes":{}}})",
                    memcpy_rows.empty() ? "" : ",", b.size, c.cell.consumers, c.rounds, b.hot_gbps, b.ring_gbps,
                    b.ring_bytes, b.far_gbps, b.far_bytes);
  }
  std::string run_rows;
  for (const RunResult& r : runs) run_rows += (run_rows.empty() ? "" : ",\n") + json_run(r);
  const std::string doc = fmt::format(
      R"({{"context":{{"command":"{}","cpu":"{}","kernel":"{}","cores":{},"rounds":{},"depth":{},"depth_bytes":{},)"
      R"("rate":{},"rate_bytes":{},"touch":"{}","ringcast_wait":"{}","skipped":"{}"}},)"
      "\n\"memcpy\":[{}],\n\"runs\":[\n{}\n]}}\n",
      json_escape(command_line), host_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'"),
      host_line("uname -srm"), std::thread::hardware_concurrency(), o.rounds, o.depth, o.depth_bytes, o.rate,
      o.rate_bytes, o.touch, o.ring_wait, json_escape(skipped), memcpy_rows, run_rows);
  FILE* f = std::fopen(o.json_path.c_str(), "w");
  if (f == nullptr || std::fwrite(doc.data(), 1, doc.size(), f) != doc.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "ringcast_bench_large: cannot write %s\n", o.json_path.c_str());
  }
}

int harness_main(const Options& o, const std::string& command_line) {
  const std::optional<std::string> exe = self_exe();
  if (!exe) {
    std::fprintf(stderr, "ringcast_bench_large: cannot read /proc/self/exe\n");
    return 2;
  }
  std::vector<Kind> kinds;
  for (const std::string& t : o.transports) kinds.push_back(*kind_named(t));

  // iox-roudi for the whole run, with a pool per size big enough for every
  // queue of a cell full at once (plus chunks held and loaned).
  std::string skipped;
  std::unique_ptr<Roudi> roudi;
  auto is_iceoryx = [](Kind k) { return k == Kind::kIceoryxPoll || k == Kind::kIceoryxWait; };
  if (std::any_of(kinds.begin(), kinds.end(), is_iceoryx)) {
    std::vector<PoolNeed> pools;
    for (const std::size_t size : o.sizes) pools.push_back({size, 2 * depth_for(o, size) + 32});
    roudi = start_roudi(pools, skipped);
    if (!roudi) {
      skipped = "iceoryx skipped: " + skipped;
      fmt::print("{}\n", skipped);
      kinds.erase(std::remove_if(kinds.begin(), kinds.end(), is_iceoryx), kinds.end());
    }
  }

  fmt::print(
      "ringcast_bench_large: {} rounds; latency at min({:.0f} msgs/s, {:.0f} MB/s) for {:.1f} s (at least {} "
      "messages); throughput for {:.2f} s; depth min({}, {} MiB) messages; touch {}; ringcast waits {}\n",
      o.rounds, o.rate, o.rate_bytes / 1e6, o.latency_seconds, o.min_latency_messages, o.seconds, o.depth,
      o.depth_bytes >> 20, o.touch, o.ring_wait);
  std::fflush(stdout);

  Harness harness(o, *exe);
  std::vector<RunResult> all_runs;
  std::vector<Summary> summaries;
  std::vector<CellCopy> copy;
  bool failed = false;
  for (const std::string& mode_name : {std::string("latency"), std::string("throughput")}) {
    if (std::find(o.modes.begin(), o.modes.end(), mode_name) == o.modes.end()) continue;
    const Mode mode = mode_name == "latency" ? Mode::kLatency : Mode::kThroughput;
    print_header(mode);
    for (const std::size_t size : o.sizes) {
      for (const int n : o.consumer_counts) {
        const Cell cell{size, n, mode};
        // Each contestant numbers its own rounds.
        std::vector<int> rounds_done(kinds.size(), 0);
        std::vector<std::function<RunResult()>> contestants;
        for (std::size_t k = 0; k < kinds.size(); ++k) {
          contestants.emplace_back([&, k] { return harness.run(kinds[k], cell, rounds_done[k]++); });
        }
        // A throughput cell's yardstick, measured in each round too (its
        // RunResult is a placeholder; the figures go to cell_copy).
        std::vector<CopyBandwidth> cell_copy;
        if (mode == Mode::kThroughput) {
          contestants.emplace_back([&] {
            cell_copy.push_back(measure_memcpy(size, depth_for(o, size) * size, o.memcpy_seconds));
            return RunResult{};
          });
        }
        const auto results = alternate<RunResult>(o.rounds, contestants);
        if (!cell_copy.empty()) copy.push_back(summarise_copy(cell, cell_copy));
        for (std::size_t k = 0; k < kinds.size(); ++k) {
          summaries.push_back(summarise(kinds[k], cell, results[k]));
          print_row(summaries.back(), copy);
          for (const RunResult& r : results[k]) {
            failed = failed || !r.ok();
            all_runs.push_back(r);
          }
        }
        std::fflush(stdout);
      }
    }
  }
  if (!copy.empty()) {
    fmt::print(
        "\nsingle-core memcpy in the throughput cells, GB/s (median of the rounds): the same two buffers (hot); "
        "walking through two buffers of depth x size, what each transport holds (ring); through two of 256 MiB "
        "(DRAM)\n\n| size | N | hot | ring | ring bytes | DRAM |\n|---|---:|---:|---:|---:|---:|\n");
    for (const CellCopy& c : copy) {
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {} | {:.2f} |\n", size_text(c.bw.size), c.cell.consumers, c.bw.hot_gbps,
                 c.bw.ring_gbps, size_text(c.bw.ring_bytes), c.bw.far_gbps);
    }
  }
  print_targets(summaries, copy, o);
  if (!skipped.empty()) fmt::print("\n{}\n", skipped);
  std::uint64_t verified = 0;
  for (const RunResult& r : all_runs) verified += r.ok() ? r.received : 0;
  fmt::print("\nself-check: {} timed messages received and checked{}\n", verified,
             failed ? "; SOME RUNS FAILED (see the tables)" : ", every one in order, 0 lost");
  if (!o.json_path.empty()) {
    write_json(o, command_line, copy, all_runs, skipped);
    fmt::print("wrote {}\n", o.json_path);
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace ringcast::bench

int main(int argc, char** argv) {
  using namespace ringcast::bench;
  // The producer waits for SIGUSR1 with sigtimedwait: block it before any
  // thread (ZeroMQ's, iceoryx's) starts, so that every thread inherits the mask.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ::sigprocmask(SIG_BLOCK, &usr1, nullptr);

  CLI::App app{
      "ringcast large-message benchmark: ringcast (copy and zero-copy APIs) vs iceoryx, ZeroMQ ipc and "
      "Boost.Interprocess message_queue, separate processes, lossless; one-way latency at a fixed rate and "
      "throughput at saturation, per message size and consumer count, plus single-core memcpy bandwidth"};
  Options o;
  app.add_option("--transports", o.transports, "ringcast-copy, ringcast-view, iceoryx-poll, iceoryx-wait, zmq, boost")
      ->delimiter(',')
      ->check(CLI::IsMember({"ringcast-copy", "ringcast-view", "iceoryx-poll", "iceoryx-wait", "zmq", "boost"}));
  app.add_option("--sizes", o.sizes, "message sizes in bytes (>= 32)")->delimiter(',')->check(CLI::Range(32, 1 << 30));
  app.add_option("--consumers", o.consumer_counts, "consumer process counts")->delimiter(',')->check(CLI::Range(1, 16));
  app.add_option("--modes", o.modes, "latency, throughput")
      ->delimiter(',')
      ->check(CLI::IsMember({"latency", "throughput"}));
  app.add_option("--rounds", o.rounds, "alternations of the transports per cell (tables: medians)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", o.seconds, "timed phase of a throughput cell")->check(CLI::PositiveNumber);
  app.add_option("--latency-seconds", o.latency_seconds, "timed phase of a latency cell")->check(CLI::PositiveNumber);
  app.add_option("--min-latency-messages", o.min_latency_messages, "at least this many messages per latency cell");
  app.add_option("--rate", o.rate, "latency cells' offered rate, msgs/s")->check(CLI::PositiveNumber);
  app.add_option("--rate-bytes", o.rate_bytes, "... but at most this many bytes/s")->check(CLI::PositiveNumber);
  app.add_option("--depth", o.depth, "messages every transport may hold per consumer (iceoryx: at most 256)")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--depth-bytes", o.depth_bytes, "... but at most this many bytes")->check(CLI::PositiveNumber);
  app.add_option("--touch", o.touch, "ends: write and check the 32 bytes of header and tail; all: every byte")
      ->check(CLI::IsMember({"ends", "all"}));
  app.add_option("--ringcast-wait", o.ring_wait,
                 "how ringcast's sides wait when empty or full: spin-then-block (its default, kSpinThenBlock), "
                 "block (kBlock) or spin (kSpin)")
      ->check(CLI::IsMember({"spin-then-block", "block", "spin"}));
  app.add_option("--memcpy-seconds", o.memcpy_seconds, "time per memcpy figure (three per throughput cell and round)")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", o.json_path, "write every run as JSON here");
  app.add_option("--timeout", o.timeout_s, "seconds before a stuck cell is abandoned")->check(CLI::PositiveNumber);
  // Producer and consumer roles (internal: the harness execs itself with these).
  std::string role = "harness", kind, mode;
  CellSpec spec;
  Plan plan;
  app.add_option("--role", role)->group("");
  app.add_option("--kind", kind)->group("");
  app.add_option("--size", spec.size)->group("");
  app.add_option("--n", spec.consumers)->group("");
  app.add_option("--tag", spec.tag)->group("");
  app.add_option("--index", spec.index)->group("");
  app.add_option("--mode", mode)->group("");
  app.add_option("--warmup", plan.warmup)->group("");
  app.add_option("--messages", plan.messages)->group("");
  CLI11_PARSE(app, argc, argv);

  if (role != "harness") {
    spec.kind = kind_named(kind).value_or(Kind::kRingcastCopy);
    spec.depth = o.depth;
    spec.touch = o.touch == "all" ? Touch::kAll : Touch::kEnds;
    spec.ring_wait = o.ring_wait == "block"  ? ringcast::IdleStrategy::kBlock
                     : o.ring_wait == "spin" ? ringcast::IdleStrategy::kSpin
                                             : ringcast::IdleStrategy::kSpinThenBlock;
    plan.mode = mode == "throughput" ? Mode::kThroughput : Mode::kLatency;
    plan.rate = o.rate;
    plan.seconds = o.seconds;
    try {
      return role == "producer" ? producer_main(spec, plan) : consumer_main(spec, plan.mode);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ringcast_bench_large %s (%s, %zu B): %s\n", role.c_str(), kind.c_str(), spec.size,
                   e.what());
      return 2;
    }
  }
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);
  return harness_main(o, command_line);
}
