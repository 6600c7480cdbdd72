// ringcast-relay: drains shared-memory rings into the in-process broker and/or
// NATS (docs/relay.md). Flag parsing and wiring only; everything else is in
// ringcast::relay.
//
// Exit status: 0 after SIGINT/SIGTERM, 1 when setup fails, 2 on a usage error,
// 3 when a ring failed at run time. The last log line says which.
#include <pthread.h>
#include <signal.h>

#include <atomic>
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
#include "help_groups.hpp"
#include "nats_settings.hpp"
#include "relay_settings.hpp"
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
      "The broker runs unless --nats is given without --listen. See docs/relay.md.\n"
      "  ringcast-relay --ring /dev/shm/ticks.ring=ticks --listen 127.0.0.1:6391   redis-cli -p 6391 SUBSCRIBE ticks\n"
      "  ringcast-relay --ring /dev/shm/ticks.ring=ticks --nats nats://127.0.0.1:4222"};
  std::vector<std::string> ring_specs;
  std::vector<std::string> nats_in_specs;
  std::vector<std::string> nats_in_broker_specs;
  std::string listen = "127.0.0.1:6390";
  std::string nats_url;
  std::string metrics;

  RelayConfig config;
  NatsConfig nats;
  JetStreamConfig js;
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
  tools::add_settings(app, tools::nats_in_ring_settings(), config.nats_in);
  tools::add_settings(app, tools::nats_in_pending_settings(), config.nats_in);
  auto* listen_opt =
      app.add_option("--listen", listen,
                     "Broker listen address HOST:PORT (port 0: the kernel chooses, printed; or with --tls-port turns "
                     "the plain port off)")
          ->capture_default_str();
  app.add_option("--nats", nats_url,
                 "Also (or only) publish to NATS: nats://HOST:PORT[,nats://...] (tls://HOST:PORT: over TLS)");
  tools::add_settings(app, tools::nats_tls_settings(), nats);
  tools::add_settings(app, tools::nats_publish_settings(), nats);
  ClusterConfig cluster;
  app.add_option("--cluster", cluster.nats.url,
                 "The embedded broker joins a cluster of brokers through these NATS server(s), "
                 "nats://HOST:PORT[,...], as ringcast-broker --cluster does (docs/cluster.md); runs the broker");
  tools::add_settings(app, tools::cluster_settings(), cluster);
  bool nats_at_most_once = false;
  app.add_flag("--nats-at-most-once", nats_at_most_once,
               "No credit window: publish as fast as the ring gives, whatever the ingresses take; loss is "
               "counted at the receiving side (upstream_lost)");
  // JetStream (docs/scale-out.md, "JetStream").
  app.add_option("--jetstream", js.stream,
                 "With --nats: publish into this JetStream stream with acks (at least once; created or updated "
                 "with the --stream-* limits) instead of core NATS");
  tools::add_settings(app, tools::jetstream_publish_settings(), js);
  tools::add_settings(app, tools::jetstream_ingress_settings(), js);
  app.add_option("--metrics", metrics, "Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9390)");
  bool metrics_tls = false;
  app.add_flag("--metrics-tls", metrics_tls,
               "https:// on --metrics with the broker's --tls-cert-file and --tls-key-file (reloaded on SIGHUP)");
  tools::add_settings(app, tools::relay_settings(), config);
  StartAt start = StartAt::kLatest;
  tools::add_start_at_option(app, start, "the relay opens a ring file it has not relayed before (every --ring)");

  broker_flags.add_to(app, cfg);  // as ringcast-broker (docs/broker.md, docs/security.md "TLS")
  std::vector<tools::HelpGroup> groups = {
      {"Common", {"--ring", "--listen", "--ws-port", "--nats", "--metrics", "--from"}},
      {"Relay", {"--batch", "--metrics-tls", "--nats-in", "--nats-in-broker"}},
      {"Cluster (docs/cluster.md)",
       {"--cluster", "--cluster-subject-prefix", "--cluster-settle-timeout", "--cluster-pending-msgs",
        "--cluster-pending-bytes", "--cluster-history-replicas", "--cluster-store-timeout",
        "--cluster-max-pending-stores"}}};
  for (auto& g : tools::broker_help_groups()) groups.push_back(std::move(g));
  tools::set_help_groups(app, groups);
  if (const auto exit_status = ringcast::tools::parse_settings(app, argc, argv)) return *exit_status;

  for (const auto& spec : ring_specs) {
    auto route = parse_ring_route(spec);
    if (!route) return usage(route.error().detail);
    route->start = start;
    config.rings.push_back(std::move(*route));
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
  // The broker runs unless NATS is the only sink: --nats without --listen,
  // and no --nats-in-broker or --cluster.
  const bool broker_on =
      nats_url.empty() || listen_opt->count() > 0 || !nats_in_broker_specs.empty() || !cluster.nats.url.empty();
  if (broker_on) {
    auto hp = parse_host_port(listen);
    if (!hp) return usage("--listen " + hp.error().detail);
    cfg.bind_address = hp->host;
    cfg.port = hp->port;
    if (const auto wrong = broker_flags.apply(cfg)) return usage(*wrong);
    config.broker = cfg;
  } else {
    for (const char* tls_flag :
         {"--tls-port", "--ws-tls", "--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file", "--tls-auth-clients"}) {
      if (app.get_option(tls_flag)->count() > 0) {
        return usage(std::string(tls_flag) + " is for the embedded broker, which --nats without --listen turns off");
      }
    }
  }
  // The credit window's settings, given by flag, variable or file, where
  // nothing would read them.
  if (nats_at_most_once || !js.stream.empty()) {
    for (const char* window_flag : {"--nats-window", "--nats-ack-timeout", "--nats-ack-timeout-ms"}) {
      if (app.get_option(window_flag)->count() > 0) {
        return usage(fmt::format("{} sets the credit window of core NATS, which {} turns off", window_flag,
                                 nats_at_most_once ? "--nats-at-most-once" : "--jetstream (it has its own acks)"));
      }
    }
  }
  if (!nats_url.empty()) {
    nats.url = nats_url;
    if (nats_at_most_once) nats.window = 0;
    if (const auto wrong = tools::finish_nats_tls(nats)) return usage(*wrong);
    if (!js.stream.empty()) nats.jetstream = js;
    config.nats = nats;
  } else if (!js.stream.empty()) {
    return usage("--jetstream needs --nats URL");
  } else if (tools::nats_tls_given(nats) && cluster.nats.url.empty()) {
    return usage("--nats-tls-* need --nats URL or --cluster URL");
  }
  if (!cluster.nats.url.empty()) {
    const std::string url = cluster.nats.url;
    cluster.nats = nats;  // the --nats-tls-* files
    cluster.nats.url = url;
    cluster.nats.jetstream.reset();
    if (const auto wrong = tools::finish_nats_tls(cluster.nats)) return usage(*wrong);
    config.cluster = cluster;
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

  if (const auto valid = validate(config); !valid) return usage(valid.error().detail);
  if (config.broker) {
    if (const auto lowered = tools::fit_descriptor_limit(*config.broker)) {
      fmt::print(stderr, "ringcast-relay: warning: {}\n", *lowered);
    }
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

  // The metrics port is bound before the relay starts, so that a busy port
  // fails the start before any ring is registered on or any port listens.
  // Until the relay is up a scrape gets an empty page. `relay_up` is written
  // once, by this thread, after Relay::start; release/acquire: the scrape
  // sees the started relay. The server stops before the relay does (below).
  std::atomic<const Relay*> relay_up{nullptr};
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_at) {
    auto m = MetricsServer::start(
        metrics_at->host, metrics_at->port,
        [&relay_up] {
          const Relay* up = relay_up.load(std::memory_order_acquire);
          return up != nullptr ? up->prometheus_text() : std::string();
        },
        metrics_tls_files);
    if (!m) {
      fmt::print(stderr, "ringcast-relay: {} (--metrics {}; pick another port)\n", m.error().message(), metrics);
      return 1;
    }
    metrics_server = std::move(*m);
  }
  auto relay = Relay::start(std::move(config));
  if (!relay) {
    fmt::print(stderr, "ringcast-relay: {}\n", relay.error().message());
    // libnats' threads may still hold a late reply (a JetStream API call
    // that timed out): let them finish before the process exits.
    if (!nats_url.empty() || !cluster.nats.url.empty()) nats_CloseAndWait(2000);
    return 1;
  }
  Relay& r = **relay;
  relay_up.store(&r, std::memory_order_release);
  // Tests and scripts read the ports from these lines.
  if (r.broker() != nullptr && cfg.plain_port) {
    fmt::print("ringcast-relay listening on {}:{}\n", cfg.bind_address, r.broker()->port());
  }
  if (r.broker() != nullptr && cfg.tls.port) {
    fmt::print("ringcast-relay listening for TLS on {}:{}\n", cfg.bind_address, r.broker()->tls_port());
  }
  if (!cluster.nats.url.empty()) fmt::print("ringcast-relay joined the cluster through NATS {}\n", cluster.nats.url);
  if (r.broker() != nullptr && r.broker()->ws_port() != 0) {
    const std::string at = tools::url_authority(cfg.bind_address, r.broker()->ws_port());
    if (cfg.tls.ws) {
      fmt::print("ringcast-relay websocket on wss://{}/ (live page: https://{}/)\n", at, at);
    } else {
      fmt::print("ringcast-relay websocket on ws://{}/ (live page: http://{}/)\n", at, at);
    }
  }
  if (!nats_url.empty() && !ring_specs.empty()) {
    if (js.stream.empty()) {
      fmt::print("ringcast-relay publishing to NATS {}\n", nats_url);
    } else {
      fmt::print("ringcast-relay publishing to NATS {} (JetStream stream {})\n", nats_url, js.stream);
    }
  }
  for (const auto& i : r.ingress_stats()) {
    fmt::print("ringcast-relay subscribed to NATS {} into {} {}\n", i.subject, i.to_ring ? "ring" : "channel",
               i.target);
  }
  if (metrics_server) {
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
  if (!nats_url.empty() || !cluster.nats.url.empty()) nats_CloseAndWait(2000);
  return exit_status;
}

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ringcast-relay", [&] { return run(argc, argv); });
}
