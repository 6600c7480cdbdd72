#include "broker/ws/frame_decoder.hpp"

#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "broker/ws/server_frame.hpp"
#include "broker/ws/utf8.hpp"
#include "client_frame.hpp"

namespace ringcast::broker::ws {
namespace {

using test::client_frame;
using test::ClientFrame;
using test::close_payload;
using Status = FrameDecoder::Status;

struct Event {
  Status status;
  std::string payload;
  std::uint16_t code = 0;  // close code or error code
  bool operator==(const Event&) const = default;
};

// Feeds `input` in pieces of `chunk` bytes and collects every event; stops at
// the first error.
std::vector<Event> run(std::string_view input, std::size_t chunk, std::size_t max_message = 1u << 20) {
  FrameDecoder d(max_message);
  std::vector<Event> out;
  for (std::size_t off = 0; off < input.size(); off += chunk) {
    std::string_view piece = input.substr(off, chunk);
    for (;;) {
      const Status st = d.decode(piece);
      if (st == Status::kNeedMore) {
        EXPECT_TRUE(piece.empty());
        break;
      }
      Event e{st, std::string(d.payload())};
      if (st == Status::kClose) e.code = d.close_code();
      if (st == Status::kError) {
        e.code = static_cast<std::uint16_t>(d.error_code());
        e.payload = std::string(d.error());
        out.push_back(e);
        return out;
      }
      out.push_back(e);
    }
  }
  return out;
}

// Every split gives the same events (invariant 1): whole, 1 byte, 3 bytes.
std::vector<Event> run_all_splits(std::string_view input, std::size_t max_message = 1u << 20) {
  const auto whole = run(input, input.size() + 1, max_message);
  EXPECT_EQ(run(input, 1, max_message), whole);
  EXPECT_EQ(run(input, 3, max_message), whole);
  return whole;
}

std::uint16_t error_code_of(std::string_view input, std::size_t max_message = 1u << 20) {
  const auto ev = run_all_splits(input, max_message);
  if (ev.empty() || ev.back().status != Status::kError) return 0;
  return ev.back().code;
}

TEST(FrameDecoderTest, DecodesMaskedTextAndBinaryMessages) {
  const std::string in = client_frame("hello") + client_frame(std::string("\0\xff\x01", 3), {.opcode = 2});
  const auto ev = run_all_splits(in);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], (Event{Status::kText, "hello"}));
  EXPECT_EQ(ev[1], (Event{Status::kBinary, std::string("\0\xff\x01", 3)}));
}

TEST(FrameDecoderTest, DecodesSixteenAndSixtyFourBitLengths) {
  const std::string mid(300, 'a');
  const std::string big(70000, 'b');
  const auto ev = run_all_splits(client_frame(mid) + client_frame(big, {.opcode = 2}) + client_frame(""));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].payload, mid);
  EXPECT_EQ(ev[1].payload, big);
  EXPECT_EQ(ev[2], (Event{Status::kText, ""}));
}

TEST(FrameDecoderTest, RejectsNonMinimalLengths) {
  EXPECT_EQ(error_code_of(client_frame("short", {.len_bytes = 2})), 1002);
  EXPECT_EQ(error_code_of(client_frame(std::string(300, 'x'), {.len_bytes = 8})), 1002);
}

TEST(FrameDecoderTest, RejectsUnmaskedClientFrames) {
  EXPECT_EQ(error_code_of(client_frame("hi", {.masked = false})), 1002);
}

TEST(FrameDecoderTest, RejectsReservedBits) {
  for (int r : {0x10, 0x20, 0x40}) {
    const auto rsv = static_cast<std::uint8_t>(r);
    EXPECT_EQ(error_code_of(client_frame("hi", {.rsv = rsv})), 1002) << int{rsv};
  }
}

TEST(FrameDecoderTest, RejectsUnknownOpcodes) {
  for (int o : {3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF}) {
    const auto op = static_cast<std::uint8_t>(o);
    EXPECT_EQ(error_code_of(client_frame("", {.opcode = op})), 1002) << int{op};
  }
}

