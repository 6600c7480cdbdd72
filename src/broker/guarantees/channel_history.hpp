// The broker's per-channel history (docs/guarantees.md): the retention rules
// (--history), the store they fill (memory, or LMDB with --data-dir), the
// publish path's log of runs (RunLog: every accepted run of a retained
// channel is appended once, its offsets being the index's message ids), and
// the timer that syncs (--fsync batch) and prunes by TTL; and where durable
// QoS 1 sessions keep their floors (sessions()).
//
// Thread safety: every method may be called from any thread. append() and
// last_id() come from publishers under their channel's stripe lock
// (subscription_index.hpp, invariant 5); reads from sessions; the timer thread
// calls the store's flush() and prune(), which the store allows concurrently.
// Counters are relaxed atomics (statistics).
// Invariants:
//  1. A channel is retained iff a rule matches it (first match wins); only
//     retained channels reach the store, so store offsets == message ids.
//  2. A failed append is counted and the run is not stored. A QoS 0 run is
//     still delivered and the next stored run skips its ids, which the store
//     reports as truncation (floor rises), so a recovery across it answers
//     recovered: false rather than a gap. A QoS 1 run is refused by the index
//     (append returns false): it takes no ids and reaches nobody.
//  3. The timer thread runs from construction to destruction; the destructor
//     stops it, then the store's own destructor syncs and closes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <tl/expected.hpp>

#include "broker/guarantees/history_sessions.hpp"
#include "broker/guarantees/history_store.hpp"
#include "broker/guarantees/retention.hpp"
#include "broker/util/run_log.hpp"
#include "ringcast/broker/cluster.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/error.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/broker/session_store.hpp"

namespace ringcast::broker {

class ChannelHistory final : public RunLog {
 public:
  // The history `config` asks for: nullptr when it has no --history rule;
  // LMDB in config.data_dir when set (kHistory naming the directory and the
  // reason when it is corrupt, foreign, of a newer format or unusable), else
  // memory. With a `cluster`: the cluster's history (ClusterLink::open_history;
  // kHistory with its error), copied into memory here, its offsets the
  // cluster's (sparse per channel), and the cluster's durable sessions
  // (ClusterLink::open_sessions); config.data_dir must be empty.
  // REQUIRES: validate(config) succeeded.
  [[nodiscard]] static tl::expected<std::unique_ptr<ChannelHistory>, BrokerError> open(const BrokerConfig& config,
                                                                                       ClusterLink* cluster = nullptr);

  // Starts the timer thread (invariant 3). `shared_sessions` (a cluster's;
  // must outlive this): where sessions() points; null: into `store`.
  ChannelHistory(std::unique_ptr<HistoryStore> store, std::vector<RetentionRule> rules, bool persistent,
                 const BrokerConfig& config, SessionStore* shared_sessions = nullptr);
  ~ChannelHistory() override;
  ChannelHistory(const ChannelHistory&) = delete;
  ChannelHistory& operator=(const ChannelHistory&) = delete;

  // The rule that retains `channel`, or nullptr (invariant 1).
  [[nodiscard]] const RetentionRule* rule(std::string_view channel) const noexcept {
    return find_retention(rules_, channel);
  }
  [[nodiscard]] const HistoryStore& store() const noexcept { return *store_; }
  // Where durable QoS 1 sessions keep their owners and floors
  // (durable_sessions.hpp): the store, or the cluster's session store.
  [[nodiscard]] SessionStore& sessions() noexcept { return *sessions_; }
  [[nodiscard]] const std::string& epoch() const noexcept { return store_->epoch(); }

  // RunLog.
  [[nodiscard]] std::uint64_t last_id(std::string_view channel) noexcept override;
  [[nodiscard]] bool append(std::string_view channel, std::uint64_t first_id, std::span<const Message> run,
                            std::int64_t time_ms) noexcept override;

  // The reason the last failed append gave (empty: none failed).
  [[nodiscard]] std::string last_error() const;
  // INFO's "# History" fields.
  [[nodiscard]] std::string info_fields() const;
  // The ringcast_broker_history_* series of /metrics.
  void write_metrics(PrometheusWriter& w) const;

 private:
  void timer_loop();

  const std::unique_ptr<HistoryStore> store_;
  HistorySessions own_sessions_{*store_};
  SessionStore* const sessions_;  // &own_sessions_, or a cluster's
  const std::vector<RetentionRule> rules_;
  const bool persistent_;
  const FsyncMode fsync_;
  const std::chrono::milliseconds flush_interval_;
  const std::chrono::milliseconds prune_interval_;

  std::atomic<std::uint64_t> appended_{0};       // messages stored
  std::atomic<std::uint64_t> append_errors_{0};  // runs not stored (invariant 2)
  std::atomic<std::uint64_t> pruned_by_timer_{0};
  std::atomic<std::uint64_t> flush_errors_{0};
  mutable std::mutex error_mu_;
  std::string last_error_;  // guarded by error_mu_

  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool stopping_ = false;  // guarded by timer_mu_
  std::thread timer_;
};

}  // namespace ringcast::broker
