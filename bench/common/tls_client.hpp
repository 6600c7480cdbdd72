// TLS for the load generators (issue 28, part 5): a throwaway CA and server
// certificate made with the openssl CLI (make_bench_certs), and client
// connections that verify the server against that CA (TlsClient::connect)
// and then behave as a ByteStream, so the benchmarks' plain client code runs
// unchanged over TLS. User-space OpenSSL on the client side: on a small
// machine the client's own decryption of N streams is load on the same cores
// as the servers', for every server alike.
//
// Thread safety: a TlsClient may be shared by threads once made (SSL_CTX is);
// a TlsStream belongs to one thread at a time.
#pragma once

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>

#include "byte_stream.hpp"
#include "deadline.hpp"

namespace ringcast::bench {

// Files a benchmark's TLS servers and clients use: dir/ca.crt, dir/server.crt
// and dir/server.key (EC P-256, SAN IP:127.0.0.1 and DNS:localhost, valid 2
// days), made in `dir` unless all three are already there. False if the
// openssl CLI failed.
inline bool make_bench_certs(const std::string& dir) {
  const std::string script =
      "cd '" + dir +
      "' && { [ -s ca.crt ] && [ -s server.crt ] && [ -s server.key ]; } || { set -e; "
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt "
      "-days 2 -subj '/CN=ringcast bench CA' 2>/dev/null; "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key -out server.csr "
      "-subj /CN=localhost 2>/dev/null; "
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext; "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
      "-extfile san.ext 2>/dev/null; }";
  const int rc = std::system(script.c_str());  // NOLINT(cert-env33-c): a bench's set-up, fixed text
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// One client TLS connection on a connected socket (not owned: the caller
// closes it, as with PlainStream). The socket is non-blocking (connect()
// makes it so): read() keeps reading records until EAGAIN.
class TlsStream final : public ByteStream {
 public:
  TlsStream(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~TlsStream() override { SSL_free(ssl_); }

  [[nodiscard]] int fd() const override { return fd_; }

  // Reads records until `n` bytes are in or the socket has no whole record
  // left: a short count means "drained", as for ::read on a plain socket.
  ssize_t read(void* buf, std::size_t n) override {
    std::size_t got = 0;
    while (got < n) {
      std::size_t k = 0;
      const int ret = SSL_read_ex(ssl_, static_cast<char*>(buf) + got, n - got, &k);
      if (ret == 1) {
        got += k;
        continue;
      }
      const int e = SSL_get_error(ssl_, ret);
      ERR_clear_error();
      if (got > 0) return static_cast<ssize_t>(got);
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
      }
      if (e == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify
      if (e == SSL_ERROR_SYSCALL && errno == 0) return 0;
      if (errno == 0 || errno == EAGAIN) errno = EPROTO;
      return -1;
    }
    return static_cast<ssize_t>(got);
  }

  ssize_t write(const void* buf, std::size_t n) override {
    std::size_t k = 0;
    const int ret = SSL_write_ex(ssl_, buf, n, &k);
    if (ret == 1) return static_cast<ssize_t>(k);
    const int e = SSL_get_error(ssl_, ret);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
      errno = EAGAIN;
      return -1;
    }
    if (errno == 0 || errno == EAGAIN) errno = EPIPE;
    return -1;
  }

  [[nodiscard]] bool buffered() const override { return SSL_pending(ssl_) > 0; }

 private:
  int fd_;
  SSL* ssl_;
};

class TlsClient {
 public:
  // Trusts only `ca_file`; servers are checked for IP 127.0.0.1 (the
  // benchmarks are loopback only). Partial writes on, so TlsStream::write
  // behaves as send().
  explicit TlsClient(const std::string& ca_file) : ctx_(SSL_CTX_new(TLS_client_method())) {
    if (ctx_ == nullptr) return;
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ok_ = SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr) == 1;
  }
  ~TlsClient() { SSL_CTX_free(ctx_); }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  [[nodiscard]] bool ok() const { return ok_; }

  // Makes `fd` non-blocking and handshakes on it until `d`. nullptr with
  // `error` set on failure (the fd is left open).
  std::unique_ptr<TlsStream> connect(int fd, test::Deadline d, std::string& error) const {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    SSL* ssl = SSL_new(ctx_);
    if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
      SSL_free(ssl);
      error = "SSL_new failed";
      return nullptr;
    }
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), "127.0.0.1");
    auto stream = std::make_unique<TlsStream>(fd, ssl);
    for (;;) {
      const int ret = SSL_connect(ssl);
      if (ret == 1) return stream;
      const int e = SSL_get_error(ssl, ret);
      if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) || test::ms_left(d) == 0) {
        const unsigned long code = ERR_get_error();
        char text[256] = "timed out or connection closed";
        if (code != 0) ERR_error_string_n(code, text, sizeof text);
        ERR_clear_error();
        error = std::string("TLS handshake failed: ") + text;
        return nullptr;
      }
      pollfd p{fd, static_cast<short>(e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
      ::poll(&p, 1, test::ms_left(d));
    }
  }

 private:
  SSL_CTX* ctx_;
  bool ok_ = false;
};

}  // namespace ringcast::bench
