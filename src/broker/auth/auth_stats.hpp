// Counters of authentication outcomes and channel-permission refusals, shared
// by the RESP and WebSocket sessions and shown by INFO (section "auth").
//
// Thread safety: every member may be called from any thread. The counters are
// relaxed atomics: statistics, read without ordering against anything else.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

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

  [[nodiscard]] std::uint64_t tokens_refused(TokenError e) const noexcept {
    return tokens_refused_[static_cast<std::size_t>(e)].load(std::memory_order_relaxed);  // relaxed: statistic
  }
  [[nodiscard]] std::uint64_t permission_denied() const noexcept {
    return permission_denied_.load(std::memory_order_relaxed);  // relaxed: statistic
  }

  // INFO's "# Auth" section body: token_auth_accepted, token_auth_refused (the
  // sum), token_refused_<kind> for every TokenError, token_subject_mismatch,
  // password_auth_refused, permission_denied; "\r\n"-terminated lines.
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
};

}  // namespace ringcast::broker
