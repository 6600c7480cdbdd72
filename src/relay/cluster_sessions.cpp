#include "cluster_sessions.hpp"

#include <algorithm>
#include <charconv>
#include <utility>

#include <fmt/format.h>

#include "relay/jetstream_error.hpp"

namespace ringcast::relay {

namespace {

// A put waits at most this long for room among the 65,536 awaiting their
// acks, then is dropped and counted: a session thread calls put_floor.
constexpr std::int64_t kStallWaitMs = 1;

void append_hex(std::string& out, std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
}

std::optional<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < out.size(); ++i) {
    unsigned v = 0;
    const auto r = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (r.ec != std::errc() || r.ptr != hex.data() + 2 * i + 2) return std::nullopt;
    out[i] = static_cast<char>(v);
  }
  return out;
}

std::string hold_key(std::string_view client_id) {
  std::string k = "h.";
  append_hex(k, client_id);
  return k;
}

std::string owner_key(std::string_view client_id) {
  std::string k = "o.";
  append_hex(k, client_id);
  return k;
}

// "f.<hex client id>." : the prefix of every floor key of a session.
std::string floor_prefix(std::string_view client_id) {
  std::string k = "f.";
  append_hex(k, client_id);
  k.push_back('.');
  return k;
}

}  // namespace

ClusterSessions::ClusterSessions(const ClusterConfig& config, std::uint64_t origin, LogFn log)
    : config_(config), token_(fmt::format("{:016x}", origin)), log_(std::move(log)) {}

tl::expected<std::unique_ptr<ClusterSessions>, std::string> ClusterSessions::open(natsConnection* conn,
                                                                                  const ClusterConfig& config,
                                                                                  std::chrono::milliseconds session_ttl,
                                                                                  std::uint64_t origin, LogFn log) {
  std::unique_ptr<ClusterSessions> c(new ClusterSessions(config, origin, std::move(log)));
  c->bucket_ = config.subject_prefix + "_SESSIONS";
  std::replace(c->bucket_.begin(), c->bucket_.end(), '.', '_');
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = std::max<std::int64_t>(config.store_timeout.count(), 2000);  // claim's and open's round trips
  jo.PublishAsync.MaxPending = 65536;
  jo.PublishAsync.AckHandler = &ClusterSessions::on_ack;
  jo.PublishAsync.AckHandlerClosure = c.get();
  jo.PublishAsync.StallWait = kStallWaitMs;
  // Each put's ack is waited for this long, then reported to on_ack as a
  // timeout: a put whose ack never comes (its server lost) leaves libnats'
  // count of pending puts, which would otherwise only grow.
  jsPubOptions_Init(&c->put_options_);
  c->put_options_.MaxWait = std::max<std::int64_t>(config.store_timeout.count(), 2000);
  if (natsStatus s = natsConnection_JetStream(&c->js_, conn, &jo); s != NATS_OK) {
    return tl::unexpected(jetstream_error("cluster sessions: JetStream context", s, static_cast<jsErrCode>(0)));
  }
  // A key lives ttl and a half after its last write (the file comment).
  // libnats passes kvConfig::TTL on as the stream's MaxAge: nanoseconds.
  const std::int64_t ttl_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(session_ttl + session_ttl / 2).count();
  const char* step = "binding to";
  natsStatus s = js_KeyValue(&c->kv_, c->js_, c->bucket_.c_str());
  if (s == NATS_NOT_FOUND) {
    step = "creating";
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = c->bucket_.c_str();
    kc.History = 1;
    kc.TTL = ttl_ns;
    kc.StorageType = js_FileStorage;
    kc.Replicas = config.history_replicas;
    s = js_CreateKeyValue(&c->kv_, c->js_, &kc);
  }
  if (s != NATS_OK) {
    return tl::unexpected(jetstream_error(fmt::format("cluster sessions: {} JetStream KV bucket '{}' ({} replicas)",
                                                      step, c->bucket_, config.history_replicas),
                                          s, static_cast<jsErrCode>(0)));
  }
  kvStatus* st = nullptr;
  if (s = kvStore_Status(&st, c->kv_); s != NATS_OK) {
    return tl::unexpected(jetstream_error(fmt::format("cluster sessions: status of KV bucket '{}'", c->bucket_), s,
                                          static_cast<jsErrCode>(0)));
  }
  const std::int64_t have_ns = kvStatus_TTL(st);
  const std::int64_t replicas = kvStatus_Replicas(st);
  kvStatus_Destroy(st);
  if (have_ns != ttl_ns) {
    return tl::unexpected(fmt::format(
        "cluster sessions: KV bucket '{}' keeps sessions {} ms, this node {} ms (--session-ttl {} ms and a half): "
        "every node of a cluster needs the same --session-ttl",
        c->bucket_, have_ns / 1'000'000, ttl_ns / 1'000'000, session_ttl.count()));
  }
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = true;
  if (s = kvStore_Watch(&c->holds_, c->kv_, "h.*", &wo); s != NATS_OK) {
    return tl::unexpected(jetstream_error(fmt::format("cluster sessions: watching KV bucket '{}'", c->bucket_), s,
                                          static_cast<jsErrCode>(0)));
  }
  try {
    c->holds_thread_ = std::thread([p = c.get()] { p->watch_holds(); });
  } catch (const std::system_error& e) {
    return tl::unexpected(fmt::format("cluster sessions: no thread to watch the sessions' holds: {}", e.what()));
  }
  c->log_(LogLevel::kInfo,
          fmt::format("cluster sessions: JetStream KV bucket '{}' {} (replicas {}, ttl {})", c->bucket_,
                      step == std::string_view("creating") ? "created" : "joined", replicas,
                      ttl_ns == 0 ? std::string("none") : fmt::format("{} ms", ttl_ns / 1'000'000)));
  return c;
}

