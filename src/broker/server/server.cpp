// The network side of the broker (server.hpp), wiring only: the accept
// thread (acceptor.hpp), the I/O threads (io_worker.hpp) and their
// connections (connection.hpp, with the writer-progress, lifetime and TLS
// invariants). Boost.Asio, one io_context per I/O thread, connections pinned
// to one thread each (round-robin at accept), so a connection's socket,
// client and writer state are touched by one thread only.
//
// Publishers (any thread) reach a connection through its client's queue and
// on_queue_ready(), which wakes the connection (Waker): it appends itself to
// its thread's ready list; the thread's drain handler gives each ready
// connection one writev of up to the write budget, then moves on, so one busy
// connection cannot starve the others on its thread. A drain pass over the
// ready list runs in slices of kDrainSlice connections, each slice one
// handler: the rest of the pass is posted behind the handlers queued meanwhile
// (accepts, other sockets' reads, timers), so a fan-out to tens of thousands
// of connections does not keep a newcomer waiting for all of it
// (docs/broker.md, "Delivery"). No socket is written while the
// subscription-index lock is held: publishers only push frame references and
// mark connections ready.

#include "broker/server/server.hpp"

#include <mutex>
#include <system_error>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "broker/server/acceptor.hpp"
#include "broker/server/io_worker.hpp"

namespace ringcast::broker {

struct Server::Impl {
  Impl(BrokerCore& c, Server& s) : shared{c, s, workers} {}

  // shared before workers: a connection destroyed with its worker still
  // counts itself out of shared.live.
  AcceptShared shared;
  std::vector<std::unique_ptr<IoWorker>> workers;
  asio::io_context accept_ctx{1};
  std::vector<std::unique_ptr<Acceptor>> acceptors;
  std::vector<std::thread> threads;
  std::mutex stop_mu;
  bool joined = false;
};

Server::Server(BrokerCore& core, unsigned io_threads) : impl_(std::make_unique<Impl>(core, *this)) {
  for (unsigned i = 0; i < io_threads; ++i) impl_->workers.push_back(std::make_unique<IoWorker>());
}

Server::~Server() {
  stop();
  wait();
}

tl::expected<std::uint16_t, BrokerError> Server::listen(Listener listener) {
  auto a = std::make_unique<Acceptor>(impl_->accept_ctx, std::move(listener), impl_->shared);
  auto port = a->open();
  if (port) impl_->acceptors.push_back(std::move(a));
  return port;
}

tl::expected<void, BrokerError> Server::start() {
  for (auto& a : impl_->acceptors) a->accept_next();
  try {
    Impl* raw = impl_.get();
    impl_->threads.emplace_back([raw] { raw->accept_ctx.run(); });
    for (auto& w : impl_->workers) {
      IoWorker* wp = w.get();
      impl_->threads.emplace_back([wp] { wp->run(); });
    }
  } catch (const std::system_error& e) {
    stop();
    wait();
    return tl::unexpected(BrokerError{BrokerError::Code::kThread, e.code().value(), "io thread"});
  }
  return {};
}

void Server::stop() noexcept {
  // release: pairs with the acquire load in stopped().
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  asio::post(impl_->accept_ctx, [impl = impl_.get()] {
    for (auto& a : impl->acceptors) a->close();
  });
  for (auto& w : impl_->workers) {
    IoWorker* wp = w.get();
    asio::post(wp->context(), [wp] {
      wp->close_all();
      wp->release_guard();
    });
  }
}

void Server::wait() noexcept {
  std::lock_guard lock(impl_->stop_mu);
  if (impl_->joined) return;
  for (auto& t : impl_->threads) t.join();
  impl_->joined = true;
}

}  // namespace ringcast::broker
