// Fan-out over TLS, ringcast-broker --tls-port against redis-server
// --tls-port, in one run with the same client: N subscribers (TLS, one epoll
// reader thread), one unpaced pipelining publisher (TLS, at most --unpaced
// replies outstanding). Prints deliveries/s and each server's CPU seconds per
// GB delivered (utime + stime from /proc). On a small machine the client's
// own decryption of N streams can be the bottleneck for both servers: read
// the server CPU column first.
//
//   ringcast-tls-fanout-bench --certs DIR   (DIR: server.crt, server.key, ca.crt)
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "tcp_loopback.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  std::istringstream in(line.substr(line.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

struct Tls {
  int fd = -1;
  SSL* ssl = nullptr;
  ~Tls() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

std::unique_ptr<Tls> connect_tls(SSL_CTX* ctx, int port) {
  auto t = std::make_unique<Tls>();
  for (int i = 0; i < 500 && t->fd < 0; ++i) {
    t->fd = ringcast::test::connect_loopback(port);
    if (t->fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (t->fd < 0) return nullptr;
  t->ssl = SSL_new(ctx);
  SSL_set_fd(t->ssl, t->fd);
  if (SSL_connect(t->ssl) != 1) return nullptr;
  return t;
}

std::string command(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

struct Result {
  double deliveries_per_s = 0;
  double server_cpu_s_per_gb = 0;
};

Result run(SSL_CTX* ctx, int port, pid_t server, int subscribers, std::size_t payload, double seconds,
           std::size_t unpaced) {
  const std::string ch = "bench";
  const std::string frame = "*3\r\n$7\r\nmessage\r\n$" + std::to_string(ch.size()) + "\r\n" + ch + "\r\n$" +
                            std::to_string(payload) + "\r\n" + std::string(payload, 'p') + "\r\n";
  std::vector<std::unique_ptr<Tls>> subs;
  const std::string confirm = "*3\r\n$9\r\nsubscribe\r\n$5\r\nbench\r\n:1\r\n";
  for (int i = 0; i < subscribers; ++i) {
    auto s = connect_tls(ctx, port);
    if (!s) return {};
    const std::string sub = command({"SUBSCRIBE", ch});
    std::size_t w = 0;
    SSL_write_ex(s->ssl, sub.data(), sub.size(), &w);
    std::string got;
    char buf[256];
    while (got.size() < confirm.size()) {
      std::size_t n = 0;
      if (SSL_read_ex(s->ssl, buf, sizeof buf, &n) != 1) return {};
      got.append(buf, n);
    }
    fcntl(s->fd, F_SETFL, O_NONBLOCK);
    subs.push_back(std::move(s));
  }
  auto pub = connect_tls(ctx, port);
  if (!pub) return {};
  fcntl(pub->fd, F_SETFL, O_NONBLOCK);

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bytes{0};
  std::thread reader([&] {
    const int ep = epoll_create1(0);
    for (std::size_t i = 0; i < subs.size(); ++i) {
      epoll_event e{};
      e.events = EPOLLIN | EPOLLET;
      e.data.u64 = i;
      epoll_ctl(ep, EPOLL_CTL_ADD, subs[i]->fd, &e);
    }
    std::vector<epoll_event> evs(256);
    std::vector<char> tmp(std::size_t{1} << 16);
    // relaxed: a stop flag.
    while (!stop.load(std::memory_order_relaxed)) {
      const int n = epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 20);
      for (int k = 0; k < n; ++k) {
        SSL* ssl = subs[evs[static_cast<std::size_t>(k)].data.u64]->ssl;
        std::size_t got = 0;
        while (SSL_read_ex(ssl, tmp.data(), tmp.size(), &got) == 1) {
          bytes.fetch_add(got, std::memory_order_relaxed);  // relaxed: read after the join
        }
        ERR_clear_error();
      }
    }
    close(ep);
  });

  const std::string one = command({"PUBLISH", ch, std::string(payload, 'p')});
  std::string batch;
  for (int i = 0; i < 32; ++i) batch += one;
  std::uint64_t published = 0;
  std::uint64_t replies = 0;
  std::size_t batch_off = 0;  // bytes of `batch` written (a WANT_WRITE retry resumes here)
  char sink[1 << 16];
  const double cpu0 = cpu_seconds(server);
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    std::size_t n = 0;
    while (SSL_read_ex(pub->ssl, sink, sizeof sink, &n) == 1)
      replies += static_cast<std::uint64_t>(std::count(sink, sink + n, '\n'));
    ERR_clear_error();
    if (batch_off == 0 && published - replies + 32 > unpaced) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    std::size_t w = 0;
    if (SSL_write_ex(pub->ssl, batch.data() + batch_off, batch.size() - batch_off, &w) == 1) {
      batch_off += w;
      if (batch_off == batch.size()) {
        batch_off = 0;
        published += 32;
      }
    } else {
      ERR_clear_error();
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds(server) - cpu0;
  const std::uint64_t delivered_bytes = bytes.load(std::memory_order_relaxed);  // relaxed: a statistic
  stop.store(true, std::memory_order_relaxed);                                  // relaxed: a stop flag
  reader.join();
  Result r;
  const double frames = static_cast<double>(delivered_bytes) / static_cast<double>(frame.size());
  r.deliveries_per_s = frames / elapsed;
  r.server_cpu_s_per_gb = delivered_bytes > 0 ? cpu / (static_cast<double>(delivered_bytes) / 1e9) : 0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ringcast-broker --tls-port vs redis-server --tls-port: TLS fan-out, one run, loopback"};
  std::string certs;
  std::string broker_exe;
#ifdef BROKER_EXE
  broker_exe = BROKER_EXE;
#endif
  std::string redis_exe = "/usr/bin/redis-server";
  int subscribers = 100;
  std::vector<std::size_t> payloads{52, 1024};
  double seconds = 5;
  std::size_t unpaced = 2048;
  app.add_option("--certs", certs, "Directory with server.crt, server.key and ca.crt")->required();
  app.add_option("--broker", broker_exe, "ringcast-broker executable")->capture_default_str();
  app.add_option("--redis", redis_exe, "redis-server executable")->capture_default_str();
  app.add_option("--subscribers", subscribers, "Subscribers (N)")->capture_default_str();
  app.add_option("--payload", payloads, "Payload sizes, bytes")->capture_default_str();
  app.add_option("--seconds", seconds, "Seconds per case")->capture_default_str();
  app.add_option("--unpaced", unpaced, "Publisher's most outstanding replies")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, (certs + "/ca.crt").c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const std::string crt = certs + "/server.crt";
  const std::string key = certs + "/server.key";
  std::printf("TLS fan-out, N = %d, unpaced publisher (%zu outstanding), %.0f s per case\n", subscribers, unpaced,
              seconds);
  std::printf("%-10s %8s %16s %22s\n", "server", "payload", "deliveries/s", "server CPU s per GB");
  for (const std::size_t payload : payloads) {
    for (const bool redis : {false, true}) {
      const int port = ringcast::test::free_port();
      const std::vector<std::string> cmd = redis ? std::vector<std::string>{redis_exe,
                                                                            "--port",
                                                                            "0",
                                                                            "--tls-port",
                                                                            std::to_string(port),
                                                                            "--tls-cert-file",
                                                                            crt,
                                                                            "--tls-key-file",
                                                                            key,
                                                                            "--tls-ca-cert-file",
                                                                            certs + "/ca.crt",
                                                                            "--tls-auth-clients",
                                                                            "no",
                                                                            "--save",
                                                                            "",
                                                                            "--appendonly",
                                                                            "no",
                                                                            "--client-output-buffer-limit",
                                                                            "pubsub 256mb 64mb 60"}
                                                 : std::vector<std::string>{broker_exe,
                                                                            "--port",
                                                                            "0",
                                                                            "--tls-port",
                                                                            std::to_string(port),
                                                                            "--tls-cert-file",
                                                                            crt,
                                                                            "--tls-key-file",
                                                                            key,
                                                                            "--io-threads",
                                                                            "1"};
      const pid_t pid = spawn(cmd);
      const Result r = run(ctx, port, pid, subscribers, payload, seconds, unpaced);
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
      std::printf("%-10s %6zu B %16.0f %22.2f\n", redis ? "redis" : "ringcast", payload, r.deliveries_per_s,
                  r.server_cpu_s_per_gb);
      std::fflush(stdout);
    }
  }
  SSL_CTX_free(ctx);
  return 0;
}
