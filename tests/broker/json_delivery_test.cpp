// The WebSocket-JSON delivery encoder (src/broker/ws/json_delivery.hpp), byte
// by byte, and its use by the subscription index: one block per format shared
// by every JSON subscriber, per-channel message ids, one delivery per message
// for a JSON client matched several times.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "broker/core/subscription_index.hpp"
#include "broker/queue/wire_format.hpp"
#include "broker/util/base64.hpp"
#include "broker/ws/json_delivery.hpp"
#include "test_support.hpp"

namespace ringcast::broker {
namespace {

using nlohmann::json;

// One frame split into its header fields and payload.
struct Frame {
  std::uint8_t first = 0;  // FIN | opcode
  std::size_t header = 0;  // header bytes
  std::string payload;
};

Frame parse_frame(std::string_view f) {
  Frame out;
  out.first = static_cast<std::uint8_t>(f.at(0));
  const auto len7 = static_cast<std::uint8_t>(f.at(1));
  EXPECT_EQ(len7 & 0x80, 0) << "a server frame is never masked";
  std::uint64_t len = len7 & 0x7F;
  out.header = 2;
  if (len == 126) {
    len = (std::uint64_t{static_cast<std::uint8_t>(f.at(2))} << 8) | static_cast<std::uint8_t>(f.at(3));
    out.header = 4;
  } else if (len == 127) {
    len = 0;
    for (std::size_t i = 0; i < 8; ++i) len = (len << 8) | static_cast<std::uint8_t>(f.at(2 + i));
    out.header = 10;
  }
  EXPECT_EQ(out.header + len, f.size()) << "one frame exactly";
  out.payload = std::string(f.substr(out.header));
  return out;
}

FrameRef encode(std::string_view channel, std::string_view payload, std::uint64_t id = 1,
                std::int64_t ts = 1700000000123, DeliveryKind kind = DeliveryKind::kMessage,
                std::string_view pattern = {}) {
  const Message m{channel, payload};
  return ws::encode_json_run(DeliveryRun{kind, pattern, {&m, 1}, id, ts});
}

json json_of(const FrameRef& block, std::uint32_t i = 0) { return json::parse(parse_frame(block->frame(i)).payload); }

std::string base64(std::string_view s) {
  std::string out;
  base64_encode(s, Base64::kStandard, out);
  return out;
}

TEST(JsonDeliveryTest, AMessageIsOneFinalTextFrameWithPopSubsFieldsInOrder) {
  const FrameRef f = encode("prices", "hello", 42, 1700000000123);
  ASSERT_EQ(f->count(), 1u);
  EXPECT_TRUE(f->droppable());
  const Frame fr = parse_frame(f->frame(0));
  EXPECT_EQ(fr.first, 0x81) << "FIN, text";
  EXPECT_EQ(fr.payload, R"({"type":"message","topic":"prices","payload":"hello","timestamp":1700000000123,)"
                        R"("message_id":42,"qos":0})");
}

TEST(JsonDeliveryTest, APatternDeliveryNamesThePatternBeforeTheTopic) {
  const FrameRef f = encode("md.aapl", "x", 3, 5, DeliveryKind::kPattern, "md.*");
  EXPECT_EQ(
      parse_frame(f->frame(0)).payload,
      R"({"type":"message","pattern":"md.*","topic":"md.aapl","payload":"x","timestamp":5,"message_id":3,"qos":0})");
}

TEST(JsonDeliveryTest, EscapesQuoteBackslashAndEveryControlCharacter) {
  std::string payload = "a\"b\\c/\x7f";
  for (int c = 0; c < 0x20; ++c) payload += static_cast<char>(c);
  const FrameRef f = encode("t", payload);
  const std::string text = parse_frame(f->frame(0)).payload;
  EXPECT_NE(
      text.find(R"("payload":"a\"b\\c/)"
                "\x7f"
                R"(\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f)"
                R"(\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f")"),
      std::string::npos)
      << text;
  const json j = json::parse(text);
  EXPECT_EQ(j["payload"].get<std::string>(), payload) << "round trip through a JSON parser";
  EXPECT_FALSE(j.contains("encoding"));
}

// The escaper scans eight bytes at a time: a byte to escape at every offset of
// a word (and just past one), between plain ASCII and multi-byte UTF-8, comes
// back intact and the frame's length is exact (parse_frame checks it).
TEST(JsonDeliveryTest, EscapesAtEveryOffsetOfTheWordScan) {
  const std::string specials("\"\\\x00\x01\x1f\n\t", 7);
  for (const std::string& filler :
       {std::string("abcdefghijklmnopqrstuvwx"),
        std::string("\xc3\xa9\xe2\x82\xac\xc3\xa9\xe2\x82\xac\xc3\xa9\xe2\x82\xac\xc3\xa9\xe2\x82\xac\x7f!")}) {
    for (char special : specials) {
      for (std::size_t at = 0; at <= filler.size(); ++at) {
        if (at < filler.size() && (static_cast<unsigned char>(filler[at]) & 0xC0) == 0x80) continue;  // mid-sequence
        std::string payload = filler;
        payload.insert(at, 1, special);
        const json j = json_of(encode("t", payload));
        ASSERT_FALSE(j.contains("encoding")) << "at " << at;
        ASSERT_EQ(j["payload"].get<std::string>(), payload) << "at " << at << ", byte " << int(special);
      }
    }
  }
}

TEST(JsonDeliveryTest, ValidUtf8GoesAsAStringAtEveryLengthOfSequence) {
  // 1-, 2-, 3- and 4-byte sequences, the smallest and largest of each.
  const std::string payload =
      "\x7f \xc2\x80 \xdf\xbf \xe0\xa0\x80 \xef\xbf\xbf \xf0\x90\x80\x80 \xf4\x8f\xbf\xbf \xe2\x82\xac";
  const json j = json_of(encode("t", payload));
  EXPECT_EQ(j["payload"].get<std::string>(), payload);
  EXPECT_FALSE(j.contains("encoding"));
}

TEST(JsonDeliveryTest, InvalidUtf8PayloadsGoAsBase64WithTheEncodingFlag) {
  const std::vector<std::string> bad{
      std::string("\x80", 1),              // lone continuation byte
      std::string("\xc0\x80", 2),          // overlong NUL
      std::string("\xe0\x80\xaf", 3),      // overlong '/'
      std::string("\xed\xa0\x80", 3),      // surrogate U+D800
      std::string("\xf4\x90\x80\x80", 4),  // above U+10FFFF
      std::string("ok\xe2\x82", 4),        // truncated at the end
      std::string("\xff\x00\x01", 3),      // binary
  };
  for (const std::string& p : bad) {
    const FrameRef f = encode("t", p);
    const std::string text = parse_frame(f->frame(0)).payload;
    const json j = json::parse(text);
    EXPECT_EQ(j["payload"].get<std::string>(), base64(p)) << text;
    EXPECT_EQ(j["encoding"], "base64") << text;
    std::string decoded;
    ASSERT_TRUE(base64_decode(j["payload"].get<std::string>(), Base64::kStandard, decoded));
    EXPECT_EQ(decoded, p);
    EXPECT_NE(text.find(R"("payload":")" + base64(p) + R"(","encoding":"base64","timestamp":)"), std::string::npos);
  }
  EXPECT_EQ(json_of(encode("t", ""))["payload"], "") << "empty is valid UTF-8";
}

TEST(JsonDeliveryTest, ATopicOrPatternThatIsNotUtf8GoesAsBase64WithItsOwnFlag) {
  const std::string topic("bin\xff", 4);
  const FrameRef f = encode(topic, "p", 1, 1, DeliveryKind::kPattern, std::string("b\xfe*", 3));
  const json j = json_of(f);
  EXPECT_EQ(j["topic"], base64(topic));
  EXPECT_EQ(j["topic_encoding"], "base64");
  EXPECT_EQ(j["pattern"], base64(std::string("b\xfe*", 3)));
  EXPECT_EQ(j["pattern_encoding"], "base64");
  EXPECT_EQ(j["payload"], "p");
  EXPECT_FALSE(j.contains("encoding"));
}

TEST(JsonDeliveryTest, FrameHeaderGrowsAt126And65536BytesOfJson) {
  // The JSON text of an empty payload, then payloads that bring it to each size.
  const std::size_t base = parse_frame(encode("t", "")->frame(0)).payload.size();
  for (const std::size_t json_len : {std::size_t{125}, std::size_t{126}, std::size_t{65535}, std::size_t{65536}}) {
    const FrameRef f = encode("t", std::string(json_len - base, 'x'));
    const Frame fr = parse_frame(f->frame(0));
    EXPECT_EQ(fr.payload.size(), json_len);
    EXPECT_EQ(fr.header, json_len <= 125 ? 2u : json_len <= 65535 ? 4u : 10u) << json_len;
    EXPECT_EQ(f->size(), fr.header + json_len);
    EXPECT_TRUE(json::accept(fr.payload));
  }
}

TEST(JsonDeliveryTest, ARunIsOneBlockWithConsecutiveIdsAndOneTimestamp) {
  const std::string binary("\x80", 1);
  const std::vector<Message> run{{"c", "a"}, {"c", binary}, {"c", "c"}};
  const FrameRef f = ws::encode_json_run(DeliveryRun{DeliveryKind::kMessage, {}, run, 7, 99});
  ASSERT_EQ(f->count(), 3u);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const json j = json_of(f, i);
    EXPECT_EQ(j["message_id"], 7 + i);
    EXPECT_EQ(j["timestamp"], 99);
    EXPECT_EQ(j["qos"], 0);
  }
}

TEST(JsonDeliveryTest, PopSubsFormatWritesTheIdAsAStringNamingTheTopic) {
  const Message m{"md.\"x\"", "px"};
  const FrameRef f = ws::encode_popsub_run(DeliveryRun{DeliveryKind::kMessage, {}, {&m, 1}, 17, 1700000000123});
  EXPECT_EQ(parse_frame(f->frame(0)).payload,
            R"({"type":"message","topic":"md.\"x\"","payload":"px","timestamp":1700000000123,)"
            R"("message_id":"md.\"x\"#17","qos":0})");
  // A topic that is not UTF-8 is base64: the id is then the number alone.
  const Message bin{std::string_view("\xff", 1), "px"};
  const FrameRef g = ws::encode_popsub_run(DeliveryRun{DeliveryKind::kMessage, {}, {&bin, 1}, 5, 1});
  EXPECT_EQ(json::parse(parse_frame(g->frame(0)).payload)["message_id"], "5");
  // Its redelivery is the same frame, without dup.
  const FrameRef r = ws::popsub_redelivery(f->frame(0));
  EXPECT_EQ(r->view(), f->frame(0));
}