TEST(FrameDecoderTest, RejectsOversizedAndFragmentedControlFrames) {
  EXPECT_EQ(error_code_of(client_frame(std::string(126, 'p'), {.opcode = 9})), 1002);
  EXPECT_EQ(error_code_of(client_frame("p", {.opcode = 9, .fin = false})), 1002);
  // 125 bytes is the limit, and fine.
  const auto ev = run_all_splits(client_frame(std::string(125, 'p'), {.opcode = 9}));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0], (Event{Status::kPing, std::string(125, 'p')}));
}

TEST(FrameDecoderTest, ReassemblesFragmentedMessagesWithControlFramesBetween) {
  const std::string in = client_frame("Hel", {.fin = false}) + client_frame("ping!", {.opcode = 9}) +
                         client_frame("", {.opcode = 0, .fin = false}) + client_frame("lo", {.opcode = 0}) +
                         client_frame("ab", {.opcode = 2, .fin = false}) + client_frame("pong", {.opcode = 0xA}) +
                         client_frame("cd", {.opcode = 0});
  const auto ev = run_all_splits(in);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0], (Event{Status::kPing, "ping!"}));
  EXPECT_EQ(ev[1], (Event{Status::kText, "Hello"}));
  EXPECT_EQ(ev[2], (Event{Status::kPong, "pong"}));
  EXPECT_EQ(ev[3], (Event{Status::kBinary, "abcd"}));
}

TEST(FrameDecoderTest, RejectsContinuationWithoutAStart) {
  EXPECT_EQ(error_code_of(client_frame("x", {.opcode = 0})), 1002);
}

TEST(FrameDecoderTest, RejectsANewDataFrameInsideAFragmentedMessage) {
  EXPECT_EQ(error_code_of(client_frame("a", {.fin = false}) + client_frame("b")), 1002);
  EXPECT_EQ(error_code_of(client_frame("a", {.fin = false}) + client_frame("b", {.opcode = 2})), 1002);
}

TEST(FrameDecoderTest, RejectsMessagesOverTheSizeLimit) {
  EXPECT_EQ(error_code_of(client_frame(std::string(101, 'a')), 100), 1009);
  // The limit holds for the reassembled message, not just each frame.
  EXPECT_EQ(
      error_code_of(
          client_frame(std::string(60, 'a'), {.fin = false}) + client_frame(std::string(41, 'a'), {.opcode = 0}), 100),
      1009);
  const auto ev = run_all_splits(
      client_frame(std::string(60, 'a'), {.fin = false}) + client_frame(std::string(40, 'a'), {.opcode = 0}), 100);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload.size(), 100u);
}

TEST(FrameDecoderTest, RejectsAHugeDeclaredLengthBeforeItsPayloadArrives) {
  // Only the header: the decoder must refuse without waiting for 2^40 bytes.
  std::string in = client_frame(std::string(70000, 'z')).substr(0, 14);
  in[2] = 0;  // length bytes 2..9: make it 2^40 + ...
  in[4] = 1;
  EXPECT_EQ(error_code_of(in), 1009);
  in[2] = static_cast<char>(0x80);  // top bit set
  EXPECT_EQ(error_code_of(in), 1002);
}

TEST(FrameDecoderTest, RejectsTextThatIsNotUtf8) {
  EXPECT_EQ(error_code_of(client_frame("\xff")), 1007);
  EXPECT_EQ(error_code_of(client_frame("a\xc3")), 1007);         // truncated at the end
  EXPECT_EQ(error_code_of(client_frame("\xed\xa0\x80")), 1007);  // a surrogate
  EXPECT_EQ(error_code_of(client_frame("\xc0\xaf")), 1007);      // overlong
  // A sequence split across fragments is fine; binary is never checked.
  const auto ev = run_all_splits(client_frame("\xe2\x82", {.fin = false}) + client_frame("\xac", {.opcode = 0}) +
                                 client_frame("\xff", {.opcode = 2}));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], (Event{Status::kText, "\xe2\x82\xac"}));
  EXPECT_EQ(ev[1], (Event{Status::kBinary, "\xff"}));
}

TEST(FrameDecoderTest, FailsBadUtf8BeforeTheMessageEnds) {
  FrameDecoder d(1u << 20);
  std::string_view in;
  const std::string first = client_frame("ok \xff", {.fin = false});
  in = first;
  EXPECT_EQ(d.decode(in), Status::kError);
  EXPECT_EQ(d.error_code(), CloseCode::kInvalidPayload);
}

