// The WebSocket transport end to end (docs/broker.md, "WebSocket"): an
// in-process broker with a WebSocket port, raw loopback clients that speak
// RFC 6455 byte by byte, and RESP clients beside them.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "client_frame.hpp"
#include "fd_io.hpp"
#include "prometheus_text.hpp"
#include "resp_client.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/token.hpp"
#include "tcp_loopback.hpp"
#include "ws_client.hpp"

namespace ringcast::broker::ws {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using test::client_frame;
using test::ClientFrame;
using test::close_payload;
using test::WsClient;

constexpr std::size_t kMaxMessage = 64u << 10;
const std::string kSecret(40, 's');

std::unique_ptr<Broker> start_broker(std::string token_secret = {}, std::string requirepass = {}) {
  BrokerConfig cfg;
  cfg.port = 0;
  cfg.ws_port = 0;
  cfg.io_threads = 2;
  cfg.ws_max_message = kMaxMessage;
  cfg.token_secret = std::move(token_secret);
  cfg.requirepass = std::move(requirepass);
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

// A RESP connection; SUBSCRIBE/PSUBSCRIBE confirmed before it returns.
class RespClient {
 public:
  explicit RespClient(std::uint16_t port) : fd_(ringcast::test::connect_loopback(port)) {}
  ~RespClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RespClient(const RespClient&) = delete;
  RespClient& operator=(const RespClient&) = delete;
  // Sends `cmd` and reads until `reply`; true if it came.
  bool call(std::string_view cmd, std::string_view reply) {
    ringcast::test::send_all(fd_, cmd);
    return expect(reply);
  }
  bool expect(std::string_view bytes) {
    const bool ok = ringcast::test::read_until(fd_, buf_, bytes, ringcast::test::deadline_in(20s));
    if (ok) buf_.erase(0, buf_.find(bytes) + bytes.size());
    return ok;
  }

 private:
  int fd_;
  std::string buf_;
};

// Subscribes `c` to `topic` and checks the confirmation.
void subscribe(WsClient& c, std::string_view topic) {
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", topic}}));
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "subscribed"}, {"topic", topic}}));
}

class WsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = start_broker();
    ASSERT_NE(broker_, nullptr);
    ASSERT_NE(broker_->ws_port(), 0);
  }
  std::uint16_t ws_port() const { return broker_->ws_port(); }
  std::unique_ptr<Broker> broker_;
};

