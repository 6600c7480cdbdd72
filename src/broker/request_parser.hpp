// Incremental parser for Redis client requests: RESP multibulk arrays of bulk
// strings (what every client library sends) and inline commands (what a person
// types over telnet), with the same acceptance rules and error texts as Redis 7's
// processMultibulkBuffer / processInlineBuffer.
//
// Thread safety: none; one parser per connection, used by its thread only.
//
// Invariants:
//  1. Memory held is bounded by max_args argument slots plus the bytes of the
//     arguments received so far, each at most max_bulk_len, plus a header/inline
//     line of at most kMaxLine bytes; nothing is reserved on a client's say-so
//     beyond kMaxPrealloc.
//  2. Bytes are consumed exactly once: input can be fed in pieces of any size,
//     and the commands produced do not depend on how it was split.
//  3. After an error the parser stays in the error state; the connection replies
//     with error() and closes, as Redis does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringcast::broker {

struct ParserLimits {
  std::size_t max_bulk_len = 32u << 20;
  std::size_t max_args = 1024u * 1024u;
};

class RequestParser {
 public:
  // Longest inline command or header line ("*<n>\r\n", "$<n>\r\n"), as Redis's
  // PROTO_INLINE_MAX_SIZE.
  static constexpr std::size_t kMaxLine = 64 * 1024;
  // Most bytes reserved up front for one argument.
  static constexpr std::size_t kMaxPrealloc = 64 * 1024;

  enum class Status : std::uint8_t {
    kNeedMore,  // `in` is exhausted with no complete command
    kCommand,   // args() holds one command (at least one argument)
    kError,     // malformed input; error() says why
  };

  explicit RequestParser(ParserLimits limits) noexcept : limits_(limits) {}

  // Consumes bytes from the front of `in` until one command is complete, the
  // input runs out, or an error is found. args() stays valid until the next call.
  [[nodiscard]] Status parse(std::string_view& in);

  [[nodiscard]] const std::vector<std::string>& args() const noexcept { return args_; }
  // The error text without the leading "-", e.g. "ERR Protocol error: invalid bulk
  // length". Valid after kError.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  enum class State : std::uint8_t {
    kStart,        // between commands
    kInline,       // collecting an inline line up to '\n'
    kArrayHeader,  // collecting "*<n>" up to '\r'
    kBulkHeader,   // collecting "$<n>" up to '\r'
    kBulkData,     // copying bulk bytes
    kCrlf,         // skipping the two bytes after a header or bulk (Redis does not check them)
    kError,
  };

  Status fail(std::string text);
  // Appends bytes of `in` up to `stop` to line_; true once `stop` was seen
  // (consumed for '\n', left for '\r' which kCrlf skips).
  bool collect_line(std::string_view& in, char stop, bool& too_long);
  Status finish_inline();
  Status begin_bulk_or_finish();

  ParserLimits limits_;
  State state_ = State::kStart;
  State after_crlf_ = State::kStart;
  std::string line_;
  std::vector<std::string> args_;
  std::size_t expected_args_ = 0;
  std::size_t bulk_len_ = 0;
  std::size_t crlf_left_ = 0;
  bool complete_after_crlf_ = false;
  std::string error_;
};

// Redis's string2ll: optional '-', decimal digits, no leading zeros (except "0"),
// no '+', no spaces, fits in int64. Exposed for tests.
[[nodiscard]] bool parse_int64(std::string_view s, long long& out) noexcept;

// Redis's sdssplitargs: splits an inline command line into arguments with "..."
// (escapes \n \r \t \b \a \xHH) and '...' quoting. Returns false on unbalanced
// quotes or a closing quote not followed by a space.
[[nodiscard]] bool split_inline_args(std::string_view line, std::vector<std::string>& out);

}  // namespace ringcast::broker
