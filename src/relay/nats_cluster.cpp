// NatsCluster (ringcast/relay/nats_cluster.hpp): interest as NATS
// subscriptions, sends as NATS publishes, and the way back in with the
// duplicate and gap check of docs/cluster.md.
#include "ringcast/relay/nats_cluster.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nats/nats.h>

#include "cluster_frame.hpp"
#include "cluster_history.hpp"
#include "cluster_sessions.hpp"
#include "delivery_gate.hpp"
#include "nats_connection.hpp"

namespace ringcast::relay {

namespace {

// Heterogeneous lookup, so a channel's state is found from a string_view
// without building a key.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// The key of a channel's receive state: its space, then its name.
void state_key(bool shard, std::string_view channel, std::string& out) {
  out.assign(1, shard ? 's' : 'c');
  out += channel;
}

}  // namespace

struct NatsCluster::Impl {
  ClusterConfig config;
  LogFn log;
  std::unique_ptr<NatsConnection> nats;
  std::uint64_t origin = 0;  // this node's id in every frame it sends
  std::string wildcard;      // <prefix>.c.*

  // Publishing into the broker (delivery thread) against stop().
  std::atomic<broker::Broker*> broker{nullptr};
  DeliveryGate gate;

  // Interest: guarded by mu (see the header). Every channel and shard
  // channel with local subscribers has its natsSubscription here (nullptr if
  // subscribing failed, logged); with patterns, the wildcard besides.
  mutable std::mutex mu;
  bool stopped = false;
  StringMap<natsSubscription*> channels;
  StringMap<natsSubscription*> shard_channels;
  std::size_t patterns = 0;
  natsSubscription* wildcard_sub = nullptr;
  std::size_t live_subscriptions = 0;  // made and not yet completed (on_complete)
  std::string interest_subject;        // scratch, reused
  std::condition_variable all_complete;
  // Channels whose receive state the delivery thread must forget: their
  // interest ended, and a later subscription starts afresh (no false gap).
  // `forget_all_channels` after the wildcard went away.
  std::vector<std::string> forget;
  bool forget_all_channels = false;
  std::atomic<bool> forget_pending{false};

  // Sending: guarded by egress_mu. The last seq given per channel (state_key).
  std::mutex egress_mu;
  StringMap<std::uint64_t> sent_seq;
  std::string frame;           // scratch, reused
  std::string bundle;          // scratch, reused: the bundle being filled
  std::string egress_subject;  // scratch, reused
  std::string egress_key;      // scratch, reused

  // Receiving: the delivery thread's alone. Per channel (state_key), the last
  // seq received from each origin, and the message being put together from
  // its chunks (docs/cluster.md, "The frame").
  static constexpr std::uint32_t kDropping = UINT32_MAX;
  struct OriginState {
    std::uint64_t origin = 0;
    std::uint64_t seq = 0;
    std::uint32_t next_chunk = 0;  // 0: no message being put together; kDropping: the rest of seq's is let go
    std::string partial;           // its chunks so far; empty (no capacity) otherwise
  };
  StringMap<std::vector<OriginState>> received_seq;
  std::string key;        // scratch
  std::string assembled;  // the last message put together from chunks, while it is published

  // Received and checked, not yet published (the delivery thread's alone):
  // a burst is published as one batch (one pass over the index, one queue
  // push and one wake per subscriber, Broker::publish's shared block per run
  // of one channel) instead of one message at a time. `held` views into
  // the messages of `held_msgs` (a bundle's frames into one), destroyed once
  // published. Published when the
  // subscription of the last one has nothing more queued in libnats (then
  // the burst is over: a message is never held waiting for one that has not
  // arrived), at kBatch, before one of the other space, one put together
  // from chunks (`assembled` is reused), or a loss notice (it must follow
  // what came before the gap), and when a subscription completes.
  static constexpr std::size_t kBatch = 64;
  std::vector<natsMsg*> held_msgs;    // capacity kBatch: pushing never throws
  std::vector<broker::Message> held;  // capacity kBatch
  bool current_held = false;          // held has a frame of the message deliver() is taking
  std::vector<std::size_t> held_receivers = std::vector<std::size_t>(kBatch);
  bool held_shard = false;

  // A publish failed since the connection was last seen connected (send()
  // sets it, ready() clears it): relaxed, a hint read by ready() alone.
  std::atomic<bool> buffer_full{false};

  // Subscriptions made (SUBs handed to libnats), and how many of the first
  // of them the NATS server is known to hold (a PING answered after them).
  // settle() waits until `confirmed` covers what was issued when it began,
  // whichever thread issued it: a second subscriber of a channel whose SUB
  // another thread sent is confirmed no sooner than the first.
  std::atomic<std::uint64_t> subs_issued{0};
  std::atomic<std::uint64_t> subs_confirmed{0};

  // Counters: relaxed, statistics. dropped_before: libnats' drops of the
  // subscriptions already gone.
  std::atomic<std::uint64_t> dropped_before{0};
  std::atomic<std::uint64_t> subscribe_failed{0};
  std::atomic<std::uint64_t> sent{0}, send_failed{0}, unreachable{0}, received{0}, duplicates{0}, gaps{0}, lost{0},
      refused_here{0}, malformed{0}, settles{0}, settle_timeouts{0};

