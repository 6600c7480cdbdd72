// The shared RESP2 client: encoding byte by byte, the reply parser on every
// reply type and every incomplete prefix, and the client against a scripted
// loopback server.
#include "resp_client.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "fd_io.hpp"

namespace ringcast::test {
namespace {

using namespace std::chrono_literals;

TEST(RespClientTest, EncodesCommandsAsArraysOfBulkStrings) {
  EXPECT_EQ(resp_bulk(""), "$0\r\n\r\n");
  EXPECT_EQ(resp_bulk(std::string_view("a\0b", 3)), std::string("$3\r\na\0b\r\n", 9));
  EXPECT_EQ(resp_command({"PUBLISH", "news", "hi"}), "*3\r\n$7\r\nPUBLISH\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
  std::string batch = "x";
  append_resp_command(batch, {"PING"});
  EXPECT_EQ(batch, "x*1\r\n$4\r\nPING\r\n");
  EXPECT_EQ(resp_subscribe_reply("t", 2), "*3\r\n$9\r\nsubscribe\r\n$1\r\nt\r\n:2\r\n");
}

TEST(RespClientTest, MessageSizeAndPayloadOffsetMatchTheFrame) {
  for (const std::size_t size : {0u, 1u, 9u, 10u, 99u, 100u, 1024u, 65536u}) {
    const std::string payload(size, 'p');
    const std::string frame = resp_message("bench", payload);
    EXPECT_EQ(frame, "*3\r\n$7\r\nmessage\r\n$5\r\nbench\r\n$" + std::to_string(size) + "\r\n" + payload + "\r\n");
    EXPECT_EQ(resp_message_size("bench", size), frame.size()) << size;
    EXPECT_EQ(resp_message_payload_offset("bench", size), frame.size() - size - 2) << size;
  }
}

TEST(RespClientTest, ParsesEveryScalarType) {
  const std::string in = "+OK\r\n-ERR no\r\n:-42\r\n$5\r\nhe\r\no\r\n$-1\r\n";
  std::size_t at = 0;
  const auto next = [&] {
    RespReply r;
    const std::size_t used = parse_reply(in.data() + at, in.size() - at, r);
    EXPECT_GT(used, 0u);
    at += used;
    return r;
  };
  RespReply r = next();
  EXPECT_EQ(r.type, '+');
  EXPECT_EQ(r.str, "OK");
  r = next();
  EXPECT_EQ(r.type, '-');
  EXPECT_EQ(r.str, "ERR no");
  r = next();
  EXPECT_EQ(r.type, ':');
  EXPECT_EQ(r.num, -42);
  r = next();
  EXPECT_EQ(r.type, '$');
  EXPECT_EQ(r.str, "he\r\no");  // a bulk string's length, not its bytes, ends it
  r = next();
  EXPECT_EQ(r.type, '_');
  EXPECT_EQ(at, in.size());
}

TEST(RespClientTest, ParsesAMessageAndKeepsTheFirstFourElementsOfLongerArrays) {
  const std::string msg = resp_message("news", "hello");
  RespReply r;
  ASSERT_EQ(parse_reply(msg.data(), msg.size(), r), msg.size());
  EXPECT_TRUE(r.is_message());
  EXPECT_TRUE(r.is_message("news"));
  EXPECT_FALSE(r.is_message("other"));
  EXPECT_EQ(r.elems[2].str, "hello");

  const std::string six = "*6\r\n:1\r\n:2\r\n:3\r\n:4\r\n$1\r\n5\r\n+6\r\n";
  ASSERT_EQ(parse_reply(six.data(), six.size(), r), six.size());
  EXPECT_EQ(r.count, 6u);
  EXPECT_EQ(r.elems[3].num, 4);
  EXPECT_FALSE(r.is_message());
}

TEST(RespClientTest, EveryIncompletePrefixIsNotAReplyYet) {
  for (const std::string& whole : {resp_message("news", "hello"), std::string("+OK\r\n"), std::string(":7\r\n"),
                                   resp_bulk("abc"), std::string("$-1\r\n")}) {
    RespReply r;
    for (std::size_t n = 0; n < whole.size(); ++n) {
      EXPECT_EQ(parse_reply(whole.data(), n, r), 0u) << whole << " cut at " << n;
    }
    EXPECT_EQ(parse_reply(whole.data(), whole.size(), r), whole.size());
  }
}

// A loopback server that reads one command and answers it with `reply`, one
// byte per write, so the client reassembles across reads.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::string reply) : reply_(std::move(reply)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      (void)read_some(fd, request_, deadline_in(10s));
      for (const char c : reply_) send_all(fd, std::string_view(&c, 1));
      ::close(fd);
    });
  }
  ~ScriptedServer() {
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  // What the client sent (after the server's thread is done).
  std::string request() {
    if (thread_.joinable()) thread_.join();
    return request_;
  }

 private:
  std::string reply_;
  std::string request_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST(RespClientTest, SubscribesAndReadsMessagesSplitAcrossReads) {
  ScriptedServer server(resp_subscribe_reply("ticks") + resp_message("ticks", "one") + resp_message("ticks", "two"));
  RespClient c(server.port());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.subscribe("ticks"));
  for (const char* want : {"one", "two"}) {
    const auto r = c.next(deadline_in(10s));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->is_message("ticks"));
    EXPECT_EQ(r->elems[2].str, want);
  }
  EXPECT_FALSE(c.next(deadline_in(10s)));  // EOF
  EXPECT_EQ(server.request(), resp_command({"SUBSCRIBE", "ticks"}));
}

TEST(RespClientTest, CallReturnsTheReplyAndNulloptWhenThePeerCloses) {
  ScriptedServer server(":3\r\n");
  RespClient c(server.port());
  const auto r = c.call({"PUBLISH", "t", "x"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->type, ':');
  EXPECT_EQ(r->num, 3);
  EXPECT_FALSE(c.call({"PING"}, 2s));
}

TEST(RespClientTest, ForEachBufferedVisitsOnlyCompleteReplies) {
  ScriptedServer server("+a\r\n+b\r\n+c");
  RespClient c(server.port());
  ASSERT_TRUE(c.send({"PING"}));
  std::string seen;
  while (c.read_more(deadline_in(10s), 1 << 16)) {
    c.for_each_buffered([&](const RespReply& r) { seen.append(r.str); });
  }
  EXPECT_EQ(seen, "ab");
}

TEST(RespClientTest, ReleaseHandsOverTheSocketOnlyWithNothingUnparsed) {
  ScriptedServer server(resp_subscribe_reply("ticks"));
  RespClient c(server.port());
  ASSERT_TRUE(c.subscribe("ticks"));
  const int fd = c.release();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(c.ok());
  std::string rest;
  EXPECT_EQ(read_some(fd, rest, deadline_in(10s)), 0);  // the server closed: EOF, nothing lost
  ::close(fd);

  ScriptedServer chatty(resp_subscribe_reply("ticks") + "+extra\r\n");
  RespClient d(chatty.port());
  ASSERT_TRUE(d.send({"SUBSCRIBE", "ticks"}));
  while (d.read_more(deadline_in(10s), 1 << 16)) {
  }
  EXPECT_TRUE(d.next(deadline_in(10s)));  // the confirmation; "+extra" stays buffered
  EXPECT_EQ(d.release(), -1);
  EXPECT_TRUE(d.ok());
}

}  // namespace
}  // namespace ringcast::test
