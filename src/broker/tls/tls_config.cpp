#include "broker/tls/tls_config.hpp"

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

std::string_view to_string(TlsAuthClients a) noexcept {
  switch (a) {
    case TlsAuthClients::kNo:
      return "no";
    case TlsAuthClients::kOptional:
      return "optional";
    case TlsAuthClients::kYes:
      return "yes";
  }
  return "unknown";
}

std::optional<TlsAuthClients> parse_tls_auth_clients(std::string_view s) noexcept {
  for (const TlsAuthClients a : {TlsAuthClients::kNo, TlsAuthClients::kOptional, TlsAuthClients::kYes}) {
    if (s == to_string(a)) return a;
  }
  return std::nullopt;
}

namespace tls {

tl::expected<void, std::string> validate(const BrokerConfig& config) {
  const TlsConfig& t = config.tls;
  if (!config.plain_port && !t.port)
    return tl::unexpected(std::string("no listener: the plain port is off and no TLS port is set"));
  if (!t.enabled()) return {};
  if (t.cert_file.empty() || t.key_file.empty()) {
    return tl::unexpected(std::string("TLS needs a certificate file and a key file"));
  }
  if (t.auth_clients != TlsAuthClients::kNo && t.ca_cert_file.empty()) {
    return tl::unexpected(std::string("client certificates (tls-auth-clients ") +
                          std::string(to_string(t.auth_clients)) +
                          ") need a CA certificate file to verify them against");
  }
  if (t.ws && !config.ws_port) return tl::unexpected(std::string("TLS on the WebSocket port needs a WebSocket port"));
  if (t.handshake_timeout.count() <= 0) return tl::unexpected(std::string("the TLS handshake timeout must be > 0"));
  return {};
}

}  // namespace tls
}  // namespace ringcast::broker
