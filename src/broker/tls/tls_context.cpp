#include "broker/tls/tls_context.hpp"

#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace ringcast::broker::tls {

namespace {

// OpenSSL's queued errors, oldest first, joined by "; "; the queue is emptied.
std::string drain_errors() {
  std::string out;
  char buf[256];
  while (const unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("unknown OpenSSL error") : out;
}

// The session-id context that lets OpenSSL resume sessions of clients it
// verified (without one, a resumed session with SSL_VERIFY_PEER fails).
constexpr unsigned char kSessionContext[] = "ringcast-broker";

}  // namespace

tl::expected<SslCtxPtr, std::string> TlsContext::build(const TlsConfig& config) {
  ERR_clear_error();
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return tl::unexpected("cannot create a TLS context: " + drain_errors());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | (config.kernel_tls ? SSL_OP_ENABLE_KTLS : 0));
  SSL_CTX_set_mode(ctx.get(),
                   SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), config.cert_file.c_str()) != 1) {
    return tl::unexpected("cannot read the certificate " + config.cert_file + ": " + drain_errors());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx.get(), config.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      return tl::unexpected("the private key " + config.key_file + " does not match the certificate " +
                            config.cert_file + ": " + drain_errors());
    }
    return tl::unexpected("cannot read the private key " + config.key_file + ": " + drain_errors());
  }
  if (SSL_CTX_check_private_key(ctx.get()) != 1) {
    return tl::unexpected("the private key " + config.key_file + " does not match the certificate " + config.cert_file +
                          ": " + drain_errors());
  }
  if (!config.ca_cert_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), config.ca_cert_file.c_str(), nullptr) != 1) {
      return tl::unexpected("cannot read the CA certificates " + config.ca_cert_file + ": " + drain_errors());
    }
    // The CAs' names go to the client in the CertificateRequest, so it can
    // pick a certificate they signed.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.ca_cert_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx.get(), names);
    }
  }
  switch (config.auth_clients) {
    case TlsAuthClients::kNo:
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
      break;
    case TlsAuthClients::kOptional:
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
      break;
    case TlsAuthClients::kYes:
      SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  SSL_CTX_set_session_id_context(ctx.get(), kSessionContext, sizeof kSessionContext - 1);
  ERR_clear_error();
  return ctx;
}

tl::expected<std::unique_ptr<TlsContext>, BrokerError> TlsContext::create(const TlsConfig& config, TlsStats& stats) {
  auto ctx = build(config);
  if (!ctx) return tl::unexpected(BrokerError{BrokerError::Code::kInvalidConfig, 0, std::move(ctx.error())});
  return std::unique_ptr<TlsContext>(new TlsContext(config, stats, std::move(*ctx)));
}

SslCtxPtr TlsContext::current() const {
  std::lock_guard lock(mu_);
  SSL_CTX_up_ref(ctx_.get());
  return SslCtxPtr(ctx_.get());
}

tl::expected<void, std::string> TlsContext::reload() {
  auto ctx = build(config_);
  stats_.count_reload(ctx.has_value());
  if (!ctx) return tl::unexpected(std::move(ctx.error()));
  SslCtxPtr old;
  {
    std::lock_guard lock(mu_);
    old = std::exchange(ctx_, std::move(*ctx));
  }
  return {};  // `old` is freed here, or by the last connection that holds it
}

}  // namespace ringcast::broker::tls
