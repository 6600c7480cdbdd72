// The broker's command-line flags, shared by ringcast-broker and
// ringcast-relay (which embeds a broker): one place for their names,
// defaults, help texts and validation. Each tool adds its own listen flags.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ringcast/broker/config.hpp"
#include "token_secret.hpp"

namespace ringcast::tools {

class BrokerFlags {
 public:
  // Registers the flags; numeric ones write straight into `cfg`, which must
  // outlive parsing.
  void add_to(CLI::App& app, broker::BrokerConfig& cfg) {
    app.add_option("--io-threads", cfg.io_threads, "Broker I/O threads; 0 = one per core")->capture_default_str();
    app.add_option("--ws-port", ws_port_,
                   "WebSocket + JSON port on the broker's address (PopSub's protocol, the live page on /); "
                   "0 picks a free one (printed); off unless given")
        ->check(CLI::Range(0, 65535));
    app.add_option("--ws-max-message", ws_max_message_,
                   "Largest WebSocket message a client may send, reassembled (larger: close 1009)")
        ->capture_default_str();
    app.add_option("--overflow-policy", policy_,
                   "What a full connection queue does: drop-oldest, drop-newest, disconnect, block "
                   "(refuse the publish for the whole channel) or conflate (keep the newest message per channel)")
        ->capture_default_str();
    app.add_option("--hard-limit", hard_, "Per-connection output limit that applies at once")->capture_default_str();
    app.add_option("--soft-limit", soft_, "Per-connection output limit that applies after --soft-seconds (0 = off)")
        ->capture_default_str();
    app.add_option("--soft-seconds", soft_seconds_, "How long the soft limit may be exceeded")->capture_default_str();
    app.add_option("--write-budget", budget_, "Bytes per connection per writer wakeup")->capture_default_str();
    app.add_option("--pace-bytes", pace_,
                   "Pause publishers while a subscriber queue holds more than this (0 = never pause)")
        ->capture_default_str();
    app.add_option("--max-stall-ms", max_stall_ms_,
                   "Longest publisher pause; a queue still over --pace-bytes after it is called slow")
        ->capture_default_str();
    app.add_option("--max-block-ms", max_block_ms_,
                   "block policy: how long a publisher waits for room before its publish is refused")
        ->capture_default_str();
    app.add_flag("--dedupe", cfg.dedupe, "Deliver one frame per connection however many of its subscriptions match");
    app.add_option("--max-bulk-len", max_bulk_, "Longest request argument (at most 512mb)")->capture_default_str();
    app.add_option("--max-args", cfg.max_args, "Most arguments per request")->capture_default_str();
    app.add_option("--max-subscriptions", cfg.max_subscriptions, "Channels + patterns per connection")
        ->capture_default_str();
    app.add_option("--max-connections", cfg.max_connections, "Most simultaneous clients")->capture_default_str();
    app.add_option("--auth-timeout-ms", auth_timeout_ms_,
                   "Close connections that have not authenticated within this time")
        ->capture_default_str();
    auto* pass =
        app.add_option("--requirepass", cfg.requirepass, "Require AUTH with this password (prefer --requirepass-file)");
    app.add_option("--requirepass-file", password_file_, "Read the password from this file (first line)")
        ->excludes(pass)
        ->check(CLI::ExistingFile);
    app.add_option("--ack-timeout", ack_timeout_,
                   "QoS 1: resend an unacked delivery (marked dup) after this long; a number with ms or s "
                   "(bare: seconds)")
        ->capture_default_str();
    app.add_option("--max-retries", cfg.max_retries,
                   "QoS 1: resends of an unacked delivery before it expires with a loss notice")
        ->capture_default_str();
    app.add_option("--max-in-flight", cfg.max_in_flight,
                   "QoS 1: unacked deliveries per subscriber; later ones wait (JetStream's max_ack_pending)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_option("--session-ttl", session_ttl_,
                   "QoS 1: drop a durable session (client_id) no connection holds, with its unacked deliveries and "
                   "resume floors, after this long: ms, s, m, h or d (bare: seconds); 0 = never")
        ->capture_default_str();
    add_token_flag(app);
    app.add_option("--history", cfg.history,
                   "Keep per-channel history: GLOB=SIZE[,TTL] (repeatable, first match wins), e.g. 'chat.*=1000,10m'; "
                   "the last SIZE messages, none older than TTL (ms, s, m, h, d; bare = s)")
        ->take_all();
    app.add_option("--data-dir", cfg.data_dir,
                   "Keep history in LMDB in this directory across restarts (same offsets and epoch); "
                   "without it history lives in memory and its epoch changes at each start");
    app.add_option("--fsync", fsync_,
                   "When stored history reaches the disk (with --data-dir): always (before delivery), "
                   "batch (synced every few ms) or off (when the kernel likes)")
        ->capture_default_str();
  }

