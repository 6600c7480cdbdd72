// Counters of authentication outcomes and channel-permission refusals, shared
// by the RESP and WebSocket sessions and shown by INFO (section "auth"); the
// per-address table of failed authentications and their log (docs/security.md,
// "Before authentication"); the gauge of connections not yet authenticated.
//
// Thread safety: every member may be called from any thread. The counters are
// relaxed atomics: statistics, read without ordering against anything else.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/auth/failure_table.hpp"
#include "broker/util/rate_limited_log.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker {

class AuthStats {
 public:
  void count_token_accepted() noexcept { add(tokens_accepted_); }
  void count_token_refused(TokenError e) noexcept { add(tokens_refused_[static_cast<std::size_t>(e)]); }
  // AUTH <user> <token> whose user is not the token's `sub`.
  void count_subject_mismatch() noexcept { add(subject_mismatch_); }
  void count_password_refused() noexcept { add(passwords_refused_); }
  // A SUBSCRIBE / PUBLISH family command (or WebSocket frame) the grant refused.
  void count_permission_denied() noexcept { add(permission_denied_); }

  // A refused authentication (Client::authenticate) from `peer` ("address:port"),
  // the connection's `failures`-th: recorded for its address (FailureTable) and
  // logged, rate-limited, with `why`. `closing`: the connection has reached
  // max_auth_failures and is closed after the answer (counted). Returns how long
  // to wait before the answer (FailureTable, invariant 2), as the log says.
  std::chrono::milliseconds record_failure(std::string_view peer, std::string_view why, std::uint32_t failures,
                                           bool closing);

  // Connections that have not authenticated yet, or not finished their TLS
  // handshake or WebSocket upgrade (Client::admitted): max_unauthenticated's
  // gauge. Only the accept thread adds, after reading it, so its check and add
  // are exact against each other; each counted connection's thread subtracts
  // once, when it is admitted or closed. relaxed: a bound that is approximate
  // only while connections leave, which errs on the side of refusing.
  [[nodiscard]] std::size_t unauthenticated() const noexcept {
    return unauthenticated_.load(std::memory_order_relaxed);
  }
  void add_unauthenticated() noexcept { unauthenticated_.fetch_add(1, std::memory_order_relaxed); }
  void remove_unauthenticated() noexcept { unauthenticated_.fetch_sub(1, std::memory_order_relaxed); }
  // A connection refused because max_unauthenticated were open.
  void count_unauthenticated_rejected() noexcept { add(unauthenticated_rejected_); }

  [[nodiscard]] std::uint64_t tokens_refused(TokenError e) const noexcept {
    return tokens_refused_[static_cast<std::size_t>(e)].load(std::memory_order_relaxed);  // relaxed: statistic
  }
  [[nodiscard]] std::uint64_t permission_denied() const noexcept {
    return permission_denied_.load(std::memory_order_relaxed);  // relaxed: statistic
  }

  // INFO's "# Auth" section body: token_auth_accepted, token_auth_refused (the
  // sum), token_refused_<kind> for every TokenError, token_subject_mismatch,
  // password_auth_refused, permission_denied, auth_failure_sources (addresses
  // in the failure table), auth_failures_closed (connections closed after
  // max_auth_failures), unauthenticated_connections (the gauge),
  // rejected_unauthenticated_connections; "\r\n"-terminated lines.
  [[nodiscard]] std::string info_fields() const;

 private:
  static void add(std::atomic<std::uint64_t>& c) noexcept {
    c.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  }

  std::atomic<std::uint64_t> tokens_accepted_{0};
  std::array<std::atomic<std::uint64_t>, kTokenErrorCount> tokens_refused_{};
  std::atomic<std::uint64_t> subject_mismatch_{0};
  std::atomic<std::uint64_t> passwords_refused_{0};
  std::atomic<std::uint64_t> permission_denied_{0};
  std::atomic<std::uint64_t> failures_closed_{0};
  std::atomic<std::uint64_t> unauthenticated_rejected_{0};
  std::atomic<std::size_t> unauthenticated_{0};
  FailureTable failures_;
  RateLimitedLog log_{"auth"};
};

}  // namespace ringcast::broker
