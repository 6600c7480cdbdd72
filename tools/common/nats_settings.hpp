// The NATS settings tables (config_schema.hpp) that ringcast-broker
// (`--nats-in SUBJECT[=CHANNEL]`) and ringcast-relay (`--nats-in`,
// `--nats-in-broker`, publishing to NATS) share: libnats' pending limits of an
// ingress, the ingress side of JetStream (docs/scale-out.md, "JetStream") and
// TLS to NATS (docs/security.md, "TLS to NATS"). Each tool adds its own
// `--jetstream STREAM` (the relay's also publishes into the stream; the
// broker's only reads it). Defaults are the relay structs' own.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config_schema.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::tools {

// --nats-in-pending-msgs, --nats-in-pending-bytes.
[[nodiscard]] inline const std::vector<Setting<relay::NatsIngressConfig>>& nats_in_pending_settings() {
  using Config = relay::NatsIngressConfig;
  static const std::vector<Setting<Config>> table = {
      schema::number<Config>(
          "nats-in-pending-msgs", RINGCAST_MEMBER(pending_msgs),
          "libnats pending limit per --nats-in subscription, messages (-1: none); beyond it "
          "libnats drops (counted, and seen as a gap). Not used with --jetstream (the ingress pulls)",
          -1),
      schema::size<Config>("nats-in-pending-bytes", RINGCAST_MEMBER(pending_bytes),
                           "libnats pending limit per --nats-in subscription, bytes"),
  };
  return table;
}

// The ingress side of --jetstream: --jetstream-durable, --jetstream-deliver,
// --jetstream-ack-wait, --jetstream-fetch-batch.
[[nodiscard]] inline const std::vector<Setting<relay::JetStreamConfig>>& jetstream_ingress_settings() {
  using Config = relay::JetStreamConfig;
  static const std::vector<Setting<Config>> table = {
      schema::text<Config>("jetstream-durable", RINGCAST_MEMBER(durable),
                           "Ingress (--nats-in with --jetstream): the durable consumer's name (default "
                           "ringcast-<host>-<ring path> for a ring, ringcast-<host>-broker-<subject> for a broker "
                           "channel; one ingress process per durable, one route per name)"),
      schema::choice<Config>(
          "jetstream-deliver", RINGCAST_MEMBER(deliver_new),
          "Ingress: where a durable created for the first time starts: all (the stream's first message) or new",
          [](const std::string& s) -> std::optional<bool> {
            if (s == "all" || s == "new") return s == "new";
            return std::nullopt;
          },
          [](bool deliver_new) { return deliver_new ? "new" : "all"; }, "all or new"),
      schema::duration<Config>("jetstream-ack-wait", RINGCAST_MEMBER(ack_wait),
                               "Ingress: unacked this long, the server delivers a message again",
                               broker::BareDuration::kRefused, std::chrono::seconds(1)),
      schema::number<Config>("jetstream-fetch-batch", RINGCAST_MEMBER(fetch_batch),
                             "Ingress: most messages per pull request (one AckAll ack per batch)", 1),
  };
  return table;
}

// --nats-tls-ca-cert-file, --nats-tls-cert-file, --nats-tls-key-file. TLS is on
// when any of them is given or a --nats URL is tls:// (finish_nats_tls).
[[nodiscard]] inline const std::vector<Setting<relay::NatsConfig>>& nats_tls_settings() {
  using Config = relay::NatsConfig;
  static const std::vector<Setting<Config>> table = {
      schema::file<Config>("nats-tls-ca-cert-file", RINGCAST_MEMBER(tls.ca_cert_file),
                           "PEM CA certificates the NATS server's certificate must chain to; turns TLS to NATS on "
                           "(as does a tls:// --nats URL). The certificate must also name the URL's host"),
      schema::file<Config>("nats-tls-cert-file", RINGCAST_MEMBER(tls.cert_file),
                           "PEM client certificate chain for NATS (a server with verify: true); turns TLS to NATS on"),
      schema::file<Config>("nats-tls-key-file", RINGCAST_MEMBER(tls.key_file),
                           "PEM private key of --nats-tls-cert-file"),
  };
  return table;
}

// --cluster-subject-prefix, --cluster-settle-timeout, ... (docs/cluster.md).
[[nodiscard]] inline const std::vector<Setting<relay::ClusterConfig>>& cluster_settings() {
  using Config = relay::ClusterConfig;
  static const std::vector<Setting<Config>> table = {
      schema::text<Config>("cluster-subject-prefix", RINGCAST_MEMBER(subject_prefix),
                           "With --cluster: the NATS subjects' first token (<prefix>.c.<channel>); every node of one "
                           "cluster uses the same, two clusters on one NATS differ"),
      schema::duration<Config>("cluster-settle-timeout", RINGCAST_MEMBER(settle_timeout),
                               "With --cluster: how long a SUBSCRIBE's confirmation waits for the NATS server to hold "
                               "the new interest; past it the confirmation goes anyway (counted)",
                               broker::BareDuration::kRefused, std::chrono::milliseconds(0)),
      schema::number<Config>("cluster-pending-msgs", RINGCAST_MEMBER(pending_msgs),
                             "With --cluster: how many messages from other nodes this node may hold unpublished per "
                             "NATS subscription before libnats drops (counted, and a gap its subscribers are told)",
                             1),
      schema::size<Config>("cluster-pending-bytes", RINGCAST_MEMBER(pending_bytes),
                           "With --cluster: the same limit in bytes"),
      schema::number<Config>("cluster-history-replicas", RINGCAST_MEMBER(history_replicas),
                             "With --cluster and --history: the JetStream replicas of the cluster's history stream "
                             "(3 survives the loss of one NATS server of three; at most the NATS servers' number)",
                             1, 5),
      schema::duration<Config>("cluster-store-timeout", RINGCAST_MEMBER(store_timeout),
                               "With --cluster and --history: how long a QoS 1 publish on a retained channel waits "
                               "for JetStream to store it; past it the publisher is told it was not stored",
                               broker::BareDuration::kRefused, std::chrono::milliseconds(1)),
      schema::number<Config>("cluster-max-pending-stores", RINGCAST_MEMBER(max_pending_stores),
                             "With --cluster and --history: how many stores this node may have awaiting JetStream's "
                             "acknowledgement; a publish past it is held (its connection not read) for up to "
                             "--cluster-store-timeout, then refused",
                             std::int64_t{1}, std::int64_t{1} << 30),
  };
  return table;
}

// True when any --nats-tls-* file is set (they need --nats).
[[nodiscard]] inline bool nats_tls_given(const relay::NatsConfig& n) {
  return !n.tls.ca_cert_file.empty() || !n.tls.cert_file.empty() || !n.tls.key_file.empty();
}

// After parsing: turns TLS to NATS on when a file is set. Returns what is
// wrong, or nullopt.
[[nodiscard]] inline std::optional<std::string> finish_nats_tls(relay::NatsConfig& n) {
  if (n.tls.cert_file.empty() != n.tls.key_file.empty()) {
    return "--nats-tls-cert-file and --nats-tls-key-file go together";
  }
  n.tls.enabled = nats_tls_given(n);
  return std::nullopt;
}

}  // namespace ringcast::tools
