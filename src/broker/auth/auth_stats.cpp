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
      "password_auth_refused:{}\r\npermission_denied:{}\r\n",
      tokens_accepted_.load(std::memory_order_relaxed), refused, kinds,
      subject_mismatch_.load(std::memory_order_relaxed), passwords_refused_.load(std::memory_order_relaxed),
      permission_denied_.load(std::memory_order_relaxed));
}

}  // namespace ringcast::broker
