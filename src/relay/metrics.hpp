// The relay's own Prometheus series (docs/relay.md, "Prometheus"): per ring,
// and libnats' when NATS is on. With a broker sink they reach /metrics through
// the broker's MetricsProvider hook, after the broker's series; without one,
// Relay::prometheus_text() renders them alone.
#pragma once

#include <span>
#include <string>

#include "ringcast/broker/metrics.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

// Writes every ringcast_relay_ring_* family (one sample per ring) and, when
// `nats` is not null, the ringcast_relay_nats_* families.
void write_relay_metrics(broker::PrometheusWriter& w, std::span<const RingStats> rings, const NatsStats* nats);

// Writes the ringcast_nats_in_* families, one sample per --nats-in
// subscription (nothing when `ingress` is empty).
void write_ingress_metrics(broker::PrometheusWriter& w, std::span<const NatsIngressStats> ingress);

// One INFO line per --nats-in subscription ("nats_in_<i>:subject=...,..."),
// CRLF-terminated; "" when `ingress` is empty.
[[nodiscard]] std::string ingress_info_lines(std::span<const NatsIngressStats> ingress);

}  // namespace ringcast::relay
