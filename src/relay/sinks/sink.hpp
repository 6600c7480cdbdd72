// Sink: one output of a ring route (the embedded broker, core NATS or a
// JetStream stream). The ring reader (relay/ring_reader.hpp) reads and stages
// each ring message, then hands it to every sink of its route, in ring order.
//
// Thread safety
//  * Every member but add_stats() is called by the reader's thread only (one
//    reader per sink); add_stats() may be called from any thread.
//
// Contract between the reader and its sinks
//  1. open(source) comes before the first put() of every opened ring (and
//     again when the ring file is replaced).
//  2. put() receives the messages taken from the ring in ring order. Its views
//     stay valid until put() returns, or, for a sink that keeps_views(), until
//     the next flush() returns.
//  3. The reader calls flush() after every receive from the ring, and before it
//     reuses the staging area behind the views: after at most kMaxStaged put()s.
//  4. put(), flush() and lapped() neither allocate nor throw in the relay's own
//     code; a sink may wait for its peer there (a `block` subscriber, the
//     credit window, JetStream acks), calling waiting() first, and stops
//     waiting once the relay's stop flag is set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

// A ring message as a sink sees it.
struct Staged {
  std::string_view channel;       // the route's name, or in topic mode prefix + topic
  const char* subject = nullptr;  // channel, NUL-terminated (a NATS subject)
  std::string_view body;
  // Ring positions (ringcast/relay/continuity.hpp): `seq` is the message's last
  // slot, `from` its first position not accounted for yet (the slot after the
  // previous message taken, paddings included).
  std::uint64_t from = 0;
  std::uint64_t seq = 0;
};

// What a sink counts (reader thread; the reader publishes them with its own).
struct SinkCounters {
  std::uint64_t deliveries = 0;      // broker: subscriptions reached
  std::uint64_t refused = 0;         // broker: refusals by a `block` subscriber, each retried
  std::uint64_t nats_published = 0;  // NATS: messages accepted by libnats
  std::uint64_t nats_failed = 0;     // NATS: messages refused (or not handed over: stopping)
};

class Sink {
 public:
  // Most put()s between two flush()es (contract 3).
  static constexpr std::size_t kMaxStaged = 1024;

  Sink() = default;
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  virtual ~Sink() = default;

  // A ring was opened; `source` is its Ringcast-Source value.
  virtual void open(const std::string& source) = 0;
  // One message (contract 2).
  virtual void put(const Staged& m) noexcept = 0;
  // Delivers what put() left pending (contract 3).
  virtual void flush() noexcept = 0;
  // The ring lapped the reader: `missed` positions will never be put().
  virtual void lapped(std::uint64_t missed) noexcept { (void)missed; }
  // True when put()'s views must stay valid until flush() (contract 2).
  [[nodiscard]] virtual bool keeps_views() const noexcept { return false; }
  // True when put()'s positions must be exact for every message (NATS headers
  // carry them): the reader then takes one message per drain from a ring
  // whose messages may span several slots.
  [[nodiscard]] virtual bool needs_positions() const noexcept { return false; }
  // Any thread: fills what only this sink knows (the credit window's fields).
  virtual void add_stats(RingStats& out) const { (void)out; }

  [[nodiscard]] const SinkCounters& counters() const noexcept { return counters_; }
  // Set once by the reader, before its thread runs: called on that thread when
  // this sink is about to wait for its peer, so the wait shows in the
  // statistics at once.
  void on_wait(std::function<void()> f) { on_wait_ = std::move(f); }

 protected:
  void waiting() const {
    if (on_wait_) on_wait_();
  }
  SinkCounters counters_;

 private:
  std::function<void()> on_wait_;
};

}  // namespace ringcast::relay
