// State shared by all connections of one broker: configuration, subscription
// index, counters and the registry of live clients, and the operations every
// session calls (publish, update). No I/O and no protocol: the Asio server
// (server/), every session and the protocol tests drive it.
//
// Thread safety: every member may be called from any thread, except that
// update() is called by the client's owning thread (its SubscriptionUpdate is
// used there too).
//  * Counters are relaxed atomics: they are statistics, read without ordering
//    against anything else.
//  * registry_mu_ guards clients_ and the retired totals; under it, snapshots
//    take each client's queue lock and name lock. Lock order: index -> queue
//    (publishing), registry -> queue, registry -> client name; index and registry
//    are never held together.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "broker/auth/auth_stats.hpp"
#include "broker/core/client.hpp"
#include "broker/core/provider_slot.hpp"
#include "broker/core/store_receipt.hpp"
#include "broker/core/subscription_index.hpp"
#include "broker/guarantees/channel_history.hpp"
#include "broker/guarantees/durable_sessions.hpp"
#include "broker/guarantees/qos1_stats.hpp"
#include "broker/queue/connection_queue.hpp"
#include "broker/queue/flow_control.hpp"
#include "broker/tls/tls_stats.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/broker/stats.hpp"

namespace ringcast::broker {

class BrokerCore;

// A client's exclusive hold on the subscription index: (un)subscribes and a
// format change. The index update lock is held from BrokerCore::update() until
// this object dies, so a session queues its confirmations while holding it
// (resp/session.hpp, invariant 1): no message on a channel can be queued on the
// wrong side of the confirmation of its (un)subscribe. Every publisher waits
// meanwhile: encode, queue, and let go. Owner thread only; not movable.
class SubscriptionUpdate {
 public:
  SubscriptionUpdate(const SubscriptionUpdate&) = delete;
  SubscriptionUpdate& operator=(const SubscriptionUpdate&) = delete;
  // Releases the lock, then refreshes the client's mirrors (client.hpp, invariant 2).
  ~SubscriptionUpdate();

  // True if added / removed; false if already present / absent.
  bool subscribe(SubscriptionSpace space, std::string_view name);
  bool unsubscribe(SubscriptionSpace space, std::string_view name);
  // Drops every subscription of the client, in every space, letting the
  // publishers in after every kSlice removals.
  void unsubscribe_all();
  // Most subscriptions changed under one hold of the index lock.
  static constexpr std::size_t kSlice = 1024;
  // Call after each subscribe or unsubscribe of a long command: every kSlice
  // calls, `before_release` runs (it queues the slice's confirmations, which
  // must be queued under the lock: a message must not overtake one), then the
  // lock is released and retaken.
  template <class F>
  void slice_point(F&& before_release) {
    if (++changes_ % kSlice != 0) return;
    before_release();
    let_publishers_in();
  }
  void set_format(WireFormat f) noexcept;
  // QoS 1 (SubscriptionIndex::set_ack_tracker, set_qos1).
  void set_ack_tracker(AckTracker* tracker) noexcept;
  void set_qos1(SubscriptionSpace space, std::string_view name, bool qos1) noexcept;

 private:
  friend class BrokerCore;
  SubscriptionUpdate(SubscriptionIndex& index, Client& client);
  // Releases the lock and takes it again after the publishers waiting for it.
  void let_publishers_in();
  SubscriptionIndex& index_;
  Client& client_;
  std::unique_lock<std::shared_mutex> lock_;
  std::size_t changes_ = 0;  // slice_point() calls
};

class BrokerCore {
 public:
  // `history` (may be null: no channel keeps history) is ChannelHistory::open's
  // result for `config`; the core owns it and logs every publish run into it.
  // `cluster` (may be null: this node alone) hears this node's interest and
  // its publishes (ringcast/broker/cluster.hpp) and must outlive the core.
  explicit BrokerCore(BrokerConfig config, const Clock& clock = steady_clock_source(),
                      std::unique_ptr<ChannelHistory> history = nullptr, ClusterLink* cluster = nullptr);
  ~BrokerCore();
  BrokerCore(const BrokerCore&) = delete;
  BrokerCore& operator=(const BrokerCore&) = delete;