  // With --history: the cluster's history (open_history); null without.
  std::unique_ptr<ClusterHistory> history;
  // With --history: durable sessions' owners and floors (open_sessions).
  std::unique_ptr<ClusterSessions> sessions;

  natsConnection* conn() const noexcept { return nats->connection(); }

  // REQUIRES: mu held.
  natsSubscription* subscribe(const std::string& subj) noexcept;
  void unsubscribe(natsSubscription* sub) noexcept;  // REQUIRES: mu held
  // What libnats has dropped of `sub`'s messages (pending limits).
  static std::uint64_t dropped_by(natsSubscription* sub) noexcept {
    std::int64_t n = 0;
    return sub != nullptr && natsSubscription_GetDropped(sub, &n) == NATS_OK && n > 0 ? static_cast<std::uint64_t>(n)
                                                                                      : 0;
  }
  void queue_forget(std::string key, bool all) noexcept;  // REQUIRES: mu held

  // The most bytes of one bundle (cluster_frame.hpp): a run of a pipelining
  // publisher's small messages crosses NATS as one message.
  static constexpr std::size_t kBundleBytes = 64 * 1024;
  // send(): one run of `run` messages on one channel. REQUIRES: egress_mu held.
  void send_run(bool shard, std::span<const broker::Message> run, std::size_t max_frame) noexcept;

  // Takes `msg` (delivered on `sub`): its frames held, then published with
  // their burst.
  void deliver(natsSubscription* sub, natsMsg* msg) noexcept;
  void hold(const ClusterFrame& f, broker::Broker& b) noexcept;
  void publish_held(broker::Broker& b) noexcept;
  void drop_held() noexcept;
  void apply_forget() noexcept;
  // The payload to publish for `f`: its own, or that of the message it
  // completes; nullopt for a duplicate (dropped) or a chunk of a message not
  // complete yet. Counts and tells a gap.
  std::optional<std::string_view> receive(const ClusterFrame& f, broker::Broker& b) noexcept;

