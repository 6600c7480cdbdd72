// The broker's settings table (config_schema.hpp): every BrokerConfig member a
// flag, a RINGCAST_* variable or a --config key can set, shared by
// ringcast-broker and ringcast-relay's embedded broker. Defaults are
// BrokerConfig's own; checks that relate settings live in broker::validate.
#pragma once

#include <string>
#include <vector>

#include "config_schema.hpp"
#include "ringcast/broker/config.hpp"

namespace ringcast::tools {

// --bind and --port: ringcast-broker's listener (ringcast-relay has --listen).
[[nodiscard]] inline const std::vector<Setting<broker::BrokerConfig>>& broker_listen_settings() {
  using Config = broker::BrokerConfig;
  static const std::vector<Setting<Config>> table = {
      schema::text<Config>("bind", RINGCAST_MEMBER(bind_address), "Address to listen on", "ADDRESS"),
      schema::number<Config>(
          "port", RINGCAST_MEMBER(port),
          "TCP port; 0 picks a free one (printed at startup), or with --tls-port turns the plain port off"),
  };
  return table;
}

[[nodiscard]] inline const std::vector<Setting<broker::BrokerConfig>>& broker_settings() {
  using Config = broker::BrokerConfig;
  using broker::BareDuration;
  static const std::vector<Setting<Config>> table = {
      schema::number<Config>("io-threads", RINGCAST_MEMBER(io_threads), "Broker I/O threads; 0 = one per core"),
      schema::optional_port<Config>(
          "ws-port", RINGCAST_MEMBER(ws_port),
          "WebSocket + JSON port on the broker's address (PopSub's protocol, the live page on /); "
          "0 picks a free one (printed); off unless given"),
      schema::size<Config>("ws-max-message", RINGCAST_MEMBER(ws_max_message),
                           "Largest WebSocket message a client may send, reassembled (larger: close 1009)"),
      schema::choice<Config>(
          "overflow-policy", RINGCAST_MEMBER(overflow_policy),
          "What a full connection queue does: drop-oldest, drop-newest, disconnect, block "
          "(refuse the publish for the whole channel) or conflate (keep the newest message per channel)",
          [](const std::string& s) { return broker::parse_overflow_policy(s); },
          [](broker::OverflowPolicy p) { return broker::to_string(p); },
          "drop-oldest, drop-newest, disconnect, block or conflate"),
      schema::size<Config>("hard-limit", RINGCAST_MEMBER(queue_limits.hard_bytes),
                           "Per-connection output limit that applies at once"),
      schema::size<Config>("soft-limit", RINGCAST_MEMBER(queue_limits.soft_bytes),
                           "Per-connection output limit that applies after --soft-limit-duration (0 = off)"),
      schema::with_old_name(schema::duration<Config>("soft-limit-duration", RINGCAST_MEMBER(queue_limits.soft_duration),
                                                     "How long the soft limit may be exceeded"),
                            "soft-seconds", "s"),
      schema::size<Config>("write-budget", RINGCAST_MEMBER(write_budget_bytes),
                           "Bytes per connection per writer wakeup"),
      schema::size<Config>("send-buffer", RINGCAST_MEMBER(send_buffer_bytes),
                           "Each client socket's kernel send buffer (SO_SNDBUF, at most net.core.wmem_max); "
                           "0 = the kernel's autotuning, up to 4 MB per slow subscriber beyond --hard-limit"),
      schema::size<Config>("pace-bytes", RINGCAST_MEMBER(pace_bytes),
                           "Pause publishers while a subscriber queue holds more than this (0 = never pause)"),
      schema::with_old_name(
          schema::duration<Config>("max-stall", RINGCAST_MEMBER(max_stall),
                                   "Longest publisher pause; a queue still over --pace-bytes after it is called slow"),
          "max-stall-ms", "ms"),
      schema::with_old_name(
          schema::duration<Config>("max-block", RINGCAST_MEMBER(max_block),
                                   "block policy: how long a publisher waits for room before its publish is refused"),
          "max-block-ms", "ms"),
      schema::flag<Config>("dedupe", RINGCAST_MEMBER(dedupe),
                           "Deliver one frame per connection however many of its subscriptions match"),
      schema::size<Config>("max-bulk-len", RINGCAST_MEMBER(max_bulk_len), "Longest request argument (at most 512mb)"),
      schema::number<Config>("max-args", RINGCAST_MEMBER(max_args), "Most arguments per request"),
      schema::number<Config>("max-subscriptions", RINGCAST_MEMBER(max_subscriptions),
                             "Channels + patterns per connection"),
      schema::number<Config>("max-connections", RINGCAST_MEMBER(max_connections), "Most simultaneous clients"),
      schema::number<Config>("max-unauthenticated", RINGCAST_MEMBER(max_unauthenticated),
                             "Most connections not yet authenticated (or not yet through the WebSocket upgrade or "
                             "TLS handshake); more are refused"),
      schema::with_old_name(
          schema::duration<Config>("auth-timeout", RINGCAST_MEMBER(auth_timeout),
                                   "Close connections that have not authenticated (or completed the WebSocket "
                                   "upgrade) within this time"),
          "auth-timeout-ms", "ms"),
      schema::number<Config>("max-auth-failures", RINGCAST_MEMBER(max_auth_failures),
                             "Close a connection after this many failed authentications (each answered after a "
                             "delay that grows per address)"),
      schema::text<Config>("requirepass", RINGCAST_MEMBER(requirepass),
                           "Require AUTH with this password (prefer --requirepass-file)"),
      schema::duration<Config>("ack-timeout", RINGCAST_MEMBER(ack_timeout),
                               "QoS 1: resend an unacked delivery (marked dup) after this long",
                               BareDuration::kSeconds),
      schema::number<Config>("max-retries", RINGCAST_MEMBER(max_retries),
                             "QoS 1: resends of an unacked delivery before it expires with a loss notice"),
      schema::number<Config>("max-in-flight", RINGCAST_MEMBER(max_in_flight),
                             "QoS 1: unacked deliveries per subscriber; later ones wait (JetStream's max_ack_pending)"),
      schema::duration<Config>("session-ttl", RINGCAST_MEMBER(session_ttl),
                               "QoS 1: drop a durable session (client_id) no connection holds, with its unacked "
                               "deliveries and resume floors, after this long; 0 = never",
                               BareDuration::kSeconds),
      schema::list<Config>("history", RINGCAST_MEMBER(history),
                           "Keep per-channel history: GLOB=SIZE[,TTL] (repeatable, first match wins), e.g. "
                           "'chat.*=1000,10m'; the last SIZE messages, none older than TTL (ms, s, m, h, d; bare = s)"),
      schema::text<Config>("data-dir", RINGCAST_MEMBER(data_dir),
                           "Keep history in LMDB in this directory across restarts (same offsets and epoch); "
                           "without it history lives in memory and its epoch changes at each start",
                           "DIR"),
      schema::choice<Config>(
          "fsync", RINGCAST_MEMBER(fsync),
          "When stored history reaches the disk (with --data-dir): always (before delivery), "
          "batch (synced every few ms) or off (when the kernel likes)",
          [](const std::string& s) { return broker::parse_fsync_mode(s); },
          [](broker::FsyncMode m) { return broker::to_string(m); }, "always, batch or off"),
      // TLS on the broker's listeners (docs/security.md, "TLS"), the names Redis uses.
      schema::optional_port<Config>(
          "tls-port", RINGCAST_MEMBER(tls.port),
          "RESP over TLS on the broker's address, beside the plain --port (or instead of it: --port 0); "
          "0 picks a free one (printed); off unless given"),
      schema::flag<Config>(
          "ws-tls", RINGCAST_MEMBER(tls.ws),
          "TLS on the --ws-port: wss:// for WebSocket clients, https:// for the live page and /metrics"),
      schema::file<Config>("tls-cert-file", RINGCAST_MEMBER(tls.cert_file),
                           "PEM certificate chain (leaf first) the TLS listeners present; read again on SIGHUP"),
      schema::file<Config>("tls-key-file", RINGCAST_MEMBER(tls.key_file),
                           "PEM private key of --tls-cert-file; read again on SIGHUP"),
      schema::file<Config>(
          "tls-ca-cert-file", RINGCAST_MEMBER(tls.ca_cert_file),
          "PEM CA certificates client certificates must chain to (--tls-auth-clients); read again on SIGHUP"),
      [] {
        // Its default depends on --tls-ca-cert-file (BrokerFlags::apply).
        auto s = schema::choice<Config>(
            "tls-auth-clients", RINGCAST_MEMBER(tls.auth_clients),
            "Client certificates: no, optional (verified when sent) or yes (required); "
            "default yes with --tls-ca-cert-file, else no",
            [](const std::string& v) { return broker::parse_tls_auth_clients(v); },
            [](broker::TlsAuthClients a) { return broker::to_string(a); }, "no, optional or yes");
        s.show_default = false;
        return s;
      }(),
      schema::with_old_name(
          schema::duration<Config>(
              "tls-handshake-timeout", RINGCAST_MEMBER(tls.handshake_timeout),
              "Close (and count) a TLS connection whose handshake has not completed within this time"),
          "tls-handshake-timeout-ms", "ms"),
      schema::flag<Config>("tls-kernel", RINGCAST_MEMBER(tls.kernel_tls),
                           "Let the kernel encrypt TLS writes where it offers kTLS (one writev per wakeup, as plain); "
                           "experimental: not run in CI, and TLS 1.3 key updates are not answered on it"),
  };
  return table;
}

}  // namespace ringcast::tools
