// ringcast: create, publish to, subscribe to, inspect, reap and remove rings;
// mint broker tokens.
// Flag parsing and wiring only; everything else is the library.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "guarded_main.hpp"
#include "message_input.hpp"
#include "parse_flags.hpp"
#include "start_at_flag.hpp"
#include "stop_signals.hpp"
#include "token_secret.hpp"
#include <fmt/format.h>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/token.hpp"
#include "top/model.hpp"
#include "top/render.hpp"

namespace {

using namespace ringcast;
using namespace std::chrono_literals;

int report(const std::string& path, const Error& e) {
  // An error of open or create names the path itself (Error::path).
  fmt::print(stderr, "ringcast: {}{}\n", e.path.empty() ? path + ": " : "", e.message());
  return 1;
}

// "64 KiB" for sizes that are whole KiB/MiB, else "1000 bytes".
std::string size_text(std::uint64_t bytes) {
  if (bytes >= (1U << 20) && bytes % (1U << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1U << 10) && bytes % (1U << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

int cmd_create(const std::string& path, std::uint64_t capacity, const std::string& mode_text, bool lossy, bool wakeups,
               bool force, const std::string& max_message_text, bool separate_slots) {
  CreateOptions options;
  std::size_t parsed = 0;
  const unsigned long mode = std::stoul(mode_text, &parsed, 8);
  if (parsed != mode_text.size() || mode > 07777) throw std::invalid_argument("mode");
  options.mode = static_cast<mode_t>(mode);
  options.lossy = lossy;
  options.wakeups = wakeups;
  options.replace = force;
  options.separate_slots = separate_slots;
  options.claim_producer = false;
  if (!max_message_text.empty()) {
    const auto max_message = broker::parse_size(max_message_text);
    if (!max_message) {
      fmt::print(stderr, "ringcast: --max-message: '{}' is not a size (bytes, or with a unit: 200, 64k, 1m)\n",
                 max_message_text);
      return tools::kUsageExit;
    }
    options.max_message = *max_message;
  }
  auto ring = BroadcastRing::create(path, capacity, options);
  if (!ring) {
    if (ring.error().code == Errc::payload_too_large) {
      fmt::print(stderr,
                 "ringcast: {}: --max-message {} is more than {} slots allow: at most {} bytes (a message may take "
                 "half the ring)\n",
                 path, ring.error().found, capacity, ring.error().expected);
      return 1;
    }
    return report(path, ring.error());
  }
  fmt::print("created {} (capacity {}, max message {}, {} bytes{}{}{})\n", path, capacity,
             size_text(ring->max_message()), layout::file_size(capacity), lossy ? ", lossy" : "",
             wakeups ? ", wakeups" : "", separate_slots ? ", slots in PATH.slots" : "");
  return 0;
}

bool has_dead_consumer(const RingStatus& s) {
  return std::any_of(std::begin(s.consumers), std::end(s.consumers),
                     [](const ConsumerStatus& c) { return c.active && !c.owner_alive; });
}

int cmd_pub(const std::string& path, bool binary) {
  tools::catch_stop_signals();  // before the claim, as in cmd_sub
  auto ring = BroadcastRing::open(path);
  if (!ring) return report(path, ring.error());
  if (auto claimed = ring->claim_producer(); !claimed) return report(path, claimed.error());
  const char* what = binary ? "message" : "line";
  tools::MessageInput input(STDIN_FILENO, ring->max_message(), binary);
  std::uint64_t number = 0;
  std::uint64_t published = 0;
  std::uint64_t rejected = 0;
  bool dead_hinted = false;
  int status = 0;
  while (!tools::stop_requested()) {
    const tools::MessageInput::Next next = input.next();
    using S = tools::MessageInput::Status;
    if (next.status == S::kInterrupted) continue;  // the loop checks stop_requested()
    if (next.status == S::kEnd) break;
    if (next.status == S::kReadError) {
      fmt::print(stderr, "ringcast: reading stdin: {}\n", std::strerror(next.sys_errno));
      status = 1;
      break;
    }
    ++number;
    if (next.status == S::kTruncated) {
      fmt::print(stderr,
                 "ringcast: message {}: the input ends inside its frame ({} of its bytes announced); not "
                 "published\n",
                 number, next.length);
      status = 1;
      break;
    }
    if (next.status == S::kTooLong) {
      fmt::print(stderr, "ringcast: {} {}: {} bytes, over the ring's max message of {} bytes; not published\n", what,
                 number, next.length, ring->max_message());
      ++rejected;
      continue;
    }
    Errc e = Errc::full;
    // Back-pressure: wait for the slowest consumer, waking regularly for
    // signals; once, when a consumer that died is what holds the ring full,
    // say how to free it.
    while (!tools::stop_requested() && (e = ring->push_wait(next.data, 200ms)) == Errc::timed_out) {
      if (!dead_hinted && has_dead_consumer(ring->status())) {
        fmt::print(
            stderr,
            "ringcast: the ring is full and a consumer that died holds it back; free it with: ringcast reap {}\n",
            path);
        dead_hinted = true;
      }
    }
    if (e != Errc::ok) {
      if (tools::stop_requested()) break;
      fmt::print(stderr, "ringcast: {} {}: {}\n", what, number, to_string(e));
      return 1;
    }
    ++published;
  }
  fmt::print(stderr, "ringcast: published {} message(s){}\n", published,
             rejected ? fmt::format(", rejected {} over-long {}(s)", rejected, what) : "");
  return rejected == 0 ? status : 1;
}

// One message as one line of text: printable ASCII as is, a backslash doubled,
// every other byte (newlines included) as \xNN; or all of it as hex. `out` is
// reused from call to call.
void print_payload(std::span<const std::byte> payload, bool hex, std::string& out) {
  out.clear();
  for (std::byte b : payload) {
    const auto c = static_cast<unsigned char>(b);
    if (hex) {
      out += fmt::format("{:02x}", c);
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// One message as a binary frame (tools/common/message_input.hpp).
void write_frame(std::span<const std::byte> payload) {
  const auto header = tools::frame_header(static_cast<std::uint32_t>(payload.size()));
  std::fwrite(header.data(), 1, header.size(), stdout);
  std::fwrite(payload.data(), 1, payload.size(), stdout);
}

// Most messages drained per call: the cursor is published once per batch.
constexpr std::size_t kSubBatch = 256;

int cmd_sub(const std::string& path, std::uint64_t count, bool hex, bool binary, StartAt start) {
  // Before registering: a SIGTERM that lands just after register_consumer
  // must still end in the loop below, which unregisters, not kill the process
  // with the entry still active.
  tools::catch_stop_signals();
  auto ring = BroadcastRing::open(path);
  if (!ring) return report(path, ring.error());
  auto id = ring->register_consumer(start);
  if (!id) return report(path, id.error());
  fmt::print(stderr, "ringcast: subscribed to {} as consumer {}{}\n", path, *id,
             start == StartAt::kOldest ? fmt::format(", from position {}", ring->position(*id)) : "");
  std::uint64_t received = 0;
  std::string line;
  // drain hands each message over where it lies (in the ring itself on a
  // blocking ring): no copy before stdout's.
  const auto deliver = [&](std::span<const std::byte> payload) {
    if (binary) {
      write_frame(payload);
    } else {
      print_payload(payload, hex, line);
    }
    ++received;
  };
  // Waiting takes a message of at most 52 bytes here; a longer one stays in
  // the ring (buffer_too_small) for the next drain.
  alignas(8) std::array<std::byte, kMaxPayload> small{};
  int status = 0;
  while (!tools::stop_requested() && (count == 0 || received < count)) {
    const std::uint64_t room = count == 0 ? kSubBatch : std::min<std::uint64_t>(count - received, kSubBatch);
    const BatchResult batch = ring->drain(*id, deliver, room);
    Errc e = batch.status;
    std::uint64_t missed = batch.missed;
    if (batch.count == 0 && e == Errc::empty) {
      std::fflush(stdout);  // everything so far is out before we sleep
      const RecvResult r = ring->recv_wait(*id, small, 200ms);
      if (r.status == Errc::ok) deliver(std::span<const std::byte>(small.data(), r.length));
      e = r.status == Errc::buffer_too_small ? Errc::ok : r.status;
      missed = r.missed;
    }
    if (std::ferror(stdout)) {
      fmt::print(stderr, "ringcast: writing stdout: {}\n", std::strerror(errno));
      status = 1;
      break;
    }
    if (e == Errc::lapped) {
      // Positions count 64-byte slots: messages, on a ring of one slot per message.
      if (ring->max_message() <= kMaxPayload) {
        fmt::print(stderr, "ringcast: lapped: {} message(s) lost\n", missed);
      } else {
        fmt::print(stderr, "ringcast: lapped: the messages of {} slot(s) lost\n", missed);
      }
    } else if (e != Errc::ok && e != Errc::empty && e != Errc::timed_out && e != Errc::stalled) {
      fmt::print(stderr, "ringcast: receive: {}\n", to_string(e));
      status = 1;
      break;
    }
  }
  std::fflush(stdout);
  // The handle's destructor unregisters the consumer.
  fmt::print(stderr, "ringcast: received {} message(s), unsubscribed\n", received);
  return status;
}

// ring-top's JSON object (docs/ring-top.md, "JSON") for this one ring, from
// a single sample: no rates yet (null), no interval.
int print_json(const std::string& path) {
  top::MonitorOptions options;
  options.targets = {path};
  auto monitor = top::Monitor::create(std::move(options));
  if (!monitor) {
    for (const std::string& problem : monitor.error()) fmt::print(stderr, "ringcast: {}\n", problem);
    return 1;
  }
  fmt::print("{}", top::render_json(monitor->refresh(), std::nullopt));
  return 0;
}

int cmd_info(const std::string& path, bool json) {
  auto ring = BroadcastRing::open(path, {.read_only = true});
  if (!ring) return report(path, ring.error());
  if (json) return print_json(path);
  const RingStatus s = ring->status();
  fmt::print("ring        {}\n", path);
  fmt::print("capacity    {} slots x {} B ({} bytes){}{}{}\n", s.capacity, kSlotBytes, layout::file_size(s.capacity),
             (s.flags & kFlagLossy) ? ", lossy" : "", (s.flags & kFlagWakeups) ? ", wakeups" : "",
             (s.flags & kFlagSeparateSlots) ? ", slots in PATH.slots" : "");
  if (s.max_message <= kMaxPayload) {
    fmt::print("max message {} bytes (one slot per message)\n", s.max_message);
  } else {
    fmt::print("max message {} bytes (up to {} slots per message)\n", s.max_message,
               layout::block_slots(s.max_message));
  }
  // The words are ring-top's (to_string(ProducerState)).
  switch (s.producer) {
    case ProducerState::kLive:
      fmt::print("producer    position {}, live (pid {})\n", s.producer_seq, s.producer_pid);
      break;
    case ProducerState::kNone:
      fmt::print("producer    position {}, none yet\n", s.producer_seq);
      break;
    case ProducerState::kLeft:
      fmt::print("producer    position {}, left (released the role; the next producer continues)\n", s.producer_seq);
      break;
    case ProducerState::kDead:
      fmt::print("producer    position {}, dead (pid {} ended holding the role; the next producer continues)\n",
                 s.producer_seq, s.producer_pid);
      break;
  }
  if (s.half_written_slot) {
    fmt::print(
        "            the slot at position {} is half-written by a producer that died; the next\n"
        "            producer repairs it on claim, readers get producer_dead until then\n",
        s.producer_seq);
  }
  fmt::print("published   {} message(s), {} payload bytes\n", s.messages, s.payload_bytes);
  if (s.upstream_gaps > 0) {
    // Messages, counted from the relay's Ringcast-Msg numbers (docs/scale-out.md, "Sequence headers").
    fmt::print("upstream    {} lost before the producer, in {} gaps (NATS ingress)\n", s.upstream_lost,
               s.upstream_gaps);
  }
  fmt::print("consumers   {} active\n", [&] {
    int n = 0;
    for (const auto& c : s.consumers) n += c.active ? 1 : 0;
    return n;
  }());
  bool dead = false;
  for (std::uint32_t i = 0; i < kMaxConsumers; ++i) {
    const ConsumerStatus& c = s.consumers[i];
    if (!c.active) continue;
    dead = dead || !c.owner_alive;
    fmt::print("  [{:2}] cursor {:>12}  lag {:>10} ({:5.1f}%)  pid {:>7}  {}\n", i, c.cursor, c.lag,
               100.0 * static_cast<double>(c.lag) / static_cast<double>(s.capacity), c.owner_pid,
               c.owner_alive ? "alive" : "DEAD (owner exited without unregistering)");
  }
  if (dead) fmt::print("dead consumers hold the producer back; free them with: ringcast reap {}\n", path);
  return 0;
}

int cmd_reap(const std::string& path) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return report(path, ring.error());
  auto reaped = ring->reap_dead_consumers();
  if (!reaped) return report(path, reaped.error());
  fmt::print("reaped {} dead consumer(s)\n", *reaped);
  return 0;
}

int cmd_rm(const std::string& path) {
  // Refuses what is not recognisably a ring: a typo must not delete a file.
  if (auto removed = BroadcastRing::remove(path); !removed) return report(path, removed.error());
  return 0;
}

// What `ringcast token` signs (docs/security.md, "Tokens").
struct TokenRequest {
  std::string subject;
  std::vector<std::string> subscribe;
  std::vector<std::string> publish;
  bool no_subscribe = false;
  bool no_publish = false;
  std::int64_t ttl_seconds = 3600;
  std::string secret_file;
};

int cmd_token(const TokenRequest& r) {
  std::string secret;
  if (const auto wrong = ringcast::tools::read_token_secret(r.secret_file, secret)) {
    fmt::print(stderr, "ringcast token: {}\n", *wrong);
    return ringcast::tools::kUsageExit;
  }
  if (secret.empty()) {
    fmt::print(stderr, "ringcast token: no secret: pass --token-secret-file or set {}\n",
               ringcast::tools::kTokenSecretEnv);
    return ringcast::tools::kUsageExit;
  }
  if (r.ttl_seconds <= 0) {
    fmt::print(stderr, "ringcast token: --ttl must be positive\n");
    return ringcast::tools::kUsageExit;
  }
  // A direction without a list is unrestricted in the token: say so, on stderr.
  auto globs = [](const std::vector<std::string>& list, bool none, const char* what) {
    if (none) return std::optional<std::vector<std::string>>(std::vector<std::string>{});
    if (list.empty()) {
      fmt::print(stderr, "ringcast token: note: no --{0} (or --no-{0}): the token may {0} to every channel\n", what);
      return std::optional<std::vector<std::string>>();
    }
    return std::optional<std::vector<std::string>>(list);
  };
  broker::Grant grant{r.subject, std::chrono::system_clock::now() + std::chrono::seconds(r.ttl_seconds),
                      globs(r.subscribe, r.no_subscribe, "subscribe"), globs(r.publish, r.no_publish, "publish")};
  const auto token = broker::mint_token(grant, secret);
  if (!token) {
    fmt::print(stderr, "ringcast token: {}\n", broker::describe(token.error()));
    return ringcast::tools::kUsageExit;
  }
  fmt::print("{}\n", *token);
  return 0;
}

// main's body; main turns an exception that escapes it into a message.
int run(int argc, char** argv) {
  CLI::App app{
      "ringcast: shared-memory broadcast rings (create, pub, sub, info, reap, rm) and broker tokens (token)\n"
      "  ringcast create /dev/shm/ticks.ring --capacity 4096\n"
      "  ringcast sub /dev/shm/ticks.ring &  echo hello | ringcast pub /dev/shm/ticks.ring"};
  app.require_subcommand(1);

  std::string path;
  std::uint64_t capacity = 0;
  std::string mode = "0600";
  bool lossy = false, wakeups = false, force = false, json = false, hex = false, binary = false;
  bool separate_slots = false;
  std::uint64_t count = 0;
  std::string max_message;

  auto* create = app.add_subcommand("create", "Create a ring file");
  create->add_option("PATH", path, "Ring file, e.g. /dev/shm/ticks.ring")->required();
  create->add_option("--capacity,-c", capacity, "Number of 64-byte slots (2..2^30)")->required();
  create->add_option("--mode", mode, "File mode, octal")->default_val("0600");
  create->add_flag("--lossy", lossy, "Producer never waits; slow consumers are lapped");
  create->add_flag("--wakeups", wakeups,
                   "Full fences on every push and receive, for exact wake-ups without membarrier(2) "
                   "(blocking waits work on every ring)");
  create->add_flag("--force", force, "Replace an existing file");
  create->add_flag("--separate-slots", separate_slots,
                   "Put the slots in PATH.slots, which only the owner may write (--mode less group/other write): "
                   "readers then need write permission on PATH and read permission alone on PATH.slots");
  create->add_option("--max-message", max_message,
                     "Largest message in bytes, or with a unit k, m (64k, 1m); default 64k, or the most the "
                     "capacity allows (a message may take half the ring: 64k needs 2050 slots). Up to 52 keeps one "
                     "slot per message");

  // The binary framing, defined in tools/common/message_input.hpp.
  constexpr const char* kFraming =
      "--binary frames each message as a 4-byte little-endian length n, then its n bytes, with nothing between "
      "frames: `ringcast sub --binary A | ringcast pub --binary B` copies every message of ring A to ring B byte for "
      "byte.";
  auto* pub = app.add_subcommand(
      "pub", "Publish one message per stdin line (newline not included), or per frame with --binary");
  pub->add_option("PATH", path, "Ring file")->required();
  pub->add_flag("--binary", binary, "Read length-prefixed binary frames instead of lines");
  pub->footer(std::string("A message may be as long as the ring's max message (ringcast info shows it); a longer line "
                          "or frame is reported with its number and skipped, and pub then exits with status 1. ") +
              kFraming);

  auto* sub = app.add_subcommand("sub", "Subscribe and print each message on its own line");
  sub->add_option("PATH", path, "Ring file")->required();
  sub->add_option("--count,-n", count, "Exit after N messages (0: until SIGINT/SIGTERM)");
  auto* hex_flag = sub->add_flag("--hex", hex, "Print payloads as hex");
  sub->add_flag("--binary", binary, "Write each message as a length-prefixed binary frame instead of a line")
      ->excludes(hex_flag);
  sub->footer(std::string("A line shows printable ASCII as is, a backslash as \\\\ and every other byte (a newline "
                          "too) as \\xNN. ") +
              kFraming);
  StartAt start = StartAt::kLatest;
  tools::add_start_at_option(*sub, start, "the subscriber joins");

  auto* info = app.add_subcommand("info", "Show the header and the consumer table");
  info->add_option("PATH", path, "Ring file")->required();
  info->add_flag("--json", json,
                 "Machine-readable output: ring-top --json's object for this ring (one sample, no rates)");

  auto* reap = app.add_subcommand("reap", "Free consumer entries whose owner has died");
  reap->add_option("PATH", path, "Ring file")->required();

  auto* rm = app.add_subcommand("rm", "Remove a ring file (refuses files that are not rings)");
  rm->add_option("PATH", path, "Ring file")->required();

  TokenRequest treq;
  auto* token = app.add_subcommand(
      "token", std::string("Mint an HS256 token for the broker's AUTH <sub> <token>; the secret comes from "
                           "--token-secret-file or ") +
                   ringcast::tools::kTokenSecretEnv + ", never the command line");
  token->add_option("--sub", treq.subject, "The client's name (the token's sub claim)")->required();
  auto* tsub = token->add_option("--subscribe", treq.subscribe,
                                 "Channel globs it may subscribe to (PSUBSCRIBE syntax; repeat or list several)");
  auto* tpub = token->add_option("--publish", treq.publish, "Channel globs it may publish to");
  token->add_flag("--no-subscribe", treq.no_subscribe, "It may subscribe to nothing")->excludes(tsub);
  token->add_flag("--no-publish", treq.no_publish, "It may publish to nothing")->excludes(tpub);
  token->add_option("--ttl", treq.ttl_seconds, "Lifetime: seconds, or with a unit s, m, h, d (e.g. 1h)")
      ->transform(
          CLI::AsNumberWithUnit(std::map<std::string, std::int64_t>{{"s", 1}, {"m", 60}, {"h", 3600}, {"d", 86400}},
                                CLI::AsNumberWithUnit::CASE_SENSITIVE))
      ->default_str("1h");
  token->add_option("--token-secret-file", treq.secret_file, "File whose first line is the secret (>= 32 bytes)")
      ->check(CLI::ExistingFile);

  if (const auto exit_status = ringcast::tools::parse_flags(app, argc, argv)) return *exit_status;
  try {
    if (*create) return cmd_create(path, capacity, mode, lossy, wakeups, force, max_message, separate_slots);
  } catch (const std::exception&) {
    fmt::print(stderr, "ringcast: --mode must be an octal number such as 0600\n");
    return 2;
  }
  if (*pub) return cmd_pub(path, binary);
  if (*sub) return cmd_sub(path, count, hex, binary, start);
  if (*info) return cmd_info(path, json);
  if (*reap) return cmd_reap(path);
  if (*rm) return cmd_rm(path);
  if (*token) return cmd_token(treq);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ringcast", [&] { return run(argc, argv); });
}
