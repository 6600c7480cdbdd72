// ringcast-relay: drains shared-memory rings into the in-process broker and/or
// NATS (docs/relay.md). Flag parsing and wiring only; everything else is in
// ringcast::relay.
//
// Exit status: 0 after SIGINT/SIGTERM, 1 when setup fails, 2 on a usage error,
// 3 when a ring failed at run time. The last log line says which.
#include <signal.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nats/nats.h>

#include "broker_flags.hpp"
#include "settings.hpp"
#include "start_at_flag.hpp"
#include "stop_signals.hpp"
#include "ringcast/relay/metrics_server.hpp"
#include "ringcast/relay/relay.hpp"

namespace {

using namespace ringcast;
using namespace ringcast::relay;

int usage(const std::string& text) {
  fmt::print(stderr, "ringcast-relay: {}\n", text);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ringcast-relay: drains shared-memory rings into an in-process Redis-protocol broker and/or NATS.\n"
      "The broker runs unless --nats is given without --listen. See docs/relay.md."};
  std::vector<std::string> ring_specs;
  std::vector<std::string> nats_in_specs;
  std::vector<std::string> nats_in_broker_specs;
  NatsIngressConfig ingress;
  std::string nats_in_pending_bytes = "64mb";
  std::string listen = "127.0.0.1:6390";
  std::string nats_url;
  std::string nats_buffer = "8mb";
  unsigned nats_reconnect_wait_ms = 250;
  std::string metrics;
  std::size_t batch = 256;

  broker::BrokerConfig cfg;
  tools::BrokerFlags broker_flags;

  app.add_option("--ring", ring_specs,
                 "PATH=CHANNEL: relay the ring at PATH to CHANNEL (broker) / SUBJECT (NATS). "
                 "PATH=PREFIX* : topic in payload, published on PREFIX+topic (docs/relay.md). Repeatable. "
                 "Required unless --nats-in or --nats-in-broker is given.");
  app.add_option("--nats-in", nats_in_specs,
                 "SUBJECT=RING_PATH: produce into the ring at RING_PATH (created if absent) every message of the "
                 "NATS subscription SUBJECT (wildcards allowed; needs --nats). Repeatable. docs/scale-out.md");
  app.add_option("--nats-in-broker", nats_in_broker_specs,
                 "SUBJECT[=CHANNEL]: publish every message of SUBJECT to the embedded broker on CHANNEL "
                 "('{subject}' in it, or no CHANNEL: the message's subject). Runs the broker. Repeatable.");
  app.add_option("--nats-in-capacity", ingress.ring_capacity, "Slots of a ring --nats-in creates")
      ->capture_default_str();
  app.add_flag("--nats-in-lossy", ingress.ring_lossy,
               "A ring --nats-in creates is lossy (never blocks NATS delivery; slow readers are lapped)");
  app.add_option("--nats-in-pending-msgs", ingress.pending_msgs,
                 "libnats pending limit per --nats-in subscription, messages (-1: none); beyond it libnats drops "
                 "(counted, and seen as a gap)")
      ->capture_default_str();
  app.add_option("--nats-in-pending-bytes", nats_in_pending_bytes,
                 "libnats pending limit per --nats-in subscription, bytes")
      ->capture_default_str();
  auto* listen_opt =
      app.add_option("--listen", listen, "Broker listen address HOST:PORT (port 0: the kernel chooses, printed)")
          ->capture_default_str();
  app.add_option("--nats", nats_url, "Also (or only) publish to NATS: nats://HOST:PORT[,nats://...]");
  app.add_option("--nats-reconnect-buffer", nats_buffer,
                 "Bytes libnats buffers while reconnecting; beyond it publishes are dropped and counted")
      ->capture_default_str();
  std::size_t nats_batch = 1;
  app.add_option("--nats-batch", nats_batch,
                 "Ring messages per NATS message (1..4096; fixed-subject rings). 1: one NATS message each, readable "
                 "by any NATS client; more: batches only a ringcast ingress unpacks (docs/scale-out.md)")
      ->capture_default_str();
  app.add_option("--nats-reconnect-wait-ms", nats_reconnect_wait_ms, "Pause between NATS reconnect attempts")
      ->capture_default_str();
  app.add_option("--metrics", metrics, "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9390)");
  app.add_option("--batch", batch, "Most messages taken from a ring per drain")->capture_default_str();
  StartAt start = StartAt::kLatest;
  tools::add_start_at_option(app, start, "the relay opens a ring file it has not relayed before (every --ring)");

  broker_flags.add_to(app, cfg);  // as ringcast-broker (docs/broker.md)
  if (const auto exit_status = ringcast::tools::parse_settings(app, argc, argv)) return *exit_status;

