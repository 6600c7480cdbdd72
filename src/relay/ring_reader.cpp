#include "relay/ring_reader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

RingReader::RingReader(RingRoute route, std::vector<std::unique_ptr<Sink>> sinks, std::size_t batch,
                       std::chrono::milliseconds poll, LogFn log, const std::atomic<bool>& stop, FailFn fail)
    : route_(std::move(route)),
      sinks_(std::move(sinks)),
      keeps_views_(std::any_of(sinks_.begin(), sinks_.end(), [](const auto& s) { return s->keeps_views(); })),
      needs_positions_(std::any_of(sinks_.begin(), sinks_.end(), [](const auto& s) { return s->needs_positions(); })),
      batch_(batch == 0 ? 1 : batch),
      poll_(poll.count() <= 0 ? std::chrono::milliseconds(1) : poll),
      log_(std::move(log)),
      stop_(stop),
      fail_(std::move(fail)),
      host_(host_name()),
      max_staged_(std::min(batch_, Sink::kMaxStaged)) {
  // A sink waiting for its peer (a refusing `block` subscriber, a full credit
  // window) publishes the counters first: the ring fills meanwhile, and its
  // lag shows it.
  for (const auto& s : sinks_) s->on_wait([this] { flush_counters(); });
}

RingReader::~RingReader() = default;

void RingReader::log(LogLevel level, const std::string& text) const {
  log_(level, fmt::format("ring {}: {}", route_.path, text));
}

void RingReader::set_state(RingState s) noexcept {
  // relaxed: a statistic; single writer.
  state_.store(static_cast<std::uint8_t>(s), std::memory_order_relaxed);
}

void RingReader::nap(std::chrono::milliseconds d) const noexcept {
  const auto end = std::chrono::steady_clock::now() + d;
  while (!stopping() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(d, std::chrono::milliseconds(10)));
  }
}

void RingReader::run() noexcept {
  try {
    while (!stopping()) {
      if (!ring_) {
        if (!open_and_register()) {
          nap(poll_);
          continue;
        }
      }
      const Step step = relay_until_stopped();
      if (step == Step::kReopen) {
        unregister();
        ring_.reset();
        ++local_.reopens;
        flush_counters();
      } else if (step == Step::kFatal) {
        unregister();
        ring_.reset();
        flush_counters();
        set_state(RingState::kFailed);
        return;
      }
    }
    flush_counters();
    unregister();
    ring_.reset();
    set_state(RingState::kStopped);
  } catch (const std::exception& e) {
    // Only logging and setup allocate; a failure there stops this ring.
    unregister();
    set_state(RingState::kFailed);
    fail_(fmt::format("ring {}: {}", route_.path, e.what()));
  }
}

bool RingReader::open_and_register() {
  const auto wait_because = [&](const std::string& reason) {
    set_state(RingState::kWaitingForRing);
    if (reason != last_wait_reason_) {
      log(LogLevel::kInfo, fmt::format("waiting for the ring ({})", reason));
      last_wait_reason_ = reason;
    }
    return false;
  };
  struct stat before {};
  if (::stat(route_.path.c_str(), &before) != 0) return wait_because("no such file yet");
  auto ring = BroadcastRing::open(route_.path);
  // not_ready and a too-small file are what a creator still initialising looks
  // like; a wrong file at the path may be replaced later. Keep waiting on all.
  if (!ring) return wait_because(ring.error().message());
  struct stat after {};
  if (::stat(route_.path.c_str(), &after) != 0 || after.st_ino != before.st_ino || after.st_dev != before.st_dev) {
    return wait_because("the file changed while opening it");
  }
  // The route's start applies to a file we have not relayed before (ino_ is 0
  // before the first open; no file has inode 0).
  const bool same_file = after.st_ino == ino_ && after.st_dev == dev_;
  auto id = ring->register_consumer(same_file ? StartAt::kLatest : route_.start);
  if (!id) return wait_because(id.error().message());
  // The arena for this ring's messages (invariants 3 and 5); nothing is
  // staged between rings.
  assert(staged_count_ == 0);
  const std::size_t prefix = route_.name.size();
  const bool copies = needs_positions_ && ring->max_message() > kMaxPayload;
  const std::size_t arena =
      max_staged_ * (prefix + kMaxPayload) + (copies ? prefix + ring->max_message() : prefix + kMaxTopic + 1);
  if (arena_.size() != arena) {
    arena_.clear();
    arena_.shrink_to_fit();
    arena_.resize(arena);
  }
  arena_used_ = 0;
  one_by_one_ = copies;
  from_ = ring->position(*id);
  ring_.emplace(std::move(*ring));
  id_ = *id;
  ino_ = after.st_ino;
  dev_ = after.st_dev;
  source_ = format_source(host_, route_.path, dev_, ino_);
  for (const auto& s : sinks_) s->open(source_);
  last_wait_reason_.clear();
  // relaxed: statistics.
  consumer_id_.store(static_cast<std::int64_t>(id_), std::memory_order_relaxed);
  const RingStatus st = ring_->status();
  producer_alive_.store(st.producer_alive, std::memory_order_relaxed);
  log(LogLevel::kInfo,
      fmt::format("registered as consumer {} (capacity {}, max message {} bytes, {}{}); publishing to {}{}", id_,
                  ring_->capacity(), ring_->max_message(), ring_->lossy() ? "lossy" : "blocking",
                  ring_->wakeups() ? ", wakeups" : "", route_.name, route_.topic_in_payload ? "<topic>" : ""));
  if (st.producer_alive) {
    set_state(RingState::kRelaying);
    log(LogLevel::kInfo, fmt::format("producer pid {} is live; relaying", st.producer_pid));
  } else {
    set_state(RingState::kWaitingForProducer);
    log(LogLevel::kInfo, "no live producer; waiting for one");
  }
  return true;
}

