// Test helpers for TLS (issue 28): a test CA and certificates made with the
// openssl CLI in a temporary directory, the broker executable with TLS flags,
// and a blocking OpenSSL RESP client whose every read is bounded.
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "child_process.hpp"
#include "tcp_loopback.hpp"
#include "temp_dir.hpp"

namespace ringcast::broker::tls::test {

// Files in Certs::dir: ca.crt/ca.key (the test CA); server.crt/.key (CN
// localhost, SAN localhost and 127.0.0.1) and server2.crt/.key (CN reloaded,
// same SANs) signed by it; client.crt/.key (CN client1) signed by it;
// expired.crt/.key (signed by it, valid only in 2020); rogue.crt/.key (signed
// by another CA). EC P-256 keys: quick to make.
inline constexpr std::string_view kMakeCerts = R"sh(
set -e
key() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=ringcast test CA" 2>/dev/null
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout rogueca.key -out rogueca.crt -days 2 -subj "/CN=rogue CA" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext
key server localhost
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext 2>/dev/null
key server2 reloaded
openssl x509 -req -in server2.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server2.crt -days 2 -extfile san.ext 2>/dev/null
key client client1
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 2>/dev/null
key rogue rogue
openssl x509 -req -in rogue.csr -CA rogueca.crt -CAkey rogueca.key -CAcreateserial -out rogue.crt -days 2 2>/dev/null
key expired expired
mkdir -p db && : > db/index.txt && echo 01 > db/serial
printf '[ca]\ndefault_ca=t\n[t]\ndatabase=db/index.txt\nserial=db/serial\nnew_certs_dir=db\ndefault_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n' > ca.cnf
openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -in expired.csr -out expired.crt -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
)sh";

class Certs {
 public:
  Certs() {
    const std::vector<std::string> argv{"/bin/sh", "-c", "cd '" + dir_.path() + "' && " + std::string(kMakeCerts)};
    auto sh = ringcast::test::ChildProcess::spawn(argv, {.out = ringcast::test::Stream::kDiscard});
    ok_ = ringcast::test::exit_code(sh.wait_exit(ringcast::test::deadline_in(std::chrono::seconds(60)))) == 0;
  }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] std::string file(std::string_view name) const { return dir_.file(name); }
  [[nodiscard]] const std::string& dir() const { return dir_.path(); }

 private:
  ringcast::test::TempDir dir_;
  bool ok_ = false;
};

