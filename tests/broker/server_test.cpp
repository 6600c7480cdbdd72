// The Server's listener hook (src/broker/server/server.hpp): a listener serves the
// Client its factory makes, whatever protocol that client speaks, next to the
// RESP listener, on one core; a connection over max_connections gets the
// listener's own refusal bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker/core/broker_core.hpp"
#include "broker/core/client.hpp"
#include "broker/resp/session.hpp"
#include "broker/server/server.hpp"
#include "fd_io.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::broker {
namespace {

// A toy protocol: each input line "SUB <channel>" or "PUB <channel> <payload>"
// becomes a core call; deliveries arrive in the client's wire format (RESP2
// here, to read them easily).
class LineClient : public Client {
 public:
  LineClient(BrokerCore& core, std::string peer, Waker& waker)
      : Client(core, std::move(peer), WireFormat::kResp2, Deliveries::kPerSubscription, waker, /*authenticated=*/true) {
  }

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
        const std::size_t n = core().publish(Message{cmd.substr(4, sp - 4), cmd.substr(sp + 1)}).receivers;
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

// Reads to the end of the stream: true only for an orderly EOF, not a reset.
bool clean_eof(int fd, std::string& out) {
  const auto d = test::deadline_in(std::chrono::seconds(20));
  for (;;) {
    const ssize_t n = test::read_some(fd, out, d);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

// Polls (bounded) until the server has closed every connection.
bool all_closed_within_20s(const BrokerCore& core) {
  const auto d = test::deadline_in(std::chrono::seconds(20));
  while (!core.connection_stats().empty() && test::ms_left(d) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return core.connection_stats().empty();
}

// The lingering close (docs/broker.md, "Closing"): the last reply arrives
// whole, then an orderly end of stream, though the client sent more than the
// server reads at once after its last command; the server discards that input
// and closes when the client is done.
TEST(ServerTest, TheLastReplySurvivesUnreadInputAndTheCloseWaitsForTheClientsEof) {
  BrokerCore core{BrokerConfig{}};
  Server server(core, 1);
  const auto port = server.listen(Listener{"127.0.0.1", 0, line_factory(), "full\n"});
  ASSERT_TRUE(port);
  ASSERT_TRUE(server.start());
  const int fd = test::connect_loopback(*port);
  ASSERT_GE(fd, 0);
  std::thread sender([fd] { test::send_all(fd, "QUIT\n" + std::string(1u << 20, 'j')); });
  std::string got;
  EXPECT_TRUE(clean_eof(fd, got)) << std::strerror(errno);
  EXPECT_EQ(got, "bye\n");
  sender.join();
  ::shutdown(fd, SHUT_WR);  // our EOF ends the linger
  EXPECT_TRUE(all_closed_within_20s(core));
  ::close(fd);
}

// A client that never closes does not keep a lingering connection: it ends
// after the linger time.
TEST(ServerTest, ALingeringConnectionEndsWithoutTheClientsEof) {
  BrokerCore core{BrokerConfig{}};
  Server server(core, 1);
  const auto port = server.listen(Listener{"127.0.0.1", 0, line_factory(), "full\n"});
  ASSERT_TRUE(port);
  ASSERT_TRUE(server.start());
  const int fd = test::connect_loopback(*port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(test::send_all(fd, "QUIT\n"));
  std::string got;
  EXPECT_TRUE(clean_eof(fd, got));
  EXPECT_EQ(got, "bye\n");
  EXPECT_TRUE(all_closed_within_20s(core));
  ::close(fd);
}

// A fan-out pass yields to the thread's other work (io_worker.hpp, kDrainSlice):
// input that reaches a newcomer's socket in the middle of a pass over many
// subscribers is handled before the pass ends, not after all of it. The
// subscribers' clients count their writer turns (Client::next_timer runs at
// the start of each flush) and, at the first turn of the pass, write the
// newcomer's SUB to its socket: the order is fixed by construction, not by
// timing. That turn also publishes to a watcher on the same thread, so a
// connection is marked ready in the middle of a pass: it must get its turn
// too (the drain that ends the pass must not forget the ready list).
struct PassProbe {
  std::atomic<bool> armed{false};
  std::atomic<int> turns{0};            // subscribers' flushes since armed
  std::atomic<int> turns_at_input{-1};  // when the newcomer's input was handled
  int newcomer_fd = -1;                 // the test's end of the newcomer's socket
  BrokerCore* core = nullptr;
};

class ProbedClient final : public LineClient {
 public:
  enum class Role : std::uint8_t { kPublisher, kNewcomer, kWatcher, kSubscriber };
  ProbedClient(BrokerCore& core, std::string peer, Waker& waker, PassProbe& probe, Role role)
      : LineClient(core, std::move(peer), waker), probe_(probe), role_(role) {}

  InputResult on_input(std::string_view bytes) override {
    if (role_ == Role::kNewcomer && probe_.armed.load()) probe_.turns_at_input.store(probe_.turns.load());
    return LineClient::on_input(bytes);
  }
  [[nodiscard]] std::optional<std::chrono::nanoseconds> next_timer() const override {
    if (role_ == Role::kSubscriber && probe_.armed.load() && probe_.turns.fetch_add(1) == 0) {
      EXPECT_TRUE(test::send_all(probe_.newcomer_fd, "SUB late\n"));
      EXPECT_EQ(probe_.core->publish(Message{"aside", "meanwhile"}).receivers, 1u);
    }
    return std::nullopt;
  }

 private:
  PassProbe& probe_;
  Role role_;
};

TEST(ServerTest, ANewcomerIsServedBeforeAFanOutPassToManySubscribersEndsAndNoTurnIsLost) {
  constexpr int kSubscribers = 300;  // well over two slices of kDrainSlice (64)
  PassProbe probe;
  std::atomic<int> made{0};
  BrokerCore core{BrokerConfig{}};
  Server server(core, 1);  // one thread: the newcomer and the pass share it
  const auto port =
      server.listen(Listener{"127.0.0.1", 0,
                             [&](BrokerCore& c, std::string peer, Waker& waker) -> std::unique_ptr<Client> {
                               const int i = made.fetch_add(1);  // accepted in the order the test connects
                               const auto role = i == 0   ? ProbedClient::Role::kPublisher
                                                 : i == 1 ? ProbedClient::Role::kNewcomer
                                                 : i == 2 ? ProbedClient::Role::kWatcher
                                                          : ProbedClient::Role::kSubscriber;
                               return std::make_unique<ProbedClient>(c, std::move(peer), waker, probe, role);
                             },
                             "full\n"});
  ASSERT_TRUE(port);
  ASSERT_TRUE(server.start());
  auto connect_served = [&](std::string_view first) {
    const int fd = test::connect_loopback(*port);
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(test::send_all(fd, first));
    EXPECT_EQ(read_until(fd, "ok\n"), "ok\n");  // accepted and started before the next connects
    return fd;
  };
  const int publisher = connect_served("SUB p\n");
  const int newcomer = connect_served("SUB n\n");
  const int watcher = connect_served("SUB aside\n");
  probe.newcomer_fd = newcomer;
  probe.core = &core;
  std::vector<int> subscribers;
  for (int i = 0; i < kSubscribers; ++i) subscribers.push_back(connect_served("SUB news\n"));

  // A read handler's own flush leaves a redundant ready entry behind
  // (connection.hpp, W 6), drained by a handler queued before the publisher's
  // next input: one more round trip, and no subscriber turn is left but the
  // pass's.
  EXPECT_TRUE(test::send_all(publisher, "SUB q\n"));
  EXPECT_EQ(read_until(publisher, "ok\n"), "ok\n");
  probe.armed.store(true);
  ASSERT_TRUE(test::send_all(publisher, "PUB news hello\n"));
  EXPECT_EQ(read_until(publisher, "\n"), std::to_string(kSubscribers) + "\n");
  for (const int fd : subscribers) {
    EXPECT_EQ(read_until(fd, "hello\r\n"), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
  }
  EXPECT_EQ(read_until(newcomer, "ok\n"), "ok\n");
  EXPECT_EQ(read_until(watcher, "meanwhile\r\n"), "*3\r\n$7\r\nmessage\r\n$5\r\naside\r\n$9\r\nmeanwhile\r\n");
  EXPECT_EQ(probe.turns.load(), kSubscribers);  // one turn each: the pass
  const int at = probe.turns_at_input.load();
  EXPECT_GE(at, 1);
  EXPECT_LT(at, kSubscribers) << "the newcomer waited for the whole pass";
  for (const int fd : subscribers) ::close(fd);
  ::close(publisher);
  ::close(newcomer);
  ::close(watcher);
  server.stop();
  server.wait();
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
