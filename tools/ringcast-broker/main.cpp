// ringcast-broker: runs the Redis-protocol pub/sub broker (docs/broker.md).
// Flag parsing and wiring only; everything else is in ringcast::broker.

#include <csignal>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "ringcast/broker/broker.hpp"

namespace {

// "32mb", "8m", "64k", "1gb", "4096": Redis-style sizes (k/kb = 1024).
std::optional<std::size_t> parse_size(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t mult = 1;
  auto strip = [&](std::string_view suffix, std::size_t m) {
    if (s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0) {
      s.resize(s.size() - suffix.size());
      mult = m;
      return true;
    }
    return false;
  };
  strip("gb", 1ull << 30) || strip("mb", 1ull << 20) || strip("kb", 1ull << 10) ||
      strip("g", 1ull << 30) || strip("m", 1ull << 20) || strip("k", 1ull << 10) || strip("b", 1);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(s) * mult;
}

}  // namespace

int main(int argc, char** argv) {
  using ringcast::broker::BrokerConfig;
  BrokerConfig cfg;
  CLI::App app{"ringcast-broker: Redis-protocol (RESP2/RESP3) pub/sub fan-out broker"};
  std::string policy = "disconnect";
  std::string hard = "32mb";
  std::string soft = "8mb";
  unsigned soft_seconds = 60;
  std::string budget = "256kb";
  std::string max_bulk = "32mb";
  unsigned auth_timeout_ms = 10000;
  std::string password_file;
  app.add_option("--bind", cfg.bind_address, "Address to listen on")->capture_default_str();
  app.add_option("--port", cfg.port, "TCP port; 0 picks a free one (printed at startup)")
      ->capture_default_str();
  app.add_option("--io-threads", cfg.io_threads, "I/O threads; 0 = one per core")->capture_default_str();
  app.add_option("--overflow-policy", policy,
                 "What a full connection queue does: drop-oldest, drop-newest or disconnect")
      ->capture_default_str();
  app.add_option("--hard-limit", hard, "Per-connection output limit that applies at once")
      ->capture_default_str();
  app.add_option("--soft-limit", soft, "Per-connection output limit that applies after --soft-seconds (0 = off)")
      ->capture_default_str();
  app.add_option("--soft-seconds", soft_seconds, "How long the soft limit may be exceeded")
      ->capture_default_str();
  app.add_option("--write-budget", budget, "Bytes per connection per writer wakeup")->capture_default_str();
  app.add_flag("--dedupe", cfg.dedupe,
               "Deliver one frame per connection however many of its subscriptions match");
  app.add_option("--max-bulk-len", max_bulk, "Longest request argument")->capture_default_str();
  app.add_option("--max-args", cfg.max_args, "Most arguments per request")->capture_default_str();
  app.add_option("--max-subscriptions", cfg.max_subscriptions, "Channels + patterns per connection")
      ->capture_default_str();
  app.add_option("--max-connections", cfg.max_connections, "Most simultaneous clients")
      ->capture_default_str();
  app.add_option("--auth-timeout-ms", auth_timeout_ms,
                 "Close connections that have not authenticated within this time")
      ->capture_default_str();
  auto* pass_opt = app.add_option("--requirepass", cfg.requirepass,
                                  "Require AUTH with this password (prefer --requirepass-file)");
  app.add_option("--requirepass-file", password_file,
                 "Read the password from this file (first line)")
      ->excludes(pass_opt)
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);

  const auto p = ringcast::broker::parse_overflow_policy(policy);
  if (!p) {
    fmt::print(stderr, "ringcast-broker: --overflow-policy must be drop-oldest, drop-newest or disconnect\n");
    return 2;
  }
  cfg.overflow_policy = *p;
  const auto h = parse_size(hard);
  const auto s = parse_size(soft);
  const auto b = parse_size(budget);
  const auto mb = parse_size(max_bulk);
  if (!h || !s || !b || !mb) {
    fmt::print(stderr, "ringcast-broker: sizes are numbers with an optional k/kb/m/mb/g/gb suffix\n");
    return 2;
  }
  cfg.queue_limits.hard_bytes = *h;
  cfg.queue_limits.soft_bytes = *s;
  cfg.queue_limits.soft_duration = std::chrono::seconds(soft_seconds);
  cfg.write_budget_bytes = *b;
  cfg.max_bulk_len = *mb;
  cfg.auth_timeout = std::chrono::milliseconds(auth_timeout_ms);
  if (!password_file.empty()) {
    std::ifstream in(password_file);
    std::getline(in, cfg.requirepass);
    if (!cfg.requirepass.empty() && cfg.requirepass.back() == '\r') cfg.requirepass.pop_back();
    if (cfg.requirepass.empty()) {
      fmt::print(stderr, "ringcast-broker: {} holds no password\n", password_file);
      return 2;
    }
  }

  // Block the stop signals before any thread starts, so the I/O threads inherit
  // the mask and sigwait below is the only receiver.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a peer that vanished mid-write is an EPIPE, not a death

  auto broker = ringcast::broker::Broker::start(cfg);
  if (!broker) {
    fmt::print(stderr, "ringcast-broker: {}\n", broker.error().message());
    return 1;
  }
  // Tests and scripts read the port from this line (--port 0).
  fmt::print("ringcast-broker listening on {}:{}\n", cfg.bind_address, (*broker)->port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*broker)->stop();
  (*broker)->wait();
  return 0;
}
