#include "broker/tls/tls_stats.hpp"

#include <chrono>
#include <cstdio>
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

void TlsStats::log(std::string_view line) noexcept {
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  // relaxed (all three): a rate limit, approximate under races.
  if (log_second_.exchange(now, std::memory_order_relaxed) != now) log_lines_.store(0, std::memory_order_relaxed);
  if (log_lines_.fetch_add(1, std::memory_order_relaxed) >= kLogBurst) {
    log_dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t dropped = log_dropped_.exchange(0, std::memory_order_relaxed);
  try {
    const std::string text =
        dropped == 0 ? fmt::format("ringcast broker: tls: {}\n", line)
                     : fmt::format("ringcast broker: tls: {} ({} earlier lines not logged)\n", line, dropped);
    std::fputs(text.c_str(), stderr);
  } catch (...) {  // out of memory for a log line: nothing to do
  }
}

}  // namespace ringcast::broker::tls
