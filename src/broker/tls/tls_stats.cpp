#include "broker/tls/tls_stats.hpp"

#include <string>

#include <fmt/format.h>

namespace ringcast::broker::tls {

namespace {
constexpr HandshakeFailure kFailures[] = {HandshakeFailure::kNotTls, HandshakeFailure::kCertificate,
                                          HandshakeFailure::kProtocol, HandshakeFailure::kTimeout,
                                          HandshakeFailure::kAborted};
}  // namespace

std::string_view to_string(HandshakeFailure f) noexcept {
  switch (f) {
    case HandshakeFailure::kNotTls:
      return "not_tls";
    case HandshakeFailure::kCertificate:
      return "certificate";
    case HandshakeFailure::kProtocol:
      return "protocol";
    case HandshakeFailure::kTimeout:
      return "timeout";
    case HandshakeFailure::kAborted:
      return "aborted";
  }
  return "unknown";
}

std::string TlsStats::info_fields() const {
  std::string out = fmt::format("tls_handshakes:{}\r\n", handshakes());
  for (const HandshakeFailure f : kFailures) {
    out += fmt::format("tls_handshake_failures_{}:{}\r\n", to_string(f), failures(f));
  }
  out += fmt::format(
      "tls_record_errors:{}\r\ntls_ktls_send_connections:{}\r\ntls_reloads:{}\r\ntls_reload_failures:{}\r\n",
      record_errors(), get(ktls_send_), get(reloads_), get(reload_failures_));
  return out;
}

void TlsStats::write_metrics(PrometheusWriter& w) const {
  w.metric("ringcast_broker_tls_handshakes_total", "TLS handshakes completed.", MetricType::kCounter,
           static_cast<double>(handshakes()));
  w.header("ringcast_broker_tls_handshake_failures_total",
           "TLS connections closed before their handshake completed, by reason.", MetricType::kCounter);
  for (const HandshakeFailure f : kFailures) {
    w.sample("ringcast_broker_tls_handshake_failures_total", {{"reason", std::string(to_string(f))}},
             static_cast<double>(failures(f)));
  }
  w.metric("ringcast_broker_tls_record_errors_total",
           "TLS connections closed after the handshake for a bad or truncated record.", MetricType::kCounter,
           static_cast<double>(record_errors()));
  w.metric("ringcast_broker_tls_ktls_send_connections_total",
           "TLS connections whose writes the kernel encrypts (kTLS).", MetricType::kCounter,
           static_cast<double>(get(ktls_send_)));
  w.header("ringcast_broker_tls_reloads_total", "Certificate reloads (SIGHUP), by result.", MetricType::kCounter);
  w.sample("ringcast_broker_tls_reloads_total", {{"result", "ok"}}, static_cast<double>(get(reloads_)));
  w.sample("ringcast_broker_tls_reloads_total", {{"result", "failed"}}, static_cast<double>(get(reload_failures_)));
}

}  // namespace ringcast::broker::tls
