#include "broker/guarantees/qos1_stats.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ringcast::broker {

namespace {

void add_counters(AckStats& to, const AckStats& s) noexcept {
  to.delivered += s.delivered;
  to.redelivered += s.redelivered;
  to.acked += s.acked;
  to.expired += s.expired;
  to.dropped += s.dropped;
}

}  // namespace

void Qos1Stats::add(const AckTracker& t) {
  std::lock_guard lock(mu_);
  trackers_.push_back(&t);
}

void Qos1Stats::remove(const AckTracker& t) {
  const AckStats s = t.stats();  // the tracker is its owner's alone now: nothing changes it
  std::lock_guard lock(mu_);
  const auto it = std::find(trackers_.begin(), trackers_.end(), &t);
  if (it == trackers_.end()) return;
  *it = trackers_.back();
  trackers_.pop_back();
  add_counters(retired_, s);
  abandoned_ += s.in_flight + s.waiting;
}

Qos1Totals Qos1Stats::totals() const {
  Qos1Totals t;
  {
    std::lock_guard lock(mu_);
    t.acks = retired_;
    t.abandoned = abandoned_;
    t.trackers = trackers_.size();
    for (const AckTracker* tr : trackers_) {
      const AckStats s = tr->stats();
      add_counters(t.acks, s);
      t.acks.in_flight += s.in_flight;
      t.acks.waiting += s.waiting;
    }
  }
  // relaxed: statistics.
  t.pubacks = pubacks_.load(std::memory_order_relaxed);
  t.not_stored = not_stored_.load(std::memory_order_relaxed);
  t.unknown_acks = unknown_acks_.load(std::memory_order_relaxed);
  return t;
}

std::string Qos1Stats::info_fields(const SessionCounts& sessions) const {
  const Qos1Totals t = totals();
  return fmt::format(
      "qos1_trackers:{}\r\nqos1_in_flight:{}\r\nqos1_waiting:{}\r\nqos1_delivered:{}\r\nqos1_redelivered:{}\r\n"
      "qos1_acked:{}\r\nqos1_expired:{}\r\nqos1_window_dropped:{}\r\nqos1_abandoned:{}\r\nqos1_unknown_acks:{}\r\n"
      "qos1_pubacks:{}\r\nqos1_not_stored:{}\r\nqos1_durable_attached:{}\r\nqos1_durable_detached:{}\r\n"
      "qos1_durable_expired:{}\r\nqos1_durable_refused:{}\r\nqos1_durable_taken:{}\r\n",
      t.trackers, t.acks.in_flight, t.acks.waiting, t.acks.delivered, t.acks.redelivered, t.acks.acked, t.acks.expired,
      t.acks.dropped, t.abandoned, t.unknown_acks, t.pubacks, t.not_stored, sessions.attached, sessions.detached,
      sessions.expired, sessions.refused, sessions.taken);
}

void Qos1Stats::write_metrics(PrometheusWriter& w, const SessionCounts& sessions) const {
  const Qos1Totals t = totals();
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  w.metric("ringcast_broker_qos1_trackers",
           "QoS 1 subscribers: connections with a QoS 1 subscription plus detached "
           "durable sessions.",
           MetricType::kGauge, d(t.trackers));
  w.metric("ringcast_broker_qos1_in_flight", "QoS 1 deliveries sent and awaiting an ack.", MetricType::kGauge,
           d(t.acks.in_flight));
  w.metric("ringcast_broker_qos1_waiting", "QoS 1 deliveries waiting for room in their subscriber's in-flight window.",
           MetricType::kGauge, d(t.acks.waiting));
  w.metric("ringcast_broker_qos1_delivered_total", "QoS 1 deliveries sent for the first time.", MetricType::kCounter,
           d(t.acks.delivered));
  w.metric("ringcast_broker_qos1_redelivered_total", "QoS 1 deliveries sent again (dup).", MetricType::kCounter,
           d(t.acks.redelivered));
  w.metric("ringcast_broker_qos1_acked_total", "QoS 1 deliveries acked.", MetricType::kCounter, d(t.acks.acked));
  w.metric("ringcast_broker_qos1_expired_total", "QoS 1 deliveries never acked after max retries (loss notice).",
           MetricType::kCounter, d(t.acks.expired));
  w.metric("ringcast_broker_qos1_window_dropped_total",
           "QoS 1 deliveries dropped from a full waiting list by the overflow policy (loss notice).",
           MetricType::kCounter, d(t.acks.dropped));
  w.metric("ringcast_broker_qos1_abandoned_total",
           "QoS 1 deliveries in flight or waiting when their subscriber went (non-durable) or its session expired.",
           MetricType::kCounter, d(t.abandoned));
  w.metric("ringcast_broker_qos1_unknown_acks_total", "Acks for no delivery awaiting one.", MetricType::kCounter,
           d(t.unknown_acks));
  w.metric("ringcast_broker_qos1_pubacks_total", "QoS 1 publishes acknowledged with a puback.", MetricType::kCounter,
           d(t.pubacks));
  w.metric("ringcast_broker_qos1_not_stored_total",
           "QoS 1 publishes refused because history failed to store them (an error instead of a puback).",
           MetricType::kCounter, d(t.not_stored));
  w.header("ringcast_broker_qos1_durable_sessions", "Durable QoS 1 sessions, by state.", MetricType::kGauge);
  w.sample("ringcast_broker_qos1_durable_sessions", {{"state", "attached"}}, d(sessions.attached));
  w.sample("ringcast_broker_qos1_durable_sessions", {{"state", "detached"}}, d(sessions.detached));
  w.metric("ringcast_broker_qos1_durable_expired_total", "Detached durable sessions dropped after --session-ttl.",
           MetricType::kCounter, d(sessions.expired));
  w.metric("ringcast_broker_qos1_durable_refused_total",
           "Durable session attaches refused: the client_id belongs to another identity.", MetricType::kCounter,
           d(sessions.refused));
  w.metric("ringcast_broker_qos1_durable_taken_total",
           "Durable sessions held here that a connection on another node of the cluster took (theirs closed here).",
           MetricType::kCounter, d(sessions.taken));
}

}  // namespace ringcast::broker
