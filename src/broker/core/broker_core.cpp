#include "broker/core/broker_core.hpp"

#include <algorithm>

#include "broker/core/metrics.hpp"
#include "broker/guarantees/channel_history.hpp"

namespace ringcast::broker {

SubscriptionUpdate::SubscriptionUpdate(SubscriptionIndex& index, Client& client)
    : index_(index), client_(client), lock_(index.lock_for_update()) {}

SubscriptionUpdate::~SubscriptionUpdate() {
  lock_.unlock();
  // The confirmations queued under the lock are written after this returns:
  // interest this update created has reached the other nodes by then.
  if (ClusterLink* cluster = index_.cluster()) cluster->settle();
  client_.refresh_mirrors();
}

bool SubscriptionUpdate::subscribe(SubscriptionSpace space, std::string_view name) {
  return index_.add(client_, space, name);
}

bool SubscriptionUpdate::unsubscribe(SubscriptionSpace space, std::string_view name) {
  return index_.remove(client_, space, name);
}

void SubscriptionUpdate::unsubscribe_all() {
  // A client may hold up to --max-subscriptions: remove them a slice at a
  // time and let the publishers waiting on the index lock in between, so a
  // client leaving costs each of them one slice at most (issue 40). Between
  // slices the client is still in the index (invariant 3 of
  // subscription_index.hpp holds until the last slice) and may still be
  // offered messages on what it has not dropped yet, as before its command.
  while (!index_.remove_some(client_, kSlice)) let_publishers_in();
}

void SubscriptionUpdate::let_publishers_in() {
  // glibc's rwlock hands the lock to the readers already waiting when a
  // writer releases it (they registered before blocking), so the lock() below
  // waits for them: each waiting publisher gets one turn.
  lock_.unlock();
  lock_.lock();
}

void SubscriptionUpdate::set_format(WireFormat f) noexcept { index_.set_format(client_, f); }

void SubscriptionUpdate::set_ack_tracker(AckTracker* tracker) noexcept { index_.set_ack_tracker(client_, tracker); }

void SubscriptionUpdate::set_qos1(SubscriptionSpace space, std::string_view name, bool qos1) noexcept {
  index_.set_qos1(client_, space, name, qos1);
}

BrokerCore::BrokerCore(BrokerConfig config, const Clock& clock, std::unique_ptr<ChannelHistory> history,
                       ClusterLink* cluster)
    : config_(std::move(config)),
      clock_(clock),
      history_(std::move(history)),
      index_(history_.get(), cluster),
      // At most half the hard limit: pacing must start well before a reading
      // subscriber's queue could meet its policy.
      flow_(std::min(config_.pace_bytes, config_.queue_limits.hard_bytes / 2), config_.max_stall) {}

BrokerCore::~BrokerCore() = default;

BrokerCore::Published BrokerCore::publish(const Message& m, Space space) {
  Published p;
  p.status = publish({&m, 1}, {&p.receivers, 1}, {&p.id, 1}, space).status;
  return p;
}

PublishOutcome::Status BrokerCore::publish_async(const Message& m, const std::shared_ptr<StoreReceipt>& receipt) {
  ClusterLink& cluster = *index_.cluster();
  if (!cluster.ready()) return PublishOutcome::Status::kUnreachable;
  switch (cluster.store_async(m, [receipt](bool stored, std::uint64_t offset) { receipt->complete(stored, offset); })) {
    case StoreStatus::kTaken:
      break;
    case StoreStatus::kBusy:
      return PublishOutcome::Status::kBacklogged;
    case StoreStatus::kFailed:
      qos1_.count_not_stored();
      return PublishOutcome::Status::kNotStored;
  }
  published_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics only
  return PublishOutcome::Status::kPublished;
}

PublishOutcome BrokerCore::publish(std::span<const Message> msgs, std::span<std::size_t> receivers,
                                   std::span<std::uint64_t> ids, Space space, Origin origin) {
  // A message from another node is not sent back out; one published here
  // reaches nobody unless it can also leave (ClusterLink::ready).
  ClusterLink* const cluster = origin == Origin::kThisNode ? index_.cluster() : nullptr;
  if (cluster != nullptr && !cluster->ready()) return {0, PublishOutcome::Status::kUnreachable};
  PublishOutcome out;
  if (origin == Origin::kHistory) {
    out = index_.publish_numbered(msgs, config_.dedupe, receivers, ids);
  } else if (cluster != nullptr && history_ != nullptr && space == Space::kChannels) {
    out = publish_through_history(msgs, receivers, ids, *cluster);
  } else {
    out = space == Space::kShardChannels ? index_.publish_shard(msgs, receivers)
                                         : index_.publish(msgs, config_.dedupe, receivers, ids);
    if (cluster != nullptr && out.published > 0) {
      cluster->send(space == Space::kShardChannels, msgs.first(out.published));
    }
  }
  if (out.status == PublishOutcome::Status::kNotStored) qos1_.count_not_stored();
  std::size_t deliveries = 0;
  for (std::size_t i = 0; i < out.published; ++i) deliveries += receivers[i];
  // relaxed: statistics only.
  published_.fetch_add(out.published, std::memory_order_relaxed);
  deliveries_.fetch_add(deliveries, std::memory_order_relaxed);
  return out;
}

PublishOutcome BrokerCore::publish_through_history(std::span<const Message> msgs, std::span<std::size_t> receivers,
                                                   std::span<std::uint64_t> ids, ClusterLink& cluster) {
  std::size_t i = 0;
  while (i < msgs.size()) {
    // The longest stretch from i that is retained, or not, throughout: in
    // order, so a publisher's messages on one channel stay in its order.
    const bool kept = retained(msgs[i]);
    std::size_t j = i + 1;
    while (j < msgs.size() && retained(msgs[j]) == kept) ++j;
    const auto part = msgs.subspan(i, j - i);
    const auto part_ids = ids.empty() ? ids : ids.subspan(i, j - i);
    if (!kept) {
      const PublishOutcome o = index_.publish(part, config_.dedupe, receivers.subspan(i, j - i), part_ids);
      if (o.published > 0) cluster.send(false, part.first(o.published));
      if (o.status != PublishOutcome::Status::kPublished) return {i + o.published, o.status};
    } else {
      const bool wait = std::any_of(part.begin(), part.end(), [](const Message& m) { return m.qos == 1; });
      std::fill(part_ids.begin(), part_ids.end(), 0);
      const StoreOutcome s = cluster.store(part, wait, part_ids);
      if (s.status == StoreStatus::kFailed) {
        return {i, wait ? PublishOutcome::Status::kNotStored : PublishOutcome::Status::kUnreachable};
      }
      std::fill(receivers.begin() + static_cast<std::ptrdiff_t>(i),
                receivers.begin() + static_cast<std::ptrdiff_t>(i + s.taken), std::size_t{0});
      if (s.status == StoreStatus::kBusy) return {i + s.taken, PublishOutcome::Status::kBacklogged};
    }
    i = j;
  }
  return {msgs.size(), PublishOutcome::Status::kPublished};
}

void BrokerCore::register_client(Client& c) {
  std::lock_guard lock(registry_mu_);
  clients_.push_back(&c);
}

void BrokerCore::unregister_client(Client& c) {
  const QueueStats q = c.queue().stats();
  std::lock_guard lock(registry_mu_);
  auto it = std::find(clients_.begin(), clients_.end(), &c);
  if (it == clients_.end()) return;
  *it = clients_.back();
  clients_.pop_back();
  for (std::size_t i = 0; i < kDropReasonCount; ++i) retired_drops_[i] += q.dropped[i];
  retired_conflated_ += q.conflated;
  if (q.overflowed) ++slow_disconnects_;
}

BrokerStats BrokerCore::stats() const {
  BrokerStats st;
  st.total_connections = total_connections_.load(std::memory_order_relaxed);
  st.rejected_connections = rejected_.load(std::memory_order_relaxed);
  st.accept_backoffs = accept_backoffs_.load(std::memory_order_relaxed);
  st.commands_processed = commands_.load(std::memory_order_relaxed);
  st.messages_published = published_.load(std::memory_order_relaxed);
  st.deliveries = deliveries_.load(std::memory_order_relaxed);
  st.refused_publishes = refused_.load(std::memory_order_relaxed);
  const FlowStats fs = flow_.stats();
  st.publisher_stalls = fs.stalls;
  st.publisher_stall_ns = fs.stall_ns;
  st.slow_subscribers = fs.slow_marked;
  st.channels = index_.num_channels();
  st.patterns = index_.numpat();
  st.shard_channels = index_.num_shard_channels();
  std::lock_guard lock(registry_mu_);
  st.connected_clients = clients_.size();
  std::array<std::uint64_t, kDropReasonCount> drops = retired_drops_;
  st.conflated = retired_conflated_;
  for (const Client* c : clients_) {
    const QueueStats q = c->queue().stats();
    for (std::size_t i = 0; i < kDropReasonCount; ++i) drops[i] += q.dropped[i];
    st.conflated += q.conflated;
  }
  st.dropped_hard_limit = drops[static_cast<std::size_t>(DropReason::kHardLimit)];
  st.dropped_soft_limit = drops[static_cast<std::size_t>(DropReason::kSoftLimit)];
  st.dropped_disconnect = drops[static_cast<std::size_t>(DropReason::kDisconnect)];
  st.slow_disconnects = slow_disconnects_;
  return st;
}

ConnectionStats BrokerCore::connection_stats_locked(const Client& s) {
  const QueueStats q = s.queue().stats();
  ConnectionStats c;
  c.id = s.id();
  c.peer = s.peer();
  c.name = s.name();
  const WireFormat f = s.format_mirror();
  c.resp = f == WireFormat::kResp3 ? 3 : f == WireFormat::kResp2 ? 2 : 0;
  c.protocol = s.protocol();
  c.policy = q.policy;
  c.channels = s.sub_count();
  c.patterns = s.psub_count();
  c.shard_channels = s.ssub_count();
  c.subscriptions = c.channels + c.patterns + c.shard_channels;
  c.age_seconds = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - s.created()).count());
  c.queued_bytes = q.queued_bytes + q.inflight_bytes;
  c.queued_frames = q.queued_frames;
  c.sent_frames = s.sent_frames();
  c.dropped_hard_limit = q.dropped[static_cast<std::size_t>(DropReason::kHardLimit)];
  c.dropped_soft_limit = q.dropped[static_cast<std::size_t>(DropReason::kSoftLimit)];
  c.dropped_disconnect = q.dropped[static_cast<std::size_t>(DropReason::kDisconnect)];
  c.conflated = q.conflated;
  c.loss_notices = q.notices;
  return c;
}

std::vector<ConnectionStats> BrokerCore::connection_stats() const {
  std::lock_guard lock(registry_mu_);
  std::vector<ConnectionStats> out;
  out.reserve(clients_.size());
  for (const Client* s : clients_) out.push_back(connection_stats_locked(*s));
  std::sort(out.begin(), out.end(), [](const ConnectionStats& a, const ConnectionStats& b) { return a.id < b.id; });
  return out;
}

ConnectionStats BrokerCore::connection_stats(const Client& c) const {
  std::lock_guard lock(registry_mu_);
  return connection_stats_locked(c);
}

std::string BrokerCore::metrics_text() const {
  PrometheusWriter w;
  write_broker_metrics(w, stats(), connection_stats());
  if (history_) history_->write_metrics(w);
  qos1_.write_metrics(w, durable_.counts());
  if (config_.tls.enabled()) tls_stats_.write_metrics(w);
  if (const auto provider = metrics_provider_.get()) (*provider)(w);
  return w.take();
}

}  // namespace ringcast::broker
