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

// "32mb", "8m", "64k", "1gb", "4096": Redis-style sizes (k = kb = 1024), as
// the limits are written in redis.conf. nullopt for anything else or on overflow.
[[nodiscard]] std::optional<std::size_t> parse_size(std::string_view s);

// Output-queue limits of one connection, in bytes of queued frames (including
// frames handed to the kernel but not yet acknowledged as written).
struct QueueLimits {
  std::size_t hard_bytes = 32u << 20;  // exceeding it triggers the policy at once
  std::size_t soft_bytes = 8u << 20;   // 0 disables the soft limit
  // The soft limit triggers the policy only after being exceeded continuously
  // for this long (Redis's client-output-buffer-limit pubsub 32mb 8mb 60).
  std::chrono::nanoseconds soft_duration = std::chrono::seconds(60);
};

struct BrokerConfig {
  std::string bind_address = "127.0.0.1";
  std::uint16_t port = 6390;  // 0: let the kernel choose; Broker::port() reports it
  unsigned io_threads = 0;    // 0: std::thread::hardware_concurrency()
  // WebSocket + JSON listener on bind_address (docs/broker.md, "WebSocket"):
  // nullopt = off; 0 = let the kernel choose (Broker::ws_port() reports it).
  std::optional<std::uint16_t> ws_port;
  // Largest WebSocket message a client may send, after reassembly of its
  // fragments; larger ones close the connection with 1009.
  std::size_t ws_max_message = 1u << 20;

  OverflowPolicy overflow_policy = OverflowPolicy::kDisconnect;
  QueueLimits queue_limits{};
  // Bytes one connection's writer hands to a single writev per wakeup before it
  // yields to the other ready connections of its thread (fairness, as Redis's
  // NET_MAX_WRITES_PER_EVENT).
  std::size_t write_budget_bytes = 256u << 10;

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
  std::size_t max_bulk_len = 32u << 20;      // longest argument accepted
  std::size_t max_args = std::size_t{1024} * 1024;  // most arguments in one command
  std::size_t max_subscriptions = 100'000;   // channels + patterns per connection
  std::size_t max_connections = 10'000;
  // Connections that have not authenticated within this time are closed. Only
  // applies when requirepass or token_secret is set.
  std::chrono::milliseconds auth_timeout = std::chrono::seconds(10);

  // Non-empty: clients must AUTH (or HELLO ... AUTH default <pass>) first.
  std::string requirepass;
  // Non-empty: HS256 token authentication is on (ringcast/broker/token.hpp,
  // docs/security.md "Tokens"): clients must authenticate, and `AUTH <sub>
  // <token>` gives the channel permissions the token grants. At least
  // kMinTokenSecretBytes (32) bytes, else Broker::start fails with kInvalidConfig.
  std::string token_secret;
};

// Checks the limits for zero and inconsistent values; kInvalidConfig names the
// first problem found ("soft limit must not exceed the hard limit"). Addresses
// are checked when bound. Broker::start calls it; a tool may call it to report
// a bad configuration before anything starts.
[[nodiscard]] tl::expected<void, BrokerError> validate(const BrokerConfig& config);

}  // namespace ringcast::broker
