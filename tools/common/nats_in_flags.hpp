// The NATS ingress's command-line flags, shared by ringcast-broker
// (`--nats-in SUBJECT[=CHANNEL]`) and ringcast-relay (`--nats-in`,
// `--nats-in-broker`): one place for the names, defaults, help texts and
// validation of the pending limits and of the JetStream durable consumer
// (docs/scale-out.md, "JetStream"). Each tool adds its own `--jetstream STREAM`
// (the relay's also publishes into the stream; the broker's only reads it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ringcast/broker/config.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::tools {

class NatsInFlags {
 public:
  // --nats-in-pending-msgs, --nats-in-pending-bytes. `cfg` must outlive parsing.
  void add_pending(CLI::App& app, relay::NatsIngressConfig& cfg) {
    app.add_option("--nats-in-pending-msgs", cfg.pending_msgs,
                   "libnats pending limit per --nats-in subscription, messages (-1: none); beyond it libnats drops "
                   "(counted, and seen as a gap). Not used with --jetstream (the ingress pulls)")
        ->capture_default_str();
    app.add_option("--nats-in-pending-bytes", pending_bytes_, "libnats pending limit per --nats-in subscription, bytes")
        ->capture_default_str();
  }

  // The ingress side of --jetstream: --jetstream-durable, --jetstream-deliver,
  // --jetstream-ack-wait, --jetstream-fetch-batch.
  void add_jetstream(CLI::App& app) {
    app.add_option("--jetstream-durable", durable_,
                   "Ingress (--nats-in with --jetstream): the durable consumer's name (default "
                   "ringcast-<host>-<ring path> for a ring, ringcast-<host>-broker-<subject> for a broker channel; "
                   "one ingress process per durable, one route per name)");
    app.add_option(
           "--jetstream-deliver", deliver_,
           "Ingress: where a durable created for the first time starts: all (the stream's first message) or new")
        ->check(CLI::IsMember({"all", "new"}))
        ->capture_default_str();
    app.add_option("--jetstream-ack-wait", ack_wait_, "Ingress: unacked this long, the server delivers a message again")
        ->capture_default_str();
    app.add_option("--jetstream-fetch-batch", fetch_batch_,
                   "Ingress: most messages per pull request (one AckAll ack per batch)")
        ->capture_default_str();
  }

  // Validates the pending limits into `cfg`. A value: the usage error's text.
  [[nodiscard]] std::optional<std::string> apply(relay::NatsIngressConfig& cfg) const {
    const auto bytes = broker::parse_size(pending_bytes_);
    if (!bytes || *bytes > static_cast<std::size_t>(INT32_MAX)) return "--nats-in-pending-bytes: bad size";
    cfg.pending_bytes = static_cast<int>(*bytes);
    return std::nullopt;
  }

  // Validates the ingress's JetStream flags into `js`. A value: the usage
  // error's text.
  [[nodiscard]] std::optional<std::string> apply(relay::JetStreamConfig& js) const {
    js.durable = durable_;
    js.deliver_new = deliver_ == "new";
    const auto ack_wait = relay::parse_duration(ack_wait_);
    if (!ack_wait || ack_wait->count() < 1000) return "--jetstream-ack-wait: a duration of at least 1s";
    js.ack_wait = *ack_wait;
    if (fetch_batch_ < 1) return "--jetstream-fetch-batch must be at least 1";
    js.fetch_batch = fetch_batch_;
    return std::nullopt;
  }

 private:
  std::string pending_bytes_ = "64mb";
  std::string durable_;
  std::string deliver_ = "all";
  std::string ack_wait_ = "30s";
  int fetch_batch_ = 256;
};

}  // namespace ringcast::tools
