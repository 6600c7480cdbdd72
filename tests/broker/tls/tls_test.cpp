// TLS on the broker's listeners (issue 28, docs/security.md "TLS"), end to end
// against the ringcast-broker executable with certificates the test makes:
// real clients (redis-cli --tls, redis-py with ssl=True, a Boost.Beast wss
// client), bad input on the TLS port (plain text, a handshake that never
// completes, untrusted and expired client certificates, a truncated record),
// each closing only its own connection with a log line and a counter, and a
// certificate reload on SIGHUP that drops no connection.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "eventually.hpp"
#include "fd_io.hpp"
#include "tls_test_support.hpp"

namespace {

using ringcast::broker::tls::test::Certs;
using ringcast::broker::tls::test::info_field;
using ringcast::broker::tls::test::TlsBrokerProcess;
using ringcast::broker::tls::test::TlsClient;
namespace rt = ringcast::test;

// Runs `argv` to completion (bounded), returning its exit code and stdout.
std::pair<int, std::string> run(const std::vector<std::string>& argv) {
  auto c = rt::ChildProcess::spawn(argv);
  std::string out;
  rt::read_to_eof(c.stdout_fd(), out, rt::deadline_in(std::chrono::seconds(20)));
  return {rt::exit_code(c.wait_exit(rt::deadline_in(std::chrono::seconds(20)))), out};
}

// One broker for the suite: RESP over TLS only (--port 0 beside --tls-port),
// TLS on the WebSocket port, client certificates optional (verified when
// sent), a short handshake timeout.
class TlsBrokerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new Certs();
    if (!certs_->ok()) return;
    broker_ = new TlsBrokerProcess({"--port", "0", "--tls-port", "0", "--ws-port", "0", "--ws-tls", "--tls-cert-file",
                                    certs_->file("server.crt"), "--tls-key-file", certs_->file("server.key"),
                                    "--tls-ca-cert-file", certs_->file("ca.crt"), "--tls-auth-clients", "optional",
                                    "--tls-handshake-timeout-ms", "300"});
  }
  static void TearDownTestSuite() {
    if (broker_ != nullptr) {
      EXPECT_EQ(rt::exit_code(broker_->stop()), 0);
    }
    delete broker_;
    delete certs_;
    broker_ = nullptr;
    certs_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(certs_->ok()) << "openssl could not make the test certificates";
    ASSERT_NE(broker_->tls_port(), 0) << broker_->stdout_text();
  }

  static std::string file(std::string_view name) { return certs_->file(name); }
  static int port() { return broker_->tls_port(); }
  // INFO tls over a fresh TLS connection with the client certificate.
  static std::string info_tls() {
    TlsClient c(port(), file("ca.crt"), file("client.crt"), file("client.key"));
    return c.info("tls");
  }
  static std::vector<std::string> redis_cli(std::vector<std::string> args) {
    std::vector<std::string> argv{"/usr/bin/redis-cli", "--tls", "--cacert",
                                  file("ca.crt"),       "-p",    std::to_string(port())};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  static Certs* certs_;
  static TlsBrokerProcess* broker_;
};

Certs* TlsBrokerTest::certs_ = nullptr;
TlsBrokerProcess* TlsBrokerTest::broker_ = nullptr;

TEST_F(TlsBrokerTest, TheStartupLinesNameOnlyTheTlsListeners) {
  EXPECT_EQ(broker_->plain_port(), 0) << "--port 0 beside --tls-port turns the plain port off";
  EXPECT_NE(broker_->ws_port(), 0);
  EXPECT_NE(broker_->stdout_text().find("live page: https://"), std::string::npos);
}

TEST_F(TlsBrokerTest, RedisCliSubscribesAndReceivesOverTls) {
  if (!std::filesystem::exists("/usr/bin/redis-cli")) GTEST_SKIP() << "no redis-cli (Debian redis-tools)";
  auto sub = rt::ChildProcess::spawn(redis_cli({"SUBSCRIBE", "news"}));
  ASSERT_TRUE(sub.read_stdout_until("news\n1\n", rt::deadline_in(std::chrono::seconds(20)))) << sub.stdout_text();
  const auto [code, out] = run(redis_cli({"PUBLISH", "news", "hello over tls"}));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "1\n");
  EXPECT_TRUE(sub.read_stdout_until("hello over tls\n", rt::deadline_in(std::chrono::seconds(20))))
      << sub.stdout_text();
  sub.stop(SIGTERM);
}

