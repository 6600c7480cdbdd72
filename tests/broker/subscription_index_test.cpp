#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "broker/core/subscription_index.hpp"
#include "broker/guarantees/ack_tracker.hpp"
#include "broker/ws/json_delivery.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

using testing::FakeSubscriber;

class SubscriptionIndexTest : public ::testing::Test {
 protected:
  FakeSubscriber& make(WireFormat resp = WireFormat::kResp2) {
    subs_.push_back(std::make_unique<FakeSubscriber>(resp));
    return *subs_.back();
  }
  void sub(FakeSubscriber& s, std::string_view ch) {
    auto lock = index_.lock_for_update();
    index_.add_channel(s, ch);
  }
  void psub(FakeSubscriber& s, std::string_view pat) {
    auto lock = index_.lock_for_update();
    index_.add_pattern(s, pat);
  }
  // Publishes `msgs` in one call; returns each message's PUBLISH reply.
  std::vector<std::size_t> publish_all(const std::vector<Message>& msgs, bool dedupe = false) {
    std::vector<std::size_t> receivers(msgs.size());
    index_.publish(msgs, dedupe, receivers);
    return receivers;
  }
  // One message; returns its PUBLISH reply.
  std::size_t publish(std::string_view ch, std::string_view payload, bool dedupe = false) {
    return publish_all({Message{ch, payload}}, dedupe).front();
  }
  void TearDown() override {
    // Index invariant 3: subscribers leave the index before they die.
    for (auto& s : subs_) {
      auto lock = index_.lock_for_update();
      index_.remove_all(*s);
    }
  }

  SubscriptionIndex index_;
  std::vector<std::unique_ptr<FakeSubscriber>> subs_;
};

TEST_F(SubscriptionIndexTest, ExactSubscriberReceivesRedisMessageFrame) {
  FakeSubscriber& a = make();
  sub(a, "news");
  EXPECT_EQ(publish("news", "hi"), 1u);
  EXPECT_EQ(testing::concat(testing::drain_all(a.queue())), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
  EXPECT_EQ(a.wakes.load(std::memory_order_relaxed), 1);
  EXPECT_EQ(publish("other", "hi", false), 0u);
}

TEST_F(SubscriptionIndexTest, PatternSubscriberReceivesPmessageInItsProtocol) {
  FakeSubscriber& a = make(WireFormat::kResp3);
  psub(a, "news.*");
  EXPECT_EQ(publish("news.art", "x", false), 1u);
  EXPECT_EQ(publish("news", "x", false), 0u);
  EXPECT_EQ(testing::concat(testing::drain_all(a.queue())),
            ">4\r\n$8\r\npmessage\r\n$6\r\nnews.*\r\n$8\r\nnews.art\r\n$1\r\nx\r\n");
}

TEST_F(SubscriptionIndexTest, EncodesEachFrameOncePerProtocolAndSharesIt) {
  FakeSubscriber& a = make(WireFormat::kResp2);
  FakeSubscriber& b = make(WireFormat::kResp2);
  FakeSubscriber& c = make(WireFormat::kResp3);
  FakeSubscriber& d = make(WireFormat::kResp2);
  FakeSubscriber& e = make(WireFormat::kResp2);
  for (FakeSubscriber* s : {&a, &b, &c}) sub(*s, "news");
  psub(d, "n*");
  psub(e, "n*");
  ASSERT_EQ(publish("news", "payload", false), 5u);
  auto fa = testing::drain_all(a.queue());
  auto fb = testing::drain_all(b.queue());
  auto fc = testing::drain_all(c.queue());
  auto fd = testing::drain_all(d.queue());
  auto fe = testing::drain_all(e.queue());
  ASSERT_EQ(fa.size(), 1u);
  // Same buffer, not equal copies: no per-subscriber copy of the payload.
  EXPECT_EQ(fa[0].block.get(), fb[0].block.get());
  EXPECT_EQ(fa[0].data(), fb[0].data());
  EXPECT_NE(fa[0].block.get(), fc[0].block.get()) << "RESP3 has its own encoding";
  EXPECT_EQ(fd[0].block.get(), fe[0].block.get()) << "one pmessage frame per pattern";
  EXPECT_NE(fd[0].block.get(), fa[0].block.get());
  EXPECT_EQ(fa[0].block.use_count(), 2u);  // held by the two RESP2 drains here
}

TEST_F(SubscriptionIndexTest, DeliversOncePerMatchingSubscriptionByDefault) {
  FakeSubscriber& a = make();
  sub(a, "news");
  psub(a, "n*");
  psub(a, "news*");
  psub(a, "x*");
  EXPECT_EQ(publish("news", "p", false), 3u);
  const auto frames = testing::drain_all(a.queue());
  ASSERT_EQ(testing::frame_count(frames), 3u);
  EXPECT_EQ(frames[0].view().substr(0, 16), "*3\r\n$7\r\nmessage\r");
}

TEST_F(SubscriptionIndexTest, DedupeDeliversOncePerConnection) {
  FakeSubscriber& a = make();
  FakeSubscriber& b = make();
  sub(a, "news");
  psub(a, "n*");
  psub(b, "n*");
  psub(b, "ne*");
  EXPECT_EQ(publish("news", "p", true), 2u);
  const auto fa = testing::drain_all(a.queue());
  const auto fb = testing::drain_all(b.queue());
  ASSERT_EQ(fa.size(), 1u);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fa[0].view(), "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\np\r\n") << "exact wins";
  EXPECT_EQ(fb[0].view().substr(0, 17), "*4\r\n$8\r\npmessage\r");
}

