// TLS on the ringcast-relay executable's embedded broker (issue 28): ring
// messages reach subscribers on --tls-port (the OpenSSL client of
// tests/broker/tls and, where installed, redis-cli --tls), the TLS flags come
// from a config file and RINGCAST_* like every other flag, and SIGHUP reloads
// the certificates without dropping a subscriber. Certificates are made by the
// test with the openssl CLI (tls_test_support.hpp).
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "tls_test_support.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using broker::tls::test::Certs;
using broker::tls::test::TlsClient;
using testing::ChildProcess;
using testing::deadline_in;
using testing::eventually;
using testing::TempDir;

// The port after `prefix` in the relay's startup output; 0 if absent.
int port_after(const std::string& out, std::string_view prefix) {
  const auto at = out.find(prefix);
  return at == std::string::npos ? 0 : std::stoi(out.substr(at + prefix.size()));
}

// Starts ringcast-relay and returns its TLS port (0 on failure).
int start_tls_relay(ChildProcess& relay, const std::vector<std::string>& flags,
                    const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv{RELAY_EXE, "--io-threads", "1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  relay = ChildProcess::spawn(argv, {.err = test::Stream::kPipe, .env_set = env});
  const auto d = deadline_in(20s);
  if (!relay.read_stdout_until("listening for TLS on", d) || !relay.read_stdout_until("\n", d)) return 0;
  return port_after(relay.stdout_text(), "listening for TLS on 127.0.0.1:");
}

// "m<i>" (built by appending: g++ 12 warns falsely on "literal" + std::string).
std::string msg(int i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

void push_text(BroadcastRing& ring, const std::string& text) {
  while (ring.try_push(std::as_bytes(std::span(text.data(), text.size()))) != Errc::ok) {
    ::usleep(1000);  // the relay drains; a full ring only waits
  }
}

// True when every one of "m<first>".."m<last>" is in `text`, in that order.
bool in_order(const std::string& text, int first, int last) {
  std::size_t at = 0;
  for (int i = first; i <= last; ++i) {
    std::string line = "\r\n";
    line += msg(i);
    line += "\r\n";
    at = text.find(line, at);
    if (at == std::string::npos) return false;
    ++at;
  }
  return true;
}

TEST(RelayTls, RingMessagesReachTlsSubscribersAndSighupReloadKeepsThem) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TempDir dir;
  // The relay reads the files SIGHUP reloads from here.
  const std::string crt = dir.file("relay.crt");
  const std::string key = dir.file("relay.key");
  std::filesystem::copy_file(certs.file("server.crt"), crt);
  std::filesystem::copy_file(certs.file("server.key"), key);
  const std::string path = dir.file("ticks.ring");
  auto ring = BroadcastRing::create(path, 1 << 10, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(ring) << ring.error().message();

  ChildProcess relay;
  const int port = start_tls_relay(relay, {"--ring", path + "=ticks", "--listen", "127.0.0.1:0", "--tls-port", "0",
                                           "--tls-cert-file", crt, "--tls-key-file", key});
  ASSERT_NE(port, 0) << relay.stdout_text() << relay.stderr_text();
  EXPECT_EQ(relay.stdout_text().find("listening on"), std::string::npos)
      << "--listen HOST:0 with --tls-port turns the plain port off: " << relay.stdout_text();
  ASSERT_TRUE(eventually([&] { return ring->active_consumer_count() == 1; }));

  TlsClient sub(port, certs.file("ca.crt"));
  ASSERT_TRUE(sub.connected());
  EXPECT_EQ(sub.server_cn(), "localhost");
  ASSERT_TRUE(sub.command({"SUBSCRIBE", "ticks"}));
  ASSERT_TRUE(sub.read_until("ticks\r\n:1\r\n"));
  for (int i = 0; i < 2000; ++i) push_text(*ring, msg(i));
  ASSERT_TRUE(sub.read_until("\r\nm1999\r\n"));
  EXPECT_TRUE(in_order(sub.received(), 0, 1999));

  // A real client: redis-cli --tls publishes on the relay's broker.
  if (::access("/usr/bin/redis-cli", X_OK) == 0) {
    auto cli = ChildProcess::spawn({"/usr/bin/redis-cli", "--tls", "--cacert", certs.file("ca.crt"), "-h", "localhost",
                                    "-p", std::to_string(port), "PUBLISH", "ticks", "from-redis-cli"});
    EXPECT_EQ(test::exit_code(cli.wait_exit(deadline_in(20s))), 0);
    EXPECT_NE(cli.stdout_text().find("1"), std::string::npos) << cli.stdout_text();
    EXPECT_TRUE(sub.read_until("from-redis-cli\r\n"));
  }

  // A broken key: the reload fails and the old certificate stays.
  std::filesystem::copy_file(certs.file("ca.crt"), key, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(relay.pid(), SIGHUP), 0);
  ASSERT_TRUE(relay.read_stderr_until("not reloaded, the old ones stay", deadline_in(20s))) << relay.stderr_text();
  EXPECT_EQ(TlsClient(port, certs.file("ca.crt")).server_cn(), "localhost");

  std::filesystem::copy_file(certs.file("server2.crt"), crt, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs.file("server2.key"), key, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(relay.pid(), SIGHUP), 0);
  ASSERT_TRUE(relay.read_stderr_until("TLS certificates reloaded", deadline_in(20s))) << relay.stderr_text();
  EXPECT_EQ(TlsClient(port, certs.file("ca.crt")).server_cn(), "reloaded");
  for (int i = 2000; i < 3000; ++i) push_text(*ring, msg(i));
  EXPECT_TRUE(sub.read_until("\r\nm2999\r\n")) << "the subscriber from before the reload still receives";
  EXPECT_TRUE(in_order(sub.received(), 2000, 2999));
  EXPECT_EQ(test::exit_code(relay.stop(SIGTERM)), 0);
}

TEST(RelayTls, TlsSettingsComeFromTheConfigFileAndTheEnvironment) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TempDir dir;
  const std::string path = dir.file("ticks.ring");
  auto ring = BroadcastRing::create(path, 1 << 10, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(ring) << ring.error().message();
  const std::string conf = dir.file("relay.toml");
  {
    std::ofstream f(conf);
    f << "listen = \"127.0.0.1:0\"\ntls-port = 0\ntls-cert-file = \"" << certs.file("server.crt") << "\"\n"
      << "tls-ca-cert-file = \"" << certs.file("ca.crt") << "\"\n";
  }
  const std::vector<std::string> env{"RINGCAST_TLS_KEY_FILE=" + certs.file("server.key"),
                                     "RINGCAST_TLS_AUTH_CLIENTS=yes"};
  {
    auto print = ChildProcess::spawn({RELAY_EXE, "--ring", path + "=ticks", "--config", conf, "--print-config"},
                                     {.env_set = env});
    ASSERT_EQ(test::exit_code(print.wait_exit(deadline_in(20s))), 0);
    const std::string out = print.stdout_text();
    EXPECT_NE(out.find("tls-port=0"), std::string::npos) << out;
    EXPECT_NE(out.find("tls-key-file=\"" + certs.file("server.key") + "\""), std::string::npos) << out;
    EXPECT_NE(out.find("tls-auth-clients=\"yes\""), std::string::npos) << out;
  }
  ChildProcess relay;
  const int port = start_tls_relay(relay, {"--ring", path + "=ticks", "--config", conf}, env);
  ASSERT_NE(port, 0) << relay.stdout_text() << relay.stderr_text();
  // Client certificates are required: one signed by the test CA gets in.
  TlsClient with_cert(port, certs.file("ca.crt"), certs.file("client.crt"), certs.file("client.key"));
  ASSERT_TRUE(with_cert.connected());
  ASSERT_TRUE(with_cert.command({"PING"}));
  EXPECT_TRUE(with_cert.read_until("+PONG\r\n"));
  TlsClient without(port, certs.file("ca.crt"));
  EXPECT_FALSE(without.command({"PING"}) && without.read_until("+PONG\r\n"));
  EXPECT_EQ(test::exit_code(relay.stop(SIGTERM)), 0);
}

TEST(RelayTls, MetricsOverHttpsWithTheBrokerCertificateReloadedOnSighup) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TempDir dir;
  const std::string crt = dir.file("relay.crt");
  const std::string key = dir.file("relay.key");
  std::filesystem::copy_file(certs.file("server.crt"), crt);
  std::filesystem::copy_file(certs.file("server.key"), key);
  const std::string path = dir.file("ticks.ring");
  auto ring = BroadcastRing::create(path, 1 << 10, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(ring) << ring.error().message();
  ChildProcess relay;
  ASSERT_NE(start_tls_relay(
                relay, {"--ring", path + "=ticks", "--listen", "127.0.0.1:0", "--tls-port", "0", "--tls-cert-file", crt,
                        "--tls-key-file", key, "--metrics", "127.0.0.1:0", "--metrics-tls"}),
            0)
      << relay.stderr_text();
  ASSERT_TRUE(relay.read_stdout_until("metrics on https://127.0.0.1:", deadline_in(20s)));
  ASSERT_TRUE(relay.read_stdout_until("/metrics\n", deadline_in(20s)));
  const int port = port_after(relay.stdout_text(), "metrics on https://127.0.0.1:");
  ASSERT_NE(port, 0) << relay.stdout_text();
  auto scrape = [&](const std::string& expect_cn) {
    TlsClient c(port, certs.file("ca.crt"));
    EXPECT_TRUE(c.connected());
    EXPECT_EQ(c.server_cn(), expect_cn);
    EXPECT_TRUE(c.send("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    EXPECT_TRUE(c.read_until("ringcast_relay_")) << c.received();
    EXPECT_EQ(c.received().rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << c.received();
  };
  scrape("localhost");
  std::filesystem::copy_file(certs.file("server2.crt"), crt, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(certs.file("server2.key"), key, std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(relay.pid(), SIGHUP), 0);
  ASSERT_TRUE(relay.read_stderr_until("TLS certificates reloaded", deadline_in(20s))) << relay.stderr_text();
  scrape("reloaded");
  EXPECT_EQ(relay.stderr_text().find("metrics TLS certificate not reloaded"), std::string::npos) << relay.stderr_text();
  EXPECT_EQ(test::exit_code(relay.stop(SIGTERM)), 0);
}

TEST(RelayTls, BadTlsSettingsAreUsageErrors) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  const std::string crt = certs.file("server.crt");
  const std::string key = certs.file("server.key");
  const std::vector<std::vector<std::string>> bad = {
      {"--tls-port", "0"},                                          // no certificate
      {"--tls-port", "0", "--tls-cert-file", crt},                  // no key
      {"--tls-cert-file", crt, "--tls-key-file", key},              // no TLS listener
      {"--ws-tls", "--tls-cert-file", crt, "--tls-key-file", key},  // no --ws-port
      {"--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key, "--tls-auth-clients", "yes"},     // no CA
      {"--nats", "nats://127.0.0.1:1", "--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key},  // no broker
      {"--metrics-tls", "--tls-port", "0", "--tls-cert-file", crt, "--tls-key-file", key},  // no --metrics
      {"--metrics", "127.0.0.1:0", "--metrics-tls"},                                        // no certificate
  };
  for (const auto& flags : bad) {
    std::vector<std::string> argv{RELAY_EXE, "--ring", "/nonexistent.ring=x"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto c = ChildProcess::spawn(argv, {.err = test::Stream::kPipe});
    EXPECT_EQ(test::exit_code(c.wait_exit(deadline_in(20s))), 2) << flags.front() << " " << c.stderr_text();
  }
}

}  // namespace
}  // namespace ringcast::relay