  [[nodiscard]] const BrokerConfig& config() const noexcept { return config_; }
  [[nodiscard]] SubscriptionIndex& index() noexcept { return index_; }
  // The per-channel history, or nullptr when no --history rule is set.
  [[nodiscard]] const ChannelHistory* history() const noexcept { return history_.get(); }
  // Durable QoS 1 subscribers' sessions (guarantees/durable_sessions.hpp).
  [[nodiscard]] DurableSessions& durable() noexcept { return durable_; }
  // QoS 1 counters (guarantees/qos1_stats.hpp): every AckTracker registers here.
  [[nodiscard]] Qos1Stats& qos1() noexcept { return qos1_; }
  [[nodiscard]] const Clock& clock() const noexcept { return clock_; }
  [[nodiscard]] FlowControl& flow() noexcept { return flow_; }
  // Authentication and permission counters, counted by every transport's session.
  [[nodiscard]] AuthStats& auth_stats() noexcept { return auth_stats_; }
  // TLS handshake and record counters (tls/tls_stats.hpp); INFO shows them
  // (section "tls") and /metrics once TLS is on (config().tls.enabled()).
  [[nodiscard]] tls::TlsStats& tls_stats() noexcept { return tls_stats_; }

  // Takes the index update lock for `c`'s (un)subscribes (SubscriptionUpdate).
  [[nodiscard]] SubscriptionUpdate update(Client& c) { return SubscriptionUpdate(index_, c); }

  // Which subscriptions a publish reaches: PUBLISH's channels and patterns,
  // or SPUBLISH's shard channels (a namespace of their own).
  enum class Space : std::uint8_t { kChannels, kShardChannels };
  // Where a message was published: on this node (by any of its publishers;
  // sent on to the other nodes of a cluster), on another node (it came in
  // through the cluster link and goes no further), or on any node of a
  // cluster, on a retained channel, taken back from the cluster's history
  // with the offset the history gave it (ClusterLink::open_history).
  enum class Origin : std::uint8_t { kThisNode, kCluster, kHistory };

  // The one way a message enters the core, from every publisher: the RESP and
  // WebSocket sessions, Broker::publish (the relay, an embedding process) and
  // whatever feeds the broker from elsewhere. An accepted message leaves
  // through SubscriptionIndex::publish into its subscribers' queues (and
  // history) and, published on this node of a cluster, on to the other nodes
  // (ClusterLink::send); a refused one comes back as PublishOutcome::kRefused
  // (or kUnreachable: in a cluster, it could not have left this node; or
  // kBacklogged: the cluster's history had the link's bound of stores in
  // flight), which the caller's RefusalHold (refusal_hold.hpp) holds or
  // refuses and counts.
  //
  // Publishes `msgs` in order, stopping at the first refused message.
  // receivers[i] gets message i's reply (its deliveries), ids[i] (when `ids`
  // is not empty; kChannels only) its id, its history offset on a retained
  // channel. A QoS 1 message that history failed to store is counted in the
  // qos1 stats. REQUIRES: receivers.size() == msgs.size(); ids empty or
  // ids.size() == msgs.size().
  //
  // In a cluster with history, a message published here on a retained
  // channel is not offered here: it goes to the cluster's history
  // (ClusterLink::store; QoS 1 waits until stored, and ids[i] is its offset,
  // or 0 for QoS 0) with 0 receivers, and comes back with Origin::kHistory,
  // whose ids are the offsets given (REQUIRES: not empty). A message the link
  // fails to take is refused: kNotStored at QoS 1, else kUnreachable; one
  // the link is too busy to take now, kBacklogged (never waited for here).
  PublishOutcome publish(std::span<const Message> msgs, std::span<std::size_t> receivers,
                         std::span<std::uint64_t> ids = {}, Space space = Space::kChannels,
                         Origin origin = Origin::kThisNode);
  // One message (a PUBLISH, SPUBLISH or WebSocket publish with its QoS,
  // Message::qos): its outcome, deliveries and id (0 if refused; a WebSocket
  // QoS 1 publish is answered by puback {message_id}).
  struct Published {
    PublishOutcome::Status status = PublishOutcome::Status::kPublished;
    std::size_t receivers = 0;
    std::uint64_t id = 0;
  };
  Published publish(const Message& m, Space space = Space::kChannels);
  // Whether publish(m) would wait for the cluster's history to store `m`: a
  // QoS 1 message on a retained channel, published here, in a cluster. A
  // publisher that must not wait calls publish_async(m) instead.
  [[nodiscard]] bool stored_by_cluster(const Message& m) const noexcept {
    return m.qos == 1 && index_.cluster() != nullptr && retained(m);
  }
  // REQUIRES: stored_by_cluster(m). Hands `m` to ClusterLink::store_async:
  // kPublished once handed over (no id yet), and `receipt` completes later,
  // from the link's thread, stored with its offset or not; else kUnreachable,
  // kBacklogged or kNotStored, as publish(m) would say, and `receipt` stays
  // pending.
  PublishOutcome::Status publish_async(const Message& m, const std::shared_ptr<StoreReceipt>& receipt);
  // How long a publisher that can be held is held for kBacklogged: the
  // cluster's bound on a store's wait (0 without a cluster).
  [[nodiscard]] std::chrono::nanoseconds backlog_hold() const noexcept {
    return index_.cluster() != nullptr ? index_.cluster()->busy_hold() : std::chrono::nanoseconds(0);
  }
  void count_refused(std::uint64_t n) noexcept {
    refused_.fetch_add(n, std::memory_order_relaxed);
  }  // relaxed: statistic