TEST_F(SubscriptionIndexTest, ARunIsOneBlockPerProtocolAndOneSpanPerSubscriber) {
  FakeSubscriber& a = make(WireFormat::kResp2);
  FakeSubscriber& b = make(WireFormat::kResp2);
  FakeSubscriber& c = make(WireFormat::kResp3);
  for (FakeSubscriber* s : {&a, &b, &c}) sub(*s, "news");
  const std::vector<Message> msgs{{"news", "1"}, {"news", "22"}, {"news", "333"}};
  EXPECT_EQ(publish_all(msgs), (std::vector<std::size_t>{3, 3, 3}));
  const auto fa = testing::drain_all(a.queue());
  const auto fb = testing::drain_all(b.queue());
  const auto fc = testing::drain_all(c.queue());
  ASSERT_EQ(fa.size(), 1u);
  ASSERT_EQ(fc.size(), 1u);
  EXPECT_EQ(fa[0].count, 3u);
  EXPECT_EQ(fa[0].block.get(), fb[0].block.get()) << "both RESP2 subscribers share one block";
  EXPECT_NE(fa[0].block.get(), fc[0].block.get());
  EXPECT_EQ(a.wakes.load(std::memory_order_relaxed), 1) << "one push, one wakeup";
  EXPECT_EQ(fa[0].view(),
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\n1\r\n"
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\n22\r\n"
            "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\n333\r\n");
  EXPECT_EQ(fc[0].view().substr(0, 4), ">3\r\n");
}

TEST_F(SubscriptionIndexTest, LongRunsAreCutSoABlockStaysBounded) {
  FakeSubscriber& a = make();
  sub(a, "news");
  const std::vector<Message> msgs(1500, Message{"news", "p"});
  (void)publish_all(msgs);
  const auto fa = testing::drain_all(a.queue());
  ASSERT_EQ(fa.size(), 2u);
  EXPECT_EQ(fa[0].count, 1024u) << "at most 1024 messages per run";
  EXPECT_EQ(fa[1].count, 476u);
  const std::string big(600u << 10, 'x');  // 600 KiB: a run ends after 1 MiB of payload
  const std::vector<Message> large(3, Message{"news", big});
  (void)publish_all(large);
  const auto fl = testing::drain_all(a.queue());
  ASSERT_EQ(fl.size(), 2u);
  EXPECT_EQ(fl[0].count, 2u);
  EXPECT_EQ(fl[1].count, 1u);
}

TEST_F(SubscriptionIndexTest, ABatchOverSeveralChannelsKeepsPublicationOrder) {
  FakeSubscriber& a = make();
  FakeSubscriber& b = make();
  sub(a, "x");
  sub(a, "y");
  sub(b, "y");
  const std::vector<Message> msgs{{"x", "1"}, {"y", "2"}, {"y", "3"}, {"x", "4"}, {"z", "5"}};
  EXPECT_EQ(publish_all(msgs), (std::vector<std::size_t>{1, 2, 2, 1, 0}));
  auto payloads = [](const std::string& wire) {
    std::string out;  // each one-byte bulk: channel, payload, channel, ...
    for (std::size_t at = wire.find("\r\n$1\r\n", 0); at != std::string::npos; at = wire.find("\r\n$1\r\n", at + 1)) {
      out += wire[at + 6];
    }
    return out;
  };
  EXPECT_EQ(payloads(testing::concat(testing::drain_all(a.queue()))), "x1y2y3x4");
  EXPECT_EQ(payloads(testing::concat(testing::drain_all(b.queue()))), "y2y3");
}