void RingReader::unregister() noexcept {
  if (!ring_) return;
  // relaxed: statistics.
  if (consumer_id_.load(std::memory_order_relaxed) < 0) return;
  const Errc e = ring_->unregister_consumer(id_);
  consumer_id_.store(-1, std::memory_order_relaxed);
  try {
    if (e == Errc::ok) {
      log(LogLevel::kInfo, fmt::format("unregistered consumer {} (relayed {} messages)", id_, local_.relayed));
    } else {
      log(LogLevel::kWarning, fmt::format("unregistering consumer {}: {}", id_, to_string(e)));
    }
  } catch (...) {
    // Logging failed (out of memory); the consumer is unregistered regardless.
  }
}

RingReader::Taken RingReader::stage(std::span<const std::byte> payload) noexcept {
  std::string_view topic;
  std::string_view body(reinterpret_cast<const char*>(payload.data()), payload.size());
  if (route_.topic_in_payload) {
    const TopicView t = decode_topic_payload(payload);
    if (!t.ok) {
      ++local_.malformed;
      return {};
    }
    topic = t.topic;
    body = t.body;
  }
  ++local_.relayed;
  // Copy out: the payload may be a view of the ring, valid only until the
  // next receive, and a sink that keeps views reads the batch after the whole
  // drain. In topic mode the copy is prefix + topic + NUL + body: prefix +
  // payload bytes.
  const std::size_t head = route_.topic_in_payload ? route_.name.size() + topic.size() + 1 : 0;
  const std::size_t need = head + body.size();
  if (!keeps_views_) {
    arena_used_ = 0;  // nothing is kept: every message reuses the arena's start
  } else if (staged_count_ == max_staged_ || need > arena_.size() - arena_used_) {
    flush_sinks();
  }
  // A message longer than the arena (only where no sink needs positions):
  // its body stays in the ring and is flushed before drain's callback
  // returns (invariant 5).
  const bool copy_body = need <= arena_.size() - arena_used_;
  char* const start = arena_.data() + arena_used_;
  char* p = start;
  Taken t{true, !copy_body, {route_.name, route_.name.c_str(), body}};
  if (route_.topic_in_payload) {
    std::memcpy(p, route_.name.data(), route_.name.size());
    p += route_.name.size();
    std::memcpy(p, topic.data(), topic.size());
    p += topic.size();
    t.m.channel = std::string_view(start, static_cast<std::size_t>(p - start));
    t.m.subject = start;
    *p++ = '\0';
  }
  if (copy_body) {
    if (!body.empty()) std::memcpy(p, body.data(), body.size());
    t.m.body = std::string_view(p, body.size());
    p += body.size();
  }
  assert(p <= arena_.data() + arena_.size());
  if (keeps_views_) {
    arena_used_ = static_cast<std::size_t>(p - arena_.data());
    ++staged_count_;
  }
  return t;
}

void RingReader::put(const Taken& t, std::uint64_t from, std::uint64_t seq) noexcept {
  Staged m = t.m;
  m.from = from;
  m.seq = seq;
  for (const auto& s : sinks_) s->put(m);
  if (t.in_ring) flush_sinks();
}

void RingReader::note_lapped(std::uint64_t missed) noexcept {
  local_.lapped += missed;
  for (const auto& s : sinks_) s->lapped(missed);
}

