// ringcast broker configuration: overflow policies, limits, listener settings.
//
// Thread safety: plain value types. A BrokerConfig is copied into the broker at
// start(); changing the caller's copy afterwards has no effect.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "ringcast/broker/error.hpp"

namespace ringcast::broker {

// What a connection's queue does when a message would take it over a limit
// (docs/broker.md, "Overflow"). The loss count is the same for both drop policies
// under sustained overload; they differ in which messages survive.
enum class OverflowPolicy : std::uint8_t {
  kDropOldest,  // evict queued messages from the front: the reader stays current
  kDropNewest,  // refuse the new message: the reader gets a contiguous prefix
  kDisconnect,  // close the connection, as Redis does for pub/sub clients
  // Refuse the publish for every subscriber of the channel while this queue has
  // no room (seed 002 §5): nobody is offered a message it cannot hold. Room is
  // the soft limit (the hard limit when the soft one is 0); the hard limit still
  // closes the connection should concurrent publishers overshoot it.
  kBlock,
  // Over a limit, keep only the newest queued message per channel until the
  // queue has been written out, then evict the oldest if that is not enough:
  // a slow reader of a state-like feed costs O(channels) and always ends on the
  // latest value of each channel.
  kConflate,
};

// "drop-oldest", "drop-newest", "disconnect", "block", "conflate".
[[nodiscard]] std::string_view to_string(OverflowPolicy p) noexcept;
// Inverse of to_string (case-insensitive); nullopt for anything else.
[[nodiscard]] std::optional<OverflowPolicy> parse_overflow_policy(std::string_view s) noexcept;

// The one grammar of sizes and durations, for flags, config files, RINGCAST_*
// variables and --history rules alike (docs/broker.md, "Settings").
//
// "32mb", "8m", "64k", "1gb", "4096": Redis-style sizes (k = kb = 1024), as
// the limits are written in redis.conf; a bare number is bytes. nullopt for
// anything else or on overflow.
[[nodiscard]] std::optional<std::size_t> parse_size(std::string_view s);
// The inverse of parse_size, in the largest unit that is exact: "32mb",
// "256kb", "1gb", "4097", "0".
[[nodiscard]] std::string format_size(std::size_t bytes);

// What a duration without a unit means. Settings named since the units rule
// take kRefused ("200" is an error: 200 what?); kSeconds keeps the meaning that
// --ack-timeout, --session-ttl and --history TTLs always had.
enum class BareDuration : std::uint8_t {
  kSeconds,  // "30" is 30s
  kRefused,  // only "0" may go without a unit
};

// "250ms", "30s", "10m", "24h", "7d"; a bare number as `bare` says. nullopt for
// anything else or past 100 years. 0 is allowed (callers give it a meaning).
[[nodiscard]] std::optional<std::chrono::milliseconds> parse_duration(std::string_view s,
                                                                      BareDuration bare = BareDuration::kSeconds);
// The inverse of parse_duration, in the largest unit that is exact: "200ms",
// "5s", "24h", "0s". Negative durations are written as 0s.
[[nodiscard]] std::string format_duration(std::chrono::milliseconds d);

// Defaults of BrokerConfig's request limits (docs/broker.md, "Errors and limits
// against hostile input"), also the RESP parser's own defaults.
inline constexpr std::size_t kDefaultMaxBulkLen = std::size_t{32} << 20;
inline constexpr std::size_t kDefaultMaxArgs = std::size_t{1024} * 1024;

// Output-queue limits of one connection, in bytes of queued frames (including
// frames handed to the kernel but not yet acknowledged as written).
struct QueueLimits {
  std::size_t hard_bytes = 32u << 20;  // exceeding it triggers the policy at once
  std::size_t soft_bytes = 8u << 20;   // 0 disables the soft limit
  // The soft limit triggers the policy only after being exceeded continuously
  // for this long (Redis's client-output-buffer-limit pubsub 32mb 8mb 60).
  std::chrono::nanoseconds soft_duration = std::chrono::seconds(60);
};

// --fsync: when a committed history append reaches the disk (docs/guarantees.md,
// "Persistence").
enum class FsyncMode : std::uint8_t {
  kAlways,  // every append run is synced before it is delivered
  kBatch,   // append runs commit without sync; the broker's timer syncs every few ms
  kOff,     // never synced explicitly; the kernel writes back when it likes
};
// "always", "batch", "off".
[[nodiscard]] std::string_view to_string(FsyncMode m) noexcept;
// Inverse of to_string; the error names the value and the choices.
[[nodiscard]] tl::expected<FsyncMode, std::string> parse_fsync_mode(std::string_view s);

// --tls-auth-clients: whether a TLS client must present a certificate signed
// by the CA file (docs/security.md, "TLS").
enum class TlsAuthClients : std::uint8_t {
  kNo,        // none is asked for
  kOptional,  // asked for; a client may send none, but one it sends must verify
  kYes,       // required and verified (Redis's tls-auth-clients yes)
};
// "no", "optional", "yes".
[[nodiscard]] std::string_view to_string(TlsAuthClients a) noexcept;
// Inverse of to_string; nullopt for anything else.
[[nodiscard]] std::optional<TlsAuthClients> parse_tls_auth_clients(std::string_view s) noexcept;

// TLS on the broker's listeners (docs/security.md, "TLS"): OpenSSL, TLS 1.2 and
// 1.3 only, OpenSSL's default ciphers. Off unless `port` is set or `ws` is true.
struct TlsConfig {
  std::string cert_file;     // PEM certificate chain, leaf first
  std::string key_file;      // PEM private key of the leaf
  std::string ca_cert_file;  // PEM CAs that client certificates must chain to
  TlsAuthClients auth_clients = TlsAuthClients::kNo;
  // RESP over TLS on bind_address: nullopt = off; 0 = let the kernel choose
  // (Broker::tls_port() reports it).
  std::optional<std::uint16_t> port;
  bool ws = false;  // the WebSocket/HTTP port (ws_port) speaks TLS: wss://, https://
  // A connection that has not completed its handshake by then is closed (and counted).
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
  // Let the kernel encrypt writes where it offers kTLS (docs/broker.md,
  // "TLS"). Off by default: that path has not run in CI (the kernel here has
  // no kTLS), and OpenSSL 3.0 does not answer a TLS 1.3 key update on it.
  bool kernel_tls = false;
  [[nodiscard]] bool enabled() const noexcept { return port.has_value() || ws; }
};

struct BrokerConfig {
  std::string bind_address = "127.0.0.1";
  std::uint16_t port = 6390;  // 0: let the kernel choose; Broker::port() reports it
  unsigned io_threads = 0;    // 0: std::thread::hardware_concurrency()
  // WebSocket + JSON listener on bind_address (docs/broker.md, "WebSocket"):
  // nullopt = off; 0 = let the kernel choose (Broker::ws_port() reports it).
  std::optional<std::uint16_t> ws_port;
  // False: no plain RESP listener (ringcast-broker's --port 0 beside --tls-port);
  // then tls.port must be set.
  bool plain_port = true;
  TlsConfig tls{};
  // Largest WebSocket message a client may send, after reassembly of its
  // fragments; larger ones close the connection with 1009.
  std::size_t ws_max_message = 1u << 20;