TEST(FrameDecoderTest, DecodesCloseFramesAndValidatesThem) {
  auto ev = run_all_splits(client_frame(close_payload(1000, "bye"), {.opcode = 8}));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0], (Event{Status::kClose, "bye", 1000}));
  ev = run_all_splits(client_frame("", {.opcode = 8}));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0], (Event{Status::kClose, "", FrameDecoder::kNoStatus}));
  EXPECT_EQ(error_code_of(client_frame("x", {.opcode = 8})), 1002);
  for (int b : {0, 999, 1004, 1005, 1006, 1015, 2000, 2999, 5000, 65535}) {
    const auto bad = static_cast<std::uint16_t>(b);
    EXPECT_EQ(error_code_of(client_frame(close_payload(bad), {.opcode = 8})), 1002) << bad;
  }
  for (int g : {1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999}) {
    const auto good = static_cast<std::uint16_t>(g);
    EXPECT_TRUE(FrameDecoder::valid_close_code(good)) << good;
  }
  EXPECT_EQ(error_code_of(client_frame(close_payload(1000, "\xff"), {.opcode = 8})), 1002);
}

TEST(FrameDecoderTest, IgnoresEverythingAfterCloseOrError) {
  auto ev = run_all_splits(client_frame("", {.opcode = 8}) + client_frame("late"));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].status, Status::kClose);
  ev = run_all_splits(client_frame("x", {.masked = false}) + client_frame("late"));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].status, Status::kError);
}

TEST(FrameDecoderTest, MaskKeysAreAppliedAtEveryOffset) {
  std::string payload;
  for (int i = 0; i < 1000; ++i) payload += static_cast<char>('a' + i % 26);
  for (std::uint32_t key : {0u, 0xffffffffu, 0x01020304u}) {
    // Split at odd offsets so the mask position carries across pieces.
    const auto ev = run(client_frame(payload, {.mask = key}), 7);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].payload, payload);
  }
}

TEST(FrameDecoderTest, KeepsItsBufferBetweenMessagesButNotAHugeOne) {
  FrameDecoder d(1u << 20);
  const std::string small = client_frame(std::string(1000, 'a'));
  std::string_view in = small;
  ASSERT_EQ(d.decode(in), Status::kText);
  const std::size_t cap = d.retained_bytes();
  for (int i = 0; i < 10; ++i) {
    in = small;
    ASSERT_EQ(d.decode(in), Status::kText);
    EXPECT_EQ(d.retained_bytes(), cap);
  }
  const std::string big = client_frame(std::string(500000, 'b'));
  in = big;
  ASSERT_EQ(d.decode(in), Status::kText);
  EXPECT_EQ(d.payload().size(), 500000u);
  in = small;
  ASSERT_EQ(d.decode(in), Status::kText);
  EXPECT_LE(d.retained_bytes(), FrameDecoder::kMaxRetained);
}

TEST(ServerFrameTest, CloseFramesCarryTheCodeAndReason) {
  std::string out;
  append_close_frame(out, 1009, "too big");
  EXPECT_EQ(out, std::string("\x88\x09\x03\xf1too big", 11));
  out.clear();
  append_server_frame(out, Opcode::kPong, "abc");
  EXPECT_EQ(out,
            "\x8a\x03"
            "abc");
}

TEST(Utf8ValidatorTest, AcceptsValidAndRejectsInvalidSequences) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii that is longer than eight bytes"));
  EXPECT_TRUE(is_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(is_valid_utf8("\x80"));
  EXPECT_FALSE(is_valid_utf8("\xc1\xbf"));          // overlong 2-byte
  EXPECT_FALSE(is_valid_utf8("\xe0\x9f\xbf"));      // overlong 3-byte
  EXPECT_FALSE(is_valid_utf8("\xf0\x8f\xbf\xbf"));  // overlong 4-byte
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xf5\x80\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("abcdefgh\xe2\x82"));  // truncated after the fast path
  Utf8Validator v;
  EXPECT_TRUE(v.feed("\xf0\x9f"));
  EXPECT_FALSE(v.complete());
  EXPECT_TRUE(v.feed("\x98\x80"));
  EXPECT_TRUE(v.complete());
}

}  // namespace
}  // namespace ringcast::broker::ws
