// The HTTP/1.1 side of the WebSocket port (RFC 6455 §4): one request per
// connection, parsed with Boost.Beast's HTTP parser over the connection's own
// read buffer (no Beast stream). `GET /` with a WebSocket upgrade is answered
// with 101 and the connection becomes a WebSocket; any other request is
// answered from a small routing table (`GET /` without an upgrade serves the
// live page) and the connection closes once the response is written.
//
// Thread safety: HttpRoutes is built before the server starts and only read
// afterwards (by every I/O thread; handlers must be safe to call concurrently).
// HttpUpgrade: none; one per connection, used by its thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringcast::broker::ws {

// A response to a plain HTTP request. Connection: close and Content-Length are
// added when it is written.
struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string extra_headers;  // complete "Name: value\r\n" lines
  // How long the server waits before writing the response: a refused
  // credential's delay (AuthStats::record_failure), as for AUTH.
  std::chrono::milliseconds delay{0};
};

// What a route's handler sees of a request; views into the request, valid
// during the call only.
struct HttpRequest {
  std::string_view query;          // after '?' in the target; empty without one
  std::string_view authorization;  // the Authorization header's value; empty without one
  std::string_view peer;           // the client's "address:port"
};

// GET routes of the WebSocket port, matched on the exact path.
class HttpRoutes {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest& request)>;
  // Adds `path`, or replaces its handler.
  void add(std::string path, Handler handler);
  // The handler of `path`, or nullptr.
  [[nodiscard]] const Handler* find(std::string_view path) const noexcept;

 private:
  std::vector<std::pair<std::string, Handler>> routes_;
};

// What every WebSocket port serves: `/` -> the live page (live_page_html()).
// The server adds more (e.g. /metrics) with add().
[[nodiscard]] HttpRoutes default_http_routes();

// The WebSocket subprotocol (Sec-WebSocket-Protocol, RFC 6455 §1.9) by which a
// client opts in to ringcast's richer frames: subscribe confirmations, puback,
// dup, history status. Without it a connection speaks PopSub's protocol.
inline constexpr std::string_view kRingcastSubprotocol = "ringcast.v1";

// Sec-WebSocket-Accept for a Sec-WebSocket-Key (§4.2.2): base64(SHA-1(key + GUID)).
[[nodiscard]] std::string websocket_accept(std::string_view key);

class HttpUpgrade {
 public:
  // The most bytes of request line and header fields (larger: 431).
  static constexpr std::size_t kMaxHeader = std::size_t{8} * 1024;

  enum class Status : std::uint8_t {
    kNeedMore,  // the request is not complete; `in` was consumed
    kUpgraded,  // response() is the 101; rest() and the unconsumed `in` are WebSocket bytes
    kRespond,   // response() is a complete HTTP response: write it, then close
  };

  // `routes` and `peer` (the client's "address:port") must outlive this object.
  HttpUpgrade(const HttpRoutes& routes, std::string_view peer);
  ~HttpUpgrade();
  HttpUpgrade(const HttpUpgrade&) = delete;
  HttpUpgrade& operator=(const HttpUpgrade&) = delete;

  // Consumes bytes from the front of `in` (at most kMaxHeader + 1 in all) until
  // the request is complete or refused. After kUpgraded or kRespond, further
  // calls are not allowed.
  [[nodiscard]] Status feed(std::string_view& in);
  [[nodiscard]] const std::string& response() const noexcept { return response_; }
  // After kRespond: how long to wait before writing response() (HttpResponse::delay).
  [[nodiscard]] std::chrono::milliseconds delay() const noexcept { return delay_; }
  // After kUpgraded: bytes received after the request (the first frames, if the
  // client did not wait for the 101).
  [[nodiscard]] std::string_view rest() const noexcept;
  // After kUpgraded: true when the client offered the subprotocol
  // kRingcastSubprotocol (and the 101 selected it): the connection speaks
  // ringcast's richer JSON protocol; otherwise PopSub's (docs/broker.md).
  [[nodiscard]] bool ringcast_protocol() const noexcept { return ringcast_protocol_; }
  // The request target (path and query) after kUpgraded or kRespond; empty if
  // the request could not be parsed. For logs.
  [[nodiscard]] const std::string& target() const noexcept { return target_; }

 private:
  struct Parser;  // Beast's request parser, kept out of this header

  Status respond(const HttpResponse& r, bool head_only = false);
  Status route();

  const HttpRoutes& routes_;
  std::string_view peer_;
  std::unique_ptr<Parser> parser_;
  std::string buf_;           // received bytes not yet consumed by the parser
  std::size_t consumed_ = 0;  // bytes of buf_ the parser consumed
  std::string response_;
  std::chrono::milliseconds delay_{0};
  std::string target_;
  bool ringcast_protocol_ = false;
};

}  // namespace ringcast::broker::ws
