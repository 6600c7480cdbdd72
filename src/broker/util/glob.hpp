// Redis glob matching for PSUBSCRIBE patterns and PUBSUB CHANNELS.
//
// Thread safety: pure functions over their arguments; callable from any thread.
#pragma once

#include <cstddef>
#include <string_view>

namespace ringcast::broker {

// Returns whether `str` matches `pattern` with exactly the semantics of Redis 7's
// stringmatchlen() (util.c), case-sensitive, byte-wise: `*`, `?`, `[abc]`,
// `[^abc]`, `[a-z]` (reversed ranges allowed, bytes compared as signed char as on
// x86 Redis), `\x` escapes, an unterminated `[` treated as closed at the end of the
// pattern. Bytes past the end of `pattern` read as NUL, as Redis reads its sds
// terminator. Cost: like Redis, worst case polynomial, with Redis's early exit once
// a `*` tail has failed everywhere (the fix for CVE-2022-36021).
[[nodiscard]] bool glob_match(std::string_view pattern, std::string_view str) noexcept;

// Length of the literal prefix of `pattern`: the bytes before its first `*`, `?`,
// `[` or `\`. Every string the pattern matches starts with these bytes, which is
// what lets the subscription index file a pattern in a trie under this prefix.
[[nodiscard]] std::size_t glob_literal_prefix(std::string_view pattern) noexcept;

}  // namespace ringcast::broker