TEST_F(TlsBrokerTest, RedisPyWithSslTrue) {
  if (run({"/usr/bin/python3", "-c", "import redis"}).first != 0) {
    GTEST_SKIP() << "no redis-py (Debian python3-redis)";
  }
  const std::string script = R"py(
import sys, redis
port, ca, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def client():
    return redis.Redis(host="localhost", port=port, ssl=True, ssl_ca_certs=ca, ssl_certfile=cert,
                       ssl_keyfile=key, ssl_check_hostname=True, socket_timeout=20)
sub = client().pubsub()
sub.subscribe("py")
assert sub.get_message(timeout=20)["type"] == "subscribe"
assert client().publish("py", b"\x00binary\xff" * 1000) == 1
m = sub.get_message(timeout=20)
assert m["data"] == b"\x00binary\xff" * 1000, m
print("ok")
)py";
  const auto [code, out] = run({"/usr/bin/python3", "-c", script, std::to_string(port()), file("ca.crt"),
                                file("client.crt"), file("client.key")});
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "ok\n");
}

TEST_F(TlsBrokerTest, ManyMessagesFanOutToTwoTlsSubscribersIntact) {
  // Enough to fill records, socket buffers and several writer wakeups.
  TlsClient a(port(), file("ca.crt"));
  TlsClient b(port(), file("ca.crt"), file("client.crt"), file("client.key"));
  ASSERT_TRUE(a.connected() && b.connected());
  for (TlsClient* c : {&a, &b}) {
    ASSERT_TRUE(c->command({"SUBSCRIBE", "bulk"}));
    ASSERT_TRUE(c->read_until("bulk\r\n:1\r\n"));
  }
  TlsClient pub(port(), file("ca.crt"));
  std::string pipeline;
  constexpr int kMessages = 2000;
  for (int i = 0; i < kMessages; ++i) {
    const std::string payload = std::to_string(i) + std::string(i % 3 == 0 ? 3000 : 40, 'x');
    pipeline += "*3\r\n$7\r\nPUBLISH\r\n$4\r\nbulk\r\n$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";
  }
  ASSERT_TRUE(pub.send(pipeline));
  const std::string last = "\r\n" + std::to_string(kMessages - 1) + "xxxx";
  for (TlsClient* c : {&a, &b}) {
    ASSERT_TRUE(c->read_until(last));
    std::size_t count = 0;
    for (std::size_t at = c->received().find("$7\r\nmessage\r\n"); at != std::string::npos;
         at = c->received().find("$7\r\nmessage\r\n", at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, static_cast<std::size_t>(kMessages));
  }
}

TEST_F(TlsBrokerTest, WssSubscriptionAndHttpsMetrics) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace ssl = boost::asio::ssl;
  asio::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(file("ca.crt"));
  ctx.set_verify_mode(ssl::verify_peer);
  const asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(broker_->ws_port()));
  auto open = [&](ssl::stream<asio::ip::tcp::socket>& s) {
    s.next_layer().connect(ep);
    timeval tv{20, 0};  // bounds every read
    ::setsockopt(s.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    SSL_set_tlsext_host_name(s.native_handle(), "localhost");
    s.set_verify_callback(ssl::host_name_verification("localhost"));
    s.handshake(ssl::stream_base::client);
  };

  beast::websocket::stream<ssl::stream<asio::ip::tcp::socket>> ws(ioc, ctx);
  open(ws.next_layer());
  ws.set_option(beast::websocket::stream_base::decorator(
      [](beast::websocket::request_type& req) { req.set(beast::http::field::sec_websocket_protocol, "ringcast.v1"); }));
  ws.handshake("localhost", "/");
  ws.write(asio::buffer(std::string(R"({"type":"subscribe","topic":"wss"})")));
  beast::flat_buffer buf;
  ws.read(buf);
  EXPECT_EQ(beast::buffers_to_string(buf.data()), R"({"type":"subscribed","topic":"wss"})");
  buf.clear();

  TlsClient pub(port(), file("ca.crt"));
  ASSERT_TRUE(pub.command({"PUBLISH", "wss", "through wss"}));
  ASSERT_TRUE(pub.read_until(":1\r\n"));
  ws.read(buf);
  const std::string msg = beast::buffers_to_string(buf.data());
  EXPECT_NE(msg.find(R"("topic":"wss")"), std::string::npos) << msg;
  EXPECT_NE(msg.find("through wss"), std::string::npos) << msg;
  ws.close(beast::websocket::close_code::normal);

  ssl::stream<asio::ip::tcp::socket> https(ioc, ctx);
  open(https);
  beast::http::request<beast::http::empty_body> req(beast::http::verb::get, "/metrics", 11);
  req.set(beast::http::field::host, "localhost");
  beast::http::write(https, req);
  beast::http::response<beast::http::string_body> res;
  beast::flat_buffer hbuf;
  beast::http::read(https, hbuf, res);
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_NE(res.body().find("ringcast_broker_tls_handshakes_total "), std::string::npos);
  EXPECT_NE(res.body().find(R"(ringcast_broker_tls_handshake_failures_total{reason="not_tls"})"), std::string::npos);
}

