#include "relay/nats_ingress.hpp"

#include <charconv>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

namespace ringcast::relay {

NatsIngress::NatsIngress(std::string subject, std::string target_name, bool to_ring,
                         std::unique_ptr<IngressTarget> target)
    : subject_(std::move(subject)),
      target_name_(std::move(target_name)),
      to_ring_(to_ring),
      target_(std::move(target)) {
  // Reserved once so the delivery thread never grows it: a batch of more
  // records than a relay sends (kMaxNatsBatch) is refused as malformed.
  records_.reserve(kMaxNatsBatch);
}

tl::expected<std::unique_ptr<NatsIngress>, std::string> NatsIngress::start(natsConnection* conn, std::string subject,
                                                                           std::string target_name, bool to_ring,
                                                                           std::unique_ptr<IngressTarget> target,
                                                                           const NatsIngressConfig& config) {
  std::unique_ptr<NatsIngress> in(
      new NatsIngress(std::move(subject), std::move(target_name), to_ring, std::move(target)));
  const auto fail = [&](std::string_view step, natsStatus s) {
    return tl::unexpected(fmt::format("--nats-in {}: {}: {}", in->subject_, step, natsStatus_GetText(s)));
  };
  natsStatus s = natsConnection_Subscribe(&in->sub_, conn, in->subject_.c_str(), &NatsIngress::on_message, in.get());
  if (s != NATS_OK) {
    in->sub_ = nullptr;
    return fail("subscribe", s);
  }
  if ((s = natsSubscription_SetOnCompleteCB(in->sub_, &NatsIngress::on_complete, in.get())) != NATS_OK) {
    return fail("completion callback", s);
  }
  if ((s = natsSubscription_SetPendingLimits(in->sub_, config.pending_msgs, config.pending_bytes)) != NATS_OK) {
    return fail("pending limits", s);
  }
  // A round trip, so the server has the interest when start returns: what is
  // published from then on reaches us. Best effort: while disconnected
  // libnats sends the subscription on (re)connect.
  if (natsConnection_Status(conn) == NATS_CONN_STATUS_CONNECTED) (void)natsConnection_FlushTimeout(conn, 2000);
  return in;
}

tl::expected<std::unique_ptr<NatsIngress>, std::string> NatsIngress::start_jetstream(
    natsConnection* conn, std::string subject, std::string target_name, bool to_ring,
    std::unique_ptr<IngressTarget> target, const JetStreamConfig& config, std::string durable, LogFn log) {
  std::unique_ptr<NatsIngress> in(
      new NatsIngress(std::move(subject), std::move(target_name), to_ring, std::move(target)));
  NatsIngress* const raw = in.get();
  auto js = JetStreamIngress::start(
      conn, config, in->subject_, std::move(durable),
      [raw](natsMsg* msg) { return raw->handle(msg, /*keep_duplicates=*/true); }, std::move(log));
  if (!js) return tl::unexpected(fmt::format("--nats-in {}: {}", in->subject_, js.error()));
  in->jetstream_ = std::move(*js);
  return in;
}

NatsIngress::~NatsIngress() {
  stop();
  if (sub_ != nullptr) natsSubscription_Destroy(sub_);
}

void NatsIngress::stop() noexcept {
  if (jetstream_) {
    // release: pairs with the acquire loads of a blocked delivery (the targets).
    stopping_.store(true, std::memory_order_release);
    jetstream_->stop();  // joins the fetch thread: handle() never runs again
    return;
  }
  std::unique_lock lock(done_mu_);
  if (stopped_ || sub_ == nullptr) return;
  stopped_ = true;
  // release: pairs with the acquire loads of a blocked delivery (the targets).
  stopping_.store(true, std::memory_order_release);
  lock.unlock();
  if (natsSubscription_Unsubscribe(sub_) != NATS_OK) {
    // Already closed with its connection: the completion callback has run or runs now.
  }
  lock.lock();
  // Bounded: a libnats that never calls back must not hang shutdown.
  done_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return done_; });
}

void NatsIngress::on_complete(void* closure) {
  auto* in = static_cast<NatsIngress*>(closure);
  std::lock_guard lock(in->done_mu_);
  in->done_ = true;
  in->done_cv_.notify_all();
}

void NatsIngress::on_message(natsConnection* /*nc*/, natsSubscription* /*sub*/, natsMsg* msg, void* closure) {
  static_cast<NatsIngress*>(closure)->handle(msg, /*keep_duplicates=*/false);
  natsMsg_Destroy(msg);
}

bool NatsIngress::split_batch(std::span<const std::byte> body, std::uint64_t count) noexcept {
  records_.clear();
  std::size_t at = 0;
  while (at < body.size()) {
    const auto len = static_cast<std::size_t>(body[at]);
    if (at + 1 + len > body.size() || records_.size() == count) return false;
    if (records_.size() == records_.capacity()) return false;  // beyond what was reserved: refuse, do not allocate
    records_.push_back(body.subspan(at + 1, len));
    at += 1 + len;
  }
  return records_.size() == count;
}

