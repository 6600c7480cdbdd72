#include "relay/jetstream_publisher.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "relay/jetstream_error.hpp"

#include "ringcast/relay/continuity.hpp"

namespace ringcast::relay {

namespace {

// Header carrying the attempt number of a retried publish (absent: attempt 1).
// Subscribers may ignore it; it tells an operator which copies were retries.
constexpr const char* kAttemptHeader = "Ringcast-Attempt";
constexpr const char* kMsgIdHeader = "Nats-Msg-Id";
// Pause before attempt n+1: 50 ms << (n-1), at most 2 s. An immediate error
// (no responders while a stream leader is elected) is not retried in a spin.
std::chrono::milliseconds backoff(int attempt) {
  return std::chrono::milliseconds(std::min<std::int64_t>(2000, std::int64_t{50} << std::min(attempt - 1, 6)));
}

int attempt_of(natsMsg* msg) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(msg, kAttemptHeader, &v) != NATS_OK || v == nullptr) return 1;
  return std::max(1, std::atoi(v));
}

std::string msg_id_of(natsMsg* msg) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(msg, kMsgIdHeader, &v) != NATS_OK || v == nullptr) return "?";
  return v;
}

}  // namespace

tl::expected<std::vector<std::string>, std::string> JetStreamPublisher::route_subjects(
    const std::vector<RingRoute>& routes) {
  std::vector<std::string> out;
  for (const RingRoute& r : routes) {
    std::string subject = r.name;
    if (r.topic_in_payload) {
      if (r.name.empty() || r.name.back() != '.') {
        return tl::unexpected(fmt::format(
            "ring {}: the topic route '{}*' has no 'PREFIX.' to derive a stream subject from; give --stream-subjects",
            r.path, r.name));
      }
      subject += '>';
    }
    if (std::find(out.begin(), out.end(), subject) == out.end()) out.push_back(std::move(subject));
  }
  return out;
}

JetStreamPublisher::JetStreamPublisher(const JetStreamConfig& config, LogFn log)
    : config_(config), log_(std::move(log)) {}

tl::expected<std::unique_ptr<JetStreamPublisher>, std::string> JetStreamPublisher::create(
    natsConnection* conn, const JetStreamConfig& config, const std::vector<std::string>& subjects, LogFn log) {
  std::unique_ptr<JetStreamPublisher> p(new JetStreamPublisher(config, std::move(log)));

  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = std::max<std::int64_t>(config.ack_timeout.count(), 2000);  // the stream API calls below
  jo.PublishAsync.MaxPending = config.max_pending;
  jo.PublishAsync.AckHandler = &JetStreamPublisher::on_ack;
  jo.PublishAsync.AckHandlerClosure = p.get();
  // Short, so a reader waiting at max_pending notices stop between waits.
  jo.PublishAsync.StallWait = 50;
  if (natsStatus s = natsConnection_JetStream(&p->js_, conn, &jo); s != NATS_OK) {
    return tl::unexpected(jetstream_error("JetStream context", s, static_cast<jsErrCode>(0)));
  }
  // No per-message MaxWait: libnats 3.4 keeps those deadlines in a list it
  // walks on every publish (O(outstanding) each). The retry thread's
  // watchdog times acks out instead (invariant 4).
  jsPubOptions_Init(&p->pub_opts_);

  // The stream: keep the subjects it has, add ours, apply our limits.
  std::vector<std::string> wanted = config.subjects.empty() ? subjects : config.subjects;
  jsStreamInfo* si = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&si, p->js_, config.stream.c_str(), nullptr, &jerr);
  const bool exists = s == NATS_OK;
  if (!exists && jerr != JSStreamNotFoundErr) {
    return tl::unexpected(
        jetstream_error(fmt::format("JetStream stream '{}' (is the server up, with -js?)", config.stream), s, jerr));
  }
  if (exists) {
    for (int i = 0; i < si->Config->SubjectsLen; ++i) {
      std::string have = si->Config->Subjects[i];
      if (std::find(wanted.begin(), wanted.end(), have) == wanted.end()) wanted.push_back(std::move(have));
    }
  }
  std::vector<const char*> subject_ptrs;
  subject_ptrs.reserve(wanted.size());
  for (const auto& w : wanted) subject_ptrs.push_back(w.c_str());
  jsStreamConfig sc;
  jsStreamConfig_Init(&sc);
  sc.Name = config.stream.c_str();
  sc.Subjects = subject_ptrs.data();
  sc.SubjectsLen = static_cast<int>(subject_ptrs.size());
  sc.Storage = config.memory_storage ? js_MemoryStorage : js_FileStorage;
  sc.Replicas = config.replicas;
  sc.MaxAge = std::chrono::duration_cast<std::chrono::nanoseconds>(config.max_age).count();
  sc.MaxBytes = config.max_bytes;
  sc.Duplicates = std::chrono::duration_cast<std::chrono::nanoseconds>(config.duplicate_window).count();
  if (exists) {
    // Storage cannot change on an existing stream: keep its own.
    sc.Storage = si->Config->Storage;
    jsStreamInfo_Destroy(si);
    si = nullptr;
    s = js_UpdateStream(&si, p->js_, &sc, nullptr, &jerr);
  } else {
    s = js_AddStream(&si, p->js_, &sc, nullptr, &jerr);
  }
  if (s != NATS_OK) {
    return tl::unexpected(jetstream_error(
        fmt::format("{} JetStream stream '{}'", exists ? "updating" : "creating", config.stream), s, jerr));
  }
  std::string subjects_text;
  for (const auto& w : wanted) subjects_text += (subjects_text.empty() ? "" : ",") + w;
  p->log_(LogLevel::kInfo,
          fmt::format("JetStream stream '{}' {} (subjects {}, {} storage, replicas {}, max age {}, max bytes {}, "
                      "duplicate window {} ms; {} messages stored)",
                      config.stream, exists ? "updated" : "created", subjects_text,
                      si->Config->Storage == js_MemoryStorage ? "memory" : "file", si->Config->Replicas,
                      config.max_age.count() == 0 ? std::string("none") : fmt::format("{} s", config.max_age.count()),
                      config.max_bytes, config.duplicate_window.count(), si->State.Msgs));
  jsStreamInfo_Destroy(si);
  p->retry_thread_ = std::thread([raw = p.get()] { raw->retry_loop(); });
  return p;
}

