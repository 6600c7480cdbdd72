// State shared by all connections of one broker: configuration, subscription
// index, counters and the registry of live sessions. No I/O: the Asio server
// (server.cpp) and the protocol tests both drive it.
//
// Thread safety: every member may be called from any thread.
//  * Counters are relaxed atomics: they are statistics, read without ordering
//    against anything else.
//  * registry_mu_ guards sessions_, the retired totals and every session's name;
//    it is never held while taking the index lock or a queue lock... except that
//    snapshots read queue stats (queue mutex) under it. Lock order:
//    index -> registry is never taken; registry -> queue is the only nesting.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "broker/core/connection_queue.hpp"
#include "broker/core/flow_control.hpp"
#include "broker/core/provider_slot.hpp"
#include "broker/core/subscription_index.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/metrics.hpp"

namespace ringcast::broker {

class Session;

class BrokerCore {
 public:
  explicit BrokerCore(BrokerConfig config, const Clock& clock = steady_clock_source());
  BrokerCore(const BrokerCore&) = delete;
  BrokerCore& operator=(const BrokerCore&) = delete;

  [[nodiscard]] const BrokerConfig& config() const noexcept { return config_; }
  [[nodiscard]] SubscriptionIndex& index() noexcept { return index_; }
  [[nodiscard]] const Clock& clock() const noexcept { return clock_; }
  [[nodiscard]] FlowControl& flow() noexcept { return flow_; }

  // PUBLISH from a client or from the embedding process; returns the receiver
  // count, or kRefusedReceivers (a `block` subscriber had no room; not counted here).
  std::size_t publish(std::string_view channel, std::string_view payload);
  // Several PUBLISHes in order (SubscriptionIndex::publish, same return value);
  // receivers[i] gets message i's reply or kRefusedReceivers. Refusals are not counted
  // here: the caller may retry (count_refused once it gives up).
  // REQUIRES: receivers.size() == msgs.size().
  std::size_t publish(std::span<const Message> msgs, std::span<std::size_t> receivers,
                      bool stop_at_refusal = false);
  void count_refused(std::uint64_t n) noexcept { refused_.fetch_add(n, std::memory_order_relaxed); }  // relaxed: statistic
  // SPUBLISH: reaches the channel's shard subscriptions only; returns their
  // count, or kRefusedReceivers (a `block` subscriber had no room; not counted here).
  std::size_t publish_shard(std::string_view channel, std::string_view payload);

  [[nodiscard]] std::uint64_t next_client_id() noexcept {
    return next_id_.fetch_add(1, std::memory_order_relaxed);  // relaxed: ids need only uniqueness
  }
  // Listener facts shown by INFO, set once before the first connection.
  void set_listener_info(std::uint16_t port, unsigned io_threads) noexcept {
    port_.store(port, std::memory_order_relaxed);
    io_threads_.store(io_threads, std::memory_order_relaxed);
  }

  void register_session(Session& s);
  // Folds the session's drop counters into the retired totals.
  void unregister_session(Session& s);
  void set_session_name(Session& s, std::string name);
  [[nodiscard]] std::string session_name(const Session& s) const;

  // CLIENT LIST body (one line per session, Redis-style key=value fields), or one
  // session's line for CLIENT INFO.
  [[nodiscard]] std::string client_list() const;
  [[nodiscard]] std::string client_info(const Session& s) const;
  // INFO text for `section` ("", "all", "default", "everything", "server",
  // "clients", "stats", "pubsub", "drops"); unknown sections give "".
  [[nodiscard]] std::string info(std::string_view section) const;
  [[nodiscard]] BrokerStats stats() const;
  [[nodiscard]] std::vector<ConnectionStats> connection_stats() const;
  // INFO text for a command's section list: the core's sections plus the
  // embedder's provider (called outside every broker lock).
  [[nodiscard]] std::string info_reply(const std::vector<std::string>& sections) const;
  void set_info_provider(InfoProvider provider) { info_provider_.set(std::move(provider)); }
  // Prometheus text: the broker's series (core/metrics.hpp), then the
  // embedder's provider's (called outside every broker lock).
  [[nodiscard]] std::string metrics_text() const;
  void set_metrics_provider(MetricsProvider provider) { metrics_provider_.set(std::move(provider)); }

  void count_connection() noexcept { total_connections_.fetch_add(1, std::memory_order_relaxed); }
  void count_rejected() noexcept { rejected_.fetch_add(1, std::memory_order_relaxed); }
  void count_command() noexcept { commands_.fetch_add(1, std::memory_order_relaxed); }

 private:
  [[nodiscard]] std::string client_line_locked(const Session& s) const;

  const BrokerConfig config_;
  const Clock& clock_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  SubscriptionIndex index_;

  std::atomic<std::uint64_t> next_id_{1};
  std::atomic<std::uint16_t> port_{0};
  std::atomic<unsigned> io_threads_{0};
  std::atomic<std::uint64_t> total_connections_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> commands_{0};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> deliveries_{0};
  std::atomic<std::uint64_t> refused_{0};
  FlowControl flow_;

  ProviderSlot<InfoProvider> info_provider_;
  ProviderSlot<MetricsProvider> metrics_provider_;

  mutable std::mutex registry_mu_;
  std::vector<Session*> sessions_;
  std::array<std::uint64_t, kDropReasonCount> retired_drops_{};
  std::uint64_t slow_disconnects_ = 0;
  std::uint64_t retired_conflated_ = 0;
};

}  // namespace ringcast::broker