  RelayConfig config;
  config.batch = batch;
  for (const auto& spec : ring_specs) {
    auto route = parse_ring_route(spec);
    if (!route) return usage(route.error().detail);
    route->start = start;
    config.rings.push_back(std::move(*route));
  }
  if (ring_specs.empty() && nats_in_specs.empty() && nats_in_broker_specs.empty()) {
    return usage("give --ring, --nats-in or --nats-in-broker (--help)");
  }
  if ((!nats_in_specs.empty() || !nats_in_broker_specs.empty()) && nats_url.empty()) {
    return usage("--nats-in and --nats-in-broker need --nats URL");
  }
  for (const auto& spec : nats_in_specs) {
    auto route = parse_nats_ring_route(spec);
    if (!route) return usage(route.error().detail);
    config.nats_rings_in.push_back(std::move(*route));
  }
  for (const auto& spec : nats_in_broker_specs) {
    auto route = parse_nats_broker_route(spec);
    if (!route) return usage(route.error().detail);
    config.nats_broker_in.push_back(std::move(*route));
  }
  {
    const auto bytes = broker::parse_size(nats_in_pending_bytes);
    if (!bytes || *bytes > static_cast<std::size_t>(INT32_MAX)) return usage("--nats-in-pending-bytes: bad size");
    ingress.pending_bytes = static_cast<int>(*bytes);
  }
  config.nats_in = ingress;
  // The broker runs unless NATS is the only sink: --nats without --listen,
  // and no --nats-in-broker.
  const bool broker_on = nats_url.empty() || listen_opt->count() > 0 || !nats_in_broker_specs.empty();
  if (broker_on) {
    auto hp = parse_host_port(listen);
    if (!hp) return usage("--listen " + hp.error().detail);
    cfg.bind_address = hp->host;
    cfg.port = hp->port;
    if (const auto wrong = broker_flags.apply(cfg)) return usage(*wrong);
    config.broker = cfg;
  }
  if (!nats_url.empty()) {
    NatsConfig n;
    n.url = nats_url;
    const auto buf = broker::parse_size(nats_buffer);
    if (!buf || *buf > static_cast<std::size_t>(INT32_MAX)) return usage("--nats-reconnect-buffer: bad size");
    n.reconnect_buffer_bytes = static_cast<int>(*buf);
    n.reconnect_wait = std::chrono::milliseconds(nats_reconnect_wait_ms);
    n.batch = nats_batch;
    config.nats = n;
  }
  std::optional<HostPort> metrics_at;
  if (!metrics.empty()) {
    auto hp = parse_host_port(metrics);
    if (!hp) return usage("--metrics " + hp.error().detail);
    metrics_at = *hp;
  }

  // Block the stop signals before any thread starts (broker, libnats, readers),
  // so they inherit the mask and the sigtimedwait below is the only receiver.
  const sigset_t stop_signals = ringcast::tools::block_stop_signals();

  auto relay = Relay::start(std::move(config));
  if (!relay) {
    fmt::print(stderr, "ringcast-relay: {}\n", relay.error().message());
    return 1;
  }
  Relay& r = **relay;
  // Tests and scripts read the ports from these lines.
  if (r.broker() != nullptr) fmt::print("ringcast-relay listening on {}:{}\n", cfg.bind_address, r.broker()->port());
  if (r.broker() != nullptr && r.broker()->ws_port() != 0) {
    const std::string at = tools::url_authority(cfg.bind_address, r.broker()->ws_port());
    fmt::print("ringcast-relay websocket on ws://{}/ (live page: http://{}/)\n", at, at);
  }
  if (!nats_url.empty() && !ring_specs.empty()) fmt::print("ringcast-relay publishing to NATS {}\n", nats_url);
  for (const auto& i : r.ingress_stats()) {
    fmt::print("ringcast-relay subscribed to NATS {} into {} {}\n", i.subject, i.to_ring ? "ring" : "channel",
               i.target);
  }
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_at) {
    auto m = MetricsServer::start(metrics_at->host, metrics_at->port, [&r] { return r.prometheus_text(); });
    if (!m) {
      fmt::print(stderr, "ringcast-relay: {}\n", m.error().message());
      r.stop();
      return 1;
    }
    metrics_server = std::move(*m);
    fmt::print("ringcast-relay metrics on http://{}:{}/metrics\n", metrics_at->host, metrics_server->port());
  }
  std::fflush(stdout);

  // Wait for a stop signal, checking for a failed ring a few times a second.
  int exit_status = 0;
  std::string why;
  for (;;) {
    const timespec tick{0, 200'000'000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      why = sig == SIGINT ? "received SIGINT" : "received SIGTERM";
      break;
    }
    if (std::string f = r.failure(); !f.empty()) {
      why = "a ring failed: " + f;
      exit_status = 3;
      break;
    }
  }
  fmt::print(stderr, "ringcast-relay: stopping: {}\n", why);
  if (metrics_server) metrics_server->stop();
  r.stop();  // readers unregister their consumers (logged per ring)
  std::uint64_t relayed = 0;
  for (const auto& s : r.ring_stats()) relayed += s.relayed;
  fmt::print(stderr, "ringcast-relay: stopped ({}); relayed {} messages from {} ring(s); exit status {}\n", why,
             relayed, r.ring_stats().size(), exit_status);
  for (const auto& i : r.ingress_stats()) {
    fmt::print(stderr, "ringcast-relay: NATS {} into {}: received {}, delivered {}, gaps {} (lost {}), dropped {}\n",
               i.subject, i.target, i.received, i.delivered, i.gaps, i.lost, i.dropped);
  }
  relay->reset();
  if (!nats_url.empty()) nats_CloseAndWait(2000);
  return exit_status;
}
