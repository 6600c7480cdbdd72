// Test helper: a raw WebSocket client over a loopback socket (handshake,
// masked frames out, server frames in), every read bounded by a deadline.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "client_frame.hpp"
#include "deadline.hpp"
#include "fd_io.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::broker::ws::test {

// What a PopSub client sends (tokio-tungstenite's connect_async): no subprotocol.
inline constexpr std::string_view kPopSubHandshake =
    "GET / HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\n"
    "Upgrade: websocket\r\n"
    "Connection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n"
    "\r\n";

// The same offering ringcast's subprotocol: the richer frames the broker's own
// tests expect (subscribe confirmations, puback, dup; docs/broker.md).
inline const std::string kHandshake = std::string(kPopSubHandshake.substr(0, kPopSubHandshake.size() - 2)) +
                                      "Sec-WebSocket-Protocol: ringcast.v1\r\n\r\n";

// Which JSON protocol a client asks for at the upgrade.
enum class Protocol { kRingcast, kPopSub };

struct ServerFrame {
  std::uint8_t opcode = 0;
  bool fin = false;
  bool masked = false;
  std::string payload;
};

class WsClient {
 public:
  // Connects; with `upgrade`, also sends the handshake (offering ringcast's
  // subprotocol unless `protocol` is PopSub's) and reads the 101.
  explicit WsClient(std::uint16_t port, bool upgrade = true, Protocol protocol = Protocol::kRingcast)
      : fd_(ringcast::test::connect_loopback(port)) {
    if (fd_ < 0 || !upgrade) return;
    ringcast::test::send_all(fd_, protocol == Protocol::kRingcast ? kHandshake : kPopSubHandshake);
    if (!ringcast::test::read_until(fd_, buf_, "\r\n\r\n", deadline())) return;
    const auto end = buf_.find("\r\n\r\n") + 4;
    response_ = buf_.substr(0, end);
    buf_.erase(0, end);
  }
  ~WsClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  [[nodiscard]] bool upgraded() const { return response_.rfind("HTTP/1.1 101 ", 0) == 0; }
  [[nodiscard]] const std::string& response() const { return response_; }
  [[nodiscard]] int fd() const { return fd_; }

  bool send_raw(std::string_view bytes) { return ringcast::test::send_all(fd_, bytes); }
  bool send(std::string_view payload, ClientFrame f = {}) { return send_raw(client_frame(payload, f)); }
  bool send_json(const nlohmann::json& j) { return send(j.dump()); }

  // The next server frame, or nullopt at EOF or after 20 s.
  std::optional<ServerFrame> read_frame() {
    const auto d = deadline();
    for (;;) {
      if (auto f = parse()) return f;
      if (ringcast::test::read_some(fd_, buf_, d) <= 0) return std::nullopt;
    }
  }
  // The next text frame's JSON (skipping nothing: any other frame fails).
  std::optional<nlohmann::json> read_json() {
    auto f = read_frame();
    if (!f || f->opcode != 0x1) return std::nullopt;
    auto j = nlohmann::json::parse(f->payload, nullptr, false);
    if (j.is_discarded()) return std::nullopt;
    return j;
  }
  // Reads frames until a close frame; returns its code (1005 if it has none),
  // or nullopt if the connection ends without one.
  std::optional<std::uint16_t> read_close() {
    for (;;) {
      auto f = read_frame();
      if (!f) return std::nullopt;
      if (f->opcode != 0x8) continue;
      if (f->payload.size() < 2) return 1005;
      return static_cast<std::uint16_t>((static_cast<unsigned char>(f->payload[0]) << 8) |
                                        static_cast<unsigned char>(f->payload[1]));
    }
  }
  // True once the server has closed the connection (EOF within 20 s).
  bool closed_by_server() {
    std::string rest;
    return ringcast::test::read_to_eof(fd_, rest, deadline());
  }
  // Everything until EOF, for plain HTTP responses.
  std::string read_all() {
    std::string out = std::move(buf_);
    ringcast::test::read_to_eof(fd_, out, deadline());
    return out;
  }

 private:
  static ringcast::test::Deadline deadline() { return ringcast::test::deadline_in(std::chrono::seconds(20)); }

  std::optional<ServerFrame> parse() {
    if (buf_.size() < 2) return std::nullopt;
    const auto b = [this](std::size_t i) { return static_cast<unsigned char>(buf_[i]); };
    ServerFrame f;
    f.fin = (b(0) & 0x80) != 0;
    f.opcode = b(0) & 0x0F;
    f.masked = (b(1) & 0x80) != 0;
    std::uint64_t len = b(1) & 0x7F;
    std::size_t at = 2;
    if (len == 126) {
      if (buf_.size() < 4) return std::nullopt;
      len = (std::uint64_t{b(2)} << 8) | b(3);
      at = 4;
    } else if (len == 127) {
      if (buf_.size() < 10) return std::nullopt;
      len = 0;
      for (std::size_t i = 0; i < 8; ++i) len = (len << 8) | b(2 + i);
      at = 10;
    }
    if (buf_.size() < at + len) return std::nullopt;
    f.payload = buf_.substr(at, static_cast<std::size_t>(len));
    buf_.erase(0, at + static_cast<std::size_t>(len));
    return f;
  }

  int fd_;
  std::string buf_;
  std::string response_;
};

}  // namespace ringcast::broker::ws::test
