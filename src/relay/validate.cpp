// relay::validate: every check of a RelayConfig that needs nothing started.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "invalid_config.hpp"
#include "relay/jetstream_publisher.hpp"
#include "ringcast/relay/relay.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

namespace {

tl::expected<void, RelayError> validate_jetstream(const JetStreamConfig& js, const std::vector<RingRoute>& rings) {
  if (js.stream.empty() || js.stream.find_first_of(".*> \t") != std::string::npos) {
    return invalid_config(
        fmt::format("--jetstream '{}': a stream name is non-empty without '.', '*', '>' or spaces", js.stream));
  }
  if (js.max_pending < 1) return invalid_config("--jetstream-max-pending must be at least 1");
  if (js.ack_timeout.count() < 1) return invalid_config("--jetstream-ack-timeout must be positive");
  if (js.replicas < 1 || js.replicas > 5) return invalid_config("--stream-replicas is 1..5");
  if (js.subjects.empty() && !rings.empty()) {
    if (auto subjects = JetStreamPublisher::route_subjects(rings); !subjects) return invalid_config(subjects.error());
  }
  return {};
}

}  // namespace

tl::expected<void, RelayError> validate(const RelayConfig& config) {
  const bool ingress = !config.nats_rings_in.empty() || !config.nats_broker_in.empty();
  if (config.rings.empty() && !ingress) return invalid_config("no --ring, --nats-in or --nats-in-broker given");
  if (!config.rings.empty() && !config.broker && !config.nats)
    return invalid_config("no sink: enable the broker, NATS or both");
  if (ingress && !config.nats)
    return invalid_config("--nats-in and --nats-in-broker need --nats URL (the server to subscribe to)");
  if (config.cluster && !config.broker)
    return invalid_config("--cluster joins the embedded broker to a cluster: the relay runs no broker");
  if (!config.nats_broker_in.empty() && !config.broker) {
    return invalid_config("--nats-in-broker needs the broker (give --listen with --nats)");
  }
  if (config.nats) {
    const NatsConfig& nats = *config.nats;
    if (nats.batch == 0 || nats.batch > kMaxNatsBatch) {
      return invalid_config(fmt::format("--nats-batch must be 1..{}", kMaxNatsBatch));
    }
    if (nats.jetstream && nats.batch > 1) {
      // JetStream deduplicates (Nats-Msg-Id) and acknowledges whole stored
      // messages: a batch would share one id and one ack among its ring
      // messages, and batches republished after a relay restart need not line
      // up with the stored ones, so the dedupe would let them in twice.
      return invalid_config(
          "--nats-batch over 1 is for core NATS: with --jetstream every ring message is its own JetStream message, "
          "with its own Nats-Msg-Id and ack (a batch would share one; republished batches need not match the stored "
          "ones, so duplicates would pass the dedupe)");
    }
    if (nats.jetstream) {
      if (auto js = validate_jetstream(*nats.jetstream, config.rings); !js) return js;
    }
  }
  for (const RingRoute& r : config.rings) {
    if (r.path.empty()) return invalid_config("a ring has an empty path");
    if (!r.topic_in_payload && r.name.empty()) return invalid_config(fmt::format("ring {}: empty channel", r.path));
    if (config.nats && !r.topic_in_payload && !is_valid_subject(r.name)) {
      return invalid_config(fmt::format("ring {}: '{}' is not a valid NATS subject to publish on", r.path, r.name));
    }
  }
  for (std::size_t i = 0; i < config.rings.size(); ++i) {
    for (std::size_t j = i + 1; j < config.rings.size(); ++j) {
      if (config.rings[i].path == config.rings[j].path) {
        return invalid_config(fmt::format("ring {} is given twice", config.rings[i].path));
      }
    }
  }
  if (config.broker) {
    if (auto b = broker::validate(*config.broker); !b) return invalid_config(b.error().detail);
  }
  return {};
}

}  // namespace ringcast::relay
