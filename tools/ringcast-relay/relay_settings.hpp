// ringcast-relay's own settings tables (config_schema.hpp): the rings
// --nats-in creates, publishing to NATS (the credit window, docs/scale-out.md)
// and into a JetStream stream, and the drain batch. Defaults are the relay
// structs' own. The broker's settings (broker_settings.hpp) and the shared NATS
// ones (nats_settings.hpp) come on top.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config_schema.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::tools {

// --nats-in-capacity, --nats-in-max-message, --nats-in-lossy.
[[nodiscard]] inline const std::vector<Setting<relay::NatsIngressConfig>>& nats_in_ring_settings() {
  using Config = relay::NatsIngressConfig;
  static const std::vector<Setting<Config>> table = {
      schema::number<Config>("nats-in-capacity", RINGCAST_MEMBER(ring_capacity), "Slots of a ring --nats-in creates"),
      schema::size<Config>("nats-in-max-message", RINGCAST_MEMBER(ring_max_message),
                           "Largest message of a ring --nats-in creates; 0: 64kb, or what the capacity allows. A "
                           "longer NATS message is counted as oversize and logged"),
      schema::flag<Config>("nats-in-lossy", RINGCAST_MEMBER(ring_lossy),
                           "A ring --nats-in creates is lossy (never blocks NATS delivery; slow readers are lapped)"),
  };
  return table;
}

// Publishing to NATS: the reconnect buffer, batching and the credit window.
[[nodiscard]] inline const std::vector<Setting<relay::NatsConfig>>& nats_publish_settings() {
  using Config = relay::NatsConfig;
  using std::chrono::milliseconds;
  static const std::vector<Setting<Config>> table = {
      schema::size<Config>("nats-reconnect-buffer", RINGCAST_MEMBER(reconnect_buffer_bytes),
                           "Bytes libnats buffers while reconnecting; beyond it publishes are dropped and counted"),
      schema::number<Config>("nats-batch", RINGCAST_MEMBER(batch),
                             "Ring messages per NATS message (1..4096; fixed-subject rings). 1: one NATS message "
                             "each, readable by any NATS client; more: batches only a ringcast ingress unpacks "
                             "(docs/scale-out.md)"),
      schema::with_old_name(schema::duration<Config>("nats-reconnect-wait", RINGCAST_MEMBER(reconnect_wait),
                                                     "Pause between NATS reconnect attempts"),
                            "nats-reconnect-wait-ms", "ms"),
      schema::number<Config>("nats-window", RINGCAST_MEMBER(window),
                             "Core NATS, fixed-subject rings: ring positions published and not yet acknowledged by "
                             "every ringcast ingress receiving them; while that many are in flight the ring waits "
                             "(its producer meets a full ring)",
                             std::uint64_t{1}, std::uint64_t{1} << 40),
      // At least four of the ingress's keepalives (250 ms) while it is held by
      // a full ring: a shorter timeout would give up on a live ingress.
      schema::with_old_name(
          schema::duration<Config>("nats-ack-timeout", RINGCAST_MEMBER(ack_timeout),
                                   "An ingress silent this long while the window is full is no longer waited for (it "
                                   "counts what it misses as lost); 1s to 1h",
                                   broker::BareDuration::kRefused, milliseconds(1000), milliseconds(3'600'000)),
          "nats-ack-timeout-ms", "ms"),
  };
  return table;
}

// Publishing into the --jetstream stream, and the stream's limits.
[[nodiscard]] inline const std::vector<Setting<relay::JetStreamConfig>>& jetstream_publish_settings() {
  using Config = relay::JetStreamConfig;
  static const std::vector<Setting<Config>> table = {
      schema::list<Config>(
          "stream-subjects", RINGCAST_MEMBER(subjects),
          "Subjects the stream captures (default: the rings' subjects; a topic route PREFIX.* gives PREFIX.>)", ','),
      schema::duration<Config>("stream-max-age", RINGCAST_MEMBER(max_age),
                               "Discard stream messages older than this (0: no limit)"),
      [] {
        Setting<Config> s = schema::size<Config>("stream-max-bytes", RINGCAST_MEMBER(max_bytes),
                                                 "Discard the oldest stream messages beyond this size (0: no limit)");
        // JetStream's "no limit" is -1; the setting writes it as 0.
        s.parse = [size = s.parse](Config& c, const std::string& text) {
          auto wrong = size(c, text);
          if (!wrong && c.max_bytes == 0) c.max_bytes = -1;
          return wrong;
        };
        s.format = [](const Config& c) {
          return broker::format_size(c.max_bytes < 0 ? 0 : static_cast<std::size_t>(c.max_bytes));
        };
        return s;
      }(),
      schema::duration<Config>("stream-duplicate-window", RINGCAST_MEMBER(duplicate_window),
                               "How long the stream drops a republished Nats-Msg-Id as a duplicate"),
      schema::choice<Config>(
          "stream-storage", RINGCAST_MEMBER(memory_storage), "file or memory (a new stream only)",
          [](const std::string& s) -> std::optional<bool> {
            if (s == "file" || s == "memory") return s == "memory";
            return std::nullopt;
          },
          [](bool memory) { return memory ? "memory" : "file"; }, "file or memory"),
      schema::number<Config>("stream-replicas", RINGCAST_MEMBER(replicas),
                             "Stream replicas in a JetStream cluster (1..5)"),
      schema::number<Config>("jetstream-max-pending", RINGCAST_MEMBER(max_pending),
                             "Publishes awaiting their ack; at the limit the ring's reader waits (the ring fills "
                             "behind it)"),
      schema::with_old_name(schema::duration<Config>("jetstream-ack-timeout", RINGCAST_MEMBER(ack_timeout),
                                                     "An ack not back within this is retried"),
                            "jetstream-ack-timeout-ms", "ms"),
      schema::number<Config>("jetstream-max-attempts", RINGCAST_MEMBER(max_attempts),
                             "Attempts per message before it is given up (counted in js_failed, logged); 0: until "
                             "stopped"),
  };
  return table;
}

// --batch.
[[nodiscard]] inline const std::vector<Setting<relay::RelayConfig>>& relay_settings() {
  using Config = relay::RelayConfig;
  static const std::vector<Setting<Config>> table = {
      schema::number<Config>("batch", RINGCAST_MEMBER(batch), "Most messages taken from a ring per drain"),
  };
  return table;
}

}  // namespace ringcast::tools
