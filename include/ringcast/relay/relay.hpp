// ringcast relay: drains shared-memory rings and fans each message out to
// network subscribers through an in-process broker and/or to a NATS subject
// (docs/relay.md, docs/scale-out.md).
//
// Thread safety
//  * Relay::start may be called from any thread. It returns once the broker
//    listens, the NATS connection is set up (or retrying) and one reader thread
//    per ring runs.
//  * stop(), ring_stats(), nats_stats(), failure(), broker(),
//    info_text() and prometheus_text() may be called concurrently from any
//    thread. The destructor stops and joins; it must not run concurrently with
//    any other member call.
//  * Each ring is read by exactly one reader thread, the only user of its
//    consumer id (the ring's REQUIRES). Its statistics are single-writer relaxed
//    atomics, published once per batch.
//
// Invariants
//  1. A reader never blocks on a network peer: Broker::publish only queues, and
//     NATS publishes only append to libnats' buffer (or fail when that is full,
//     counted). It waits only for the broker's pacing (at most max_stall per
//     call) and, while a `block` subscriber refuses, retries the refused message
//     before taking more from the ring (docs/relay.md). So a slow TCP subscriber
//     costs its own broker queue and at most one max_stall of the relay's time.
//     The exception is chosen with --jetstream: a reader waits while
//     max_pending JetStream acks are outstanding (at-least-once needs the
//     server's ack; the ring's block/lap policy applies behind the reader).
//  2. For every ring, relayed + malformed counts every message taken from the
//     ring, and lapped counts every position (slot) a lossy ring overwrote unread.
//  3. A reader that stops (stop(), or a fatal ring error) unregisters its
//     consumer before its thread exits, so a producer never waits for it.
//
// Costs: per message, one copy out of the ring into a reusable batch buffer
// (none for a message longer than that buffer on a ring without NATS: it is
// published from the ring) and one natsConnection_Publish when NATS is on; per
// batch taken from the ring, one Broker::publish(span) (one frame block per run
// of one channel, shared by every subscriber, one queue push each). A ring
// relayed to NATS whose messages may take several slots is read one message
// per drain (docs/relay.md, "Batches"). Nothing else allocates, locks or
// throws on the reader's path; the buffer is sized when the ring is opened
// (for its max_message, on a NATS route).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/relay/error.hpp"