void RingReader::take(std::span<const std::byte> payload) noexcept {
  const std::uint64_t seq = next_seq_++;  // malformed ones too: they are gaps downstream
  const Taken t = stage(payload);
  if (t.ok) put(t, seq, seq);
}

BatchResult RingReader::drain_one_by_one() noexcept {
  const auto on_message = [this](std::span<const std::byte> p) noexcept { staged_ = stage(p); };
  BatchResult total;
  while (total.count < batch_) {
    const BatchResult b = ring_->drain(id_, on_message, 1);
    if (b.count == 0) {
      if (b.status == Errc::lapped) {
        // What was skipped shows downstream as a gap before the next message.
        from_ = ring_->position(id_);
        total.status = Errc::lapped;
        total.missed = b.missed;
      } else if (total.count == 0) {
        total.status = b.status;
      }
      break;
    }
    const std::uint64_t end = ring_->position(id_);
    if (staged_.ok) put(staged_, from_, end - 1);
    from_ = end;  // a malformed message too: a gap downstream
    ++total.count;
  }
  return total;
}

void RingReader::flush_sinks() noexcept {
  for (const auto& s : sinks_) s->flush();
  arena_used_ = 0;
  staged_count_ = 0;
}

void RingReader::flush_counters() noexcept {
  // relaxed: single-writer statistics, each meaningful on its own.
  relayed_.store(local_.relayed, std::memory_order_relaxed);
  batches_.store(local_.batches, std::memory_order_relaxed);
  lapped_.store(local_.lapped, std::memory_order_relaxed);
  malformed_.store(local_.malformed, std::memory_order_relaxed);
  reopens_.store(local_.reopens, std::memory_order_relaxed);
  SinkCounters sum;
  for (const auto& s : sinks_) {
    const SinkCounters& c = s->counters();  // this thread's own
    sum.deliveries += c.deliveries;
    sum.refused += c.refused;
    sum.nats_published += c.nats_published;
    sum.nats_failed += c.nats_failed;
  }
  deliveries_.store(sum.deliveries, std::memory_order_relaxed);
  refused_.store(sum.refused, std::memory_order_relaxed);
  nats_published_.store(sum.nats_published, std::memory_order_relaxed);
  nats_failed_.store(sum.nats_failed, std::memory_order_relaxed);
  if (ring_) lag_.store(ring_->lag(id_), std::memory_order_relaxed);
}

RingReader::Step RingReader::relay_until_stopped() {
  const auto on_message = [this](std::span<const std::byte> p) noexcept { take(p); };
  while (!stopping()) {
    const std::uint64_t lapped_before = local_.lapped;
    // One cursor publish per batch (per message, one_by_one_: invariant 6);
    // on a lossy ring a lap stops the batch and reports what it skipped (the
    // cursor moved to the oldest message still there).
    BatchResult b;
    if (one_by_one_) {
      b = drain_one_by_one();
    } else {
      next_seq_ = ring_->position(id_);
      b = ring_->drain(id_, on_message, batch_);
    }
    flush_sinks();  // invariant 4
    const std::size_t got = b.count;
    Errc status = b.status;
    if (status == Errc::lapped) {
      note_lapped(b.missed);
      status = Errc::ok;
    }
    if (got > 0 || local_.lapped != lapped_before) {
      if (got > 0) ++local_.batches;
      // relaxed: the state is a statistic; only this thread writes it.
      if (state_.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(RingState::kRelaying)) {
        set_state(RingState::kRelaying);
      }
      flush_counters();
      continue;
    }
    if (status == Errc::ok) continue;
    const Step step = handle_status(status);
    if (step != Step::kAgain) return step;
  }
  return Step::kAgain;
}

