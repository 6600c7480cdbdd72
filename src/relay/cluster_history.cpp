#include "cluster_history.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cluster_frame.hpp"
#include "relay/jetstream_error.hpp"

namespace ringcast::relay {

namespace {

constexpr const char* kMsgIdHeader = "Nats-Msg-Id";
constexpr auto kJetStreamReadyWait = std::chrono::seconds(30);
// The copy's idle heartbeat. libnats makes an ordered consumer anew when two
// heartbeats' time passes with nothing from it (its server died, or the
// stream's leader moved), and tries again after each further such period if
// making it failed. Its default, 5 s, leaves a node's copy, and so its
// retained channels, stopped for 10-20 s after its NATS server is lost.
constexpr std::int64_t kCopyHeartbeatNs = 1'000'000'000;

// "<origin as 16 hex digits>-<seq>": unique per node and message, so a
// message libnats sent twice is stored once (the stream's duplicate window).
void msg_id(std::uint64_t origin, std::uint64_t seq, fmt::memory_buffer& out) {
  out.clear();
  fmt::format_to(std::back_inserter(out), "{:016x}-{}", origin, seq);
  out.push_back('\0');
}

// Ends an ordered consumer's subscription. libnats 3.4 (and its master of
// 2026-12) deletes an unsubscribed ordered consumer's JetStream consumer by
// the name it read under the subscription's lock, and words a "not found"
// answer with that name after the lock is gone: a reset of the consumer
// running meanwhile (its heartbeat missed, as after a NATS server's restart)
// has freed it by then (jsSub_deleteConsumer; ASan saw it in 1 stop of 4 in
// ClusterHistoryTest.AQos1PublishWhileTheNodeIsDisconnected...). An
// auto-unsubscribe at a count already delivered removes the subscription at
// once and deletes nothing; the server drops the ephemeral consumer itself
// once nobody listens. Only one that has delivered nothing yet is
// unsubscribed the plain way.
void unsubscribe_ordered(natsSubscription* sub) noexcept {
  std::int64_t delivered = 0;
  if (natsSubscription_GetDelivered(sub, &delivered) != NATS_OK || delivered < 1 ||
      natsSubscription_AutoUnsubscribe(sub, 1) != NATS_OK) {
    (void)natsSubscription_Unsubscribe(sub);
  }
}

// The seq of a Nats-Msg-Id this node wrote, or 0.
std::uint64_t seq_of(natsMsg* msg, std::uint64_t origin) noexcept {
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, kMsgIdHeader, &id) != NATS_OK || id == nullptr) return 0;
  const std::string_view text(id);
  char own[17];
  fmt::format_to_n(own, 16, "{:016x}", origin);
  if (text.size() < 18 || text.compare(0, 16, std::string_view(own, 16)) != 0 || text[16] != '-') return 0;
  std::uint64_t seq = 0;
  const auto r = std::from_chars(text.data() + 17, text.data() + text.size(), seq);
  return r.ec == std::errc() ? seq : 0;
}

}  // namespace

ClusterHistory::ClusterHistory(natsConnection* conn, const ClusterConfig& config, std::uint64_t origin, LogFn log)
    : conn_(conn), config_(config), origin_(origin), log_(std::move(log)) {}