TEST(JsonDeliveryTest, PopSubsFormatShowsThePublishersOwnIdAndRingcastsItsNumber) {
  const std::vector<Message> run{{"t", "a", 1, "id-\"7\""}, {"t", "b", 1}, {"t", "c", 1, "id-9"}};
  const DeliveryRun r{DeliveryKind::kMessage, {}, run, 4, 1, 1};
  const FrameRef p = ws::encode_popsub_run(r);
  EXPECT_EQ(parse_frame(p->frame(0)).payload,
            R"({"type":"message","topic":"t","payload":"a","timestamp":1,"message_id":"id-\"7\"","qos":1})");
  EXPECT_EQ(json_of(p, 1)["message_id"], "t#5") << "no id of its own: the broker's";
  EXPECT_EQ(json_of(p, 2)["message_id"], "id-9");
  const FrameRef j = ws::encode_json_run(r);
  for (std::uint32_t i = 0; i < 3; ++i) EXPECT_EQ(json_of(j, i)["message_id"], 4 + i) << "ringcast's keep its numbers";
  // What an ack echoes names the frame: the id as given, unescaped.
  EXPECT_TRUE(ws::popsub_id_is(p->frame(0), "id-\"7\""));
  EXPECT_TRUE(ws::popsub_id_is(p->frame(1), "t#5"));
  EXPECT_TRUE(ws::popsub_id_is(p->frame(2), "id-9"));
  for (std::string_view other : {"id-9", "id-\\\"7\\\"", "id-", "", "5"})
    EXPECT_FALSE(ws::popsub_id_is(p->frame(0), other)) << other;
  EXPECT_FALSE(ws::popsub_id_is(p->frame(1), "5"));
}

