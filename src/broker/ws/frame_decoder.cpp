#include "broker/ws/frame_decoder.hpp"

#include <algorithm>
#include <cstring>

namespace ringcast::broker::ws {

namespace {

constexpr bool is_control(Opcode op) noexcept { return (static_cast<std::uint8_t>(op) & 0x8) != 0; }

constexpr bool known_opcode(std::uint8_t op) noexcept { return op <= 0x2 || (op >= 0x8 && op <= 0xA); }

// dst[i] = src[i] ^ mask[(pos + i) % 4], eight bytes at a time.
void unmask(char* dst, const char* src, std::size_t n, const std::array<unsigned char, 4>& mask,
            std::size_t pos) noexcept {
  unsigned char m[8];
  for (std::size_t k = 0; k < 8; ++k) m[k] = mask[(pos + k) & 3];
  std::uint64_t m64;
  std::memcpy(&m64, m, 8);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, src + i, 8);
    w ^= m64;
    std::memcpy(dst + i, &w, 8);
  }
  for (; i < n; ++i) dst[i] = static_cast<char>(static_cast<unsigned char>(src[i]) ^ m[i & 7]);
}

}  // namespace

bool FrameDecoder::valid_close_code(std::uint16_t code) noexcept {
  if (code >= 3000 && code <= 4999) return true;  // registered and private use
  if (code >= 1000 && code <= 1003) return true;
  return code >= 1007 && code <= 1014;  // 1004-1006 and 1015 are never sent
}

FrameDecoder::Status FrameDecoder::fail(CloseCode code, std::string_view why) noexcept {
  state_ = State::kDone;
  error_code_ = code;
  error_ = why;
  payload_ = {};
  return Status::kError;
}

FrameDecoder::Status FrameDecoder::decode(std::string_view& in) {
  if (clear_message_) {
    clear_message_ = false;
    payload_ = {};
    if (message_.capacity() > kMaxRetained) {
      std::string().swap(message_);  // invariant 2
    } else {
      message_.clear();
    }
  }
  for (;;) {
    switch (state_) {
      case State::kDone:
        in = {};  // invariant 3
        return Status::kNeedMore;

      case State::kHeader: {
        if (in.empty()) return Status::kNeedMore;
        const std::size_t n = std::min(hdr_need_ - hdr_len_, in.size());
        std::memcpy(hdr_.data() + hdr_len_, in.data(), n);
        in.remove_prefix(n);
        hdr_len_ += n;
        if (hdr_len_ < hdr_need_) return Status::kNeedMore;
        if (hdr_need_ == 2) {
          // The first two bytes say how long the header is; check what they can.
          const unsigned char b0 = hdr_[0];
          const unsigned char b1 = hdr_[1];
          const std::uint8_t op = b0 & 0x0F;
          if ((b0 & 0x70) != 0) return fail(CloseCode::kProtocolError, "reserved bits set (no extension negotiated)");
          if (!known_opcode(op)) return fail(CloseCode::kProtocolError, "unknown opcode");
          if ((b1 & 0x80) == 0) return fail(CloseCode::kProtocolError, "unmasked client frame");
          fin_ = (b0 & 0x80) != 0;
          opcode_ = static_cast<Opcode>(op);
          const std::uint8_t len7 = b1 & 0x7F;
          if (is_control(opcode_)) {
            if (!fin_) return fail(CloseCode::kProtocolError, "fragmented control frame");
            if (len7 > kMaxControl) return fail(CloseCode::kProtocolError, "control frame over 125 bytes");
          } else if (opcode_ == Opcode::kContinuation) {
            if (!in_message_) return fail(CloseCode::kProtocolError, "continuation frame outside a fragmented message");
          } else if (in_message_) {
            return fail(CloseCode::kProtocolError, "new data frame inside a fragmented message");
          }
          hdr_need_ = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
          continue;
        }
        const Status s = start_frame();
        if (s == Status::kError) return s;
        if (remaining_ == 0) {
          const Status f = finish_frame();
          if (f != Status::kNeedMore) return f;
        }
        continue;
      }

      case State::kPayload: {
        if (in.empty()) return Status::kNeedMore;
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size()));
        char* dst;
        if (is_control(opcode_)) {
          dst = control_.data() + control_len_;
          control_len_ += n;
        } else {
          const std::size_t old = message_.size();
          message_.resize(old + n);
          dst = message_.data() + old;
        }
        unmask(dst, in.data(), n, mask_, mask_pos_);
        mask_pos_ = (mask_pos_ + n) & 3;
        remaining_ -= n;
        in.remove_prefix(n);
        if (!is_control(opcode_) && message_opcode_ == Opcode::kText && !utf8_.feed(std::string_view(dst, n))) {
          return fail(CloseCode::kInvalidPayload, "text message is not valid UTF-8");
        }
        if (remaining_ == 0) {
          const Status f = finish_frame();
          if (f != Status::kNeedMore) return f;
        }
        continue;
      }
    }
  }
}

