#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "broker/resp/request_parser.hpp"

namespace ringcast::broker {
namespace {

using Commands = std::vector<std::vector<std::string>>;

struct Outcome {
  Commands commands;
  std::string error;  // empty: no error
};

// Feeds `input` in pieces of `chunk` bytes and collects every command.
// `authenticated` false: the pre-authentication limits (invariant 4).
Outcome run(std::string_view input, std::size_t chunk, ParserLimits limits = {}, bool authenticated = true) {
  RequestParser p(limits);
  p.set_authenticated(authenticated);
  Outcome out;
  for (std::size_t off = 0; off < input.size(); off += chunk) {
    std::string_view piece = input.substr(off, chunk);
    for (;;) {
      const auto st = p.parse(piece);
      if (st == RequestParser::Status::kCommand) {
        out.commands.emplace_back(p.args().begin(), p.args().end());
        continue;
      }
      if (st == RequestParser::Status::kError) {
        out.error = p.error();
        return out;
      }
      break;
    }
  }
  return out;
}

TEST(RequestParserTest, ParsesMultibulkCommands) {
  const Outcome o = run("*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nnews\r\n*1\r\n$4\r\nPING\r\n", 1 << 20);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, (Commands{{"SUBSCRIBE", "news"}, {"PING"}}));
}

TEST(RequestParserTest, BulkStringsAreBinarySafe) {
  using namespace std::string_literals;
  const Outcome o = run("*2\r\n$4\r\na\r\0b\r\n$0\r\n\r\n"s, 1 << 20);
  ASSERT_EQ(o.commands.size(), 1u);
  EXPECT_EQ(o.commands[0][0], "a\r\0b"s);
  EXPECT_EQ(o.commands[0][1], "");
}

TEST(RequestParserTest, ParsesInlineCommandsAsRedisSplitsThem) {
  const Outcome o = run("PING\r\nSUBSCRIBE  a \"b c\" 'd\\'e' \"\\x41\\n\"\n\r\n", 1 << 20);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, (Commands{{"PING"}, {"SUBSCRIBE", "a", "b c", "d'e", "A\n"}}));
}

TEST(RequestParserTest, CommandsDoNotDependOnHowInputIsSplit) {
  const std::string input =
      "*3\r\n$7\r\nPUBLISH\r\n$4\r\nnews\r\n$11\r\nhello world\r\nPING x\r\n*0\r\n*-1\r\n"
      "*2\r\n$4\r\nECHO\r\n$3\r\n\r\n\n\r\n";
  const Outcome whole = run(input, input.size());
  ASSERT_EQ(whole.error, "");
  ASSERT_EQ(whole.commands.size(), 3u);
  for (std::size_t chunk = 1; chunk < input.size(); ++chunk) {
    EXPECT_EQ(run(input, chunk).commands, whole.commands) << "chunk " << chunk;
  }
}

TEST(RequestParserTest, ReusedArgumentSlotsHoldOnlyTheCurrentCommand) {
  // Slots are kept across commands (invariant 1): shorter, empty, inline and
  // freed-then-reused ones must not show an earlier command's bytes.
  const std::string big(RequestParser::kMaxPrealloc + 1, 'b');
  const std::string input =
      "*3\r\n$5\r\naaaaa\r\n$3\r\nbbb\r\n$1\r\nc\r\n"
      "*2\r\n$2\r\nxy\r\n$0\r\n\r\n"
      "PING z\r\n"
      "*1\r\n$" +
      std::to_string(big.size()) + "\r\n" + big +
      "\r\n"
      "*2\r\n$1\r\nq\r\n$1\r\nr\r\n";
  for (const std::size_t chunk : {input.size(), std::size_t{1}}) {
    EXPECT_EQ(run(input, chunk).commands,
              (Commands{{"aaaaa", "bbb", "c"}, {"xy", ""}, {"PING", "z"}, {big}, {"q", "r"}}))
        << "chunk " << chunk;
  }
}

TEST(RequestParserTest, EmptyMultibulkAndEmptyLinesAreIgnored) {
  const Outcome o = run("*0\r\n*-1\r\n\r\n\n   \r\nPING\r\n", 1 << 20);
  EXPECT_EQ(o.commands, (Commands{{"PING"}}));
}

TEST(RequestParserTest, TrailingBytesAfterBulkAreSkippedUncheckedLikeRedis) {
  // Redis skips two bytes after the data without looking at them; "x\r" here.
  const Outcome o = run("*1\r\n$4\r\nPINGx\r\n", 1 << 20);
  EXPECT_EQ(o.error, "");
  EXPECT_EQ(o.commands, (Commands{{"PING"}}));
}

