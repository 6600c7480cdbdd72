// RingReader: one ring's consumer inside the relay. Runs on its own thread.
//
// Thread safety
//  * run() is the thread body and the only user of the ring handle and of its
//    consumer id (the ring's one-thread-per-id REQUIRES).
//  * stats() may be called from any thread: every field it reads is an atomic
//    written only by run() (single writer, relaxed: they are statistics, and
//    each is meaningful on its own), or a const string.
//
// Invariants
//  1. run() returns only after unregistering its consumer (if it registered).
//  2. relayed_ + malformed_ = messages taken from the ring; lapped_ = positions
//     (slots) a lossy ring overwrote before they were taken (the ring's
//     `missed`: messages, on a ring of one slot per message).
//  3. The hot loop (drain -> take -> publish_pending) neither allocates
//     nor locks in the relay's own code: the pending-batch buffers are sized
//     when the ring is opened (for its max_message) and never grow while it
//     is read.
//  4. Every batch taken from the ring reaches the broker with one
//     Broker::publish(span) call, in ring order, before the counters are
//     flushed or the next batch is taken (a batch of more than kMaxPending
//     messages, or of more bytes than the arena holds, takes several calls, in
//     order; while a `block` subscriber refuses, the broker holds the call
//     until the refused message and the rest are accepted, in order, before
//     anything more is taken). NATS
//     gets each message as it is taken.
//  5. Each pending Message views route_.name, its own copy in arena_ (never
//     resized while messages are pending), or, for a message too long for the
//     arena (broker only), the ring's own bytes, published before drain's
//     callback returns; so the views stay valid until publish_pending().
//  6. NATS sequence headers (ringcast/relay/continuity.hpp) name ring
//     positions: Ringcast-Seq is a message's last slot and Ringcast-From its
//     first position not accounted for yet (the slot after the previous
//     message taken, paddings included). On a ring of one slot per message
//     they are the same and drain's batches count them; on any other ring a
//     NATS route reads one message per drain, so the cursor before and after
//     it gives them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/message.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class NatsConnection;
class JetStreamPublisher;
class CreditWindow;

class RingReader {
 public:
  using FailFn = std::function<void(const std::string&)>;
  // `jetstream`, when not null, publishes to NATS instead of `nats`'s core
  // publish (same connection; `--jetstream`; one JetStream message per ring
  // message). `nats_batch`: ring messages per core NATS message (NatsConfig::batch).
  // `window`, when not null (core NATS, fixed subject), holds every NATS
  // publish until the credit window lets it go (sinks/credit_window.hpp): the
  // reader then stops taking from the ring.
  RingReader(RingRoute route, broker::Broker* broker, NatsConnection* nats, JetStreamPublisher* jetstream,
             std::size_t batch, std::chrono::milliseconds poll, LogFn log, const std::atomic<bool>& stop, FailFn fail,
             std::size_t nats_batch = 1, std::unique_ptr<CreditWindow> window = nullptr);
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader();

  void run() noexcept;
  [[nodiscard]] RingStats stats() const;

 private:
  // Local (thread-private) counters, published to the atomics once per batch.
  struct Counters {
    std::uint64_t relayed = 0, batches = 0, lapped = 0, malformed = 0, deliveries = 0, refused = 0;
    std::uint64_t nats_published = 0, nats_failed = 0, reopens = 0;
  };

  // Most messages held for one broker call; bounds the buffer when --batch is huge.
  static constexpr std::size_t kMaxPending = 1024;

  enum class Step : std::uint8_t { kAgain, kReopen, kFatal };