// ringcast-broker with `flags`, its stderr piped (the TLS log lines). Reads
// the ports from its startup lines.
class TlsBrokerProcess {
 public:
  explicit TlsBrokerProcess(const std::vector<std::string>& flags) {
    std::vector<std::string> argv{BROKER_EXE, "--io-threads", "2"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    child_ = ringcast::test::ChildProcess::spawn(argv, {.err = ringcast::test::Stream::kPipe});
    const auto d = ringcast::test::deadline_in(std::chrono::seconds(20));
    // The last startup line: the websocket's when there is one, else the TLS port's.
    const bool ws = std::find(flags.begin(), flags.end(), "--ws-port") != flags.end();
    if (!child_.read_stdout_until(ws ? "websocket on" : "listening for TLS", d) || !child_.read_stdout_until("\n", d)) {
      return;
    }
    const std::string& out = child_.stdout_text();
    tls_port_ = port_after(out, "listening for TLS on 127.0.0.1:");
    plain_port_ = port_after(out, "listening on 127.0.0.1:");
    ws_port_ = port_after(out, "websocket on wss://127.0.0.1:");
  }
  [[nodiscard]] int tls_port() const { return tls_port_; }
  [[nodiscard]] int plain_port() const { return plain_port_; }
  [[nodiscard]] int ws_port() const { return ws_port_; }
  [[nodiscard]] pid_t pid() const { return child_.pid(); }
  [[nodiscard]] const std::string& stdout_text() const { return child_.stdout_text(); }
  // Waits (bounded) until the broker's stderr holds `needle`.
  bool log_has(std::string_view needle) {
    return child_.read_stderr_until(needle, ringcast::test::deadline_in(std::chrono::seconds(20)));
  }
  std::optional<int> stop() { return child_.stop(SIGTERM); }

 private:
  static int port_after(const std::string& out, std::string_view prefix) {
    const auto at = out.find(prefix);
    return at == std::string::npos ? 0 : std::stoi(out.substr(at + prefix.size()));
  }
  ringcast::test::ChildProcess child_;
  int tls_port_ = 0;
  int plain_port_ = 0;
  int ws_port_ = 0;
};

// A blocking TLS client on a loopback socket; reads time out after 20 s (then
// fail). Verifies the server against `ca` for the name "localhost".
class TlsClient {
 public:
  TlsClient(int port, const std::string& ca, const std::string& cert = {}, const std::string& key = {})
      : fd_(ringcast::test::connect_loopback(port)) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    if (!cert.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, cert.c_str());
      SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM);
    }
    if (fd_ < 0) return;
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "localhost");
    SSL_set1_host(ssl_, "localhost");
    connected_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~TlsClient() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  TlsClient(const TlsClient&) = delete;
  TlsClient& operator=(const TlsClient&) = delete;

  // The handshake completed, from the client's side (with TLS 1.3 a refused
  // client certificate shows only at the first read).
  [[nodiscard]] bool connected() const { return connected_; }
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] SSL* ssl() const { return ssl_; }
  // The server certificate's common name.
  [[nodiscard]] std::string server_cn() const {
    X509* peer = SSL_get0_peer_certificate(ssl_);
    if (peer == nullptr) return {};
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
    return cn;
  }

  bool send(std::string_view bytes) {
    std::size_t written = 0;
    return connected_ && SSL_write_ex(ssl_, bytes.data(), bytes.size(), &written) == 1 && written == bytes.size();
  }
  // A RESP command of bulk strings.
  bool command(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    return send(out);
  }
  // Reads until `needle` is in the received text (true), or EOF, an error or
  // the timeout (false).
  bool read_until(std::string_view needle) {
    while (buf_.find(needle) == std::string::npos) {
      if (!read_more()) return false;
    }
    return true;
  }
  // True once the server closed the connection (EOF or a TLS alert) before
  // anything more than `buf_` arrived; false if the read timed out.
  bool closed_by_server() {
    for (;;) {
      char tmp[4096];
      std::size_t n = 0;
      if (SSL_read_ex(ssl_, tmp, sizeof tmp, &n) == 1) continue;
      const int err = SSL_get_error(ssl_, 0);
      ERR_clear_error();
      return !(err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
  }
  [[nodiscard]] const std::string& received() const { return buf_; }
  // INFO <section> as text (one bulk reply).
  std::string info(const std::string& section) {
    buf_.clear();
    if (!command({"INFO", section}) || !read_until("\r\n")) return {};
    const auto len = std::stoul(buf_.substr(1));
    const auto start = buf_.find("\r\n") + 2;
    while (buf_.size() < start + len) {
      if (!read_more()) return {};
    }
    std::string text = buf_.substr(start, len);
    buf_.erase(0, start + len + 2);
    return text;
  }

 private:
  bool read_more() {
    if (!connected_) return false;
    char tmp[16384];
    std::size_t n = 0;
    if (SSL_read_ex(ssl_, tmp, sizeof tmp, &n) != 1) {
      ERR_clear_error();
      return false;
    }
    buf_.append(tmp, n);
    return true;
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool connected_ = false;
  std::string buf_;
};

// "field:value" of an INFO text as a number; -1 if absent.
inline long long info_field(const std::string& info, std::string_view field) {
  const std::string key = std::string(field) + ":";
  const auto at = info.find(key);
  if (at == std::string::npos) return -1;
  return std::stoll(info.substr(at + key.size()));
}

}  // namespace ringcast::broker::tls::test