  // After parsing: converts the textual flags into `cfg`. Returns what is
  // wrong with them, or nullopt.
  [[nodiscard]] std::optional<std::string> apply(broker::BrokerConfig& cfg) const {
    const auto fsync = broker::parse_fsync_mode(fsync_);
    if (!fsync) return fsync.error();
    cfg.fsync = *fsync;
    const auto policy = broker::parse_overflow_policy(policy_);
    if (!policy) return "--overflow-policy must be drop-oldest, drop-newest, disconnect, block or conflate";
    cfg.overflow_policy = *policy;
    const auto hard = broker::parse_size(hard_);
    const auto soft = broker::parse_size(soft_);
    const auto budget = broker::parse_size(budget_);
    const auto max_bulk = broker::parse_size(max_bulk_);
    const auto pace = broker::parse_size(pace_);
    const auto ws_max = broker::parse_size(ws_max_message_);
    if (!hard || !soft || !budget || !max_bulk || !pace || !ws_max) {
      return "sizes are numbers with an optional k/kb/m/mb/g/gb suffix";
    }
    if (*ws_max == 0) return "--ws-max-message must be > 0";
    cfg.ws_max_message = *ws_max;
    if (ws_port_ >= 0) cfg.ws_port = static_cast<std::uint16_t>(ws_port_);
    cfg.queue_limits.hard_bytes = *hard;
    cfg.queue_limits.soft_bytes = *soft;
    cfg.queue_limits.soft_duration = std::chrono::seconds(soft_seconds_);
    cfg.write_budget_bytes = *budget;
    cfg.pace_bytes = *pace;
    if (max_stall_ms_ == 0) return "--max-stall-ms must be > 0";
    cfg.max_stall = std::chrono::milliseconds(max_stall_ms_);
    cfg.max_block = std::chrono::milliseconds(max_block_ms_);
    cfg.max_bulk_len = *max_bulk;
    cfg.auth_timeout = std::chrono::milliseconds(auth_timeout_ms_);
    const auto ack_timeout = parse_duration_ms(ack_timeout_);
    if (!ack_timeout || *ack_timeout == 0)
      return "--ack-timeout must be a positive number with ms or s (bare: seconds)";
    cfg.ack_timeout = std::chrono::milliseconds(*ack_timeout);
    const auto session_ttl = broker::parse_duration(session_ttl_);
    if (!session_ttl) return "--session-ttl must be a number with ms, s, m, h or d (bare: seconds), or 0 for never";
    cfg.session_ttl = *session_ttl;
    if (!password_file_.empty()) {
      std::ifstream in(password_file_);
      std::getline(in, cfg.requirepass);
      if (!cfg.requirepass.empty() && cfg.requirepass.back() == '\r') cfg.requirepass.pop_back();
      if (cfg.requirepass.empty()) return password_file_ + " holds no password";
    }
    return read_token_secret(token_secret_file_, cfg.token_secret);
  }

 private:
  // Tokens (docs/security.md): the secret comes from a file or the environment only.
  void add_token_flag(CLI::App& app) {
    app.add_option("--token-secret-file", token_secret_file_,
                   std::string("Turn on HS256 token authentication (AUTH <sub> <token>) with the secret on this "
                               "file's first line (>= 32 bytes); or set ") +
                       kTokenSecretEnv)
        ->check(CLI::ExistingFile);
  }

  // "250ms", "5s", "5" (seconds) -> milliseconds; nullopt if malformed.
  static std::optional<std::uint64_t> parse_duration_ms(std::string s) {
    std::uint64_t mult = 1000;
    if (s.size() > 2 && s.compare(s.size() - 2, 2, "ms") == 0) {
      mult = 1;
      s.resize(s.size() - 2);
    } else if (s.size() > 1 && s.back() == 's') {
      s.pop_back();
    }
    std::uint64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || v > UINT32_MAX) return std::nullopt;
    return v * mult;
  }

  int ws_port_ = -1;  // -1: no WebSocket listener
  std::string ack_timeout_ = "5s";
  std::string session_ttl_ = "24h";
  std::string ws_max_message_ = "1mb";
  std::string policy_ = "disconnect";
  std::string hard_ = "32mb";
  std::string soft_ = "8mb";
  unsigned soft_seconds_ = 60;
  std::string budget_ = "256kb";
  std::string pace_ = "1mb";
  unsigned max_stall_ms_ = 200;
  unsigned max_block_ms_ = 0;
  std::string max_bulk_ = "32mb";
  unsigned auth_timeout_ms_ = 10000;
  std::string password_file_;
  std::string token_secret_file_;
  std::string fsync_ = "batch";
};

