// MetricsServer: a one-thread Asio HTTP/1.0-style responder for /metrics.
#include "ringcast/relay/metrics_server.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <fmt/format.h>

namespace ringcast::relay {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t kMaxRequestBytes = 8192;
constexpr auto kRequestTimeout = std::chrono::seconds(2);

using TlsStream = asio::ssl::stream<tcp::socket>;

tcp::socket& lowest(tcp::socket& s) { return s; }
tcp::socket& lowest(TlsStream& s) { return s.next_layer(); }

// A server context for https:// (TLS 1.2+, OpenSSL's default ciphers), or the
// reason it could not be made.
tl::expected<std::shared_ptr<asio::ssl::context>, std::string> make_tls_context(const MetricsServer::Tls& tls) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1,
                   ec);
  if (!ec) ctx->use_certificate_chain_file(tls.cert_file, ec);
  if (ec) return tl::unexpected(fmt::format("metrics TLS certificate {}: {}", tls.cert_file, ec.message()));
  ctx->use_private_key_file(tls.key_file, asio::ssl::context::pem, ec);
  if (ec) return tl::unexpected(fmt::format("metrics TLS key {}: {}", tls.key_file, ec.message()));
  return ctx;
}

// One request: read the head (bounded in size and time), answer, close.
// Stream: tcp::socket, or TlsStream (handshake first, within the same time bound).
template <class Stream>
class Exchange : public std::enable_shared_from_this<Exchange<Stream>> {
 public:
  // `ctx`: the TLS context the stream uses, kept alive across a reload (null without TLS).
  template <class... Args>
  Exchange(const MetricsServer::Render& render, std::shared_ptr<asio::ssl::context> ctx, Args&&... args)
      : ctx_(std::move(ctx)),
        socket_(std::forward<Args>(args)...),
        timer_(lowest(socket_).get_executor()),
        render_(render) {}

  void start() {
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self = this->shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) {
        boost::system::error_code ignored;
        lowest(self->socket_).close(ignored);
      }
    });
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      socket_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](const boost::system::error_code& ec) {
                                if (ec) return self->finish();
                                self->read();
                              });
    } else {
      read();
    }
  }

 private:
  void read() {
    socket_.async_read_some(asio::buffer(chunk_), [self = this->shared_from_this()](const boost::system::error_code& ec,
                                                                                    std::size_t n) {
      if (ec) return self->finish();
      self->request_.append(self->chunk_.data(), n);
      if (self->request_.find("\r\n\r\n") != std::string::npos || self->request_.find("\n\n") != std::string::npos) {
        return self->respond();
      }
      if (self->request_.size() > kMaxRequestBytes) return self->finish();
      self->read();
    });
  }

  void respond() {
    const auto eol = request_.find_first_of("\r\n");
    const std::string line = request_.substr(0, eol);
    const auto sp1 = line.find(' ');
    const auto sp2 = line.find(' ', sp1 == std::string::npos ? sp1 : sp1 + 1);
    const std::string method = line.substr(0, sp1);
    std::string target = sp1 == std::string::npos ? "" : line.substr(sp1 + 1, sp2 - sp1 - 1);
    if (const auto q = target.find('?'); q != std::string::npos) target.resize(q);
    std::string status = "200 OK";
    std::string type = "text/plain; version=0.0.4; charset=utf-8";
    std::string body;
    if (method != "GET" && method != "HEAD") {
      status = "405 Method Not Allowed";
      type = "text/plain";
      body = "only GET /metrics\n";
    } else if (target != "/metrics") {
      status = "404 Not Found";
      type = "text/plain";
      body = "try /metrics\n";
    } else {
      try {
        body = render_();
      } catch (const std::exception& e) {
        status = "500 Internal Server Error";
        type = "text/plain";
        body = fmt::format("{}\n", e.what());
      }
    }
    response_ = fmt::format("HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            status, type, body.size());
    if (method != "HEAD") response_ += body;
    asio::async_write(
        socket_, asio::buffer(response_),
        [self = this->shared_from_this()](const boost::system::error_code&, std::size_t) { self->finish(); });
  }

  void finish() {
    // TLS: no close_notify wait (Connection: close, the body has a length).
    boost::system::error_code ignored;
    lowest(socket_).shutdown(tcp::socket::shutdown_both, ignored);
    lowest(socket_).close(ignored);
    timer_.cancel();
  }

  std::shared_ptr<asio::ssl::context> ctx_;
  Stream socket_;
  asio::steady_timer timer_;
  const MetricsServer::Render& render_;
  std::array<char, 2048> chunk_{};
  std::string request_;
  std::string response_;
};

}  // namespace

