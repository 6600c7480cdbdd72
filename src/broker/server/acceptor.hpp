// One listening socket of the server (server.hpp) and its accept loop, on the
// server's accept thread: each accepted socket goes to the next I/O worker
// (round-robin) as a Connection made by the listener's client factory, or is
// refused over max_connections; running out of descriptors pauses the loop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <tl/expected.hpp>

#include "broker/core/broker_core.hpp"
#include "broker/server/io_worker.hpp"
#include "broker/server/server.hpp"

namespace ringcast::broker {

// What every acceptor of one server shares.
struct AcceptShared {
  BrokerCore& core;
  const Server& server;
  std::vector<std::unique_ptr<IoWorker>>& workers;
  std::size_t next_worker = 0;       // accept thread only
  std::atomic<std::size_t> live{0};  // open connections (the max_connections check)
};

class Acceptor {
 public:
  Acceptor(asio::io_context& accept_ctx, Listener listener, AcceptShared& shared)
      : acceptor_(accept_ctx), backoff_(accept_ctx), spec_(std::move(listener)), shared_(shared) {}

  // Before the accept thread runs: binds and listens. The bound port, or
  // kBadAddress / kBind (with errno).
  [[nodiscard]] tl::expected<std::uint16_t, BrokerError> open();
  // Accept thread (or before it runs): accepts the next connection.
  void accept_next();
  // Accept thread: closes the listener and stops a backoff wait.
  void close() noexcept;

 private:
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer backoff_;  // out of descriptors: the next accept waits kAcceptBackoff
  Listener spec_;
  AcceptShared& shared_;
};

}  // namespace ringcast::broker