tl::expected<std::unique_ptr<ClusterHistory>, std::string> ClusterHistory::open(
    natsConnection* conn, const ClusterConfig& config, std::uint64_t origin, const broker::ClusterHistoryLimits& limits,
    LogFn log) {
  std::unique_ptr<ClusterHistory> h(new ClusterHistory(conn, config, origin, std::move(log)));
  h->stream_ = config.subject_prefix + "_HISTORY";
  std::replace(h->stream_.begin(), h->stream_.end(), '.', '_');
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = std::max<std::int64_t>(config.store_timeout.count(), 2000);  // the stream API calls below
  jo.PublishAsync.MaxPending = config.max_pending_stores + 1;            // invariant 3: never reached
  jo.PublishAsync.AckHandler = &ClusterHistory::on_ack;
  jo.PublishAsync.AckHandlerClosure = h.get();
  jo.PublishAsync.StallWait = 1;  // were it reached after all, a store would be busy, not wait
  if (natsStatus s = natsConnection_JetStream(&h->js_, conn, &jo); s != NATS_OK) {
    return tl::unexpected(jetstream_error("cluster history: JetStream context", s, static_cast<jsErrCode>(0)));
  }
  const std::string subject = cluster_wildcard(config.subject_prefix, SubjectSpace::kHistory);
  const char* subjects[] = {subject.c_str()};
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = h->stream_.c_str();
  sc.Subjects = subjects;
  sc.SubjectsLen = 1;
  sc.Storage = js_FileStorage;
  sc.Replicas = config.history_replicas;
  sc.MaxMsgsPerSubject = static_cast<std::int64_t>(limits.max_per_channel);
  sc.MaxAge = std::chrono::duration_cast<std::chrono::nanoseconds>(limits.max_age).count();
  // JetStream may not be ready when the node starts with its NATS servers
  // (not connected yet, no meta leader elected, peers not known yet): such
  // answers are waited out for up to kJetStreamReadyWait; anything else, or
  // still one of those after it, stops the start.
  const auto transient = [&](natsStatus st, jsErrCode e) {
    return natsConnection_Status(conn) != NATS_CONN_STATUS_CONNECTED || st == NATS_TIMEOUT ||
           e == JSClusterIncompleteErr || e == JSClusterNoPeersErr || e == JSClusterNotAvailErr ||
           e == JSClusterNotLeaderErr || e == JSInsufficientResourcesErr;
  };
  const auto give_up = std::chrono::steady_clock::now() + kJetStreamReadyWait;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = NATS_OK;
  bool exists = false;
  const char* step = "looking up";
  bool waiting_logged = false;
  for (;;) {
    jerr = static_cast<jsErrCode>(0);
    s = js_GetStreamInfo(&si, h->js_, h->stream_.c_str(), nullptr, &jerr);
    exists = s == NATS_OK;
    if (exists) {
      // Another node made it: keep its replicas, and limits no lower than its.
      const jsStreamConfig& have = *si->Config;
      sc.Replicas = have.Replicas;
      sc.MaxMsgsPerSubject = std::max(sc.MaxMsgsPerSubject, have.MaxMsgsPerSubject);
      sc.MaxAge = sc.MaxAge == 0 || have.MaxAge == 0 ? 0 : std::max(sc.MaxAge, have.MaxAge);
      if (sc.MaxMsgsPerSubject != have.MaxMsgsPerSubject || sc.MaxAge != have.MaxAge) {
        step = "updating";
        jsStreamInfo_Destroy(si);
        si = nullptr;
        s = js_UpdateStream(&si, h->js_, &sc, nullptr, &jerr);
      }
    } else if (jerr == JSStreamNotFoundErr) {
      step = "creating";
      s = js_AddStream(&si, h->js_, &sc, nullptr, &jerr);
    }
    if (s == NATS_OK || !transient(s, jerr) || std::chrono::steady_clock::now() >= give_up) break;
    if (!std::exchange(waiting_logged, true)) {
      h->log_(LogLevel::kInfo, jetstream_error("cluster history: waiting for JetStream", s, jerr));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  if (s != NATS_OK) {
    std::string why = jetstream_error(
        fmt::format("cluster history: {} JetStream stream '{}' ({} replicas; do the NATS servers run JetStream, -js?)",
                    step, h->stream_, sc.Replicas),
        s, jerr);
    if (jerr == JSInsufficientResourcesErr || jerr == JSStreamReplicasNotSupportedErr) {
      why += "; a NATS cluster of fewer servers than --cluster-history-replicas cannot hold it: lower it";
    }
    return tl::unexpected(std::move(why));
  }
  h->epoch_ = fmt::format("{:016x}", static_cast<std::uint64_t>(si->Created));
  h->loaded_to_ = si->State.LastSeq;
  h->log_(LogLevel::kInfo,
          fmt::format(
              "cluster history: JetStream stream '{}' {} (subject {}, replicas {}, at most {} "
              "messages per channel, max age {}; {} messages held; epoch {})",
              h->stream_, exists ? "joined" : "created", subject, si->Config->Replicas, si->Config->MaxMsgsPerSubject,
              si->Config->MaxAge == 0 ? std::string("none") : fmt::format("{} s", si->Config->MaxAge / 1'000'000'000),
              si->State.Msgs, h->epoch_));
  jsStreamInfo_Destroy(si);
  try {
    h->receipts_ = std::thread([p = h.get()] { p->run_receipts(); });
  } catch (const std::system_error& e) {
    return tl::unexpected(fmt::format("cluster history: no thread for the stores' receipts: {}", e.what()));
  }
  return h;
}

ClusterHistory::~ClusterHistory() {
  stop();
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

natsMsg* ClusterHistory::make_msg(const broker::Message& m, fmt::memory_buffer& id) {
  const ClusterFrame f{false, m.qos, origin_, ++seq_, m.channel, m.message_id, m.payload};
  encode_cluster_frame(f, frame_);
  cluster_subject(config_.subject_prefix, SubjectSpace::kHistory, m.channel, subject_);
  msg_id(origin_, seq_, id);
  // One frame per message, whole: a stream message is the unit JetStream
  // numbers, so a message longer than the server's max_payload is refused.
  const auto max_frame = static_cast<std::size_t>(std::max<std::int64_t>(natsConnection_GetMaxPayload(conn_), 0));
  natsMsg* nm = nullptr;
  if (frame_.size() > max_frame ||
      natsMsg_Create(&nm, subject_.c_str(), nullptr, frame_.data(), static_cast<int>(frame_.size())) != NATS_OK) {
    return nullptr;
  }
  if (natsMsgHeader_Set(nm, kMsgIdHeader, id.data()) != NATS_OK) {
    natsMsg_Destroy(nm);
    return nullptr;
  }
  return nm;
}

broker::StoreOutcome ClusterHistory::store(std::span<const broker::Message> msgs, bool wait,
                                           std::span<std::uint64_t> offsets) noexcept {
  if (wait && natsConnection_Status(conn_) != NATS_CONN_STATUS_CONNECTED) {
    // Handed over now, it would wait in libnats' reconnect buffer and could
    // be stored after the publisher was told it was not: refused untouched.
    store_failed_.fetch_add(1, std::memory_order_relaxed);
    return {0, broker::StoreStatus::kFailed};
  }
  Wait w{offsets, 0, false};
  std::vector<std::uint64_t> mine;  // the seqs registered for `w` (invariant 1)
  broker::StoreOutcome out;
  {
    std::lock_guard lock(egress_mu_);
    fmt::memory_buffer id;
    for (; out.taken < msgs.size(); ++out.taken) {
      natsMsg* nm = nullptr;
      try {
        nm = make_msg(msgs[out.taken], id);
        if (nm != nullptr && wait) {
          mine.push_back(seq_);  // first: an entry is never left out of `mine`
          std::lock_guard wl(waits_mu_);
          waits_.emplace(seq_, Waiter{&w, out.taken, {}});
          ++w.remaining;
        }
      } catch (...) {
        natsMsg_Destroy(nm);
        nm = nullptr;  // out of memory
      }
      out.status = nm == nullptr ? broker::StoreStatus::kFailed : hand_over(nm);
      if (out.status == broker::StoreStatus::kTaken) continue;
      natsMsg_Destroy(nm);  // libnats took it (nm is null) only when kTaken
      if (wait && !mine.empty() && mine.back() == seq_) {
        std::lock_guard wl(waits_mu_);
        if (waits_.erase(seq_) > 0) --w.remaining;  // invariant 1: never handed over
        mine.pop_back();
      }
      break;
    }
  }
  if (out.status == broker::StoreStatus::kFailed) store_failed_.fetch_add(1, std::memory_order_relaxed);
  if (wait && !mine.empty()) {
    // libnats' flusher writes buffered publishes 1 ms after the first (to
    // batch them): a publisher waiting for its puback would wait that too
    // (1.0 ms a QoS 1 publish here, against 66 us flushed). A flush writes at
    // once; its PING's answer is not what we wait for, the acks are.
    (void)natsConnection_FlushTimeout(conn_, config_.store_timeout.count());
    std::unique_lock wl(waits_mu_);
    if (!waits_cv_.wait_for(wl, config_.store_timeout, [&w] { return w.remaining == 0 || w.failed; })) {
      store_timeouts_.fetch_add(1, std::memory_order_relaxed);
      w.failed = true;
    }
    if (w.failed) out.status = broker::StoreStatus::kFailed;
    for (const std::uint64_t seq : mine) {  // invariant 1: detached, their on_ack() still to come
      if (auto it = waits_.find(seq); it != waits_.end()) it->second.wait = nullptr;
    }
  }
  if (out.status == broker::StoreStatus::kFailed) out.taken = 0;
  return out;
}

broker::StoreStatus ClusterHistory::store_async(const broker::Message& msg, broker::StoreDone done) noexcept {
  if (natsConnection_Status(conn_) != NATS_CONN_STATUS_CONNECTED) {  // as store() with wait
    store_failed_.fetch_add(1, std::memory_order_relaxed);
    return broker::StoreStatus::kFailed;
  }
  broker::StoreStatus status = broker::StoreStatus::kFailed;
  {
    std::lock_guard lock(egress_mu_);
    natsMsg* nm = nullptr;
    std::uint64_t seq = 0;
    try {
      fmt::memory_buffer id;
      nm = make_msg(msg, id);
      seq = seq_;
      std::lock_guard wl(waits_mu_);
      if (nm != nullptr && receipts_stop_) {  // stopped: nothing would complete it
        natsMsg_Destroy(nm);
        nm = nullptr;
      }
      if (nm != nullptr) waits_.emplace(seq, Waiter{nullptr, 0, std::move(done)});
    } catch (...) {  // out of memory
      natsMsg_Destroy(nm);
      nm = nullptr;
    }
    if (nm != nullptr) {
      status = hand_over(nm);
      natsMsg_Destroy(nm);  // null once libnats took it
      std::lock_guard wl(waits_mu_);
      if (status != broker::StoreStatus::kTaken) {
        waits_.erase(seq);  // invariant 1: never handed over
      } else {
        try {
          async_deadlines_.emplace_back(seq, std::chrono::steady_clock::now() + config_.store_timeout);
        } catch (...) {  // out of memory: its ack completes it, or giving up, or stop()
        }
        flush_wanted_ = true;
        receipts_cv_.notify_one();
      }
    }
  }
  if (status == broker::StoreStatus::kFailed) store_failed_.fetch_add(1, std::memory_order_relaxed);
  return status;
}

void ClusterHistory::run_receipts() noexcept {
  // Invariant 1: every store_timeout the thread looks whether any ack came
  // since; with stores in flight and no ack at three looks in a row (two
  // store timeouts at least), it gives them up.
  std::uint64_t settled_seen = 0;
  int quiet_looks = 0;
  Deadline next_look = std::chrono::steady_clock::now() + config_.store_timeout;
  std::unique_lock lock(waits_mu_);
  while (!receipts_stop_) {
    if (std::exchange(flush_wanted_, false)) {
      lock.unlock();
      (void)natsConnection_FlushTimeout(conn_, config_.store_timeout.count());  // as store()'s wait
      lock.lock();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!async_deadlines_.empty() && async_deadlines_.front().second <= now) {
      const std::uint64_t seq = async_deadlines_.front().first;
      async_deadlines_.pop_front();
      auto it = waits_.find(seq);
      if (it == waits_.end()) continue;  // settled
      broker::StoreDone done = std::move(it->second.done);
      waits_.erase(it);
      store_timeouts_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
      lock.unlock();
      done(false, 0);  // invariant 1
      lock.lock();
      continue;
    }
    if (now >= next_look) {
      next_look = now + config_.store_timeout;
      // relaxed: a counter; an ack the look misses is seen at the next one.
      const std::uint64_t settled = acks_.load(std::memory_order_relaxed);
      const bool in_flight = in_flight_.load(std::memory_order_relaxed) > 0;
      quiet_looks = in_flight && settled == settled_seen ? quiet_looks + 1 : 0;
      settled_seen = settled;
      if (quiet_looks >= 3) {
        quiet_looks = 0;
        lock.unlock();
        give_up_pending();
        lock.lock();
        continue;
      }
    }
    const Deadline wake = async_deadlines_.empty() ? next_look : std::min(next_look, async_deadlines_.front().second);
    receipts_cv_.wait_until(lock, wake);
  }
}

void ClusterHistory::give_up_pending() noexcept {
  natsMsgList pending{};
  if (js_PublishAsyncGetPendingList(&pending, js_) != NATS_OK) return;  // none (NATS_NOT_FOUND), or no memory
  log_(LogLevel::kWarning,
       fmt::format("cluster history: no store acknowledged for two --cluster-store-timeout periods; giving up "
                   "the {} in flight (counted as not confirmed in time; each may be in the history or not)",
                   pending.Count));
  for (int i = 0; i < pending.Count; ++i) {
    settle(pending.Msgs[i], nullptr, true);
    pending.Msgs[i] = nullptr;  // settle() destroyed it
  }
  natsMsgList_Destroy(&pending);
}

broker::StoreStatus ClusterHistory::hand_over(natsMsg*& nm) noexcept {
  // JetStream stores more slowly than a pipelining publisher publishes. Past
  // the bound the publisher is held by its session, which tries again, so
  // that its I/O thread goes on serving the others (invariant 3).
  // relaxed: a bound; on_ack()'s decrements only make room.
  if (in_flight_.load(std::memory_order_relaxed) >= config_.max_pending_stores) {
    stalls_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
    return broker::StoreStatus::kBusy;
  }
  in_flight_.fetch_add(1, std::memory_order_relaxed);  // before: its on_ack() may run before the call returns
  const natsStatus s = js_PublishMsgAsync(js_, &nm, nullptr);
  if (s == NATS_OK) return broker::StoreStatus::kTaken;
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (s != NATS_TIMEOUT) return broker::StoreStatus::kFailed;
  stalls_.fetch_add(1, std::memory_order_relaxed);
  return broker::StoreStatus::kBusy;
}

void ClusterHistory::on_ack(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  static_cast<ClusterHistory*>(closure)->settle(msg, pae == nullptr ? pa : nullptr, false);
}

void ClusterHistory::settle(natsMsg* msg, const jsPubAck* stored, bool given_up) noexcept {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);  // invariant 3
  bool told = false;                                   // a detached entry: its waiter counted and told its outcome
  broker::StoreDone done;
  if (const std::uint64_t seq = seq_of(msg, origin_); seq != 0) {
    std::lock_guard lock(waits_mu_);
    if (auto it = waits_.find(seq); it != waits_.end()) {
      Waiter& waiter = it->second;
      if (Wait* w = waiter.wait; w != nullptr) {
        if (stored == nullptr) {
          w->failed = true;
        } else {
          if (waiter.index < w->offsets.size()) w->offsets[waiter.index] = stored->Sequence;
          --w->remaining;
        }
        waits_cv_.notify_all();
      } else {
        told = !waiter.done;
        done = std::move(waiter.done);
      }
      waits_.erase(it);
    }
  }
  // relaxed: statistics.
  if (!given_up) acks_.fetch_add(1, std::memory_order_relaxed);
  if (stored != nullptr) {
    stored_.fetch_add(1, std::memory_order_relaxed);
  } else if (!given_up) {
    store_failed_.fetch_add(1, std::memory_order_relaxed);
  } else if (!told) {
    store_timeouts_.fetch_add(1, std::memory_order_relaxed);
  }
  if (done) done(stored != nullptr, stored != nullptr ? stored->Sequence : 0);  // invariant 1: outside waits_mu_
  natsMsg_Destroy(msg);
}

tl::expected<void, std::string> ClusterHistory::load(const broker::HistoryLoad& load) {
  if (loaded_to_ == 0) return {};
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream_.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverAll;
  const std::string subject = cluster_wildcard(config_.subject_prefix, SubjectSpace::kHistory);
  natsSubscription* sub = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  if (natsStatus s = js_SubscribeSync(&sub, js_, subject.c_str(), nullptr, &so, &jerr); s != NATS_OK) {
    return tl::unexpected(jetstream_error("cluster history: reading the stream", s, jerr));
  }
  struct Drop {
    natsSubscription* sub;
    ~Drop() {
      unsubscribe_ordered(sub);
      natsSubscription_Destroy(sub);
    }
  } drop{sub};
  std::uint64_t seq = 0, loaded = 0;
  auto next_log = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (seq < loaded_to_) {
    natsMsg* msg = nullptr;
    if (natsStatus s = natsSubscription_NextMsg(&msg, sub, config_.store_timeout.count()); s != NATS_OK) {
      return tl::unexpected(
          jetstream_error(fmt::format("cluster history: reading the stream (at {} of {})", seq, loaded_to_), s, jerr));
    }
    jsMsgMetaData* meta = nullptr;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
      seq = meta->Sequence.Stream;
      const std::int64_t time_ms = meta->Timestamp / 1'000'000;
      jsMsgMetaData_Destroy(meta);
      const auto f = decode_cluster_frame(
          std::string_view(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg))));
      if (f && !f->shard && !f->more && f->chunk == 0 && seq <= loaded_to_) {
        load(f->channel, seq, f->payload, time_ms);
        ++loaded;
        loaded_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
      }
    }
    natsMsg_Destroy(msg);
    if (std::chrono::steady_clock::now() >= next_log) {
      log_(LogLevel::kInfo, fmt::format("cluster history: loading, at {} of {}", seq, loaded_to_));
      next_log += std::chrono::seconds(2);
    }
  }
  log_(LogLevel::kInfo, fmt::format("cluster history: {} messages loaded (the stream up to {})", loaded, loaded_to_));
  return {};
}

