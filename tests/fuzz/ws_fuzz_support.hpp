// Shared by the WebSocket fuzz targets: a private broker core and upgraded
// WebSocket sessions on it, so fuzzed frames and commands run the whole
// session path (commands, subscriptions, publishes, JSON deliveries).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "broker/core/broker_core.hpp"
#include "broker/ws/http_upgrade.hpp"
#include "broker/ws/ws_session.hpp"

namespace ringcast::broker::ws::fuzz {

class NullWaker final : public Waker {
 public:
  void wake() noexcept override {}
};

inline BrokerCore& core() {
  static BrokerCore* c = [] {
    BrokerConfig cfg;
    cfg.max_subscriptions = 64;
    cfg.ws_max_message = 4096;
    cfg.queue_limits.hard_bytes = 1 << 20;
    cfg.queue_limits.soft_bytes = 0;
    return new BrokerCore(cfg);
  }();
  return *c;
}

inline const HttpRoutes& routes() {
  static const HttpRoutes r = default_http_routes();
  return r;
}

inline NullWaker& waker() {
  static NullWaker w;
  return w;
}

// A session past the handshake; aborts if the upgrade fails.
inline std::unique_ptr<WsSession> upgraded_session() {
  auto s = std::make_unique<WsSession>(core(), "fuzz", waker(), routes());
  (void)s->on_input(
      "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n");
  if (!s->upgraded()) std::abort();
  return s;
}

// Pops and releases everything queued for `c`.
inline void drain(Client& c) {
  std::vector<FrameSpan> out;
  for (;;) {
    const auto r = c.queue().pop_batch(SIZE_MAX, SIZE_MAX, out);
    if (r.frames == 0) break;
    c.queue().release(r.bytes);
    out.clear();
  }
}

// The masked client frame carrying `payload` (mask 0: the bytes as they are).
inline std::string masked_frame(std::uint8_t opcode, std::string_view payload) {
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  if (payload.size() < 126) {
    f += static_cast<char>(0x80 | payload.size());
  } else {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(payload.size() >> 8);
    f += static_cast<char>(payload.size() & 0xFF);
  }
  f.append(4, '\0');
  f.append(payload);
  return f;
}

// A session subscribed to every topic (the glob "*"), kept across inputs so
// that publishes have a JSON subscriber; drain() it after each input.
inline WsSession& listener() {
  static WsSession* l = [] {
    auto s = upgraded_session();
    (void)s->on_input(masked_frame(0x1, R"({"type":"subscribe","topic":"*"})"));
    return s.release();
  }();
  return *l;
}

}  // namespace ringcast::broker::ws::fuzz
