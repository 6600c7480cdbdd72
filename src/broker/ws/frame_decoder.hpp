// Incremental decoder of the frames a WebSocket client sends (RFC 6455 §5),
// with the checks a server must make: every client frame masked (§5.1),
// reserved bits clear (no extension is negotiated), known opcodes only,
// control frames at most 125 bytes and never fragmented (§5.5), continuation
// frames only inside a fragmented message and no new data frame while one is
// open (§5.4; control frames may come in between), minimal length encodings,
// a reassembled message of at most max_message bytes, text messages valid
// UTF-8 (§8.1, checked as the bytes arrive so a bad message fails early), and
// close payloads with a valid code and a UTF-8 reason (§5.5.1, §7.4).
//
// Thread safety: none; one decoder per connection, used by its thread only.
//
// Invariants:
//  1. Bytes are consumed exactly once: input may be split anywhere, and the
//     events produced do not depend on how it was split.
//  2. Memory held is bounded: one message of at most max_message bytes while
//     it arrives, 125 bytes for a control frame's payload. Between messages the
//     message buffer keeps at most kMaxRetained bytes of capacity, so a
//     steady stream of same-sized messages decodes without allocating and one
//     large message is not pinned for the connection's lifetime.
//  3. After an error, or once a close frame was decoded, the decoder consumes
//     and ignores everything (the session closes the connection).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/ws/frame_header.hpp"
#include "broker/ws/utf8.hpp"

namespace ringcast::broker::ws {

class FrameDecoder {
 public:
  // Capacity the message buffer keeps between messages (invariant 2).
  static constexpr std::size_t kMaxRetained = 64u << 10;
  // The largest control-frame payload (§5.5).
  static constexpr std::size_t kMaxControl = 125;
  // The close code a close frame without a body stands for (§7.1.5); never sent.
  static constexpr std::uint16_t kNoStatus = 1005;

  enum class Status : std::uint8_t {
    kNeedMore,  // `in` is exhausted with no complete event
    kText,      // payload(): a whole text message, valid UTF-8
    kBinary,    // payload(): a whole binary message
    kPing,      // payload(): the ping's application data (answer with a pong of it)
    kPong,      // payload(): the pong's data
    kClose,     // close_code() and close_reason(): the client starts or answers the close handshake
    kError,     // error_code() and error(): close the connection with that code
  };

  // max_message: the largest reassembled data message accepted (larger: 1009).
  explicit FrameDecoder(std::size_t max_message) noexcept : max_message_(max_message) {}

  // Changes the limit for the frames whose header comes from now on (the
  // session raises it from its pre-authentication bound once the client has
  // authenticated; ws_session.hpp, invariant 3).
  void set_max_message(std::size_t max_message) noexcept { max_message_ = max_message; }

  // Consumes bytes from the front of `in` until one event is complete, the
  // input runs out (kNeedMore, `in` empty), or an error is found. What the
  // accessors return stays valid until the next call. Allocates only when a
  // message needs more capacity than the buffer kept (invariant 2).
  [[nodiscard]] Status decode(std::string_view& in);

  [[nodiscard]] std::string_view payload() const noexcept { return payload_; }
  // After kClose: the client's code (kNoStatus if it sent none) and reason.
  [[nodiscard]] std::uint16_t close_code() const noexcept { return close_code_; }
  [[nodiscard]] std::string_view close_reason() const noexcept { return payload_; }
  // After kError: the close code to send and a short description for logs.
  [[nodiscard]] CloseCode error_code() const noexcept { return error_code_; }
  [[nodiscard]] std::string_view error() const noexcept { return error_; }
  // Capacity of the message buffer: what invariant 2 bounds. For tests.
  [[nodiscard]] std::size_t retained_bytes() const noexcept { return message_.capacity(); }

  // True if `code` may appear in a close frame a peer sends (§7.4): 1000-1003,
  // 1007-1014 and 3000-4999.
  [[nodiscard]] static bool valid_close_code(std::uint16_t code) noexcept;

 private:
  enum class State : std::uint8_t { kHeader, kPayload, kDone };

  Status fail(CloseCode code, std::string_view why) noexcept;
  // Checks the header in hdr_ once its hdr_need_ bytes are in; kNeedMore when
  // it is good (the payload follows), kError otherwise.
  Status start_frame() noexcept;
  // The frame's payload is complete: produces its event or continues.
  Status finish_frame() noexcept;

  std::size_t max_message_;
  State state_ = State::kHeader;
  std::array<unsigned char, 14> hdr_{};  // 2 + up to 8 length bytes + 4 mask bytes
  std::size_t hdr_len_ = 0;
  std::size_t hdr_need_ = 2;
  // The frame being read.
  Opcode opcode_ = Opcode::kContinuation;
  bool fin_ = false;
  std::array<unsigned char, 4> mask_{};
  std::uint64_t remaining_ = 0;  // payload bytes of this frame still to come
  std::size_t mask_pos_ = 0;     // payload bytes of this frame read so far, mod 4
  // The data message being reassembled.
  bool in_message_ = false;  // a data frame without FIN came; continuations follow
  Opcode message_opcode_ = Opcode::kText;
  bool clear_message_ = false;  // the last event handed out message_: clear it first
  std::string message_;
  Utf8Validator utf8_;
  std::array<char, kMaxControl> control_{};
  std::size_t control_len_ = 0;
  std::string_view payload_;
  std::uint16_t close_code_ = kNoStatus;
  CloseCode error_code_ = CloseCode::kNormal;
  std::string_view error_;
};

}  // namespace ringcast::broker::ws