// TLS on the broker's listeners (docs/security.md, "TLS"), the names Redis
// uses: --tls-port, --tls-cert-file, --tls-key-file, --tls-ca-cert-file,
// --tls-auth-clients; plus --ws-tls for the WebSocket/HTTP port. Separate
// from BrokerFlags so that a tool adds them only once it serves them
// (ringcast-broker does; ringcast-relay does not yet).
class BrokerTlsFlags {
 public:
  void add_to(CLI::App& app) {
    app.add_option("--tls-port", port_,
                   "RESP over TLS on the broker's address, beside the plain --port (or instead of it: --port 0); "
                   "0 picks a free one (printed); off unless given")
        ->check(CLI::Range(0, 65535));
    app.add_flag("--ws-tls", ws_,
                 "TLS on the --ws-port: wss:// for WebSocket clients, https:// for the live page and /metrics");
    app.add_option("--tls-cert-file", cert_file_,
                   "PEM certificate chain (leaf first) the TLS listeners present; read again on SIGHUP")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-key-file", key_file_, "PEM private key of --tls-cert-file; read again on SIGHUP")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-ca-cert-file", ca_file_,
                   "PEM CA certificates client certificates must chain to (--tls-auth-clients); read again on SIGHUP")
        ->check(CLI::ExistingFile);
    app.add_option("--tls-auth-clients", auth_clients_,
                   "Client certificates: no, optional (verified when sent) or yes (required); "
                   "default yes with --tls-ca-cert-file, else no");
    app.add_option("--tls-handshake-timeout-ms", handshake_timeout_ms_,
                   "Close (and count) a TLS connection whose handshake has not completed within this time")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    app.add_flag("--tls-kernel", kernel_,
                 "Let the kernel encrypt TLS writes where it offers kTLS (one writev per wakeup, as plain); "
                 "experimental: not run in CI, and TLS 1.3 key updates are not answered on it");
  }

  // After parsing: TLS settings into `cfg` (`cfg.port` already parsed: 0
  // with --tls-port turns the plain port off). Returns what is wrong, or nullopt.
  [[nodiscard]] std::optional<std::string> apply(broker::BrokerConfig& cfg) const {
    broker::TlsConfig& t = cfg.tls;
    if (port_ >= 0) t.port = static_cast<std::uint16_t>(port_);
    t.ws = ws_;
    t.cert_file = cert_file_;
    t.key_file = key_file_;
    t.ca_cert_file = ca_file_;
    if (auth_clients_.empty()) {
      t.auth_clients = ca_file_.empty() ? broker::TlsAuthClients::kNo : broker::TlsAuthClients::kYes;
    } else {
      const auto a = broker::parse_tls_auth_clients(auth_clients_);
      if (!a) return "--tls-auth-clients must be no, optional or yes";
      t.auth_clients = *a;
    }
    if (t.auth_clients != broker::TlsAuthClients::kNo && ca_file_.empty()) {
      return "--tls-auth-clients optional or yes needs --tls-ca-cert-file";
    }
    t.handshake_timeout = std::chrono::milliseconds(handshake_timeout_ms_);
    t.kernel_tls = kernel_;
    if (t.port && cfg.port == 0) cfg.plain_port = false;
    if (t.enabled() && (t.cert_file.empty() || t.key_file.empty())) {
      return "--tls-port and --ws-tls need --tls-cert-file and --tls-key-file";
    }
    if (t.ws && !cfg.ws_port) return "--ws-tls needs --ws-port";
    if (!t.enabled() && (!t.cert_file.empty() || !t.key_file.empty() || !t.ca_cert_file.empty())) {
      return "--tls-cert-file, --tls-key-file and --tls-ca-cert-file need --tls-port or --ws-tls";
    }
    return std::nullopt;
  }

 private:
  int port_ = -1;  // -1: no TLS RESP listener
  bool ws_ = false;
  bool kernel_ = false;
  std::string cert_file_;
  std::string key_file_;
  std::string ca_file_;
  std::string auth_clients_;  // empty: yes with a CA file, else no
  unsigned handshake_timeout_ms_ = 10000;
};

// HOST:PORT for a URL: an IPv6 literal goes in brackets ("[::1]:8080").
[[nodiscard]] inline std::string url_authority(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace ringcast::tools