TEST_F(WsEndToEndTest, HandshakeAnswers101WithTheAcceptKeyAndNoExtensions) {
  WsClient c(ws_port());
  ASSERT_TRUE(c.upgraded()) << c.response();
  EXPECT_NE(c.response().find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"), std::string::npos);
  EXPECT_EQ(c.response().find("Sec-WebSocket-Extensions"), std::string::npos);
  subscribe(c, "chat");
}

TEST_F(WsEndToEndTest, FramesSentWithTheHandshakeAreExecuted) {
  WsClient c(ws_port(), /*upgrade=*/false);
  c.send_raw(std::string(test::kHandshake) + client_frame(R"({"type":"subscribe","topic":"early"})"));
  std::string head;
  ASSERT_TRUE(ringcast::test::read_until(c.fd(), head, "\r\n\r\n", ringcast::test::deadline_in(20s)));
  EXPECT_EQ(head.rfind("HTTP/1.1 101 ", 0), 0u);
  // The confirmation may have arrived with the 101: frame it after the header.
  const std::string rest = head.substr(head.find("\r\n\r\n") + 4);
  std::string frame = rest;
  const std::string want = R"({"type":"subscribed","topic":"early"})";
  ASSERT_TRUE(ringcast::test::read_until(c.fd(), frame, want, ringcast::test::deadline_in(20s)));
}

TEST_F(WsEndToEndTest, RespPublishReachesWebSocketSubscribersOfChannelsAndGlobs) {
  WsClient exact(ws_port());
  WsClient glob(ws_port());
  subscribe(exact, "md.eu");
  subscribe(glob, "md.*");
  RespClient pub(broker_->port());
  ASSERT_TRUE(pub.call("PUBLISH md.eu hello\r\n", ":2\r\n"));
  ASSERT_TRUE(pub.call("PUBLISH md.eu again\r\n", ":2\r\n"));
  for (WsClient* c : {&exact, &glob}) {
    for (const auto& [payload, id] : {std::pair{"hello", 1}, std::pair{"again", 2}}) {
      const auto m = c->read_json();
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ((*m)["type"], "message");
      EXPECT_EQ((*m)["topic"], "md.eu");
      EXPECT_EQ((*m)["payload"], payload);
      EXPECT_EQ((*m)["message_id"], id);  // per-channel sequence numbers
      EXPECT_EQ((*m)["qos"], 0);
      EXPECT_GT((*m)["timestamp"].get<std::int64_t>(), 1'600'000'000'000);  // ms since the epoch
      EXPECT_EQ(m->contains("pattern"), c == &glob);
    }
  }
}

TEST_F(WsEndToEndTest, WebSocketPublishReachesRespAndWebSocketSubscribers) {
  RespClient sub(broker_->port());
  ASSERT_TRUE(sub.call("SUBSCRIBE news\r\n", "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n"));
  RespClient psub(broker_->port());
  ASSERT_TRUE(psub.call("PSUBSCRIBE n*\r\n", ":1\r\n"));
  WsClient ws_sub(ws_port());
  subscribe(ws_sub, "news");
  WsClient pub(ws_port());
  ASSERT_TRUE(pub.send_json({{"type", "publish"}, {"topic", "news"}, {"payload", "Hello"}}));
  ASSERT_TRUE(pub.send_json(
      {{"type", "publish"}, {"topic", "news"}, {"payload", {{"px", 1.5}}}, {"qos", 1}, {"message_id", "id-123"}}));
  EXPECT_TRUE(sub.expect("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nHello\r\n"));
  EXPECT_TRUE(sub.expect(ringcast::test::resp_message("news", R"({"px":1.5})")));
  EXPECT_TRUE(psub.expect("*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nHello\r\n"));
  auto m = ws_sub.read_json();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ((*m)["payload"], "Hello");
  m = ws_sub.read_json();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ((*m)["payload"], R"({"px":1.5})");
}

TEST_F(WsEndToEndTest, EmbeddedPublishReachesWebSocketSubscribers) {
  WsClient c(ws_port());
  subscribe(c, "t");
  EXPECT_EQ(broker_->publish("t", "from the process").receivers, 1u);
  const auto m = c.read_json();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ((*m)["payload"], "from the process");
}

TEST_F(WsEndToEndTest, BinaryPayloadsTravelAsBase64BothWays) {
  WsClient ws(ws_port());
  subscribe(ws, "bin");
  RespClient sub(broker_->port());
  ASSERT_TRUE(sub.call("SUBSCRIBE bin\r\n", ":1\r\n"));
  const std::string raw("\x00\xff\x01\x80", 4);
  ASSERT_TRUE(ws.send_json({{"type", "publish"}, {"topic", "bin"}, {"payload", "AP8BgA=="}, {"encoding", "base64"}}));
  EXPECT_TRUE(sub.expect(ringcast::test::resp_message("bin", raw)));
  const auto m = ws.read_json();
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ((*m)["payload"], "AP8BgA==");
  EXPECT_EQ((*m)["encoding"], "base64");
}

TEST_F(WsEndToEndTest, UnsubscribeIsConfirmedAndStopsDeliveries) {
  WsClient c(ws_port());
  subscribe(c, "a");
  subscribe(c, "b");
  ASSERT_TRUE(c.send_json({{"type", "unsubscribe"}, {"topic", "a"}}));
  auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "unsubscribed"}, {"topic", "a"}}));
  EXPECT_EQ(broker_->publish("a", "gone").receivers, 0u);
  EXPECT_EQ(broker_->publish("b", "kept").receivers, 1u);
  r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["payload"], "kept");
}

TEST_F(WsEndToEndTest, CommandErrorsAnswerAndKeepTheConnection) {
  WsClient c(ws_port());
  for (std::string_view bad : {"not json", "[1]", R"({"type":"nope"})", R"({"type":"subscribe"})",
                               R"({"type":"publish","topic":"t","payload":"x","qos":5})"}) {
    ASSERT_TRUE(c.send(bad));
    const auto r = c.read_json();
    ASSERT_TRUE(r.has_value()) << bad;
    EXPECT_EQ((*r)["type"], "error") << bad;
    EXPECT_TRUE((*r)["message"].is_string());
  }
  // An ack nobody awaits is an error too (QoS 1, ws_qos1_test.cpp), not a close.
  ASSERT_TRUE(c.send(R"({"type":"ack","message_id":1})"));
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["type"], "error");
  subscribe(c, "still.open");
}

