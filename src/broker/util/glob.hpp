// Redis glob matching for PSUBSCRIBE patterns and PUBSUB CHANNELS.
//
// Thread safety: pure functions over their arguments; callable from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringcast::broker {

// Returns whether `str` matches `pattern` with exactly the semantics of Redis 7's
// stringmatchlen() (util.c), case-sensitive, byte-wise: `*`, `?`, `[abc]`,
// `[^abc]`, `[a-z]` (reversed ranges allowed, bytes compared as signed char as on
// x86 Redis), `\x` escapes, an unterminated `[` treated as closed at the end of the
// pattern. Bytes past the end of `pattern` read as NUL, as Redis reads its sds
// terminator. Iterative, with no recursion and no allocation: at most
// str.size() x (the longest stretch of `pattern` between two stars) + pattern.size()
// steps, whatever the number of stars (issue 40: Redis's recursion per `*`
// overflowed the stack on a 300,000-star pattern).
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view str) noexcept;

// Longest pattern a client may subscribe with or pass to PUBSUB CHANNELS: with
// it, one match costs at most 1 KiB steps per byte of the channel name.
inline constexpr std::size_t kMaxGlobPatternBytes = 1024;
[[nodiscard]] inline bool glob_pattern_fits(std::string_view pattern) noexcept {
  return pattern.size() <= kMaxGlobPatternBytes;
}
// The refusal's text, for both protocols: "pattern of <n> bytes is longer than
// the 1024-byte limit".
[[nodiscard]] std::string pattern_too_long(std::string_view pattern);

// Length of the literal prefix of `pattern`: the bytes before its first `*`, `?`,
// `[` or `\`. Every string the pattern matches starts with these bytes, which is
// what lets the subscription index file a pattern in a trie under this prefix.
[[nodiscard]] std::size_t glob_literal_prefix(std::string_view pattern) noexcept;

}  // namespace ringcast::broker
