// The broker executable against real clients: redis-cli (Debian redis-tools),
// hiredis (libhiredis-dev 0.14, RESP2 only) and raw sockets for RESP3 bytes.
#include <hiredis/hiredis.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "child_process.hpp"
#include "eventually.hpp"
#include "fd_io.hpp"
#include "process_support.hpp"
#include "ringcast/broker/token.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;
using test::ChildProcess;
using test::connect_loopback;
using test::deadline_in;
using test::eventually;
using test::ms_left;
using test::read_to_eof;
using test::read_until;
using test::send_all;
using testing::BrokerProcess;

constexpr const char* kRedisCli = "/usr/bin/redis-cli";

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

Context hiredis_connect(int port) {
  const timeval tv{5, 0};
  Context c(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (c && c->err == 0) redisSetTimeout(c.get(), tv);  // every read is bounded
  return c;
}

Reply command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
}

Reply next_reply(redisContext* c) {
  void* r = nullptr;
  if (redisGetReply(c, &r) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(r));
}

std::string str(const redisReply* r, std::size_t i) {
  const redisReply* e = r->element[i];
  return std::string(e->str, e->len);
}

// Polls PUBSUB NUMSUB until `channel` has `n` subscribers (bounded).
bool wait_for_subscribers(redisContext* c, const std::string& channel, long long n) {
  return eventually(
      [&] {
        Reply r = command(c, {"PUBSUB", "NUMSUB", channel});
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer == n;
      },
      10s, 5ms);
}

class BrokerIntegrationTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (broker_) {
      const auto status = broker_->stop();
      ASSERT_TRUE(status.has_value());
      EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "broker exit status " << *status << " (a sanitizer report makes it non-zero)";
    }
  }
  int start(std::vector<std::string> extra = {}) {
    broker_ = std::make_unique<BrokerProcess>(std::move(extra));
    return broker_->port();
  }
  std::unique_ptr<BrokerProcess> broker_;
};

TEST_F(BrokerIntegrationTest, RedisCliSubscriberReceivesRedisCliPublish) {
  const int port = start();
  ASSERT_GT(port, 0);
  ChildProcess sub = ChildProcess::spawn({kRedisCli, "-p", std::to_string(port), "subscribe", "news"});
  ASSERT_TRUE(sub.running());
  Context admin = hiredis_connect(port);
  ASSERT_TRUE(admin && admin->err == 0);
  ASSERT_TRUE(wait_for_subscribers(admin.get(), "news", 1));

  ChildProcess pub = ChildProcess::spawn({kRedisCli, "-p", std::to_string(port), "publish", "news", "hi"});
  const auto status = pub.wait_exit(deadline_in(10s));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_EQ(pub.stdout_text(), "1\n") << "redis-cli without a tty prints the bare integer";
  ASSERT_TRUE(sub.read_stdout_until("hi\n", deadline_in(10s))) << sub.stdout_text();
  EXPECT_NE(sub.stdout_text().find("subscribe\nnews\n1\nmessage\nnews\nhi\n"), std::string::npos) << sub.stdout_text();
  sub.stop(SIGTERM);
}