TEST_F(SubscriptionIndexTest, ASubscriberMatchedTwiceGetsFramesInterleavedPerMessage) {
  FakeSubscriber& a = make();
  FakeSubscriber& b = make();
  sub(a, "news");
  psub(a, "n*");
  sub(b, "news");
  const std::vector<Message> msgs{{"news", "1"}, {"news", "2"}};
  EXPECT_EQ(publish_all(msgs), (std::vector<std::size_t>{3, 3}));
  const std::string m1 = "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\n1\r\n";
  const std::string p1 = "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\n1\r\n";
  const std::string m2 = "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\n2\r\n";
  const std::string p2 = "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$1\r\n2\r\n";
  EXPECT_EQ(testing::concat(testing::drain_all(a.queue())), m1 + p1 + m2 + p2) << "as Redis sends them";
  EXPECT_EQ(testing::concat(testing::drain_all(b.queue())), m1 + m2);
}

TEST_F(SubscriptionIndexTest, DedupeDeliversARunOncePerConnection) {
  FakeSubscriber& a = make();
  sub(a, "news");
  psub(a, "n*");
  const std::vector<Message> msgs{{"news", "1"}, {"news", "2"}};
  EXPECT_EQ(publish_all(msgs, true), (std::vector<std::size_t>{1, 1}));
  const auto fa = testing::drain_all(a.queue());
  ASSERT_EQ(fa.size(), 1u);
  EXPECT_EQ(fa[0].count, 2u);
  EXPECT_EQ(fa[0].view().substr(0, 16), "*3\r\n$7\r\nmessage\r") << "exact wins";
}

TEST_F(SubscriptionIndexTest, VisitsPatternsByLiteralPrefix) {
  FakeSubscriber& a = make();
  for (const char* p : {"*", "a*", "ab*", "abc", "abd*", "b*", "a?c", "[a]bc", "abc\\*"}) psub(a, p);
  // "abc" matches *, a*, ab*, abc, a?c, [a]bc; not abd*, b*, abc\*.
  EXPECT_EQ(publish("abc", "p", false), 6u);
  EXPECT_EQ(publish("abc*", "p", false), 4u);  // *, a*, ab*, abc\*
  EXPECT_EQ(publish("", "p", false), 0u);      // Redis: "*" needs a byte
  EXPECT_EQ(index_.numpat(), 9u);
}

TEST_F(SubscriptionIndexTest, UnsubscribeStopsDeliveryAndForgetsEmptyEntries) {
  FakeSubscriber& a = make();
  FakeSubscriber& b = make();
  sub(a, "x");
  sub(b, "x");
  psub(a, "x*");
  EXPECT_EQ(index_.numsub("x"), 2u);
  {
    auto lock = index_.lock_for_update();
    EXPECT_TRUE(index_.remove_channel(a, "x"));
    EXPECT_FALSE(index_.remove_channel(a, "x"));
    EXPECT_TRUE(index_.remove_pattern(a, "x*"));
  }
  EXPECT_EQ(publish("x", "p", false), 1u);
  EXPECT_EQ(index_.numpat(), 0u);
  {
    auto lock = index_.lock_for_update();
    index_.remove_all(b);
  }
  EXPECT_EQ(index_.num_channels(), 0u);
  EXPECT_EQ(index_.numsub("x"), 0u);
  EXPECT_TRUE(a.channels().empty());
}

