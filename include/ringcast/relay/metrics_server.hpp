// A minimal HTTP endpoint for Prometheus: GET /metrics answers with the text
// the render callback returns; any other path is 404, any other method 405.
// One Asio thread; one request per connection; requests over 8 KiB or slower
// than 2 s are closed.
//
// Thread safety: start() from any thread; port() and stop() from any thread.
// `render` runs on the server's thread, one request at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <tl/expected.hpp>

#include "ringcast/relay/error.hpp"

namespace ringcast::relay {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // Binds host:port (port 0: the kernel chooses). Errors are RelayError::Code::kMetrics.
  [[nodiscard]] static tl::expected<std::unique_ptr<MetricsServer>, RelayError> start(const std::string& host,
                                                                                      std::uint16_t port,
                                                                                      Render render);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops and joins the thread.
  ~MetricsServer();

  [[nodiscard]] std::uint16_t port() const noexcept;
  // Closes the listener and joins the thread. Idempotent.
  void stop() noexcept;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::relay
