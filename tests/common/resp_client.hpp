// The one RESP2 client of the tests, the benchmarks and ringcast-demo: command
// encoding, the byte layout of a pub/sub message frame (for load generators
// that count frames by size instead of parsing them), an incremental reply
// parser, and a blocking client with deadlines. Not the broker's code: the
// broker's encoder and parser are what this checks.
//
// Thread safety: the free functions are pure; a RespClient is used by one
// thread at a time.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "deadline.hpp"

namespace ringcast::test {

// ---- encoding ----------------------------------------------------------------

// "$<size>\r\n<s>\r\n".
std::string resp_bulk(std::string_view s);
// A command as an array of bulk strings, appended to `out` (so a load
// generator can batch many into one buffer).
void append_resp_command(std::string& out, std::initializer_list<std::string_view> args);
std::string resp_command(std::initializer_list<std::string_view> args);
// The RESP2 frame a subscriber of `channel` receives for `payload`:
// *3 $7 message, the channel, the payload.
std::string resp_message(std::string_view channel, std::string_view payload);
// Its size for a payload of `payload_size` bytes, and where the payload starts
// in it: every message on one channel with one payload size has the same size.
std::size_t resp_message_size(std::string_view channel, std::size_t payload_size);
std::size_t resp_message_payload_offset(std::string_view channel, std::size_t payload_size);
// The reply to SUBSCRIBE `channel` on a connection that then has `count`
// subscriptions.
std::string resp_subscribe_reply(std::string_view channel, int count = 1);

// ---- parsing -----------------------------------------------------------------

// One RESP2 value, decoded in place: views point into the parsed buffer (a
// RespClient's stay valid until its next read).
struct RespElem {
  char type = 0;  // '+', '-', ':', '$' (null bulk: '_')
  std::string_view str;
  long long num = 0;
};
// A reply: a scalar, or an array of scalars that keeps its first four elements
// (pub/sub replies have three).
struct RespReply {
  char type = 0;  // as RespElem, or '*'
  std::string_view str;
  long long num = 0;
  std::size_t count = 0;  // array elements, all of which were parsed
  std::array<RespElem, 4> elems{};
  // A pub/sub message (on `channel`, when not empty).
  [[nodiscard]] bool is_message(std::string_view channel = {}) const {
    return type == '*' && count == 3 && elems[0].str == "message" && (channel.empty() || elems[1].str == channel);
  }
};

// Parses one reply at p[0..n); returns the bytes it took, 0 if the reply is not
// complete yet (nested arrays are not supported: pub/sub never sends them).
std::size_t parse_reply(const char* p, std::size_t n, RespReply& r);

// ---- the client --------------------------------------------------------------

// A blocking client on 127.0.0.1 with a receive buffer; every wait has a
// deadline. Owns its socket.
class RespClient {
 public:
  // Connects to 127.0.0.1:`port` (ok() tells whether it did). `rcvbuf` > 0:
  // SO_RCVBUF set before connecting (a deliberately small window).
  explicit RespClient(std::uint16_t port, int rcvbuf = 0);
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;
  ~RespClient();
  [[nodiscard]] bool ok() const { return fd_ >= 0; }
  [[nodiscard]] int fd() const { return fd_; }
  // Hands the socket to the caller, who then reads it and closes it (a load
  // generator counting frames by size). Returns -1 if bytes the client read
  // are still unparsed: call it when the peer has sent nothing more, as after
  // subscribe() and before anything is published.
  [[nodiscard]] int release();

  // Sends a command (an array of bulk strings); false once the peer is gone.
  bool send(std::initializer_list<std::string_view> args);
  // The next reply, or nullopt at EOF or the deadline.
  std::optional<RespReply> next(Deadline d);
  // Reads at most `max_bytes` more (waiting until the deadline for some);
  // false at EOF, on an error or at the deadline.
  bool read_more(Deadline d, std::size_t max_bytes);
  // Parses whatever complete replies are buffered, calling f for each.
  template <class F>
  void for_each_buffered(F&& f) {
    for (RespReply r; take_buffered(r);) f(r);
  }
  // Sends a command and returns its reply (not on a subscribed connection).
  std::optional<RespReply> call(std::initializer_list<std::string_view> args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SUBSCRIBE one channel (or PSUBSCRIBE a pattern) and waits for the
  // confirmation.
  bool subscribe(std::string_view channel, bool pattern = false);

 private:
  bool take_buffered(RespReply& r);
  int fd_ = -1;
  std::string buf_;
  std::size_t pos_ = 0;
};

}  // namespace ringcast::test
