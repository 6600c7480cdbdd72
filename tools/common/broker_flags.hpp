// The broker's command-line flags, shared by ringcast-broker and
// ringcast-relay (which embeds a broker): the settings table
// (broker_settings.hpp) plus the files the secrets are read from. Each tool
// adds its own listen flags.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "broker_settings.hpp"
#include "config_schema.hpp"
#include "help_groups.hpp"
#include "ringcast/broker/config.hpp"
#include "token_secret.hpp"

namespace ringcast::tools {

class BrokerFlags {
 public:
  // Registers broker_settings() (config_schema.hpp) and the two secret files;
  // the settings write into `cfg`, which must outlive parsing.
  void add_to(CLI::App& app, broker::BrokerConfig& cfg) {
    add_settings(app, broker_settings(), cfg);
    auth_clients_ = app.get_option("--tls-auth-clients");
    auto* pass = app.get_option("--requirepass");
    app.add_option("--requirepass-file", password_file_, "Read the password from this file (first line)")
        ->excludes(pass)
        ->check(CLI::ExistingFile);
    // Tokens (docs/security.md): the secret comes from a file or the environment only.
    app.add_option("--token-secret-file", token_secret_file_,
                   std::string("Turn on HS256 token authentication (AUTH <sub> <token>) with the secret on this "
                               "file's first line (>= 32 bytes); or set ") +
                       kTokenSecretEnv)
        ->check(CLI::ExistingFile);
  }

  // After parsing: what the settings imply for each other (--tls-auth-clients
  // yes with a CA file; --port 0 with --tls-port turns the plain port off), and
  // the secrets from their files. Returns what is wrong, or nullopt. The
  // caller then checks the whole configuration with broker::validate.
  [[nodiscard]] std::optional<std::string> apply(broker::BrokerConfig& cfg) const {
    broker::TlsConfig& t = cfg.tls;
    if (auth_clients_->count() == 0 && !t.ca_cert_file.empty()) t.auth_clients = broker::TlsAuthClients::kYes;
    if (t.port && cfg.port == 0) cfg.plain_port = false;
    if (!password_file_.empty()) {
      std::ifstream in(password_file_);
      std::getline(in, cfg.requirepass);
      if (!cfg.requirepass.empty() && cfg.requirepass.back() == '\r') cfg.requirepass.pop_back();
      if (cfg.requirepass.empty()) return password_file_ + " holds no password";
    }
    return read_token_secret(token_secret_file_, cfg.token_secret);
  }

 private:
  const CLI::Option* auth_clients_ = nullptr;
  std::string password_file_;
  std::string token_secret_file_;
};

// The --help groups of the broker's settings, after each tool's "Common"
// group (help_groups.hpp); NATS comes after them in both tools.
[[nodiscard]] inline std::vector<HelpGroup> broker_help_groups() {
  return {
      {"Delivery: QoS 1 and history (docs/guarantees.md)",
       {"--ack-timeout", "--max-retries", "--max-in-flight", "--session-ttl", "--history", "--data-dir", "--fsync"}},
      {"Slow subscribers and limits (docs/broker.md)",
       {"--overflow-policy", "--hard-limit", "--soft-limit*", "--write-budget", "--send-buffer", "--pace-bytes",
        "--max-stall", "--max-block", "--max-bulk-len", "--max-args", "--max-subscriptions", "--max-connections",
        "--ws-max-message", "--dedupe", "--io-threads"}},
      {"Security: passwords, tokens, TLS (docs/security.md)",
       {"--requirepass*", "--token-secret-file", "--auth-timeout", "--max-unauthenticated", "--max-auth-failures",
        "--tls-*", "--ws-tls"}},
      {"NATS (docs/scale-out.md)", {"--nats*", "--jetstream*", "--stream-*"}},
  };
}

// HOST:PORT for a URL: an IPv6 literal goes in brackets ("[::1]:8080").
[[nodiscard]] inline std::string url_authority(const std::string& host, std::uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace ringcast::tools