TEST_F(TlsBrokerTest, PlainTextClientOnTheTlsPortIsClosedCountedAndLogged) {
  const long long before = info_field(info_tls(), "tls_handshake_failures_not_tls");
  TlsClient bystander(port(), file("ca.crt"));  // must be untouched
  ASSERT_TRUE(bystander.connected());
  const int fd = rt::connect_loopback(port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(rt::send_all(fd, "PING\r\n"));
  std::string got;
  EXPECT_TRUE(rt::read_to_eof(fd, got, rt::deadline_in(std::chrono::seconds(20))) || errno == ECONNRESET);
  EXPECT_EQ(got.find("PONG"), std::string::npos);
  ::close(fd);
  EXPECT_TRUE(broker_->log_has("handshake failed (not_tls)"));
  EXPECT_EQ(info_field(info_tls(), "tls_handshake_failures_not_tls"), before + 1);
  ASSERT_TRUE(bystander.command({"PING"}));
  EXPECT_TRUE(bystander.read_until("+PONG\r\n"));
}

TEST_F(TlsBrokerTest, HandshakeThatNeverCompletesTimesOut) {
  const long long before = info_field(info_tls(), "tls_handshake_failures_timeout");
  const int fd = rt::connect_loopback(port());
  ASSERT_GE(fd, 0);
  std::string got;  // we send nothing: the broker gives up after the timeout and closes
  EXPECT_TRUE(rt::read_to_eof(fd, got, rt::deadline_in(std::chrono::seconds(20))));
  ::close(fd);
  EXPECT_TRUE(broker_->log_has("handshake failed (timeout)"));
  EXPECT_EQ(info_field(info_tls(), "tls_handshake_failures_timeout"), before + 1);
}

TEST_F(TlsBrokerTest, UntrustedAndExpiredClientCertificatesAreRefused) {
  const long long before = info_field(info_tls(), "tls_handshake_failures_certificate");
  for (const char* name : {"rogue", "expired"}) {
    TlsClient c(port(), file("ca.crt"), file(std::string(name) + ".crt"), file(std::string(name) + ".key"));
    // TLS 1.3: the client's side completes before the server has checked the
    // certificate; the refusal is the alert at the first read.
    if (c.connected()) {
      c.command({"PING"});
      EXPECT_FALSE(c.read_until("+PONG")) << name;
    }
  }
  EXPECT_TRUE(broker_->log_has("client certificate: certificate has expired"));
  EXPECT_TRUE(broker_->log_has("client certificate: unable to get local issuer certificate"));
  EXPECT_EQ(info_field(info_tls(), "tls_handshake_failures_certificate"), before + 2);
}

TEST_F(TlsBrokerTest, TruncatedRecordClosesOnlyItsConnection) {
  const long long before = info_field(info_tls(), "tls_record_errors");
  TlsClient sub(port(), file("ca.crt"));
  ASSERT_TRUE(sub.command({"SUBSCRIBE", "t"}));
  ASSERT_TRUE(sub.read_until("t\r\n:1\r\n"));

  TlsClient bad(port(), file("ca.crt"));
  ASSERT_TRUE(bad.command({"PING"}));
  ASSERT_TRUE(bad.read_until("+PONG\r\n"));
  // An application-data record header promising 100 bytes, 10 of them, EOF.
  ASSERT_TRUE(rt::send_all(bad.fd(), std::string("\x17\x03\x03\x00\x64", 5) + std::string(10, 'x')));
  ::shutdown(bad.fd(), SHUT_WR);
  EXPECT_TRUE(bad.closed_by_server());
  EXPECT_TRUE(broker_->log_has("truncated record"));
  EXPECT_EQ(info_field(info_tls(), "tls_record_errors"), before + 1);

  // A client that hangs up between records without close_notify (as hiredis
  // does) is not an error.
  {
    TlsClient quiet(port(), file("ca.crt"));
    ASSERT_TRUE(quiet.command({"PING"}));
    ASSERT_TRUE(quiet.read_until("+PONG\r\n"));
    ::shutdown(quiet.fd(), SHUT_RDWR);
  }
  TlsClient pub(port(), file("ca.crt"));
  ASSERT_TRUE(pub.command({"PUBLISH", "t", "still here"}));
  ASSERT_TRUE(pub.read_until(":1\r\n"));
  EXPECT_TRUE(sub.read_until("still here\r\n"));
  EXPECT_EQ(info_field(info_tls(), "tls_record_errors"), before + 1);
}

TEST_F(TlsBrokerTest, GarbageOnTheTlsPortIsCountedAndTheBrokerServesOn) {
  // Seeded random bytes, some behind a valid-looking handshake record header
  // so that they reach the ClientHello parser; each connection then hangs up.
  auto failures = [] {
    const std::string info = info_tls();
    long long sum = 0;
    for (const char* r : {"not_tls", "certificate", "protocol", "timeout", "aborted"}) {
      sum += info_field(info, std::string("tls_handshake_failures_") + r);
    }
    return sum;
  };
  const long long before = failures();
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  constexpr int kConnections = 100;
  for (int i = 0; i < kConnections; ++i) {
    std::string bytes(1 + next() % 600, '\0');
    for (char& b : bytes) b = static_cast<char>(next());
    if (i % 2 == 0)
      bytes = std::string("\x16\x03\x01", 3) + static_cast<char>(bytes.size() >> 8) +
              static_cast<char>(bytes.size() & 0xff) + bytes;
    const int fd = rt::connect_loopback(port());
    ASSERT_GE(fd, 0);
    rt::send_all(fd, bytes);
    ::shutdown(fd, SHUT_WR);
    std::string ignored;
    rt::read_to_eof(fd, ignored, rt::deadline_in(std::chrono::seconds(20)));
    ::close(fd);
  }
  EXPECT_TRUE(rt::eventually([&] { return failures() == before + kConnections; }, std::chrono::seconds(20),
                             std::chrono::milliseconds(20)))
      << failures() - before;
  TlsClient c(port(), file("ca.crt"));
  ASSERT_TRUE(c.command({"PING"}));
  EXPECT_TRUE(c.read_until("+PONG\r\n"));
}

TEST(TlsBrokerRequired, MissingClientCertificateIsRefusedWhenRequired) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TlsBrokerProcess broker({"--port", "0", "--tls-port", "0", "--tls-cert-file", certs.file("server.crt"),
                           "--tls-key-file", certs.file("server.key"), "--tls-ca-cert-file", certs.file("ca.crt")});
  ASSERT_NE(broker.tls_port(), 0);
  {
    TlsClient anonymous(broker.tls_port(), certs.file("ca.crt"));
    if (anonymous.connected()) {
      anonymous.command({"PING"});
      EXPECT_FALSE(anonymous.read_until("+PONG"));
    }
  }
  EXPECT_TRUE(broker.log_has("peer did not return a certificate"));
  TlsClient c(broker.tls_port(), certs.file("ca.crt"), certs.file("client.crt"), certs.file("client.key"));
  const std::string info = c.info("tls");
  EXPECT_EQ(info_field(info, "tls_handshake_failures_certificate"), 1) << info;
  EXPECT_NE(info.find("tls_auth_clients:yes"), std::string::npos) << "yes is the default with a CA file";
  EXPECT_EQ(rt::exit_code(broker.stop()), 0);
}