ClusterSessions::~ClusterSessions() {
  if (holds_ != nullptr) {
    (void)kvWatcher_Stop(holds_);  // watch_holds' kvWatcher_Next returns
    if (holds_thread_.joinable()) holds_thread_.join();
    kvWatcher_Destroy(holds_);
  }
  if (kv_ != nullptr) kvStore_Destroy(kv_);
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

std::optional<std::string> ClusterSessions::claim(std::string_view client_id, std::string_view owner) {
  const std::string key = owner_key(client_id);
  const auto get = [&]() -> std::optional<std::string> {
    kvEntry* e = nullptr;
    if (kvStore_Get(&e, kv_, key.c_str()) != NATS_OK) return std::nullopt;
    std::string v(static_cast<const char*>(kvEntry_Value(e)), static_cast<std::size_t>(kvEntry_ValueLen(e)));
    kvEntry_Destroy(e);
    return v;
  };
  std::optional<std::string> saved = get();
  if (!saved) {
    // None (or unreadable): create it, which fails if another node did
    // meanwhile; then its owner is the one.
    if (kvStore_Create(nullptr, kv_, key.c_str(), owner.data(), static_cast<int>(owner.size())) == NATS_OK) {
      saved = std::string(owner);
    } else {
      saved = get();
    }
  }
  if (!saved || *saved != owner) return saved;
  auto floors = read_floors(client_id);
  if (!floors) return std::nullopt;  // a session resumed without its floors would skip what it missed
  std::lock_guard lock(mu_);
  Session& s = sessions_[std::string(client_id)];
  s.owner = *saved;
  for (auto& [channel, f] : *floors) {
    std::uint64_t& mine = s.floors[channel];
    mine = std::max(mine, f);
  }
  return saved;
}

std::optional<std::uint64_t> ClusterSessions::hold(std::string_view client_id) {
  const std::string key = hold_key(client_id);
  std::uint64_t revision = 0;
  if (kvStore_PutString(&revision, kv_, key.c_str(), token_.c_str()) != NATS_OK) return std::nullopt;
  return revision;
}

void ClusterSessions::watch_taken(TakenFn taken) {
  std::lock_guard lock(taken_mu_);
  taken_ = std::move(taken);
}

void ClusterSessions::watch_holds() noexcept {
  for (;;) {
    kvEntry* e = nullptr;
    const natsStatus s = kvWatcher_Next(&e, holds_, 1000);
    if (s == NATS_TIMEOUT) continue;
    if (s != NATS_OK) {
      // Stopped (NATS_ILLEGAL_STATE, the destructor), or broken: say so, as
      // sessions are then no longer taken from this node.
      if (s != NATS_ILLEGAL_STATE) {
        log_(LogLevel::kError, jetstream_error("cluster sessions: watching the sessions' holds stopped; a session "
                                               "attached here is no longer let go when another node takes it",
                                               s, static_cast<jsErrCode>(0)));
      }
      return;
    }
    if (e == nullptr) continue;  // the bucket's holds as of the watch's start are all in
    const std::string_view key(kvEntry_Key(e));
    if (key.size() > 2 && std::string_view(kvEntry_ValueString(e)) != token_) {
      try {
        if (auto client_id = from_hex(key.substr(2))) {
          std::lock_guard lock(taken_mu_);
          if (taken_) taken_(*client_id, kvEntry_Revision(e));
        }
      } catch (...) {  // std::bad_alloc: this change is missed; the two connections overlap until one leaves
      }
    }
    kvEntry_Destroy(e);
  }
}

std::optional<std::unordered_map<std::string, std::uint64_t>> ClusterSessions::read_floors(std::string_view client_id) {
  const std::string prefix = floor_prefix(client_id);
  const std::string filter = prefix + "*";
  kvWatchOptions wo;
  kvWatchOptions_Init(&wo);
  wo.IgnoreDeletes = true;
  kvWatcher* w = nullptr;
  if (kvStore_Watch(&w, kv_, filter.c_str(), &wo) != NATS_OK) return std::nullopt;
  std::unordered_map<std::string, std::uint64_t> out;
  bool ok = false;
  for (;;) {
    kvEntry* e = nullptr;
    if (kvWatcher_Next(&e, w, std::max<std::int64_t>(config_.store_timeout.count(), 2000)) != NATS_OK) break;
    if (e == nullptr) {  // every value there was when the watch began
      ok = true;
      break;
    }
    const std::string_view key(kvEntry_Key(e));
    const std::string_view text(kvEntry_ValueString(e));
    std::uint64_t f = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), f);
    auto channel = from_hex(key.substr(prefix.size()));
    if (channel && r.ec == std::errc()) {
      std::uint64_t& have = out[*channel];
      have = std::max(have, f);
    }
    kvEntry_Destroy(e);
  }
  kvWatcher_Destroy(w);
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::uint64_t> ClusterSessions::floor(std::string_view client_id, std::string_view channel) const {
  std::lock_guard lock(mu_);
  const auto s = sessions_.find(std::string(client_id));
  if (s == sessions_.end()) return std::nullopt;
  const auto f = s->second.floors.find(std::string(channel));
  if (f == s->second.floors.end()) return std::nullopt;
  return f->second;
}

