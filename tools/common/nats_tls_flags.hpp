// TLS on the connection to NATS, shared by ringcast-relay (its publisher and
// its --nats-in / --nats-in-broker ingress: one connection) and
// ringcast-broker (--nats-in): --nats-tls-ca-cert-file, --nats-tls-cert-file,
// --nats-tls-key-file. TLS is on when any of them is given or a --nats URL is
// tls:// (docs/security.md, "TLS to NATS").
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ringcast/relay/relay.hpp"

namespace ringcast::tools {

class NatsTlsFlags {
 public:
  void add_to(CLI::App& app) {
    app.add_option("--nats-tls-ca-cert-file", ca_file_,
                   "PEM CA certificates the NATS server's certificate must chain to; turns TLS to NATS on "
                   "(as does a tls:// --nats URL). The certificate must also name the URL's host")
        ->check(CLI::ExistingFile);
    app.add_option("--nats-tls-cert-file", cert_file_,
                   "PEM client certificate chain for NATS (a server with verify: true); turns TLS to NATS on")
        ->check(CLI::ExistingFile);
    app.add_option("--nats-tls-key-file", key_file_, "PEM private key of --nats-tls-cert-file")
        ->check(CLI::ExistingFile);
  }

  // True when any of the flags was given (they need --nats).
  [[nodiscard]] bool given() const { return !ca_file_.empty() || !cert_file_.empty() || !key_file_.empty(); }

  // After parsing: the TLS settings into `n`. Returns what is wrong, or nullopt.
  [[nodiscard]] std::optional<std::string> apply(relay::NatsConfig& n) const {
    if (cert_file_.empty() != key_file_.empty()) return "--nats-tls-cert-file and --nats-tls-key-file go together";
    n.tls.enabled = given();
    n.tls.ca_cert_file = ca_file_;
    n.tls.cert_file = cert_file_;
    n.tls.key_file = key_file_;
    return std::nullopt;
  }

 private:
  std::string ca_file_;
  std::string cert_file_;
  std::string key_file_;
};

}  // namespace ringcast::tools
