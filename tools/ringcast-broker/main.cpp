// ringcast-broker: runs the Redis-protocol pub/sub broker (docs/broker.md),
// optionally fed from NATS (--nats-in, docs/scale-out.md) and one node of a
// cluster (--cluster, docs/cluster.md). Flag parsing and wiring only;
// everything else is in ringcast::broker and ringcast::relay.

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <memory>
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
#include "ringcast/broker/broker.hpp"
#include "ringcast/relay/broker_nats_ingress.hpp"
#include "ringcast/relay/nats_cluster.hpp"
#include "settings.hpp"
#include "stop_signals.hpp"

namespace {

int run(int argc, char** argv) {
  using ringcast::broker::BrokerConfig;
  BrokerConfig cfg;
  CLI::App app{
      "ringcast-broker: Redis-protocol (RESP2/RESP3) pub/sub fan-out broker, with WebSocket clients.\n"
      "  ringcast-broker --port 6390                 redis-cli -p 6390 SUBSCRIBE chat / PUBLISH chat hi\n"
      "  ringcast-broker --port 6390 --ws-port 8080  also WebSocket + JSON, live page on http://127.0.0.1:8080/"};
  ringcast::tools::BrokerFlags flags;
  ringcast::tools::add_settings(app, ringcast::tools::broker_listen_settings(), cfg);
  flags.add_to(app, cfg);
  std::string nats_url;
  std::vector<std::string> nats_in_specs;
  ringcast::relay::NatsIngressConfig ingress;
  ringcast::relay::NatsConfig nats;
  ringcast::relay::JetStreamConfig js;
  app.add_option("--nats", nats_url,
                 "NATS server(s) for --nats-in: nats://HOST:PORT[,nats://...] (tls://HOST:PORT: over TLS)");
  ringcast::tools::add_settings(app, ringcast::tools::nats_tls_settings(), nats);
  app.add_option("--nats-in", nats_in_specs,
                 "SUBJECT[=CHANNEL]: publish every message of the NATS subscription SUBJECT (wildcards allowed) "
                 "on CHANNEL ('{subject}' in it, or no CHANNEL: the message's subject). Repeatable; needs --nats. "
                 "docs/scale-out.md");
  ringcast::tools::add_settings(app, ringcast::tools::nats_in_pending_settings(), ingress);
  app.add_option("--jetstream", js.stream,
                 "Read every --nats-in from this JetStream stream (made by the publishing relay's --jetstream) "
                 "through a durable consumer instead of a core NATS subscription: at least once, a message is acked "
                 "once the broker took it, and a restarted broker resumes after the last acked one");
  ringcast::tools::add_settings(app, ringcast::tools::jetstream_ingress_settings(), js);
  ringcast::relay::ClusterConfig cluster;
  app.add_option("--cluster", cluster.nats.url,
                 "Join a cluster of brokers through these NATS server(s), nats://HOST:PORT[,nats://...]: a message "
                 "published on any node reaches the subscribers of every node (docs/cluster.md). The --nats-tls-* "
                 "files apply");
  ringcast::tools::add_settings(app, ringcast::tools::cluster_settings(), cluster);
  std::vector<ringcast::tools::HelpGroup> groups = {
      {"Common", {"--port", "--bind", "--ws-port", "--requirepass-file", "--overflow-policy"}}};
  for (auto& g : ringcast::tools::broker_help_groups()) groups.push_back(std::move(g));
  groups.push_back({"Cluster (docs/cluster.md)",
                    {"--cluster", "--cluster-subject-prefix", "--cluster-settle-timeout", "--cluster-pending-msgs",
                     "--cluster-pending-bytes", "--cluster-history-replicas", "--cluster-store-timeout",
                     "--cluster-max-pending-stores"}});
  ringcast::tools::set_help_groups(app, groups);
  if (const auto exit_status = ringcast::tools::parse_settings(app, argc, argv)) return *exit_status;
  std::vector<ringcast::relay::NatsBrokerIngressRoute> nats_routes;
  for (const auto& spec : nats_in_specs) {
    auto route = ringcast::relay::parse_nats_broker_route(spec);
    if (!route) {
      fmt::print(stderr, "ringcast-broker: {}\n", route.error().detail);
      return 2;
    }
    nats_routes.push_back(std::move(*route));
  }
  if (!nats_routes.empty() && nats_url.empty()) {
    fmt::print(stderr, "ringcast-broker: --nats-in needs --nats URL\n");
    return 2;
  }
  if (ringcast::tools::nats_tls_given(nats) && nats_url.empty() && cluster.nats.url.empty()) {
    fmt::print(stderr, "ringcast-broker: --nats-tls-* need --nats URL or --cluster URL\n");
    return 2;
  }
  if (const auto wrong = ringcast::tools::finish_nats_tls(nats)) {
    fmt::print(stderr, "ringcast-broker: {}\n", *wrong);
    return 2;
  }
  if (!js.stream.empty() && nats_routes.empty()) {
    fmt::print(stderr, "ringcast-broker: --jetstream reads the --nats-in routes: give --nats-in\n");
    return 2;
  }
  if (!js.stream.empty()) nats.jetstream = js;

  if (const auto wrong = flags.apply(cfg)) {
    fmt::print(stderr, "ringcast-broker: {}\n", *wrong);
    return 2;
  }
  if (const auto valid = ringcast::broker::validate(cfg); !valid) {
    fmt::print(stderr, "ringcast-broker: {}\n", valid.error().detail);
    return 2;
  }
  if (const auto lowered = ringcast::tools::fit_descriptor_limit(cfg)) {
    fmt::print(stderr, "ringcast-broker: warning: {}\n", *lowered);
  }

  // Block the stop signals before any thread starts, so the I/O threads inherit
  // the mask and sigwait below is the only receiver.
  const sigset_t stop_signals = ringcast::tools::block_stop_signals();
  // SIGHUP reloads the TLS certificates (docs/security.md, "TLS"); blocked in
  // every thread like the stop signals, and taken by the same sigwait.
  sigset_t signals = stop_signals;
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto log = [](ringcast::relay::LogLevel level, std::string_view text) {
    const char* tag = level == ringcast::relay::LogLevel::kError     ? "error: "
                      : level == ringcast::relay::LogLevel::kWarning ? "warning: "
                                                                     : "";
    const std::string line = fmt::format("ringcast-broker: {}{}\n", tag, text);
    std::fputs(line.c_str(), stderr);
  };
  // The cluster link first: the broker tells it every subscription from its
  // first one on, and it outlives the broker.
  std::unique_ptr<ringcast::relay::NatsCluster> link;
  if (!cluster.nats.url.empty()) {
    const std::string url = cluster.nats.url;
    cluster.nats = nats;
    cluster.nats.url = url;
    auto connected = ringcast::relay::NatsCluster::connect(cluster, log);
    if (!connected) {
      fmt::print(stderr, "ringcast-broker: {}\n", connected.error());
      return 1;
    }
    link = std::move(*connected);
  }
  auto broker = ringcast::broker::Broker::start(cfg, link.get());
  if (!broker) {
    fmt::print(stderr, "ringcast-broker: {}\n", broker.error().message());
    if (link) link->stop();
    return 1;
  }
  if (link) {
    link->attach(**broker);
    fmt::print("ringcast-broker joined the cluster through NATS {}\n", cluster.nats.url);
  }
  // Tests and scripts read the port from this line (--port 0).
  if (cfg.plain_port) fmt::print("ringcast-broker listening on {}:{}\n", cfg.bind_address, (*broker)->port());
  if (cfg.tls.port) {
    fmt::print("ringcast-broker listening for TLS on {}:{}\n", cfg.bind_address, (*broker)->tls_port());
  }
  if (cfg.ws_port) {
    const std::string at = ringcast::tools::url_authority(cfg.bind_address, (*broker)->ws_port());
    if (cfg.tls.ws) {
      fmt::print("ringcast-broker websocket on wss://{}/ (live page: https://{}/)\n", at, at);
    } else {
      fmt::print("ringcast-broker websocket on ws://{}/ (live page: http://{}/)\n", at, at);
    }
  }
  std::unique_ptr<ringcast::relay::BrokerNatsIngress> nats_in;
  if (!nats_routes.empty()) {
    nats.url = nats_url;
    nats.client_name = "ringcast-broker";
    auto in = ringcast::relay::BrokerNatsIngress::start(**broker, nats, nats_routes, ingress, log);
    if (!in) {
      fmt::print(stderr, "ringcast-broker: {}\n", in.error().message());
      if (link) link->stop();
      (*broker)->stop();
      (*broker)->wait();
      // libnats' threads may still hold a late reply (a JetStream API call
      // that timed out): let them finish before the process exits.
      nats_CloseAndWait(2000);
      return 1;
    }
    nats_in = std::move(*in);
    for (const auto& r : nats_routes) {
      if (nats.jetstream) {
        fmt::print("ringcast-broker subscribed to NATS {} (JetStream stream {}) into channel {}\n", r.subject,
                   nats.jetstream->stream, r.channel.empty() ? "{subject}" : r.channel);
      } else {
        fmt::print("ringcast-broker subscribed to NATS {} into channel {}\n", r.subject,
                   r.channel.empty() ? "{subject}" : r.channel);
      }
    }
  }
  // INFO nats-in / INFO cluster (and a bare INFO / INFO all); /metrics gets
  // their series.
  if (nats_in || link) {
    (*broker)->set_info_provider([&nats_in, &link](std::string_view section) -> std::string {
      const bool all = section.empty() || section == "all" || section == "default" || section == "everything";
      std::string text;
      if (nats_in && (all || section == "nats-in")) text += nats_in->info_text();
      if (link && (all || section == "cluster")) text += link->info_text();
      return text;
    });
    (*broker)->set_metrics_provider([&nats_in, &link](ringcast::broker::PrometheusWriter& w) {
      if (nats_in) nats_in->write_metrics(w);
      if (link) link->write_metrics(w);
    });
  }
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (!cfg.tls.enabled()) {
      fmt::print(stderr, "ringcast-broker: SIGHUP: no TLS listener, nothing to reload\n");
      continue;
    }
    if (const auto reloaded = (*broker)->reload_tls(); reloaded) {
      fmt::print(stderr, "ringcast-broker: SIGHUP: TLS certificates reloaded; new connections use them\n");
    } else {
      fmt::print(stderr, "ringcast-broker: SIGHUP: TLS certificates not reloaded, the old ones stay: {}\n",
                 reloaded.error());
    }
  }
  // Nothing more is published from NATS; the providers stay valid until wait().
  if (nats_in) nats_in->stop();
  if (link) link->stop();
  (*broker)->stop();
  (*broker)->wait();
  link.reset();  // after the broker's threads, which called it
  if (nats_in || cluster.nats.url.size() > 0) {
    nats_in.reset();
    nats_CloseAndWait(2000);  // libnats' threads end before the process does
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ringcast::tools::guarded_main("ringcast-broker", [&] { return run(argc, argv); });
}
