#include "broker/tls/tls_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace ringcast::broker::tls {

namespace {

std::string error_text(unsigned long e) {
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// A ClientHello's first byte is 0x16 (handshake record); these reasons are
// OpenSSL's for a first record that is not one: plain RESP, HTTP, garbage.
bool not_tls_reason(int reason) noexcept {
  return reason == SSL_R_HTTP_REQUEST || reason == SSL_R_HTTPS_PROXY_REQUEST || reason == SSL_R_WRONG_VERSION_NUMBER ||
         reason == SSL_R_UNKNOWN_PROTOCOL || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
         reason == SSL_R_RECORD_LENGTH_MISMATCH;
}

bool certificate_reason(int reason) noexcept {
  return reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE || reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
         reason == SSL_R_NO_CERTIFICATES_RETURNED;
}

}  // namespace

std::unique_ptr<TlsStream> TlsStream::make(SslCtxPtr ctx, int fd) {
  SSL* ssl = SSL_new(ctx.get());  // holds its own reference to ctx
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  if (SSL_set_fd(ssl, fd) != 1) {
    SSL_free(ssl);
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return std::unique_ptr<TlsStream>(new TlsStream(ssl));
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

IoStatus TlsStream::classify(int ret, bool handshaking) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return IoStatus::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return IoStatus::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      ERR_clear_error();
      error_ = "closed by the peer";
      failure_ = HandshakeFailure::kAborted;
      return IoStatus::kEof;
    default:
      break;
  }
  const unsigned long e = ERR_peek_error();
  const int saved_errno = errno;
  if (err == SSL_ERROR_SYSCALL && e == 0) {
    // The socket failed (ECONNRESET, EPIPE) or, with ret == 0, the peer closed it.
    error_ = ret == 0 || saved_errno == 0 ? std::string("connection closed by the peer")
                                          : std::string("socket error: ") + std::strerror(saved_errno);
    failure_ = HandshakeFailure::kAborted;
    ERR_clear_error();
    return ret == 0 && !handshaking ? IoStatus::kEof : IoStatus::kError;
  }
  const int reason = ERR_GET_REASON(e);
  error_ = error_text(e);
  if (!handshaking && reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
    ERR_clear_error();
    // EOF without close_notify. Between records it is how most clients
    // (hiredis, redis-cli) hang up; inside one, a record was cut short.
    if (SSL_has_pending(ssl_) == 0) return IoStatus::kEof;
    error_ = "truncated record (EOF inside a record)";
    bad_record_ = true;
    return IoStatus::kError;
  }
  if (handshaking) {
    const long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) {
      failure_ = HandshakeFailure::kCertificate;
      error_ = std::string("client certificate: ") + X509_verify_cert_error_string(verify);
    } else if (certificate_reason(reason)) {
      failure_ = HandshakeFailure::kCertificate;
    } else if (not_tls_reason(reason)) {
      failure_ = HandshakeFailure::kNotTls;
      error_ = "not TLS (" + error_ + ")";
    } else if (reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      failure_ = HandshakeFailure::kAborted;
    } else {
      failure_ = HandshakeFailure::kProtocol;
    }
  } else {
    bad_record_ = true;
  }
  ERR_clear_error();
  return IoStatus::kError;
}

HandshakeStep TlsStream::handshake() {
  ERR_clear_error();
  const int ret = SSL_do_handshake(ssl_);
  if (ret == 1) return HandshakeStep::kDone;
  switch (classify(ret, /*handshaking=*/true)) {
    case IoStatus::kWantRead:
      return HandshakeStep::kWantRead;
    case IoStatus::kWantWrite:
      return HandshakeStep::kWantWrite;
    default:
      return HandshakeStep::kFailed;
  }
}

bool TlsStream::ktls_send() const noexcept {
#ifndef OPENSSL_NO_KTLS
  return BIO_get_ktls_send(SSL_get_wbio(ssl_)) != 0;
#else
  return false;
#endif
}

std::string TlsStream::describe() const {
  std::string out = std::string(SSL_get_version(ssl_)) + " " + SSL_get_cipher_name(ssl_);
  if (X509* peer = SSL_get0_peer_certificate(ssl_)) {
    char name[256];
    X509_NAME_oneline(X509_get_subject_name(peer), name, sizeof name);
    out += std::string(", client ") + name;
  }
  return out;
}

IoResult TlsStream::read(std::span<char> buf) {
  IoResult r;
  while (r.bytes < buf.size()) {
    ERR_clear_error();
    std::size_t got = 0;
    const int ret = SSL_read_ex(ssl_, buf.data() + r.bytes, buf.size() - r.bytes, &got);
    if (ret == 1) {
      r.bytes += got;
      continue;
    }
    r.status = classify(ret, /*handshaking=*/false);
    return r;
  }
  r.status = IoStatus::kOk;
  return r;
}

IoResult TlsStream::write(const iovec* iov, std::size_t count, std::span<char> scratch) {
  IoResult r;
  std::size_t i = 0;    // iovec being gathered
  std::size_t off = 0;  // bytes of iov[i] already gathered into earlier records
  while (i < count) {
    // Gather one record's plaintext: the same bytes, and so the same length,
    // as the record a kWantWrite left pending, since the caller advances its
    // iovecs only by what we report written.
    std::size_t len = 0;
    std::size_t j = i;
    std::size_t joff = off;
    while (j < count && len < kMaxRecord) {
      const std::size_t take = std::min(iov[j].iov_len - joff, kMaxRecord - len);
      std::memcpy(scratch.data() + len, static_cast<const char*>(iov[j].iov_base) + joff, take);
      len += take;
      joff += take;
      if (joff == iov[j].iov_len) {
        ++j;
        joff = 0;
      }
    }
    if (len == 0) break;  // only empty iovecs left
    ERR_clear_error();
    std::size_t written = 0;
    const int ret = SSL_write_ex(ssl_, scratch.data(), len, &written);
    if (ret != 1) {
      r.status = classify(ret, /*handshaking=*/false);
      return r;
    }
    r.bytes += written;
    if (written == len) {  // a record is written whole (partial writes return per record)
      i = j;
      off = joff;
      continue;
    }
    // Fewer bytes than gathered (a smaller max fragment length): step over them.
    for (std::size_t left = written; left > 0;) {
      const std::size_t take = std::min(iov[i].iov_len - off, left);
      left -= take;
      off += take;
      if (off == iov[i].iov_len) {
        ++i;
        off = 0;
      }
    }
  }
  r.status = IoStatus::kOk;
  return r;
}

void TlsStream::close_notify() noexcept {
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);
  ERR_clear_error();
}

}  // namespace ringcast::broker::tls
