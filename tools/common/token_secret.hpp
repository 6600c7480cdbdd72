// The token secret of ringcast-broker, ringcast-relay and `ringcast token`:
// from a file (first line) or the environment, never from the command line,
// where it would show in `ps` and shell history (docs/security.md, "Tokens").
#pragma once

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

#include "ringcast/broker/token.hpp"

namespace ringcast::tools {

inline constexpr const char* kTokenSecretEnv = "RINGCAST_TOKEN_SECRET";

// Fills `secret` from `file` (its first line, without a trailing CR) when
// `file` is not empty, else from $RINGCAST_TOKEN_SECRET when it is set, else
// leaves it empty. Returns what is wrong (unreadable file, shorter than
// kMinTokenSecretBytes), or nullopt.
[[nodiscard]] inline std::optional<std::string> read_token_secret(const std::string& file, std::string& secret) {
  std::string from;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return "cannot read the token secret file " + file;
    std::getline(in, secret);
    if (!secret.empty() && secret.back() == '\r') secret.pop_back();
    from = file;
  } else if (const char* env = std::getenv(kTokenSecretEnv); env != nullptr) {
    secret = env;
    from = std::string("$") + kTokenSecretEnv;
  } else {
    secret.clear();
    return std::nullopt;
  }
  if (secret.size() < broker::kMinTokenSecretBytes) {
    return "the token secret in " + from + " is " + std::to_string(secret.size()) + " bytes; at least " +
           std::to_string(broker::kMinTokenSecretBytes) + " are needed (e.g. `openssl rand -base64 48`)";
  }
  return std::nullopt;
}

}  // namespace ringcast::tools