  static void on_message(natsConnection* nc, natsSubscription* sub, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
};

natsSubscription* NatsCluster::Impl::subscribe(const std::string& subj) noexcept {
  natsSubscription* sub = nullptr;
  natsStatus s = natsConnection_Subscribe(&sub, conn(), subj.c_str(), &Impl::on_message, this);
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(sub, config.pending_msgs, config.pending_bytes);
  if (s == NATS_OK) s = natsSubscription_SetOnCompleteCB(sub, &Impl::on_complete, this);
  if (s != NATS_OK) {
    if (sub != nullptr) unsubscribe(sub);
    subscribe_failed.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::kError, fmt::format("cluster: subscribing to {} failed: {}; this node's subscribers will not hear "
                                      "other nodes on it until their interest is made again",
                                      subj, natsStatus_GetText(s)));
    return nullptr;
  }
  ++live_subscriptions;
  // release: pairs with settle()'s acquire; the SUB is in libnats' buffer.
  subs_issued.fetch_add(1, std::memory_order_release);
  return sub;
}

void NatsCluster::Impl::unsubscribe(natsSubscription* sub) noexcept {
  if (sub == nullptr) return;
  dropped_before.fetch_add(dropped_by(sub), std::memory_order_relaxed);
  // Drained, not dropped: what the server sent before the UNSUB is still
  // delivered (an overlapping subscription that replaces it may have come too
  // late for those; the seq check drops the copies that came twice). Then
  // on_complete.
  if (natsSubscription_Drain(sub) != NATS_OK) (void)natsSubscription_Unsubscribe(sub);
  natsSubscription_Destroy(sub);  // libnats keeps its own reference until then
}

void NatsCluster::Impl::queue_forget(std::string k, bool all) noexcept {
  try {
    if (all) {
      forget_all_channels = true;
    } else {
      forget.push_back(std::move(k));
    }
  } catch (...) {
    forget_all_channels = true;  // out of memory: forgetting more is safe
  }
  forget_pending.store(true, std::memory_order_release);  // pairs with apply_forget's acquire
}

tl::expected<std::unique_ptr<NatsCluster>, std::string> NatsCluster::connect(const ClusterConfig& config, LogFn log) {
  const std::string_view prefix = config.subject_prefix;
  if (prefix.empty() || prefix.front() == '.' || prefix.back() == '.' || prefix.find("..") != prefix.npos ||
      std::any_of(prefix.begin(), prefix.end(), [](char c) { return c <= ' ' || c > '~' || c == '*' || c == '>'; })) {
    return tl::unexpected(fmt::format(
        "cluster: subject prefix '{}' is not a NATS subject: printable ASCII tokens joined by '.', no '*' or '>'",
        prefix));
  }
  auto impl = std::make_unique<Impl>();
  impl->held_msgs.reserve(Impl::kBatch);
  impl->held.reserve(Impl::kBatch);
  impl->config = config;
  impl->log = log;
  // One delivery thread for every subscription (the pool's default size is
  // one worker): a message on two overlapping subscriptions arrives twice in
  // order, which the seq check needs (the header's thread safety).
  impl->config.nats.one_delivery_thread = true;
  // A node's own host's server first (docs/cluster.md, "Running one"); a
  // server that stops answering noticed within seconds; a publish never
  // waits long on a socket that does not drain (NatsConfig).
  impl->config.nats.servers_in_order = true;
  impl->config.nats.ping_interval = std::chrono::seconds(1);
  impl->config.nats.write_deadline = std::chrono::milliseconds(500);
  // libnats' pool (process-wide) gives each subscription one of its workers,
  // round robin: one worker, so that all of them share it. A pool never
  // shrinks: a process that grew it earlier breaks this (docs/cluster.md).
  if (const natsStatus s = nats_SetMessageDeliveryPoolSize(1); s != NATS_OK) {
    return tl::unexpected(fmt::format("cluster: libnats delivery pool: {}", natsStatus_GetText(s)));
  }
  if (impl->config.nats.client_name.empty() || impl->config.nats.client_name == NatsConfig{}.client_name) {
    impl->config.nats.client_name = "ringcast-broker cluster";
  }
  auto nats = NatsConnection::connect(impl->config.nats, log);
  if (!nats) return tl::unexpected("cluster: " + nats.error());
  impl->nats = std::move(*nats);
  std::random_device rd;
  impl->origin = (std::uint64_t{rd()} << 32) | rd();
  impl->wildcard = cluster_wildcard(impl->config.subject_prefix, SubjectSpace::kChannel);
  return std::unique_ptr<NatsCluster>(new NatsCluster(std::move(impl)));
}

NatsCluster::NatsCluster(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

NatsCluster::~NatsCluster() {
  stop();
  std::lock_guard lock(impl_->mu);
  if (impl_->live_subscriptions != 0) {
    // libnats still holds a subscription whose callbacks name Impl: leaked on
    // purpose (a few hundred bytes, at exit) rather than freed under them.
    impl_->log(LogLevel::kWarning, "cluster: libnats did not complete every subscription; not freeing its state");
    (void)impl_.release();
  }
}

void NatsCluster::attach(broker::Broker& broker) noexcept {
  impl_->broker.store(&broker);
  if (impl_->history) impl_->history->start_copy(broker);
}

tl::expected<std::string, std::string> NatsCluster::open_history(const broker::ClusterHistoryLimits& limits) {
  Impl& m = *impl_;
  auto h = ClusterHistory::open(m.conn(), m.config, m.origin, limits, m.log);
  if (!h) return tl::unexpected(std::move(h.error()));
  m.history = std::move(*h);
  return m.history->epoch();
}

tl::expected<void, std::string> NatsCluster::load_history(const broker::HistoryLoad& load) {
  if (impl_->history == nullptr) return tl::unexpected(std::string("cluster history: not opened"));
  return impl_->history->load(load);
}

tl::expected<broker::SessionStore*, std::string> NatsCluster::open_sessions(std::chrono::milliseconds session_ttl) {
  Impl& m = *impl_;
  auto c = ClusterSessions::open(m.conn(), m.config, session_ttl, m.origin, m.log);
  if (!c) return tl::unexpected(std::move(c.error()));
  m.sessions = std::move(*c);
  return m.sessions.get();
}

broker::StoreOutcome NatsCluster::store(std::span<const broker::Message> msgs, bool wait,
                                        std::span<std::uint64_t> offsets) noexcept {
  Impl& m = *impl_;
  if (m.history == nullptr || m.gate.closed_hint()) return {0, broker::StoreStatus::kFailed};
  return m.history->store(msgs, wait, offsets);
}

broker::StoreStatus NatsCluster::store_async(const broker::Message& msg, broker::StoreDone done) noexcept {
  Impl& m = *impl_;
  if (m.history == nullptr || m.gate.closed_hint()) return broker::StoreStatus::kFailed;
  return m.history->store_async(msg, std::move(done));
}

std::chrono::milliseconds NatsCluster::busy_hold() const noexcept { return impl_->config.store_timeout; }

void NatsCluster::stop() noexcept {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    if (std::exchange(m.stopped, true)) return;
  }
  (void)m.gate.close();
  // Not under mu: the history's stop waits for its copy's completion, which
  // libnats' one delivery thread runs, and that thread may be waiting for mu
  // first (on_complete of a channel's drained subscription).
  if (m.history) m.history->stop();
  std::unique_lock lock(m.mu);
  for (auto& [name, sub] : m.channels) m.unsubscribe(std::exchange(sub, nullptr));
  for (auto& [name, sub] : m.shard_channels) m.unsubscribe(std::exchange(sub, nullptr));
  m.unsubscribe(std::exchange(m.wildcard_sub, nullptr));
  // Drains complete once the server confirms the UNSUBs; with the server
  // gone they cannot, and closing the connection closes them. Either way
  // every on_complete has run before Impl may go (~NatsCluster).
  const auto all_done = [&m] { return m.live_subscriptions == 0; };
  m.all_complete.wait_for(lock, std::chrono::seconds(5), all_done);
  lock.unlock();
  m.gate.wait_empty();
  m.nats->close(std::chrono::milliseconds(1000));
  lock.lock();
  m.all_complete.wait_for(lock, std::chrono::seconds(10), all_done);
  // Past wait_empty() the delivery thread no longer touches what is held.
  m.drop_held();
}

void NatsCluster::interest_added(broker::InterestSpace space, std::string_view name) noexcept {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (m.stopped) return;
  try {
    switch (space) {
      case broker::InterestSpace::kPattern:
        // Every channel through one more subscription. The channels' own
        // stay: dropping one would lose what it had in flight before the
        // server holds the wildcard (libnats drops an unsubscribed
        // subscription's messages), and their copies are dropped as
        // duplicates (docs/cluster.md, "What patterns cost").
        if (++m.patterns == 1) m.wildcard_sub = m.subscribe(m.wildcard);
        return;
      case broker::InterestSpace::kShard:
        cluster_subject(m.config.subject_prefix, SubjectSpace::kShard, name, m.interest_subject);
        m.shard_channels.emplace(std::string(name), m.subscribe(m.interest_subject));
        return;
      case broker::InterestSpace::kChannel:
        break;
    }
    cluster_subject(m.config.subject_prefix, SubjectSpace::kChannel, name, m.interest_subject);
    m.channels.emplace(std::string(name), m.subscribe(m.interest_subject));
  } catch (...) {
    m.log(LogLevel::kError, "cluster: out of memory recording interest; this node may miss messages");
  }
}

void NatsCluster::interest_removed(broker::InterestSpace space, std::string_view name) noexcept {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (m.stopped) return;
  std::string key;
  switch (space) {
    case broker::InterestSpace::kPattern:
      if (m.patterns == 0 || --m.patterns > 0) return;
      m.unsubscribe(std::exchange(m.wildcard_sub, nullptr));
      m.queue_forget({}, /*all=*/true);
      return;
    case broker::InterestSpace::kShard:
      if (auto it = m.shard_channels.find(name); it != m.shard_channels.end()) {
        m.unsubscribe(it->second);
        state_key(true, name, key);
        m.shard_channels.erase(it);
        m.queue_forget(std::move(key), false);
      }
      return;
    case broker::InterestSpace::kChannel:
      break;
  }
  if (auto it = m.channels.find(name); it != m.channels.end()) {
    m.unsubscribe(it->second);
    m.channels.erase(it);
    // With the wildcard, the channel still comes in: its state stays.
    if (m.wildcard_sub == nullptr) {
      state_key(false, name, key);
      m.queue_forget(std::move(key), false);
    }
  }
}

void NatsCluster::settle() noexcept {
  Impl& m = *impl_;
  // acquire: pairs with subscribe()'s release increment.
  const std::uint64_t issued = m.subs_issued.load(std::memory_order_acquire);
  if (m.subs_confirmed.load(std::memory_order_acquire) >= issued) return;
  m.settles.fetch_add(1, std::memory_order_relaxed);
  // A PING and its PONG: once the server answers, it holds every SUB sent
  // before (docs/cluster.md, "When a subscription is confirmed").
  if (natsConnection_Status(m.conn()) != NATS_CONN_STATUS_CONNECTED ||
      natsConnection_FlushTimeout(m.conn(), m.config.settle_timeout.count()) != NATS_OK) {
    m.settle_timeouts.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // release: pairs with the acquire load above in other threads' settle().
  std::uint64_t seen = m.subs_confirmed.load(std::memory_order_relaxed);
  while (seen < issued && !m.subs_confirmed.compare_exchange_weak(seen, issued, std::memory_order_release)) {
  }
}

bool NatsCluster::ready() const noexcept {
  Impl& m = *impl_;
  if (m.gate.closed_hint()) return false;  // a hint; send() counts a late one
  // Connected, or reconnecting with room left in libnats' reconnect buffer:
  // the first publish it refuses (counted by send(), a gap at every
  // receiver) closes the door until the connection is back.
  bool ok = false;
  switch (natsConnection_Status(m.conn())) {
    case NATS_CONN_STATUS_CONNECTED:
      m.buffer_full.store(false, std::memory_order_relaxed);
      ok = true;
      break;
    case NATS_CONN_STATUS_CONNECTING:
    case NATS_CONN_STATUS_RECONNECTING:
      ok = !m.buffer_full.load(std::memory_order_relaxed);
      break;
    default:
      break;
  }
  if (!ok) m.unreachable.fetch_add(1, std::memory_order_relaxed);
  return ok;
}

void NatsCluster::send(bool shard, std::span<const broker::Message> msgs) noexcept {
  Impl& m = *impl_;
  std::lock_guard lock(m.egress_mu);
  // The server's max_payload (as of its last INFO): a longer frame travels as chunks.
  const auto max_frame = static_cast<std::size_t>(std::max<std::int64_t>(natsConnection_GetMaxPayload(m.conn()), 0));
  for (std::size_t i = 0; i < msgs.size();) {
    std::size_t j = i + 1;
    while (j < msgs.size() && msgs[j].channel == msgs[i].channel) ++j;
    m.send_run(shard, msgs.subspan(i, j - i), max_frame);
    i = j;
  }
}

void NatsCluster::Impl::send_run(bool shard, std::span<const broker::Message> run, std::size_t max_frame) noexcept {
  std::uint64_t* seq = nullptr;
  try {
    state_key(shard, run.front().channel, egress_key);
    auto it = sent_seq.find(egress_key);
    if (it == sent_seq.end()) it = sent_seq.emplace(egress_key, 0).first;
    seq = &it->second;
    cluster_subject(config.subject_prefix, shard ? SubjectSpace::kShard : SubjectSpace::kChannel, run.front().channel,
                    egress_subject);
  } catch (...) {
    send_failed.fetch_add(run.size(), std::memory_order_relaxed);  // out of memory: this node's subscribers had them
    return;
  }
  // Whole frames go out in bundles of at most kBundleBytes (and max_frame);
  // a message whose frame alone would not fit goes out by itself, in chunks
  // if it must. A failure after a seq was taken shows as a gap at every
  // receiver, which counts it and tells its subscribers (docs/cluster.md,
  // "Loss").
  const std::size_t budget = std::min(max_frame, kBundleBytes);
  std::size_t bundled = 0;
  const auto publish = [this](std::string_view bytes) {
    return natsConnection_Publish(conn(), egress_subject.c_str(), bytes.data(), static_cast<int>(bytes.size())) ==
           NATS_OK;
  };
  const auto count = [this](std::size_t n, bool ok) {
    (ok ? sent : send_failed).fetch_add(n, std::memory_order_relaxed);
    if (!ok) buffer_full.store(true, std::memory_order_relaxed);
  };
  const auto flush = [&] {
    if (bundled == 0) return;
    // One frame is sent as it is, without the bundle around it.
    count(bundled,
          publish(bundled == 1 ? std::string_view(bundle).substr(kClusterBundleHeader + kClusterBundleEntryHeader)
                               : std::string_view(bundle)));
    bundled = 0;
  };
  for (const broker::Message& msg : run) {
    ClusterFrame f{shard, msg.qos, origin, ++*seq, msg.channel, msg.message_id, msg.payload};
    const std::size_t size = kClusterBundleEntryHeader + cluster_frame_overhead(f) + msg.payload.size();
    if (kClusterBundleHeader + size <= budget) {
      if (bundled > 0 && bundle.size() + size > budget) flush();
      try {
        if (bundled == 0) begin_cluster_bundle(bundle);
        append_to_cluster_bundle(f, bundle);
        ++bundled;
      } catch (...) {
        flush();  // those before it; this one is lost (out of memory)
        send_failed.fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    flush();
    const std::size_t overhead = cluster_frame_overhead(f);
    const std::size_t slice = max_frame > overhead ? max_frame - overhead : msg.payload.size();  // 0: refused whole
    std::size_t at = 0;
    bool ok = true, oom = false;
    do {
      f.payload = msg.payload.substr(at, slice);
      at += f.payload.size();
      f.more = at < msg.payload.size();
      try {
        encode_cluster_frame(f, frame);
      } catch (...) {
        oom = true;
        break;
      }
      ok = publish(frame);
      ++f.chunk;
    } while (ok && f.more);
    if (oom) {
      send_failed.fetch_add(1, std::memory_order_relaxed);
    } else {
      count(1, ok);
    }
  }
  flush();
}

void NatsCluster::Impl::on_message(natsConnection*, natsSubscription* sub, natsMsg* msg, void* closure) {
  static_cast<Impl*>(closure)->deliver(sub, msg);
}

void NatsCluster::Impl::on_complete(void* closure) {
  Impl& m = *static_cast<Impl*>(closure);
  {
    // On the delivery thread, after the subscription's last message: one it
    // held is published even if libnats let go of those queued behind it.
    const DeliveryGate::Pass pass(m.gate);
    broker::Broker* const b = m.broker.load();
    if (pass.open() && b != nullptr) m.publish_held(*b);
  }
  std::lock_guard lock(m.mu);
  --m.live_subscriptions;
  m.all_complete.notify_all();  // under mu: stop() may free the condition once it sees 0
}

void NatsCluster::Impl::deliver(natsSubscription* sub, natsMsg* msg) noexcept {
  const DeliveryGate::Pass pass(gate);
  broker::Broker* const b = broker.load();
  if (!pass.open() || b == nullptr) {
    // Before attach() the broker's listeners may already be open.
    if (pass.open()) refused_here.fetch_add(1, std::memory_order_relaxed);
    natsMsg_Destroy(msg);
    return;
  }
  if (forget_pending.load(std::memory_order_acquire)) apply_forget();  // pairs with queue_forget's release
  const std::string_view bytes(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  if (!for_each_cluster_frame(bytes, [&](const ClusterFrame& f) { hold(f, *b); })) {
    malformed.fetch_add(1, std::memory_order_relaxed);
  }
  // What is held of it keeps its bytes alive until published.
  if (std::exchange(current_held, false)) {
    held_msgs.push_back(msg);
  } else {
    natsMsg_Destroy(msg);
  }
  int queued = 0;
  if (held.size() >= kBatch || natsSubscription_GetPending(sub, &queued, nullptr) != NATS_OK || queued == 0) {
    publish_held(*b);
  }
}

void NatsCluster::Impl::hold(const ClusterFrame& f, broker::Broker& b) noexcept {
  if (!held.empty() && (held_shard != f.shard || held.size() == kBatch)) publish_held(b);
  const std::optional<std::string_view> payload = receive(f, b);
  if (!payload) return;
  received.fetch_add(1, std::memory_order_relaxed);
  held_shard = f.shard;
  held.push_back({f.channel, *payload, f.qos, f.message_id});
  current_held = true;
  if (payload->data() == assembled.data()) publish_held(b);
}

void NatsCluster::Impl::publish_held(broker::Broker& b) noexcept {
  if (held.empty()) return;
  const broker::PublishResult r =
      b.publish_from_cluster(held_shard, held, std::span(held_receivers).first(held.size()));
  if (r.status != broker::PublishStatus::kPublished) {
    refused_here.fetch_add(held.size() - r.published, std::memory_order_relaxed);
  }
  drop_held();
}

void NatsCluster::Impl::drop_held() noexcept {
  held.clear();
  current_held = false;
  for (natsMsg* msg : held_msgs) natsMsg_Destroy(msg);
  held_msgs.clear();
}

std::optional<std::string_view> NatsCluster::Impl::receive(const ClusterFrame& f, broker::Broker& b) noexcept {
  // `missed` messages of f's channel from f's origin never arrived whole: counted and told.
  const auto lose = [&](std::uint64_t missed) {
    publish_held(b);  // the notice follows what came before the gap
    gaps.fetch_add(1, std::memory_order_relaxed);
    lost.fetch_add(missed, std::memory_order_relaxed);
    // Shard channels have no loss notice (RESP3 has no push for it); counted only.
    if (!f.shard) (void)b.report_upstream_loss(f.channel, missed);
  };
  try {
    state_key(f.shard, f.channel, key);
    auto it = received_seq.find(key);
    if (it == received_seq.end()) it = received_seq.emplace(key, std::vector<OriginState>{}).first;
    auto& origins = it->second;
    auto o = std::find_if(origins.begin(), origins.end(), [&f](const OriginState& e) { return e.origin == f.origin; });
    if (o == origins.end()) {
      // The first from this origin since this node's interest began: no gap.
      // The rest of a message whose first chunk came before is not a loss either.
      if (f.chunk != 0) return std::nullopt;
      origins.push_back({f.origin, f.seq, 0, {}});
      o = origins.end() - 1;
    } else if (f.seq == o->seq && o->next_chunk == kDropping) {
      return std::nullopt;  // the rest of a message that lost a chunk (counted then)
    } else if (f.seq < o->seq || (f.seq == o->seq && (o->next_chunk == 0 || f.chunk < o->next_chunk))) {
      duplicates.fetch_add(1, std::memory_order_relaxed);  // also a chunk this node has appended already
      return std::nullopt;
    } else if (f.seq == o->seq) {      // the next chunk of the message being put together
      if (f.chunk != o->next_chunk) {  // one between was lost: so is the message
        o->next_chunk = kDropping;
        o->partial = std::string();
        lose(1);
        return std::nullopt;
      }
      o->partial += f.payload;
      if (f.more) {
        ++o->next_chunk;
        return std::nullopt;
      }
      o->next_chunk = 0;
      assembled = std::move(o->partial);
      o->partial = std::string();
      return std::string_view(assembled);
    } else {
      // A later message. One still being put together lost its last chunks.
      const bool broken = o->next_chunk != 0 && o->next_chunk != kDropping;
      o->next_chunk = 0;
      o->partial = std::string();
      if (f.chunk != 0) {
        // This one's first chunk was lost: its seq shows as missed when the
        // origin's next message starts.
        if (broken) lose(1);
        return std::nullopt;
      }
      if (const std::uint64_t missed = f.seq - o->seq - 1 + (broken ? 1 : 0); missed > 0) lose(missed);
      o->seq = f.seq;
    }
    if (f.more) {  // the first chunk of a message
      o->partial.assign(f.payload);
      o->next_chunk = 1;
      return std::nullopt;
    }
  } catch (...) {
    // Out of memory for the state: a whole frame is delivered unchecked
    // rather than lost; a chunk cannot be.
    if (f.chunk != 0 || f.more) return std::nullopt;
  }
  return f.payload;
}

void NatsCluster::Impl::apply_forget() noexcept {
  std::lock_guard lock(mu);
  forget_pending.store(false, std::memory_order_relaxed);
  for (const std::string& k : forget) received_seq.erase(k);
  forget.clear();
  if (std::exchange(forget_all_channels, false) && wildcard_sub == nullptr) {
    // The wildcard went: keep the state of the channels still subscribed.
    std::erase_if(received_seq, [this](const auto& e) {
      return e.first.front() == 'c' && !channels.contains(std::string_view(e.first).substr(1));
    });
  }
}

ClusterStats NatsCluster::stats() const {
  const Impl& m = *impl_;
  ClusterStats s;
  s.connected = natsConnection_Status(m.conn()) == NATS_CONN_STATUS_CONNECTED;
  if (s.connected) {
    char url[256];
    if (natsConnection_GetConnectedUrl(m.conn(), url, sizeof url) == NATS_OK) s.server = url;
  }
  s.sent = m.sent.load(std::memory_order_relaxed);
  s.send_failed = m.send_failed.load(std::memory_order_relaxed);
  s.unreachable = m.unreachable.load(std::memory_order_relaxed);
  s.received = m.received.load(std::memory_order_relaxed);
  s.duplicates = m.duplicates.load(std::memory_order_relaxed);
  s.gaps = m.gaps.load(std::memory_order_relaxed);
  s.lost = m.lost.load(std::memory_order_relaxed);
  s.refused_here = m.refused_here.load(std::memory_order_relaxed);
  s.malformed = m.malformed.load(std::memory_order_relaxed);
  s.subscribe_failed = m.subscribe_failed.load(std::memory_order_relaxed);
  s.settles = m.settles.load(std::memory_order_relaxed);
  s.settle_timeouts = m.settle_timeouts.load(std::memory_order_relaxed);
  if (m.history) {
    const ClusterHistoryStats h = m.history->stats();
    s.history = true;
    s.history_stored = h.stored;
    s.history_store_failed = h.store_failed;
    s.history_store_timeouts = h.store_timeouts;
    s.history_stalls = h.stalls;
    s.history_pending = h.pending;
    s.history_loaded = h.loaded;
    s.history_copied = h.copied;
    s.history_copy_refused = h.copy_refused;
    s.history_skipped = h.skipped;
  }
  if (m.sessions) {
    const ClusterSessionsStats c = m.sessions->stats();
    s.session_puts = c.puts;
    s.session_put_failed = c.put_failed;
  }
  std::lock_guard lock(m.mu);
  s.interest_channels = m.channels.size();
  s.interest_patterns = m.patterns;
  s.interest_shard_channels = m.shard_channels.size();
  s.nats_subscriptions = m.channels.size() + m.shard_channels.size() + (m.wildcard_sub != nullptr ? 1 : 0);
  s.nats_dropped = m.dropped_before.load(std::memory_order_relaxed) + Impl::dropped_by(m.wildcard_sub);
  for (const auto* map : {&m.channels, &m.shard_channels}) {
    for (const auto& [name, sub] : *map) s.nats_dropped += Impl::dropped_by(sub);
  }
  return s;
}

std::string NatsCluster::info_text() const {
  const ClusterStats s = stats();
  return fmt::format(
      "# Cluster\r\ncluster_connected:{}\r\ncluster_server:{}\r\ncluster_sent:{}\r\ncluster_send_failed:{}\r\n"
      "cluster_unreachable:{}\r\ncluster_received:{}\r\ncluster_duplicates:{}\r\ncluster_gaps:{}\r\n"
      "cluster_lost:{}\r\ncluster_refused_here:{}\r\ncluster_malformed:{}\r\ncluster_settles:{}\r\n"
      "cluster_settle_timeouts:{}\r\ncluster_interest_channels:{}\r\ncluster_interest_patterns:{}\r\n"
      "cluster_interest_shard_channels:{}\r\ncluster_nats_subscriptions:{}\r\ncluster_nats_dropped:{}\r\n"
      "cluster_subscribe_failed:{}\r\ncluster_history:{}\r\ncluster_history_stored:{}\r\n"
      "cluster_history_store_failed:{}\r\ncluster_history_store_timeouts:{}\r\ncluster_history_stalls:{}\r\n"
      "cluster_history_pending:{}\r\ncluster_history_loaded:{}\r\n"
      "cluster_history_copied:{}\r\n"
      "cluster_history_copy_refused:{}\r\ncluster_history_skipped:{}\r\ncluster_session_puts:{}\r\n"
      "cluster_session_put_failed:{}\r\n",
      s.connected ? 1 : 0, s.server, s.sent, s.send_failed, s.unreachable, s.received, s.duplicates, s.gaps, s.lost,
      s.refused_here, s.malformed, s.settles, s.settle_timeouts, s.interest_channels, s.interest_patterns,
      s.interest_shard_channels, s.nats_subscriptions, s.nats_dropped, s.subscribe_failed, s.history ? 1 : 0,
      s.history_stored, s.history_store_failed, s.history_store_timeouts, s.history_stalls, s.history_pending,
      s.history_loaded, s.history_copied, s.history_copy_refused, s.history_skipped, s.session_puts,
      s.session_put_failed);
}

void NatsCluster::write_metrics(broker::PrometheusWriter& w) const {
  using broker::MetricType;
  const ClusterStats s = stats();
  w.metric("ringcast_cluster_connected", "1 while connected to a NATS server of the cluster", MetricType::kGauge,
           s.connected ? 1 : 0);
  // The server as a label of a constant 1 (Prometheus' "info" idiom); no
  // sample while disconnected.
  w.header("ringcast_cluster_info", "The NATS server this node is connected to", MetricType::kGauge);
  if (!s.server.empty()) w.sample("ringcast_cluster_info", {{"server", s.server}}, 1);
  w.metric("ringcast_cluster_sent_total", "Messages published here and handed to NATS", MetricType::kCounter,
           static_cast<double>(s.sent));
  w.metric("ringcast_cluster_send_failed_total",
           "Messages published here that NATS refused (they reached this node's subscribers only)",
           MetricType::kCounter, static_cast<double>(s.send_failed));
  w.metric("ringcast_cluster_unreachable_total", "Publish attempts refused because the cluster was unreachable",
           MetricType::kCounter, static_cast<double>(s.unreachable));
  w.metric("ringcast_cluster_received_total", "Messages from other nodes published here", MetricType::kCounter,
           static_cast<double>(s.received));
  w.metric("ringcast_cluster_duplicates_total", "Messages from other nodes dropped as already received",
           MetricType::kCounter, static_cast<double>(s.duplicates));
  w.metric("ringcast_cluster_gaps_total", "Times a channel's sequence from one origin node jumped",
           MetricType::kCounter, static_cast<double>(s.gaps));
  w.metric("ringcast_cluster_lost_total", "Messages from other nodes that never arrived (told to subscribers)",
           MetricType::kCounter, static_cast<double>(s.lost));
  w.metric("ringcast_cluster_refused_here_total", "Messages from other nodes this node refused", MetricType::kCounter,
           static_cast<double>(s.refused_here));
  w.metric("ringcast_cluster_malformed_total",
           "Messages on the cluster's subjects that are not ringcast cluster frames", MetricType::kCounter,
           static_cast<double>(s.malformed));
  w.metric("ringcast_cluster_settles_total", "Subscription confirmations that waited for NATS", MetricType::kCounter,
           static_cast<double>(s.settles));
  w.metric("ringcast_cluster_settle_timeouts_total",
           "Subscription confirmations sent before NATS confirmed the interest", MetricType::kCounter,
           static_cast<double>(s.settle_timeouts));
  w.metric("ringcast_cluster_nats_dropped_total",
           "Messages from other nodes libnats dropped: this node fell behind its pending limits", MetricType::kCounter,
           static_cast<double>(s.nats_dropped));
  w.metric("ringcast_cluster_subscribe_failed_total",
           "NATS subscriptions libnats refused (that interest hears this node only)", MetricType::kCounter,
           static_cast<double>(s.subscribe_failed));
  w.metric("ringcast_cluster_history_stored_total",
           "Messages on retained channels published here and stored in the cluster's history (JetStream)",
           MetricType::kCounter, static_cast<double>(s.history_stored));
  w.metric("ringcast_cluster_history_store_failed_total",
           "Messages on retained channels that could not be stored in the cluster's history (refused here or by "
           "JetStream)",
           MetricType::kCounter, static_cast<double>(s.history_store_failed));
  w.metric("ringcast_cluster_history_store_timeouts_total",
           "Stores on retained channels JetStream did not confirm within --cluster-store-timeout (a QoS 1 "
           "publisher got an error)",
           MetricType::kCounter, static_cast<double>(s.history_store_timeouts));
  w.metric("ringcast_cluster_history_stalls_total",
           "Publishes on retained channels held because --cluster-max-pending-stores stores awaited JetStream's "
           "acknowledgement (back-pressure; the publisher tries again)",
           MetricType::kCounter, static_cast<double>(s.history_stalls));
  w.metric("ringcast_cluster_history_pending", "Stores handed to JetStream and not yet acknowledged",
           MetricType::kGauge, static_cast<double>(s.history_pending));
  w.metric("ringcast_cluster_history_loaded_total",
           "Messages of the cluster's history loaded into this node's copy at its start (delivered to nobody)",
           MetricType::kCounter, static_cast<double>(s.history_loaded));
  w.metric("ringcast_cluster_history_copied_total",
           "Messages of the cluster's history published to this node's subscribers and copy of the history",
           MetricType::kCounter, static_cast<double>(s.history_copied));
  w.metric("ringcast_cluster_history_copy_refused_total",
           "Messages of the cluster's history this node could not read or refused", MetricType::kCounter,
           static_cast<double>(s.history_copy_refused));
  w.metric("ringcast_cluster_history_skipped_total",
           "Messages of the cluster's history its limits dropped before this node read them (never delivered here)",
           MetricType::kCounter, static_cast<double>(s.history_skipped));
  w.metric("ringcast_cluster_session_puts_total",
           "Durable sessions' owners and floors written to the cluster's session store (JetStream KV)",
           MetricType::kCounter, static_cast<double>(s.session_puts));
  w.metric("ringcast_cluster_session_put_failed_total",
           "Durable sessions' writes refused here or by JetStream (a floor written late means duplicates)",
           MetricType::kCounter, static_cast<double>(s.session_put_failed));
  w.header("ringcast_cluster_interest", "This node's subscribed channels, patterns and shard channels",
           MetricType::kGauge);
  w.sample("ringcast_cluster_interest", {{"space", "channel"}}, static_cast<double>(s.interest_channels));
  w.sample("ringcast_cluster_interest", {{"space", "pattern"}}, static_cast<double>(s.interest_patterns));
  w.sample("ringcast_cluster_interest", {{"space", "shard"}}, static_cast<double>(s.interest_shard_channels));
  w.metric("ringcast_cluster_nats_subscriptions", "NATS subscriptions this node's interest costs", MetricType::kGauge,
           static_cast<double>(s.nats_subscriptions));
}

}  // namespace ringcast::relay