  OverflowPolicy overflow_policy = OverflowPolicy::kDisconnect;
  QueueLimits queue_limits{};
  // Bytes one connection's writer hands to a single writev per wakeup before it
  // yields to the other ready connections of its thread (fairness, as Redis's
  // NET_MAX_WRITES_PER_EVENT).
  std::size_t write_budget_bytes = 256u << 10;
  // Each client socket's kernel send buffer (SO_SNDBUF: Linux doubles the
  // value for its bookkeeping and caps it at net.core.wmem_max, 208 KB by
  // default). 0 leaves it to the kernel's autotuning, up to net.ipv4.tcp_wmem's
  // maximum (4 MB by default): what a subscriber that reads nothing holds in
  // the kernel, per connection, beyond queue_limits.
  std::size_t send_buffer_bytes = 0;

  // Publisher pacing (docs/broker.md, "Publisher pacing"). While some
  // subscriber's queue (queued + in flight) exceeds pace_bytes, the broker stops
  // reading from publishing connections and Broker::publish waits; they resume
  // when every such queue has drained to half of it. A queue that stays over the
  // mark for max_stall is called slow: it stops pacing publishers and meets its
  // overflow policy instead, so one stuck reader stalls publishers for at most
  // max_stall. pace_bytes = 0 turns pacing off; the mark used is at most half
  // of queue_limits.hard_bytes.
  std::size_t pace_bytes = 1u << 20;
  std::chrono::milliseconds max_stall = std::chrono::milliseconds(200);
  // `block` policy: how long a publisher is held, waiting for room, before its
  // publish is refused (Kafka's max.block.ms). 0: refuse at once.
  std::chrono::milliseconds max_block = std::chrono::milliseconds(0);