bool NatsIngress::handle(natsMsg* msg, bool keep_duplicates) noexcept {
  const char* source = nullptr;
  const char* seq = nullptr;
  const char* count = nullptr;
  const char* from = nullptr;
  // Not found leaves the value null: the message is unsequenced (or not a
  // batch, or one that accounts for its own position only).
  (void)natsMsgHeader_Get(msg, kSourceHeader, &source);
  (void)natsMsgHeader_Get(msg, kSeqHeader, &seq);
  (void)natsMsgHeader_Get(msg, kCountHeader, &count);
  (void)natsMsgHeader_Get(msg, kFromHeader, &from);
  const std::string_view subject = natsMsg_GetSubject(msg);
  const auto* data = reinterpret_cast<const std::byte*>(natsMsg_GetData(msg));
  const std::span<const std::byte> body(data, static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  std::uint64_t n = 1;
  if (count != nullptr) {
    // A batch: its records must parse before anything is checked or delivered.
    n = 0;
    const char* end = count + std::strlen(count);
    const auto r = std::from_chars(count, end, n);
    if (r.ec != std::errc() || r.ptr != end || n == 0 || !split_batch(body, n)) {
      // relaxed (every counter here): single-writer statistics.
      received_.fetch_add(1, std::memory_order_relaxed);
      malformed_.fetch_add(1, std::memory_order_relaxed);
      return true;  // dropped for good (the caller destroys it)
    }
  }
  received_.fetch_add(n, std::memory_order_relaxed);
  ContinuityResult r;
  try {
    r = checker_.check_headers(source, seq, count, from);
  } catch (...) {
    r = {Continuity::kUntracked};  // out of memory for a new stream: deliver unchecked
  }
  const ContinuityStats& cs = checker_.stats();
  gaps_.store(cs.gaps, std::memory_order_relaxed);
  lost_.store(cs.lost, std::memory_order_relaxed);
  restarts_.store(cs.restarts, std::memory_order_relaxed);
  duplicates_.store(cs.duplicates, std::memory_order_relaxed);
  unsequenced_.store(cs.unsequenced + cs.untracked, std::memory_order_relaxed);
  if (r.kind == Continuity::kGap) target_->on_gap(subject, r.lost);  // invariant 2
  if (r.deliver() || keep_duplicates) {
    if (count == nullptr) {
      const IngressTarget::Outcome o = target_->deliver(subject, body, stopping_);
      if (o == IngressTarget::Outcome::kStopped) return false;
      if (o == IngressTarget::Outcome::kDelivered) delivered_.fetch_add(1, std::memory_order_relaxed);
    } else {
      const std::size_t skip = r.deliver() ? r.skip : 0;
      const std::span<const std::span<const std::byte>> rest(records_.data() + skip, records_.size() - skip);
      const std::size_t done = target_->deliver_batch(subject, rest, stopping_);
      delivered_.fetch_add(done, std::memory_order_relaxed);
      // acquire: pairs with the release store in stop().
      if (done < rest.size() && stopping_.load(std::memory_order_acquire)) return false;
    }
  }
  return true;
}

NatsIngressStats NatsIngress::stats() const {
  NatsIngressStats s;
  s.subject = subject_;
  s.target = target_name_;
  s.to_ring = to_ring_;
  // relaxed: statistics.
  s.received = received_.load(std::memory_order_relaxed);
  s.delivered = delivered_.load(std::memory_order_relaxed);
  s.gaps = gaps_.load(std::memory_order_relaxed);
  s.lost = lost_.load(std::memory_order_relaxed);
  s.restarts = restarts_.load(std::memory_order_relaxed);
  s.duplicates = duplicates_.load(std::memory_order_relaxed);
  s.unsequenced = unsequenced_.load(std::memory_order_relaxed);
  s.malformed = malformed_.load(std::memory_order_relaxed);
  target_->fill(s);
  if (jetstream_) {
    const JetStreamIngressStats j = jetstream_->stats();
    s.jetstream = true;
    s.js_durable = j.durable;
    s.js_resumed_at = j.resumed_at;
    s.js_redelivered_bound = j.redelivered_bound;
    s.js_redeliveries = j.redeliveries;
    s.js_acks = j.acks;
    s.js_fetch_errors = j.fetch_errors;
  }
  if (sub_ != nullptr) {
    int msgs = 0, bytes = 0;
    if (natsSubscription_GetPending(sub_, &msgs, &bytes) == NATS_OK) {
      s.pending_msgs = msgs;
      s.pending_bytes = bytes;
    }
    if (natsSubscription_GetMaxPending(sub_, &msgs, &bytes) == NATS_OK) {
      s.max_pending_msgs = msgs;
      s.max_pending_bytes = bytes;
    }
    if (natsSubscription_GetPendingLimits(sub_, &msgs, &bytes) == NATS_OK) {
      s.pending_limit_msgs = msgs;
      s.pending_limit_bytes = bytes;
    }
    int64_t dropped = 0;
    if (natsSubscription_GetDropped(sub_, &dropped) == NATS_OK) s.dropped = dropped;
  }
  return s;
}

}  // namespace ringcast::relay
