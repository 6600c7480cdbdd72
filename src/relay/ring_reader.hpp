// RingReader: one ring's consumer inside the relay. Runs on its own thread.
// It reads and stages; its route's outputs are sinks (relay/sinks/sink.hpp:
// the embedded broker, core NATS with its credit window, or JetStream).
//
// Thread safety
//  * run() is the thread body and the only user of the ring handle and of its
//    consumer id (the ring's one-thread-per-id REQUIRES), and of the sinks
//    (but their add_stats()).
//  * stats() may be called from any thread: every field it reads is an atomic
//    written only by run() (single writer, relaxed: they are statistics, and
//    each is meaningful on its own), or a const string, or a sink's add_stats().
//
// Invariants
//  1. run() returns only after unregistering its consumer (if it registered).
//  2. relayed_ + malformed_ = messages taken from the ring; lapped_ = positions
//     (slots) a lossy ring overwrote before they were taken (the ring's
//     `missed`: messages, on a ring of one slot per message).
//  3. The hot loop (drain -> take -> flush_sinks) neither allocates nor locks
//     in the relay's own code: the staging area is sized when the ring is
//     opened (for its max_message) and never grows while it is read.
//  4. Every message taken from the ring is put() to every sink in ring order,
//     and every sink is flushed after each receive (sink.hpp, contract 3),
//     before the counters are published or the next batch is taken. A sink
//     that waits for its peer (a `block` subscriber, the credit window)
//     holds the reader there: nothing more is taken from the ring meanwhile.
//  5. Each staged message views route_.name, its own copy in arena_ (never
//     reset while a sink that keeps_views() may still read it: at most
//     max_staged_ messages between flushes), or, for a message too long for
//     the arena (no sink needs_positions()), the ring's own bytes, flushed
//     before drain's callback returns.
//  6. Positions (Staged::from, seq; ringcast/relay/continuity.hpp): seq is a
//     message's last slot and from its first position not accounted for yet
//     (the slot after the previous message taken, paddings included). On a
//     ring of one slot per message they are the same and drain's batches
//     count them; on any other ring, a route with a sink that
//     needs_positions() reads one message per drain, so the cursor before
//     and after it gives them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "relay/sinks/sink.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class RingReader {
 public:
  using FailFn = std::function<void(const std::string&)>;
  // `sinks`: the route's outputs, each put() every message in this order
  // (NATS before the broker: a flush publishes the NATS batch first).
  // `batch`: most messages one drain takes from the ring.
  RingReader(RingRoute route, std::vector<std::unique_ptr<Sink>> sinks, std::size_t batch,
             std::chrono::milliseconds poll, LogFn log, const std::atomic<bool>& stop, FailFn fail);
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader();

  void run() noexcept;
  [[nodiscard]] RingStats stats() const;

 private:
  // Local (thread-private) counters, published to the atomics once per batch.
  struct Counters {
    std::uint64_t relayed = 0, batches = 0, lapped = 0, malformed = 0, reopens = 0;
  };

  enum class Step : std::uint8_t { kAgain, kReopen, kFatal };

  bool open_and_register();
  Step relay_until_stopped();
  Step handle_status(Errc status);
  Step housekeeping();
  void unregister() noexcept;
  // A ring message staged for the sinks: `ok` false when it is malformed
  // (topic mode; not put); `in_ring` when its body views the ring's own bytes
  // (invariant 5), so the sinks are flushed as soon as it is put.
  struct Taken {
    bool ok = false;
    bool in_ring = false;
    Staged m;
  };
  // Copies one ring message into the staging area (or counts it malformed).
  // Flushes the sinks first if one keeps its views and the area is full.
  Taken stage(std::span<const std::byte> payload) noexcept;
  // Hands a staged message to every sink as ring positions from .. seq
  // (invariant 6).
  void put(const Taken& t, std::uint64_t from, std::uint64_t seq) noexcept;
  // stage + put of a message on a ring of one slot per message (or without a
  // sink that needs positions), numbered from next_seq_.
  void take(std::span<const std::byte> payload) noexcept;
  // Up to batch_ messages, one drain each, putting each with its positions
  // (invariant 6). Statuses as drain's.
  BatchResult drain_one_by_one() noexcept;
  // Flushes every sink and empties the staging area (invariant 4).
  void flush_sinks() noexcept;
  // The ring lapped this reader by `missed` positions: counted, and told to
  // the sinks.
  void note_lapped(std::uint64_t missed) noexcept;
  void flush_counters() noexcept;
  void set_state(RingState s) noexcept;
  [[nodiscard]] bool stopping() const noexcept {
    // acquire: pairs with the release store in Relay::stop(); nothing is
    // published with it, but it keeps the flag's meaning obvious.
    return stop_.load(std::memory_order_acquire);
  }
  // Sleeps up to `d`, in slices short enough to notice stop.
  void nap(std::chrono::milliseconds d) const noexcept;
  void log(LogLevel level, const std::string& text) const;

  const RingRoute route_;
  const std::vector<std::unique_ptr<Sink>> sinks_;
  const bool keeps_views_;      // some sink keeps_views()
  const bool needs_positions_;  // some sink needs_positions()
  const std::size_t batch_;
  const std::chrono::milliseconds poll_;
  const LogFn log_;
  const std::atomic<bool>& stop_;
  const FailFn fail_;

  // Reader-thread state.
  std::optional<BroadcastRing> ring_;
  ConsumerId id_ = 0;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  // Positions (invariant 6): this ring file's Ringcast-Source value, set on
  // open; the ring position of the next message take() sees, set from the
  // cursor before every drain (rings of one slot per message); and, one
  // message at a time, the first position the next message accounts for.
  const std::string host_;
  std::string source_;
  std::uint64_t next_seq_ = 0;
  bool one_by_one_ = false;  // a route that needs positions, on a ring whose messages may take several slots
  std::uint64_t from_ = 0;
  Taken staged_;  // drain_one_by_one: the message its drain took
  // Staging area (invariants 3-5). The arena holds the staged messages'
  // copies one after another: the body, or in topic mode prefix + topic + NUL
  // + body, which is prefix + payload bytes because the topic's length byte
  // is not copied. Sized on open: max_staged_ messages of up to 52 bytes,
  // plus one of max_message when every message must be copied (one_by_one_),
  // else room for a long message's channel.
  const std::size_t max_staged_;  // min(batch_, Sink::kMaxStaged)
  std::vector<char> arena_;
  std::size_t arena_used_ = 0;
  std::size_t staged_count_ = 0;  // messages in the arena a sink may still read
  Counters local_;
  std::string last_wait_reason_;  // logged once per distinct reason while waiting

  // Published statistics (single writer: run()).
  std::atomic<std::uint8_t> state_{static_cast<std::uint8_t>(RingState::kWaitingForRing)};
  std::atomic<std::int64_t> consumer_id_{-1};
  std::atomic<bool> producer_alive_{false};
  std::atomic<std::uint64_t> relayed_{0}, batches_{0}, lag_{0}, lapped_{0}, malformed_{0}, deliveries_{0}, refused_{0};
  std::atomic<std::uint64_t> nats_published_{0}, nats_failed_{0}, reopens_{0};
};

}  // namespace ringcast::relay