TEST_F(WsEndToEndTest, AuthWithoutATokenSecretIsAccepted) {
  WsClient c(ws_port());
  ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", "anything"}}));
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "authenticated"}}));
}

TEST_F(WsEndToEndTest, PingGetsAPongWithTheSamePayload) {
  WsClient c(ws_port());
  ASSERT_TRUE(c.send("are you there?", {.opcode = 0x9}));
  const auto f = c.read_frame();
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->opcode, 0xA);
  EXPECT_TRUE(f->fin);
  EXPECT_FALSE(f->masked);  // server frames are never masked
  EXPECT_EQ(f->payload, "are you there?");
}

TEST_F(WsEndToEndTest, FragmentedMessagesAreReassembledAroundControlFrames) {
  WsClient c(ws_port());
  std::string in = client_frame(R"({"type":"subs)", {.fin = false});
  in += client_frame("mid", {.opcode = 0x9});
  in += client_frame(R"(cribe","topic")", {.opcode = 0x0, .fin = false});
  in += client_frame(R"(:"frag"})", {.opcode = 0x0});
  // Split the bytes awkwardly across writes too.
  for (std::size_t at = 0; at < in.size(); at += 5) ASSERT_TRUE(c.send_raw(in.substr(at, 5)));
  const auto pong = c.read_frame();
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->opcode, 0xA);
  EXPECT_EQ(pong->payload, "mid");
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "subscribed"}, {"topic", "frag"}}));
}

TEST_F(WsEndToEndTest, CloseHandshakeEchoesTheCodeThenCloses) {
  for (const auto& [payload, want] : {std::pair{close_payload(1000, "bye"), 1000}, std::pair{std::string(), 1000},
                                      std::pair{close_payload(4001), 4001}, std::pair{close_payload(1001), 1001}}) {
    WsClient c(ws_port());
    ASSERT_TRUE(c.send(payload, {.opcode = 0x8}));
    EXPECT_EQ(c.read_close(), want);
    EXPECT_TRUE(c.closed_by_server());
  }
}

struct BadInput {
  const char* name;
  std::string bytes;
  std::uint16_t code;
};

// Each bad input closes its own connection with its code; a subscriber on
// another connection keeps receiving.
TEST_F(WsEndToEndTest, BadFramesCloseWithTheirCodeAndTouchNothingElse) {
  const std::vector<BadInput> bad = {
      {"unmasked", client_frame("x", {.masked = false}), 1002},
      {"reserved bit", client_frame("x", {.rsv = 0x40}), 1002},
      {"unknown opcode", client_frame("x", {.opcode = 0x3}), 1002},
      {"fragmented ping", client_frame("x", {.opcode = 0x9, .fin = false}), 1002},
      {"long ping", client_frame(std::string(126, 'p'), {.opcode = 0x9}), 1002},
      {"continuation without a start", client_frame("x", {.opcode = 0x0}), 1002},
      {"text inside a fragmented message", client_frame("a", {.fin = false}) + client_frame("b"), 1002},
      {"bad close code", client_frame(close_payload(1005), {.opcode = 0x8}), 1002},
      {"one-byte close", client_frame("x", {.opcode = 0x8}), 1002},
      {"invalid UTF-8", client_frame("{\"type\":\"\xff\"}"), 1007},
      {"truncated UTF-8 across fragments", client_frame("\xe2\x82", {.fin = false}) + client_frame("(", {.opcode = 0}),
       1007},
      {"oversized", client_frame(std::string(kMaxMessage + 1, 'a'), {.opcode = 0x2}), 1009},
      {"oversized when reassembled",
       client_frame(std::string(kMaxMessage / 2, 'a'), {.fin = false}) +
           client_frame(std::string(kMaxMessage / 2 + 1, 'a'), {.opcode = 0}),
       1009},
  };
  WsClient watcher(ws_port());
  subscribe(watcher, "w");
  int n = 0;
  for (const BadInput& b : bad) {
    SCOPED_TRACE(b.name);
    WsClient c(ws_port());
    ASSERT_TRUE(c.upgraded());
    c.send_raw(b.bytes);
    EXPECT_EQ(c.read_close(), b.code);
    EXPECT_TRUE(c.closed_by_server());
    ASSERT_EQ(broker_->publish("w", std::to_string(++n)).receivers, 1u);
    const auto m = watcher.read_json();
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ((*m)["payload"], std::to_string(n));
  }
}