void ClusterSessions::put_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) noexcept {
  try {
    std::lock_guard lock(mu_);
    std::uint64_t& f = sessions_[std::string(client_id)].floors[std::string(channel)];
    if (floor < f) return;  // never moves back on this node
    f = floor;
    std::string key = floor_prefix(client_id);
    append_hex(key, channel);
    put_locked(key, fmt::format("{}", floor));
  } catch (...) {  // std::bad_alloc: a floor not saved means duplicates, never loss
    put_failed_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ClusterSessions::refresh(std::string_view client_id) noexcept {
  try {
    std::lock_guard lock(mu_);
    const auto s = sessions_.find(std::string(client_id));
    if (s == sessions_.end()) return;
    if (!s->second.owner.empty()) put_locked(owner_key(client_id), s->second.owner);
    const std::string prefix = floor_prefix(client_id);
    for (const auto& [channel, f] : s->second.floors) {
      std::string key = prefix;
      append_hex(key, channel);
      put_locked(key, fmt::format("{}", f));
    }
  } catch (...) {  // std::bad_alloc: counted; JetStream may then expire the session early
    put_failed_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ClusterSessions::expire(std::string_view client_id) noexcept {
  try {
    std::lock_guard lock(mu_);
    sessions_.erase(std::string(client_id));  // JetStream expires the shared keys (file comment)
  } catch (...) {                             // std::string's bad_alloc: the copy stays, a few bytes
  }
}

void ClusterSessions::put_locked(const std::string& key, std::string_view value) noexcept {
  try {
    subject_ = fmt::format("$KV.{}.{}", bucket_, key);
  } catch (...) {
    put_failed_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (js_PublishAsync(js_, subject_.c_str(), value.data(), static_cast<int>(value.size()), &put_options_) != NATS_OK) {
    put_failed_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  }
}

void ClusterSessions::on_ack(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto& c = *static_cast<ClusterSessions*>(closure);
  // relaxed: statistics.
  (pa != nullptr && pae == nullptr ? c.puts_ : c.put_failed_).fetch_add(1, std::memory_order_relaxed);
  natsMsg_Destroy(msg);
}

ClusterSessionsStats ClusterSessions::stats() const noexcept {
  // relaxed: statistics.
  return {puts_.load(std::memory_order_relaxed), put_failed_.load(std::memory_order_relaxed)};
}

}  // namespace ringcast::relay
