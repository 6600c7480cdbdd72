// NatsIngress: one NATS subscription feeding a local target (a ring or a
// broker), with gap detection (docs/scale-out.md, "Ring ingress", "Broker
// ingress").
//
// Thread safety
//  * libnats delivers the subscription's messages on one thread of its own, in
//    order; handle() runs there and is the only user of the checker and the
//    target's delivery side, and the only writer of the counters (relaxed
//    atomics: statistics, each meaningful on its own).
//  * stats() from any thread (libnats' pending queries take the subscription's
//    own lock). stop() from any thread other than the delivery thread;
//    idempotent; the destructor stops.
//
// Invariants
//  1. received = delivered + duplicates + malformed + (target refusals:
//     oversize), in ring messages (a batch counts its records), once handle()
//     has returned for every message. With JetStream, duplicates are
//     delivered too (start_jetstream), and a message the target did not take
//     before stop is neither (it stays unacknowledged in the stream).
//  2. A gap is reported to the target (ring counter, broker loss notice)
//     before the message that revealed it is delivered.
//  3. After stop() returns, handle() is not running and never runs again: the
//     subscription is unsubscribed and libnats' completion callback has fired.
//  4. Credit window (core NATS; docs/scale-out.md, "Credit window"): a
//     message with a reply subject and a Ringcast-Msg is acknowledged to that
//     subject only after the target took it (or refused it for good), with
//     the last position handled: at once for a new reply subject or a probe,
//     then every kAckEvery positions on the delivery thread, and by the
//     heartbeat thread every kHeartbeat when the position moved, or every
//     kKeepalive while the delivery thread is inside the target (a full
//     blocking ring): the relay then knows we are alive and waits. Every
//     source (reply subject: a relay's route) we heard from gets its own
//     acks, keepalives and, at stop, "left" (up to kMaxAckSources; beyond
//     that the one heard from longest ago is forgotten, and its relay stops
//     waiting for us after its ack timeout).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "relay/jetstream_ingress.hpp"
#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

// Where an ingress puts what it receives. Called on the delivery thread only.
class IngressTarget {
 public:
  enum class Outcome : std::uint8_t { kDelivered, kRefused, kStopped };
  virtual ~IngressTarget() = default;
  // `lost` messages of `subject` never arrived (a gap); called before the
  // message that revealed it is delivered.
  virtual void on_gap(std::string_view subject, std::uint64_t lost) noexcept = 0;
  // Delivers one message; may block (a full blocking ring, a paced broker)
  // until `stopping` is set. refused: the target cannot take it (counted).
  virtual Outcome deliver(std::string_view subject, std::span<const std::byte> payload,
                          const std::atomic<bool>& stopping) noexcept = 0;
  // Delivers `payloads` (a batch's messages, in order), as deliver() would
  // one by one but cheaper; returns how many were delivered.
  virtual std::size_t deliver_batch(std::string_view subject, std::span<const std::span<const std::byte>> payloads,
                                    const std::atomic<bool>& stopping) noexcept = 0;
  // Target-specific counters into `s`.
  virtual void fill(NatsIngressStats& s) const = 0;
};

class NatsIngress {
 public:
  // Subscribes to `subject` on `conn` (which must outlive this object) with the
  // pending limits of `config`.
  static tl::expected<std::unique_ptr<NatsIngress>, std::string> start(natsConnection* conn, std::string subject,
                                                                       std::string target_name, bool to_ring,
                                                                       std::unique_ptr<IngressTarget> target,
                                                                       const NatsIngressConfig& config);
  // The same over JetStream (`--jetstream`): `target` is fed from the durable
  // consumer `durable` of config.stream, filtered on `subject`, and each
  // message is acknowledged once the target took it (relay/jetstream_ingress.hpp).
  // A message whose ring sequence is at or below its source's last is a late
  // retried publish there, not a redelivery: it is delivered, and counted as a
  // duplicate by the sequence check.
  static tl::expected<std::unique_ptr<NatsIngress>, std::string> start_jetstream(
      natsConnection* conn, std::string subject, std::string target_name, bool to_ring,
      std::unique_ptr<IngressTarget> target, const JetStreamConfig& config, std::string durable, LogFn log);
  NatsIngress(const NatsIngress&) = delete;
  NatsIngress& operator=(const NatsIngress&) = delete;
  ~NatsIngress();