// Issue 40: a client's subscriptions are removed a slice at a time, oldest
// first, each removal O(1), so a caller can let publishers in between slices;
// the order bare UNSUBSCRIBE reports survives removals from the middle.
TEST_F(SubscriptionIndexTest, RemoveSomeTakesASliceOldestFirstAndKeepsTheRestInOrder) {
  FakeSubscriber& a = make();
  FakeSubscriber& b = make();
  for (int i = 0; i < 5; ++i) sub(a, "ch" + std::to_string(i));
  psub(a, "p*");
  sub(b, "ch4");
  const auto names = [](const SubscriptionList& l) { return std::vector<std::string>(l.begin(), l.end()); };
  // Each step under the update lock, each check after it (the queries take
  // the lock shared).
  const auto remove_some = [this, &a](std::size_t n) {
    auto lock = index_.lock_for_update();
    return index_.remove_some(a, n);
  };
  {
    auto lock = index_.lock_for_update();
    EXPECT_TRUE(index_.remove_channel(a, "ch2"));
  }
  EXPECT_EQ(names(a.channels()), (std::vector<std::string>{"ch0", "ch1", "ch3", "ch4"}));
  EXPECT_FALSE(remove_some(2));
  EXPECT_EQ(names(a.channels()), (std::vector<std::string>{"ch3", "ch4"}));
  EXPECT_EQ(index_.numsub("ch0"), 0u);
  EXPECT_EQ(index_.numsub("ch3"), 1u);
  EXPECT_EQ(index_.numpat(), 1u);
  EXPECT_FALSE(remove_some(2));
  EXPECT_EQ(index_.numsub("ch4"), 1u);  // b's is left
  EXPECT_EQ(names(a.patterns()), (std::vector<std::string>{"p*"}));
  EXPECT_TRUE(remove_some(2));
  EXPECT_EQ(index_.numpat(), 0u);
  EXPECT_EQ(a.subscription_count(), 0u);
}

// 200,000 subscriptions leave in linear time: searching each name from the
// front of a vector (as before issue 40) made this take minutes.
TEST_F(SubscriptionIndexTest, RemovingTwoHundredThousandSubscriptionsIsLinear) {
  FakeSubscriber& a = make();
  constexpr int kCount = 200'000;
  {
    auto lock = index_.lock_for_update();
    for (int i = 0; i < kCount; ++i) index_.add_channel(a, "c" + std::to_string(i));
    for (int i = 0; i < kCount; i += 2) EXPECT_TRUE(index_.remove_channel(a, "c" + std::to_string(i)));
  }
  EXPECT_EQ(index_.num_channels(), static_cast<std::size_t>(kCount / 2));
  {
    auto lock = index_.lock_for_update();
    index_.remove_all(a);
  }
  EXPECT_EQ(index_.num_channels(), 0u);
}

TEST_F(SubscriptionIndexTest, SubscribingTwiceKeepsOneSubscription) {
  FakeSubscriber& a = make();
  auto lock = index_.lock_for_update();
  EXPECT_TRUE(index_.add_channel(a, "x"));
  EXPECT_FALSE(index_.add_channel(a, "x"));
  EXPECT_TRUE(index_.add_pattern(a, "x"));
  EXPECT_EQ(a.subscription_count(), 2u);
}

// A subscription's QoS 1 mark is its own (subscription_list.hpp): the
// channel "t*" and the pattern "t*" are marked apart, and the mark goes with
// its subscription, so subscribing again starts at QoS 0.
TEST_F(SubscriptionIndexTest, Qos1MarkBelongsToOneSubscription) {
  testing::ManualClock clock;
  AckTracker tracker(AckSettings{}, clock, WireFormat::kJson, ws::json_redelivery);
  FakeSubscriber& a = make(WireFormat::kJson);
  {
    auto lock = index_.lock_for_update();
    index_.set_ack_tracker(a, &tracker);
    index_.add_channel(a, "t*");
    index_.add_pattern(a, "t*");
    index_.set_qos1(a, SubscriptionSpace::kPattern, "t*", true);
  }
  const auto publish_qos1 = [this](std::string_view ch) { return publish_all({Message{ch, "p", 1}}).front(); };
  EXPECT_EQ(publish_qos1("tx"), 1u);
  EXPECT_EQ(tracker.stats().delivered, 1u) << "through the QoS 1 pattern";
  EXPECT_EQ(publish_qos1("t*"), 1u);
  EXPECT_EQ(tracker.stats().delivered, 1u) << "through the channel, its one delivery, at QoS 0";
  {
    auto lock = index_.lock_for_update();
    EXPECT_TRUE(index_.remove(a, SubscriptionSpace::kPattern, "t*"));
    EXPECT_TRUE(index_.add_pattern(a, "t*"));
  }
  EXPECT_EQ(publish_qos1("tx"), 1u);
  EXPECT_EQ(tracker.stats().delivered, 1u) << "the new pattern subscription is QoS 0";
  std::size_t frames = 0;
  for (const FrameSpan& s : testing::drain_all(a.queue())) frames += s.count;
  EXPECT_EQ(frames, 3u);
  auto lock = index_.lock_for_update();
  index_.remove_all(a);  // before the tracker goes
}

