#include "broker/resp/request_parser.hpp"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

namespace ringcast::broker {

bool parse_int64(std::string_view s, long long& out) noexcept {
  // Mirrors Redis's string2ll, so "*+1", "$01" and "$ 1" fail here as they do there.
  if (s.empty() || s.size() > 20) return false;
  if (s.size() == 1 && s[0] == '0') {
    out = 0;
    return true;
  }
  std::size_t i = 0;
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    if (++i == s.size()) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  unsigned long long v = static_cast<unsigned long long>(s[i] - '0');
  for (++i; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    if (v > ULLONG_MAX / 10) return false;
    v *= 10;
    const auto d = static_cast<unsigned long long>(s[i] - '0');
    if (v > ULLONG_MAX - d) return false;
    v += d;
  }
  if (negative) {
    if (v > static_cast<unsigned long long>(LLONG_MAX) + 1) return false;
    out = v == static_cast<unsigned long long>(LLONG_MAX) + 1 ? LLONG_MIN : -static_cast<long long>(v);
  } else {
    if (v > static_cast<unsigned long long>(LLONG_MAX)) return false;
    out = static_cast<long long>(v);
  }
  return true;
}

namespace {

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_hex(char c) noexcept { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Frees the buffer of a string that outgrew invariant 1's between-commands
// bound. Swapping, because move-assigning an empty string keeps the buffer.
void release_if_large(std::string& s) noexcept {
  if (s.capacity() > RequestParser::kMaxPrealloc) std::string().swap(s);
}

}  // namespace

bool split_inline_args(std::string_view line, std::vector<std::string>& out) {
  // Follows sdssplitargs: the line is a C string there, so a NUL ends it; at()
  // reads NUL past the end for the same reason.
  const auto nul = line.find('\0');
  if (nul != std::string_view::npos) line = line.substr(0, nul);
  auto at = [&](std::size_t i) -> char { return i < line.size() ? line[i] : '\0'; };
  std::size_t p = 0;
  for (;;) {
    while (at(p) != '\0' && is_space(at(p))) ++p;
    if (at(p) == '\0') return true;
    bool in_dq = false;
    bool in_sq = false;
    bool done = false;
    std::string cur;
    while (!done) {
      const char c = at(p);
      if (in_dq) {
        if (c == '\\' && at(p + 1) == 'x' && is_hex(at(p + 2)) && is_hex(at(p + 3))) {
          cur.push_back(static_cast<char>(hex_value(at(p + 2)) * 16 + hex_value(at(p + 3))));
          p += 3;
        } else if (c == '\\' && at(p + 1) != '\0') {
          ++p;
          switch (at(p)) {
            case 'n':
              cur.push_back('\n');
              break;
            case 'r':
              cur.push_back('\r');
              break;
            case 't':
              cur.push_back('\t');
              break;
            case 'b':
              cur.push_back('\b');
              break;
            case 'a':
              cur.push_back('\a');
              break;
            default:
              cur.push_back(at(p));
              break;
          }
        } else if (c == '"') {
          // A closing quote must be followed by a space or the end.
          if (at(p + 1) != '\0' && !is_space(at(p + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;  // unterminated quotes
        } else {
          cur.push_back(c);
        }
      } else if (in_sq) {
        if (c == '\\' && at(p + 1) == '\'') {
          ++p;
          cur.push_back('\'');
        } else if (c == '\'') {
          if (at(p + 1) != '\0' && !is_space(at(p + 1))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          cur.push_back(c);
        }
      } else {
        switch (c) {
          case ' ':
          case '\n':
          case '\r':
          case '\t':
          case '\0':
            done = true;
            break;
          case '"':
            in_dq = true;
            break;
          case '\'':
            in_sq = true;
            break;
          default:
            cur.push_back(c);
            break;
        }
      }
      if (at(p) != '\0') ++p;
    }
    out.push_back(std::move(cur));
  }
}

RequestParser::Status RequestParser::fail(std::string text) {
  state_ = State::kError;
  error_ = std::move(text);
  return Status::kError;
}

bool RequestParser::collect_line(std::string_view& in, char stop, bool& too_long) {
  const std::size_t pos = in.find(stop);
  // Invariant 4: before authentication the bound holds even for a line whose
  // end came in the same piece (nothing over it is copied).
  if (!authenticated_ && line_.size() + std::min(pos, in.size()) > kMaxUnauthBytes) {
    too_long = true;
    return false;
  }
  if (pos != std::string_view::npos) {
    line_.append(in.data(), pos);
    in.remove_prefix(stop == '\n' ? pos + 1 : pos);
    return true;
  }
  line_.append(in.data(), in.size());
  in.remove_prefix(in.size());
  too_long = line_.size() > max_line();
  return false;
}

void RequestParser::begin_command() {
  argc_ = 0;
  if (slots_.capacity() > kMaxRetainedSlots) {
    slots_.resize(std::min(slots_.size(), kMaxRetainedSlots));
    slots_.shrink_to_fit();
  }
  for (std::string& slot : slots_) release_if_large(slot);
  release_if_large(line_);
}

std::size_t RequestParser::retained_bytes() const noexcept {
  std::size_t n = slots_.capacity() * sizeof(std::string) + line_.capacity();
  for (const std::string& slot : slots_) n += slot.capacity();
  return n;
}

RequestParser::Status RequestParser::finish_inline() {
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  // Inline commands are typed by people: rebuilding the slots is cheap enough.
  slots_.clear();
  if (!split_inline_args(line_, slots_)) {
    return fail("ERR Protocol error: unbalanced quotes in request");
  }
  line_.clear();
  state_ = State::kStart;
  argc_ = slots_.size();
  if (argc_ == 0) return Status::kNeedMore;  // an empty line is not a command
  // Invariant 4 for inline commands too (Redis checks only multibulk ones).
  if (!authenticated_ && argc_ > kMaxUnauthArgs) return fail("ERR Protocol error: unauthenticated multibulk length");
  if (argc_ > limits_.max_args) return fail("ERR Protocol error: invalid multibulk length");
  return Status::kCommand;
}

RequestParser::Status RequestParser::parse(std::string_view& in) {
  for (;;) {
    switch (state_) {
      case State::kError:
        return Status::kError;

      case State::kStart:
        begin_command();
        if (in.empty()) return Status::kNeedMore;
        line_.clear();
        if (in.front() == '*') {
          in.remove_prefix(1);
          state_ = State::kArrayHeader;
        } else {
          state_ = State::kInline;
        }
        break;

      case State::kInline: {
        bool too_long = false;
        if (!collect_line(in, '\n', too_long)) {
          if (too_long) return fail("ERR Protocol error: too big inline request");
          return Status::kNeedMore;
        }
        const Status st = finish_inline();
        if (st != Status::kNeedMore) return st;
        break;  // empty line: look for the next command
      }

      case State::kArrayHeader: {
        bool too_long = false;
        if (!collect_line(in, '\r', too_long)) {
          if (too_long) return fail("ERR Protocol error: too big mbulk count string");
          return Status::kNeedMore;
        }
        long long n = 0;
        if (!parse_int64(line_, n) || n > INT_MAX) return fail("ERR Protocol error: invalid multibulk length");
        // Redis's check and text (invariant 4), before the configured limit's.
        if (!authenticated_ && n > static_cast<long long>(kMaxUnauthArgs)) {
          return fail("ERR Protocol error: unauthenticated multibulk length");
        }
        if (n > 0 && static_cast<unsigned long long>(n) > limits_.max_args) {
          return fail("ERR Protocol error: invalid multibulk length");
        }
        command_bytes_ = 0;
        crlf_left_ = 2;
        state_ = State::kCrlf;
        if (n <= 0) {
          after_crlf_ = State::kStart;  // "*0" and "*-1" are empty commands, ignored
        } else {
          expected_args_ = static_cast<std::size_t>(n);
          slots_.reserve(std::min(expected_args_, kMaxPreallocArgs));
          after_crlf_ = State::kBulkHeader;
        }
        break;
      }

      case State::kBulkHeader: {
        bool too_long = false;
        if (!collect_line(in, '\r', too_long)) {
          if (too_long) return fail("ERR Protocol error: too big bulk count string");
          return Status::kNeedMore;
        }
        if (line_.empty() || line_[0] != '$') {
          const char got = line_.empty() ? '\r' : line_[0];
          return fail(fmt::format("ERR Protocol error: expected '$', got '{}'", got));
        }
        long long n = 0;
        if (!parse_int64(std::string_view(line_).substr(1), n) || n < 0 ||
            static_cast<unsigned long long>(n) > limits_.max_bulk_len) {
          return fail("ERR Protocol error: invalid bulk length");
        }
        // Redis refuses one bulk over 16384 before authentication; we bound the
        // command's bulks together (invariant 4), with the same text.
        command_bytes_ += static_cast<std::size_t>(n);
        if (!authenticated_ && command_bytes_ > kMaxUnauthBytes) {
          return fail("ERR Protocol error: unauthenticated bulk length");
        }
        bulk_len_ = static_cast<std::size_t>(n);
        if (argc_ == slots_.size()) slots_.emplace_back();
        std::string& arg = slots_[argc_++];
        arg.clear();
        arg.reserve(std::min(bulk_len_, kMaxPrealloc));  // never shrinks (C++20)
        crlf_left_ = 2;
        after_crlf_ = State::kBulkData;
        state_ = State::kCrlf;
        break;
      }

      case State::kBulkData: {
        std::string& arg = slots_[argc_ - 1];
        const std::size_t take = std::min(bulk_len_ - arg.size(), in.size());
        arg.append(in.data(), take);
        in.remove_prefix(take);
        if (arg.size() < bulk_len_) return Status::kNeedMore;
        // Like Redis, the two bytes after the data are skipped, not checked.
        crlf_left_ = 2;
        state_ = State::kCrlf;
        if (argc_ == expected_args_) {
          complete_after_crlf_ = true;
          after_crlf_ = State::kStart;
        } else {
          after_crlf_ = State::kBulkHeader;
        }
        break;
      }

      case State::kCrlf: {
        const std::size_t skip = std::min(crlf_left_, in.size());
        in.remove_prefix(skip);
        crlf_left_ -= skip;
        if (crlf_left_ > 0) return Status::kNeedMore;
        line_.clear();
        state_ = after_crlf_;
        if (complete_after_crlf_) {
          complete_after_crlf_ = false;
          return Status::kCommand;
        }
        break;
      }
    }
  }
}

}  // namespace ringcast::broker
