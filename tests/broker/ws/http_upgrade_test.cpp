#include "broker/ws/http_upgrade.hpp"

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "broker/ws/live_page.hpp"

namespace ringcast::broker::ws {
namespace {

using UpgradeStatus = HttpUpgrade::Status;

constexpr std::string_view kUpgrade =
    "GET / HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "Upgrade: websocket\r\n"
    "Connection: keep-alive, Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "Sec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
    "\r\n";

struct Result {
  UpgradeStatus status;
  std::string response;
  std::string rest;
};

// Feeds `input` in pieces of `chunk` bytes until the request is answered.
Result run(std::string_view input, std::size_t chunk, const HttpRoutes& routes) {
  HttpUpgrade h(routes, "127.0.0.1:1");
  for (std::size_t off = 0; off < input.size(); off += chunk) {
    std::string_view piece = input.substr(off, chunk);
    const UpgradeStatus st = h.feed(piece);
    if (st != UpgradeStatus::kNeedMore) {
      // What follows the request: the parser's leftover, then the unconsumed input.
      std::string rest = std::string(h.rest()) + std::string(piece);
      if (off + chunk < input.size()) rest += input.substr(off + chunk);
      return {st, h.response(), rest};
    }
    EXPECT_TRUE(piece.empty());
  }
  return {UpgradeStatus::kNeedMore, "", ""};
}

Result run(std::string_view input) {
  static const HttpRoutes routes = default_http_routes();
  const Result whole = run(input, input.size(), routes);
  const Result bytewise = run(input, 1, routes);
  EXPECT_EQ(whole.status, bytewise.status);
  EXPECT_EQ(whole.response, bytewise.response);
  if (whole.status == UpgradeStatus::kUpgraded) {
    EXPECT_EQ(whole.rest, bytewise.rest);
  }
  return whole;
}

std::string with_header(std::string_view header, std::string_view replacement) {
  std::string s(kUpgrade);
  const auto at = s.find(header);
  const auto end = s.find("\r\n", at);
  s.replace(at, end + 2 - at, replacement);
  return s;
}

TEST(HttpUpgradeTest, AcceptKeyMatchesTheRfcExample) {
  // RFC 6455 §1.3.
  EXPECT_EQ(websocket_accept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(HttpUpgradeTest, UpgradesAndNeverOffersCompression) {
  const Result r = run(kUpgrade);
  EXPECT_EQ(r.status, UpgradeStatus::kUpgraded);
  EXPECT_EQ(r.response,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
  EXPECT_EQ(r.response.find("Extensions"), std::string::npos);
  EXPECT_EQ(r.rest, "");
}

TEST(HttpUpgradeTest, BytesAfterTheRequestAreLeftForTheFrameDecoder) {
  const std::string in = std::string(kUpgrade) +
                         "\x81\x80"
                         "abcd";
  const Result r = run(in);
  EXPECT_EQ(r.status, UpgradeStatus::kUpgraded);
  EXPECT_EQ(r.rest,
            "\x81\x80"
            "abcd");
}

TEST(HttpUpgradeTest, HeaderNamesAndTokensAreCaseInsensitive) {
  std::string s = with_header("Upgrade:", "upgrade: WebSocket\r\n");
  s = s.replace(s.find("Connection"), 10, "CONNECTION");
  EXPECT_EQ(run(s).status, UpgradeStatus::kUpgraded);
}

TEST(HttpUpgradeTest, WrongVersionGets426WithTheSupportedVersion) {
  const Result r = run(with_header("Sec-WebSocket-Version", "Sec-WebSocket-Version: 8\r\n"));
  EXPECT_EQ(r.status, UpgradeStatus::kRespond);
  EXPECT_EQ(r.response.rfind("HTTP/1.1 426 ", 0), 0u) << r.response;
  EXPECT_NE(r.response.find("Sec-WebSocket-Version: 13\r\n"), std::string::npos);
  EXPECT_NE(r.response.find("Connection: close\r\n"), std::string::npos);
}

TEST(HttpUpgradeTest, MalformedUpgradesGet400) {
  for (const std::string& bad : {
           with_header("Sec-WebSocket-Key", ""),                                   // no key
           with_header("Sec-WebSocket-Key", "Sec-WebSocket-Key: c2hvcnQ=\r\n"),    // not 16 bytes
           with_header("Sec-WebSocket-Key", "Sec-WebSocket-Key: !!!!\r\n"),        // not base64
           with_header("Connection", "Connection: keep-alive\r\n"),                // no upgrade token
           std::string("POST / HTTP/1.1\r\n") + std::string(kUpgrade.substr(16)),  // not GET
           std::string("GET / HTTP/1.0\r\n") + std::string(kUpgrade.substr(16)),   // not 1.1
           std::string("GARBAGE\r\n\r\n"),
       }) {
    const Result r = run(bad);
    EXPECT_EQ(r.status, UpgradeStatus::kRespond) << bad;
    EXPECT_EQ(r.response.rfind("HTTP/1.1 400 ", 0), 0u) << bad << r.response;
  }
}

TEST(HttpUpgradeTest, PlainGetServesTheLivePage) {
  const Result r = run("GET /?channel=md.x HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.status, UpgradeStatus::kRespond);
  EXPECT_EQ(r.response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(r.response.find("Content-Type: text/html; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(r.response.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(r.response.find("Content-Length: " + std::to_string(live_page_html().size()) + "\r\n"), std::string::npos);
  EXPECT_EQ(r.response.substr(r.response.size() - live_page_html().size()), live_page_html());
  EXPECT_NE(live_page_html().find("<html"), std::string_view::npos);
}

TEST(HttpUpgradeTest, HeadGetsHeadersWithoutTheBody) {
  const Result r = run("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(r.response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_EQ(r.response.substr(r.response.size() - 4), "\r\n\r\n");
}

TEST(HttpUpgradeTest, UnknownPathsGet404AndOtherMethods405) {
  EXPECT_EQ(run("GET /nope HTTP/1.1\r\n\r\n").response.rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(run("DELETE / HTTP/1.1\r\n\r\n").response.rfind("HTTP/1.1 405 ", 0), 0u);
  // An upgrade is only offered on /.
  std::string s(kUpgrade);
  s.replace(4, 1, "/ws");
  EXPECT_EQ(run(s).response.rfind("HTTP/1.1 404 ", 0), 0u);
}

TEST(HttpUpgradeTest, OversizedHeadersGet431) {
  const std::string in = "GET / HTTP/1.1\r\nX-Big: " + std::string(HttpUpgrade::kMaxHeader, 'a') + "\r\n\r\n";
  const Result r = run(in);
  EXPECT_EQ(r.status, UpgradeStatus::kRespond);
  EXPECT_EQ(r.response.rfind("HTTP/1.1 431 ", 0), 0u) << r.response.substr(0, 100);
}

TEST(HttpUpgradeTest, RoutesCanBeAddedAndReceiveTheQueryAndAuthorization) {
  HttpRoutes routes = default_http_routes();
  routes.add("/metrics", [](const HttpRequest& req) {
    HttpResponse r;
    r.body = "q=" + std::string(req.query) + " a=" + std::string(req.authorization);
    return r;
  });
  const Result r = run("GET /metrics?x=1 HTTP/1.1\r\nAuthorization: Bearer t\r\n\r\n", 5, routes);
  EXPECT_EQ(r.status, UpgradeStatus::kRespond);
  EXPECT_EQ(r.response.substr(r.response.size() - 16), "q=x=1 a=Bearer t");
}

}  // namespace
}  // namespace ringcast::broker::ws
