// The broker's server-side TLS configuration: one OpenSSL SSL_CTX built from
// TlsConfig's files, replaced whole by reload() (SIGHUP). A connection takes
// the current context when it is accepted and keeps it for its life, so a
// reload never touches a live connection: the old context is freed when the
// last connection using it closes (SSL_new holds a reference).
//
// What the context sets (docs/security.md, "TLS"): TLS 1.2 minimum, OpenSSL's
// default ciphers and groups, no renegotiation, kernel TLS when the kernel
// offers it (SSL_OP_ENABLE_KTLS: OpenSSL tries TCP_ULP "tls" after the
// handshake and falls back to user space), buffers released while idle
// (SSL_MODE_RELEASE_BUFFERS), partial writes (one record per SSL_write).
//
// Thread safety: current() and reload() may be called from any thread,
// concurrently; create() from one.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <openssl/ssl.h>
#include <tl/expected.hpp>

#include "broker/tls/tls_stats.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/error.hpp"

namespace ringcast::broker::tls {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

class TlsContext {
 public:
  // Reads the certificate, key and CA files. kInvalidConfig naming the file
  // and OpenSSL's reason when one cannot be read or the key does not match.
  [[nodiscard]] static tl::expected<std::unique_ptr<TlsContext>, BrokerError> create(const TlsConfig& config,
                                                                                     TlsStats& stats);

  // The context new connections use, with a reference for the caller
  // (SSL_CTX_up_ref): the caller frees it (SslCtxPtr).
  [[nodiscard]] SslCtxPtr current() const;

  // Reads the files again into a new context, which later connections use;
  // on failure the current one stays. Counted in the stats; the error names
  // the file and the reason.
  [[nodiscard]] tl::expected<void, std::string> reload();

  [[nodiscard]] TlsStats& stats() noexcept { return stats_; }
  [[nodiscard]] const TlsConfig& config() const noexcept { return config_; }

 private:
  TlsContext(TlsConfig config, TlsStats& stats, SslCtxPtr ctx)
      : config_(std::move(config)), stats_(stats), ctx_(std::move(ctx)) {}
  static tl::expected<SslCtxPtr, std::string> build(const TlsConfig& config);

  const TlsConfig config_;
  TlsStats& stats_;
  mutable std::mutex mu_;
  SslCtxPtr ctx_;  // guarded by mu_
};

}  // namespace ringcast::broker::tls
