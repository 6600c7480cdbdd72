// A broker's cluster link over NATS (`ringcast-broker --cluster URL`,
// docs/cluster.md): every node connects to the same NATS cluster; a message
// published on a node goes out once on the subject of its channel, and a node
// subscribes in NATS to the channels its own clients subscribe to, so NATS
// routes each message only to the nodes with interest (one copy per node).
// A node with pattern subscribers takes every channel's messages in (one
// more, wildcard, subscription): Redis globs have no NATS equivalent.
//
// Lifecycle: connect(), Broker::start(config, link.get()), attach(broker);
// at the end stop() (no message reaches the broker after it returns), then
// the broker is destroyed, then the link.
//
// Thread safety (every ClusterLink call as ringcast/broker/cluster.hpp says):
//  * mu_ guards the NATS subscriptions (interest_added/removed, settle's
//    bookkeeping, stop) and is never held while calling into the broker.
//  * egress_mu_ orders sends: a channel's seq numbers are given and its
//    frames handed to libnats in one critical section, so they leave in seq
//    order. libnats takes its own connection lock inside it (a buffer append;
//    the socket is written by libnats' flusher thread).
//  * Every subscription is delivered by one libnats thread (the library's
//    process-wide message delivery pool, which connect() sets to one worker;
//    nothing else in the process may grow it), in the order the NATS server
//    sent them, and runs their completion callbacks: the duplicate and gap
//    state and the batch of messages held for publishing are that thread's
//    alone (stop() drops what is held once no delivery can run).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <tl/expected.hpp>

#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/cluster.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

struct ClusterStats {
  bool connected = false;
  std::string server;                  // the NATS server connected to, or empty
  std::uint64_t sent = 0;              // messages handed to NATS
  std::uint64_t send_failed = 0;       // refused by libnats after ready() (reached this node only)
  std::uint64_t unreachable = 0;       // publishes refused because the cluster was unreachable
  std::uint64_t received = 0;          // messages from other nodes published here
  std::uint64_t duplicates = 0;        // dropped: already received (overlapping subscriptions)
  std::uint64_t gaps = 0;              // times a channel's seq from one origin jumped
  std::uint64_t lost = 0;              // messages those jumps skipped (told to subscribers in band)
  std::uint64_t refused_here = 0;      // received but refused by this node (block policy, stopped)
  std::uint64_t malformed = 0;         // not a ringcast cluster frame
  std::uint64_t nats_dropped = 0;      // dropped by libnats: this node fell behind its pending limits
  std::uint64_t subscribe_failed = 0;  // NATS subscriptions libnats refused (logged; that interest is deaf)
  std::uint64_t settles = 0;           // subscription confirmations that waited for NATS
  std::uint64_t settle_timeouts = 0;   // ... and gave up after settle_timeout (or NATS was down)
  std::uint64_t interest_channels = 0;
  std::uint64_t interest_patterns = 0;
  std::uint64_t interest_shard_channels = 0;
  std::uint64_t nats_subscriptions = 0;  // what those cost in NATS (one wildcard for all patterns)
  // With --history (docs/cluster.md, "History"): retained channels' messages
  // stored in the cluster's JetStream stream, refused (here or by JetStream),
  // stores not confirmed in time, publishes held because
  // max_pending_stores were in flight (and how many are now), the stream's
  // messages loaded at start and those published here since.
  bool history = false;
  std::uint64_t history_stored = 0;
  std::uint64_t history_store_failed = 0;
  std::uint64_t history_store_timeouts = 0;
  std::uint64_t history_stalls = 0;
  std::uint64_t history_pending = 0;  // a gauge: stores handed to JetStream, not yet acknowledged
  std::uint64_t history_loaded = 0;
  std::uint64_t history_copied = 0;
  std::uint64_t history_copy_refused = 0;
  std::uint64_t history_skipped = 0;
  // Durable sessions' owners and floors written to the cluster's KV bucket
  // (docs/cluster.md, "Durable sessions"), and those refused.
  std::uint64_t session_puts = 0;
  std::uint64_t session_put_failed = 0;
};

class NatsCluster final : public broker::ClusterLink {
 public:
  // Connects (retrying in the background if no server answers yet; until one
  // does, ready() is false and publishes are refused). Fails on bad options.
  static tl::expected<std::unique_ptr<NatsCluster>, std::string> connect(const ClusterConfig& config, LogFn log);
  NatsCluster(const NatsCluster&) = delete;
  NatsCluster& operator=(const NatsCluster&) = delete;
  ~NatsCluster() override;

  // Messages from other nodes are published into `broker` from now on.
  void attach(broker::Broker& broker) noexcept;
  // Unsubscribes, waits for deliveries in progress, closes the connection.
  // Idempotent; later interest calls do nothing and ready() is false.
  void stop() noexcept;

  [[nodiscard]] ClusterStats stats() const;
  // The "# Cluster" INFO section.
  [[nodiscard]] std::string info_text() const;
  // The ringcast_cluster_* families (docs/cluster.md, "Watching a cluster").
  void write_metrics(broker::PrometheusWriter& w) const;

  void interest_added(broker::InterestSpace space, std::string_view name) noexcept override;
  void interest_removed(broker::InterestSpace space, std::string_view name) noexcept override;
  void settle() noexcept override;
  [[nodiscard]] bool ready() const noexcept override;
  void send(bool shard, std::span<const broker::Message> msgs) noexcept override;
  [[nodiscard]] tl::expected<std::string, std::string> open_history(
      const broker::ClusterHistoryLimits& limits) override;
  [[nodiscard]] tl::expected<void, std::string> load_history(const broker::HistoryLoad& load) override;
  [[nodiscard]] broker::StoreOutcome store(std::span<const broker::Message> msgs, bool wait,
                                           std::span<std::uint64_t> offsets) noexcept override;
  [[nodiscard]] broker::StoreStatus store_async(const broker::Message& msg, broker::StoreDone done) noexcept override;
  [[nodiscard]] std::chrono::milliseconds busy_hold() const noexcept override;
  [[nodiscard]] tl::expected<broker::SessionStore*, std::string> open_sessions(
      std::chrono::milliseconds session_ttl) override;

  struct Impl;

 private:
  explicit NatsCluster(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::relay
