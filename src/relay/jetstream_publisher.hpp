// JetStreamPublisher: the relay's at-least-once publisher into a JetStream
// stream (`--jetstream STREAM`, docs/scale-out.md "JetStream"), over the
// NatsConnection's connection.
//
// Thread safety
//  * publish() may be called from any number of reader threads at once
//    (js_PublishMsgAsync is thread-safe).
//  * libnats calls on_ack() on its own thread for every publish's outcome; it
//    touches only the counters (invariant 5) and, on failure, the mu_-guarded
//    retry queue. The retry thread is the only one that resubmits failed messages.
//  * stats() from any thread; close() once, after every publish() returned.
//
// Invariants
//  1. Every message publish() hands to libnats ends in exactly one of acked_,
//     failed_ or "pending" (in libnats' ack table or in retries_), so
//     published_ = acked_ + failed_ + pending; nothing leaves silently.
//  2. A failed attempt (server error, no responders, ack timeout) goes back to
//     retries_ until it is acked or has made max_attempts attempts; the same
//     natsMsg, so its Nats-Msg-Id is unchanged and a copy the server did store
//     is dropped as a duplicate within the stream's duplicate window.
//  3. At most max_pending publishes await an ack; publish() waits (counted as
//     a stall) rather than exceed it, so a slow or absent server slows the
//     reader, and the ring's own policy (block or lap) applies behind it.
//  4. Ack timeout: when publishes are outstanding and no ack (nor give-up)
//     has come for ack_timeout, the retry thread takes every unacked message
//     back from libnats and retries it (invariant 2). One watchdog instead of
//     a deadline per message: libnats 3.4 keeps per-message deadlines in a
//     list it walks on every publish.
//  5. on_ack's last use of the publisher is its acked_ or failed_ increment
//     (release; a retry's notify is made under mu_ before it), and every
//     published message is counted once, acked or failed; pending() reads
//     them with acquire. close() stops the retry thread, counts what it and
//     libnats still hold, then waits (seconds at most) for pending() to
//     reach 0, so it returns after every on_ack, and the publisher may be
//     destroyed (libnats' thread is not joined).
//
// Costs: per message, one natsMsg (libnats allocates it and keeps it until the
// ack: the JetStream path allocates, unlike the core NATS one) and one entry
// in libnats' pending-ack table.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class JetStreamPublisher {
 public:
  // Creates the stream `config.stream` (or updates its limits and adds the
  // missing subjects), waiting up to the connection's JetStream API timeout.
  // `subjects` are the relay's routes' subjects, used when config.subjects is
  // empty. REQUIRES: `config` passed relay::validate (stream name, limits).
  // Fails with a message naming the step (server unreachable, JetStream not
  // enabled, a subject overlapping another stream, a limit the server refuses).
  static tl::expected<std::unique_ptr<JetStreamPublisher>, std::string> create(natsConnection* conn,
                                                                               const JetStreamConfig& config,
                                                                               const std::vector<std::string>& subjects,
                                                                               LogFn log);
  JetStreamPublisher(const JetStreamPublisher&) = delete;
  JetStreamPublisher& operator=(const JetStreamPublisher&) = delete;
  ~JetStreamPublisher();

  // Publishes `body` on `subject` (NUL-terminated) with the headers
  // Ringcast-Source: `source`, Ringcast-Seq: `seq`, Ringcast-From: `from`
  // unless it is kFromSeq or `seq` (as core NATS publishes carry them) and
  // Nats-Msg-Id: "`source`/`seq`", which is stable across relay
  // restarts, so a message relayed twice (`--from oldest` after a crash) is
  // stored once within the stream's duplicate window. Waits while max_pending acks are outstanding, until
  // `stop` is set. True when libnats took the message (its outcome then ends in
  // the counters, invariant 1); false only when it could not be handed over
  // (stop set while waiting, or the connection closed for good), counted failed.
  // May throw only if a mutex fails or memory runs out (an id past
  // memory_buffer's 500 inline bytes, queueing a retry): terminating is the
  // right end then.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  bool publish(const char* subject, std::string_view body, const char* source, std::uint64_t seq,
               const std::atomic<bool>& stop, std::uint64_t from = kFromSeq) noexcept;

  // Fills the js_* fields.
  void stats(NatsStats& out) const;

  // Waits up to `timeout` for outstanding acks and retries, then stops the
  // retry thread, counts what is still unacked as failed (logged) and waits
  // for the on_ack calls already under way (invariant 5).
  void close(std::chrono::milliseconds timeout) noexcept;

  // The stream subjects derived from the routes (exposed for tests and --help
  // text): a fixed subject as is; a topic route's prefix P as P + ">" when P
  // ends in '.'; an error naming the route otherwise.
  static tl::expected<std::vector<std::string>, std::string> route_subjects(const std::vector<RingRoute>& routes);

 private:
  struct Retry {
    natsMsg* msg;
    std::chrono::steady_clock::time_point due;
  };

  JetStreamPublisher(const JetStreamConfig& config, LogFn log);
  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure);
  void retry_loop();
  // Queues `msg` for another attempt, or counts it failed and logs it when it
  // has made max_attempts (or the publisher closes). Takes mu_.
  // May throw only if a mutex fails: terminating is the right end then.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  void retry_or_give_up(natsMsg* msg, natsStatus err, const char* text) noexcept;
  // Invariant 4: every message libnats still awaits an ack for, retried.
  // May throw only if a mutex fails: terminating is the right end then.
  // NOLINTNEXTLINE(bugprone-exception-escape)
  void resend_unacked() noexcept;
  // Outstanding = published - acked - failed (invariant 1).
  [[nodiscard]] std::uint64_t pending() const noexcept;

  const JetStreamConfig config_;
  const LogFn log_;
  jsCtx* js_ = nullptr;
  jsPubOptions pub_opts_{};  // defaults; Nats-Msg-Id is a header set per message

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Retry> retries_;  // guarded by mu_
  bool closing_ = false;       // guarded by mu_: late callbacks destroy their message and count it failed
  std::thread retry_thread_;

  // relaxed counters (statistics; invariant 1 holds once callbacks settle).
  std::atomic<std::uint64_t> published_{0}, acked_{0}, duplicates_{0}, retried_{0}, failed_{0}, stalls_{0};
};

}  // namespace ringcast::relay
