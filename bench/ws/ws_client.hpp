// The client side of RFC 6455 that the WebSocket load generator needs: the
// HTTP upgrade, masked client frames (section 5.3) and a streaming reader of
// server frames that parses headers only and hands payload bytes on as they
// arrive, however the stream was split into reads. Opcodes come from the
// broker's own frame_header.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "broker/ws/frame_header.hpp"
#include "byte_stream.hpp"
#include "deadline.hpp"
#include "fd_io.hpp"

namespace ringcast::bench::ws {

using broker::ws::Opcode;

// Sends the upgrade request for `/` and reads the response. True on
// "101 Switching Protocols"; bytes the server sent after the response (its
// first frames) are left in `rest`. `error` says what went wrong otherwise.
// With `offer_ringcast` it offers ringcast's richer protocol (subscribe
// confirmations, puback, numeric ids: docs/broker.md), which the benchmarks wait
// for; nats-server ignores the offer. Without it the broker speaks PopSub's
// dialect.
// Plain or TLS (byte_stream.hpp): the same request either way.
inline bool upgrade(ByteStream& io, int port, std::string& rest, std::string& error, test::Deadline deadline,
                    bool offer_ringcast = true) {
  const std::string request = "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                              (offer_ringcast ? "Sec-WebSocket-Protocol: ringcast.v1\r\n\r\n" : "\r\n");
  rest.clear();
  if (!send_all(io, request)) {
    error = "cannot send the upgrade request";
    return false;
  }
  if (!read_until(io, rest, "\r\n\r\n", deadline)) {
    error = "no upgrade response";
    return false;
  }
  const auto end = rest.find("\r\n\r\n") + 4;
  const std::string_view status(rest.data(), rest.find("\r\n"));
  if (status.find(" 101") == std::string_view::npos) {
    error = "upgrade refused: " + std::string(status);
    return false;
  }
  rest.erase(0, end);
  return true;
}

inline bool upgrade(int fd, int port, std::string& rest, std::string& error, test::Deadline deadline) {
  PlainStream io(fd);
  return upgrade(io, port, rest, error, deadline);
}

// A final client frame of `op` carrying `payload`, masked with a fixed key
// (servers must unmask; nothing here needs the key to be unpredictable).
inline std::string client_frame(Opcode op, std::string_view payload) {
  constexpr unsigned char kKey[4] = {0x37, 0xfa, 0x21, 0x3d};
  std::string f;
  f.push_back(static_cast<char>(0x80 | static_cast<unsigned>(op)));
  const std::size_t n = payload.size();
  if (n < 126) {
    f.push_back(static_cast<char>(0x80 | n));
  } else if (n <= 0xFFFF) {
    f.push_back(static_cast<char>(0x80 | 126));
    f.push_back(static_cast<char>(n >> 8));
    f.push_back(static_cast<char>(n & 0xFF));
  } else {
    f.push_back(static_cast<char>(0x80 | 127));
    for (int i = 0; i < 8; ++i) f.push_back(static_cast<char>((static_cast<std::uint64_t>(n) >> (56 - 8 * i)) & 0xFF));
  }
  f.append(reinterpret_cast<const char*>(kKey), 4);
  for (std::size_t i = 0; i < n; ++i) f.push_back(static_cast<char>(payload[i] ^ static_cast<char>(kKey[i % 4])));
  return f;
}

// Reads server frames (unmasked, RFC 6455 section 5.2) from a byte stream fed
// in arbitrary pieces. For each frame it calls, on a Sink:
//   void begin(Opcode op, bool fin, std::uint64_t length);
//   void data(const char* p, std::size_t n);   // zero or more times
//   void end();
// Only the header bytes are looked at; payload bytes go to the sink in place.
// One reader per connection; not thread-safe.
class FrameReader {
 public:
  // Feeds `n` bytes. False if the stream is not a valid server frame stream
  // (a masked server frame, a reserved bit, a length with its top bit set);
  // the connection is then unusable.
  template <class Sink>
  bool feed(const char* p, std::size_t n, Sink& sink) {
    while (n > 0) {
      if (remaining_ > 0) {
        const std::size_t take = remaining_ < n ? static_cast<std::size_t>(remaining_) : n;
        sink.data(p, take);
        p += take;
        n -= take;
        remaining_ -= take;
        if (remaining_ == 0) sink.end();
        continue;
      }
      // A header: in place when it is whole in this piece, else gathered.
      const char* h = p;
      std::size_t have = n;
      if (held_ > 0) {
        const std::size_t take = std::min(n, sizeof hold_ - held_);
        std::memcpy(hold_ + held_, p, take);
        h = hold_;
        have = held_ + take;
      }
      const std::size_t need = header_size(h, have);
      if (need == 0 || have < need) {  // incomplete: keep it for the next piece
        if (held_ == 0) std::memcpy(hold_, p, n);
        held_ = have;
        return true;
      }
      const auto b0 = static_cast<unsigned char>(h[0]);
      const auto b1 = static_cast<unsigned char>(h[1]);
      if ((b0 & 0x70) != 0 || (b1 & 0x80) != 0) return false;  // RSV bits, a masked server frame
      std::uint64_t len = b1 & 0x7F;
      if (len == 126) {
        len = (static_cast<std::uint64_t>(static_cast<unsigned char>(h[2])) << 8) | static_cast<unsigned char>(h[3]);
      } else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | static_cast<unsigned char>(h[2 + i]);
        if (len >> 63) return false;
      }
      const std::size_t consumed = need - held_;  // bytes of this piece the header used
      held_ = 0;
      p += consumed;
      n -= consumed;
      sink.begin(static_cast<Opcode>(b0 & 0x0F), (b0 & 0x80) != 0, len);
      remaining_ = len;
      if (len == 0) sink.end();
    }
    return true;
  }

 private:
  // Bytes of the header starting at h, or 0 if fewer than 2 bytes are there.
  static std::size_t header_size(const char* h, std::size_t have) {
    if (have < 2) return 0;
    const unsigned len7 = static_cast<unsigned char>(h[1]) & 0x7F;
    return 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
  }

  std::uint64_t remaining_ = 0;  // payload bytes of the current frame still to come
  char hold_[broker::ws::kMaxServerHeader] = {};
  std::size_t held_ = 0;  // bytes of a split header gathered so far
};

}  // namespace ringcast::bench::ws
