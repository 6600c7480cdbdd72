// libFuzzer target for the broker's TLS accept path (issue 28, part 3): the
// fuzzer's bytes are what a client sent to the TLS port before hanging up,
// fed to a server-side TlsStream (the broker's own TlsContext and
// TlsStream::handshake, as server/connection.cpp drives them) over a socketpair.
//
// Checks: the handshake ends, within a bounded number of steps, in kFailed
// with a reason in words (garbage cannot complete a handshake: the client's
// Finished is keyed by the server's fresh ephemeral share), and nothing
// crashes or leaks (ASan with detect_leaks; each input's SSL is freed). Also
// the same bytes cut at a fuzzer-chosen point, with the first part delivered
// before the first handshake step, so that partial records and partial
// handshake messages reach OpenSSL's state machine.
//
// Limits: Debian's libssl is not built with sanitizer or coverage
// instrumentation, so libFuzzer's guidance comes from ringcast's side (how a
// failure is classified) and ASan sees inside OpenSSL only what its
// interceptors see (malloc/free: leaks, bad frees), not out-of-bounds
// accesses within libssl's own code.
//
// The server certificate is an EC P-256 key and self-signed certificate made
// in memory at start-up and written to a temporary directory for TlsContext
// (it reads files, as the broker does).
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "broker/tls/tls_context.hpp"
#include "broker/tls/tls_stats.hpp"
#include "broker/tls/tls_stream.hpp"

namespace {

using ringcast::broker::tls::HandshakeStep;
using ringcast::broker::tls::SslCtxPtr;
using ringcast::broker::tls::TlsContext;
using ringcast::broker::tls::TlsStats;
using ringcast::broker::tls::TlsStream;

// Writes a fresh key and self-signed certificate (CN localhost) into `dir`.
bool write_cert(const std::string& dir) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  if (key == nullptr || x == nullptr) return false;
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  bool ok = X509_sign(x, key, EVP_sha256()) > 0;
  FILE* c = std::fopen((dir + "/server.crt").c_str(), "w");
  FILE* k = std::fopen((dir + "/server.key").c_str(), "w");
  ok = ok && c != nullptr && k != nullptr && PEM_write_X509(c, x) == 1 &&
       PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  if (c != nullptr) std::fclose(c);
  if (k != nullptr) std::fclose(k);
  X509_free(x);
  EVP_PKEY_free(key);
  return ok;
}

struct Server {
  TlsStats stats;
  std::unique_ptr<TlsContext> context;
};

Server& server() {
  static Server* s = [] {
    auto* out = new Server;  // lives for the process (libFuzzer never returns)
    char tmpl[] = "/tmp/ringcast-tls-fuzz-XXXXXX";
    const char* dir = ::mkdtemp(tmpl);
    if (dir == nullptr || !write_cert(dir)) std::abort();
    ringcast::broker::TlsConfig config;
    config.cert_file = std::string(dir) + "/server.crt";
    config.key_file = std::string(dir) + "/server.key";
    config.port = 0;
    auto ctx = TlsContext::create(config, out->stats);
    if (!ctx) std::abort();
    out->context = std::move(*ctx);
    ::unlink(config.cert_file.c_str());
    ::unlink(config.key_file.c_str());
    ::rmdir(dir);
    return out;
  }();
  return *s;
}

// Writes all of [p, p + n) to a socket with room for it (a socketpair's
// buffer is far larger than -max_len).
void write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) std::abort();
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 65536) return -1;
  // The first byte picks where the input is cut: the part before the cut is
  // there at the first handshake step, the rest and the hang-up after it.
  const std::size_t cut = size == 0 ? 0 : (static_cast<std::size_t>(data[0]) * size) / 256;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  const int server_fd = sv[0];
  const int client_fd = sv[1];
  write_all(client_fd, data, cut);
  auto stream = TlsStream::make(server().context->current(), server_fd);
  if (!stream) std::abort();
  HandshakeStep step = stream->handshake();
  write_all(client_fd, data + cut, size - cut);
  ::shutdown(client_fd, SHUT_WR);
  // Everything the client will ever send is there, then EOF: each step either
  // consumes bytes or ends. 64 steps is far more than a handshake's messages.
  for (int i = 0; i < 64 && step != HandshakeStep::kFailed && step != HandshakeStep::kDone; ++i) {
    step = stream->handshake();
  }
  if (step == HandshakeStep::kDone) std::abort();    // garbage completed a TLS handshake
  if (step != HandshakeStep::kFailed) std::abort();  // still waiting after EOF
  if (stream->error().empty()) std::abort();         // every failure says why
  stream.reset();
  ::close(server_fd);
  ::close(client_fd);
  return 0;
}
