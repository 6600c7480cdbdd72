// libFuzzer target for the durable session resume path (issue 40; docs/security.md,
// "Durable sessions and loss notices"): WebSocket sessions of several token
// identities subscribe with client ids from a small set, publish, ack, leave,
// come back and let the QoS 1 timers run, in any order the input says, on a
// fresh broker core with history per input. The property checked after every
// step: no connection ever receives a message on a channel its token may not
// subscribe to (the attack was a token limited to pub.* receiving another
// identity's secret.x deliveries by naming its client_id), besides no crash,
// leak or sanitizer report.
//
// Input: a sequence of steps (at most 64), each an opcode byte and three
// argument bytes; opcode 6 (any command text) has two, a slot and a length,
// followed by that many bytes of text.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "broker/guarantees/channel_history.hpp"
#include "ringcast/broker/grant.hpp"
#include "ringcast/broker/token.hpp"
#include "ws_fuzz_support.hpp"

namespace {

namespace b = ringcast::broker;
namespace f = ringcast::broker::ws::fuzz;

constexpr std::string_view kSecret = "fuzz-session-resume-secret-0123456789abcdef";

class FuzzClock final : public b::Clock {
 public:
  std::chrono::nanoseconds now() const noexcept override { return now_; }
  void advance(std::chrono::nanoseconds d) noexcept { now_ += d; }

 private:
  std::chrono::nanoseconds now_{std::chrono::hours(1)};
};

// The connections' identities: two grants of one subject (the narrower one
// must not read what only the wider may), and two other subjects.
struct Identity {
  b::Grant grant;
  std::string token;
};

b::Grant grant(std::string subject, std::vector<std::string> subscribe) {
  b::Grant g;
  g.subject = std::move(subject);
  g.expiry = std::chrono::system_clock::now() + std::chrono::hours(24 * 365);
  g.subscribe = std::move(subscribe);
  // publish absent: unrestricted
  return g;
}

const std::array<Identity, 4>& identities() {
  static const std::array<Identity, 4> ids = [] {
    std::array<Identity, 4> out{
        Identity{grant("alice", {"a.*"}), {}},
        Identity{grant("alice", {"a.pub.*"}), {}},
        Identity{grant("mallory", {"b.*"}), {}},
        Identity{grant("bob", {"a.*", "b.*"}), {}},
    };
    for (Identity& i : out) {
      auto t = b::mint_token(i.grant, kSecret);
      if (!t) std::abort();
      i.token = *t;
    }
    return out;
  }();
  return ids;
}

constexpr std::array<std::string_view, 4> kTopics{"a.x", "a.pub.y", "b.x", "a.*"};
constexpr std::array<std::string_view, 3> kClientIds{"c0", "c1", "c2"};

b::BrokerConfig config() {
  b::BrokerConfig c;
  c.token_secret = std::string(kSecret);
  c.history = {"a.*=64", "b.*=64"};
  c.session_ttl = std::chrono::milliseconds(0);  // no expiry thread
  c.max_in_flight = 4;
  c.max_retries = 1;
  c.ack_timeout = std::chrono::seconds(1);
  c.overflow_policy = b::OverflowPolicy::kDropOldest;
  c.queue_limits.hard_bytes = 16 << 10;
  c.queue_limits.soft_bytes = 0;
  c.ws_max_message = 4096;
  c.max_subscriptions = 64;
  return c;
}

// One input's broker: a core with history, and a session per identity slot.
struct World {
  FuzzClock clock;
  b::BrokerCore core;
  std::array<std::unique_ptr<b::ws::WsSession>, 4> sessions;
  std::unique_ptr<b::ws::WsSession> publisher;

  World() : core(config(), clock, open_history()) {}
  ~World() {
    for (auto& s : sessions) close(s);
    close(publisher);
  }

  static std::unique_ptr<b::ChannelHistory> open_history() {
    auto h = b::ChannelHistory::open(config());
    if (!h) std::abort();
    return std::move(*h);
  }

  static void close(std::unique_ptr<b::ws::WsSession>& s) {
    if (s == nullptr) return;
    s->detach();
    s.reset();
  }

  // A ringcast-protocol session authenticated with `token`.
  std::unique_ptr<b::ws::WsSession> connect(const std::string& token) {
    auto s = std::make_unique<b::ws::WsSession>(core, "fuzz", f::waker(), f::routes());
    (void)s->on_input(
        "GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Protocol: ringcast.v1\r\n\r\n");
    if (!s->upgraded()) std::abort();
    send(*s, R"({"type":"auth","token":")" + token + "\"}");
    return s;
  }

