// ringcast-broker: runs the Redis-protocol pub/sub broker (docs/broker.md).
// Flag parsing and wiring only; everything else is in ringcast::broker.

#include <csignal>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "broker_flags.hpp"
#include "parse_flags.hpp"
#include "stop_signals.hpp"
#include "ringcast/broker/broker.hpp"

int main(int argc, char** argv) {
  using ringcast::broker::BrokerConfig;
  BrokerConfig cfg;
  CLI::App app{"ringcast-broker: Redis-protocol (RESP2/RESP3) pub/sub fan-out broker"};
  ringcast::tools::BrokerFlags flags;
  app.add_option("--bind", cfg.bind_address, "Address to listen on")->capture_default_str();
  app.add_option("--port", cfg.port, "TCP port; 0 picks a free one (printed at startup)")
      ->capture_default_str();
  int ws_port = -1;
  std::string ws_max_message = "1mb";
  app.add_option("--ws-port", ws_port,
                 "WebSocket + JSON port on the --bind address (PopSub's protocol, the live page on /); "
                 "0 picks a free one; off unless given")
      ->check(CLI::Range(0, 65535));
  app.add_option("--ws-max-message", ws_max_message,
                 "Largest WebSocket message a client may send (larger: close 1009)")
      ->capture_default_str();
  flags.add_to(app, cfg);
  if (const auto exit_status = ringcast::tools::parse_flags(app, argc, argv)) return *exit_status;

  if (const auto wrong = flags.apply(cfg)) {
    fmt::print(stderr, "ringcast-broker: {}\n", *wrong);
    return 2;
  }
  if (ws_port >= 0) cfg.ws_port = static_cast<std::uint16_t>(ws_port);
  const auto ws_max = ringcast::broker::parse_size(ws_max_message);
  if (!ws_max || *ws_max == 0) {
    fmt::print(stderr, "ringcast-broker: --ws-max-message must be a size > 0 (e.g. 1mb)\n");
    return 2;
  }
  cfg.ws_max_message = *ws_max;

  // Block the stop signals before any thread starts, so the I/O threads inherit
  // the mask and sigwait below is the only receiver.
  const sigset_t stop_signals = ringcast::tools::block_stop_signals();

  auto broker = ringcast::broker::Broker::start(cfg);
  if (!broker) {
    fmt::print(stderr, "ringcast-broker: {}\n", broker.error().message());
    return 1;
  }
  // Tests and scripts read the port from this line (--port 0).
  fmt::print("ringcast-broker listening on {}:{}\n", cfg.bind_address, (*broker)->port());
  if (cfg.ws_port) {
    fmt::print("ringcast-broker websocket on ws://{}:{}/ (live page: http://{}:{}/)\n", cfg.bind_address,
               (*broker)->ws_port(), cfg.bind_address, (*broker)->ws_port());
  }
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*broker)->stop();
  (*broker)->wait();
  return 0;
}
