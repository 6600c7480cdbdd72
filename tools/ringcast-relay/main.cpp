// ringcast-relay: drains shared-memory rings into the in-process broker and/or
// NATS (docs/relay.md). Flag parsing and wiring only; everything else is in
// ringcast::relay.
//
// Exit status: 0 after SIGINT/SIGTERM, 1 when setup fails, 2 on a usage error,
// 3 when a ring failed at run time. The last log line says which.
#include <pthread.h>
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
#include "descriptor_limit.hpp"
#include "guarded_main.hpp"
#include "nats_in_flags.hpp"
#include "nats_tls_flags.hpp"
#include "ringcast/relay/metrics_server.hpp"
#include "ringcast/relay/relay.hpp"
#include "settings.hpp"
#include "start_at_flag.hpp"
#include "stop_signals.hpp"

namespace {

using namespace ringcast;
using namespace ringcast::relay;

int usage(const std::string& text) {
  fmt::print(stderr, "ringcast-relay: {}\n", text);
  return 2;
}

int run(int argc, char** argv) {
  CLI::App app{
      "ringcast-relay: drains shared-memory rings into an in-process Redis-protocol broker and/or NATS.\n"
      "The broker runs unless --nats is given without --listen. See docs/relay.md."};
  std::vector<std::string> ring_specs;
  std::vector<std::string> nats_in_specs;
  std::vector<std::string> nats_in_broker_specs;
  NatsIngressConfig ingress;
  std::string listen = "127.0.0.1:6390";
  std::string nats_url;
  std::string nats_buffer = "8mb";
  std::string nats_in_max_message = "0";
  unsigned nats_reconnect_wait_ms = 250;
  std::string metrics;
  std::size_t batch = 256;

  broker::BrokerConfig cfg;
  tools::BrokerFlags broker_flags;
  tools::BrokerTlsFlags broker_tls_flags;

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
  app.add_option("--nats-in-max-message", nats_in_max_message,
                 "Largest message of a ring --nats-in creates, bytes or with a unit (64k, 1m); 0: 64k, or what the "
                 "capacity allows. A longer NATS message is counted as oversize and logged")
      ->capture_default_str();
  app.add_flag("--nats-in-lossy", ingress.ring_lossy,
               "A ring --nats-in creates is lossy (never blocks NATS delivery; slow readers are lapped)");
  tools::NatsInFlags nats_in_flags;
  nats_in_flags.add_pending(app, ingress);
  auto* listen_opt =
      app.add_option("--listen", listen,
                     "Broker listen address HOST:PORT (port 0: the kernel chooses, printed; or with --tls-port turns "
                     "the plain port off)")
          ->capture_default_str();
  app.add_option("--nats", nats_url,
                 "Also (or only) publish to NATS: nats://HOST:PORT[,nats://...] (tls://HOST:PORT: over TLS)");
  tools::NatsTlsFlags nats_tls_flags;
  nats_tls_flags.add_to(app);
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
  // Credit window (docs/scale-out.md, "Credit window").
  std::uint64_t nats_window = NatsConfig{}.window;
  unsigned nats_ack_timeout_ms = static_cast<unsigned>(NatsConfig{}.ack_timeout.count());
  bool nats_at_most_once = false;
  app.add_option("--nats-window", nats_window,
                 "Core NATS, fixed-subject rings: ring positions published and not yet acknowledged by every "
                 "ringcast ingress receiving them; while that many are in flight the ring waits (its producer "
                 "meets a full ring)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))
      ->capture_default_str();
  // At least four of the ingress's keepalives (250 ms) while it is held by a
  // full ring: a shorter timeout would give up on a live ingress.
  app.add_option("--nats-ack-timeout-ms", nats_ack_timeout_ms,
                 "An ingress silent this long while the window is full is no longer waited for (it counts what "
                 "it misses as lost); at least 1000")
      ->check(CLI::Range(1000u, 3600000u))
      ->capture_default_str();
  app.add_flag("--nats-at-most-once", nats_at_most_once,
               "No credit window: publish as fast as the ring gives, whatever the ingresses take; loss is "
               "counted at the receiving side (upstream_lost)");
  // JetStream (docs/scale-out.md, "JetStream").
  std::string js_stream;
  std::vector<std::string> js_subjects;
  std::string js_max_age = "0";
  std::string js_max_bytes = "0";
  std::string js_dup_window = "2m";
  std::string js_storage = "file";
  int js_replicas = 1;
  int js_max_pending = 4096;
  unsigned js_ack_timeout_ms = 5000;
  int js_max_attempts = 30;
  app.add_option("--jetstream", js_stream,
                 "With --nats: publish into this JetStream stream with acks (at least once; created or updated "
                 "with the --stream-* limits) instead of core NATS");
  app.add_option("--stream-subjects", js_subjects,
                 "Subjects the stream captures (default: the rings' subjects; a topic route PREFIX.* gives PREFIX.>)")
      ->delimiter(',');
  app.add_option("--stream-max-age", js_max_age,
                 "Discard stream messages older than this (250ms, 30s, 15m, 24h, 7d; "
                 "0: no limit)")
      ->capture_default_str();
  app.add_option("--stream-max-bytes", js_max_bytes,
                 "Discard the oldest stream messages beyond this size (0: no limit)")
      ->capture_default_str();
  app.add_option("--stream-duplicate-window", js_dup_window,
                 "How long the stream drops a republished Nats-Msg-Id as a duplicate")
      ->capture_default_str();
  app.add_option("--stream-storage", js_storage, "file or memory (a new stream only)")
      ->check(CLI::IsMember({"file", "memory"}))
      ->capture_default_str();
  app.add_option("--stream-replicas", js_replicas, "Stream replicas in a JetStream cluster (1..5)")
      ->capture_default_str();
  app.add_option("--jetstream-max-pending", js_max_pending,
                 "Publishes awaiting their ack; at the limit the ring's reader waits (the ring fills behind it)")
      ->capture_default_str();
  app.add_option("--jetstream-ack-timeout-ms", js_ack_timeout_ms, "An ack not back within this is retried")
      ->capture_default_str();
  app.add_option("--jetstream-max-attempts", js_max_attempts,
                 "Attempts per message before it is given up (counted in js_failed, logged); 0: until stopped")
      ->capture_default_str();
  nats_in_flags.add_jetstream(app);
  app.add_option("--metrics", metrics, "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9390)");
  bool metrics_tls = false;
  app.add_flag("--metrics-tls", metrics_tls,
               "https:// on --metrics with the broker's --tls-cert-file and --tls-key-file (reloaded on SIGHUP)");
  app.add_option("--batch", batch, "Most messages taken from a ring per drain")->capture_default_str();
  StartAt start = StartAt::kLatest;
  tools::add_start_at_option(app, start, "the relay opens a ring file it has not relayed before (every --ring)");

  broker_flags.add_to(app, cfg);  // as ringcast-broker (docs/broker.md)
  broker_tls_flags.add_to(app);   // as ringcast-broker (docs/security.md, "TLS")
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
  if (const auto wrong = nats_in_flags.apply(ingress)) return usage(*wrong);
  if (const auto max_message = broker::parse_size(nats_in_max_message)) {
    ingress.ring_max_message = *max_message;
  } else {
    return usage("--nats-in-max-message: bad size");
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
    if (const auto wrong = broker_tls_flags.apply(cfg)) return usage(*wrong);
    if (const auto lowered = tools::fit_descriptor_limit(cfg)) {
      fmt::print(stderr, "ringcast-relay: warning: {}\n", *lowered);
    }
    config.broker = cfg;
  } else {
    for (const char* tls_flag :
         {"--tls-port", "--ws-tls", "--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file", "--tls-auth-clients"}) {
      if (app.get_option(tls_flag)->count() > 0) {
        return usage(std::string(tls_flag) + " is for the embedded broker, which --nats without --listen turns off");
      }
    }
  }
  if (!nats_url.empty()) {
    NatsConfig n;
    n.url = nats_url;
    const auto buf = broker::parse_size(nats_buffer);
    if (!buf || *buf > static_cast<std::size_t>(INT32_MAX)) return usage("--nats-reconnect-buffer: bad size");
    n.reconnect_buffer_bytes = static_cast<int>(*buf);
    n.reconnect_wait = std::chrono::milliseconds(nats_reconnect_wait_ms);
    n.batch = nats_batch;
    n.window = nats_at_most_once ? 0 : nats_window;
    n.ack_timeout = std::chrono::milliseconds(nats_ack_timeout_ms);
    if (const auto wrong = nats_tls_flags.apply(n)) return usage(*wrong);
    if (!js_stream.empty()) {
      JetStreamConfig js;
      js.stream = js_stream;
      js.subjects = js_subjects;
      const auto age = parse_duration(js_max_age);
      if (!age) return usage("--stream-max-age " + age.error());
      js.max_age = std::chrono::duration_cast<std::chrono::seconds>(*age);
      const auto window = parse_duration(js_dup_window);
      if (!window) return usage("--stream-duplicate-window " + window.error());
      js.duplicate_window = *window;
      const auto bytes = broker::parse_size(js_max_bytes);
      if (!bytes) return usage("--stream-max-bytes: bad size");
      js.max_bytes = *bytes == 0 ? -1 : static_cast<std::int64_t>(*bytes);
      js.memory_storage = js_storage == "memory";
      js.replicas = js_replicas;
      js.max_pending = js_max_pending;
      js.ack_timeout = std::chrono::milliseconds(js_ack_timeout_ms);
      js.max_attempts = js_max_attempts;
      if (const auto wrong = nats_in_flags.apply(js)) return usage(*wrong);
      n.jetstream = js;
    }
    config.nats = n;
  } else if (!js_stream.empty()) {
    return usage("--jetstream needs --nats URL");
  } else if (nats_tls_flags.given()) {
    return usage("--nats-tls-* need --nats URL");
  }
  std::optional<HostPort> metrics_at;
  if (!metrics.empty()) {
    auto hp = parse_host_port(metrics);
    if (!hp) return usage("--metrics " + hp.error().detail);
    metrics_at = *hp;
  }
  std::optional<MetricsServer::Tls> metrics_tls_files;
  if (metrics_tls) {
    if (!metrics_at) return usage("--metrics-tls needs --metrics HOST:PORT");
    if (!broker_on || cfg.tls.cert_file.empty()) {
      return usage("--metrics-tls uses the broker's --tls-cert-file and --tls-key-file (with --tls-port or --ws-tls)");
    }
    metrics_tls_files = MetricsServer::Tls{cfg.tls.cert_file, cfg.tls.key_file};
  }

  // Block the stop signals before any thread starts (broker, libnats, readers),
  // so they inherit the mask and the sigtimedwait below is the only receiver.
  const sigset_t stop_signals = ringcast::tools::block_stop_signals();
  // SIGHUP reloads the embedded broker's TLS certificates (docs/security.md,
  // "TLS"); blocked in every thread like the stop signals and taken by the
  // same sigtimedwait.
  sigset_t signals = stop_signals;
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto relay = Relay::start(std::move(config));
  if (!relay) {
    fmt::print(stderr, "ringcast-relay: {}\n", relay.error().message());
    // libnats' threads may still hold a late reply (a JetStream API call
    // that timed out): let them finish before the process exits.
    if (!nats_url.empty()) nats_CloseAndWait(2000);
    return 1;
  }
  Relay& r = **relay;
  // Tests and scripts read the ports from these lines.
  if (r.broker() != nullptr && cfg.plain_port) {
    fmt::print("ringcast-relay listening on {}:{}\n", cfg.bind_address, r.broker()->port());
  }
  if (r.broker() != nullptr && cfg.tls.port) {
    fmt::print("ringcast-relay listening for TLS on {}:{}\n", cfg.bind_address, r.broker()->tls_port());
  }
  if (r.broker() != nullptr && r.broker()->ws_port() != 0) {
    const std::string at = tools::url_authority(cfg.bind_address, r.broker()->ws_port());
    if (cfg.tls.ws) {
      fmt::print("ringcast-relay websocket on wss://{}/ (live page: https://{}/)\n", at, at);
    } else {
      fmt::print("ringcast-relay websocket on ws://{}/ (live page: http://{}/)\n", at, at);
    }
  }
  if (!nats_url.empty() && !ring_specs.empty()) {
    if (js_stream.empty()) {
      fmt::print("ringcast-relay publishing to NATS {}\n", nats_url);
    } else {
      fmt::print("ringcast-relay publishing to NATS {} (JetStream stream {})\n", nats_url, js_stream);
    }
  }
  for (const auto& i : r.ingress_stats()) {
    fmt::print("ringcast-relay subscribed to NATS {} into {} {}\n", i.subject, i.to_ring ? "ring" : "channel",
               i.target);
  }
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_at) {
    auto m = MetricsServer::start(
        metrics_at->host, metrics_at->port, [&r] { return r.prometheus_text(); }, metrics_tls_files);
    if (!m) {
      fmt::print(stderr, "ringcast-relay: {}\n", m.error().message());
      r.stop();
      return 1;
    }
    metrics_server = std::move(*m);
    fmt::print("ringcast-relay metrics on {}://{}/metrics\n", metrics_tls ? "https" : "http",
               tools::url_authority(metrics_at->host, metrics_server->port()));
  }
  std::fflush(stdout);

  // Wait for a stop signal, checking for a failed ring a few times a second.
  int exit_status = 0;
  std::string why;
  for (;;) {
    const timespec tick{0, 200'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM) {
      why = sig == SIGINT ? "received SIGINT" : "received SIGTERM";
      break;
    }
    if (sig == SIGHUP && metrics_server && metrics_tls) {
      if (const auto reloaded = metrics_server->reload_tls(); !reloaded) {
        fmt::print(stderr, "ringcast-relay: SIGHUP: metrics TLS certificate not reloaded, the old one stays: {}\n",
                   reloaded.error());
      }
    }
    if (sig == SIGHUP && r.broker() != nullptr && cfg.tls.enabled()) {
      // Existing connections keep their session; new ones get the files read now.
      if (const auto reloaded = r.broker()->reload_tls(); reloaded) {
        fmt::print(stderr, "ringcast-relay: SIGHUP: TLS certificates reloaded; new connections use them\n");
      } else {
        fmt::print(stderr, "ringcast-relay: SIGHUP: TLS certificates not reloaded, the old ones stay: {}\n",
                   reloaded.error());
      }
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

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ringcast-relay", [&] { return run(argc, argv); });
}