TEST(JsonDeliveryTest, AnAckIdIsTheTopicAndTheNumberAfterTheLastHash) {
  auto a = ws::parse_ack_id("md.#x#17");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->topic, "md.#x");
  EXPECT_EQ(a->id, 17u);
  a = ws::parse_ack_id("17");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->topic, "");
  EXPECT_EQ(a->id, 17u);
  for (std::string_view bad : {"", "t#", "t#x", "id-123", "t#-1", "t#1x", "#"})
    EXPECT_FALSE(ws::parse_ack_id(bad).has_value()) << bad;
}

TEST(JsonDeliveryTest, ConflationKeyIsTheTextBeforeThePayload) {
  const FrameRef a = encode("t", "1");
  const FrameRef b = encode("t", std::string(70000, 'y'), 9);  // 10-byte header
  const FrameRef c = encode("u", "1");
  const FrameRef p = encode("t", "1", 1, 1, DeliveryKind::kPattern, "t*");
  const std::string_view ka = ws::json_conflation_key(a->frame(0));
  EXPECT_EQ(ka, R"({"type":"message","topic":"t")");
  EXPECT_EQ(ws::json_conflation_key(b->frame(0)), ka);
  EXPECT_NE(ws::json_conflation_key(c->frame(0)), ka);
  EXPECT_EQ(ws::json_conflation_key(p->frame(0)), R"({"type":"message","pattern":"t*","topic":"t")");
  EXPECT_EQ(ws::json_conflation_key("\x81\x02{}"), "\x81\x02{}") << "no payload: its own key";
}

