// ringcast-broker: runs the Redis-protocol pub/sub broker (docs/broker.md),
// optionally fed from NATS (--nats-in, docs/scale-out.md). Flag parsing and
// wiring only; everything else is in ringcast::broker and ringcast::relay.

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "broker_flags.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/relay/broker_nats_ingress.hpp"
#include "settings.hpp"
#include "stop_signals.hpp"

int main(int argc, char** argv) {
  using ringcast::broker::BrokerConfig;
  BrokerConfig cfg;
  CLI::App app{"ringcast-broker: Redis-protocol (RESP2/RESP3) pub/sub fan-out broker"};
  ringcast::tools::BrokerFlags flags;
  app.add_option("--bind", cfg.bind_address, "Address to listen on")->capture_default_str();
  app.add_option("--port", cfg.port, "TCP port; 0 picks a free one (printed at startup)")->capture_default_str();
  flags.add_to(app, cfg);
  std::string nats_url;
  std::vector<std::string> nats_in_specs;
  ringcast::relay::NatsIngressConfig ingress;
  std::string nats_in_pending_bytes = "64mb";
  app.add_option("--nats", nats_url, "NATS server(s) for --nats-in: nats://HOST:PORT[,nats://...]");
  app.add_option("--nats-in", nats_in_specs,
                 "SUBJECT[=CHANNEL]: publish every message of the NATS subscription SUBJECT (wildcards allowed) "
                 "on CHANNEL ('{subject}' in it, or no CHANNEL: the message's subject). Repeatable; needs --nats. "
                 "docs/scale-out.md");
  app.add_option("--nats-in-pending-msgs", ingress.pending_msgs,
                 "libnats pending limit per --nats-in subscription, messages (-1: none); beyond it libnats drops "
                 "(counted, and seen as a gap)")
      ->capture_default_str();
  app.add_option("--nats-in-pending-bytes", nats_in_pending_bytes,
                 "libnats pending limit per --nats-in subscription, bytes")
      ->capture_default_str();
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
  if (const auto bytes = ringcast::broker::parse_size(nats_in_pending_bytes);
      bytes && *bytes <= static_cast<std::size_t>(INT32_MAX)) {
    ingress.pending_bytes = static_cast<int>(*bytes);
  } else {
    fmt::print(stderr, "ringcast-broker: --nats-in-pending-bytes: bad size\n");
    return 2;
  }

  if (const auto wrong = flags.apply(cfg)) {
    fmt::print(stderr, "ringcast-broker: {}\n", *wrong);
    return 2;
  }

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
    const std::string at = ringcast::tools::url_authority(cfg.bind_address, (*broker)->ws_port());
    fmt::print("ringcast-broker websocket on ws://{}/ (live page: http://{}/)\n", at, at);
  }
  std::unique_ptr<ringcast::relay::BrokerNatsIngress> nats_in;
  if (!nats_routes.empty()) {
    ringcast::relay::NatsConfig n;
    n.url = nats_url;
    n.client_name = "ringcast-broker";
    auto log = [](ringcast::relay::LogLevel level, std::string_view text) {
      const char* tag = level == ringcast::relay::LogLevel::kError     ? "error: "
                        : level == ringcast::relay::LogLevel::kWarning ? "warning: "
                                                                       : "";
      const std::string line = fmt::format("ringcast-broker: {}{}\n", tag, text);
      std::fputs(line.c_str(), stderr);
    };
    auto in = ringcast::relay::BrokerNatsIngress::start(**broker, n, nats_routes, ingress, log);
    if (!in) {
      fmt::print(stderr, "ringcast-broker: {}\n", in.error().message());
      (*broker)->stop();
      (*broker)->wait();
      return 1;
    }
    nats_in = std::move(*in);
    ringcast::relay::BrokerNatsIngress& ni = *nats_in;
    // INFO nats-in (and a bare INFO / INFO all); /metrics gets the ingress series.
    (*broker)->set_info_provider([&ni](std::string_view section) -> std::string {
      if (section.empty() || section == "all" || section == "default" || section == "everything" ||
          section == "nats-in") {
        return ni.info_text();
      }
      return {};
    });
    (*broker)->set_metrics_provider([&ni](ringcast::broker::PrometheusWriter& w) { ni.write_metrics(w); });
    for (const auto& r : nats_routes) {
      fmt::print("ringcast-broker subscribed to NATS {} into channel {}\n", r.subject,
                 r.channel.empty() ? "{subject}" : r.channel);
    }
  }
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  if (nats_in) nats_in->stop();  // nothing more is published; the providers stay valid until wait()
  (*broker)->stop();
  (*broker)->wait();
  return 0;
}