// GET /metrics on the WebSocket port: the broker's Prometheus text (the same
// renderer as Broker::metrics_text(), docs/broker.md "Metrics"), embedder's
// series included, and well formed for a scraper.
TEST_F(WsEndToEndTest, MetricsAreServedOnTheWebSocketPort) {
  broker_->set_metrics_provider([](PrometheusWriter& w) {
    w.metric("ringcast_test_embedder_series", "A series the embedding process adds", MetricType::kGauge, 7);
  });
  for (int i = 0; i < 3; ++i) ASSERT_EQ(broker_->publish("m", "x").status, PublishStatus::kPublished);
  WsClient c(ws_port(), false);
  c.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string r = c.read_all();
  ASSERT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << r;
  const std::size_t body = r.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  const ringcast::test::PrometheusText m = ringcast::test::parse_prometheus(r.substr(body + 4));
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_EQ(m.value("ringcast_broker_messages_published_total"), 3);
  EXPECT_EQ(m.value("ringcast_test_embedder_series"), 7);
}

// Sends `bytes` from a thread (they may not fit in the socket buffers while
// nobody reads them); the send ends when the server has taken them or is gone.
class BackgroundSend {
 public:
  BackgroundSend(int fd, std::string bytes)
      : thread_([fd, b = std::move(bytes)] { ringcast::test::send_all(fd, b); }) {}
  ~BackgroundSend() { thread_.join(); }
  BackgroundSend(const BackgroundSend&) = delete;
  BackgroundSend& operator=(const BackgroundSend&) = delete;

 private:
  std::thread thread_;
};

// Reads to the end of the stream within 20 s: true only for an orderly EOF
// (FIN), false for a reset or the deadline.
bool clean_eof(int fd, std::string& out) {
  const auto d = ringcast::test::deadline_in(20s);
  for (;;) {
    const ssize_t n = ringcast::test::read_some(fd, out, d);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

// More than the server reads at once (256 KiB), so some of it is still unread
// when the server has answered: a plain close() would answer it with a reset.
const std::string kTrailingJunk(1u << 20, 'j');

// The lingering close (docs/broker.md, "Closing"): a client whose bad frame
// is followed by bytes the server never reads still gets the close frame with
// its code and an orderly end of stream, not a reset.
TEST_F(WsEndToEndTest, CloseFrameSurvivesBytesSentAfterTheBadFrame) {
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    WsClient c(ws_port());
    ASSERT_TRUE(c.upgraded());
    BackgroundSend send(c.fd(), client_frame("x", {.masked = false}) + kTrailingJunk);
    EXPECT_EQ(c.read_close(), 1002);
    std::string rest;
    EXPECT_TRUE(clean_eof(c.fd(), rest)) << std::strerror(errno);
    EXPECT_TRUE(rest.empty());
  }
}

// The same for plain HTTP: the 404 arrives whole though pipelined bytes the
// server does not read follow the request.
TEST_F(WsEndToEndTest, HttpErrorSurvivesPipelinedBytesAfterTheRequest) {
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    WsClient c(ws_port(), false);
    BackgroundSend send(c.fd(), std::string("GET /nope HTTP/1.1\r\n\r\n") + kTrailingJunk);
    std::string r;
    EXPECT_TRUE(clean_eof(c.fd(), r)) << std::strerror(errno);
    EXPECT_EQ(r.rfind("HTTP/1.1 404 ", 0), 0u) << r.substr(0, 64);
  }
}