RingReader::Step RingReader::handle_status(Errc status) {
  switch (status) {
    case Errc::empty:
    case Errc::stalled: {
      // Nothing to read: wait for one message (the default wait: spin while
      // it pays, then sleep on the ring's futex), at most poll_ so
      // housekeeping and stop run.
      // A message longer than the buffer stays in the ring (buffer_too_small)
      // for the next drain.
      alignas(8) std::byte buf[kMaxPayload];
      const RecvResult r = ring_->recv_wait(id_, buf, {poll_, IdleStrategy::kSpinThenBlock});
      if (r.status == Errc::buffer_too_small) return Step::kAgain;
      if (r.status == Errc::ok) {
        const std::uint64_t end = ring_->position(id_);  // the cursor is past the message received
        const Taken t = stage(std::span<const std::byte>(buf, r.length));
        if (t.ok) put(t, one_by_one_ ? from_ : end - 1, end - 1);
        from_ = end;
        flush_sinks();
        ++local_.batches;
        set_state(RingState::kRelaying);
        flush_counters();
        return Step::kAgain;
      }
      if (r.status == Errc::lapped) {
        note_lapped(r.missed);
        from_ = ring_->position(id_);  // a gap downstream (invariant 6)
        flush_counters();
        return Step::kAgain;
      }
      if (r.status == Errc::timed_out || r.status == Errc::empty || r.status == Errc::stalled) {
        return housekeeping();
      }
      return handle_status(r.status);
    }
    case Errc::producer_dead:
      // A producer died mid-write. The next producer repairs the slot on claim.
      // relaxed: statistic; single writer.
      if (state_.load(std::memory_order_relaxed) != static_cast<std::uint8_t>(RingState::kWaitingForProducer)) {
        set_state(RingState::kWaitingForProducer);
        log(LogLevel::kWarning, "producer died mid-message; waiting for the next producer");
      }
      nap(poll_);
      return housekeeping();
    case Errc::invalid_consumer: {
      // Our entry was freed behind our back (it cannot be reaped while we live,
      // but `ringcast rm`/manual tools exist). Register again.
      log(LogLevel::kWarning, fmt::format("consumer {} is no longer registered; registering again", id_));
      auto id = ring_->register_consumer();
      if (!id) {
        log(LogLevel::kWarning, fmt::format("registering again: {}", id.error().message()));
        consumer_id_.store(-1, std::memory_order_relaxed);  // relaxed: statistic
        return Step::kReopen;
      }
      id_ = *id;
      from_ = ring_->position(id_);  // what passed meanwhile is a gap downstream
      consumer_id_.store(static_cast<std::int64_t>(id_), std::memory_order_relaxed);  // relaxed: statistic
      return Step::kAgain;
    }
    case Errc::layout_mismatch:
      fail_(fmt::format("ring {}: slot {} is corrupt (layout_mismatch); stopping this ring", route_.path,
                        ring_->producer_position()));
      return Step::kFatal;
    default:
      fail_(fmt::format("ring {}: unexpected receive status {}; stopping this ring", route_.path, to_string(status)));
      return Step::kFatal;
  }
}

RingReader::Step RingReader::housekeeping() {
  flush_counters();
  const RingStatus st = ring_->status();
  // relaxed: statistics.
  producer_alive_.store(st.producer_alive, std::memory_order_relaxed);
  const auto state = static_cast<RingState>(state_.load(std::memory_order_relaxed));
  if (!st.producer_alive && state == RingState::kRelaying) {
    set_state(RingState::kWaitingForProducer);
    log(LogLevel::kInfo, "producer is gone; waiting for the next one");
  } else if (st.producer_alive && state == RingState::kWaitingForProducer) {
    set_state(RingState::kRelaying);
    log(LogLevel::kInfo, fmt::format("producer pid {} is live; relaying", st.producer_pid));
  }
  struct stat now {};
  if (::stat(route_.path.c_str(), &now) == 0 && (now.st_ino != ino_ || now.st_dev != dev_)) {
    log(LogLevel::kInfo, "the ring file was replaced; reopening");
    return Step::kReopen;
  }
  return Step::kAgain;
}

RingStats RingReader::stats() const {
  RingStats s;
  s.path = route_.path;
  s.name = route_.name;
  s.topic_in_payload = route_.topic_in_payload;
  // relaxed: statistics, each read on its own.
  s.state = static_cast<RingState>(state_.load(std::memory_order_relaxed));
  s.consumer_id = consumer_id_.load(std::memory_order_relaxed);
  s.producer_alive = producer_alive_.load(std::memory_order_relaxed);
  s.relayed = relayed_.load(std::memory_order_relaxed);
  s.batches = batches_.load(std::memory_order_relaxed);
  s.lag = lag_.load(std::memory_order_relaxed);
  s.lapped = lapped_.load(std::memory_order_relaxed);
  s.malformed = malformed_.load(std::memory_order_relaxed);
  s.deliveries = deliveries_.load(std::memory_order_relaxed);
  s.refused = refused_.load(std::memory_order_relaxed);
  s.nats_published = nats_published_.load(std::memory_order_relaxed);
  s.nats_failed = nats_failed_.load(std::memory_order_relaxed);
  s.reopens = reopens_.load(std::memory_order_relaxed);
  for (const auto& sink : sinks_) sink->add_stats(s);
  return s;
}

}  // namespace ringcast::relay
