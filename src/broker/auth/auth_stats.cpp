#include "broker/auth/auth_stats.hpp"

#include <fmt/format.h>

namespace ringcast::broker {

std::string AuthStats::info_fields() const {
  // relaxed loads: statistics.
  std::uint64_t refused = 0;
  std::string kinds;
  for (std::size_t i = 0; i < kTokenErrorCount; ++i) {
    const std::uint64_t n = tokens_refused_[i].load(std::memory_order_relaxed);
    refused += n;
    kinds += fmt::format("token_refused_{}:{}\r\n", to_string(static_cast<TokenError>(i)), n);
  }
  return fmt::format(
      "token_auth_accepted:{}\r\ntoken_auth_refused:{}\r\n{}token_subject_mismatch:{}\r\n"
      "password_auth_refused:{}\r\npermission_denied:{}\r\nauth_failure_sources:{}\r\nauth_failures_closed:{}\r\n"
      "unauthenticated_connections:{}\r\nrejected_unauthenticated_connections:{}\r\n",
      tokens_accepted_.load(std::memory_order_relaxed), refused, kinds,
      subject_mismatch_.load(std::memory_order_relaxed), passwords_refused_.load(std::memory_order_relaxed),
      permission_denied_.load(std::memory_order_relaxed), failures_.sources(),
      failures_closed_.load(std::memory_order_relaxed), unauthenticated(),
      unauthenticated_rejected_.load(std::memory_order_relaxed));
}

std::chrono::milliseconds AuthStats::record_failure(std::string_view peer, std::string_view why, std::uint32_t failures,
                                                    bool closing) {
  // "address:port" (IPv6 addresses hold colons too: the port is after the last).
  const std::string_view source = peer.substr(0, peer.rfind(':'));
  const FailureTable::Verdict v = failures_.record(source, std::chrono::steady_clock::now());
  if (closing) add(failures_closed_);
  log_.write(
      fmt::format("{}: authentication refused ({}); failure {} of the connection, {} in a row from {}; "
                  "delayed {} ms{}",
                  peer, why, failures, v.failures, source, v.delay.count(), closing ? "; closed" : ""));
  return v.delay;
}

}  // namespace ringcast::broker