TEST_F(SubscriptionIndexTest, ShardChannelsAreANamespaceOfTheirOwn) {
  FakeSubscriber& plain = make();
  FakeSubscriber& pattern = make();
  FakeSubscriber& shard = make(WireFormat::kResp3);
  sub(plain, "x");
  psub(pattern, "*");
  {
    auto lock = index_.lock_for_update();
    EXPECT_TRUE(index_.add_shard_channel(shard, "x"));
    EXPECT_FALSE(index_.add_shard_channel(shard, "x"));
    EXPECT_TRUE(index_.add_channel(shard, "x")) << "the same name as a plain channel is another subscription";
  }
  EXPECT_EQ(index_.num_channels(), 1u);
  EXPECT_EQ(index_.num_shard_channels(), 1u);
  EXPECT_EQ(index_.numsub("x"), 2u);
  EXPECT_EQ(index_.shard_numsub("x"), 1u);
  EXPECT_EQ(index_.shard_channels(std::nullopt), std::vector<std::string>{"x"});

  std::vector<std::size_t> n(1);
  const std::vector<Message> m{Message{"x", "s"}};
  index_.publish_shard(m, n);
  EXPECT_EQ(n[0], 1u) << "SPUBLISH reaches the shard subscription only";
  EXPECT_EQ(testing::concat(testing::drain_all(plain.queue())), "");
  EXPECT_EQ(testing::concat(testing::drain_all(pattern.queue())), "");
  EXPECT_EQ(testing::concat(testing::drain_all(shard.queue())), ">3\r\n$8\r\nsmessage\r\n$1\r\nx\r\n$1\r\ns\r\n");

  EXPECT_EQ(publish("x", "p"), 3u) << "PUBLISH reaches plain and pattern subscriptions, not the shard one";
  EXPECT_EQ(testing::concat(testing::drain_all(shard.queue())), ">3\r\n$7\r\nmessage\r\n$1\r\nx\r\n$1\r\np\r\n");
  {
    auto lock = index_.lock_for_update();
    EXPECT_FALSE(index_.remove_shard_channel(plain, "x"));
    index_.remove_all(shard);
  }
  EXPECT_EQ(index_.num_shard_channels(), 0u);
  EXPECT_TRUE(shard.shard_channels().empty());
  EXPECT_EQ(index_.numsub("x"), 1u);
}

TEST_F(SubscriptionIndexTest, ChannelsListsActiveChannelsMatchingAPattern) {
  FakeSubscriber& a = make();
  sub(a, "news.a");
  sub(a, "news.b");
  sub(a, "sport");
  auto all = index_.channels(std::nullopt);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"news.a", "news.b", "sport"}));
  auto news = index_.channels(std::string_view("news.*"));
  std::sort(news.begin(), news.end());
  EXPECT_EQ(news, (std::vector<std::string>{"news.a", "news.b"}));
}

TEST_F(SubscriptionIndexTest, ConcurrentPublishersAndSubscribersStayConsistent) {
  // Bounded stress for TSan: 3 publishers, one thread churning subscriptions.
  constexpr int kPerPublisher = 2000;
  FakeSubscriber& steady = make();
  FakeSubscriber& churn = make();
  sub(steady, "s");
  std::atomic<bool> done{false};
  std::thread churner([&] {
    int i = 0;
    // relaxed: a stop flag, nothing else is published through it.
    while (!done.load(std::memory_order_relaxed)) {
      auto lock = index_.lock_for_update();
      if (i++ % 2 == 0) {
        index_.add_channel(churn, "s");
        index_.add_pattern(churn, "s*");
      } else {
        index_.remove_all(churn);
      }
    }
  });
  std::vector<std::thread> pubs;
  std::atomic<std::size_t> receivers{0};
  for (int t = 0; t < 3; ++t) {
    pubs.emplace_back([&, this] {
      for (int i = 0; i < kPerPublisher; ++i) {
        receivers.fetch_add(publish("s", "payload", false), std::memory_order_relaxed);
      }
    });
  }
  for (auto& p : pubs) p.join();
  done.store(true, std::memory_order_relaxed);
  churner.join();
  EXPECT_GE(receivers.load(std::memory_order_relaxed), 3u * kPerPublisher);  // relaxed: joined threads
  const auto frames = testing::drain_all(steady.queue());
  EXPECT_EQ(frames.size(), 3u * kPerPublisher);
}

}  // namespace
}  // namespace ringcast::broker