TEST(TlsBrokerReload, SighupReloadsCertificatesWithoutDroppingConnections) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  // The broker reads these two paths; the test replaces their contents.
  const std::string crt = certs.file("live.crt");
  const std::string key = certs.file("live.key");
  std::filesystem::copy_file(certs.file("server.crt"), crt);
  std::filesystem::copy_file(certs.file("server.key"), key);
  TlsBrokerProcess broker({"--port", "0", "--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key});
  ASSERT_NE(broker.tls_port(), 0);
  TlsClient sub(broker.tls_port(), certs.file("ca.crt"));
  ASSERT_TRUE(sub.connected());
  EXPECT_EQ(sub.server_cn(), "localhost");
  ASSERT_TRUE(sub.command({"SUBSCRIBE", "r"}));
  ASSERT_TRUE(sub.read_until("r\r\n:1\r\n"));

  // A broken key file: the reload fails, the old certificate stays.
  std::filesystem::copy_file(certs.file("ca.crt"), key, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(broker.pid(), SIGHUP), 0);
  EXPECT_TRUE(broker.log_has("not reloaded, the old ones stay"));
  {
    TlsClient c(broker.tls_port(), certs.file("ca.crt"));
    EXPECT_EQ(c.server_cn(), "localhost");
  }

  std::filesystem::copy_file(certs.file("server2.crt"), crt, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs.file("server2.key"), key, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(broker.pid(), SIGHUP), 0);
  EXPECT_TRUE(broker.log_has("TLS certificates reloaded"));
  TlsClient pub(broker.tls_port(), certs.file("ca.crt"));
  EXPECT_EQ(pub.server_cn(), "reloaded");
  ASSERT_TRUE(pub.command({"PUBLISH", "r", "after reload"}));
  ASSERT_TRUE(pub.read_until(":1\r\n"));
  EXPECT_TRUE(sub.read_until("after reload\r\n")) << "the connection made before the reload still works";
  const std::string info = pub.info("tls");
  EXPECT_EQ(info_field(info, "tls_reloads"), 1) << info;
  EXPECT_EQ(info_field(info, "tls_reload_failures"), 1) << info;
  EXPECT_EQ(rt::exit_code(broker.stop()), 0);
}

TEST(TlsBrokerFlags, TlsSettingsComeFromTheEnvironmentAndTheConfigFile) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  const std::string conf = certs.file("broker.toml");
  {
    std::ofstream f(conf);
    f << "port = 0\ntls-port = 0\ntls-cert-file = \"" << certs.file("server.crt") << "\"\n";
  }
  std::vector<std::string> argv{BROKER_EXE, "--io-threads", "1", "--config", conf};
  auto c = rt::ChildProcess::spawn(
      argv, {.env_set = {"RINGCAST_TLS_KEY_FILE=" + certs.file("server.key"), "RINGCAST_TLS_AUTH_CLIENTS=no"}});
  ASSERT_TRUE(c.read_stdout_until("listening for TLS on 127.0.0.1:", rt::deadline_in(std::chrono::seconds(20))));
  ASSERT_TRUE(c.read_stdout_until("\n", rt::deadline_in(std::chrono::seconds(20))));
  const std::string out = c.stdout_text();
  EXPECT_EQ(out.find("listening on"), std::string::npos) << out;
  TlsClient client(std::stoi(out.substr(out.rfind(':') + 1)), certs.file("ca.crt"));
  EXPECT_NE(client.info("tls").find("tls_auth_clients:no"), std::string::npos);
  EXPECT_EQ(rt::exit_code(c.stop()), 0);
}

