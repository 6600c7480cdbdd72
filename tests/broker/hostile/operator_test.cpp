// Operators' surfaces (issue 40): what the broker shows and keeps on behalf of
// its operator, probed as an outsider or an unlucky operator would.
//  * /metrics on the public WebSocket port names every connection (address,
//    token subject): with authentication on, it needs the password or a token
//    that may read every channel, sent as `Authorization: Bearer`.
//  * Two brokers on one --data-dir would overwrite each other's history: the
//    second is refused at start, naming the directory and the holder's pid;
//    after the holder is killed with SIGKILL a new broker starts on it.
//  * HISTORY without COUNT on a channel larger than the output limit used to
//    close the connection without a word: it reads a default page, and a
//    reply that would not fit the output limit is an error instead.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "deadline.hpp"
#include "fd_io.hpp"
#include "hostile_support.hpp"
#include "resp_client.hpp"
#include "ringcast/broker/token.hpp"
#include "tcp_loopback.hpp"
#include "temp_dir.hpp"

namespace ringcast::broker::hostile {
namespace {

using std::chrono::seconds;

constexpr std::string_view kSecret = "operator-test-secret-of-32-bytes-at-least";

// `GET /metrics` on `port` with `Authorization: Bearer <bearer>` unless empty;
// the whole response (the server closes after it).
std::string get_metrics(std::uint16_t port, std::string_view bearer = {}) {
  const int fd = test::connect_loopback(port);
  if (fd < 0) return {};
  std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!bearer.empty()) req.append("Authorization: Bearer ").append(bearer).append("\r\n");
  req += "\r\n";
  std::string out;
  if (test::send_all(fd, req)) (void)test::read_to_eof(fd, out, test::deadline_in(seconds(20)));
  ::close(fd);
  return out;
}

std::string token(std::optional<std::vector<std::string>> subscribe) {
  Grant g;
  g.subject = "ops";
  g.expiry = std::chrono::system_clock::now() + std::chrono::hours(1);
  g.subscribe = std::move(subscribe);
  return mint_token(g, kSecret).value();
}

// INFO's `field` on a connection that authenticated with `auth` (AUTH's
// arguments); nullopt if AUTH or INFO failed or the field is absent.
std::optional<std::string> authed_info(std::uint16_t port, std::initializer_list<std::string_view> auth,
                                       std::string_view field) {
  test::RespClient c(port);
  const auto ok = c.call(auth);
  if (!ok || ok->type != '+') return std::nullopt;
  const auto r = c.call({"INFO", "auth"});
  if (!r || r->type != '$') return std::nullopt;
  const std::string key = "\n" + std::string(field) + ":";
  const auto at = r->str.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const auto v = r->str.substr(at + key.size());
  return std::string(v.substr(0, v.find('\r')));
}

std::string write_secret(const test::TempDir& dir) {
  const std::string path = dir.file("secret");
  std::ofstream(path) << kSecret;
  return path;
}

TEST(OperatorSurfacesTest, MetricsNeedATokenThatMayReadEveryChannel) {
  test::TempDir dir;
  Broker broker({"--token-secret-file", write_secret(dir)});
  const std::string everything = token(std::nullopt);
  // A client whose address and subject /metrics would show.
  test::RespClient watched(broker.port());
  const auto authed = watched.call({"AUTH", "ops", everything});
  ASSERT_TRUE(authed && authed->type == '+');

  const std::string anonymous = get_metrics(broker.ws_port());
  EXPECT_EQ(anonymous.rfind("HTTP/1.1 401 ", 0), 0u) << anonymous.substr(0, 200);
  EXPECT_NE(anonymous.find("WWW-Authenticate: Bearer realm=\"ringcast\""), std::string::npos)
      << anonymous.substr(0, 200);
  EXPECT_EQ(anonymous.find("ringcast_broker_"), std::string::npos) << anonymous.substr(0, 200);
  EXPECT_EQ(anonymous.find("127.0.0.1"), std::string::npos) << anonymous.substr(0, 200);

  const std::string forged = get_metrics(broker.ws_port(), everything.substr(0, everything.size() - 2) + "AA");
  EXPECT_EQ(forged.rfind("HTTP/1.1 401 ", 0), 0u) << forged.substr(0, 200);
  EXPECT_NE(forged.find("error=\"invalid_token\""), std::string::npos) << forged.substr(0, 200);

  const std::string narrow = get_metrics(broker.ws_port(), token(std::vector<std::string>{"pub.*"}));
  EXPECT_EQ(narrow.rfind("HTTP/1.1 403 ", 0), 0u) << narrow.substr(0, 200);
  EXPECT_NE(narrow.find("/metrics needs a token without a subscribe claim"), std::string::npos)
      << narrow.substr(0, 200);
  EXPECT_EQ(narrow.find("ringcast_broker_"), std::string::npos) << narrow.substr(0, 200);

  const std::string served = get_metrics(broker.ws_port(), everything);
  EXPECT_EQ(served.rfind("HTTP/1.1 200 ", 0), 0u) << served.substr(0, 200);
  EXPECT_NE(served.find("ringcast_broker_messages_published_total"), std::string::npos);
  EXPECT_NE(served.find("addr=\"127.0.0.1:"), std::string::npos) << "the watched client's address";

  // Refusals are counted as AUTH's are.
  EXPECT_EQ(authed_info(broker.port(), {"AUTH", "ops", everything}, "token_refused_bad_signature"), "1");
  EXPECT_EQ(authed_info(broker.port(), {"AUTH", "ops", everything}, "permission_denied"), "1");
  EXPECT_TRUE(broker.alive());
}

TEST(OperatorSurfacesTest, MetricsTakeThePasswordAsBearerAndDelayGuessesAsAuthDoes) {
  Broker broker({"--requirepass", "hunter2-but-longer"}, test::Stream::kPipe);
  EXPECT_EQ(get_metrics(broker.ws_port()).rfind("HTTP/1.1 401 ", 0), 0u);
  const std::string wrong = get_metrics(broker.ws_port(), "hunter2");
  EXPECT_EQ(wrong.rfind("HTTP/1.1 401 ", 0), 0u) << wrong.substr(0, 200);
  EXPECT_NE(wrong.find("wrong password"), std::string::npos) << wrong.substr(0, 200);
  // A guess per connection, and each one from the same address waits longer
  // (the failure table AUTH's refusals go through).
  EXPECT_EQ(get_metrics(broker.ws_port(), "hunter3").rfind("HTTP/1.1 401 ", 0), 0u);
  test::ChildProcess& p = broker.process();
  const auto second = p.read_stderr_line_with("2 in a row", test::deadline_in(seconds(10)));
  ASSERT_TRUE(second);
  EXPECT_NE(second->find("authentication refused (wrong password on /metrics); failure 1 of the connection, 2 in a "
                         "row from 127.0.0.1; delayed 200 ms"),
            std::string::npos)
      << *second;
  const std::string served = get_metrics(broker.ws_port(), "hunter2-but-longer");
  EXPECT_EQ(served.rfind("HTTP/1.1 200 ", 0), 0u) << served.substr(0, 200);
  EXPECT_NE(served.find("ringcast_broker_messages_published_total"), std::string::npos);
  EXPECT_EQ(authed_info(broker.port(), {"AUTH", "hunter2-but-longer"}, "password_auth_refused"), "2");
  EXPECT_EQ(authed_info(broker.port(), {"AUTH", "hunter2-but-longer"}, "auth_failure_sources"), "1");
}

TEST(OperatorSurfacesTest, MetricsStayOpenWithoutAuthentication) {
  Broker broker;
  const std::string served = get_metrics(broker.ws_port());
  EXPECT_EQ(served.rfind("HTTP/1.1 200 ", 0), 0u) << served.substr(0, 200);
  EXPECT_TRUE(broker.serves_canary());
}

TEST(OperatorSurfacesTest, ASecondBrokerOnOneDataDirIsRefusedUntilTheFirstDies) {
  test::TempDir dir;
  const std::string data = dir.file("history");
  const std::vector<std::string> flags{"--history", "h.*=100", "--data-dir", data};
  std::optional<Broker> first(std::in_place, flags);
  ASSERT_TRUE(first->serves_canary());

  test::SpawnOptions piped;
  piped.err = test::Stream::kPipe;
  std::vector<std::string> argv{BROKER_EXE, "--port", "0", "--ws-port", "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto second = test::ChildProcess::spawn(argv, piped);
  const auto status = second.wait_exit(test::deadline_in(seconds(20)));
  ASSERT_TRUE(status.has_value()) << "the second broker is running on the first one's --data-dir";
  EXPECT_EQ(test::exit_code(status), 1);
  (void)second.read_stderr_until("\n", test::deadline_in(seconds(5)));
  const std::string& err = second.stderr_text();
  EXPECT_NE(err.find("history dir " + data + ": in use by another broker (pid " + std::to_string(first->pid())),
            std::string::npos)
      << err;
  EXPECT_TRUE(first->serves_canary());

  // The kernel drops the lock with its holder, however it dies.
  (void)first->process().stop(SIGKILL);
  first.reset();
  Broker third(flags);
  EXPECT_TRUE(third.serves_canary());
}

TEST(OperatorSurfacesTest, HistoryWithoutCountReadsAPageAndATooLargeReplyIsAnError) {
  // 1500 messages of 900 bytes (1.35 MB) behind a 1 MiB output limit: the
  // whole channel does not fit in one reply, the default 1000 messages do.
  // On `edge` the payloads fit and the framing tips the reply over.
  Broker broker({"--history", "big=100000", "--history", "edge=1000", "--hard-limit", "1mb", "--soft-limit", "0"});
  test::RespClient pub(broker.port());
  const std::string payload(900, 'x');
  for (int i = 0; i < 1500; ++i) ASSERT_EQ(pub.call({"PUBLISH", "big", payload})->type, ':');

  {
    const int fd = test::connect_loopback(broker.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(test::send_all(fd, "*2\r\n$7\r\nHISTORY\r\n$3\r\nbig\r\n"));
    std::string in;
    const auto d = test::deadline_in(seconds(20));
    EXPECT_TRUE(test::read_until(fd, in, "\r\n+ok\r\n*1000\r\n*3\r\n:501\r\n", d))
        << "no page of the last 1000 messages: " << in.substr(0, 200);
    ::close(fd);
  }

  test::RespClient c(broker.port());
  const auto r = c.call({"HISTORY", "big", "COUNT", "100000"});
  ASSERT_TRUE(r.has_value()) << "the connection was closed instead of answered";
  EXPECT_EQ(r->type, '-');
  EXPECT_NE(r->str.find("ERR HISTORY reply of 1500 messages"), std::string_view::npos) << r->str;
  EXPECT_NE(r->str.find("would not fit the output limit (1048576 bytes, --hard-limit"), std::string_view::npos)
      << r->str;
  // 1000 payloads of 1040 bytes fit the limit; with their framing they do not.
  const std::string edge(1040, 'y');
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(pub.call({"PUBLISH", "edge", edge})->type, ':');
  const auto framed = c.call({"HISTORY", "edge"});
  ASSERT_TRUE(framed.has_value()) << "the connection was closed instead of answered";
  EXPECT_EQ(framed->type, '-');
  EXPECT_NE(framed->str.find("ERR HISTORY reply of 1000 messages would not fit"), std::string_view::npos)
      << framed->str;
  const auto pong = c.call({"PING"});
  ASSERT_TRUE(pong.has_value());
  EXPECT_EQ(pong->str, "PONG");
  EXPECT_TRUE(broker.serves_canary());
}

}  // namespace
}  // namespace ringcast::broker::hostile
