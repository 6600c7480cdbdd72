#include "relay/metrics.hpp"

#include <cstdint>
#include <string>

#include <fmt/format.h>

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
    {"ringcast_relay_ring_lag_messages",
     "Positions (64-byte slots) published on the ring not yet taken by the relay: messages, on a ring "
     "of one slot per message.",
     MetricType::kGauge, &RingStats::lag},
    {"ringcast_relay_ring_lapped_total", "Lossy ring: positions (slots) overwritten before the relay read them.",
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

// Credit window routes only (docs/scale-out.md, "Credit window").
constexpr RingSeries kWindowSeries[] = {
    {"ringcast_relay_window_size", "Credit window: ring positions allowed in flight.", MetricType::kGauge,
     &RingStats::window_size},
    {"ringcast_relay_window_in_flight", "Credit window: last published position - lowest acknowledged.",
     MetricType::kGauge, &RingStats::window_in_flight},
    {"ringcast_relay_window_ingresses", "Credit window: ingresses acknowledging now.", MetricType::kGauge,
     &RingStats::window_ingresses},
    {"ringcast_relay_window_waits_total", "Credit window: times it was full and the ring waited.", MetricType::kCounter,
     &RingStats::window_waits},
    {"ringcast_relay_window_probes_total", "Credit window: probes sent while waiting without progress.",
     MetricType::kCounter, &RingStats::window_probes},
    {"ringcast_relay_window_acks_total", "Credit window: acknowledgements received.", MetricType::kCounter,
     &RingStats::window_acks},
    {"ringcast_relay_window_expired_total", "Credit window: ingresses no longer waited for (silent too long).",
     MetricType::kCounter, &RingStats::window_expired},
    {"ringcast_relay_window_left_total", "Credit window: ingresses that said they left.", MetricType::kCounter,
     &RingStats::window_left},
    {"ringcast_relay_window_overflow_total",
     "Credit window: acknowledgements from ingresses beyond the 64 it waits for (those are not waited for).",
     MetricType::kCounter, &RingStats::window_overflow},
};

struct JsSeries {
  const char* name;
  const char* help;
  std::uint64_t NatsStats::*field;
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

// --jetstream only (docs/scale-out.md, "JetStream").
constexpr JsSeries kJsCounters[] = {
    {"ringcast_relay_jetstream_published_total", "Messages handed to JetStream (first attempts).",
     &NatsStats::js_published},
    {"ringcast_relay_jetstream_acked_total", "Messages the stream acknowledged (duplicates included).",
     &NatsStats::js_acked},
    {"ringcast_relay_jetstream_duplicates_total", "Acks saying the stream already held the message (Nats-Msg-Id).",
     &NatsStats::js_duplicates},
    {"ringcast_relay_jetstream_retried_total", "Publish attempts repeated after an error or an ack timeout.",
     &NatsStats::js_retried},
    {"ringcast_relay_jetstream_failed_total", "Messages given up after the last attempt or unacked at stop.",
     &NatsStats::js_failed},
    {"ringcast_relay_jetstream_stalls_total", "Waits of a reader because the outstanding-ack limit was reached.",
     &NatsStats::js_stalls},
};

constexpr RingState kStates[] = {RingState::kWaitingForRing, RingState::kWaitingForProducer, RingState::kRelaying,
                                 RingState::kStopped, RingState::kFailed};

MetricLabels ring_labels(const RingStats& r) {
  return {{"ring", r.path}, {"channel", r.topic_in_payload ? r.name + "*" : r.name}};
}

struct IngressSeries {
  const char* name;
  const char* help;
  MetricType type;
  std::uint64_t NatsIngressStats::*field;
};

constexpr IngressSeries kIngressSeries[] = {
    {"ringcast_nats_in_acks_total", "Credit window acknowledgements sent.", MetricType::kCounter,
     &NatsIngressStats::acks},
    {"ringcast_nats_in_probes_total", "Credit window probes received.", MetricType::kCounter,
     &NatsIngressStats::probes},
    {"ringcast_nats_in_received_total", "Messages libnats handed to the ingress.", MetricType::kCounter,
     &NatsIngressStats::received},
    {"ringcast_nats_in_delivered_total", "Messages pushed into the ring / published to the broker.",
     MetricType::kCounter, &NatsIngressStats::delivered},
    {"ringcast_nats_in_gaps_total", "Gaps seen in a source's Ringcast-Seq.", MetricType::kCounter,
     &NatsIngressStats::gaps},
    {"ringcast_nats_in_lost_total", "Messages missing in those gaps.", MetricType::kCounter, &NatsIngressStats::lost},
    {"ringcast_nats_in_restarts_total", "New instances of a known source (ring recreated).", MetricType::kCounter,
     &NatsIngressStats::restarts},
    {"ringcast_nats_in_duplicates_total", "Messages at or below a source's last sequence (dropped).",
     MetricType::kCounter, &NatsIngressStats::duplicates},
    {"ringcast_nats_in_unsequenced_total", "Messages without sequence headers (delivered unchecked).",
     MetricType::kCounter, &NatsIngressStats::unsequenced},
    {"ringcast_nats_in_malformed_total", "Batches whose records did not parse (dropped).", MetricType::kCounter,
     &NatsIngressStats::malformed},
    {"ringcast_nats_in_oversize_total", "Ring: payloads over the ring's max message, or refused (not delivered).",
     MetricType::kCounter, &NatsIngressStats::oversize},
    {"ringcast_nats_in_full_waits_total", "Ring: pushes that found the blocking ring full and waited.",
     MetricType::kCounter, &NatsIngressStats::full_waits},
    {"ringcast_nats_in_refused_total", "Broker: publishes refused by a block-policy subscriber and retried.",
     MetricType::kCounter, &NatsIngressStats::refused},
    {"ringcast_nats_in_loss_notices_total", "Broker: connections told of an upstream gap.", MetricType::kCounter,
     &NatsIngressStats::loss_notices},
};

constexpr IngressSeries kIngressJsSeries[] = {
    {"ringcast_nats_in_jetstream_acks_total", "JetStream: AckAll acknowledgements sent (one per fetched batch).",
     MetricType::kCounter, &NatsIngressStats::js_acks},
    {"ringcast_nats_in_jetstream_redeliveries_total",
     "JetStream: redelivered messages already handled in this run (skipped).", MetricType::kCounter,
     &NatsIngressStats::js_redeliveries},
    {"ringcast_nats_in_jetstream_fetch_errors_total", "JetStream: pull requests that failed.", MetricType::kCounter,
     &NatsIngressStats::js_fetch_errors},
    {"ringcast_nats_in_jetstream_resumed_at", "JetStream: the stream sequence this run started from.",
     MetricType::kGauge, &NatsIngressStats::js_resumed_at},
    {"ringcast_nats_in_jetstream_redelivered_bound",
     "JetStream: at most this many messages reached the target a second time after the last restart.",
     MetricType::kGauge, &NatsIngressStats::js_redelivered_bound},
};

struct IngressGauge {
  const char* name;
  const char* help;
  MetricType type;
  std::int64_t NatsIngressStats::*field;
};

constexpr IngressGauge kIngressGauges[] = {
    {"ringcast_nats_in_pending_messages", "libnats: messages waiting for the ingress.", MetricType::kGauge,
     &NatsIngressStats::pending_msgs},
    {"ringcast_nats_in_pending_bytes", "libnats: bytes waiting for the ingress.", MetricType::kGauge,
     &NatsIngressStats::pending_bytes},
    {"ringcast_nats_in_max_pending_messages", "libnats: the most messages that ever waited.", MetricType::kGauge,
     &NatsIngressStats::max_pending_msgs},
    {"ringcast_nats_in_pending_limit_messages", "libnats: pending limit (messages); beyond it libnats drops.",
     MetricType::kGauge, &NatsIngressStats::pending_limit_msgs},
    {"ringcast_nats_in_pending_limit_bytes", "libnats: pending limit (bytes); beyond it libnats drops.",
     MetricType::kGauge, &NatsIngressStats::pending_limit_bytes},
    {"ringcast_nats_in_dropped_total", "libnats: messages dropped over the pending limits (slow consumer).",
     MetricType::kCounter, &NatsIngressStats::dropped},
};

MetricLabels ingress_labels(const NatsIngressStats& s) {
  return {{"subject", s.subject}, {s.to_ring ? "ring" : "channel", s.target}};
}

}  // namespace

void write_ingress_metrics(PrometheusWriter& w, std::span<const NatsIngressStats> ingress) {
  if (ingress.empty()) return;
  for (const IngressSeries& s : kIngressSeries) {
    w.header(s.name, s.help, s.type);
    for (const NatsIngressStats& i : ingress) w.sample(s.name, ingress_labels(i), static_cast<double>(i.*s.field));
  }
  for (const IngressGauge& s : kIngressGauges) {
    w.header(s.name, s.help, s.type);
    for (const NatsIngressStats& i : ingress) w.sample(s.name, ingress_labels(i), static_cast<double>(i.*s.field));
  }
  // Ring routes: ring B's header, what every ingress into it counted as lost.
  w.header("ringcast_nats_in_upstream_lost", "Ring: the ring's upstream_lost (messages lost before it).",
           MetricType::kGauge);
  for (const NatsIngressStats& i : ingress) {
    if (i.to_ring) w.sample("ringcast_nats_in_upstream_lost", ingress_labels(i), static_cast<double>(i.upstream_lost));
  }
  w.header("ringcast_nats_in_upstream_gaps", "Ring: the ring's upstream_gaps (gap events behind upstream_lost).",
           MetricType::kGauge);
  for (const NatsIngressStats& i : ingress) {
    if (i.to_ring) w.sample("ringcast_nats_in_upstream_gaps", ingress_labels(i), static_cast<double>(i.upstream_gaps));
  }
  // --jetstream routes only.
  for (const IngressSeries& s : kIngressJsSeries) {
    w.header(s.name, s.help, s.type);
    for (const NatsIngressStats& i : ingress) {
      if (i.jetstream) w.sample(s.name, ingress_labels(i), static_cast<double>(i.*s.field));
    }
  }
}

std::string ingress_info_lines(std::span<const NatsIngressStats> ingress) {
  std::string out;
  for (std::size_t i = 0; i < ingress.size(); ++i) {
    const NatsIngressStats& s = ingress[i];
    out += fmt::format(
        "nats_in_{}:subject={},{}={},received={},delivered={},gaps={},lost={},restarts={},duplicates={},"
        "unsequenced={},malformed={},oversize={},full_waits={},refused={},loss_notices={},pending={},pending_bytes={},"
        "max_pending={},pending_limit={},pending_limit_bytes={},dropped={},acks={},probes={}{}\r\n",
        i, s.subject, s.to_ring ? "ring" : "channel", s.target, s.received, s.delivered, s.gaps, s.lost, s.restarts,
        s.duplicates, s.unsequenced, s.malformed, s.oversize, s.full_waits, s.refused, s.loss_notices, s.pending_msgs,
        s.pending_bytes, s.max_pending_msgs, s.pending_limit_msgs, s.pending_limit_bytes, s.dropped, s.acks, s.probes,
        s.to_ring ? fmt::format(",upstream_lost={},upstream_gaps={}", s.upstream_lost, s.upstream_gaps)
                  : std::string());
    if (s.jetstream) {
      out += fmt::format(
          "nats_in_{}_jetstream:durable={},resumed_at={},redelivered_bound={},redeliveries={},acks={},"
          "fetch_errors={}\r\n",
          i, s.js_durable, s.js_resumed_at, s.js_redelivered_bound, s.js_redeliveries, s.js_acks, s.js_fetch_errors);
    }
  }
  return out;
}

void write_relay_metrics(PrometheusWriter& w, std::span<const RingStats> rings, const NatsStats* nats) {
  for (const RingSeries& s : kRingSeries) {
    w.header(s.name, s.help, s.type);
    for (const RingStats& r : rings) w.sample(s.name, ring_labels(r), static_cast<double>(r.*s.field));
  }
  for (const RingSeries& s : kWindowSeries) {
    w.header(s.name, s.help, s.type);
    for (const RingStats& r : rings) {
      if (r.window) w.sample(s.name, ring_labels(r), static_cast<double>(r.*s.field));
    }
  }
  w.header("ringcast_relay_ring_producer_alive", "1 when a live process holds the ring's producer role.",
           MetricType::kGauge);
  for (const RingStats& r : rings)
    w.sample("ringcast_relay_ring_producer_alive", ring_labels(r), r.producer_alive ? 1 : 0);
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
  if (!nats->jetstream) return;
  for (const JsSeries& s : kJsCounters) {
    w.metric(s.name, s.help, MetricType::kCounter, static_cast<double>(nats->*s.field));
  }
  w.metric("ringcast_relay_jetstream_pending_messages", "Published to JetStream, neither acked nor given up yet.",
           MetricType::kGauge, static_cast<double>(nats->js_pending));
}

}  // namespace ringcast::relay