  [[nodiscard]] std::uint64_t next_client_id() noexcept {
    return next_id_.fetch_add(1, std::memory_order_relaxed);  // relaxed: ids need only uniqueness
  }
  // Listener facts shown by INFO, set once before the first connection.
  void set_listener_info(std::uint16_t port, unsigned io_threads) noexcept {
    port_.store(port, std::memory_order_relaxed);
    io_threads_.store(io_threads, std::memory_order_relaxed);
  }
  // relaxed: like set_listener_info, set once before the first connection.
  void set_tls_port(std::uint16_t port) noexcept { tls_port_.store(port, std::memory_order_relaxed); }
  // relaxed: each a fact of its own, set once before the first connection.
  [[nodiscard]] std::uint16_t port() const noexcept { return port_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint16_t tls_port() const noexcept { return tls_port_.load(std::memory_order_relaxed); }
  [[nodiscard]] unsigned io_threads() const noexcept { return io_threads_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::chrono::steady_clock::time_point started() const noexcept { return started_; }

  // Client's constructor and detach() (client.hpp, invariant 1).
  void register_client(Client& c);
  // Folds the client's drop counters into the retired totals.
  void unregister_client(Client& c);

  [[nodiscard]] BrokerStats stats() const;
  // Every connection, by id (CLIENT LIST), or one (CLIENT INFO).
  [[nodiscard]] std::vector<ConnectionStats> connection_stats() const;
  [[nodiscard]] ConnectionStats connection_stats(const Client& c) const;
  // The embedder's extra INFO sections (resp/info.hpp), or null.
  [[nodiscard]] std::shared_ptr<const InfoProvider> info_provider() const { return info_provider_.get(); }
  void set_info_provider(InfoProvider provider) { info_provider_.set(std::move(provider)); }
  // Prometheus text: the broker's series (core/metrics.hpp), then the
  // embedder's provider's (called outside every broker lock).
  [[nodiscard]] std::string metrics_text() const;
  void set_metrics_provider(MetricsProvider provider) { metrics_provider_.set(std::move(provider)); }

  void count_connection() noexcept { total_connections_.fetch_add(1, std::memory_order_relaxed); }
  void count_rejected() noexcept { rejected_.fetch_add(1, std::memory_order_relaxed); }
  // relaxed: statistics, like the counters around it.
  void count_accept_backoff() noexcept { accept_backoffs_.fetch_add(1, std::memory_order_relaxed); }
  void count_command() noexcept { commands_.fetch_add(1, std::memory_order_relaxed); }

 private:
  // publish() on this node of a cluster with history: each stretch of
  // retained channels to ClusterLink::store, the rest as publish() does.
  PublishOutcome publish_through_history(std::span<const Message> msgs, std::span<std::size_t> receivers,
                                         std::span<std::uint64_t> ids, ClusterLink& cluster);
  [[nodiscard]] static ConnectionStats connection_stats_locked(const Client& c);
  // In a cluster with history: whether `m`, published here, goes to the
  // cluster's history rather than to this node's subscribers.
  [[nodiscard]] bool retained(const Message& m) const noexcept {
    return history_ != nullptr && history_->rule(m.channel) != nullptr;
  }

  const BrokerConfig config_;
  const Clock& clock_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const std::unique_ptr<ChannelHistory> history_;  // before index_: it logs into it
  Qos1Stats qos1_;                                 // before durable_: its sessions' trackers register here
  DurableSessions durable_{history_ != nullptr ? &history_->sessions() : nullptr, config_.session_ttl};
  SubscriptionIndex index_;

  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint16_t> port_{0};
  std::atomic<std::uint16_t> tls_port_{0};
  std::atomic<unsigned> io_threads_{0};
  std::atomic<std::uint64_t> total_connections_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> accept_backoffs_{0};
  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> deliveries_{0};
  std::atomic<std::uint64_t> refused_{0};
  AuthStats auth_stats_;
  tls::TlsStats tls_stats_;
  FlowControl flow_;

  ProviderSlot<InfoProvider> info_provider_;
  ProviderSlot<MetricsProvider> metrics_provider_;

  mutable std::mutex registry_mu_;
  std::vector<Client*> clients_;
  std::array<std::uint64_t, kDropReasonCount> retired_drops_{};
  std::uint64_t slow_disconnects_ = 0;
  std::uint64_t retired_conflated_ = 0;
};

}  // namespace ringcast::broker
