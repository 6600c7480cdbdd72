// NatsSink: a ring route's output to core NATS (docs/scale-out.md), through
// the process's NatsConnection, with its credit window when it has one.
//
// A fixed-subject route numbers its messages (Ringcast-Msg: <run>.<msg>, a
// new run every open()) and, with a credit window, publishes position p only
// once the window lets it (invariant 3); with NatsConfig::batch > 1 it packs
// consecutive one-slot messages into one NATS message. A topic route
// publishes each message on its own subject, unnumbered.
//
// Invariants
//  1. Every message put() is published (or counted failed) before put()
//     returns, or joins the batch, which is published when full, before a
//     message that cannot join it and at every flush(); so in ring order.
//  2. The message number counts every message handed to NATS, refused ones
//     too, and the positions a lap skipped (lapped()), so the ingress sees
//     what never arrived as a gap.
//  3. With a credit window, nothing past the window is published: put() and
//     flush() wait (calling waiting(), probing while no ack comes) until it
//     opens or the relay stops (then the message counts failed).
//  4. No allocation after construction: the batch buffer is sized once
//     (batch * (1 + kMaxPayload)); a publish costs libnats' message object.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "relay/sinks/sink.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class NatsConnection;
class CreditWindow;

class NatsSink final : public Sink {
 public:
  // `nats` and `stop` (the relay's stop flag) must outlive this sink.
  // `batch`: ring messages per NATS message (NatsConfig::batch; fixed
  // subjects only). `window`, when not null, is the route's credit window
  // (fixed subjects only; docs/scale-out.md, "Credit window").
  NatsSink(const RingRoute& route, NatsConnection& nats, const std::atomic<bool>& stop, std::size_t batch,
           std::unique_ptr<CreditWindow> window);
  ~NatsSink() override;

  // A new run: message numbers start over, and the window forgets the
  // previous ring's acks.
  void open(const std::string& source) override;
  void put(const Staged& m) noexcept override;
  // Publishes the batch, if any, as one NATS message.
  void flush() noexcept override;
  void lapped(std::uint64_t missed) noexcept override;
  [[nodiscard]] bool needs_positions() const noexcept override { return true; }
  void add_stats(RingStats& out) const override;

 private:
  // Waits until position `seq` may be published (invariant 3). False: stopping.
  bool await_window(std::uint64_t seq) noexcept;
  // After a publish of positions .. seq holding `count` messages.
  void sent(std::uint64_t seq, std::uint64_t count) noexcept;

  NatsConnection& nats_;
  const std::atomic<bool>& stop_;
  const std::string name_;   // the route's subject, or its prefix in topic mode
  const bool numbered_;      // fixed subject: Ringcast-Msg, batches and the window apply
  const std::size_t batch_;  // ring messages per NATS message; 0: no batches
  const std::unique_ptr<CreditWindow> window_;
  std::string source_;
  // This ring open's run, the number of the next message published, and the
  // last position published (probes carry it).
  std::uint32_t run_ = 0;
  std::uint64_t msg_number_ = 0;
  std::uint64_t last_sent_ = 0;
  // The batch: records of [length byte][payload] for one-slot ring messages
  // batch_first_ .. batch_first_ + batch_count_ - 1 (docs/scale-out.md, "Batches").
  std::vector<char> batch_buf_;
  std::size_t batch_bytes_ = 0;
  std::uint64_t batch_first_ = 0;
  std::uint64_t batch_count_ = 0;
};

}  // namespace ringcast::relay
