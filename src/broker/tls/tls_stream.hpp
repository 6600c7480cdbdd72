// One TLS connection's OpenSSL state, on the connection's non-blocking socket
// (SSL_set_fd): the server (server/connection.cpp) keeps doing its own readiness waits
// and calls these where it would call recv and sendmsg.
//
// Writes: the writer's batch is a list of iovecs into frames shared by every
// subscriber (encoded once). Without kernel TLS each connection encrypts them
// itself: write() gathers them into records of up to kMaxRecord bytes in the
// thread's scratch buffer and hands each to one SSL_write (one record, one
// send), so 52-byte frames share records instead of paying a record header
// and a send each. With kernel TLS (ktls_send()) the server writes its iovecs
// with sendmsg as on a plain socket, and the kernel makes the records.
//
// Thread safety: none; one connection's thread only.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <openssl/ssl.h>

#include "broker/tls/tls_context.hpp"
#include "broker/tls/tls_stats.hpp"

namespace ringcast::broker::tls {

// Largest TLS plaintext record (RFC 8446 5.1): write()'s gather unit.
inline constexpr std::size_t kMaxRecord = 16384;

enum class IoStatus : std::uint8_t {
  kOk,         // read: the buffer is full (more may be there); write: everything written
  kWantRead,   // the socket has nothing more (EAGAIN): wait until readable
  kWantWrite,  // the socket is full: wait until writable, then call again
  kEof,        // the peer closed cleanly (close_notify, or EOF between records)
  kError,      // a bad or truncated record, or a socket error: close (error() says why)
};

struct IoResult {
  std::size_t bytes = 0;  // read into the buffer / taken from the iovecs
  IoStatus status = IoStatus::kOk;
};

enum class HandshakeStep : std::uint8_t { kDone, kWantRead, kWantWrite, kFailed };

class TlsStream {
 public:
  // nullptr if OpenSSL cannot allocate the connection's state.
  [[nodiscard]] static std::unique_ptr<TlsStream> make(SslCtxPtr ctx, int fd);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // One step of the server handshake. kFailed: failure() says why, error()
  // in words.
  [[nodiscard]] HandshakeStep handshake();
  [[nodiscard]] HandshakeFailure failure() const noexcept { return failure_; }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // After a read or write returned kError: the peer's bytes were at fault (a
  // record that failed to decrypt or parse, or one cut short by EOF), not the
  // socket.
  [[nodiscard]] bool bad_record() const noexcept { return bad_record_; }
  // After the handshake: the kernel encrypts this connection's writes.
  [[nodiscard]] bool ktls_send() const noexcept;
  // After the handshake: "TLSv1.3 TLS_AES_256_GCM_SHA384", and the client
  // certificate's subject when one was verified.
  [[nodiscard]] std::string describe() const;

  // Reads until `buf` is full, the socket is drained (kWantRead) or the
  // connection ends; `bytes` were read either way.
  [[nodiscard]] IoResult read(std::span<char> buf);
  // Writes iov[0..count) in records of at most kMaxRecord bytes gathered in
  // `scratch` (REQUIRES: scratch.size() >= kMaxRecord). Returns the bytes
  // written, from the front; after kWantWrite call again with the rest, which
  // starts with the same bytes (OpenSSL's retry rule: the pending record is
  // the same length, from the same plaintext).
  [[nodiscard]] IoResult write(const iovec* iov, std::size_t count, std::span<char> scratch);
  // Sends close_notify, best effort (no wait for the peer's).
  void close_notify() noexcept;

 private:
  explicit TlsStream(SSL* ssl) noexcept : ssl_(ssl) {}
  // Classifies a failed SSL_* call; sets error_ (and failure_ in the handshake).
  IoStatus classify(int ret, bool handshaking);

  SSL* ssl_;
  HandshakeFailure failure_ = HandshakeFailure::kProtocol;
  bool bad_record_ = false;
  std::string error_;
};

}  // namespace ringcast::broker::tls
