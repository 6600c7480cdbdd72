// MessageInput (tools/common/message_input.hpp), the reader behind `ringcast
// pub`: lines and --binary frames over a pipe, fed in pieces of every size.
#include "message_input.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace ringcast::tools {
namespace {

using Status = MessageInput::Status;

// What the reader made of the input: each message as text, an over-long one
// as "<too long N>", a cut frame as "<truncated N>".
std::vector<std::string> read_all(const std::string& input, std::size_t max_message, bool binary,
                                  std::size_t piece = 0) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  // The writer hands the input over in pieces of `piece` bytes (0: at once),
  // so messages and headers arrive split at every offset.
  std::thread writer([&] {
    std::size_t at = 0;
    while (at < input.size()) {
      const std::size_t n = piece == 0 ? input.size() - at : std::min(piece, input.size() - at);
      const ssize_t w = ::write(fds[1], input.data() + at, n);
      if (w <= 0) break;
      at += static_cast<std::size_t>(w);
    }
    ::close(fds[1]);
  });
  MessageInput in(fds[0], max_message, binary);
  std::vector<std::string> got;
  for (;;) {
    const MessageInput::Next next = in.next();
    if (next.status == Status::kMessage) {
      got.emplace_back(reinterpret_cast<const char*>(next.data.data()), next.data.size());
    } else if (next.status == Status::kTooLong) {
      got.push_back("<too long " + std::to_string(next.length) + ">");
    } else if (next.status == Status::kTruncated) {
      got.push_back("<truncated " + std::to_string(next.length) + ">");
      break;
    } else if (next.status != Status::kInterrupted) {
      EXPECT_EQ(next.status, Status::kEnd);
      break;
    }
  }
  writer.join();
  ::close(fds[0]);
  return got;
}

std::string frame(const std::string& payload) {
  const auto h = frame_header(static_cast<std::uint32_t>(payload.size()));
  return std::string(reinterpret_cast<const char*>(h.data()), h.size()) + payload;
}

using Lines = std::vector<std::string>;

TEST(MessageInputTest, LinesArriveWholeHoweverTheInputIsSplit) {
  const std::string input = "one\n\ntwo words\n" + std::string(100, 'x') + "\nlast without newline";
  const Lines want = {"one", "", "two words", std::string(100, 'x'), "last without newline"};
  for (const std::size_t piece : std::vector<std::size_t>{0, 1, 3, 7, 64})
    EXPECT_EQ(read_all(input, 100, false, piece), want) << piece;
}

TEST(MessageInputTest, LineOverTheLimitIsReportedWithItsLengthAndTheNextOneStillArrives) {
  const std::string input = std::string(100, 'a') + "\n" + std::string(101, 'b') + "\nnext\n";
  const Lines want = {std::string(100, 'a'), "<too long 101>", "next"};
  for (const std::size_t piece : std::vector<std::size_t>{0, 1, 50, 4096})
    EXPECT_EQ(read_all(input, 100, false, piece), want) << piece;
}

TEST(MessageInputTest, LineManyBuffersLongStreamsPastAndIsCountedExactly) {
  // Ten times the reader's 64 KiB buffer: it is dropped as it arrives.
  const std::size_t huge = 10 * 64 * 1024 + 3;
  const std::string input = "before\n" + std::string(huge, 'h') + "\nafter";
  const Lines want = {"before", "<too long " + std::to_string(huge) + ">", "after"};
  EXPECT_EQ(read_all(input, 52, false, 0), want);
  EXPECT_EQ(read_all(input, 52, false, 1000), want);
  // Over the limit up to the end of the input, without a newline.
  EXPECT_EQ(read_all("x\n" + std::string(60, 'y'), 52, false, 7), (Lines{"x", "<too long 60>"}));
}

TEST(MessageInputTest, FramesOfAnySizeUpToTheLimitArriveWhole) {
  std::string big(70000, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
  const std::string input = frame("") + frame("a\nb") + frame(std::string(200, '\n')) + frame(big);
  const Lines want = {"", "a\nb", std::string(200, '\n'), big};
  for (const std::size_t piece : std::vector<std::size_t>{0, 1, 5, 4099})
    EXPECT_EQ(read_all(input, 70000, true, piece), want) << piece;
}

TEST(MessageInputTest, FrameOverTheLimitIsSkippedAndTheNextFrameStillArrives) {
  const std::string input = frame("ok") + frame(std::string(300000, 'z')) + frame("next");
  const Lines want = {"ok", "<too long 300000>", "next"};
  EXPECT_EQ(read_all(input, 1024, true, 0), want);
  EXPECT_EQ(read_all(input, 1024, true, 777), want);
}

TEST(MessageInputTest, InputEndingInsideAFrameIsTruncatedNotAMessage) {
  EXPECT_EQ(read_all(frame("ok") + frame("abcdef").substr(0, 7), 1024, true), (Lines{"ok", "<truncated 6>"}));
  EXPECT_EQ(read_all(frame("ok") + "\x05\x00", 1024, true), (Lines{"ok", "<truncated 0>"}));
  EXPECT_EQ(read_all(frame(std::string(2000, 'z')).substr(0, 1500), 1024, true), (Lines{"<truncated 2000>"}));
}

}  // namespace
}  // namespace ringcast::tools
