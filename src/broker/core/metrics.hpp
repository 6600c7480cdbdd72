// The broker's own Prometheus series (docs/broker.md, "Metrics"): the
// BrokerStats counters and gauges, then one series per connection and figure.
// Broker::metrics_text() renders these, then the embedder's MetricsProvider.
#pragma once

#include <span>

#include "ringcast/broker/metrics.hpp"
#include "ringcast/broker/stats.hpp"

namespace ringcast::broker {

// Writes every ringcast_broker_* family, each with its HELP and TYPE, even
// when `connections` is empty (a family with no samples).
void write_broker_metrics(PrometheusWriter& w, const BrokerStats& stats, std::span<const ConnectionStats> connections);

}  // namespace ringcast::broker
