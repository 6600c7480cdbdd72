#include "relay/sinks/nats_sink.hpp"

#include <cstring>
#include <random>

#include "relay/nats_connection.hpp"
#include "relay/sinks/credit_window.hpp"
#include "ringcast/layout.hpp"
#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

NatsSink::NatsSink(const RingRoute& route, NatsConnection& nats, const std::atomic<bool>& stop, std::size_t batch,
                   std::unique_ptr<CreditWindow> window)
    : nats_(nats),
      stop_(stop),
      name_(route.name),
      numbered_(!route.topic_in_payload),
      batch_(numbered_ && batch > 1 ? batch : 0),
      window_(numbered_ ? std::move(window) : nullptr) {
  batch_buf_.resize(batch_ * (1 + kMaxPayload));  // sized once (invariant 4)
}

NatsSink::~NatsSink() = default;

void NatsSink::open(const std::string& source) {
  source_ = source;
  if (!numbered_) return;
  // A new run: message numbers start over (Ringcast-Msg), and acks of the
  // previous ring (or relay run) no longer count.
  std::random_device rd;
  const std::uint32_t old = run_;
  do run_ = rd();
  while (run_ == 0 || run_ == old);
  msg_number_ = 0;
  if (window_) window_->reset(run_);
}

void NatsSink::put(const Staged& m) noexcept {
  if (batch_ > 0) {
    // A batch holds consecutive one-slot messages (docs/scale-out.md,
    // "Batches"); anything else flushes it and travels alone.
    const bool one_slot = m.from == m.seq && m.body.size() <= kMaxPayload;
    if (batch_count_ > 0 && (!one_slot || m.seq != batch_first_ + batch_count_)) flush();
    if (one_slot) {
      if (batch_count_ == 0) batch_first_ = m.seq;
      batch_buf_[batch_bytes_++] = static_cast<char>(m.body.size());
      std::memcpy(batch_buf_.data() + batch_bytes_, m.body.data(), m.body.size());
      batch_bytes_ += m.body.size();
      if (++batch_count_ == batch_) flush();
      return;
    }
  }
  if (numbered_) {
    if (window_ && !await_window(m.seq)) {
      ++counters_.nats_failed;  // stopping
      return;
    }
    const NatsConnection::Tag tag{window_ ? window_->inbox() : nullptr, run_, msg_number_};
    if (nats_.publish(m.subject, m.body, source_.c_str(), m.seq, 0, m.from, &tag)) {
      ++counters_.nats_published;
    } else {
      ++counters_.nats_failed;
    }
    sent(m.seq, 1);
    return;
  }
  // A topic is checked here, because the server would close the connection on
  // an invalid subject (a fixed subject was validated at start).
  if (is_valid_subject(m.channel) && nats_.publish(m.subject, m.body, source_.c_str(), m.seq, 0, m.from)) {
    ++counters_.nats_published;
  } else {
    ++counters_.nats_failed;
  }
}

void NatsSink::flush() noexcept {
  if (batch_count_ == 0) return;
  const std::uint64_t last = batch_first_ + batch_count_ - 1;
  if (window_ && !await_window(last)) {
    counters_.nats_failed += batch_count_;  // stopping
  } else {
    const NatsConnection::Tag tag{window_ ? window_->inbox() : nullptr, run_, msg_number_};
    if (nats_.publish(name_.c_str(), std::string_view(batch_buf_.data(), batch_bytes_), source_.c_str(), batch_first_,
                      batch_count_, kFromSeq, &tag)) {
      counters_.nats_published += batch_count_;
    } else {
      counters_.nats_failed += batch_count_;
    }
    sent(last, batch_count_);
  }
  batch_bytes_ = 0;
  batch_count_ = 0;
}

bool NatsSink::await_window(std::uint64_t seq) noexcept {
  if (window_->open(seq)) return true;
  try {
    waiting();  // the wait shows in the statistics at once
    return window_->wait(seq, stop_, [this] {
      const NatsConnection::Tag tag{window_->inbox(), run_, msg_number_};
      (void)nats_.publish_probe(name_.c_str(), source_.c_str(), last_sent_, tag);
    });
  } catch (...) {
    return window_->open(seq);  // a lock failed (system error): go on rather than stall
  }
}

void NatsSink::lapped(std::uint64_t missed) noexcept {
  // The messages skipped count as numbers never sent, so the ingress sees
  // them as a gap before the next message (positions: an upper bound on the
  // messages when the ring holds records).
  msg_number_ += missed;
}

void NatsSink::sent(std::uint64_t seq, std::uint64_t count) noexcept {
  // The number counts every message handed to NATS, refused ones too: a
  // refused one is lost, and the ingress counts it from the numbers.
  msg_number_ += count;
  last_sent_ = seq;
  if (window_) window_->published(seq);
}

void NatsSink::add_stats(RingStats& out) const {
  if (!window_) return;
  const CreditWindow::Stats w = window_->stats();
  out.window = true;
  out.window_size = window_->size();
  out.window_in_flight = w.in_flight;
  out.window_ingresses = w.ingresses;
  out.window_waits = w.waits;
  out.window_probes = w.probes;
  out.window_acks = w.acks;
  out.window_expired = w.expired;
  out.window_left = w.left;
  out.window_overflow = w.overflow;
}

}  // namespace ringcast::relay
