// What the broker reports about itself: whole-broker counters, one snapshot per
// connection (CLIENT LIST) and the hook for extra INFO sections.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

// Counters for the whole broker; monotonic unless noted.
struct BrokerStats {
  std::uint64_t connected_clients = 0;  // current, not monotonic
  std::uint64_t total_connections = 0;
  std::uint64_t rejected_connections = 0;  // over max_connections
  std::uint64_t accept_backoffs = 0;       // accepts that failed for lack of descriptors (EMFILE, ...)
  std::uint64_t commands_processed = 0;
  std::uint64_t messages_published = 0;  // PUBLISH and SPUBLISH commands plus publish() calls
  std::uint64_t deliveries = 0;          // frames offered to connection queues
  std::uint64_t dropped_hard_limit = 0;  // frames lost to the hard limit
  std::uint64_t dropped_soft_limit = 0;  // frames lost to the soft limit
  std::uint64_t dropped_disconnect = 0;  // frames discarded when a slow client was cut
  std::uint64_t slow_disconnects = 0;    // connections closed by the disconnect policy
  std::uint64_t refused_publishes = 0;   // messages refused for a `block` subscriber with no room
  std::uint64_t publisher_stalls = 0;    // publisher pauses for pacing (docs/broker.md)
  std::uint64_t publisher_stall_ns = 0;  // their total duration
  std::uint64_t slow_subscribers = 0;    // queues called slow: over the pace mark for max_stall
  std::uint64_t conflated = 0;           // messages replaced by a newer one (conflate policy)
  std::uint64_t channels = 0;            // current
  std::uint64_t patterns = 0;            // current
  std::uint64_t shard_channels = 0;      // current (SSUBSCRIBE)
};

// One client connection, as CLIENT LIST shows it. A snapshot: each field is
// read at one instant, the set of them is not taken atomically.
struct ConnectionStats {
  std::uint64_t id = 0;
  std::string peer;      // "127.0.0.1:51234"
  std::string name;      // CLIENT SETNAME, or empty
  int resp = 2;          // RESP version; 0 for a WebSocket client
  std::string protocol;  // "resp2", "resp3" or "ws"
  OverflowPolicy policy = OverflowPolicy::kDisconnect;
  std::uint64_t subscriptions = 0;   // channels + patterns + shard channels
  std::uint64_t channels = 0;        // of them: SUBSCRIBE
  std::uint64_t patterns = 0;        // PSUBSCRIBE
  std::uint64_t shard_channels = 0;  // SSUBSCRIBE
  std::uint64_t age_seconds = 0;     // since the connection was accepted
  std::uint64_t queued_bytes = 0;    // queued plus handed to the kernel, not yet written
  std::uint64_t queued_frames = 0;
  std::uint64_t sent_frames = 0;  // frames handed to the socket writer
  std::uint64_t dropped_hard_limit = 0;
  std::uint64_t dropped_soft_limit = 0;
  std::uint64_t dropped_disconnect = 0;
  std::uint64_t conflated = 0;  // messages replaced by a newer one of their channel
  std::uint64_t loss_notices = 0;
};

// Extra INFO text. Called with the requested section in lower case ("" for a
// bare INFO); returns complete "# Title\r\nkey:value\r\n..." sections, or ""
// when it has nothing for that section.
using InfoProvider = std::function<std::string(std::string_view section)>;

}  // namespace ringcast::broker