TEST(JsonDeliveryTest, TheLossNoticeIsAMessageOnTheReservedTopicWithNoId) {
  const json j = json_of(encode_message(WireFormat::kJson, kLossChannel, "lost=1 total=1 policy=drop-oldest"));
  EXPECT_EQ(j["topic"], std::string(kLossChannel));
  EXPECT_EQ(j["message_id"], 0);
  EXPECT_EQ(j["payload"], "lost=1 total=1 policy=drop-oldest");
}

// The index side.
class JsonIndexTest : public ::testing::Test {
 protected:
  testing::FakeSubscriber& make(WireFormat f) {
    subs_.push_back(std::make_unique<testing::FakeSubscriber>(f));
    return *subs_.back();
  }
  void sub(testing::FakeSubscriber& s, std::string_view ch, bool pattern = false) {
    auto lock = index_.lock_for_update();
    if (pattern) {
      index_.add_pattern(s, ch);
    } else {
      index_.add_channel(s, ch);
    }
  }
  std::vector<std::size_t> publish_all(const std::vector<Message>& msgs, bool dedupe = false) {
    std::vector<std::size_t> receivers(msgs.size());
    index_.publish(msgs, dedupe, receivers);
    return receivers;
  }
  static std::vector<json> drain_json(testing::FakeSubscriber& s) {
    std::vector<json> out;
    for (const FrameSpan& span : testing::drain_all(s.queue())) {
      for (std::uint32_t i = span.first; i < span.first + span.count; ++i) {
        out.push_back(json::parse(parse_frame(span.block->frame(i)).payload));
      }
    }
    return out;
  }
  void TearDown() override {
    for (auto& s : subs_) {
      auto lock = index_.lock_for_update();
      index_.remove_all(*s);
    }
  }

  SubscriptionIndex index_;
  std::vector<std::unique_ptr<testing::FakeSubscriber>> subs_;
};

TEST_F(JsonIndexTest, EncodesOnceForJsonAndEveryJsonSubscriberSharesTheBlock) {
  testing::FakeSubscriber& a = make(WireFormat::kJson);
  testing::FakeSubscriber& b = make(WireFormat::kJson);
  testing::FakeSubscriber& c = make(WireFormat::kResp2);
  testing::FakeSubscriber& d = make(WireFormat::kJson);
  testing::FakeSubscriber& e = make(WireFormat::kJson);
  for (auto* s : {&a, &b, &c}) sub(*s, "news");
  sub(d, "n*", true);
  sub(e, "n*", true);
  ASSERT_EQ(publish_all({{"news", "one"}, {"news", "two"}}), (std::vector<std::size_t>{5, 5}));
  const auto fa = testing::drain_all(a.queue());
  const auto fb = testing::drain_all(b.queue());
  const auto fc = testing::drain_all(c.queue());
  const auto fd = testing::drain_all(d.queue());
  const auto fe = testing::drain_all(e.queue());
  ASSERT_EQ(fa.size(), 1u) << "the run is one span";
  EXPECT_EQ(fa[0].count, 2u);
  // Same buffer, not equal copies.
  EXPECT_EQ(fa[0].block.get(), fb[0].block.get());
  EXPECT_EQ(fa[0].data(), fb[0].data());
  EXPECT_NE(fa[0].block.get(), fc[0].block.get()) << "RESP2 has its own encoding";
  EXPECT_EQ(fd[0].block.get(), fe[0].block.get()) << "one JSON block per pattern";
  EXPECT_NE(fd[0].block.get(), fa[0].block.get());
  EXPECT_EQ(fa[0].block.use_count(), 2u);  // held by the two drains here
  EXPECT_EQ(json::parse(parse_frame(fd[0].block->frame(0)).payload)["pattern"], "n*");
}

