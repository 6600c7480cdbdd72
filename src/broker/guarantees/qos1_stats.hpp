// QoS 1 counters for INFO "# Qos1" and the ringcast_broker_qos1_* series of
// /metrics (docs/guarantees.md, "QoS 1 in INFO and /metrics"): the totals of
// every AckTracker, live or gone, plus what the sessions count themselves,
// so that a user whose subscriber "misses messages" can see where they are:
// in flight (sent, unacked), waiting (past the window), redelivered, expired,
// dropped from the waiting list, abandoned with their subscriber, or never
// stored (the publisher got an error instead of a puback).
//
// Thread safety: every method may be called from any thread. mu_ guards the
// list of live trackers and the retired totals; totals() takes each live
// tracker's own lock under it (lock order: this -> tracker; a tracker never
// calls in here while it holds its lock, and publishers never call in here).
// The event counters are relaxed atomics: statistics, ordered with nothing.
// Invariants:
//  1. A tracker constructed with this registry is in trackers_ from the end of
//     its constructor to the start of its destructor, which folds its counters
//     into retired_: the totals never go back. Its in-flight and waiting
//     deliveries at that moment are counted as abandoned.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "broker/guarantees/ack_tracker.hpp"
#include "ringcast/broker/metrics.hpp"

namespace ringcast::broker {

// Durable sessions as DurableSessions::counts() sees them.
struct SessionCounts {
  std::uint64_t attached = 0;  // held by a connection
  std::uint64_t detached = 0;  // kept for a reconnect (until --session-ttl)
  std::uint64_t expired = 0;   // dropped by --session-ttl since start
  std::uint64_t refused = 0;   // attaches by an identity other than the owner's, since start
  std::uint64_t taken = 0;     // sessions held here that a connection on another node took, since start
};

struct Qos1Totals {
  // Summed over live and gone trackers; in_flight and waiting over live ones.
  AckStats acks;
  std::uint64_t trackers = 0;      // live: QoS 1 connections plus detached durable sessions
  std::uint64_t abandoned = 0;     // in flight or waiting when their tracker went
  std::uint64_t pubacks = 0;       // puback frames sent
  std::uint64_t not_stored = 0;    // QoS 1 publishes refused because history failed to store them
  std::uint64_t unknown_acks = 0;  // acks nobody awaited (never sent at QoS 1, acked already, expired)
};

class Qos1Stats {
 public:
  Qos1Stats() = default;
  Qos1Stats(const Qos1Stats&) = delete;
  Qos1Stats& operator=(const Qos1Stats&) = delete;

  // AckTracker's constructor and destructor (invariant 1).
  void add(const AckTracker& t);
  void remove(const AckTracker& t);

  // relaxed: statistics.
  void count_puback() noexcept { pubacks_.fetch_add(1, std::memory_order_relaxed); }
  void count_not_stored() noexcept { not_stored_.fetch_add(1, std::memory_order_relaxed); }
  void count_unknown_ack() noexcept { unknown_acks_.fetch_add(1, std::memory_order_relaxed); }

  // O(live trackers), one tracker lock each.
  [[nodiscard]] Qos1Totals totals() const;
  // INFO's "# Qos1" fields and the ringcast_broker_qos1_* series.
  [[nodiscard]] std::string info_fields(const SessionCounts& sessions) const;
  void write_metrics(PrometheusWriter& w, const SessionCounts& sessions) const;

 private:
  mutable std::mutex mu_;
  std::vector<const AckTracker*> trackers_;  // guarded by mu_
  AckStats retired_;                         // guarded by mu_; in_flight and waiting unused
  std::uint64_t abandoned_ = 0;              // guarded by mu_
  std::atomic<std::uint64_t> pubacks_{0};
  std::atomic<std::uint64_t> not_stored_{0};
  std::atomic<std::uint64_t> unknown_acks_{0};
};

}  // namespace ringcast::broker
