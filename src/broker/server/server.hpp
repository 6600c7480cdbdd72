// The network side of the broker: I/O threads and accept loops, wiring only.
// Each listener has a client factory: the RESP port makes RespSessions, a
// WebSocket port makes WebSocket sessions; a connection serves whatever Client
// its listener's factory made, so adding a transport is one more listen() call.
//
// Thread safety:
//  * listen() and start() are called by one thread, before any other member.
//  * stop(), stopped() and the destructor may be called from any thread other
//    than the I/O threads; wait() likewise. The destructor must not run
//    concurrently with another member call.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <tl/expected.hpp>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/tls/tls_context.hpp"
#include "ringcast/broker/error.hpp"

namespace ringcast::broker {

// Makes the client of a newly accepted connection, on the I/O thread that will
// own it. `peer` is "address:port"; `waker` (the connection) outlives the client.
using ClientFactory = std::function<std::unique_ptr<Client>(BrokerCore& core, std::string peer, Waker& waker)>;

struct Listener {
  std::string address;     // an IP address ("127.0.0.1", "::1", "0.0.0.0")
  std::uint16_t port = 0;  // 0: the kernel chooses (see listen()'s result)
  ClientFactory factory;
  // Written, best effort, to a connection refused over max_connections before
  // it is closed: the protocol's own error ("-ERR max number of clients
  // reached\r\n" for RESP, an HTTP 503 for WebSocket).
  std::string refusal;
  // Non-null: the listener speaks TLS (tls/tls_context.hpp) with the context
  // current at each accept; it must outlive the server. The refusal is then
  // not written (it would not be TLS): the connection is just closed.
  tls::TlsContext* tls = nullptr;
  // Written, best effort and never over TLS, to a connection refused because
  // max_unauthenticated connections have not authenticated yet.
  std::string unauthenticated_refusal{};
  // The protocol opens with a handshake of its own (the WebSocket port's HTTP
  // upgrade): its connections count as unauthenticated until it is done, with
  // or without authentication configured (Client::admitted).
  bool upgrade = false;
};

class Server {
 public:
  // `io_threads` > 0. `core` must outlive the server.
  Server(BrokerCore& core, unsigned io_threads);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Stops and joins.
  ~Server();

  // Binds and listens; connections are accepted once start() has run. Returns
  // the bound port, or kBadAddress / kBind (with errno). Before start().
  [[nodiscard]] tl::expected<std::uint16_t, BrokerError> listen(Listener listener);
  // Starts the accept thread and the I/O threads; kThread if one cannot start
  // (then nothing runs). Once.
  [[nodiscard]] tl::expected<void, BrokerError> start();

  // Closes the listeners and every connection and lets the threads finish.
  // Idempotent; returns without waiting.
  void stop() noexcept;
  // Blocks until stop() has been called and the threads have exited.
  void wait() noexcept;
  // acquire: pairs with the release exchange in stop().
  [[nodiscard]] bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stopped_{false};
};

}  // namespace ringcast::broker
