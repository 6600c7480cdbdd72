// MetricsServer: a one-thread Asio HTTP/1.0-style responder for /metrics.
#include "ringcast/relay/metrics_server.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <boost/asio.hpp>
#include <fmt/format.h>

namespace ringcast::relay {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

constexpr std::size_t kMaxRequestBytes = 8192;
constexpr auto kRequestTimeout = std::chrono::seconds(2);

// One request: read the head (bounded in size and time), answer, close.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(tcp::socket socket, const MetricsServer::Render& render)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), render_(render) {}

  void start() {
    timer_.expires_after(kRequestTimeout);
    timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) {
        boost::system::error_code ignored;
        self->socket_.close(ignored);
      }
    });
    read();
  }

 private:
  void read() {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const boost::system::error_code& ec,
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
    asio::async_write(socket_, asio::buffer(response_),
                      [self = shared_from_this()](const boost::system::error_code&, std::size_t) { self->finish(); });
  }

  void finish() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    timer_.cancel();
  }

  tcp::socket socket_;
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

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Exchange>(std::move(socket), render)->start();
      accept();
    });
  }
};

tl::expected<std::unique_ptr<MetricsServer>, RelayError> MetricsServer::start(const std::string& host,
                                                                              std::uint16_t port, Render render) {
  auto failed = [](const boost::system::error_code& e, std::string detail) {
    // Asio's system errors are errnos; others (a malformed address) only have text.
    if (e.category() == boost::system::system_category()) {
      return tl::unexpected(RelayError{RelayError::Code::kMetrics, e.value(), std::move(detail)});
    }
    return tl::unexpected(RelayError{RelayError::Code::kMetrics, 0, detail + ": " + e.message()});
  };
  auto impl = std::make_unique<Impl>();
  impl->render = std::move(render);
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
