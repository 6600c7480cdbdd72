#include "broker/tls/tls_config.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

namespace tls {

tl::expected<void, std::string> validate(const BrokerConfig& config) {
  const TlsConfig& t = config.tls;
  if (!config.plain_port && !t.port)
    return tl::unexpected(std::string("no listener: --port 0 turns the plain port off, but no --tls-port is set"));
  if (!t.enabled()) return {};
  if (t.cert_file.empty() || t.key_file.empty()) {
    return tl::unexpected(std::string("--tls-port and --ws-tls need --tls-cert-file and --tls-key-file"));
  }
  if (t.auth_clients != TlsAuthClients::kNo && t.ca_cert_file.empty()) {
    return tl::unexpected(std::string("--tls-auth-clients ") + std::string(to_string(t.auth_clients)) +
                          " needs --tls-ca-cert-file to verify client certificates against");
  }
  if (t.ws && !config.ws_port) return tl::unexpected(std::string("--ws-tls needs --ws-port"));
  if (t.handshake_timeout.count() <= 0) return tl::unexpected(std::string("--tls-handshake-timeout must be > 0"));
  return {};
}

}  // namespace tls
}  // namespace ringcast::broker
