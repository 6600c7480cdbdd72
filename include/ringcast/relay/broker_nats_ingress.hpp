// NATS into a standalone broker: subscribes to NATS subjects and publishes
// every message to the broker's subscribers, RESP and WebSocket alike
// (`ringcast-broker --nats URL --nats-in SUBJECT[=CHANNEL]`, docs/scale-out.md,
// "Broker ingress"). The relay's embedded broker gets the same through
// RelayConfig::nats_broker_in. The broker itself knows nothing of NATS: the
// ingress publishes through Broker::publish and reports gaps through
// Broker::report_upstream_loss.
//
// Thread safety: start() from any thread; stats(), info_text() and
// write_metrics() from any thread, concurrently; stop() from any thread,
// idempotent; the destructor stops and must not race other calls. Each
// subscription is served by its own libnats delivery thread (with JetStream,
// each route by its own fetch thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/relay/error.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class BrokerNatsIngress {
 public:
  // Connects to `nats` (retrying in the background if no server answers yet)
  // and subscribes to every route. `broker` must outlive the ingress. Fails on
  // bad options or a subject NATS refuses.
  // With nats.jetstream (`--jetstream STREAM`), each route instead reads that
  // stream through a durable pull consumer and acknowledges a message once
  // Broker::publish has taken it: at least once, resuming after a restart at
  // the durable's ack floor + 1 (docs/scale-out.md, "JetStream"). The stream
  // must exist (the publishing relay creates it); only the ingress-side
  // settings of nats.jetstream are used (durable, deliver_new, ack_wait,
  // fetch_batch).
  [[nodiscard]] static tl::expected<std::unique_ptr<BrokerNatsIngress>, RelayError> start(
      broker::Broker& broker, const NatsConfig& nats, const std::vector<NatsBrokerIngressRoute>& routes,
      const NatsIngressConfig& config, const LogFn& log);
  BrokerNatsIngress(const BrokerNatsIngress&) = delete;
  BrokerNatsIngress& operator=(const BrokerNatsIngress&) = delete;
  ~BrokerNatsIngress();

  // Unsubscribes everything (waiting for deliveries in progress), then closes
  // the connection. Blocks until done.
  void stop() noexcept;
  [[nodiscard]] std::vector<NatsIngressStats> stats() const;
  // "# NATS-in" INFO section (nats_in_<i>:... lines and the connection's status).
  [[nodiscard]] std::string info_text() const;
  // The ringcast_nats_in_* families (docs/scale-out.md).
  void write_metrics(broker::PrometheusWriter& w) const;

  struct Impl;

 private:
  explicit BrokerNatsIngress(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::relay
