#include "broker/core/broker_core.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "broker/core/metrics.hpp"
#include "broker/guarantees/channel_history.hpp"

namespace ringcast::broker {

SubscriptionUpdate::SubscriptionUpdate(SubscriptionIndex& index, Client& client)
    : index_(index), client_(client), lock_(index.lock_for_update()) {}

SubscriptionUpdate::~SubscriptionUpdate() {
  lock_.unlock();
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

void SubscriptionUpdate::set_qos1(std::string_view name, bool qos1) { index_.set_qos1(client_, name, qos1); }

BrokerCore::BrokerCore(BrokerConfig config, const Clock& clock, std::unique_ptr<ChannelHistory> history)
    : config_(std::move(config)),
      clock_(clock),
      history_(std::move(history)),
      index_(history_.get()),
      // At most half the hard limit: pacing must start well before a reading
      // subscriber's queue could meet its policy.
      flow_(std::min(config_.pace_bytes, config_.queue_limits.hard_bytes / 2), config_.max_stall) {}

BrokerCore::~BrokerCore() = default;

BrokerCore::Published BrokerCore::publish(const Message& m, Space space) {
  Published p;
  p.status = publish({&m, 1}, {&p.receivers, 1}, {&p.id, 1}, space).status;
  return p;
}

PublishOutcome BrokerCore::publish(std::span<const Message> msgs, std::span<std::size_t> receivers,
                                   std::span<std::uint64_t> ids, Space space) {
  const PublishOutcome out = space == Space::kShardChannels ? index_.publish_shard(msgs, receivers)
                                                            : index_.publish(msgs, config_.dedupe, receivers, ids);
  if (out.status == PublishOutcome::Status::kNotStored) qos1_.count_not_stored();
  std::size_t deliveries = 0;
  for (std::size_t i = 0; i < out.published; ++i) deliveries += receivers[i];
  // relaxed: statistics only.
  published_.fetch_add(out.published, std::memory_order_relaxed);
  deliveries_.fetch_add(deliveries, std::memory_order_relaxed);
  return out;
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

namespace {

// CLIENT LIST's resp= field: the RESP version ("2", "3"), or "ws" for a
// WebSocket client: the protocol label without its "resp".
std::string_view resp_field(WireFormat f) noexcept {
  std::string_view label = protocol_label(f);
  if (label.starts_with("resp")) label.remove_prefix(4);
  return label;
}

}  // namespace

std::string BrokerCore::client_line_locked(const Client& c) const {
  const QueueStats q = c.queue().stats();
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - c.created());
  return fmt::format(
      "id={} addr={} name={} age={} sub={} psub={} ssub={} resp={} omem={} oqueue={} policy={} "
      "dropped-hard={} dropped-soft={} dropped-disconnect={} conflated={} loss-notices={}\n",
      c.id(), c.peer(), c.name(), age.count(), c.sub_count(), c.psub_count(), c.ssub_count(),
      resp_field(c.format_mirror()), q.queued_bytes + q.inflight_bytes, q.queued_frames, to_string(q.policy),
      q.dropped[static_cast<std::size_t>(DropReason::kHardLimit)],
      q.dropped[static_cast<std::size_t>(DropReason::kSoftLimit)],
      q.dropped[static_cast<std::size_t>(DropReason::kDisconnect)], q.conflated, q.notices);
}

std::string BrokerCore::client_list() const {
  std::lock_guard lock(registry_mu_);
  std::vector<const Client*> sorted(clients_.begin(), clients_.end());
  std::sort(sorted.begin(), sorted.end(), [](const Client* a, const Client* b) { return a->id() < b->id(); });
  std::string out;
  for (const Client* c : sorted) out += client_line_locked(*c);
  return out;
}

std::string BrokerCore::client_info(const Client& c) const {
  std::lock_guard lock(registry_mu_);
  return client_line_locked(c);
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

std::vector<ConnectionStats> BrokerCore::connection_stats() const {
  std::lock_guard lock(registry_mu_);
  std::vector<ConnectionStats> out;
  out.reserve(clients_.size());
  for (const Client* s : clients_) {
    const QueueStats q = s->queue().stats();
    ConnectionStats c;
    c.id = s->id();
    c.peer = s->peer();
    c.name = s->name();
    const WireFormat f = s->format_mirror();
    c.resp = f == WireFormat::kResp3 ? 3 : f == WireFormat::kResp2 ? 2 : 0;
    c.protocol = s->protocol();
    c.policy = q.policy;
    c.subscriptions = s->sub_count() + s->psub_count() + s->ssub_count();
    c.queued_bytes = q.queued_bytes + q.inflight_bytes;
    c.queued_frames = q.queued_frames;
    c.sent_frames = s->sent_frames();
    c.dropped_hard_limit = q.dropped[static_cast<std::size_t>(DropReason::kHardLimit)];
    c.dropped_soft_limit = q.dropped[static_cast<std::size_t>(DropReason::kSoftLimit)];
    c.dropped_disconnect = q.dropped[static_cast<std::size_t>(DropReason::kDisconnect)];
    c.conflated = q.conflated;
    c.loss_notices = q.notices;
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const ConnectionStats& a, const ConnectionStats& b) { return a.id < b.id; });
  return out;
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

std::string BrokerCore::info_reply(const std::vector<std::string>& sections) const {
  const std::shared_ptr<const InfoProvider> provider = info_provider_.get();
  std::string text;
  auto add = [&text](const std::string& part) {
    if (part.empty()) return;
    if (!text.empty()) text += "\r\n";
    text += part;
  };
  std::vector<std::string> wanted;
  for (const std::string& s : sections) {
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    wanted.push_back(std::move(l));
  }
  if (wanted.empty()) wanted.emplace_back();  // bare INFO: the default sections
  for (const std::string& section : wanted) {
    add(info(section));
    if (provider) add((*provider)(section));
  }
  return text;
}

std::string BrokerCore::info(std::string_view section) const {
  std::string sec(section);
  std::transform(sec.begin(), sec.end(), sec.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const bool all = sec.empty() || sec == "all" || sec == "default" || sec == "everything";
  const BrokerStats st = stats();
  std::string out;
  auto begin = [&](std::string_view title) {
    if (!out.empty()) out += "\r\n";
    out += fmt::format("# {}\r\n", title);
  };
  if (all || sec == "server") {
    const auto up = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_);
    begin("Server");
    out += fmt::format(
        "ringcast_broker_version:0.1.0\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
        "tcp_port:{}\r\nio_threads:{}\r\nuptime_in_seconds:{}\r\ndedupe:{}\r\n"
        "overflow_policy:{}\r\nhard_limit_bytes:{}\r\nsoft_limit_bytes:{}\r\n"
        "soft_limit_seconds:{}\r\npace_bytes:{}\r\nmax_stall_ms:{}\r\nmax_block_ms:{}\r\n",
        port_.load(std::memory_order_relaxed), io_threads_.load(std::memory_order_relaxed), up.count(),
        config_.dedupe ? "yes" : "no", to_string(config_.overflow_policy), config_.queue_limits.hard_bytes,
        config_.queue_limits.soft_bytes,
        std::chrono::duration_cast<std::chrono::seconds>(config_.queue_limits.soft_duration).count(),
        flow_.pace_bytes(), config_.max_stall.count(), config_.max_block.count());
  }
  if (all || sec == "clients") {
    begin("Clients");
    out += fmt::format("connected_clients:{}\r\nmaxclients:{}\r\n", st.connected_clients, config_.max_connections);
  }
  if (all || sec == "stats") {
    begin("Stats");
    out += fmt::format(
        "total_connections_received:{}\r\nrejected_connections:{}\r\naccept_backoffs:{}\r\n"
        "total_commands_processed:{}\r\nmessages_published:{}\r\ndeliveries:{}\r\n"
        "dropped_hard_limit:{}\r\ndropped_soft_limit:{}\r\ndropped_disconnect:{}\r\n"
        "slow_client_disconnects:{}\r\nrefused_publishes:{}\r\npublisher_stalls:{}\r\n"
        "publisher_stall_usec:{}\r\nslow_subscribers:{}\r\nconflated:{}\r\n",
        st.total_connections, st.rejected_connections, st.accept_backoffs, st.commands_processed, st.messages_published,
        st.deliveries, st.dropped_hard_limit, st.dropped_soft_limit, st.dropped_disconnect, st.slow_disconnects,
        st.refused_publishes, st.publisher_stalls, st.publisher_stall_ns / 1000, st.slow_subscribers, st.conflated);
  }
  if (all || sec == "pubsub") {
    begin("Pubsub");
    out += fmt::format("pubsub_channels:{}\r\npubsub_patterns:{}\r\npubsubshard_channels:{}\r\n", st.channels,
                       st.patterns, st.shard_channels);
  }
  if (all || sec == "auth") {
    begin("Auth");
    out += auth_stats_.info_fields();
  }
  if (config_.tls.enabled() && (all || sec == "tls")) {
    begin("TLS");
    out += fmt::format("tls_port:{}\r\ntls_ws:{}\r\ntls_auth_clients:{}\r\n",
                       config_.tls.port ? tls_port_.load(std::memory_order_relaxed) : 0, config_.tls.ws ? "yes" : "no",
                       to_string(config_.tls.auth_clients));
    out += tls_stats_.info_fields();
  }
  if (all || sec == "qos1") {
    begin("Qos1");
    out += fmt::format(
        "qos1_ack_timeout_ms:{}\r\nqos1_max_retries:{}\r\nqos1_max_in_flight:{}\r\nqos1_session_ttl_ms:{}\r\n",
        config_.ack_timeout.count(), config_.max_retries, config_.max_in_flight, config_.session_ttl.count());
    out += qos1_.info_fields(durable_.counts());
  }
  if (history_ && (all || sec == "history")) {
    begin("History");
    out += history_->info_fields();
  }
  if (all || sec == "drops") {
    // Per-connection loss, listed only for connections that lost something, so
    // INFO stays short with many healthy clients.
    begin("Drops");
    std::lock_guard lock(registry_mu_);
    for (const Client* s : clients_) {
      const QueueStats q = s->queue().stats();
      const std::uint64_t total = q.dropped[0] + q.dropped[1] + q.dropped[2] + q.conflated;
      if (total == 0) continue;
      out +=
          fmt::format("client_{}:name={},policy={},hard_limit={},soft_limit={},disconnect={},conflated={}\r\n", s->id(),
                      s->name(), to_string(q.policy), q.dropped[0], q.dropped[1], q.dropped[2], q.conflated);
    }
  }
  return out;
}

}  // namespace ringcast::broker
