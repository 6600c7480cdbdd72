// What a verified token allows a client: its name, until when, and which
// channels it may subscribe and publish to (docs/security.md, "Tokens").
//
// Thread safety: a plain value type; its const members may be called from any
// thread concurrently.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ringcast::broker {

struct Grant {
  std::string subject;                           // the token's `sub`: names the client
  std::chrono::system_clock::time_point expiry;  // the token's `exp` (whole seconds)
  // Channel globs in PSUBSCRIBE's syntax (glob_match). nullopt: the claim is
  // absent from the token and that direction is not restricted; an empty
  // vector: the claim is present and empty, so nothing is allowed.
  std::optional<std::vector<std::string>> subscribe;
  std::optional<std::vector<std::string>> publish;

  // SUBSCRIBE / SSUBSCRIBE of one exact channel: some subscribe glob matches it.
  [[nodiscard]] bool may_subscribe(std::string_view channel) const noexcept;
  // PSUBSCRIBE of a pattern. Conservative: allowed only when every channel the
  // pattern can match is certainly covered by one granted glob G, that is when
  //  1. the pattern is byte for byte one of the granted globs, or
  //  2. the pattern has no glob syntax (`*`, `?`, `[`, `\`) and G matches it, or
  //  3. G is a literal prefix followed by one final `*` (`md.*`) and the
  //     pattern's literal prefix (glob_literal_prefix) starts with that prefix
  //     (`md.eu.*`, `md.[ab]*` under `md.*`).
  // Anything else (`md.?` under `md.[a-z]`, `*` under `md.*`) is refused, even
  // where set inclusion holds: the rule errs on the side of refusing.
  [[nodiscard]] bool may_subscribe_pattern(std::string_view pattern) const noexcept;
  // PUBLISH / SPUBLISH to one channel: some publish glob matches it.
  [[nodiscard]] bool may_publish(std::string_view channel) const noexcept;
};

}  // namespace ringcast::broker