TEST_F(JsonIndexTest, PopSubAndRingcastSubscribersEachShareTheirOwnFormatsBlock) {
  testing::FakeSubscriber& a = make(WireFormat::kJson);
  testing::FakeSubscriber& b = make(WireFormat::kJson);
  testing::FakeSubscriber& p = make(WireFormat::kPopSubJson);
  testing::FakeSubscriber& q = make(WireFormat::kPopSubJson);
  for (auto* s : {&a, &b, &p, &q}) sub(*s, "news");
  ASSERT_EQ(publish_all({{"news", "one"}}), (std::vector<std::size_t>{4}));
  const auto fa = testing::drain_all(a.queue());
  const auto fb = testing::drain_all(b.queue());
  const auto fp = testing::drain_all(p.queue());
  const auto fq = testing::drain_all(q.queue());
  EXPECT_EQ(fa[0].block.get(), fb[0].block.get());
  EXPECT_EQ(fp[0].block.get(), fq[0].block.get()) << "PopSub's frames are encoded once too";
  EXPECT_NE(fa[0].block.get(), fp[0].block.get()) << "other bytes, another format";
  EXPECT_EQ(json::parse(parse_frame(fa[0].block->frame(0)).payload)["message_id"], 1);
  EXPECT_EQ(json::parse(parse_frame(fp[0].block->frame(0)).payload)["message_id"], "news#1");
}

TEST_F(JsonIndexTest, EachChannelNumbersItsMessagesFromOne) {
  testing::FakeSubscriber& a = make(WireFormat::kJson);
  sub(a, "*", true);
  (void)publish_all({{"x", "1"}, {"x", "2"}, {"y", "1"}});
  (void)publish_all({{"x", "3"}});
  (void)publish_all({{"y", "2"}, {"z", "1"}});
  std::vector<std::pair<std::string, std::uint64_t>> got;
  for (const json& j : drain_json(a)) got.emplace_back(j["topic"], j["message_id"]);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::uint64_t>>{
                     {"x", 1}, {"x", 2}, {"y", 1}, {"x", 3}, {"y", 2}, {"z", 1}}));
}

TEST_F(JsonIndexTest, MessagesNobodyReceivesStillTakeTheirIds) {
  testing::FakeSubscriber& a = make(WireFormat::kJson);
  (void)publish_all({{"x", "1"}, {"x", "2"}});
  sub(a, "x");
  (void)publish_all({{"x", "3"}});
  const auto got = drain_json(a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["message_id"], 3);
}

TEST_F(JsonIndexTest, AJsonClientMatchedSeveralTimesGetsOneDeliveryPerMessage) {
  testing::FakeSubscriber& ws = make(WireFormat::kJson);
  testing::FakeSubscriber& resp = make(WireFormat::kResp2);
  for (auto* s : {&ws, &resp}) {
    sub(*s, "a.b");
    sub(*s, "a.*", true);
    sub(*s, "*", true);
  }
  // Without --dedupe: RESP gets Redis's three frames per message, JSON one.
  EXPECT_EQ(publish_all({{"a.b", "1"}, {"a.b", "2"}}), (std::vector<std::size_t>{4, 4}));
  const auto got = drain_json(ws);
  ASSERT_EQ(got.size(), 2u);
  for (const json& j : got) EXPECT_FALSE(j.contains("pattern")) << "the exact subscription's delivery";
  EXPECT_EQ(testing::frame_count(testing::drain_all(resp.queue())), 6u);
  // Only patterns match: the first in trie order ("*" before "a.*").
  (void)publish_all({{"a.c", "3"}});
  const auto pat = drain_json(ws);
  ASSERT_EQ(pat.size(), 1u);
  EXPECT_EQ(pat[0]["pattern"], "*");
}

TEST_F(JsonIndexTest, ConcurrentPublishersOfOneChannelDeliverIdsInOrder) {
  testing::FakeSubscriber& a = make(WireFormat::kJson);
  testing::FakeSubscriber& b = make(WireFormat::kResp3);
  sub(a, "c");
  sub(b, "c");
  constexpr int kPerThread = 2000;
  auto publisher = [this] {
    for (int i = 0; i < kPerThread; ++i) {
      const std::vector<Message> run(static_cast<std::size_t>(1 + i % 3), Message{"c", "p"});
      std::vector<std::size_t> receivers(run.size());
      index_.publish(run, false, receivers);
    }
  };
  std::thread t1(publisher);
  std::thread t2(publisher);
  t1.join();
  t2.join();
  const auto got = drain_json(a);
  const std::size_t total = 2 * (kPerThread / 3 * 6 + (kPerThread % 3 >= 1 ? 1 : 0) + (kPerThread % 3 >= 2 ? 2 : 0));
  ASSERT_EQ(got.size(), total);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i]["message_id"], i + 1) << "at " << i;
}

}  // namespace
}  // namespace ringcast::broker