TEST(RequestParserTest, RejectsMalformedHeadersWithRedisErrorTexts) {
  EXPECT_EQ(run("*x\r\n", 64).error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(run("*+1\r\n", 64).error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(run("*1\r\nx3\r\n", 64).error, "ERR Protocol error: expected '$', got 'x'");
  EXPECT_EQ(run("*1\r\n$-2\r\n", 64).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(run("*1\r\n$01\r\n", 64).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(run("\"abc\r\n", 64).error, "ERR Protocol error: unbalanced quotes in request");
  EXPECT_EQ(run("\"a\"b\r\n", 64).error, "ERR Protocol error: unbalanced quotes in request");
}

TEST(RequestParserTest, EnforcesBulkLengthAndArgumentLimits) {
  const ParserLimits small{16, 3};
  EXPECT_EQ(run("*1\r\n$17\r\n", 64, small).error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(run("*1\r\n$16\r\n0123456789abcdef\r\n", 64, small).error, "");
  EXPECT_EQ(run("*4\r\n", 64, small).error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(run("a b c d\r\n", 64, small).error, "ERR Protocol error: invalid multibulk length");
}

TEST(RequestParserTest, RejectsOverlongLinesInsteadOfBuffering) {
  const std::string inline_line(RequestParser::kMaxLine + 10, 'a');
  EXPECT_EQ(run(inline_line, 4096).error, "ERR Protocol error: too big inline request");
  EXPECT_EQ(run("*" + std::string(RequestParser::kMaxLine + 10, '1'), 4096).error,
            "ERR Protocol error: too big mbulk count string");
  EXPECT_EQ(run("*1\r\n$" + std::string(RequestParser::kMaxLine + 10, '1'), 4096).error,
            "ERR Protocol error: too big bulk count string");
}

TEST(RequestParserTest, BeforeAuthenticationCommandsAreSmallWithRedisErrorTexts) {
  constexpr std::size_t kBytes = RequestParser::kMaxUnauthBytes;
  std::string ten = "*10\r\n";
  for (int i = 0; i < 10; ++i) ten += "$1\r\na\r\n";
  const std::string big_args =
      "*2\r\n$" + std::to_string(kBytes - 1) + "\r\n" + std::string(kBytes - 1, 'a') + "\r\n$1\r\nb\r\n";
  const std::string too_big_args =
      "*2\r\n$" + std::to_string(kBytes) + "\r\n" + std::string(kBytes, 'a') + "\r\n$1\r\n";
  for (const std::size_t chunk : {std::size_t{1}, std::size_t{7}, std::size_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    EXPECT_EQ(run(ten, chunk, {}, false).error, "");
    EXPECT_EQ(run("*11\r\n", chunk, {}, false).error, "ERR Protocol error: unauthenticated multibulk length");
    EXPECT_EQ(run("*1048576\r\n", chunk, {}, false).error, "ERR Protocol error: unauthenticated multibulk length");
    // The arguments together: kBytes is the bound.
    EXPECT_EQ(run(big_args, chunk, {}, false).error, "");
    EXPECT_EQ(run(too_big_args, chunk, {}, false).error, "ERR Protocol error: unauthenticated bulk length");
    EXPECT_EQ(run("*1\r\n$100000\r\n", chunk, {}, false).error, "ERR Protocol error: unauthenticated bulk length");
    EXPECT_EQ(run("a b c d e f g h i j k\r\n", chunk, {}, false).error,
              "ERR Protocol error: unauthenticated multibulk length");
    // An inline line over the bound, even with its end in the same piece.
    EXPECT_EQ(run(std::string(kBytes + 1, 'a') + "\r\n", chunk, {}, false).error,
              "ERR Protocol error: too big inline request");
    // The same input once authenticated: only the configured limits apply.
    EXPECT_EQ(run("*11\r\n", chunk).error, "");
    EXPECT_EQ(run(too_big_args, chunk).error, "");
  }
}

TEST(RequestParserTest, BeforeAuthenticationAnUnfinishedCommandHoldsLittle) {
  RequestParser p({});
  p.set_authenticated(false);
  std::string in = "*10\r\n";
  for (int i = 0; i < 9; ++i) in += "$1000\r\n" + std::string(1000, 'a') + "\r\n";
  in += "$7000\r\n" + std::string(6999, 'b');
  std::string_view rest = in;
  ASSERT_EQ(p.parse(rest), RequestParser::Status::kNeedMore);
  EXPECT_LT(p.retained_bytes(), 2 * RequestParser::kMaxUnauthBytes);
}

TEST(RequestParserTest, StaysInErrorStateAfterAnError) {
  RequestParser p({});
  std::string_view in = "*x\r\n";
  ASSERT_EQ(p.parse(in), RequestParser::Status::kError);
  std::string_view more = "PING\r\n";
  EXPECT_EQ(p.parse(more), RequestParser::Status::kError);
}

TEST(RequestParserTest, ParseInt64FollowsRedisString2ll) {
  long long v = 0;
  EXPECT_TRUE(parse_int64("0", v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(parse_int64("-12", v));
  EXPECT_EQ(v, -12);
  EXPECT_TRUE(parse_int64("9223372036854775807", v));
  EXPECT_TRUE(parse_int64("-9223372036854775808", v));
  EXPECT_EQ(v, INT64_MIN);
  EXPECT_FALSE(parse_int64("9223372036854775808", v));
  EXPECT_FALSE(parse_int64("", v));
  EXPECT_FALSE(parse_int64("-", v));
  EXPECT_FALSE(parse_int64("-0", v));
  EXPECT_FALSE(parse_int64("01", v));
  EXPECT_FALSE(parse_int64("+1", v));
  EXPECT_FALSE(parse_int64(" 1", v));
  EXPECT_FALSE(parse_int64("1x", v));
}

}  // namespace
}  // namespace ringcast::broker