FrameDecoder::Status FrameDecoder::start_frame() noexcept {
  const unsigned char len7 = hdr_[1] & 0x7F;
  std::uint64_t len = len7;
  std::size_t at = 2;
  if (len7 == 126) {
    len = (std::uint64_t{hdr_[2]} << 8) | hdr_[3];
    at = 4;
    if (len < 126) return fail(CloseCode::kProtocolError, "length not minimally encoded");
  } else if (len7 == 127) {
    len = 0;
    for (std::size_t i = 0; i < 8; ++i) len = (len << 8) | hdr_[2 + i];
    at = 10;
    if ((len >> 63) != 0) return fail(CloseCode::kProtocolError, "64-bit length with the top bit set");
    if (len <= 0xFFFF) return fail(CloseCode::kProtocolError, "length not minimally encoded");
  }
  std::memcpy(mask_.data(), hdr_.data() + at, 4);
  hdr_len_ = 0;
  hdr_need_ = 2;
  if (is_control(opcode_)) {
    control_len_ = 0;
  } else {
    if (len > max_message_ - std::min(max_message_, message_.size())) {
      return fail(CloseCode::kMessageTooBig, "message over the size limit");
    }
    if (opcode_ != Opcode::kContinuation) {
      in_message_ = true;
      message_opcode_ = opcode_;
      utf8_.reset();
    }
  }
  remaining_ = len;
  mask_pos_ = 0;
  state_ = State::kPayload;
  return Status::kNeedMore;
}

FrameDecoder::Status FrameDecoder::finish_frame() noexcept {
  state_ = State::kHeader;
  switch (opcode_) {
    case Opcode::kPing:
      payload_ = std::string_view(control_.data(), control_len_);
      return Status::kPing;
    case Opcode::kPong:
      payload_ = std::string_view(control_.data(), control_len_);
      return Status::kPong;
    case Opcode::kClose: {
      if (control_len_ == 1) return fail(CloseCode::kProtocolError, "close payload of one byte");
      close_code_ = kNoStatus;
      payload_ = {};
      if (control_len_ >= 2) {
        const auto code = static_cast<std::uint16_t>((static_cast<unsigned char>(control_[0]) << 8) |
                                                     static_cast<unsigned char>(control_[1]));
        if (!valid_close_code(code)) return fail(CloseCode::kProtocolError, "invalid close code");
        const std::string_view reason(control_.data() + 2, control_len_ - 2);
        if (!is_valid_utf8(reason)) return fail(CloseCode::kProtocolError, "close reason is not UTF-8");
        close_code_ = code;
        payload_ = reason;
      }
      state_ = State::kDone;  // invariant 3
      return Status::kClose;
    }
    default:
      break;
  }
  if (!fin_) return Status::kNeedMore;  // more fragments follow
  in_message_ = false;
  if (message_opcode_ == Opcode::kText && !utf8_.complete()) {
    return fail(CloseCode::kInvalidPayload, "text message is not valid UTF-8");
  }
  payload_ = message_;
  clear_message_ = true;
  return message_opcode_ == Opcode::kText ? Status::kText : Status::kBinary;
}

}  // namespace ringcast::broker::ws
