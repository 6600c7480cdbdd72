// Incremental parser for Redis client requests: RESP multibulk arrays of bulk
// strings (what every client library sends) and inline commands (what a person
// types over telnet), with the same acceptance rules and error texts as Redis 7's
// processMultibulkBuffer / processInlineBuffer.
//
// Thread safety: none; one parser per connection, used by its thread only.
//
// Invariants:
//  1. Memory held is bounded. While a command arrives: its argument slots (at
//     most max_args) with the bytes received so far (at most max_bulk_len each),
//     and a header/inline line of at most kMaxLine bytes plus one input piece;
//     nothing is reserved on a client's say-so beyond kMaxPrealloc bytes per
//     argument and kMaxPreallocArgs slots. Between commands, from the first
//     parse() call after kCommand: at most kMaxRetainedSlots slots and the line
//     buffer, each of at most kMaxPrealloc bytes. So a 30 MiB argument or a
//     1M-argument command is freed once it has been executed, not pinned for the
//     connection's lifetime.
//  2. Bytes are consumed exactly once: input can be fed in pieces of any size,
//     and the commands produced do not depend on how it was split.
//  3. After an error the parser stays in the error state; the connection replies
//     with error() and closes, as Redis does.
//  4. Before authentication (set_authenticated(false)) a command is small, as
//     Redis's processMultibulkBuffer requires of an unauthenticated client: at
//     most kMaxUnauthArgs arguments of kMaxUnauthBytes together, and lines of
//     at most kMaxUnauthBytes. So a connection that has not authenticated holds
//     at most about 2 x kMaxUnauthBytes here, whatever it declares or sends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringcast/broker/config.hpp"

namespace ringcast::broker {

// A session passes its BrokerConfig's limits; the defaults are the same.
struct ParserLimits {
  std::size_t max_bulk_len = kDefaultMaxBulkLen;
  std::size_t max_args = kDefaultMaxArgs;
};

class RequestParser {
 public:
  // Longest inline command or header line ("*<n>\r\n", "$<n>\r\n"), as Redis's
  // PROTO_INLINE_MAX_SIZE.
  static constexpr std::size_t kMaxLine = std::size_t{64} * 1024;
  // Most bytes reserved up front for one argument, and most capacity an argument
  // slot or the line buffer keeps between commands: the session batches payloads
  // up to 64 KiB, so a steady publisher of those reuses its slots too.
  static constexpr std::size_t kMaxPrealloc = std::size_t{64} * 1024;
  // Most argument slots reserved up front for one command.
  static constexpr std::size_t kMaxPreallocArgs = 1024;
  // Argument slots kept between commands: every fixed-shape command a client
  // repeats fits (PUBLISH has 3 arguments, HELLO with AUTH and SETNAME 7); only
  // variadic ones (SUBSCRIBE and its kin, PUBSUB NUMSUB) take more, and they are
  // rare. Between commands the parser so holds at most (kMaxRetainedSlots + 1) *
  // kMaxPrealloc bytes of strings (576 KiB).
  static constexpr std::size_t kMaxRetainedSlots = 8;
  // Invariant 4: before authentication, the most arguments of one command (Redis:
  // a multibulk length over 10 from an unauthenticated client is an error), and
  // the most bytes of its arguments together and of one line (Redis: a bulk over
  // 16384). AUTH <user> <token> and HELLO 3 AUTH <user> <token> SETNAME <name>
  // fit, with tokens of up to about 16 KiB.
  static constexpr std::size_t kMaxUnauthArgs = 10;
  static constexpr std::size_t kMaxUnauthBytes = std::size_t{16} * 1024;

  enum class Status : std::uint8_t {
    kNeedMore,  // `in` is exhausted with no complete command
    kCommand,   // args() holds one command (at least one argument)
    kError,     // malformed input; error() says why
  };

  explicit RequestParser(ParserLimits limits) noexcept : limits_(limits) {}

  // Whether the connection has authenticated: false applies invariant 4's
  // limits to the commands parsed from now on. The session sets it before each
  // parse() (a command may authenticate, or RESET de-authenticate). Default true.
  void set_authenticated(bool yes) noexcept { authenticated_ = yes; }

  // Consumes bytes from the front of `in` until one command is complete, the
  // input runs out, or an error is found. args() stays valid until the next call.
  // Allocates only when a command needs more slots or capacity than the earlier
  // ones left (invariant 1), so same-shaped multibulk commands parse without
  // allocating.
  [[nodiscard]] Status parse(std::string_view& in);

  // The command's arguments after kCommand: the first argc of the parser's reused
  // slots, valid until the next parse() call.
  [[nodiscard]] std::span<const std::string> args() const noexcept { return {slots_.data(), argc_}; }
  // The capacities of the argument slots, the slot array and the line buffer:
  // what invariant 1 bounds between commands. O(slots); for tests and diagnostics.
  [[nodiscard]] std::size_t retained_bytes() const noexcept;
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
  // Starts a command with no arguments and frees what exceeds invariant 1's
  // between-commands bound.
  void begin_command();
  // Appends bytes of `in` up to `stop` to line_; true once `stop` was seen
  // (consumed for '\n', left for '\r' which kCrlf skips).
  bool collect_line(std::string_view& in, char stop, bool& too_long);
  Status finish_inline();
  Status begin_bulk_or_finish();

  // The longest line: kMaxLine, or invariant 4's bound before authentication.
  [[nodiscard]] std::size_t max_line() const noexcept { return authenticated_ ? kMaxLine : kMaxUnauthBytes; }

  ParserLimits limits_;
  bool authenticated_ = true;
  State state_ = State::kStart;
  State after_crlf_ = State::kStart;
  std::string line_;
  // slots_[0, argc_) are the current command's arguments; later slots only keep
  // their capacity for the next command (invariant 1 bounds both).
  std::vector<std::string> slots_;
  std::size_t argc_ = 0;
  std::size_t expected_args_ = 0;
  std::size_t bulk_len_ = 0;
  std::size_t command_bytes_ = 0;  // the bulk lengths of the command so far (invariant 4)
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