  // One frame per connection however many of its subscriptions match, instead of
  // Redis's one frame per matching subscription.
  bool dedupe = false;

  // Limits against bad or hostile input.
  std::size_t max_bulk_len = kDefaultMaxBulkLen;  // longest argument accepted
  std::size_t max_args = kDefaultMaxArgs;         // most arguments in one command
  std::size_t max_subscriptions = 100'000;        // channels + patterns per connection
  std::size_t max_connections = 10'000;
  // Connections that have not authenticated yet (or, on the WebSocket port,
  // not completed the upgrade; on a TLS port, the handshake) count against
  // this smaller limit too, so that idle newcomers cannot take every one of
  // max_connections (docs/security.md, "Before authentication"); more are
  // refused with an error and counted.
  std::size_t max_unauthenticated = 1'000;
  // Connections that have not authenticated within this time are closed; also
  // a WebSocket connection that has not completed its HTTP upgrade by then,
  // with or without authentication configured.
  std::chrono::milliseconds auth_timeout = std::chrono::seconds(10);
  // A connection whose authentication failed this many times is closed after
  // answering; every refusal is answered after a delay that grows with its
  // address's recent failures (docs/security.md, "Before authentication").
  std::uint32_t max_auth_failures = 3;

  // QoS 1 (docs/guarantees.md, "QoS 1"): a delivery at QoS 1 not acked within
  // ack_timeout is sent again (marked dup) to that subscriber, at most
  // max_retries times, then expires with a loss notice. At most max_in_flight
  // deliveries per subscriber await an ack; later ones wait (JetStream's
  // AckWait, MaxDeliver - 1, MaxAckPending).
  std::chrono::milliseconds ack_timeout = std::chrono::seconds(5);
  std::uint32_t max_retries = 5;
  std::size_t max_in_flight = 1000;
  // A durable QoS 1 session (a client_id) no connection holds is dropped,
  // with its unacked deliveries and its resume floors, after this long (MQTT
  // 5's session expiry interval). 0: never.
  std::chrono::milliseconds session_ttl = std::chrono::hours(24);

  // Non-empty: clients must AUTH (or HELLO ... AUTH default <pass>) first.
  std::string requirepass;
  // Non-empty: HS256 token authentication is on (ringcast/broker/token.hpp,
  // docs/security.md "Tokens"): clients must authenticate, and `AUTH <sub>
  // <token>` gives the channel permissions the token grants. At least
  // kMinTokenSecretBytes (32) bytes, else Broker::start fails with kInvalidConfig.
  std::string token_secret;
  // A password or a token secret is set: every connection must authenticate.
  [[nodiscard]] bool auth_required() const noexcept { return !requirepass.empty() || !token_secret.empty(); }

  // Per-channel history (docs/guarantees.md): each entry a --history
  // GLOB=SIZE[,TTL] rule, first match wins. Empty: no channel keeps history,
  // and publishing costs nothing more.
  std::vector<std::string> history;
  // Non-empty: history lives in LMDB in this directory (created if missing,
  // refused if it holds anything but ringcast history) and survives restarts
  // with the same offsets and epoch. Empty: in memory, a new epoch per start.
  std::string data_dir;
  FsyncMode fsync = FsyncMode::kBatch;
  // fsync batch: how often the timer makes committed appends durable.
  std::chrono::milliseconds flush_interval = std::chrono::milliseconds(5);
  // How often the timer drops messages past their channel's TTL (appends prune
  // their own channel as they go).
  std::chrono::milliseconds prune_interval = std::chrono::seconds(1);
};

// Every check of a configuration, in one place: limits that are zero or
// inconsistent, history rules, TLS settings that need each other.
// kInvalidConfig names the first problem found by the flag that sets it
// ("--soft-limit must not exceed --hard-limit"). Addresses are checked when
// bound. Broker::start calls it; the tools call it to report a bad
// configuration before anything starts.
[[nodiscard]] tl::expected<void, BrokerError> validate(const BrokerConfig& config);

}  // namespace ringcast::broker
