#include "broker/server/acceptor.hpp"

#include <fcntl.h>

#include <cerrno>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include "broker/server/connection.hpp"

namespace ringcast::broker {

namespace {

// Asio opens and accepts sockets without close-on-exec, so a process that
// embeds the broker and starts children would hand them its listeners and
// clients. Set right after open/accept; a fork by another thread in between
// can still inherit the descriptor (Asio offers no accept4).
void set_close_on_exec(int fd) noexcept {
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

// An accept that failed for lack of descriptors or memory fails again at once
// while nothing closes: retrying at once would spin the acceptor thread.
bool out_of_resources(const boost::system::error_code& ec) noexcept {
  const int e = ec.value();
  return ec.category() == boost::system::system_category() &&
         (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM);
}
constexpr auto kAcceptBackoff = std::chrono::milliseconds(50);

}  // namespace

tl::expected<std::uint16_t, BrokerError> Acceptor::open() {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(spec_.address, ec);
  if (ec) return tl::unexpected(BrokerError{BrokerError::Code::kBadAddress, 0, spec_.address});
  const tcp::endpoint ep(address, spec_.port);
  const std::string where = spec_.address + ":" + std::to_string(spec_.port);
  auto bind_error = [&](const boost::system::error_code& e) {
    return tl::unexpected(BrokerError{BrokerError::Code::kBind, e.value(), where});
  };
  acceptor_.open(ep.protocol(), ec);
  if (ec) return bind_error(ec);
  set_close_on_exec(acceptor_.native_handle());
  acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor_.bind(ep, ec);
  if (ec) return bind_error(ec);
  acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return bind_error(ec);
  return acceptor_.local_endpoint(ec).port();
}

void Acceptor::accept_next() {
  IoWorker& w = *shared_.workers[shared_.next_worker];
  shared_.next_worker = (shared_.next_worker + 1) % shared_.workers.size();
  acceptor_.async_accept(w.context(), [this, &w](const boost::system::error_code& ec, tcp::socket sock) {
    if (ec) {
      if (ec == asio::error::operation_aborted || shared_.server.stopped()) return;
      if (!out_of_resources(ec)) {
        accept_next();  // the peer gave up (ECONNABORTED, ...): next one
        return;
      }
      // Keep serving the connections we have; newcomers wait in the listen
      // backlog until a descriptor frees up.
      shared_.core.count_accept_backoff();
      backoff_.expires_after(kAcceptBackoff);
      backoff_.async_wait([this](const boost::system::error_code& wec) {
        if (!wec && !shared_.server.stopped()) accept_next();
      });
      return;
    }
    set_close_on_exec(sock.native_handle());
    shared_.core.count_connection();
    const BrokerConfig& cfg = shared_.core.config();
    AuthStats& auth = shared_.core.auth_stats();
    auto refuse = [&](const std::string& refusal) {
      boost::system::error_code ignored;
      sock.non_blocking(true, ignored);
      if (spec_.tls == nullptr) sock.write_some(asio::buffer(refusal), ignored);
      sock.close(ignored);
      accept_next();
    };
    // relaxed: only this acceptor thread increments; the bound is approximate
    // while connections close concurrently, which errs on the side of refusing.
    if (shared_.live.load(std::memory_order_relaxed) >= cfg.max_connections) {
      shared_.core.count_rejected();
      refuse(spec_.refusal);
      return;
    }
    // Not admitted at once (Client::admitted): a TLS handshake, an upgrade or
    // an authentication comes first. Such connections have their own, smaller
    // bound, so that idle ones cannot take every connection (AuthStats: only
    // this thread adds, so the check and the add are exact together).
    const bool unauthenticated = spec_.tls != nullptr || spec_.upgrade || cfg.auth_required();
    if (unauthenticated && auth.unauthenticated() >= cfg.max_unauthenticated) {
      auth.count_unauthenticated_rejected();
      refuse(spec_.unauthenticated_refusal);
      return;
    }
    if (unauthenticated) auth.add_unauthenticated();
    shared_.live.fetch_add(1, std::memory_order_relaxed);
    boost::system::error_code pec;
    const auto ep = sock.remote_endpoint(pec);
    std::string peer = pec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    // Made on the worker's thread: the client belongs to it from the start.
    asio::post(w.context(), [this, &w, sock = std::move(sock), peer = std::move(peer), unauthenticated]() mutable {
      auto conn = std::make_shared<Connection>(shared_.core, w, std::move(sock), std::move(peer), shared_.live,
                                               spec_.factory, spec_.tls, unauthenticated);
      conn->start();
    });
    accept_next();
  });
}

void Acceptor::close() noexcept {
  boost::system::error_code ec;
  acceptor_.close(ec);
  backoff_.cancel();
}

}  // namespace ringcast::broker
