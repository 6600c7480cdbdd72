// JetStreamIngress: one `--nats-in` route read from a JetStream stream through
// a durable pull consumer (docs/scale-out.md, "JetStream"), instead of a core
// NATS subscription. At least once: a message is acknowledged only after the
// handler has put it in its target (the ring, the broker), and a restarted
// ingress resumes right after the last acknowledged message.
//
// Thread safety
//  * One fetch thread of its own calls the handler, in stream order, and acks;
//    it is the only writer of the counters (relaxed atomics, statistics).
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
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

struct JetStreamIngressStats {
  std::string durable;
  std::uint64_t fetched = 0;       // messages received from the consumer
  std::uint64_t acks = 0;          // AckAll acknowledgements sent (one per batch)
  std::uint64_t fetch_errors = 0;  // pull requests that failed (server away, no responders)
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

 private:
  JetStreamIngress(const JetStreamConfig& config, std::string durable, Handler handler, LogFn log);
  void run() noexcept;

  const JetStreamConfig config_;
  const std::string durable_;
  const Handler handler_;
  const LogFn log_;
  jsCtx* js_ = nullptr;
  natsSubscription* sub_ = nullptr;
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
