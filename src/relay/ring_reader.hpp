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
//  2. relayed_ + malformed_ = messages taken from the ring; lapped_ = messages a
//     lossy ring overwrote before they were taken (the ring's `missed`).
//  3. The hot loop (drain -> publish_one) neither allocates nor locks in the
//     relay's own code: the topic channel buffer is reserved at construction.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class NatsSink;

class RingReader {
 public:
  using FailFn = std::function<void(const std::string&)>;
  RingReader(RingRoute route, broker::Broker* broker, NatsSink* nats, std::size_t batch,
             std::chrono::milliseconds poll, LogFn log, const std::atomic<bool>& stop, FailFn fail);
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;

  void run() noexcept;
  [[nodiscard]] RingStats stats() const;

 private:
  // Local (thread-private) counters, published to the atomics once per batch.
  struct Counters {
    std::uint64_t relayed = 0, batches = 0, lapped = 0, malformed = 0, deliveries = 0;
    std::uint64_t nats_published = 0, nats_failed = 0, reopens = 0;
  };

  enum class Step : std::uint8_t { again, reopen, fatal };

  bool open_and_register();
  Step relay_until_stopped();
  Step handle_status(Errc status);
  Step housekeeping();
  void unregister() noexcept;
  void publish_one(std::span<const std::byte> payload) noexcept;
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
  NatsSink* const nats_;
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
  std::string channel_;          // topic mode: prefix + topic, capacity reserved once
  Counters local_;
  std::string last_wait_reason_; // logged once per distinct reason while waiting

  // Published statistics (single writer: run()).
  std::atomic<std::uint8_t> state_{static_cast<std::uint8_t>(RingState::waiting_for_ring)};
  std::atomic<std::int64_t> consumer_id_{-1};
  std::atomic<bool> producer_alive_{false};
  std::atomic<std::uint64_t> relayed_{0}, batches_{0}, lag_{0}, lapped_{0}, malformed_{0}, deliveries_{0};
  std::atomic<std::uint64_t> nats_published_{0}, nats_failed_{0}, reopens_{0};
};

}  // namespace ringcast::relay
