// The TLS writer's choice (docs/broker.md, "The fan-out over TLS"): one
// connection, user-space OpenSSL, a writer turn of 256 KiB of shared frames
// (52 B or 1 KiB) written either with one SSL_write per frame (one record
// each, as a per-iovec loop would) or gathered into 16 KiB records, one
// SSL_write each (what src/broker/tls/tls_stream.cpp does). Prints the writer
// thread's CPU seconds per GiB and the wall rate; a reader thread drains the
// loopback socket.
//
//   ringcast-tls-write-bench --certs DIR   (server.crt and server.key, made there if absent)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "tls_client.hpp"

namespace {

double clock_s(clockid_t id) {
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

constexpr std::size_t kRecord = 16384;
constexpr std::size_t kTurn = 256 * 1024;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The TLS writer's two ways to encrypt a turn of shared frames: one SSL_write per frame, or frames "
      "gathered into 16 KiB records (writer CPU seconds per GiB, wall rate)"};
  std::string dir;
  app.add_option("--certs", dir, "Directory with server.crt and server.key (made there if absent)")->required();
  CLI11_PARSE(app, argc, argv);
  if (!ringcast::bench::make_bench_certs(dir)) {
    std::fprintf(stderr, "could not make certificates in %s\n", dir.c_str());
    return 1;
  }
  SSL_CTX* sctx = SSL_CTX_new(TLS_server_method());
  if (SSL_CTX_use_certificate_chain_file(sctx, (dir + "/server.crt").c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(sctx, (dir + "/server.key").c_str(), SSL_FILETYPE_PEM) != 1) {
    std::fprintf(stderr, "cannot read %s/server.crt or server.key\n", dir.c_str());
    return 1;
  }
  SSL_CTX_set_mode(sctx,
                   SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
  for (const std::size_t frame : {std::size_t{52}, std::size_t{1024}}) {
    for (const bool gather : {false, true}) {
      const int l = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      socklen_t al = sizeof a;
      if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
          getsockname(l, reinterpret_cast<sockaddr*>(&a), &al) != 0) {
        return 1;
      }
      const int c = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
      const int s = accept(l, nullptr, nullptr);
      const std::size_t total = ((std::size_t{32} << 20) / frame) * frame;  // about 32 MiB of whole frames
      std::thread reader([&] {
        SSL* cs = SSL_new(cctx);
        SSL_set_fd(cs, c);
        if (SSL_connect(cs) == 1) {
          std::vector<char> buf(std::size_t{1} << 16);
          std::size_t got = 0;
          std::size_t n = 0;
          while (got < total && SSL_read_ex(cs, buf.data(), buf.size(), &n) == 1) got += n;
        }
        SSL_free(cs);
      });
      SSL* ss = SSL_new(sctx);
      SSL_set_fd(ss, s);
      if (SSL_accept(ss) != 1) return 1;
      const std::vector<char> frames(frame * 4096, 'x');  // the shared, encoded frames
      std::vector<char> scratch(kRecord);
      const double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
      const double w0 = clock_s(CLOCK_MONOTONIC);
      std::size_t sent = 0;
      std::size_t calls = 0;
      while (sent < total) {
        const std::size_t batch = std::min(kTurn / frame, (total - sent) / frame);  // one writer turn
        std::size_t w = 0;
        if (!gather) {
          for (std::size_t i = 0; i < batch; ++i, ++calls) {
            (void)SSL_write_ex(ss, frames.data() + (i % 4096) * frame, frame, &w);
          }
        } else {
          std::size_t i = 0;
          std::size_t off = 0;
          while (i < batch) {
            std::size_t len = 0;
            while (i < batch && len < kRecord) {
              const std::size_t take = std::min(frame - off, kRecord - len);
              std::memcpy(scratch.data() + len, frames.data() + (i % 4096) * frame + off, take);
              len += take;
              off += take;
              if (off == frame) {
                ++i;
                off = 0;
              }
            }
            (void)SSL_write_ex(ss, scratch.data(), len, &w);
            ++calls;
          }
        }
        sent += batch * frame;
      }
      const double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
      const double wall = clock_s(CLOCK_MONOTONIC) - w0;
      reader.join();
      SSL_free(ss);
      close(s);
      close(c);
      close(l);
      const double gib = static_cast<double>(total) / static_cast<double>(std::size_t{1} << 30);
      std::printf("frame %4zu B  %-26s writer CPU %6.3f s/GiB  %6.0f MB/s  %zu SSL_write calls\n", frame,
                  gather ? "gathered 16 KiB records" : "one SSL_write per frame", cpu / gib,
                  static_cast<double>(total) / wall / 1e6, calls);
    }
  }
  SSL_CTX_free(cctx);
  SSL_CTX_free(sctx);
  return 0;
}