namespace ringcast::relay {

// One `--ring PATH=NAME` (fixed channel/subject) or `--ring PATH=PREFIX*`
// (topic in payload: channel = PREFIX + topic, ringcast/relay/topic.hpp).
struct RingRoute {
  std::string path;
  std::string name;  // channel (broker) and subject (NATS); a prefix in topic mode
  bool topic_in_payload = false;
  // Where the reader starts on a ring file it has not relayed before (the
  // first open, and a file replaced at the path): `oldest` relays the ring's
  // history first (`--from oldest`). Re-registering on the same file, after
  // its entry was freed behind its back, always starts at latest: relaying
  // that history again would duplicate what was already sent.
  StartAt start = StartAt::kLatest;
};

// Parses "PATH=NAME" / "PATH=PREFIX*" (the last '=' splits, so paths may hold
// '='). Error: RelayError kInvalidConfig whose detail names the problem (no
// '=', empty path, empty name) and quotes `spec`.
[[nodiscard]] tl::expected<RingRoute, RelayError> parse_ring_route(std::string_view spec);

// "127.0.0.1:6390", "[::1]:6390", ":6390" (127.0.0.1) or "6390". Port 0 lets the kernel choose.
struct HostPort {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
};
// Error: RelayError kInvalidConfig whose detail quotes `s` and the expected form.
[[nodiscard]] tl::expected<HostPort, RelayError> parse_host_port(std::string_view s);

// The most ring messages one NATS message carries (NatsConfig::batch).
inline constexpr std::size_t kMaxNatsBatch = 4096;

// `--jetstream STREAM`: publish into a JetStream stream with acks instead of
// core NATS (docs/scale-out.md, "JetStream"). The stream is created, or its
// limits updated, when the relay starts.
struct JetStreamConfig {
  std::string stream;  // the stream's name (no '.', '*', '>', space)
  // Subjects the stream captures. Empty: the rings' subjects (a fixed subject,
  // or PREFIX> for a topic route whose prefix ends in '.'). Subjects the
  // existing stream already has are kept.
  std::vector<std::string> subjects;
  int replicas = 1;
  bool memory_storage = false;      // false: file storage
  std::chrono::seconds max_age{0};  // 0: no age limit
  std::int64_t max_bytes = -1;      // -1: no size limit
  // How long the server remembers a Nats-Msg-Id to drop a republished copy.
  std::chrono::milliseconds duplicate_window{120'000};
  // Publishes whose ack has not come back yet; at the limit the relay's reader
  // waits (the ring fills behind it: back-pressure, counted as stalls).
  int max_pending = 4096;
  // An ack not back within this is a failed attempt: the message is retried.
  std::chrono::milliseconds ack_timeout{5000};
  // Attempts per message (the first included) before it is given up, counted
  // and logged. 0: retry until the relay stops.
  int max_attempts = 30;

  // The ingress side (`--nats-in` with `--jetstream`): a durable pull consumer
  // per route, acked only once the message is in the ring (or the broker).
  // Its name; empty: "ringcast-<host>-<ring path>" with every character
  // outside [A-Za-z0-9_-] made '_'. One ingress process per durable.
  std::string durable;
  // Where a durable created for the first time starts: false, the stream's
  // first message; true, the next one published.
  bool deliver_new = false;
  // Unacked this long, the server delivers a message again.
  std::chrono::milliseconds ack_wait{30'000};
  int fetch_batch = 256;  // most messages per pull request
  // How long one pull request stays open on the server waiting for messages
  // (it ends sooner once fetch_batch messages were delivered); then the next
  // is sent. An idle ingress sends one request per pull_wait.
  std::chrono::milliseconds pull_wait{1000};
};

// TLS to NATS (docs/security.md, "TLS to NATS"): on when `enabled` or when
// any URL is tls://. The server's certificate must chain to `ca_cert_file`
// (empty: whatever libnats trusts by default) and name the URL's host (all
// URLs must name one host); `cert_file` and `key_file` are the client
// certificate for a server with `verify: true`.
struct NatsTlsConfig {
  bool enabled = false;
  std::string ca_cert_file;
  std::string cert_file;
  std::string key_file;
};

struct NatsConfig {
  std::string url;  // "nats://host:port" or "tls://host:port", comma-separated for several
  NatsTlsConfig tls;
  std::string client_name = "ringcast-relay";
  // Bytes libnats buffers while reconnecting; publishes beyond it fail and are
  // counted as nats_buffer_full (at most once delivery, docs/scale-out.md).
  int reconnect_buffer_bytes = 8 << 20;
  std::chrono::milliseconds reconnect_wait{250};
  int max_reconnect = -1;  // -1: forever
  std::chrono::milliseconds connect_timeout{2000};
  // Every subscription's messages delivered by libnats' global delivery pool
  // (one thread unless the process sets nats_SetMessageDeliveryPoolSize) in
  // the order they came from the server, not by a thread per subscription.
  // The cluster link sets it (its duplicate check needs one order).
  bool one_delivery_thread = false;
  // The cluster link's connection (NatsCluster::connect sets them; 0 and
  // false: libnats' defaults): servers tried in the order `url` gives them
  // (a node's own host's server first), a dead server noticed after
  // 2 x ping_interval without a PONG, and a socket write that cannot finish
  // within write_deadline failing (the connection reconnects) instead of
  // holding libnats' connection lock, and every publisher, until it does.
  bool servers_in_order = false;
  std::chrono::milliseconds ping_interval{0};
  std::chrono::milliseconds write_deadline{0};
  // Ring messages per NATS message (`--nats-batch`, 1..kMaxNatsBatch). 1: one NATS message per
  // ring message, readable by any NATS client. More: a fixed-subject ring's
  // messages travel in batches of up to `batch` (fewer when the ring has no
  // more), framed as docs/scale-out.md "Batches" says; a ringcast ingress
  // unpacks them. Topic-in-payload rings always publish one by one. With
  // `jetstream` it must be 1 (Relay::start refuses more, saying why:
  // docs/scale-out.md, "One JetStream message per ring message").
  std::size_t batch = 1;
  std::optional<JetStreamConfig> jetstream;  // nullopt: core NATS (at most once)
  // Credit window (core NATS, fixed-subject routes; docs/scale-out.md,
  // "Credit window"): at most `window` ring positions published and not yet
  // acknowledged by every ringcast ingress that receives them; while it is
  // full the ring waits. 0 (`--nats-at-most-once`): no window, at most once.
  std::uint64_t window = 131072;
  std::chrono::milliseconds ack_timeout{3000};    // an ingress silent this long is not waited for
  std::chrono::milliseconds probe_interval{100};  // a probe after this long without progress
};

// `--cluster URL`: the broker joins a cluster of brokers through NATS
// (NatsCluster, ringcast/relay/nats_cluster.hpp; docs/cluster.md).
struct ClusterConfig {
  NatsConfig nats;  // url ("nats://a:4222,nats://b:4222"), TLS, reconnect buffer
  // Subjects are `<subject_prefix>.c.<channel>` and `.s.` for shard channels.
  std::string subject_prefix = "ringcast";
  // How long a subscription's confirmation waits for its interest to reach
  // the NATS server (ClusterLink::settle); past it the confirmation goes out
  // anyway and the wait is counted as settle_timeouts.
  std::chrono::milliseconds settle_timeout{2000};
  // libnats' pending limits of each of the link's subscriptions: what this
  // node may fall behind the cluster's traffic before libnats drops
  // (counted as nats_dropped, and a gap at the channel's next message).
  int pending_msgs = 1 << 20;
  int pending_bytes = 256 << 20;
  // With --history (docs/cluster.md, "History"): the JetStream replicas of
  // the history stream (3: it survives the loss of one NATS server of three;
  // a NATS cluster of fewer servers needs fewer), and how long a QoS 1
  // publish on a retained channel waits for JetStream to store it before its
  // publisher is told it was not stored.
  int history_replicas = 3;
  std::chrono::milliseconds store_timeout{5000};
  // With --history: how many stores this node may have awaiting JetStream's
  // acknowledgement. A publish that finds them all in flight is held (its
  // connection not read; never its thread) and tries again, for up to
  // store_timeout, then is refused (docs/cluster.md, "History").
  std::int64_t max_pending_stores = 65536;
};

enum class LogLevel : std::uint8_t { kInfo, kWarning, kError };
using LogFn = std::function<void(LogLevel, std::string_view)>;

// `--nats-in SUBJECT=RING_PATH`: the relay becomes the producer of the ring at
// PATH (creating it if absent) and pushes every message of the NATS
// subscription SUBJECT (wildcards allowed) into it (docs/scale-out.md, "Ring
// ingress").
struct NatsRingIngressRoute {
  std::string subject;
  std::string path;
};
// `--nats-in SUBJECT[=CHANNEL]` on a broker: every message of SUBJECT is
// published on CHANNEL; without CHANNEL (or with `{subject}` in it) the
// message's own subject names the channel (docs/scale-out.md, "Broker ingress").
struct NatsBrokerIngressRoute {
  std::string subject;
  std::string channel;  // "" or containing "{subject}": a template
};
// Parses "SUBJECT=RING_PATH" (the first '=' splits: subjects hold none).
[[nodiscard]] tl::expected<NatsRingIngressRoute, RelayError> parse_nats_ring_route(std::string_view spec);
// Parses "SUBJECT" or "SUBJECT=CHANNEL".
[[nodiscard]] tl::expected<NatsBrokerIngressRoute, RelayError> parse_nats_broker_route(std::string_view spec);

struct NatsIngressConfig {
  // A ring the ingress creates (an existing ring keeps its own settings).
  std::uint64_t ring_capacity = 65536;
  bool ring_lossy = false;
  // Its largest message (CreateOptions::max_message; 0: 64 KiB, or what the
  // capacity allows). A longer NATS message is counted as oversize and logged.
  std::size_t ring_max_message = 0;
  // libnats' per-subscription pending limits: what may wait in libnats while
  // the ingress is blocked (a full blocking ring, a paced broker). Beyond
  // either, libnats drops messages (counted as `dropped`, and a gap). The
  // message limit stays above NatsConfig::window (one NATS message per
  // position at most), so a relay's credit window never reaches it.
  int pending_msgs = 262144;
  int pending_bytes = 64 << 20;
};

// One ingress subscription's counters (Relay::ingress_stats(), INFO, /metrics).
struct NatsIngressStats {
  std::string subject;
  std::string target;  // the ring path, or the channel (template)
  bool to_ring = false;
  std::uint64_t received = 0;   // messages handed over by libnats
  std::uint64_t delivered = 0;  // pushed into the ring / published to the broker
  std::uint64_t gaps = 0;       // continuity (ringcast/relay/continuity.hpp)
  std::uint64_t lost = 0;
  std::uint64_t restarts = 0;
  std::uint64_t duplicates = 0;    // dropped, not delivered
  std::uint64_t unsequenced = 0;   // no sequence headers: delivered unchecked
  std::uint64_t malformed = 0;     // batches whose records do not parse (dropped whole; counted once)
  std::uint64_t oversize = 0;      // ring: payload over the ring's max_message (or refused), not delivered
  std::uint64_t full_waits = 0;    // ring: pushes that found the blocking ring full and waited
  std::uint64_t refused = 0;       // broker: publishes refused by a `block` subscriber and retried
  std::uint64_t loss_notices = 0;  // broker: connections told of an upstream gap
  std::int64_t pending_msgs = 0;   // libnats: waiting for the ingress now
  std::int64_t pending_bytes = 0;
  std::int64_t max_pending_msgs = 0;  // libnats: the most that ever waited
  std::int64_t max_pending_bytes = 0;
  std::int64_t pending_limit_msgs = 0;
  std::int64_t pending_limit_bytes = 0;
  std::int64_t dropped = 0;  // libnats: dropped over the pending limits (slow consumer)
  std::uint64_t acks = 0;    // credit window acknowledgements sent (docs/scale-out.md, "Credit window")
  std::uint64_t probes = 0;  // credit window probes received
  // Ring: ring B's header (RingStatus::upstream_lost / upstream_gaps): what
  // every ingress into it, this run or earlier, counted as lost.
  std::uint64_t upstream_lost = 0;
  std::uint64_t upstream_gaps = 0;
  // --jetstream (a durable consumer instead of a subscription; the pending
  // fields above stay 0). docs/scale-out.md, "JetStream".
  bool jetstream = false;
  std::string js_durable;
  std::uint64_t js_resumed_at = 0;         // stream sequence this run started from
  std::uint64_t js_redelivered_bound = 0;  // at most this many reach the target again after a restart
  std::uint64_t js_redeliveries = 0;       // within this run: already handled, skipped
  std::uint64_t js_acks = 0;               // AckAll acknowledgements sent
  std::uint64_t js_fetch_errors = 0;       // pull requests that failed (server away, no responders)
};

struct RelayConfig {
  std::vector<RingRoute> rings;
  std::optional<broker::BrokerConfig> broker;  // nullopt: no broker sink
  std::optional<NatsConfig> nats;              // nullopt: no NATS sink (and no ingress)
  // The embedded broker is a node of this cluster (needs `broker`); nullopt: alone.
  std::optional<ClusterConfig> cluster;
  // NATS in (need `nats`): into local rings, and into the embedded broker (needs `broker`).
  std::vector<NatsRingIngressRoute> nats_rings_in;
  std::vector<NatsBrokerIngressRoute> nats_broker_in;
  NatsIngressConfig nats_in;
  std::size_t batch = 256;  // most messages per drain (one cursor publish)
  // How often an idle reader looks for a missing ring file, a producer, a
  // replaced file, and the stop flag. Bounds shutdown latency.
  std::chrono::milliseconds poll_interval{50};
  // Receives every log line (from reader threads and libnats callbacks; must
  // be thread-safe). Empty: lines go to stderr prefixed "ringcast-relay: ".
  LogFn log;
};

enum class RingState : std::uint8_t {
  kWaitingForRing,      // the file does not exist (or is not initialised) yet
  kWaitingForProducer,  // registered; no live producer has published yet
  kRelaying,
  kStopped,  // stop() was called; the consumer is unregistered
  kFailed,   // fatal ring error (see Relay::failure)
};
[[nodiscard]] std::string_view to_string(RingState s) noexcept;

struct RingStats {
  std::string path;
  std::string name;
  bool topic_in_payload = false;
  RingState state = RingState::kWaitingForRing;
  std::int64_t consumer_id = -1;     // -1 while not registered
  bool producer_alive = false;       // as of the reader's last idle check
  std::uint64_t relayed = 0;         // messages taken from the ring and published
  std::uint64_t batches = 0;         // drains that returned at least one message
  std::uint64_t lag = 0;             // positions (slots) published on the ring, not yet taken by the relay
  std::uint64_t lapped = 0;          // lossy ring: positions (slots) overwritten before the relay read them
  std::uint64_t malformed = 0;       // topic mode: payloads that did not parse (not published)
  std::uint64_t deliveries = 0;      // sum of Broker::publish results (subscriptions reached)
  std::uint64_t refused = 0;         // broker publishes refused (block policy) and retried
  std::uint64_t nats_published = 0;  // accepted by libnats (sent or buffered)
  std::uint64_t nats_failed = 0;     // refused by libnats (buffer full, closed, bad subject)
  std::uint64_t reopens = 0;         // the ring file was replaced and reopened
  // Credit window (core NATS, fixed subject; docs/scale-out.md, "Credit window").
  bool window = false;                 // on for this route
  std::uint64_t window_size = 0;       // positions allowed in flight
  std::uint64_t window_in_flight = 0;  // last published position - lowest acknowledged
  std::uint64_t window_ingresses = 0;  // ingresses acknowledging now
  std::uint64_t window_waits = 0;      // times the window was full (the ring waited)
  std::uint64_t window_probes = 0;     // probes sent while waiting without progress
  std::uint64_t window_acks = 0;       // acknowledgements received
  std::uint64_t window_expired = 0;    // ingresses forgotten after ack_timeout of silence
  std::uint64_t window_left = 0;       // ingresses that said they left (stopped, unsubscribed)
  std::uint64_t window_overflow = 0;   // acks from ingresses beyond the 64 waited for (not waited for)
};

struct NatsStats {
  bool enabled = false;
  std::string status;             // "connected", "reconnecting", "closed", ...
  std::uint64_t published = 0;    // accepted by libnats
  std::uint64_t buffer_full = 0;  // refused: reconnect buffer full
  std::uint64_t failed = 0;       // refused for any other reason
  std::uint64_t disconnects = 0;
  std::uint64_t reconnects = 0;
  std::uint64_t out_msgs = 0;  // libnats: messages sent to the server
  std::uint64_t out_bytes = 0;
  std::int64_t buffered_bytes = 0;  // libnats: bytes not yet written (-1: closed)
  std::string last_error;
  // JetStream (`--jetstream`); all zero without it. Every message the readers
  // hand over ends in exactly one of acked, failed, or still pending:
  // js_published = js_acked + js_failed + js_pending.
  bool jetstream = false;
  std::uint64_t js_published = 0;   // handed to libnats for the first time
  std::uint64_t js_acked = 0;       // the stream acknowledged it (stored, or a duplicate of a stored one)
  std::uint64_t js_duplicates = 0;  // of js_acked: the server had it already (Nats-Msg-Id within the window)
  std::uint64_t js_retried = 0;     // attempts repeated after an error or an ack timeout
  std::uint64_t js_failed = 0;      // given up after max_attempts, or unacked when the relay stopped
  std::uint64_t js_pending = 0;     // published, neither acked nor failed yet
  std::uint64_t js_stalls = 0;      // a reader waited because max_pending acks were outstanding
};

// Every check of `config` that needs nothing started: routes and sinks, the
// NATS batch, the JetStream stream name and limits, and the embedded broker's
// broker::validate. Relay::start calls it first; ringcast-relay calls it to
// answer a bad configuration with a usage error before it starts anything.
[[nodiscard]] tl::expected<void, RelayError> validate(const RelayConfig& config);

class Relay {
 public:
  // Validates the config (validate()), starts the broker (if any), connects NATS (if any;
  // an unreachable server is retried in the background, publishes buffer),
  // and starts one reader per ring. A ring file that does not exist yet (or is
  // empty, or not yet initialised: a ring being created) is waited for; a ring
  // without a producer is registered on and waited on. A path that holds
  // something else (a text file, a directory, a FIFO) is kRing, before
  // anything has started.
  [[nodiscard]] static tl::expected<std::unique_ptr<Relay>, RelayError> start(RelayConfig config);

  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  ~Relay();

  // Asks every reader to finish its batch, unregister and exit, then closes
  // the NATS connection (after a bounded flush) and the broker. Blocks until
  // done; idempotent.
  void stop() noexcept;

  // The in-process broker, or nullptr without a broker sink. Valid until the
  // Relay is destroyed.
  [[nodiscard]] broker::Broker* broker() noexcept;

  // Empty while every ring is healthy; otherwise why a reader failed
  // ("ring /dev/shm/x.ring: slot is corrupt (layout_mismatch)").
  [[nodiscard]] std::string failure() const;

  [[nodiscard]] std::vector<RingStats> ring_stats() const;
  [[nodiscard]] NatsStats nats_stats() const;
  // One entry per --nats-in subscription: rings first, then the broker's.
  [[nodiscard]] std::vector<NatsIngressStats> ingress_stats() const;

  // "# Relay" INFO section (Redis key:value lines, CRLF), one line per ring;
  // the embedded broker's INFO shows it too (`INFO relay`).
  // ring_stats, nats_stats and info_text allocate; they never block the readers.
  [[nodiscard]] std::string info_text() const;
  // Prometheus text exposition (version 0.0.4). With a broker sink, exactly
  // broker()->metrics_text(): the broker's series (per connection included),
  // then the relay's per-ring and NATS series, which the relay adds through the
  // broker's MetricsProvider hook. Without one, the relay's series alone.
  [[nodiscard]] std::string prometheus_text() const;

  struct Impl;

 private:
  explicit Relay(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::relay