TEST_F(WsEndToEndTest, PlainHttpRequestsAreAnsweredAndClosed) {
  {
    WsClient c(ws_port(), false);
    c.send_raw("GET /?channel=md.x HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string r = c.read_all();
    EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
    EXPECT_NE(r.find("<html"), std::string::npos);
  }
  {
    WsClient c(ws_port(), false);
    c.send_raw("GET /nope HTTP/1.1\r\n\r\n");
    EXPECT_EQ(c.read_all().rfind("HTTP/1.1 404 ", 0), 0u);
  }
  {
    WsClient c(ws_port(), false);
    std::string req(test::kHandshake);
    req.replace(req.find("Version: 13"), 11, "Version: 8");
    c.send_raw(req);
    const std::string r = c.read_all();
    EXPECT_EQ(r.rfind("HTTP/1.1 426 ", 0), 0u);
    EXPECT_NE(r.find("Sec-WebSocket-Version: 13\r\n"), std::string::npos);
  }
  {
    WsClient c(ws_port(), false);
    c.send_raw("PING\r\n\r\n");  // a RESP client on the wrong port
    EXPECT_EQ(c.read_all().rfind("HTTP/1.1 400 ", 0), 0u);
  }
}

class WsAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = start_broker(kSecret);
    ASSERT_NE(broker_, nullptr);
  }
  static std::string token(std::optional<std::vector<std::string>> subscribe = std::nullopt,
                           std::chrono::seconds ttl = 1h) {
    Grant g;
    g.subject = "alice";
    g.expiry = std::chrono::system_clock::now() + ttl;
    g.subscribe = std::move(subscribe);
    auto t = mint_token(g, kSecret);
    EXPECT_TRUE(t.has_value());
    return t ? *t : std::string();
  }
  std::unique_ptr<Broker> broker_;
};

TEST_F(WsAuthTest, AnyFrameBeforeAGoodAuthGetsAnErrorAndClose1008) {
  for (std::string_view first : {R"({"type":"subscribe","topic":"t"})", "not json"}) {
    WsClient c(broker_->ws_port());
    ASSERT_TRUE(c.send(first));
    const auto r = c.read_json();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ((*r)["type"], "error");
    EXPECT_EQ(c.read_close(), 1008);
    EXPECT_TRUE(c.closed_by_server());
  }
}

TEST_F(WsAuthTest, BadTokensAreRefusedWithTheReasonAndClose1008) {
  const std::string good = token();
  for (const std::string& bad : {std::string("garbage"), good.substr(0, good.size() - 2) + "xx", token({}, -1h)}) {
    WsClient c(broker_->ws_port());
    ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", bad}}));
    const auto r = c.read_json();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ((*r)["type"], "error");
    EXPECT_EQ((*r)["message"].get<std::string>().rfind("invalid token: ", 0), 0u) << (*r)["message"];
    EXPECT_EQ(c.read_close(), 1008);
  }
}

TEST_F(WsAuthTest, AGoodTokenAuthenticatesAndItsGrantLimitsSubscriptions) {
  WsClient c(broker_->ws_port());
  ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", token(std::vector<std::string>{"md.*"})}}));
  auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "authenticated"}}));
  subscribe(c, "md.eu");
  subscribe(c, "md.eu.*");
  ASSERT_TRUE(c.send_json({{"type", "subscribe"}, {"topic", "secret"}}));
  r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "error"}, {"message", "no permission to subscribe to 'secret'"}}));
  // Refused commands keep the connection.
  EXPECT_EQ(broker_->publish("md.eu", "x").receivers, 1u);
  r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["topic"], "md.eu");
}

// With a password and no token secret, auth's token field carries the
// password: a wrong one (also one that only shares a prefix) is refused with
// close 1008, the right one authenticates.
TEST(WsPasswordTest, AuthTakesThePasswordWhenNoTokenSecretIsSet) {
  const auto broker = start_broker({}, "s3cret-pass");
  ASSERT_NE(broker, nullptr);
  for (const std::string bad : {"wrong", "s3cret", "s3cret-pass!"}) {
    WsClient c(broker->ws_port());
    ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", bad}}));
    const auto r = c.read_json();
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, (json{{"type", "error"}, {"message", "invalid password"}})) << bad;
    EXPECT_EQ(c.read_close(), 1008) << bad;
  }
  WsClient c(broker->ws_port());
  ASSERT_TRUE(c.send_json({{"type", "auth"}, {"token", "s3cret-pass"}}));
  const auto r = c.read_json();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (json{{"type", "authenticated"}}));
  ASSERT_NO_FATAL_FAILURE(subscribe(c, "after.auth"));
}

}  // namespace
}  // namespace ringcast::broker::ws