  // Unsubscribes and waits (bounded by 5 s) until the delivery thread has left
  // handle() for good (invariant 3); a blocked delivery sees `stopping` first.
  void stop() noexcept;
  [[nodiscard]] NatsIngressStats stats() const;

 private:
  NatsIngress(std::string subject, std::string target_name, bool to_ring, std::unique_ptr<IngressTarget> target);
  static void on_message(natsConnection* nc, natsSubscription* sub, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
  // Checks and delivers one message (not destroying it). False when the
  // target stopped before taking it. `keep_duplicates`: deliver what the
  // sequence check calls a duplicate (JetStream).
  bool handle(natsMsg* msg, bool keep_duplicates) noexcept;

  const std::string subject_;
  const std::string target_name_;
  const bool to_ring_;
  const std::unique_ptr<IngressTarget> target_;
  natsSubscription* sub_ = nullptr;
  std::unique_ptr<JetStreamIngress> jetstream_;  // instead of sub_ with --jetstream

  static constexpr std::uint64_t kAckEvery = 1024;  // positions between inline acks
  static constexpr std::size_t kMaxAckSources = 16;
  static constexpr std::chrono::milliseconds kHeartbeat{20};
  static constexpr std::chrono::milliseconds kKeepalive{250};

  // Credit window acks (invariant 4). note_ack: delivery thread, after a
  // message of `reply` up to position `pos` was handled.
  void note_ack(const char* reply, std::uint32_t run, std::uint64_t pos, bool now) noexcept;
  void send_ack(const char* reply, std::uint32_t run, std::uint64_t pos, bool left = false) noexcept;
  void heartbeat_loop() noexcept;
  void start_heartbeat();
  void stop_heartbeat() noexcept;

  // Splits a batch body into records (docs/scale-out.md, "Batches"); false if
  // it is not exactly `count` well-formed records.
  bool split_batch(std::span<const std::byte> body, std::uint64_t count) noexcept;

  ContinuityChecker checker_;                        // delivery thread only
  std::vector<std::span<const std::byte>> records_;  // delivery thread only; keeps its capacity
  std::atomic<bool> stopping_{false};

  // Credit window (invariant 4). conn_ is null with JetStream (no acks).
  natsConnection* conn_ = nullptr;
  std::uint64_t ack_id_ = 0;  // this ingress's id in its acks (random)
  // One relay route we acknowledge to. reply and run: written only by the
  // delivery thread, under ack_mu_ (the heartbeat thread reads them under
  // it; the delivery thread, their only writer, reads them without it).
  struct AckSource {
    std::string reply;                                   // its inbox (capacity reserved at start)
    std::uint32_t run = 0;                               // its Ringcast-Msg run
    std::atomic<std::uint64_t> pos{0};                   // last position handled (delivery thread writes)
    std::uint64_t inline_pos = 0;                        // delivery thread: the last inline ack
    std::uint64_t noted = 0;                             // delivery thread: when last heard (a message count)
    std::uint64_t hb_sent = ~std::uint64_t{0};           // heartbeat thread: last position sent
    std::chrono::steady_clock::time_point hb_sent_at{};  // heartbeat thread
  };
  std::array<AckSource, kMaxAckSources> sources_;  // [0, source_count_) in use
  std::size_t source_count_ = 0;                   // written by the delivery thread under ack_mu_
  std::size_t last_source_ = 0;                    // delivery thread: where the last message's source was
  std::uint64_t noted_ = 0;                        // delivery thread: messages acknowledged so far
  // Finds or adds the source of `reply`/`run` (delivery thread); `fresh` when
  // it was added or its run changed; nullptr if out of memory for its subject.
  AckSource* source_of(const char* reply, std::uint32_t run, bool& fresh) noexcept;
  std::atomic<bool> in_target_{false};  // the delivery thread is inside the target
  std::atomic<std::uint64_t> acks_{0}, probes_{0};
  std::mutex ack_mu_;
  std::condition_variable ack_cv_;
  bool hb_stop_ = false;  // guarded by ack_mu_
  std::thread heartbeat_;

  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;     // guarded by done_mu_: libnats' completion callback fired
  bool stopped_ = false;  // guarded by done_mu_

  // Statistics (single writer: the delivery thread).
  std::atomic<std::uint64_t> received_{0}, delivered_{0}, malformed_{0};
  std::atomic<std::uint64_t> gaps_{0}, lost_{0}, restarts_{0}, duplicates_{0}, unsequenced_{0};
};

}  // namespace ringcast::relay