TEST(TlsBrokerFlags, BadTlsSettingsAreUsageErrors) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  const std::string crt = certs.file("server.crt");
  const std::string key = certs.file("server.key");
  const std::vector<std::vector<std::string>> bad = {
      {"--tls-port", "0"},  // no certificate
      {"--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key, "--tls-auth-clients", "yes"},  // no CA
      {"--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key, "--tls-auth-clients", "maybe"},
      {"--ws-tls", "--tls-cert-file", crt, "--tls-key-file", key},  // no --ws-port
      {"--tls-cert-file", crt, "--tls-key-file", key},              // no TLS listener
  };
  for (const auto& flags : bad) {
    std::vector<std::string> argv{BROKER_EXE, "--port", "0"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto c = rt::ChildProcess::spawn(argv, {.err = rt::Stream::kDiscard});
    EXPECT_EQ(rt::exit_code(c.wait_exit(rt::deadline_in(std::chrono::seconds(20)))), 2) << flags.back();
  }
  // A key that does not match the certificate: the broker does not start.
  auto c = rt::ChildProcess::spawn({BROKER_EXE, "--port", "0", "--tls-port", "0", "--tls-cert-file", crt,
                                    "--tls-key-file", certs.file("client.key")},
                                   {.err = rt::Stream::kPipe});
  EXPECT_TRUE(c.read_stderr_until("does not match the certificate", rt::deadline_in(std::chrono::seconds(20))));
  EXPECT_EQ(rt::exit_code(c.wait_exit(rt::deadline_in(std::chrono::seconds(20)))), 1);
}

}  // namespace
