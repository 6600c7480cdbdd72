#include "relay/metrics.hpp"

#include <cstdint>
#include <string>

namespace ringcast::relay {

namespace {

using broker::MetricLabels;
using broker::MetricType;
using broker::PrometheusWriter;

struct RingSeries {
  const char* name;
  const char* help;
  MetricType type;
  std::uint64_t RingStats::*field;
};

constexpr RingSeries kRingSeries[] = {
    {"ringcast_relay_ring_messages_total", "Messages taken from the ring and published.", MetricType::kCounter,
     &RingStats::relayed},
    {"ringcast_relay_ring_batches_total", "Drains that returned at least one message.", MetricType::kCounter,
     &RingStats::batches},
    {"ringcast_relay_ring_lag_messages", "Messages published on the ring not yet taken by the relay.",
     MetricType::kGauge, &RingStats::lag},
    {"ringcast_relay_ring_lapped_total", "Lossy ring: messages overwritten before the relay read them.",
     MetricType::kCounter, &RingStats::lapped},
    {"ringcast_relay_ring_malformed_total", "Topic-in-payload messages that did not parse (not published).",
     MetricType::kCounter, &RingStats::malformed},
    {"ringcast_relay_ring_deliveries_total", "Broker deliveries (subscriptions reached) of this ring's messages.",
     MetricType::kCounter, &RingStats::deliveries},
    {"ringcast_relay_ring_refused_total",
     "Broker publishes refused by a block-policy subscriber and retried (the ring is not drained meanwhile).",
     MetricType::kCounter, &RingStats::refused},
    {"ringcast_relay_ring_nats_published_total", "Messages accepted by libnats.", MetricType::kCounter,
     &RingStats::nats_published},
    {"ringcast_relay_ring_nats_failed_total", "Messages libnats refused (buffer full, closed, bad subject).",
     MetricType::kCounter, &RingStats::nats_failed},
    {"ringcast_relay_ring_reopens_total", "Times the ring file was replaced and reopened.", MetricType::kCounter,
     &RingStats::reopens},
};

struct NatsSeries {
  const char* name;
  std::uint64_t NatsStats::*field;
};

constexpr NatsSeries kNatsCounters[] = {
    {"ringcast_relay_nats_published_total", &NatsStats::published},
    {"ringcast_relay_nats_buffer_full_total", &NatsStats::buffer_full},
    {"ringcast_relay_nats_failed_total", &NatsStats::failed},
    {"ringcast_relay_nats_disconnects_total", &NatsStats::disconnects},
    {"ringcast_relay_nats_reconnects_total", &NatsStats::reconnects},
    {"ringcast_relay_nats_out_messages_total", &NatsStats::out_msgs},
    {"ringcast_relay_nats_out_bytes_total", &NatsStats::out_bytes},
};

constexpr RingState kStates[] = {RingState::kWaitingForRing, RingState::kWaitingForProducer, RingState::kRelaying,
                                 RingState::kStopped, RingState::kFailed};

MetricLabels ring_labels(const RingStats& r) {
  return {{"ring", r.path}, {"channel", r.topic_in_payload ? r.name + "*" : r.name}};
}

}  // namespace

void write_relay_metrics(PrometheusWriter& w, std::span<const RingStats> rings, const NatsStats* nats) {
  for (const RingSeries& s : kRingSeries) {
    w.header(s.name, s.help, s.type);
    for (const RingStats& r : rings) w.sample(s.name, ring_labels(r), static_cast<double>(r.*s.field));
  }
  w.header("ringcast_relay_ring_producer_alive", "1 when a live process holds the ring's producer role.",
           MetricType::kGauge);
  for (const RingStats& r : rings) w.sample("ringcast_relay_ring_producer_alive", ring_labels(r), r.producer_alive ? 1 : 0);
  w.header("ringcast_relay_ring_state", "The reader's state (one series per state, 1 for the current one).",
           MetricType::kGauge);
  for (const RingStats& r : rings) {
    for (const RingState s : kStates) {
      MetricLabels l = ring_labels(r);
      l.emplace_back("state", std::string(to_string(s)));
      w.sample("ringcast_relay_ring_state", l, r.state == s ? 1 : 0);
    }
  }
  if (nats == nullptr) return;
  w.metric("ringcast_relay_nats_connected", "1 while libnats is connected.", MetricType::kGauge,
           nats->status == "connected" ? 1 : 0);
  for (const NatsSeries& s : kNatsCounters) {
    w.metric(s.name, "libnats connection statistics (docs/relay.md).", MetricType::kCounter,
             static_cast<double>(nats->*s.field));
  }
  w.metric("ringcast_relay_nats_buffered_bytes", "Bytes libnats holds not yet written (-1 once closed).",
           MetricType::kGauge, static_cast<double>(nats->buffered_bytes));
}

}  // namespace ringcast::relay
