// TLS to NATS (issue 28) through the executables: a nats-server started with a
// `tls {}` block (its certificate from a test CA the openssl CLI makes:
// tests/broker/tls/tls_test_support.hpp), a ringcast-relay publishing ring A
// over tls://, a ringcast-relay ingress producing every message into ring B
// and a ringcast-broker --nats-in publishing them on a channel; then the same
// with `verify: true` and client certificates; and an untrusted server
// certificate refused at startup with the reason.
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
using testing::ChildProcess;
using testing::deadline_in;
using testing::eventually;
using testing::NatsServer;
using testing::TempDir;

constexpr int kMessages = 2000;

std::string msg(int i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

// nats-server's config file: TLS with the test CA's server certificate;
// `verify` also requires a client certificate signed by the test CA.
std::string nats_tls_conf(const Certs& certs, bool verify) {
  const std::string path = certs.file(verify ? "nats-verify.conf" : "nats.conf");
  std::ofstream f(path);
  f << "tls {\n  cert_file: \"" << certs.file("server.crt") << "\"\n  key_file: \"" << certs.file("server.key")
    << "\"\n  ca_file: \"" << certs.file("ca.crt") << "\"\n  verify: " << (verify ? "true" : "false")
    << "\n  timeout: 5\n}\n";
  return path;
}

ChildProcess spawn(std::vector<std::string> argv) { return ChildProcess::spawn(argv, {.err = test::Stream::kPipe}); }

// Ring A's messages through NATS over TLS into ring B and a broker channel,
// every one in order. `tls_flags`: the relays' and the broker's NATS TLS flags.
void relay_through_tls_nats(const Certs& certs, bool verify, const std::vector<std::string>& tls_flags) {
  auto nats = NatsServer::start({.config_file = nats_tls_conf(certs, verify)});
  ASSERT_TRUE(nats);
  TempDir dir;
  const std::string ring_a = dir.file("a.ring");
  const std::string ring_b = dir.file("b.ring");
  auto a = BroadcastRing::create(ring_a, 1 << 12, {.wakeups = true, .claim_producer = false});
  ASSERT_TRUE(a) << a.error().message();

  auto with_tls = [&](std::vector<std::string> argv) {
    argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
    return argv;
  };
  ChildProcess ingress = spawn(with_tls({RELAY_EXE, "--nats", nats->tls_url(), "--nats-in", "ticks=" + ring_b}));
  ASSERT_TRUE(ingress.read_stdout_until("subscribed to NATS", deadline_in(30s))) << ingress.stderr_text();
  auto b = BroadcastRing::open(ring_b);
  ASSERT_TRUE(b) << b.error().message();
  auto consumer = b->register_consumer();
  ASSERT_TRUE(consumer);

  ChildProcess broker = spawn(
      with_tls({BROKER_EXE, "--port", "0", "--io-threads", "1", "--nats", nats->tls_url(), "--nats-in", "ticks=feed"}));
  ASSERT_TRUE(broker.read_stdout_until("subscribed to NATS", deadline_in(30s))) << broker.stderr_text();
  const std::string& out = broker.stdout_text();
  const auto at = out.find("listening on 127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << out;
  testing::RespClient sub(static_cast<std::uint16_t>(std::stoul(out.substr(at + 23))));
  ASSERT_TRUE(sub.send({"SUBSCRIBE", "feed"}));
  ASSERT_TRUE(sub.next(deadline_in(20s)));

  ChildProcess publisher = spawn(with_tls({RELAY_EXE, "--ring", ring_a + "=ticks", "--nats", nats->tls_url()}));
  ASSERT_TRUE(publisher.read_stdout_until("publishing to NATS", deadline_in(30s))) << publisher.stderr_text();
  ASSERT_TRUE(eventually([&] { return a->active_consumer_count() == 1; }));
  for (int i = 0; i < kMessages; ++i) {
    const std::string m = msg(i);
    while (a->try_push(std::as_bytes(std::span(m.data(), m.size()))) != Errc::ok) ::usleep(1000);
  }

  // Ring B: every message, in order.
  int next = 0;
  alignas(8) std::byte buf[kMaxPayload];
  const auto d = deadline_in(60s);
  while (next < kMessages && testing::ms_left(d) > 0) {
    const RecvResult r = b->recv_wait(*consumer, buf, {100ms, IdleStrategy::kSpinThenBlock});
    if (!r) continue;
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(buf), r.length), msg(next)) << "ring B out of order";
    ++next;
  }
  EXPECT_EQ(next, kMessages);
  // The broker channel: every message, in order.
  for (int i = 0; i < kMessages; ++i) {
    const auto reply = sub.next(deadline_in(20s));
    ASSERT_TRUE(reply) << "message " << i << " did not reach the broker";
    ASSERT_TRUE(reply->is_message("feed"));
    ASSERT_EQ(std::string(reply->elems[2].str), msg(i)) << "broker channel out of order";
  }
  EXPECT_EQ(test::exit_code(publisher.stop(SIGTERM)), 0) << publisher.stderr_text();
  EXPECT_EQ(test::exit_code(ingress.stop(SIGTERM)), 0) << ingress.stderr_text();
  EXPECT_EQ(test::exit_code(broker.stop(SIGTERM)), 0) << broker.stderr_text();
}

