#include "broker/ws/http_upgrade.hpp"

#include <openssl/sha.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/rfc7230.hpp>
#include <boost/beast/http/status.hpp>

#include "broker/util/base64.hpp"
#include "broker/ws/live_page.hpp"

namespace ringcast::broker::ws {

namespace http = boost::beast::http;

struct HttpUpgrade::Parser {
  http::request_parser<http::empty_body> p;
};

namespace {

// True if the comma-separated token list `value` holds `token` (case-insensitive).
bool has_token(boost::beast::string_view value, boost::beast::string_view token) {
  for (const auto& t : http::token_list(value)) {
    if (boost::beast::iequals(t, token)) return true;
  }
  return false;
}

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

HttpResponse text(unsigned status, std::string body, std::string extra = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.body += '\n';
  r.extra_headers = std::move(extra);
  return r;
}

}  // namespace

void HttpRoutes::add(std::string path, Handler handler) {
  for (auto& [p, h] : routes_) {
    if (p == path) {
      h = std::move(handler);
      return;
    }
  }
  routes_.emplace_back(std::move(path), std::move(handler));
}

const HttpRoutes::Handler* HttpRoutes::find(std::string_view path) const noexcept {
  for (const auto& [p, h] : routes_) {
    if (p == path) return &h;
  }
  return nullptr;
}

HttpRoutes default_http_routes() {
  HttpRoutes routes;
  routes.add("/", [](const HttpRequest&) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(live_page_html());
    r.extra_headers = "Cache-Control: no-store\r\n";
    return r;
  });
  return routes;
}

std::string websocket_accept(std::string_view key) {
  static constexpr std::string_view kGuid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";  // §1.3
  std::string in;
  in.reserve(key.size() + kGuid.size());
  in.append(key).append(kGuid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(in.data()), in.size(), digest);
  std::string out;
  base64_encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest), Base64::kStandard, out);
  return out;
}

HttpUpgrade::HttpUpgrade(const HttpRoutes& routes, std::string_view peer)
    : routes_(routes), peer_(peer), parser_(std::make_unique<Parser>()) {
  parser_->p.header_limit(static_cast<std::uint32_t>(kMaxHeader));
  parser_->p.body_limit(0);
}

HttpUpgrade::~HttpUpgrade() = default;

std::string_view HttpUpgrade::rest() const noexcept { return std::string_view(buf_).substr(consumed_); }

HttpUpgrade::Status HttpUpgrade::feed(std::string_view& in) {
  // Beast's put() consumes nothing until the whole header is present, so the
  // bytes collect in buf_; no more than one byte past the limit is taken.
  const std::size_t room = kMaxHeader + 1 - std::min(kMaxHeader + 1, buf_.size());
  const std::size_t n = std::min(room, in.size());
  buf_.append(in.data(), n);
  in.remove_prefix(n);
  for (;;) {
    boost::beast::error_code ec;
    const std::size_t used = parser_->p.put(boost::asio::buffer(buf_.data() + consumed_, buf_.size() - consumed_), ec);
    consumed_ += used;
    if (ec == http::error::need_more) break;
    if (ec == http::error::header_limit) {
      return respond(text(431, "Request header fields too large (limit 8 KiB)"));
    }
    if (ec) return respond(text(400, "Bad request: " + ec.message()));
    if (parser_->p.is_done()) return route();
    if (used == 0) break;
  }
  if (buf_.size() > kMaxHeader) return respond(text(431, "Request header fields too large (limit 8 KiB)"));
  return Status::kNeedMore;
}

HttpUpgrade::Status HttpUpgrade::route() {
  const auto& req = parser_->p.get();
  target_.assign(req.target().data(), req.target().size());
  const std::string_view t = target_;
  const std::size_t q = t.find('?');
  const std::string_view path = t.substr(0, q);
  const std::string_view query = q == std::string_view::npos ? std::string_view{} : t.substr(q + 1);
  const bool get = req.method() == http::verb::get;
  const bool head = req.method() == http::verb::head;

  if (has_token(req[http::field::upgrade], "websocket")) {
    if (path != "/") return respond(text(404, "Not found: the WebSocket endpoint is /"));
    if (!get) return respond(text(400, "Bad request: a WebSocket upgrade must be a GET"));
    if (req.version() < 11) return respond(text(400, "Bad request: a WebSocket upgrade needs HTTP/1.1"));
    if (!has_token(req[http::field::connection], "upgrade")) {
      return respond(text(400, "Bad request: the Connection header must include \"upgrade\""));
    }
    if (sv(req[http::field::sec_websocket_version]) != "13") {
      return respond(
          text(426, "Upgrade required: only WebSocket version 13 is supported", "Sec-WebSocket-Version: 13\r\n"));
    }
    const std::string_view key = sv(req[http::field::sec_websocket_key]);
    std::string raw;
    if (key.empty() || !base64_decode(key, Base64::kStandard, raw) || raw.size() != 16) {
      return respond(text(400, "Bad request: Sec-WebSocket-Key must be 16 bytes in base64"));
    }
    // No Sec-WebSocket-Extensions (permessage-deflate is never offered). The
    // one subprotocol is ringcast's; a client that offers only others gets
    // none selected (PopSub's protocol), which RFC 6455 §4.2.2 allows.
    ringcast_protocol_ = has_token(req[http::field::sec_websocket_protocol],
                                   boost::beast::string_view(kRingcastSubprotocol.data(), kRingcastSubprotocol.size()));
    response_ =
        "HTTP/1.1 101 Switching Protocols\r\n"
        "Upgrade: websocket\r\n"
        "Connection: Upgrade\r\n"
        "Sec-WebSocket-Accept: ";
    response_ += websocket_accept(key);
    if (ringcast_protocol_) {
      response_ += "\r\nSec-WebSocket-Protocol: ";
      response_ += kRingcastSubprotocol;
    }
    response_ += "\r\n\r\n";
    return Status::kUpgraded;
  }

  const HttpRoutes::Handler* h = routes_.find(path);
  if (h == nullptr) return respond(text(404, "Not found"), head);
  if (!get && !head) return respond(text(405, "Method not allowed", "Allow: GET, HEAD\r\n"));
  return respond((*h)(HttpRequest{query, sv(req[http::field::authorization]), peer_}), head);
}

HttpUpgrade::Status HttpUpgrade::respond(const HttpResponse& r, bool head_only) {
  const auto reason = http::obsolete_reason(static_cast<http::status>(r.status));
  response_ = "HTTP/1.1 ";
  response_ += std::to_string(r.status);
  response_ += ' ';
  response_.append(reason.data(), reason.size());
  response_ += "\r\nContent-Type: ";
  response_ += r.content_type;
  response_ += "\r\nContent-Length: ";
  response_ += std::to_string(r.body.size());
  response_ += "\r\nConnection: close\r\n";
  response_ += r.extra_headers;
  response_ += "\r\n";
  if (!head_only) response_ += r.body;
  delay_ = r.delay;
  return Status::kRespond;
}

}  // namespace ringcast::broker::ws
