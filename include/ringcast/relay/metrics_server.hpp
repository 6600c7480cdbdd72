// A minimal HTTP endpoint for Prometheus: GET /metrics answers with the text
// the render callback returns; any other path is 404, any other method 405.
// One Asio thread; one request per connection; requests over 8 KiB or slower
// than 2 s (TLS handshake included) are closed. With `tls` the endpoint is
// https:// (TLS 1.2+, OpenSSL's default ciphers); reload_tls() reads the files
// again for connections accepted afterwards.
//
// Thread safety: start() from any thread; port(), reload_tls() and stop()
// from any thread.
// `render` runs on the server's thread, one request at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <tl/expected.hpp>

#include "ringcast/relay/error.hpp"

namespace ringcast::relay {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  // PEM certificate chain and private key for https://.
  struct Tls {
    std::string cert_file;
    std::string key_file;
  };

  // Binds host:port (port 0: the kernel chooses); with `tls`, TLS on it.
  // Errors are RelayError::Code::kMetrics (an unreadable certificate or key too).
  [[nodiscard]] static tl::expected<std::unique_ptr<MetricsServer>, RelayError> start(
      const std::string& host, std::uint16_t port, Render render, std::optional<Tls> tls = std::nullopt);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops and joins the thread.
  ~MetricsServer();

  [[nodiscard]] std::uint16_t port() const noexcept;
  // TLS: reads the certificate and key again; connections accepted afterwards
  // use them. On failure (the error's text) the old pair stays. Without TLS: no-op.
  [[nodiscard]] tl::expected<void, std::string> reload_tls();
  // Closes the listener and joins the thread. Idempotent.
  void stop() noexcept;

  struct Impl;

 private:
  explicit MetricsServer(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::relay