JetStreamPublisher::~JetStreamPublisher() {
  close(std::chrono::milliseconds(0));
  if (js_ != nullptr) jsCtx_Destroy(js_);
}

// NOLINTNEXTLINE(bugprone-exception-escape): see the header
bool JetStreamPublisher::publish(const char* subject, std::string_view body, const char* source, std::uint64_t seq,
                                 const std::atomic<bool>& stop, std::uint64_t from) noexcept {
  // relaxed: statistics. Counted before libnats can call on_ack for it, so
  // pending() never goes below zero.
  published_.fetch_add(1, std::memory_order_relaxed);
  // "<source>/<seq>" and "<seq>", NUL-terminated. memory_buffer keeps up to 500
  // bytes inline: no allocation of ours for any sane source.
  fmt::memory_buffer id;
  fmt::format_to(std::back_inserter(id), "{}/{}", source, seq);
  id.push_back('\0');
  const char* const seq_text = id.data() + std::strlen(source) + 1;
  char from_text[24];
  *std::to_chars(from_text, from_text + sizeof from_text - 1, from).ptr = '\0';
  natsMsg* m = nullptr;
  if (natsMsg_Create(&m, subject, nullptr, body.data(), static_cast<int>(body.size())) != NATS_OK ||
      natsMsgHeader_Set(m, kSourceHeader, source) != NATS_OK || natsMsgHeader_Set(m, kSeqHeader, seq_text) != NATS_OK ||
      natsMsgHeader_Set(m, kMsgIdHeader, id.data()) != NATS_OK ||
      (from != kFromSeq && from != seq && natsMsgHeader_Set(m, kFromHeader, from_text) != NATS_OK)) {
    natsMsg_Destroy(m);
    failed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  for (;;) {
    const natsStatus s = js_PublishMsgAsync(js_, &m, &pub_opts_);
    if (s == NATS_OK) return true;  // libnats owns m now (m is NULL)
    // acquire: pairs with the release store of the relay's stop flag.
    const bool stopping = stop.load(std::memory_order_acquire);
    if (s == NATS_TIMEOUT && !stopping) {
      // max_pending acks outstanding (invariant 3): wait for room.
      stalls_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (s == NATS_TIMEOUT || s == NATS_CONNECTION_CLOSED) {
      natsMsg_Destroy(m);
      failed_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    // Anything else (the reconnect buffer is full, ...): one failed attempt.
    {
      std::lock_guard lock(mu_);
      retries_.push_back({m, std::chrono::steady_clock::now() + backoff(1)});
    }
    cv_.notify_one();
    return true;
  }
}

void JetStreamPublisher::on_ack(jsCtx* /*js*/, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  auto* self = static_cast<JetStreamPublisher*>(closure);
  if (pa != nullptr) {
    if (pa->Duplicate) self->duplicates_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
    // release: this publisher's last use here (pending(), invariant 5).
    self->acked_.fetch_add(1, std::memory_order_release);
    natsMsg_Destroy(msg);
    return;
  }
  self->retry_or_give_up(msg, pae != nullptr ? pae->Err : NATS_ERR, pae != nullptr ? pae->ErrText : nullptr);
}

// NOLINTNEXTLINE(bugprone-exception-escape): see the header
void JetStreamPublisher::retry_or_give_up(natsMsg* msg, natsStatus err, const char* text) noexcept {
  const int attempt = attempt_of(msg);
  std::unique_lock lock(mu_);
  if (!closing_ && (config_.max_attempts == 0 || attempt < config_.max_attempts)) {
    // Invariant 2: the same message (same Nats-Msg-Id) goes again.
    char next[16];
    *fmt::format_to_n(next, sizeof next - 1, "{}", attempt + 1).out = '\0';
    if (natsMsgHeader_Set(msg, kAttemptHeader, next) == NATS_OK) {
      try {
        retries_.push_back({msg, std::chrono::steady_clock::now() + backoff(attempt)});
        // Under the lock: once it is released, close() may count the message
        // failed and the publisher go (invariant 5), so nothing after it may
        // touch the publisher.
        cv_.notify_one();
        return;
      } catch (...) {
        // Out of memory: counted as given up below.
      }
    }
  }
  const bool closing = closing_;
  lock.unlock();
  if (!closing) {
    try {
      log_(LogLevel::kError,
           fmt::format("JetStream gave up on message {} after {} attempts: {}{}", msg_id_of(msg), attempt,
                       natsStatus_GetText(err), text != nullptr ? fmt::format(" ({})", text) : std::string()));
    } catch (...) {
      // Logging failed (out of memory); the count is in the statistics.
    }
  }
  natsMsg_Destroy(msg);
  // release, and last: this publisher's last use here (pending(), invariant 5).
  failed_.fetch_add(1, std::memory_order_release);
}

// NOLINTNEXTLINE(bugprone-exception-escape): see the header
void JetStreamPublisher::resend_unacked() noexcept {
  natsMsgList unacked{};
  if (js_PublishAsyncGetPendingList(&unacked, js_) != NATS_OK) return;
  try {
    log_(LogLevel::kWarning, fmt::format("JetStream: no ack for {} ms; resending the {} unacknowledged messages",
                                         config_.ack_timeout.count(), unacked.Count));
  } catch (...) {
    // Logging failed (out of memory); the resends are counted.
  }
  for (int i = 0; i < unacked.Count; ++i) {
    natsMsg* m = std::exchange(unacked.Msgs[i], nullptr);  // ours now, not the list's
    retry_or_give_up(m, NATS_TIMEOUT, "no acknowledgement");
  }
  natsMsgList_Destroy(&unacked);
}

void JetStreamPublisher::retry_loop() {
  std::unique_lock lock(mu_);
  std::uint64_t logged = 0;
  // Ack watchdog (invariant 4): the settled count and when it last moved.
  std::uint64_t settled = 0;
  auto progress = std::chrono::steady_clock::now();
  const auto tick = std::max<std::chrono::milliseconds>(config_.ack_timeout / 4, std::chrono::milliseconds(1));
  while (!closing_) {
    const auto now = std::chrono::steady_clock::now();
    // relaxed: statistics; a stale value only delays the watchdog by a tick.
    const std::uint64_t now_settled = acked_.load(std::memory_order_relaxed) + failed_.load(std::memory_order_relaxed);
    if (now_settled != settled || pending() <= retries_.size()) {
      settled = now_settled;
      progress = now;
    } else if (now - progress >= config_.ack_timeout) {
      lock.unlock();
      resend_unacked();
      lock.lock();
      progress = std::chrono::steady_clock::now();
      continue;
    }
    if (retries_.empty()) {
      cv_.wait_for(lock, tick);
      continue;
    }
    Retry r = retries_.front();
    if (r.due > now) {
      cv_.wait_until(lock, std::min(r.due, now + tick));
      continue;
    }
    retries_.pop_front();
    lock.unlock();
    // relaxed: statistics.
    const std::uint64_t n = retried_.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n >= logged * 2) {  // 1, 2, 4, 8, ...: visible without flooding the log
      log_(LogLevel::kWarning, fmt::format("JetStream: retrying message {} (attempt {}; {} retries so far)",
                                           msg_id_of(r.msg), attempt_of(r.msg), n));
      logged = n;
    }
    const natsStatus s = js_PublishMsgAsync(js_, &r.msg, &pub_opts_);
    lock.lock();
    if (s != NATS_OK) {
      // Stalled (max_pending outstanding) or not accepted: try again shortly,
      // without spending an attempt on it.
      retries_.push_front({r.msg, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)});
    }
  }
}

std::uint64_t JetStreamPublisher::pending() const noexcept {
  // Read in this order, a concurrent ack can only make the difference
  // smaller, never wrap it. acquire: pairs with on_ack's release increments,
  // so once this says 0 no on_ack still uses the publisher (invariant 5).
  const std::uint64_t acked = acked_.load(std::memory_order_acquire);
  const std::uint64_t failed = failed_.load(std::memory_order_acquire);
  const std::uint64_t published = published_.load(std::memory_order_relaxed);
  return published > acked + failed ? published - acked - failed : 0;
}

void JetStreamPublisher::stats(NatsStats& out) const {
  out.jetstream = true;
  // relaxed: statistics.
  out.js_published = published_.load(std::memory_order_relaxed);
  out.js_acked = acked_.load(std::memory_order_relaxed);
  out.js_duplicates = duplicates_.load(std::memory_order_relaxed);
  out.js_retried = retried_.load(std::memory_order_relaxed);
  out.js_failed = failed_.load(std::memory_order_relaxed);
  out.js_stalls = stalls_.load(std::memory_order_relaxed);
  out.js_pending = pending();
}

void JetStreamPublisher::close(std::chrono::milliseconds timeout) noexcept {
  {
    std::lock_guard lock(mu_);
    if (closing_) return;
  }
  // Let outstanding acks and queued retries settle, bounded by `timeout`.
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (pending() > 0 && std::chrono::steady_clock::now() < end) {
    jsPubOptions o;
    jsPubOptions_Init(&o);
    o.MaxWait = 50;
    // Returns at once when only queued retries are left: pause for them.
    if (js_PublishAsyncComplete(js_, &o) == NATS_OK) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  if (retry_thread_.joinable()) retry_thread_.join();
  // Only now: a retry the thread had taken puts itself back when libnats
  // refuses it, and on_ack gives up (counts) rather than queue once
  // closing_ is set.
  std::deque<Retry> left;
  {
    std::lock_guard lock(mu_);
    left.swap(retries_);
  }
  for (Retry& r : left) {
    natsMsg_Destroy(r.msg);
    failed_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistics
  }
  // What libnats still waits an ack for: take it back and count it. (libnats
  // 3.4 crashes on this call before the first async publish made its table.)
  natsMsgList unacked{};
  if (js_ != nullptr && published_.load(std::memory_order_relaxed) > 0 &&
      js_PublishAsyncGetPendingList(&unacked, js_) == NATS_OK) {
    failed_.fetch_add(static_cast<std::uint64_t>(unacked.Count), std::memory_order_relaxed);
    natsMsgList_Destroy(&unacked);
  }
  // An ack libnats took out of its table before that may still be in on_ack:
  // its message is in neither count yet, and each such call ends with its
  // release increment (invariant 5). So once pending() says 0, no on_ack is
  // left, and none can start (libnats holds no message of ours to call it
  // for). Without this wait a destructor after close(0) freed the publisher
  // under a running on_ack (clang's ThreadSanitizer saw it in the sink test).
  // Bounded: on_ack never waits long, so a count still short after seconds
  // is a message lost to the accounting, not a call under way.
  const auto settled_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pending() > 0 && std::chrono::steady_clock::now() < settled_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::uint64_t lost = failed_.load(std::memory_order_relaxed);
  if (lost > 0) {
    try {
      log_(LogLevel::kWarning,
           fmt::format("JetStream stream '{}': {} messages were never acknowledged (js_failed)", config_.stream, lost));
    } catch (...) {
      // Logging failed (out of memory); the count is in the statistics.
    }
  }
}

}  // namespace ringcast::relay
