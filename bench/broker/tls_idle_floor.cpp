// ringcast-tls-idle-floor: what OpenSSL itself keeps per idle server-side TLS
// connection, the floor under the broker's idle TLS memory (issue 28: "say
// what it is"). N connections over socketpairs, each handshaken with an
// in-process client and one request/response exchanged (as a subscribe);
// OpenSSL's allocations for the SERVER side are counted through
// CRYPTO_set_mem_functions (malloc_usable_size of every live block, so
// malloc's rounding is in, its per-block header and fragmentation are not),
// with the server context set up as the broker's is (tls_context.cpp:
// SSL_MODE_RELEASE_BUFFERS, partial writes) and with one switch changed per
// row. The client side's allocations are not counted.
//
//   ringcast-tls-idle-floor --certs DIR [--connections N]   (DIR: server.crt, server.key; made if absent)
#include <fcntl.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tls_client.hpp"

namespace {

// Live bytes of the blocks allocated while `counting` (the server side's
// calls); frees and reallocations of blocks allocated while counting are
// matched through a small header tag, so client-side frees never count.
long long live_bytes = 0;
bool counting = false;
constexpr std::size_t kTag = 16;  // keeps malloc's 16-byte alignment

void* counted_malloc(std::size_t n, const char* /*file*/, int /*line*/) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + kTag));
  if (p == nullptr) return nullptr;
  p[0] = counting ? 1 : 0;
  if (counting) live_bytes += static_cast<long long>(malloc_usable_size(p));
  return p + kTag;
}

void counted_free(void* q, const char* /*file*/, int /*line*/) {
  if (q == nullptr) return;
  auto* p = static_cast<unsigned char*>(q) - kTag;
  if (p[0] == 1) live_bytes -= static_cast<long long>(malloc_usable_size(p));
  std::free(p);
}

void* counted_realloc(void* q, std::size_t n, const char* file, int line) {
  if (q == nullptr) return counted_malloc(n, file, line);
  auto* p = static_cast<unsigned char*>(q) - kTag;
  const bool was = p[0] == 1;
  if (was) live_bytes -= static_cast<long long>(malloc_usable_size(p));
  auto* r = static_cast<unsigned char*>(std::realloc(p, n + kTag));
  if (r == nullptr) {
    if (was) live_bytes += static_cast<long long>(malloc_usable_size(p));
    return nullptr;
  }
  if (was) live_bytes += static_cast<long long>(malloc_usable_size(r));
  return r + kTag;
}

struct Variant {
  const char* name;
  bool release_buffers = true;
  int num_tickets = -1;  // -1: OpenSSL's default (2)
  bool tls12_only = false;
};

// Server-side OpenSSL bytes per connection after `n` handshakes and one
// exchange each, all connections still open; -1 if a handshake failed.
double measure(const std::string& dir, const Variant& v, int n) {
  SSL_CTX* s = SSL_CTX_new(TLS_server_method());
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  if (v.tls12_only) SSL_CTX_set_max_proto_version(s, TLS1_2_VERSION);
  SSL_CTX_set_options(s, SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_mode(s, (v.release_buffers ? SSL_MODE_RELEASE_BUFFERS : 0) | SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (v.num_tickets >= 0) SSL_CTX_set_num_tickets(s, static_cast<std::size_t>(v.num_tickets));
  if (SSL_CTX_use_certificate_chain_file(s, (dir + "/server.crt").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(s, (dir + "/server.key").c_str(), SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(s);
    return -1;
  }
  SSL_CTX* c = SSL_CTX_new(TLS_client_method());
  std::vector<SSL*> ssls;
  std::vector<int> fds;
  const long long base = live_bytes;
  bool ok = true;
  for (int i = 0; i < n && ok; ++i) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) return -1;
    fds.insert(fds.end(), {sv[0], sv[1]});
    counting = true;
    SSL* a = SSL_new(s);
    SSL_set_fd(a, sv[0]);
    counting = false;
    SSL* b = SSL_new(c);
    SSL_set_fd(b, sv[1]);
    ssls.insert(ssls.end(), {a, b});
    bool server_done = false;
    bool client_done = false;
    for (int step = 0; step < 100 && !(server_done && client_done); ++step) {
      counting = true;
      if (!server_done) server_done = SSL_accept(a) == 1;
      counting = false;
      if (!client_done) client_done = SSL_connect(b) == 1;
    }
    char buf[256];
    std::size_t k = 0;
    ok = server_done && client_done && SSL_write_ex(b, "PING\r\n", 6, &k) == 1;
    counting = true;
    bool got = false;
    for (int step = 0; step < 100 && ok && !got; ++step) got = SSL_read_ex(a, buf, sizeof buf, &k) == 1;
    ok = ok && got && SSL_write_ex(a, "+PONG\r\n", 7, &k) == 1;
    counting = false;
    got = false;
    for (int step = 0; step < 100 && ok && !got; ++step) got = SSL_read_ex(b, buf, sizeof buf, &k) == 1;
    ok = ok && got;
    ERR_clear_error();
  }
  const double per = ok ? static_cast<double>(live_bytes - base) / n : -1;
  for (std::size_t i = 0; i < ssls.size(); ++i) {
    counting = i % 2 == 0;  // frees are matched by tag; the flag only keeps the books tidy
    SSL_free(ssls[i]);
  }
  counting = false;
  for (const int fd : fds) ::close(fd);
  SSL_CTX_free(c);
  SSL_CTX_free(s);
  return per;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"OpenSSL's own bytes per idle server-side TLS connection (the broker's settings, and variants)"};
  std::string dir;
  int n = 1000;
  app.add_option("--certs", dir, "Directory with server.crt and server.key (made there if absent)")->required();
  app.add_option("--connections", n, "Connections held open at once")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (CRYPTO_set_mem_functions(counted_malloc, counted_realloc, counted_free) != 1) {
    std::fprintf(stderr, "CRYPTO_set_mem_functions failed (called after OpenSSL allocated?)\n");
    return 1;
  }
  if (!ringcast::bench::make_bench_certs(dir)) {
    std::fprintf(stderr, "could not make certificates in %s\n", dir.c_str());
    return 1;
  }
  std::printf("OpenSSL %s, %d connections open at once, server side only\n\n", OpenSSL_version(OPENSSL_VERSION), n);
  std::printf("| server context | OpenSSL bytes per idle connection |\n|---|---:|\n");
  const Variant variants[] = {
      {"the broker's (TLS 1.3, SSL_MODE_RELEASE_BUFFERS)"},
      {"without SSL_MODE_RELEASE_BUFFERS", false},
      {"no TLS 1.3 session tickets (num_tickets 0)", true, 0},
      {"TLS 1.2 only", true, -1, true},
  };
  for (const Variant& v : variants) {
    const double per = measure(dir, v, n);
    std::printf("| %s | %.0f |\n", v.name, per);
    std::fflush(stdout);
  }
  return 0;
}
