// The Server's listener hook (src/broker/server.hpp): a listener serves the
// Client its factory makes, whatever protocol that client speaks, next to the
// RESP listener, on one core; a connection over max_connections gets the
// listener's own refusal bytes.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/resp/session.hpp"
#include "broker/server.hpp"
#include "fd_io.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::broker {
namespace {

// A toy protocol: each input line "SUB <channel>" or "PUB <channel> <payload>"
// becomes a core call; deliveries arrive in the client's wire format (RESP2
// here, to read them easily).
class LineClient final : public Client {
 public:
  LineClient(BrokerCore& core, std::string peer, Waker& waker)
      : Client(core, std::move(peer), WireFormat::kResp2, waker, /*authenticated=*/true) {}

  InputResult on_input(std::string_view bytes) override {
    line_.append(bytes);
    for (std::size_t eol; (eol = line_.find('\n')) != std::string::npos; line_.erase(0, eol + 1)) {
      const std::string cmd = line_.substr(0, eol);
      if (cmd.rfind("SUB ", 0) == 0) {
        SubscriptionUpdate update = core().update(*this);
        update.subscribe(SubscriptionSpace::kChannel, cmd.substr(4));
        (void)push_reply("ok\n");  // under the index lock, before any message
      } else if (cmd.rfind("PUB ", 0) == 0) {
        const std::size_t sp = cmd.find(' ', 4);
        const std::size_t n = core().publish(cmd.substr(4, sp - 4), cmd.substr(sp + 1));
        mark_published();
        (void)push_reply(std::to_string(n) + "\n");
      } else {
        (void)push_reply("bye\n");
        return InputResult::kClose;
      }
    }
    return InputResult::kOk;
  }

 private:
  std::string line_;
};

ClientFactory line_factory() {
  return [](BrokerCore& core, std::string peer, Waker& waker) -> std::unique_ptr<Client> {
    return std::make_unique<LineClient>(core, std::move(peer), waker);
  };
}

ClientFactory resp_factory() {
  return [](BrokerCore& core, std::string peer, Waker& waker) -> std::unique_ptr<Client> {
    return std::make_unique<RespSession>(core, std::move(peer), waker);
  };
}

std::string read_until(int fd, std::string_view needle) {
  std::string buf;
  EXPECT_TRUE(test::read_until(fd, buf, needle, test::deadline_in(std::chrono::seconds(20)))) << buf;
  return buf;
}

TEST(ServerTest, EachListenerServesTheClientsItsFactoryMakesOnOneCore) {
  BrokerCore core{BrokerConfig{}};
  Server server(core, 2);
  const auto resp_port = server.listen(Listener{"127.0.0.1", 0, resp_factory(), "-ERR full\r\n"});
  const auto line_port = server.listen(Listener{"127.0.0.1", 0, line_factory(), "full\n"});
  ASSERT_TRUE(resp_port && line_port);
  ASSERT_TRUE(server.start());

  const int line = test::connect_loopback(*line_port);
  const int resp = test::connect_loopback(*resp_port);
  ASSERT_GE(line, 0);
  ASSERT_GE(resp, 0);
  ASSERT_TRUE(test::send_all(line, "SUB news\n"));
  EXPECT_EQ(read_until(line, "ok\n"), "ok\n");
  // A RESP publisher reaches the line client, through the core.
  ASSERT_TRUE(test::send_all(resp, "PUBLISH news hello\r\n"));
  EXPECT_EQ(read_until(resp, "\r\n"), ":1\r\n");
  EXPECT_EQ(read_until(line, "hello\r\n"), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
  // And the line client publishes to itself.
  ASSERT_TRUE(test::send_all(line, "PUB news again\n"));
  const std::string got = read_until(line, "again\r\n");
  EXPECT_NE(got.find("$5\r\nagain\r\n"), std::string::npos) << got;
  ASSERT_TRUE(test::send_all(line, "QUIT\n"));
  std::string rest;
  EXPECT_TRUE(test::read_to_eof(line, rest, test::deadline_in(std::chrono::seconds(20))));
  EXPECT_NE(rest.find("bye\n"), std::string::npos) << rest;
  ::close(line);
  ::close(resp);
  server.stop();
  server.wait();
}

TEST(ServerTest, AConnectionOverTheLimitGetsItsListenersRefusal) {
  BrokerConfig cfg;
  cfg.max_connections = 1;
  BrokerCore core{cfg};
  Server server(core, 1);
  const auto port = server.listen(Listener{"127.0.0.1", 0, line_factory(), "full\n"});
  ASSERT_TRUE(port);
  ASSERT_TRUE(server.start());
  const int first = test::connect_loopback(*port);
  ASSERT_TRUE(test::send_all(first, "SUB a\n"));
  EXPECT_EQ(read_until(first, "ok\n"), "ok\n");  // the first is served, so counted
  const int second = test::connect_loopback(*port);
  std::string refused;
  EXPECT_TRUE(test::read_to_eof(second, refused, test::deadline_in(std::chrono::seconds(20))));
  EXPECT_EQ(refused, "full\n");
  ::close(first);
  ::close(second);
}

TEST(ServerTest, ListenReportsBadAddressesAndBindFailures) {
  BrokerCore core{BrokerConfig{}};
  Server server(core, 1);
  const auto bad = server.listen(Listener{"not-an-ip", 0, line_factory(), ""});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, BrokerError::Code::kBadAddress);
  const auto a = server.listen(Listener{"127.0.0.1", 0, line_factory(), ""});
  ASSERT_TRUE(a);
  Server other(core, 1);
  const auto taken = other.listen(Listener{"127.0.0.1", *a, line_factory(), ""});
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, BrokerError::Code::kBind);
  EXPECT_NE(taken.error().sys_errno, 0);
}

}  // namespace
}  // namespace ringcast::broker