void ClusterHistory::start_copy(broker::Broker& broker) noexcept {
  broker_.store(&broker);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream_.c_str();
  so.Ordered = true;
  // After what load() read: those were published before this node was up.
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = loaded_to_ + 1;
  so.Config.Heartbeat = kCopyHeartbeatNs;
  copied_to_ = loaded_to_;
  const std::string subject = cluster_wildcard(config_.subject_prefix, SubjectSpace::kHistory);
  jsErrCode jerr = static_cast<jsErrCode>(0);
  std::lock_guard lock(copy_mu_);
  natsStatus s = js_Subscribe(&copy_sub_, js_, subject.c_str(), &ClusterHistory::on_copy, this, nullptr, &so, &jerr);
  if (s == NATS_OK) s = natsSubscription_SetPendingLimits(copy_sub_, config_.pending_msgs, config_.pending_bytes);
  if (s == NATS_OK) s = natsSubscription_SetOnCompleteCB(copy_sub_, &ClusterHistory::on_copy_complete, this);
  if (s != NATS_OK) {
    log_(LogLevel::kError, jetstream_error("cluster history: reading the stream back failed; this node serves no "
                                           "history and delivers no retained channel",
                                           s, jerr));
    if (copy_sub_ != nullptr) {
      unsubscribe_ordered(copy_sub_);
      natsSubscription_Destroy(copy_sub_);
      copy_sub_ = nullptr;
    }
    return;
  }
  copy_done_ = false;
}