  bool open_and_register();
  Step relay_until_stopped();
  Step handle_status(Errc status);
  Step housekeeping();
  void unregister() noexcept;
  // A ring message as the sinks see it: its channel (NUL-terminated at
  // `subject` for NATS) and body, in arena_ or, see invariant 5, in the ring.
  struct Taken {
    bool ok = false;  // false: malformed (topic mode), not published
    std::string_view channel;
    const char* subject = nullptr;
    std::string_view body;
  };
  // Copies one ring message into the pending batch (or counts it malformed).
  // Publishes the pending batch first if it is full or the message does not
  // fit in what is left of the arena.
  Taken stage(std::span<const std::byte> payload) noexcept;
  // Hands a staged message to NATS as ring positions from .. seq (invariant 6):
  // into the NATS batch, or published alone.
  void forward(const Taken& t, std::uint64_t from, std::uint64_t seq) noexcept;
  // stage + forward of a message on a ring of one slot per message (or
  // without NATS), numbered from next_seq_.
  void take(std::span<const std::byte> payload) noexcept;
  // Up to batch_ messages, one drain each, forwarding each with its positions
  // (invariant 6). Statuses as drain's.
  BatchResult drain_one_by_one() noexcept;
  // Publishes the pending batch to the broker with one call, adds up the
  // deliveries and empties the batch. No-op when nothing is pending. While the
  // broker paces publishers, that call waits (up to its max_stall). When a
  // `block` subscriber refuses a message, the call waits until it and the rest
  // are accepted, in order, or the relay stops (kUntilAccepted): nothing more
  // is taken from the ring meanwhile, so the ring's producer meets `full` (or, on
  // a lossy ring, laps the relay as documented).
  void publish_pending() noexcept;
  // PublishHold::on_refused for publish_pending, on this reader's thread: counts
  // the refusal and publishes the counters (the lag grows while it waits).
  static void count_refused(void* self) noexcept;
  // Publishes the NATS batch, if any, as one NATS message.
  void flush_nats_batch() noexcept;
  // Credit window: waits until position `seq` may be published (probing
  // while no ack arrives). False: stopping.
  bool await_window(std::uint64_t seq) noexcept;
  // After a core NATS publish of positions .. seq holding `count` messages.
  void sent(std::uint64_t seq, std::uint64_t count) noexcept;
  // The ring lapped this reader by `missed` positions: counted, and numbered
  // as sent so that the ingress sees the gap.
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
  broker::Broker* const broker_;
  NatsConnection* const nats_;
  JetStreamPublisher* const jetstream_;
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
  // NATS sequence headers (invariant 6): this ring file's Ringcast-Source
  // value, set on open; the ring position of the next message take() sees,
  // set from the cursor before every drain (rings of one slot per message);
  // and, one message at a time, the first position the next message accounts
  // for.
  const std::string host_;
  std::string source_;
  std::uint64_t next_seq_ = 0;
  bool one_by_one_ = false;  // a NATS route on a ring whose messages may take several slots
  std::uint64_t from_ = 0;
  Taken staged_;  // drain_one_by_one: the message its drain took
  // NATS batch (NatsConfig::batch > 1, fixed-subject rings): records of
  // [length byte][payload] for one-slot ring messages batch_first_ .. +
  // batch_count_ - 1. Sized once (batch * (1 + kMaxPayload)); published when
  // full, before a message that cannot join it, and after every receive
  // (flush_nats_batch).
  const std::size_t nats_batch_;
  // Credit window (null: none). Reader thread: Ringcast-Msg numbering
  // (core NATS, fixed subject: numbered_), this ring open's run and the
  // number of the next message published, and the last position published.
  const std::unique_ptr<CreditWindow> window_;
  const bool numbered_;
  std::uint32_t run_ = 0;
  std::uint64_t msg_number_ = 0;
  std::uint64_t last_sent_ = 0;
  std::vector<char> batch_buf_;
  std::size_t batch_bytes_ = 0;
  std::uint64_t batch_first_ = 0;
  std::uint64_t batch_count_ = 0;
  // Pending batch (invariants 3-5). The arena holds the pending messages'
  // copies one after another: the body, or in topic mode prefix + topic + NUL
  // + body, which is prefix + payload bytes because the topic's length byte
  // is not copied. Sized on open: max_pending_ messages of up to 52 bytes,
  // plus one of max_message when NATS needs every message copied (invariant
  // 6), else room for a long message's channel.
  const std::size_t max_pending_;  // min(batch_, kMaxPending)
  std::vector<char> arena_;
  std::size_t arena_used_ = 0;
  std::vector<broker::Message> pending_;  // capacity max_pending_
  std::vector<std::size_t> receivers_;    // max_pending_ entries: per-message deliveries
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