TEST(RelayNatsTls, RingToNatsOverTlsToRingAndBrokerEveryMessageInOrder) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  relay_through_tls_nats(certs, false, {"--nats-tls-ca-cert-file", certs.file("ca.crt")});
}

TEST(RelayNatsTls, ClientCertificatesForAServerThatVerifiesThem) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  relay_through_tls_nats(certs, true,
                         {"--nats-tls-ca-cert-file", certs.file("ca.crt"), "--nats-tls-cert-file",
                          certs.file("client.crt"), "--nats-tls-key-file", certs.file("client.key")});
}

TEST(RelayNatsTls, AnUntrustedServerCertificateFailsTheStartSayingWhy) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  auto nats = NatsServer::start({.config_file = nats_tls_conf(certs, false)});
  ASSERT_TRUE(nats);
  TempDir dir;
  ChildProcess relay = spawn({RELAY_EXE, "--ring", dir.file("a.ring") + "=ticks", "--nats", nats->tls_url(),
                              "--nats-tls-ca-cert-file", certs.file("rogueca.crt")});
  EXPECT_EQ(test::exit_code(relay.wait_exit(deadline_in(30s))), 1) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("TLS to NATS"), std::string::npos) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("unable to get local issuer certificate"), std::string::npos)
      << relay.stderr_text();

  ChildProcess broker = spawn({BROKER_EXE, "--port", "0", "--nats", nats->tls_url(), "--nats-in", "ticks",
                               "--nats-tls-ca-cert-file", certs.file("rogueca.crt")});
  EXPECT_EQ(test::exit_code(broker.wait_exit(deadline_in(30s))), 1) << broker.stderr_text();
  EXPECT_NE(broker.stderr_text().find("TLS to NATS"), std::string::npos) << broker.stderr_text();
}

TEST(RelayNatsTls, AServerThatVerifiesRefusesARelayWithoutAClientCertificate) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  auto nats = NatsServer::start({.config_file = nats_tls_conf(certs, true)});
  ASSERT_TRUE(nats);
  TempDir dir;
  ChildProcess relay = spawn({RELAY_EXE, "--ring", dir.file("a.ring") + "=ticks", "--nats", nats->tls_url(),
                              "--nats-tls-ca-cert-file", certs.file("ca.crt")});
  EXPECT_EQ(test::exit_code(relay.wait_exit(deadline_in(30s))), 1) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("TLS to NATS"), std::string::npos) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("--nats-tls-cert-file"), std::string::npos) << relay.stderr_text();
}

TEST(RelayNatsTls, AnUnreachableTlsServerIsRetriedAsWithoutTls) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TempDir dir;
  const std::uint16_t port = testing::free_port();
  ChildProcess relay =
      spawn({RELAY_EXE, "--ring", dir.file("a.ring") + "=ticks", "--nats", "tls://127.0.0.1:" + std::to_string(port),
             "--nats-tls-ca-cert-file", certs.file("ca.crt")});
  ASSERT_TRUE(relay.read_stdout_until("publishing to NATS", deadline_in(30s))) << relay.stderr_text();
  EXPECT_TRUE(relay.read_stderr_until("not reachable yet; retrying", deadline_in(20s))) << relay.stderr_text();
  EXPECT_EQ(test::exit_code(relay.stop(SIGTERM)), 0) << relay.stderr_text();
}

TEST(RelayNatsTls, TlsUrlsNamingDifferentHostsAreRefusedAtStart) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  TempDir dir;
  ChildProcess relay = spawn({RELAY_EXE, "--ring", dir.file("a.ring") + "=ticks", "--nats",
                              "tls://127.0.0.1:1,tls://localhost:1", "--nats-tls-ca-cert-file", certs.file("ca.crt")});
  EXPECT_EQ(test::exit_code(relay.wait_exit(deadline_in(30s))), 1) << relay.stderr_text();
  EXPECT_NE(relay.stderr_text().find("name different hosts"), std::string::npos) << relay.stderr_text();
}

TEST(RelayNatsTls, NatsTlsFlagsWithoutNatsAreUsageErrors) {
  const Certs certs;
  ASSERT_TRUE(certs.ok());
  ChildProcess r = spawn({RELAY_EXE, "--ring", "/nonexistent.ring=x", "--nats-tls-ca-cert-file", certs.file("ca.crt")});
  EXPECT_EQ(test::exit_code(r.wait_exit(deadline_in(20s))), 2) << r.stderr_text();
  EXPECT_NE(r.stderr_text().find("need --nats"), std::string::npos) << r.stderr_text();
  ChildProcess b = spawn({BROKER_EXE, "--port", "0", "--nats-tls-ca-cert-file", certs.file("ca.crt")});
  EXPECT_EQ(test::exit_code(b.wait_exit(deadline_in(20s))), 2) << b.stderr_text();
  EXPECT_NE(b.stderr_text().find("need --nats"), std::string::npos) << b.stderr_text();
  ChildProcess c = spawn({RELAY_EXE, "--ring", "/nonexistent.ring=x", "--nats", "tls://127.0.0.1:1",
                          "--nats-tls-cert-file", certs.file("client.crt")});
  EXPECT_EQ(test::exit_code(c.wait_exit(deadline_in(20s))), 2) << c.stderr_text();
  EXPECT_NE(c.stderr_text().find("go together"), std::string::npos) << c.stderr_text();
}

}  // namespace
}  // namespace ringcast::relay