namespace ringcast::broker {
namespace {

// A RunLog that records what the index tells it, and how many frames the
// watched subscriber's queue held at each append (invariant 5: none of the run yet).
class RecordingLog final : public RunLog {
 public:
  explicit RecordingLog(std::uint64_t last) : last_(last) {}
  std::uint64_t last_id(std::string_view channel) noexcept override {
    asked.emplace_back(channel);
    return channel == "kept" ? last_ : 0;
  }
  bool append(std::string_view channel, std::uint64_t first_id, std::span<const Message> run,
              std::int64_t /*time_ms*/) noexcept override {
    runs.push_back(
        {std::string(channel), first_id, run.size(), watched == nullptr ? 0 : watched->queue().stats().queued_frames});
    return !failing;
  }
  struct Run {
    std::string channel;
    std::uint64_t first_id;
    std::size_t size;
    std::uint64_t queued_before;
  };
  std::vector<std::string> asked;
  std::vector<Run> runs;
  FakeSubscriber* watched = nullptr;
  bool failing = false;  // append() reports that the run was not stored

 private:
  std::uint64_t last_;
};

TEST(SubscriptionIndexRunLogTest, IdsContinueFromTheLogAndEachRunIsLoggedBeforeAnyQueueHasIt) {
  RecordingLog log(41);
  SubscriptionIndex index(&log);
  FakeSubscriber a(WireFormat::kJson);
  log.watched = &a;
  {
    auto lock = index.lock_for_update();
    index.add_channel(a, "kept");
  }
  const std::vector<Message> msgs{{"kept", "1"}, {"kept", "2"}, {"other", "3"}, {"kept", "4"}};
  std::vector<std::size_t> receivers(msgs.size());
  std::vector<std::uint64_t> ids(msgs.size());
  index.publish(msgs, false, receivers, ids);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{42, 43, 1, 44}));
  // last_id is asked once per channel, the first time it is numbered.
  EXPECT_EQ(log.asked, (std::vector<std::string>{"kept", "other"}));
  ASSERT_EQ(log.runs.size(), 3u);
  EXPECT_EQ(log.runs[0].first_id, 42u);
  EXPECT_EQ(log.runs[0].size, 2u);
  EXPECT_EQ(log.runs[0].queued_before, 0u);
  EXPECT_EQ(log.runs[2].first_id, 44u);
  EXPECT_EQ(log.runs[2].queued_before, 2u) << "the first run was queued after its append, the third not yet";
  // SPUBLISH channels are not logged.
  const Message s{"kept", "x"};
  std::size_t r = 0;
  index.publish_shard({&s, 1}, {&r, 1});
  EXPECT_EQ(log.runs.size(), 3u);
  auto lock = index.lock_for_update();
  index.remove_all(a);
}

TEST(SubscriptionIndexRunLogTest, QosOneRunTheLogCannotStoreIsRefusedTakesNoIdsAndReachesNobody) {
  RecordingLog log(0);
  SubscriptionIndex index(&log);
  FakeSubscriber a(WireFormat::kJson);
  {
    auto lock = index.lock_for_update();
    index.add_channel(a, "kept");
  }
  std::vector<std::size_t> receivers(2);
  std::vector<std::uint64_t> ids(2);
  log.failing = true;
  const std::vector<Message> q1{{"kept", "a", 1}, {"kept", "b", 1}};
  EXPECT_EQ(testing::publish_each(index, q1, false, ids),
            (std::vector<std::size_t>{testing::kNotStored, testing::kNotStored}));
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{0, 0}));
  EXPECT_EQ(a.queue().stats().queued_frames, 0u) << "nobody is offered a QoS 1 run that is not stored";
  // The call stops at it, as at a `block` refusal.
  const PublishOutcome refused = index.publish(q1, false, receivers, ids);
  EXPECT_EQ(refused.published, 0u);
  EXPECT_EQ(refused.status, PublishOutcome::Status::kNotStored);
  // A QoS 0 run is delivered all the same (the log counts the failure).
  const std::vector<Message> q0{{"kept", "c"}, {"kept", "d"}};
  EXPECT_EQ(index.publish(q0, false, receivers, ids).published, 2u);
  EXPECT_EQ(receivers, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1, 2})) << "the refused QoS 1 run took no ids";
  log.failing = false;
  EXPECT_EQ(index.publish(q1, false, receivers, ids).published, 2u);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(a.queue().stats().queued_frames, 4u);
  auto lock = index.lock_for_update();
  index.remove_all(a);
}

}  // namespace
}  // namespace ringcast::broker