  static void send(b::ws::WsSession& s, std::string_view json) { (void)s.on_input(f::masked_frame(0x1, json)); }

  b::ws::WsSession& at(std::size_t slot) {
    if (sessions[slot] == nullptr) sessions[slot] = connect(identities()[slot].token);
    return *sessions[slot];
  }
  b::ws::WsSession& pub() {
    if (publisher == nullptr) publisher = connect(identities()[3].token);
    return *publisher;
  }

  // Drains every session, checking what each received (the property).
  void check() {
    for (std::size_t slot = 0; slot < sessions.size(); ++slot) {
      if (sessions[slot] != nullptr) drain_checked(*sessions[slot], identities()[slot].grant);
    }
    if (publisher != nullptr) f::drain(*publisher);
  }

  static void drain_checked(b::Client& c, const b::Grant& g) {
    std::vector<b::FrameSpan> out;
    for (;;) {
      const auto r = c.queue().pop_batch(SIZE_MAX, SIZE_MAX, out);
      if (r.frames == 0) break;
      for (const b::FrameSpan& s : out) {
        for (std::uint32_t i = s.first; i < s.first + s.count; ++i) check_frame(s.block->frame(i), g);
      }
      c.queue().release(r.bytes);
      out.clear();
    }
  }

  // A message frame's topic must be one the grant may subscribe to (loss
  // notices excepted).
  static void check_frame(std::string_view frame, const b::Grant& g) {
    if (frame.size() < 2 || (static_cast<unsigned char>(frame[0]) & 0x0F) != 0x1) return;
    const auto len7 = static_cast<unsigned char>(frame[1]) & 0x7F;
    const std::string_view text = frame.substr(len7 < 126 ? 2 : len7 == 126 ? 4 : 10);
    constexpr std::string_view kHead = R"({"type":"message","topic":")";
    if (text.substr(0, kHead.size()) != kHead) return;
    const std::string_view rest = text.substr(kHead.size());
    const std::string_view topic = rest.substr(0, rest.find('"'));
    if (topic == b::kLossChannel) return;
    if (!g.may_subscribe(topic)) std::abort();  // a delivery the token may not read
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World w;
  std::size_t i = 0;
  for (int steps = 0; i + 4 <= size && steps < 64; ++steps) {
    const std::uint8_t op = data[i] % 7, a = data[i + 1], bb = data[i + 2], c = data[i + 3];
    i += 4;
    const std::size_t slot = a % 4;
    switch (op) {
      case 0:  // (re)connect
        World::close(w.sessions[slot]);
        (void)w.at(slot);
        break;
      case 1:  // durable subscribe
        World::send(w.at(slot), std::string(R"({"type":"subscribe","qos":1,"topic":")") +
                                    std::string(kTopics[bb % kTopics.size()]) + R"(","client_id":")" +
                                    std::string(kClientIds[c % kClientIds.size()]) + "\"}");
        break;
      case 2:  // QoS 1 publishes
        for (int n = 0; n <= c % 8; ++n) {
          World::send(w.pub(), std::string(R"({"type":"publish","qos":1,"payload":"p","topic":")") +
                                   std::string(kTopics[bb % 3]) + "\"}");
        }
        break;
      case 3:  // ack, with or without a topic
        World::send(w.at(slot), bb % 4 == 3 ? R"({"type":"ack","message_id":)" + std::to_string(c) + "}"
                                            : std::string(R"({"type":"ack","topic":")") + std::string(kTopics[bb % 3]) +
                                                  R"(","message_id":)" + std::to_string(c) + "}");
        break;
      case 4:  // leave
        World::close(w.sessions[slot]);
        break;
      case 5:  // time passes: redeliveries, expiries, loss notices
        w.clock.advance(std::chrono::milliseconds(100) * (bb + 1));
        for (auto& s : w.sessions) {
          if (s != nullptr) s->on_timer();
        }
        break;
      case 6: {  // any command text: its length is the second argument, and it starts at the third
        i -= 1;
        const std::size_t n = std::min<std::size_t>(bb, size - i);
        World::send(w.at(slot), std::string_view(reinterpret_cast<const char*>(data) + i, n));
        i += n;
        break;
      }
    }
    w.check();
  }
  return 0;
}