void ClusterHistory::on_copy(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  static_cast<ClusterHistory*>(closure)->copy(msg);
  natsMsg_Destroy(msg);
}

void ClusterHistory::on_copy_complete(void* closure) {
  auto& h = *static_cast<ClusterHistory*>(closure);
  std::lock_guard lock(h.copy_mu_);
  h.copy_done_ = true;
  h.copy_done_cv_.notify_all();  // under copy_mu_: stop() may free the condition once it sees it
}

void ClusterHistory::copy(natsMsg* msg) noexcept {
  const DeliveryGate::Pass pass(gate_);
  broker::Broker* const b = broker_.load();
  if (!pass.open() || b == nullptr) return;
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg) != NATS_OK) {
    copy_refused_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::uint64_t offset = meta->Sequence.Stream;
  jsMsgMetaData_Destroy(meta);
  // The copy reads every subject, so the sequence goes up by one unless the
  // stream dropped messages (its limits) before this node read them.
  if (offset > copied_to_ + 1) skipped_.fetch_add(offset - copied_to_ - 1, std::memory_order_relaxed);
  copied_to_ = std::max(copied_to_, offset);
  const auto f = decode_cluster_frame(
      std::string_view(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg))));
  if (!f || f->shard || f->more || f->chunk != 0) {
    copy_refused_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const broker::Message m{f->channel, f->payload, f->qos, f->message_id};
  std::size_t receivers = 0;
  if (b->publish_from_history({&m, 1}, {&offset, 1}, {&receivers, 1}).status == broker::PublishStatus::kPublished) {
    copied_.fetch_add(1, std::memory_order_relaxed);
  } else {
    copy_refused_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ClusterHistory::stop() noexcept {
  if (!gate_.close()) return;
  {
    std::unique_lock lock(copy_mu_);
    if (copy_sub_ != nullptr) {
      unsubscribe_ordered(copy_sub_);
      copy_done_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return copy_done_; });
    }
  }
  gate_.wait_empty();
  if (copy_sub_ != nullptr) {
    natsSubscription_Destroy(copy_sub_);
    copy_sub_ = nullptr;
  }
  // The acks of stores in flight, so their outcome is counted.
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = 1000;
  (void)js_PublishAsyncComplete(js_, &po);
  std::vector<broker::StoreDone> left;
  {
    std::lock_guard lock(waits_mu_);
    receipts_stop_ = true;
    receipts_cv_.notify_one();
    for (auto it = waits_.begin(); it != waits_.end();) {
      if (it->second.wait != nullptr || !it->second.done) {
        ++it;  // a waiting store()'s, or detached (invariant 1)
        continue;
      }
      try {
        left.push_back(std::move(it->second.done));
      } catch (...) {  // out of memory: call it here, under the lock, rather than never
        it->second.done(false, 0);
      }
      it = waits_.erase(it);
    }
    async_deadlines_.clear();
  }
  if (receipts_.joinable()) receipts_.join();
  for (const broker::StoreDone& done : left) done(false, 0);  // invariant 1
}

ClusterHistoryStats ClusterHistory::stats() const noexcept {
  // relaxed: statistics.
  return {stored_.load(std::memory_order_relaxed),
          store_failed_.load(std::memory_order_relaxed),
          store_timeouts_.load(std::memory_order_relaxed),
          stalls_.load(std::memory_order_relaxed),
          static_cast<std::uint64_t>(std::max<std::int64_t>(in_flight_.load(std::memory_order_relaxed), 0)),
          loaded_.load(std::memory_order_relaxed),
          copied_.load(std::memory_order_relaxed),
          copy_refused_.load(std::memory_order_relaxed),
          skipped_.load(std::memory_order_relaxed)};
}

}  // namespace ringcast::relay
