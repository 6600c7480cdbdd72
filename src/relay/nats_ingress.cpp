#include "relay/nats_ingress.hpp"

#include <charconv>
#include <chrono>
#include <cstring>
#include <random>

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
  // Before the subscription goes live: handle() reads them (credit window acks).
  in->conn_ = conn;
  {
    std::random_device rd;
    in->ack_id_ = (std::uint64_t{rd()} << 32) | rd();
  }
  for (AckSource& src : in->sources_) src.reply.reserve(128);
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
  in->start_heartbeat();
  return in;
}

void NatsIngress::start_heartbeat() {
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

void NatsIngress::stop_heartbeat() noexcept {
  {
    std::lock_guard lock(ack_mu_);
    hb_stop_ = true;
  }
  ack_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void NatsIngress::heartbeat_loop() noexcept {
  std::unique_lock lock(ack_mu_);
  while (!hb_stop_) {
    ack_cv_.wait_for(lock, kHeartbeat, [this] { return hb_stop_; });
    if (hb_stop_ || conn_ == nullptr) continue;
    const auto now = std::chrono::steady_clock::now();
    // relaxed: a hint that the delivery thread is alive but held up.
    const bool held = in_target_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < source_count_; ++i) {
      AckSource& src = sources_[i];
      // relaxed: ack_mu_ orders a source's (re)use with its first position
      // (source_of); later stores are of the same source, and any value is
      // a position already handled.
      const std::uint64_t pos = src.pos.load(std::memory_order_relaxed);
      if (pos != src.hb_sent || (held && now - src.hb_sent_at >= kKeepalive)) {
        send_ack(src.reply.c_str(), src.run, pos);
        src.hb_sent = pos;
        src.hb_sent_at = now;
      }
    }
  }
}

void NatsIngress::send_ack(const char* reply, std::uint32_t run, std::uint64_t pos, bool left) noexcept {
  char buf[64];
  char* p = std::to_chars(buf, buf + 16, ack_id_, 16).ptr;
  *p++ = ' ';
  p = std::to_chars(p, p + 8, run, 16).ptr;
  *p++ = ' ';
  if (left) {
    *p++ = '-';
  } else {
    p = std::to_chars(p, buf + sizeof buf, pos).ptr;
  }
  if (natsConnection_Publish(conn_, reply, buf, static_cast<int>(p - buf)) == NATS_OK) {
    acks_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  }
}

NatsIngress::AckSource* NatsIngress::source_of(const char* reply, std::uint32_t run, bool& fresh) noexcept {
  // The delivery thread is the only writer of reply and run: it reads them
  // without ack_mu_.
  fresh = false;
  if (last_source_ < source_count_ && sources_[last_source_].run == run && sources_[last_source_].reply == reply) {
    return &sources_[last_source_];
  }
  std::size_t slot = source_count_;
  for (std::size_t i = 0; i < source_count_; ++i) {
    if (sources_[i].reply == reply) {
      slot = i;
      break;
    }
  }
  if (slot < source_count_ && sources_[slot].run == run) {
    last_source_ = slot;
    return &sources_[slot];
  }
  if (slot == kMaxAckSources) {
    // Full, and a new source: forget the one heard from longest ago.
    slot = 0;
    for (std::size_t i = 1; i < kMaxAckSources; ++i) {
      if (sources_[i].noted < sources_[slot].noted) slot = i;
    }
  }
  // A new source, a new run of a known one, or a replacement.
  try {
    std::lock_guard lock(ack_mu_);
    AckSource& src = sources_[slot];
    src.reply.assign(reply);  // within the reserved capacity for inboxes
    src.run = run;
    // relaxed: published by ack_mu_ (heartbeat_loop).
    src.pos.store(0, std::memory_order_relaxed);
    src.hb_sent = ~std::uint64_t{0};
    src.hb_sent_at = {};
    if (slot == source_count_) ++source_count_;
  } catch (...) {
    return nullptr;  // out of memory for a very long reply subject
  }
  last_source_ = slot;
  fresh = true;
  return &sources_[slot];
}

void NatsIngress::note_ack(const char* reply, std::uint32_t run, std::uint64_t pos, bool now) noexcept {
  bool fresh = false;
  AckSource* src = source_of(reply, run, fresh);
  if (src == nullptr) return;  // no ack: the relay stops waiting for us after its ack timeout
  src->noted = ++noted_;
  // relaxed: see heartbeat_loop.
  src->pos.store(pos, std::memory_order_relaxed);
  // A source new to us (or a new run of it) is acknowledged at once.
  if (now || fresh || pos - src->inline_pos >= kAckEvery) {
    send_ack(reply, run, pos);
    src->inline_pos = pos;
  }
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
  lock.unlock();
  stop_heartbeat();
  // The relay need not wait for us any more (credit window).
  if (conn_ != nullptr) {
    // The heartbeat thread has stopped: nothing else reads the table now.
    for (std::size_t i = 0; i < source_count_; ++i)
      send_ack(sources_[i].reply.c_str(), sources_[i].run, 0, /*left=*/true);
  }
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
  const char* msgno = nullptr;
  const char* reply = nullptr;
  std::uint32_t run = 0;
  std::uint64_t number = 0;
  if (conn_ != nullptr && natsMsgHeader_Get(msg, kMsgHeader, &msgno) == NATS_OK &&
      parse_msg_number(msgno, run, number)) {
    reply = natsMsg_GetReply(msg);  // null: the relay asks for no acks
  }
  const std::string_view subject = natsMsg_GetSubject(msg);
  const char* probe = nullptr;
  if (reply != nullptr && natsMsgHeader_Get(msg, kProbeHeader, &probe) == NATS_OK) {
    // A probe (credit window): what the relay published before it and we
    // did not get is lost; nothing is delivered (invariant 4).
    probes_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    const ContinuityResult r = checker_.check_probe(source, seq, msgno);
    const ContinuityStats& cs = checker_.stats();
    // relaxed (both): single-writer statistics.
    gaps_.store(cs.gaps, std::memory_order_relaxed);
    lost_.store(cs.lost, std::memory_order_relaxed);
    if (r.kind == Continuity::kGap) target_->on_gap(subject, r.lost);
    std::uint64_t pos = 0;
    const char* end = seq != nullptr ? seq + std::strlen(seq) : nullptr;
    if (seq != nullptr && std::from_chars(seq, end, pos).ptr == end) note_ack(reply, run, pos, /*now=*/true);
    return true;
  }
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
    r = checker_.check_headers(source, seq, count, from, msgno);
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
    // relaxed (both stores): a liveness hint for heartbeat_loop only.
    in_target_.store(true, std::memory_order_relaxed);
    if (count == nullptr) {
      const IngressTarget::Outcome o = target_->deliver(subject, body, stopping_);
      in_target_.store(false, std::memory_order_relaxed);
      if (o == IngressTarget::Outcome::kStopped) return false;
      if (o == IngressTarget::Outcome::kDelivered) delivered_.fetch_add(1, std::memory_order_relaxed);
    } else {
      const std::size_t skip = r.deliver() ? r.skip : 0;
      const std::span<const std::span<const std::byte>> rest(records_.data() + skip, records_.size() - skip);
      const std::size_t done = target_->deliver_batch(subject, rest, stopping_);
      in_target_.store(false, std::memory_order_relaxed);
      delivered_.fetch_add(done, std::memory_order_relaxed);
      // acquire: pairs with the release store in stop().
      if (done < rest.size() && stopping_.load(std::memory_order_acquire)) return false;
    }
  }
  if (reply != nullptr && seq != nullptr) {
    // Everything up to the message's last position is in the target (invariant 4).
    std::uint64_t pos = 0;
    const char* end = seq + std::strlen(seq);
    if (std::from_chars(seq, end, pos).ptr == end) {
      std::uint64_t k = 1;
      if (count != nullptr) (void)std::from_chars(count, count + std::strlen(count), k);
      note_ack(reply, run, pos + (k > 0 ? k - 1 : 0), /*now=*/false);
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
  s.acks = acks_.load(std::memory_order_relaxed);
  s.probes = probes_.load(std::memory_order_relaxed);
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