TEST_F(BrokerIntegrationTest, HiredisDrivesResp2PubSubProtocol) {
  const int port = start();
  Context sub = hiredis_connect(port);
  Context pub = hiredis_connect(port);
  ASSERT_TRUE(sub && sub->err == 0 && pub && pub->err == 0);

  Reply r = command(sub.get(), {"SUBSCRIBE", "a", "b"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
  EXPECT_EQ(str(r.get(), 0), "subscribe");
  EXPECT_EQ(str(r.get(), 1), "a");
  EXPECT_EQ(r->element[2]->integer, 1);
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(str(r.get(), 1), "b");
  EXPECT_EQ(r->element[2]->integer, 2);
  r = command(sub.get(), {"PSUBSCRIBE", "a*"});
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(r->element[2]->integer, 3);

  r = command(sub.get(), {"PING", "hello"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  EXPECT_EQ(str(r.get(), 0), "pong");
  EXPECT_EQ(str(r.get(), 1), "hello");

  r = command(sub.get(), {"GET", "x"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str), "ERR unknown command 'GET', with args beginning with: 'x' ");
  r = command(sub.get(), {"PUBLISH", "a", "x"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str),
            "ERR Can't execute 'publish': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET "
            "are allowed in this context");

  const std::string payload("bin\0ary\r\n", 9);
  r = command(pub.get(), {"PUBLISH", "a", payload});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 2) << "one exact and one pattern subscription";
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(str(r.get(), 0), "message");
  EXPECT_EQ(str(r.get(), 2), payload);
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->elements == 4);
  EXPECT_EQ(str(r.get(), 0), "pmessage");
  EXPECT_EQ(str(r.get(), 1), "a*");
  EXPECT_EQ(str(r.get(), 3), payload);

  r = command(sub.get(), {"UNSUBSCRIBE", "a"});
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(r->element[2]->integer, 2);
  r = command(pub.get(), {"PUBSUB", "NUMPAT"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 1);
}

// Polls PUBSUB SHARDNUMSUB until `channel` has `n` shard subscribers (bounded).
bool wait_for_shard_subscribers(redisContext* c, const std::string& channel, long long n) {
  return eventually(
      [&] {
        Reply r = command(c, {"PUBSUB", "SHARDNUMSUB", channel});
        return r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->integer == n;
      },
      10s, 5ms);
}

TEST_F(BrokerIntegrationTest, RedisCliShardSubscriberReceivesRedisCliSpublish) {
  const int port = start();
  ASSERT_GT(port, 0);
  ChildProcess sub = ChildProcess::spawn({kRedisCli, "-p", std::to_string(port), "ssubscribe", "news"});
  ASSERT_TRUE(sub.running());
  Context admin = hiredis_connect(port);
  ASSERT_TRUE(admin && admin->err == 0);
  ASSERT_TRUE(wait_for_shard_subscribers(admin.get(), "news", 1));
  Reply r = command(admin.get(), {"PUBLISH", "news", "not-for-shards"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 0);

  ChildProcess pub = ChildProcess::spawn({kRedisCli, "-p", std::to_string(port), "spublish", "news", "hi"});
  const auto status = pub.wait_exit(deadline_in(10s));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(WEXITSTATUS(*status), 0);
  EXPECT_EQ(pub.stdout_text(), "1\n");
  ASSERT_TRUE(sub.read_stdout_until("hi\n", deadline_in(10s))) << sub.stdout_text();
  EXPECT_EQ(sub.stdout_text(), "ssubscribe\nnews\n1\nsmessage\nnews\nhi\n")
      << "the plain PUBLISH must not have reached the shard subscriber";
  sub.stop(SIGTERM);
}

TEST_F(BrokerIntegrationTest, HiredisShardPubSubWithClientReplyOffPublisher) {
  const int port = start();
  Context sub = hiredis_connect(port);
  Context pub = hiredis_connect(port);
  ASSERT_TRUE(sub && sub->err == 0 && pub && pub->err == 0);
  Reply r = command(sub.get(), {"SSUBSCRIBE", "a", "b"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
  EXPECT_EQ(str(r.get(), 0), "ssubscribe");
  EXPECT_EQ(r->element[2]->integer, 1);
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(r->element[2]->integer, 2);

  // A fire-and-forget publisher: no replies until CLIENT REPLY ON, whose +OK is
  // the first thing it reads.
  ASSERT_EQ(redisAppendCommand(pub.get(), "CLIENT REPLY OFF"), REDIS_OK);
  ASSERT_EQ(redisAppendCommand(pub.get(), "SPUBLISH a %s", "one"), REDIS_OK);
  ASSERT_EQ(redisAppendCommand(pub.get(), "SPUBLISH b %s", "two"), REDIS_OK);
  ASSERT_EQ(redisAppendCommand(pub.get(), "CLIENT REPLY ON"), REDIS_OK);
  r = next_reply(pub.get());
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  EXPECT_EQ(std::string(r->str), "OK");
  r = command(pub.get(), {"SPUBLISH", "a", "three"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 1);

  for (const auto& [channel, payload] : {std::pair{"a", "one"}, {"b", "two"}, {"a", "three"}}) {
    r = next_reply(sub.get());
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    EXPECT_EQ(str(r.get(), 0), "smessage");
    EXPECT_EQ(str(r.get(), 1), channel);
    EXPECT_EQ(str(r.get(), 2), payload);
  }
  r = command(sub.get(), {"SUNSUBSCRIBE"});
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(str(r.get(), 0), "sunsubscribe");
  EXPECT_EQ(str(r.get(), 1), "a");
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->elements == 3);
  EXPECT_EQ(r->element[2]->integer, 0);
}

TEST_F(BrokerIntegrationTest, APipelinedFloodLargerThanOneReadArrivesWholeAndInOrder) {
  const int port = start();
  Context sub = hiredis_connect(port);
  Context pub = hiredis_connect(port);
  Context other = hiredis_connect(port);
  ASSERT_TRUE(sub && sub->err == 0 && pub && pub->err == 0 && other && other->err == 0);
  Reply r = command(sub.get(), {"SUBSCRIBE", "flood"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);

  // About 2.5 MiB of requests in one pipeline: many full 256 KiB reads, each
  // parsed as a batch, with the rest of the socket read after the writes.
  constexpr int kCount = 20000;
  const std::string pad(100, 'p');
  for (int i = 0; i < kCount; ++i) {
    const std::string payload = std::to_string(i) + ":" + pad;
    ASSERT_EQ(redisAppendCommand(pub.get(), "PUBLISH flood %b", payload.data(), payload.size()), REDIS_OK);
  }
  for (int i = 0; i < kCount; ++i) {
    r = next_reply(pub.get());
    ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER) << "reply " << i;
    ASSERT_EQ(r->integer, 1) << "reply " << i;
  }
  r = command(other.get(), {"PING"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  for (int i = 0; i < kCount; ++i) {
    r = next_reply(sub.get());
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3) << "message " << i;
    ASSERT_EQ(str(r.get(), 2), std::to_string(i) + ":" + pad) << "message " << i;
  }
}

// A subscriber that reads nothing while 40 MB are published on two channels,
// under --overflow-policy conflate: once it reads, it gets every message in
// order per channel up to the newest of each, and the loss notices and CLIENT
// LIST account for exactly what it did not get.
TEST_F(BrokerIntegrationTest, ConflatingSubscriberEndsOnTheNewestOfEachChannel) {
  const int port = start({"--overflow-policy", "conflate", "--hard-limit", "256kb", "--soft-limit", "0"});
  Context sub = hiredis_connect(port);
  Context pub = hiredis_connect(port);
  Context admin = hiredis_connect(port);
  ASSERT_TRUE(sub && sub->err == 0 && pub && pub->err == 0 && admin && admin->err == 0);
  // A fixed receive buffer (no autotuning, which may grow it to tcp_rmem's
  // 32 MB here): what the broker cannot queue then waits in its own send
  // buffer, at most tcp_wmem's 4 MB, so 10 MB of publishes must overflow.
  const int receive_buffer = 64 * 1024;
  ASSERT_EQ(::setsockopt(sub->fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer), 0);
  // Its reads wait up to 30 s, not 5: in one CI run under ASan (13.6 s for
  // a test that takes 1-2 s alone) it read 510 messages and then nothing
  // came for 5 s; the same binary passed 8 of 8 runs alone and 8 of 8 beside
  // two busy loops (two of them 8-10 s). The cause is not established; a
  // writer that never woke would still fail here.
  const timeval patient{30, 0};
  ASSERT_EQ(redisSetTimeout(sub.get(), patient), REDIS_OK);
  Reply r = command(sub.get(), {"CLIENT", "SETNAME", "slow"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  r = command(sub.get(), {"SUBSCRIBE", "a", "b"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
  r = next_reply(sub.get());
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);

  constexpr int kCount = 50000;
  constexpr int kChunk = 1000;  // replies stay far below the 256 KiB limit of the publisher too
  const std::string pad(200, 'p');
  for (int base = 0; base < kCount; base += kChunk) {
    for (int i = base; i < base + kChunk; ++i) {
      const std::string payload = std::to_string(i) + ":" + pad;
      ASSERT_EQ(redisAppendCommand(pub.get(), "PUBLISH %s %b", i % 2 == 0 ? "a" : "b", payload.data(), payload.size()),
                REDIS_OK);
    }
    for (int i = base; i < base + kChunk; ++i) {
      r = next_reply(pub.get());
      ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1) << "reply " << i;
    }
  }

  std::map<std::string, int> last{{"a", -1}, {"b", -1}};
  std::uint64_t delivered = 0, lost = 0, conflated = 0;
  while (delivered + lost < static_cast<std::uint64_t>(kCount)) {
    r = next_reply(sub.get());
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY && r->elements == 3)
        << delivered << " delivered, " << lost << " lost";
    const std::string channel = str(r.get(), 1);
    const std::string payload = str(r.get(), 2);
    if (channel == "__ringcast__:loss") {
      unsigned long long n = 0, total = 0, c = 0;
      char policy[32] = {};
      ASSERT_GE(std::sscanf(payload.c_str(), "lost=%llu total=%llu policy=%31s conflated=%llu", &n, &total, policy, &c),
                3)
          << payload;
      EXPECT_STREQ(policy, "conflate");
      EXPECT_EQ(total, lost + n);
      lost += n;
      conflated += c;
      continue;
    }
    const int seq = std::stoi(payload);
    EXPECT_GT(seq, last[channel]) << channel;
    EXPECT_EQ(seq % 2 == 0 ? "a" : "b", channel);
    last[channel] = seq;
    ++delivered;
  }
  EXPECT_EQ(delivered + lost, static_cast<std::uint64_t>(kCount));
  EXPECT_GT(conflated, 0u) << "10 MB cannot all wait in socket buffers";
  EXPECT_EQ(last["a"], kCount - 2);
  EXPECT_EQ(last["b"], kCount - 1);
  r = command(admin.get(), {"CLIENT", "LIST"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
  const std::string list(r->str, r->len);
  const auto line = list.find("name=slow ");
  ASSERT_NE(line, std::string::npos) << list;
  const std::string mine = list.substr(line, list.find('\n', line) - line);
  EXPECT_NE(mine.find(" conflated=" + std::to_string(conflated) + " "), std::string::npos) << mine;
  EXPECT_NE(mine.find(" dropped-hard=" + std::to_string(lost - conflated) + " "), std::string::npos) << mine;
}

TEST_F(BrokerIntegrationTest, Resp3ClientGetsPushesOverTheWire) {
  const int port = start();
  const int fd = connect_loopback(port);
  ASSERT_GE(fd, 0);
  std::string in;
  ASSERT_TRUE(send_all(fd, "HELLO 3\r\n"));
  ASSERT_TRUE(read_until(fd, in, "$7\r\nmodules\r\n*0\r\n", deadline_in(10s)));
  EXPECT_EQ(in.substr(0, 4), "%7\r\n");
  in.clear();
  ASSERT_TRUE(send_all(fd, "SUBSCRIBE news\r\nPING\r\n"));
  const std::string confirm = ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n+PONG\r\n";
  ASSERT_TRUE(read_until(fd, in, confirm, deadline_in(10s)));
  EXPECT_EQ(in, confirm);
  in.clear();
  Context pub = hiredis_connect(port);
  Reply r = command(pub.get(), {"PUBLISH", "news", "hi"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 1);
  const std::string push = ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
  ASSERT_TRUE(read_until(fd, in, push, deadline_in(10s)));
  EXPECT_EQ(in, push);
  ::close(fd);
}

TEST_F(BrokerIntegrationTest, MalformedRequestGetsAnErrorThenClose) {
  const int port = start();
  const int fd = connect_loopback(port);
  ASSERT_TRUE(send_all(fd, "PING\r\n*1\r\n$-5\r\nPING\r\n"));
  std::string in;
  ASSERT_TRUE(read_to_eof(fd, in, deadline_in(10s)));
  EXPECT_EQ(in, "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n");
  ::close(fd);
}

// The password file; removed once the broker has read it.
std::string write_password_file() {
  char path[] = "/tmp/ringcast-broker-pass-XXXXXX";
  const int pf = ::mkstemp(path);
  EXPECT_GE(pf, 0);
  EXPECT_EQ(::write(pf, "s3cret\n", 7), 7);
  ::close(pf);
  return path;
}

TEST_F(BrokerIntegrationTest, PasswordFileGatesCommands) {
  const std::string path = write_password_file();
  const int port = start({"--requirepass-file", path});  // the default 10 s auth timeout
  ::unlink(path.c_str());
  ASSERT_GT(port, 0);
  Context c = hiredis_connect(port);
  Reply r = command(c.get(), {"SUBSCRIBE", "a"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str), "NOAUTH Authentication required.");
  r = command(c.get(), {"PING"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  r = command(c.get(), {"AUTH", "s3cret"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  EXPECT_EQ(std::string(r->str), "OK");
  r = command(c.get(), {"SUBSCRIBE", "a"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY);
}

TEST_F(BrokerIntegrationTest, IdleUnauthenticatedClientsAreClosed) {
  const std::string path = write_password_file();
  const int port = start({"--requirepass-file", path, "--auth-timeout-ms", "1000"});
  ::unlink(path.c_str());
  ASSERT_GT(port, 0);
  // Authenticates with its first command, well inside the timeout.
  Context c = hiredis_connect(port);
  Reply r = command(c.get(), {"AUTH", "s3cret"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);

  const int idle = connect_loopback(port);
  std::string in;
  EXPECT_TRUE(read_to_eof(idle, in, deadline_in(20s))) << "closed after the auth timeout";
  ::close(idle);
  r = command(c.get(), {"PING"});  // the authenticated client is unaffected
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
}

TEST_F(BrokerIntegrationTest, RefusesConnectionsBeyondTheLimit) {
  const int port = start({"--max-connections", "2"});
  Context a = hiredis_connect(port);
  Context b = hiredis_connect(port);
  ASSERT_TRUE(command(a.get(), {"PING"}));
  ASSERT_TRUE(command(b.get(), {"PING"}));
  const int fd = connect_loopback(port);
  std::string in;
  EXPECT_TRUE(read_to_eof(fd, in, deadline_in(10s)));
  EXPECT_EQ(in, "-ERR max number of clients reached\r\n");
  ::close(fd);
}

// Out of descriptors, the broker neither spins on accept nor stops accepting:
// it waits before the next accept (INFO accept_backoffs), keeps serving the
// connections it has, and takes the clients waiting in the listen backlog once
// descriptors free up.
//
// The broker's soft limit is lowered to 96 once it runs (prlimit(2)), and
// descriptors free up by raising it again; clients leave after that.
//
// Not run in the ASan+UBSan build: at the descriptor limit UBSan's vptr check,
// on a miss in its type cache, validates the vtable with a pipe(), which fails,
// and it reports a valid object as having an "invalid vptr" (GCC 12's runtime
// in the first ~Client after a close at the limit, clang 14's in the reactor's
// first timer call while accepts back off; a suppression cannot help, since it
// needs the type the failed probe could not read). A false positive of the
// sanitizer runtime, not a broker fault: see docs/broker.md, "Out of
// descriptors". The release and TSan builds run it.
TEST_F(BrokerIntegrationTest, OutOfDescriptorsBacksOffAndAcceptsAgainWhenDescriptorsFreeUp) {
#ifdef RINGCAST_UBSAN_VPTR_CHECK
  GTEST_SKIP() << "UBSan's vptr check reports false positives at the descriptor limit (see the comment)";
#endif
  constexpr rlim_t kLimit = 96;  // the broker's own descriptors are a few dozen at most
  rlimit ours{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &ours), 0);
  constexpr rlim_t kRaised = 2 * kLimit + 64;  // room for every client below, whatever the broker's own use
  ASSERT_GE(ours.rlim_max, kRaised);
  // The tool fits its limit to --max-connections at start (see the next
  // tests), so the limit is lowered on the running broker instead.
  broker_ = std::make_unique<BrokerProcess>();
  const int port = broker_->port();
  ASSERT_GT(port, 0);
  const rlimit low{kLimit, ours.rlim_max};
  ASSERT_EQ(::prlimit(broker_->pid(), RLIMIT_NOFILE, &low, nullptr), 0) << std::strerror(errno);
  Context admin = hiredis_connect(port);
  ASSERT_TRUE(command(admin.get(), {"PING"}));
  auto backoffs = [&]() -> long long {
    Reply r = command(admin.get(), {"INFO", "stats"});
    if (!r || r->type != REDIS_REPLY_STRING) return -1;
    const std::string text(r->str, r->len);
    const auto at = text.find("accept_backoffs:");
    return at == std::string::npos ? -1 : std::stoll(text.substr(at + 16));
  };
  EXPECT_EQ(backoffs(), 0);
  constexpr int kClients = static_cast<int>(kLimit) + 40;
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    const int fd = connect_loopback(port);  // the kernel completes it; the broker may not accept it
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  EXPECT_TRUE(eventually([&] { return backoffs() > 0; }, 20s, 10ms));
  ASSERT_TRUE(command(admin.get(), {"PING"}));  // the connections it has are still served
  const int last = fds.back();                  // it waits in the backlog
  ASSERT_TRUE(send_all(last, "*1\r\n$4\r\nPING\r\n"));

  const rlimit raised{kRaised, ours.rlim_max};
  ASSERT_EQ(::prlimit(broker_->pid(), RLIMIT_NOFILE, &raised, nullptr), 0) << std::strerror(errno);
  std::string in;
  EXPECT_TRUE(read_until(last, in, "\r\n", deadline_in(20s)));
  EXPECT_EQ(in, "+PONG\r\n");
  ASSERT_TRUE(command(admin.get(), {"PING"}));
  for (const int fd : fds) ::close(fd);  // the clients leave; TearDown checks the broker exits 0
}

// The soft and hard open-file limits of a running process, from /proc.
std::pair<std::string, std::string> open_file_limits(pid_t pid) {
  FILE* f = std::fopen(fmt::format("/proc/{}/limits", pid).c_str(), "r");
  if (f == nullptr) return {};
  char line[256];
  std::pair<std::string, std::string> soft_hard;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char soft[32] = {};
    char hard[32] = {};
    if (std::sscanf(line, "Max open files %31s %31s", soft, hard) == 2) soft_hard = {soft, hard};
  }
  std::fclose(f);
  return soft_hard;
}

// Like redis-server, the tool raises a low soft open-file limit to fit
// --max-connections plus 64 reserved descriptors, so that it does not stop
// accepting at ~1000 clients under a shell's default of 1024.
TEST_F(BrokerIntegrationTest, StartupRaisesALowSoftOpenFileLimitToFitMaxConnections) {
  broker_ = std::make_unique<BrokerProcess>(std::vector<std::string>{"--max-connections", "1000"},
                                            std::vector<std::string>{"/usr/bin/prlimit", "--nofile=256:4096"});
  ASSERT_GT(broker_->port(), 0);
  EXPECT_EQ(open_file_limits(broker_->pid()), std::make_pair(std::string("1064"), std::string("4096")));
}

// When the hard limit is too low, the tool serves fewer clients and says so,
// rather than failing accepts once the descriptors run out.
TEST_F(BrokerIntegrationTest, StartupWithTooLowAHardLimitLowersMaxConnectionsAndSaysWhy) {
  test::SpawnOptions options;
  options.err = test::Stream::kPipe;
  ChildProcess broker = ChildProcess::spawn(
      {"/usr/bin/prlimit", "--nofile=256:256", BROKER_EXE, "--port", "0", "--max-connections", "1000"}, options);
  const auto warning = broker.read_stderr_line_with("open-file limit", deadline_in(20s));
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("too low for --max-connections 1000"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("serving at most 192 clients"), std::string::npos) << *warning;
  ASSERT_TRUE(broker.read_stdout_until("\n", deadline_in(20s)));
  const auto colon = broker.stdout_text().rfind(':');
  ASSERT_NE(colon, std::string::npos);
  const int port = std::stoi(broker.stdout_text().substr(colon + 1));
  // Past 192 clients the broker refuses like any server at --max-connections.
  std::vector<int> fds;
  for (int i = 0; i < 192; ++i) {
    const int fd = connect_loopback(port);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  const int over = connect_loopback(port);
  ASSERT_GE(over, 0);
  std::string in;
  EXPECT_TRUE(read_until(over, in, "\r\n", deadline_in(20s)));
  EXPECT_EQ(in, "-ERR max number of clients reached\r\n");
  ::close(over);
  for (const int fd : fds) ::close(fd);
  EXPECT_EQ(test::exit_code(broker.stop(SIGTERM)), 0);
}

// A reader that stops reading, under each overflow policy: the broker's memory
// for it stays under the hard limit and the other subscriber gets everything.
class SlowReaderTest : public BrokerIntegrationTest, public ::testing::WithParamInterface<std::string> {};

std::string client_line(redisContext* c, std::string_view name) {
  Reply r = command(c, {"CLIENT", "LIST"});
  if (!r || r->type != REDIS_REPLY_STRING) return {};
  const std::string list(r->str, r->len);
  const auto at = list.find(std::string("name=") + std::string(name) + " ");
  if (at == std::string::npos) return {};
  const auto begin = list.rfind('\n', at);
  const auto end = list.find('\n', at);
  return list.substr(begin == std::string::npos ? 0 : begin + 1, end - (begin == std::string::npos ? 0 : begin + 1));
}

long long field(const std::string& line, std::string_view key) {
  const auto at = line.find(std::string(" ") + std::string(key) + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(line.substr(at + key.size() + 2));
}

TEST_P(SlowReaderTest, SlowReaderStaysBoundedAndOthersAreFed) {
  constexpr std::size_t kHard = 512 * 1024;
  const std::string policy = GetParam();
  const int port = start({"--overflow-policy", policy, "--hard-limit", "512kb", "--soft-limit", "0"});
  ASSERT_GT(port, 0);

  // The slow reader: a small receive buffer, subscribes, then never reads.
  const int slow = connect_loopback(port, 4096);
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(send_all(slow, "CLIENT SETNAME slow\r\nSUBSCRIBE feed\r\n"));
  Context fast = hiredis_connect(port);
  Context pub = hiredis_connect(port);
  ASSERT_TRUE(command(fast.get(), {"SUBSCRIBE", "feed"}));
  ASSERT_TRUE(wait_for_subscribers(pub.get(), "feed", 2));

  // 4000 x 4 KiB = 16 MB, far beyond the hard limit plus any kernel buffering.
  // Batches of 50 are paced by the fast reader, so its own queue never nears
  // the limit: whatever it loses would be the broker's fault.
  constexpr int kBatches = 80;
  constexpr int kBatch = 50;
  int next_expected = 0;
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kBatch; ++i) {
      std::string payload = std::to_string(b * kBatch + i);
      payload.resize(4096, '.');
      const char* argv[] = {"PUBLISH", "feed", payload.data()};
      const size_t lens[] = {7, 4, payload.size()};
      ASSERT_EQ(redisAppendCommandArgv(pub.get(), 3, argv, lens), REDIS_OK);
    }
    for (int i = 0; i < kBatch; ++i) {
      Reply r = next_reply(pub.get());
      ASSERT_TRUE(r && r->type == REDIS_REPLY_INTEGER);
    }
    for (int i = 0; i < kBatch; ++i) {
      Reply m = next_reply(fast.get());
      ASSERT_TRUE(m && m->type == REDIS_REPLY_ARRAY && m->elements == 3) << "batch " << b;
      ASSERT_EQ(std::stoi(str(m.get(), 2)), next_expected++) << "the fast reader lost or reordered";
    }
  }

  Context admin = hiredis_connect(port);
  const std::string line = client_line(admin.get(), "slow");
  if (policy == "disconnect") {
    // The verdict is immediate; the close runs on the slow reader's I/O thread,
    // so poll (bounded) for it to show.
    std::string stats;
    const auto d = deadline_in(10s);
    while (ms_left(d) > 0) {
      Reply info = command(admin.get(), {"INFO", "stats"});
      ASSERT_TRUE(info && info->type == REDIS_REPLY_STRING);
      stats.assign(info->str, info->len);
      if (stats.find("slow_client_disconnects:1") != std::string::npos) break;
      std::this_thread::sleep_for(5ms);  // bounded poll of observable state
    }
    EXPECT_NE(stats.find("slow_client_disconnects:1"), std::string::npos) << stats;
    EXPECT_EQ(client_line(admin.get(), "slow"), "") << "the slow reader was cut off";
    std::string in;
    EXPECT_TRUE(read_to_eof(slow, in, deadline_in(20s))) << "and sees its socket close";
  } else {
    ASSERT_NE(line, "") << "drop policies keep the reader connected";
    const long long omem = field(line, "omem");
    EXPECT_GE(omem, 0) << "CLIENT LIST shows omem: " << line;
    EXPECT_LE(omem, static_cast<long long>(kHard));
    EXPECT_GT(field(line, "dropped-hard"), 0);
    // Once it reads again it learns how much it lost, in-band.
    std::string in;
    EXPECT_TRUE(read_until(slow, in, "__ringcast__:loss", deadline_in(20s)));
    EXPECT_TRUE(read_until(slow, in, " policy=" + policy + "\r\n", deadline_in(20s)));
  }
  ::close(slow);
}

INSTANTIATE_TEST_SUITE_P(Policies, SlowReaderTest, ::testing::Values("drop-oldest", "drop-newest", "disconnect"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           n.erase(std::remove(n.begin(), n.end(), '-'), n.end());
                           return n;
                         });

// The soft limit in a running broker, not only on the queue: a reader that
// stops reading holds its queue over --soft-limit; the policy (drop-newest)
// fires only once that has lasted --soft-seconds, the hard limit never fires,
// and when the reader reads again one in-band notice accounts for exactly
// what the soft limit dropped.
TEST_F(BrokerIntegrationTest, SoftLimitFiresAfterItsSecondsAndTheLossNoticeCountsItsDrops) {
  constexpr long long kSoft = 64 * 1024;
  const int port = start({"--overflow-policy", "drop-newest", "--hard-limit", "16mb", "--soft-limit", "64kb",
                          "--soft-seconds", "1", "--pace-bytes", "0"});
  ASSERT_GT(port, 0);
  const int slow = connect_loopback(port, 4096);
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(send_all(slow, "CLIENT SETNAME slow\r\nSUBSCRIBE feed\r\n"));
  Context pub = hiredis_connect(port);
  Context admin = hiredis_connect(port);
  ASSERT_TRUE(pub && pub->err == 0 && admin && admin->err == 0);
  ASSERT_TRUE(wait_for_subscribers(pub.get(), "feed", 1));
  const auto publish = [&](const std::string& payload) {
    Reply r = command(pub.get(), {"PUBLISH", "feed", payload});
    return r && r->type == REDIS_REPLY_INTEGER;
  };

  // The queue is empty now, so it goes over the soft limit after this instant.
  const auto before_over = std::chrono::steady_clock::now();
  // Fill the queue past the soft limit (the kernel's buffers first).
  const std::string big(4096, 'b');
  std::string line;
  const auto fill = deadline_in(20s);
  while (field(line = client_line(admin.get(), "slow"), "omem") <= kSoft && ms_left(fill) > 0) {
    for (int i = 0; i < 16; ++i) ASSERT_TRUE(publish(big));
  }
  ASSERT_GT(field(line, "omem"), kSoft) << line;
  // Keep pushing small messages (each push checks the soft timer) until the
  // policy fires. The pushes stay far below the hard limit.
  const auto fire = deadline_in(20s);
  while (field(line = client_line(admin.get(), "slow"), "dropped-soft") <= 0 && ms_left(fire) > 0) {
    ASSERT_TRUE(publish("tick"));
  }
  const auto fired_seen = std::chrono::steady_clock::now();
  ASSERT_GT(field(line, "dropped-soft"), 0) << line;
  // A lower bound that only a broken timer can violate: the queue went over
  // after before_over, and the policy may act one second after that at the earliest.
  EXPECT_GE(fired_seen - before_over, 1s);
  EXPECT_EQ(field(line, "dropped-hard"), 0) << line;
  EXPECT_LE(field(line, "omem"), 16LL << 20) << line;
  // Every publish has been answered, so the count is final.
  const long long dropped = field(line = client_line(admin.get(), "slow"), "dropped-soft");

  // Once it reads again it learns, in-band, how much it lost.
  std::string in;
  ASSERT_TRUE(read_until(slow, in, "__ringcast__:loss", deadline_in(20s)));
  ASSERT_TRUE(read_until(slow, in, " policy=drop-newest\r\n", deadline_in(20s)))
      << in.substr(in.find("__ringcast__:loss"));
  const std::string notice = in.substr(in.find("__ringcast__:loss"));
  unsigned long long lost = 0;
  ASSERT_EQ(std::sscanf(notice.c_str() + notice.find("lost="), "lost=%llu", &lost), 1) << notice;
  EXPECT_EQ(static_cast<long long>(lost), dropped) << notice;
  ::close(slow);
}

// Tokens (docs/security.md "Tokens"): a 48-byte secret in a file, minted by
// `ringcast token` or by the library, checked by real clients.
class BrokerTokenTest : public BrokerIntegrationTest {
 protected:
  static constexpr const char* kSecret = "integration-test-secret-0123456789-abcdefghijkl";
  void SetUp() override {
    char path[] = "/tmp/ringcast-token-secret-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    const std::string line = std::string(kSecret) + "\n";
    ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    ::close(fd);
    secret_file_ = path;
  }
  void TearDown() override {
    BrokerIntegrationTest::TearDown();
    ::unlink(secret_file_.c_str());
  }
  // `ringcast token ...` with the secret from the environment; its stdout line.
  std::string ringcast_token(std::vector<std::string> args) {
    args.insert(args.begin(), {RINGCAST_EXE, "token"});
    ChildProcess p = ChildProcess::spawn(args, {.env_set = {std::string("RINGCAST_TOKEN_SECRET=") + kSecret}});
    const auto status = p.wait_exit(deadline_in(10s));
    EXPECT_EQ(test::exit_code(status), 0);
    std::string out = p.stdout_text();
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // redis-cli as `user` with `token`, running `args`; its stdout.
  std::string redis_cli(int port, const std::string& user, const std::string& token, std::vector<std::string> args) {
    std::vector<std::string> argv{kRedisCli, "-p",  std::to_string(port), "--user", user,
                                  "--pass",  token, "--no-auth-warning"};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess p = ChildProcess::spawn(argv);
    EXPECT_EQ(test::exit_code(p.wait_exit(deadline_in(10s))), 0);
    return p.stdout_text();
  }
  std::string secret_file_;
};

TEST_F(BrokerTokenTest, RingcastTokenMintsWhatTheLibraryVerifies) {
  const auto before = std::chrono::system_clock::now();
  const std::string tok =
      ringcast_token({"--sub", "svc", "--subscribe", "md.*", "fx.?", "--no-publish", "--ttl", "2h"});
  const auto grant = verify_token(tok, kSecret);
  ASSERT_TRUE(grant) << describe(grant.error()) << ": " << tok;
  EXPECT_EQ(grant->subject, "svc");
  EXPECT_EQ(grant->subscribe, (std::vector<std::string>{"md.*", "fx.?"}));
  EXPECT_EQ(grant->publish, std::vector<std::string>{});
  EXPECT_GE(grant->expiry, std::chrono::floor<std::chrono::seconds>(before + 2h));
  EXPECT_LE(grant->expiry, std::chrono::system_clock::now() + 2h);
  const std::string open = ringcast_token({"--sub", "svc"});
  const auto unrestricted = verify_token(open, kSecret);
  ASSERT_TRUE(unrestricted);
  EXPECT_FALSE(unrestricted->subscribe) << "no --subscribe: the claim is absent";
  EXPECT_FALSE(unrestricted->publish);
}

TEST_F(BrokerTokenTest, TokenFromRingcastTokenLetsRedisCliSubscribeAndPublish) {
  const int port = start({"--token-secret-file", secret_file_});
  ASSERT_GT(port, 0);
  const std::string reader = ringcast_token({"--sub", "reader", "--subscribe", "md.*", "--no-publish", "--ttl", "1h"});
  const std::string writer = ringcast_token({"--sub", "writer", "--no-subscribe", "--publish", "md.*"});
  ChildProcess sub = ChildProcess::spawn({kRedisCli, "-p", std::to_string(port), "--user", "reader", "--pass", reader,
                                          "--no-auth-warning", "subscribe", "md.eurusd"});
  ASSERT_TRUE(sub.read_stdout_until("subscribe\nmd.eurusd\n1\n", deadline_in(10s))) << sub.stdout_text();
  EXPECT_EQ(redis_cli(port, "writer", writer, {"publish", "md.eurusd", "1.0842"}), "1\n");
  ASSERT_TRUE(sub.read_stdout_until("1.0842\n", deadline_in(10s))) << sub.stdout_text();
  sub.stop(SIGTERM);
}

TEST_F(BrokerTokenTest, RedisCliGetsNopermOutsideItsGrant) {
  const int port = start({"--token-secret-file", secret_file_});
  ASSERT_GT(port, 0);
  const std::string tok = ringcast_token({"--sub", "alice", "--subscribe", "md.*", "--publish", "x.*"});
  EXPECT_EQ(redis_cli(port, "alice", tok, {"publish", "md.a", "v"}),
            "NOPERM User alice has no permissions to access the 'md.a' channel\n\n");
  EXPECT_EQ(redis_cli(port, "alice", tok, {"publish", "x.a", "v"}), "0\n");
  EXPECT_EQ(redis_cli(port, "alice", tok, {"subscribe", "md.a", "x.a"}),
            "NOPERM User alice has no permissions to access the 'x.a' channel\n\n");
  EXPECT_EQ(redis_cli(port, "bob", tok, {"publish", "x.a", "v"}), "NOAUTH Authentication required.\n\n")
      << "bob is not the token's sub: AUTH fails (redis-cli says so on stderr) and nothing runs";
}

TEST_F(BrokerTokenTest, HiredisSeesRefusalsAndTheirCountsInInfo) {
  // Four refusals on one connection, which by default closes after three.
  const int port = start({"--token-secret-file", secret_file_, "--max-auth-failures", "5"});
  ASSERT_GT(port, 0);
  Context c = hiredis_connect(port);
  ASSERT_TRUE(c && c->err == 0);
  Reply r = command(c.get(), {"SUBSCRIBE", "a"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str), "NOAUTH Authentication required.");

  const auto now = std::chrono::system_clock::now();
  const Grant grant{"alice", now + 1h, std::vector<std::string>{"md.*"}, std::vector<std::string>{}};
  const std::string good = mint_token(grant, kSecret).value();
  const std::string expired = mint_token(Grant{"alice", now - 1h, std::nullopt, std::nullopt}, kSecret).value();
  const std::string forged = mint_token(grant, std::string(kSecret) + "-other").value();
  const std::string alg_none =
      "eyJhbGciOiJub25lIn0." + good.substr(good.find('.') + 1, good.rfind('.') - good.find('.'));
  for (const auto& [tok, want] : std::vector<std::pair<std::string, std::string>>{
           {expired, "WRONGPASS invalid token: the token has expired"},
           {forged, "WRONGPASS invalid token: the token's signature is invalid"},
           {alg_none, "WRONGPASS invalid token: unsigned tokens (alg none) are not accepted"},
           {"garbage",
            "WRONGPASS invalid token: the token is malformed (expected three base64url parts holding JSON objects)"}}) {
    r = command(c.get(), {"AUTH", "alice", tok});
    ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
    EXPECT_EQ(std::string(r->str), want);
  }
  r = command(c.get(), {"AUTH", "alice", good});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  r = command(c.get(), {"PUBLISH", "md.a", "v"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR) << "the publish claim is an empty list";
  r = command(c.get(), {"PSUBSCRIBE", "*"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ERROR);
  EXPECT_EQ(std::string(r->str), "NOPERM User alice has no permissions to access the '*' channel");

  Context admin = hiredis_connect(port);
  r = command(admin.get(), {"AUTH", "alice", good});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STATUS);
  r = command(admin.get(), {"INFO", "auth"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
  const std::string info(r->str, r->len);
  for (const char* field : {"token_auth_accepted:2\r\n", "token_auth_refused:4\r\n", "token_refused_expired:1\r\n",
                            "token_refused_bad_signature:1\r\n", "token_refused_alg_none:1\r\n",
                            "token_refused_malformed:1\r\n", "permission_denied:2\r\n"}) {
    EXPECT_NE(info.find(field), std::string::npos) << field << " in\n" << info;
  }
  r = command(c.get(), {"SUBSCRIBE", "md.a"});
  ASSERT_TRUE(r && r->type == REDIS_REPLY_ARRAY) << "the grant still holds after refusals";
}

TEST_F(BrokerTokenTest, ShortSecretFromTheEnvironmentIsRefusedAtStartup) {
  ChildProcess p = ChildProcess::spawn(
      {BROKER_EXE, "--port", "0"},
      {.out = test::Stream::kPipe, .err = test::Stream::kPipe, .env_set = {"RINGCAST_TOKEN_SECRET=too-short"}});
  EXPECT_EQ(test::exit_code(p.wait_exit(deadline_in(10s))), 2);
  EXPECT_NE(p.stderr_text().find("is 9 bytes; at least 32 are needed"), std::string::npos) << p.stderr_text();
}

}  // namespace
}  // namespace ringcast::broker
