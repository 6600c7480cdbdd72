#include "broker/core/metrics.hpp"

#include <string>
#include <vector>

namespace ringcast::broker {

namespace {

struct Series {
  const char* name;
  const char* help;
  MetricType type;
  std::uint64_t BrokerStats::*field;
};

// One unlabelled series per BrokerStats field (the drops, by reason, and the
// stall time, in seconds, follow).
constexpr Series kBrokerSeries[] = {
    {"ringcast_broker_connected_clients", "Connected clients.", MetricType::kGauge, &BrokerStats::connected_clients},
    {"ringcast_broker_connections_total", "Connections accepted.", MetricType::kCounter,
     &BrokerStats::total_connections},
    {"ringcast_broker_rejected_connections_total", "Connections refused over max_connections.", MetricType::kCounter,
     &BrokerStats::rejected_connections},
    {"ringcast_broker_accept_backoffs_total",
     "Accepts that failed for lack of descriptors or memory; the next waits 50 ms.", MetricType::kCounter,
     &BrokerStats::accept_backoffs},
    {"ringcast_broker_commands_processed_total", "Client commands processed.", MetricType::kCounter,
     &BrokerStats::commands_processed},
    {"ringcast_broker_messages_published_total", "Messages published into the broker.", MetricType::kCounter,
     &BrokerStats::messages_published},
    {"ringcast_broker_deliveries_total", "Frames offered to connection queues.", MetricType::kCounter,
     &BrokerStats::deliveries},
    {"ringcast_broker_conflated_total", "Messages replaced by a newer one of their channel (conflate policy).",
     MetricType::kCounter, &BrokerStats::conflated},
    {"ringcast_broker_slow_disconnects_total", "Connections closed by the disconnect policy.", MetricType::kCounter,
     &BrokerStats::slow_disconnects},
    {"ringcast_broker_refused_publishes_total", "Messages refused for a block-policy subscriber with no room.",
     MetricType::kCounter, &BrokerStats::refused_publishes},
    {"ringcast_broker_publisher_stalls_total", "Publisher pauses for pacing.", MetricType::kCounter,
     &BrokerStats::publisher_stalls},
    {"ringcast_broker_slow_subscribers_total",
     "Subscriber queues over the pace mark for max_stall (no longer pacing publishers).", MetricType::kCounter,
     &BrokerStats::slow_subscribers},
    {"ringcast_broker_channels", "Channels with at least one subscriber (SUBSCRIBE).", MetricType::kGauge,
     &BrokerStats::channels},
    {"ringcast_broker_patterns", "Patterns with at least one subscriber (PSUBSCRIBE).", MetricType::kGauge,
     &BrokerStats::patterns},
    {"ringcast_broker_shard_channels", "Shard channels with at least one subscriber (SSUBSCRIBE).", MetricType::kGauge,
     &BrokerStats::shard_channels},
};

// One labelled series per connection and ConnectionStats field.
struct ConnectionSeries {
  const char* name;
  const char* help;
  MetricType type;
  std::uint64_t ConnectionStats::*field;
};

constexpr ConnectionSeries kConnectionSeries[] = {
    {"ringcast_broker_connection_queued_bytes", "Bytes queued or in flight for the connection (omem).",
     MetricType::kGauge, &ConnectionStats::queued_bytes},
    {"ringcast_broker_connection_queued_frames", "Frames queued for the connection.", MetricType::kGauge,
     &ConnectionStats::queued_frames},
    {"ringcast_broker_connection_subscriptions", "Channels, patterns and shard channels the connection subscribes to.",
     MetricType::kGauge, &ConnectionStats::subscriptions},
    {"ringcast_broker_connection_sent_frames_total", "Frames handed to the connection's socket writer.",
     MetricType::kCounter, &ConnectionStats::sent_frames},
    {"ringcast_broker_connection_conflated_total", "Messages to the connection replaced by a newer one.",
     MetricType::kCounter, &ConnectionStats::conflated},
    {"ringcast_broker_connection_loss_notices_total", "Loss notices queued to the connection.", MetricType::kCounter,
     &ConnectionStats::loss_notices},
};

// Drop reasons as label values, with the field counting each.
struct Reason {
  const char* label;
  std::uint64_t BrokerStats::*total;
  std::uint64_t ConnectionStats::*per_connection;
};

constexpr Reason kDropReasons[] = {
    {"hard_limit", &BrokerStats::dropped_hard_limit, &ConnectionStats::dropped_hard_limit},
    {"soft_limit", &BrokerStats::dropped_soft_limit, &ConnectionStats::dropped_soft_limit},
    {"disconnect", &BrokerStats::dropped_disconnect, &ConnectionStats::dropped_disconnect},
};

double as_double(std::uint64_t v) { return static_cast<double>(v); }

}  // namespace

void write_broker_metrics(PrometheusWriter& w, const BrokerStats& stats, std::span<const ConnectionStats> connections) {
  for (const Series& s : kBrokerSeries) w.metric(s.name, s.help, s.type, as_double(stats.*s.field));
  w.metric("ringcast_broker_publisher_stall_seconds_total", "Total time publishers were paused for pacing.",
           MetricType::kCounter, static_cast<double>(stats.publisher_stall_ns) / 1e9);
  w.header("ringcast_broker_dropped_total", "Frames lost, by reason.", MetricType::kCounter);
  for (const Reason& r : kDropReasons)
    w.sample("ringcast_broker_dropped_total", {{"reason", r.label}}, as_double(stats.*r.total));

  std::vector<MetricLabels> labels;
  labels.reserve(connections.size());
  for (const ConnectionStats& c : connections) {
    labels.push_back({{"id", std::to_string(c.id)}, {"addr", c.peer}, {"name", c.name}});
  }
  for (const ConnectionSeries& s : kConnectionSeries) {
    w.header(s.name, s.help, s.type);
    for (std::size_t i = 0; i < connections.size(); ++i)
      w.sample(s.name, labels[i], as_double(connections[i].*s.field));
  }
  w.header("ringcast_broker_connection_dropped_total", "Frames the connection lost, by reason.", MetricType::kCounter);
  for (std::size_t i = 0; i < connections.size(); ++i) {
    for (const Reason& r : kDropReasons) {
      MetricLabels l = labels[i];
      l.emplace_back("reason", r.label);
      w.sample("ringcast_broker_connection_dropped_total", l, as_double(connections[i].*r.per_connection));
    }
  }
}

}  // namespace ringcast::broker