struct MetricsServer::Impl {
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  Render render;
  std::thread thread;
  std::uint16_t port = 0;
  std::atomic<bool> stopped{false};
  std::optional<MetricsServer::Tls> tls;
  // The current TLS context; reload_tls() (any thread) swaps it, accept()
  // (the server's thread) copies it. Off the request path's hot spots: one
  // lock per accepted connection of a scrape endpoint.
  std::mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls_ctx;

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        if (tls) {
          std::shared_ptr<asio::ssl::context> ctx;
          {
            std::lock_guard lock(tls_mu);
            ctx = tls_ctx;
          }
          // The exchange keeps its context: a reload does not pull it away.
          asio::ssl::context& c = *ctx;
          std::make_shared<Exchange<TlsStream>>(render, std::move(ctx), std::move(socket), c)->start();
        } else {
          std::make_shared<Exchange<tcp::socket>>(render, nullptr, std::move(socket))->start();
        }
      }
      accept();
    });
  }
};

tl::expected<std::unique_ptr<MetricsServer>, RelayError> MetricsServer::start(const std::string& host,
                                                                              std::uint16_t port, Render render,
                                                                              std::optional<Tls> tls) {
  auto failed = [](const boost::system::error_code& e, std::string detail) {
    // Asio's system errors are errnos; others (a malformed address) only have text.
    if (e.category() == boost::system::system_category()) {
      return tl::unexpected(RelayError{RelayError::Code::kMetrics, e.value(), std::move(detail)});
    }
    return tl::unexpected(RelayError{RelayError::Code::kMetrics, 0, detail + ": " + e.message()});
  };
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
  if (tls) {
    auto ctx = make_tls_context(*tls);
    if (!ctx) return tl::unexpected(RelayError{RelayError::Code::kMetrics, 0, ctx.error()});
    impl->tls = std::move(tls);
    impl->tls_ctx = std::move(*ctx);
  }
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return failed(ec, fmt::format("address '{}'", host));
  const tcp::endpoint endpoint(address, port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return failed(ec, fmt::format("bind {}:{}", host, port));
  impl->port = impl->acceptor.local_endpoint().port();
  impl->accept();
  Impl* raw = impl.get();
  try {
    impl->thread = std::thread([raw] { raw->io.run(); });
  } catch (const std::system_error& e) {
    return tl::unexpected(RelayError{RelayError::Code::kMetrics, e.code().value(), "thread"});
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { stop(); }

std::uint16_t MetricsServer::port() const noexcept { return impl_->port; }

tl::expected<void, std::string> MetricsServer::reload_tls() {
  if (!impl_->tls) return {};
  auto ctx = make_tls_context(*impl_->tls);
  if (!ctx) return tl::unexpected(ctx.error());
  std::lock_guard lock(impl_->tls_mu);
  impl_->tls_ctx = std::move(*ctx);
  return {};
}

void MetricsServer::stop() noexcept {
  // acq_rel: exactly one caller tears down.
  if (impl_->stopped.exchange(true, std::memory_order_acq_rel)) return;
  asio::post(impl_->io, [raw = impl_.get()] {
    boost::system::error_code ignored;
    raw->acceptor.close(ignored);
    raw->io.stop();
  });
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace ringcast::relay
