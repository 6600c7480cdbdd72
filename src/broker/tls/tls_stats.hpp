// Counters of the TLS layer, shown by INFO (section "tls") and /metrics
// (ringcast_broker_tls_*), and its log lines.
//
// Thread safety: every member may be called from any thread. The counters are
// relaxed atomics: statistics, read without ordering against anything else.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/util/rate_limited_log.hpp"
#include "ringcast/broker/metrics.hpp"

namespace ringcast::broker::tls {

// Why a handshake did not complete; each closes only its own connection.
enum class HandshakeFailure : std::uint8_t {
  kNotTls,       // the first bytes were not a TLS ClientHello (a plain-text client)
  kCertificate,  // the client's certificate is missing (required), untrusted, expired, ...
  kProtocol,     // any other TLS error (no shared version or cipher, a bad message)
  kTimeout,      // not complete within the handshake timeout
  kAborted,      // the peer closed or reset the connection mid-handshake
};
inline constexpr std::size_t kHandshakeFailureCount = 5;
// "not_tls", "certificate", "protocol", "timeout", "aborted": INFO and label names.
[[nodiscard]] std::string_view to_string(HandshakeFailure f) noexcept;

class TlsStats {
 public:
  void count_handshake() noexcept { add(handshakes_); }
  void count_failure(HandshakeFailure f) noexcept { add(failures_[static_cast<std::size_t>(f)]); }
  // After the handshake: a record that failed to decrypt or parse, or the
  // peer's EOF in the middle of one (a truncated record).
  void count_record_error() noexcept { add(record_errors_); }
  // A connection whose writes the kernel encrypts (kTLS send, docs/broker.md).
  void count_ktls_send() noexcept { add(ktls_send_); }
  void count_reload(bool ok) noexcept { add(ok ? reloads_ : reload_failures_); }

  [[nodiscard]] std::uint64_t handshakes() const noexcept { return get(handshakes_); }
  [[nodiscard]] std::uint64_t failures(HandshakeFailure f) const noexcept {
    return get(failures_[static_cast<std::size_t>(f)]);
  }
  [[nodiscard]] std::uint64_t record_errors() const noexcept { return get(record_errors_); }

  // INFO's "# TLS" body: tls_handshakes, tls_handshake_failures_<reason> for
  // every reason, tls_record_errors, tls_ktls_send_connections, tls_reloads,
  // tls_reload_failures; "\r\n"-terminated lines.
  [[nodiscard]] std::string info_fields() const;
  void write_metrics(PrometheusWriter& w) const;

  // Writes "ringcast broker: tls: <line>" to stderr, rate-limited (a flood of
  // bad handshakes must not flood the log; util/rate_limited_log.hpp).
  void log(std::string_view line) noexcept { log_.write(line); }

 private:
  static void add(std::atomic<std::uint64_t>& c) noexcept {
    c.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  }
  static std::uint64_t get(const std::atomic<std::uint64_t>& c) noexcept {
    return c.load(std::memory_order_relaxed);  // relaxed: statistic
  }

  std::atomic<std::uint64_t> handshakes_{0};
  std::array<std::atomic<std::uint64_t>, kHandshakeFailureCount> failures_{};
  std::atomic<std::uint64_t> record_errors_{0};
  std::atomic<std::uint64_t> ktls_send_{0};
  std::atomic<std::uint64_t> reloads_{0};
  std::atomic<std::uint64_t> reload_failures_{0};
  RateLimitedLog log_{"tls"};
};

}  // namespace ringcast::broker::tls
