// JetStreamIngress: one `--nats-in` route read from a JetStream stream through
// a durable pull consumer (docs/scale-out.md, "JetStream"), instead of a core
// NATS subscription. At least once: a message is acknowledged only after the
// handler has put it in its target (the ring, the broker), and a restarted
// ingress resumes right after the last acknowledged message.
//
// The pull requests are ours, not libnats' natsSubscription_Fetch*: libnats
// 3.4.1's fetch writes past the end of its message array when messages of an
// earlier request are still queued when a fetch starts (it compares its count
// against the batch it has just reduced by those messages, so it never stops
// at the array's size); under load that corrupted the heap (issue 16,
// docs/scale-out.md "Ingress side"). Here one request at a time asks the
// server for up to fetch_batch messages on a private inbox (a plain
// synchronous subscription), each message is handled and destroyed as it
// comes, whichever request it answers, and acks are published to the
// messages' reply subjects.
//
// Thread safety
//  * One fetch thread of its own calls the handler, in stream order, and acks;
//    it is the only user of inbox_ and the only writer of the counters
//    (relaxed atomics, statistics).
//  * stats() from any thread; stop() from any thread but the fetch thread,
//    idempotent; the destructor stops.
//
// Invariants
//  1. A message is acked (AckAll: with every earlier one) only after the
//     handler returned true for it and for every message before it; a message
//     the handler did not finish (stop) is never acked, so the server keeps it.
//  2. On start, an existing durable is recreated to deliver from its ack floor
//     + 1 (the last acked message's successor), in stream order: what the
//     previous run delivered but had not acked comes again, first, and nothing
//     after the ack floor is skipped. The durable's other settings are ours.
//  3. After stop() returns the handler is not running and never runs again.
//  4. Within a run the handler sees each stream sequence at most once, in
//     increasing order: a redelivery (the server's ack wait expired while the
//     handler was blocked) is skipped and counted. Ring sequences are not
//     judged here: a publish the relay retried is stored after later ones and
//     is handed over when it comes.
//  5. At most one pull request is open (not answered by fetch_batch messages,
//     a status, or its deadline) at a time; a message that answers an earlier
//     request (one that passed its deadline) is handled like any other.
//  6. A message is owned by the fetch thread from natsSubscription_NextMsg on
//     and destroyed by it exactly once: at once, or (the last one done, whose
//     reply subject the next AckAll goes to) when a later one replaces it or
//     the ack has been sent.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

struct JetStreamIngressStats {
  std::string durable;
  std::uint64_t fetched = 0;       // messages received from the consumer
  std::uint64_t acks = 0;          // AckAll acknowledgements sent (one per batch)
  std::uint64_t fetch_errors = 0;  // pull requests not sent, unanswered or refused (server away, no responders)
  std::uint64_t redeliveries = 0;  // within this run: already handled, skipped (invariant 4)
  std::uint64_t resumed_at = 0;    // stream sequence this run started from
  // Stream sequences the previous run had delivered but not acked: at most
  // this many messages reach the target a second time after a restart.
  std::uint64_t redelivered_bound = 0;
};

class JetStreamIngress {
 public:
  // Called on the fetch thread for each message, in order. True: the message
  // is done (delivered, or dropped for good, e.g. a duplicate); false: stopping,
  // leave it and the rest unacknowledged. Must not destroy `msg`.
  using Handler = std::function<bool(natsMsg* msg)>;

  // Binds (creating or recreating, invariant 2) the durable consumer of
  // config.stream filtered on `subject`, and starts the fetch thread. Fails
  // when the stream does not exist or the server does not answer, naming why.
  static tl::expected<std::unique_ptr<JetStreamIngress>, std::string> start(natsConnection* conn,
                                                                            const JetStreamConfig& config,
                                                                            const std::string& subject,
                                                                            std::string durable, Handler handler,
                                                                            LogFn log);
  JetStreamIngress(const JetStreamIngress&) = delete;
  JetStreamIngress& operator=(const JetStreamIngress&) = delete;
  ~JetStreamIngress();

  void stop() noexcept;
  [[nodiscard]] JetStreamIngressStats stats() const;

  // The default durable name of a route on this host (JetStreamConfig::durable):
  // "ringcast-<host>-<what>" (what: the ring path, or "broker-<subject>"),
  // every character outside [A-Za-z0-9_-] made '_'.
  [[nodiscard]] static std::string default_durable(std::string_view what);
  // Why `routes` ingress routes of one process cannot share `config`'s durable
  // settings (an explicit name fits one route only), or nullopt.
  [[nodiscard]] static std::optional<std::string> check_routes(const JetStreamConfig& config, std::size_t routes);

 private:
  JetStreamIngress(const JetStreamConfig& config, std::string durable, Handler handler, LogFn log);
  void run() noexcept;
  // Sends one pull request (fetch_batch messages, open for pull_wait) to the
  // durable with inbox_ as its reply subject. False when libnats refused it.
  bool request_more() noexcept;
  // A status message (no payload, a Status header) answering a pull request:
  // true, and `code` is its status ("404", "408", "409", "503", ...).
  static bool is_status(natsMsg* m, const char*& code) noexcept;
  // AckAll for the last message done (held_), then destroys it.
  void ack_held() noexcept;
  // Counts a failed or refused pull request in fetch_errors and logs it,
  // unless it is the same trouble as the last logged one.
  void warn(std::string_view what, std::string_view why) noexcept;

  const JetStreamConfig config_;
  const std::string durable_;
  const Handler handler_;
  const LogFn log_;
  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
  natsSubscription* inbox_ = nullptr;  // the pull requests' reply subject (synchronous)
  std::string next_subject_;           // $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>
  std::string request_;                // {"batch":N,"expires":NANOS}, built once
  std::string inbox_subject_;
  natsMsg* held_ = nullptr;   // fetch thread only: the last message done, not yet acked (invariant 6)
  std::string last_warning_;  // fetch thread only: the last warning logged, until a message comes
  std::thread thread_;
  std::atomic<bool> stop_{false};

  // Statistics (single writer: the fetch thread; resumed_at_ and
  // redelivered_bound_ are set before it starts).
  std::atomic<std::uint64_t> fetched_{0}, acks_{0}, fetch_errors_{0}, redeliveries_{0};
  std::uint64_t last_stream_seq_ = 0;  // fetch thread only: the highest stream sequence handled
  std::uint64_t resumed_at_ = 0;
  std::uint64_t redelivered_bound_ = 0;
};

}  // namespace ringcast::relay
