#include "broker/guarantees/channel_history.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <fmt/format.h>

#include "broker/util/clock.hpp"

namespace ringcast::broker {

tl::expected<std::unique_ptr<ChannelHistory>, BrokerError> ChannelHistory::open(const BrokerConfig& config,
                                                                                ClusterLink* cluster) {
  if (config.history.empty()) return std::unique_ptr<ChannelHistory>();
  std::vector<RetentionRule> rules;
  for (const std::string& spec : config.history) rules.push_back(parse_retention(spec).value());
  if (cluster != nullptr) {
    // The cluster's store holds the history; this node keeps a copy in memory
    // that the cluster fills in its order (docs/cluster.md, "History").
    if (!config.data_dir.empty()) {
      return tl::unexpected(BrokerError{BrokerError::Code::kHistory, 0,
                                        "--data-dir does not go with --cluster: a cluster keeps its history in "
                                        "JetStream, and each node a copy in memory (docs/cluster.md, \"History\")"});
    }
    ClusterHistoryLimits limits;
    bool every_rule_expires = true;
    for (const RetentionRule& r : rules) {
      limits.max_per_channel = std::max(limits.max_per_channel, r.size);
      limits.max_age = std::max(limits.max_age, r.ttl);
      every_rule_expires = every_rule_expires && r.ttl.count() > 0;
    }
    if (!every_rule_expires) limits.max_age = std::chrono::milliseconds(0);
    auto epoch = cluster->open_history(limits);
    if (!epoch) return tl::unexpected(BrokerError{BrokerError::Code::kHistory, 0, epoch.error()});
    auto sessions = cluster->open_sessions(config.session_ttl);
    if (!sessions) return tl::unexpected(BrokerError{BrokerError::Code::kHistory, 0, sessions.error()});
    auto store = make_memory_history_store(rules, {std::move(*epoch), /*sparse_offsets=*/true});
    // A channel no rule of this node retains (another node's rules may) is
    // skipped, as the copy skips it later (kNoRetention).
    const auto loaded = cluster->load_history(
        [&store](std::string_view channel, std::uint64_t offset, std::string_view payload, std::int64_t time_ms) {
          const HistoryInput in{payload, time_ms};
          (void)store->append(channel, offset, {&in, 1}, wall_clock_ms());
        });
    if (!loaded) return tl::unexpected(BrokerError{BrokerError::Code::kHistory, 0, loaded.error()});
    return std::make_unique<ChannelHistory>(std::move(store), std::move(rules), false, config, *sessions);
  }
  if (config.data_dir.empty()) {
    auto store = make_memory_history_store(rules);
    return std::make_unique<ChannelHistory>(std::move(store), std::move(rules), false, config);
  }
  HistoryOptions options;
  options.dir = config.data_dir;
  options.fsync = config.fsync;
  options.rules = rules;
  auto store = open_lmdb_history_store(std::move(options));
  if (!store) return tl::unexpected(BrokerError{BrokerError::Code::kHistory, 0, store.error().message()});
  return std::make_unique<ChannelHistory>(std::move(*store), std::move(rules), true, config);
}

ChannelHistory::ChannelHistory(std::unique_ptr<HistoryStore> store, std::vector<RetentionRule> rules, bool persistent,
                               const BrokerConfig& config, SessionStore* shared_sessions)
    : store_(std::move(store)),
      sessions_(shared_sessions != nullptr ? shared_sessions : &own_sessions_),
      rules_(std::move(rules)),
      persistent_(persistent),
      fsync_(config.fsync),
      flush_interval_(config.flush_interval),
      prune_interval_(config.prune_interval),
      timer_([this] { timer_loop(); }) {}

ChannelHistory::~ChannelHistory() {
  {
    std::lock_guard lock(timer_mu_);
    stopping_ = true;
  }
  timer_cv_.notify_one();
  timer_.join();
}

std::uint64_t ChannelHistory::last_id(std::string_view channel) noexcept {
  return rule(channel) == nullptr ? 0 : store_->top(channel);
}

bool ChannelHistory::append(std::string_view channel, std::uint64_t first_id, std::span<const Message> run,
                            std::int64_t time_ms) noexcept {
  if (rule(channel) == nullptr) return true;  // nothing to store
  // Per thread, keeping its capacity: a steady publisher does not allocate here
  // (the store copies the payloads it keeps).
  thread_local std::vector<HistoryInput> inputs;
  try {
    inputs.clear();
    for (const Message& m : run) inputs.push_back({m.payload, time_ms});
    auto r = store_->append(channel, first_id, inputs, time_ms);
    if (r) {
      appended_.fetch_add(run.size(), std::memory_order_relaxed);  // relaxed: statistic
      return true;
    }
    append_errors_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    std::lock_guard lock(error_mu_);
    last_error_ = r.error().message();
  } catch (const std::exception& e) {                        // std::bad_alloc from the store: counted like any failure
    append_errors_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    std::lock_guard lock(error_mu_);
    last_error_ = e.what();
  }
  return false;
}

void ChannelHistory::timer_loop() {
  const bool flushing = persistent_ && fsync_ == FsyncMode::kBatch;
  const auto tick = flushing ? std::min(flush_interval_, prune_interval_) : prune_interval_;
  auto next_prune = std::chrono::steady_clock::now() + prune_interval_;
  std::unique_lock lock(timer_mu_);
  while (!timer_cv_.wait_for(lock, tick, [this] { return stopping_; })) {
    lock.unlock();
    if (flushing && !store_->flush()) flush_errors_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    if (std::chrono::steady_clock::now() >= next_prune) {
      next_prune += prune_interval_;
      if (auto n = store_->prune(wall_clock_ms())) pruned_by_timer_.fetch_add(*n, std::memory_order_relaxed);
    }
    lock.lock();
  }
}

std::string ChannelHistory::last_error() const {
  std::lock_guard lock(error_mu_);
  return last_error_;
}

std::string ChannelHistory::info_fields() const {
  const HistoryUsage u = store_->usage();
  std::string rules;
  for (const RetentionRule& r : rules_) {
    if (!rules.empty()) rules += ' ';
    rules += r.ttl.count() > 0 ? fmt::format("{}={},{}ms", r.pattern, r.size, r.ttl.count())
                               : fmt::format("{}={}", r.pattern, r.size);
  }
  std::string last = last_error();
  for (char& c : last) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return fmt::format(
      "history_rules:{}\r\nhistory_store:{}\r\nhistory_fsync:{}\r\nhistory_epoch:{}\r\nhistory_channels:{}\r\n"
      "history_messages:{}\r\nhistory_bytes:{}\r\nhistory_appended:{}\r\nhistory_append_errors:{}\r\n"
      "history_pruned_by_timer:{}\r\nhistory_flush_errors:{}\r\nhistory_last_error:{}\r\n",
      rules, persistent_ ? "lmdb" : "memory", persistent_ ? to_string(fsync_) : "none", store_->epoch(), u.channels,
      u.messages, u.bytes, appended_.load(std::memory_order_relaxed), append_errors_.load(std::memory_order_relaxed),
      pruned_by_timer_.load(std::memory_order_relaxed), flush_errors_.load(std::memory_order_relaxed), last);
}

void ChannelHistory::write_metrics(PrometheusWriter& w) const {
  const HistoryUsage u = store_->usage();
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  w.metric("ringcast_broker_history_channels", "Channels holding history.", MetricType::kGauge, d(u.channels));
  w.metric("ringcast_broker_history_messages", "Messages held in history.", MetricType::kGauge, d(u.messages));
  w.metric("ringcast_broker_history_bytes", "Bytes held in history (payloads + 16 per message).", MetricType::kGauge,
           d(u.bytes));
  w.metric("ringcast_broker_history_appended_total", "Messages stored in history.", MetricType::kCounter,
           d(appended_.load(std::memory_order_relaxed)));
  w.metric("ringcast_broker_history_append_errors_total", "Publish runs history failed to store.", MetricType::kCounter,
           d(append_errors_.load(std::memory_order_relaxed)));
  w.metric("ringcast_broker_history_pruned_total", "Messages the timer dropped past their TTL or size.",
           MetricType::kCounter, d(pruned_by_timer_.load(std::memory_order_relaxed)));
}

}  // namespace ringcast::broker
