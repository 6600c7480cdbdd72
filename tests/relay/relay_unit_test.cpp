// Pure parts of the relay: route, address and size parsing, the topic-in-payload
// codec and the relay's Prometheus series.
#include <cerrno>
#include <chrono>
#include <gtest/gtest.h>
#include <optional>
#include <string_view>

#include <string>
#include <vector>

#include "prometheus_text.hpp"
#include "relay/metrics.hpp"
#include "ringcast/relay/metrics_server.hpp"
#include "ringcast/relay/relay.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {
namespace {

std::span<const std::byte> bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(RelayOptionsTest, RingRouteSplitsAtTheLastEquals) {
  auto r = parse_ring_route("/dev/shm/a=b.ring=ticks");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->path, "/dev/shm/a=b.ring");
  EXPECT_EQ(r->name, "ticks");
  EXPECT_FALSE(r->topic_in_payload);
}

TEST(RelayOptionsTest, TrailingStarSelectsTopicInPayloadWithPrefix) {
  auto r = parse_ring_route("/dev/shm/md.ring=md.*");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->topic_in_payload);
  EXPECT_EQ(r->name, "md.");
  auto bare = parse_ring_route("/dev/shm/md.ring=*");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->topic_in_payload);
  EXPECT_EQ(bare->name, "");
}

TEST(RelayOptionsTest, RejectsRoutesWithoutPathOrChannel) {
  EXPECT_FALSE(parse_ring_route("/dev/shm/x.ring"));
  EXPECT_FALSE(parse_ring_route("=ticks"));
  EXPECT_FALSE(parse_ring_route("/dev/shm/x.ring="));
}

// validate() answers every check that needs nothing started, naming the
// setting; Relay::start and ringcast-relay both ask it first.
TEST(RelayValidateTest, RefusesEachBadSettingNamingIt) {
  const auto refusal = [](const RelayConfig& c) {
    const auto v = validate(c);
    EXPECT_FALSE(v);
    if (v) return std::string();
    EXPECT_EQ(v.error().code, RelayError::Code::kInvalidConfig);
    return v.error().detail;
  };
  RelayConfig ok;
  ok.rings.push_back({"/dev/shm/a.ring", "md.ticks", false});
  ok.nats = NatsConfig{};
  ok.nats->url = "nats://127.0.0.1:1";
  ok.nats->jetstream = JetStreamConfig{};
  ok.nats->jetstream->stream = "MD";
  ASSERT_TRUE(validate(ok)) << validate(ok).error().message();

  EXPECT_EQ(refusal(RelayConfig{}), "no --ring, --nats-in or --nats-in-broker given");
  RelayConfig c = ok;
  c.nats->jetstream->stream = "md.ticks";
  EXPECT_NE(refusal(c).find("a stream name is non-empty without '.'"), std::string::npos);
  c = ok;
  c.nats->jetstream->max_pending = 0;
  EXPECT_EQ(refusal(c), "--jetstream-max-pending must be at least 1");
  c = ok;
  c.nats->jetstream->replicas = 6;
  EXPECT_EQ(refusal(c), "--stream-replicas is 1..5");
  c = ok;
  c.rings.push_back({"/dev/shm/b.ring", "md", true});  // md*: no "PREFIX." to derive a stream subject from
  EXPECT_NE(refusal(c).find("give --stream-subjects"), std::string::npos);
  c.nats->jetstream->subjects = {"md.>"};
  EXPECT_TRUE(validate(c));
  c = ok;
  c.rings.push_back(c.rings.front());
  EXPECT_EQ(refusal(c), "ring /dev/shm/a.ring is given twice");
  c = ok;
  c.broker = broker::BrokerConfig{};
  c.broker->ws_port = 1;
  c.broker->tls.ws = true;  // wss without a certificate
  EXPECT_FALSE(refusal(c).empty()) << "the embedded broker's own checks";
}

TEST(RelayOptionsTest, ParseErrorsAreInvalidConfigNamingTheInput) {
  const auto route = parse_ring_route("/dev/shm/x.ring");
  ASSERT_FALSE(route);
  EXPECT_EQ(route.error().code, RelayError::Code::kInvalidConfig);
  EXPECT_EQ(route.error().sys_errno, 0);
  EXPECT_EQ(route.error().detail, "--ring '/dev/shm/x.ring': expected PATH=CHANNEL or PATH=PREFIX*");
  const auto hp = parse_host_port("127.0.0.1:x");
  ASSERT_FALSE(hp);
  EXPECT_EQ(hp.error().code, RelayError::Code::kInvalidConfig);
  EXPECT_EQ(hp.error().message(), "invalid configuration: '127.0.0.1:x': expected HOST:PORT with a port 0..65535");
}

TEST(RelayOptionsTest, HostPortFormats) {
  auto a = parse_host_port("127.0.0.1:6390");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 6390);
  auto b = parse_host_port("[::1]:0");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 0);
  auto c = parse_host_port("9390");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, 9390);
  EXPECT_FALSE(parse_host_port("127.0.0.1:65536"));
  EXPECT_FALSE(parse_host_port("127.0.0.1:x"));
  EXPECT_FALSE(parse_host_port("[::1]6390"));
}

// The relay's durations (--stream-max-age, --jetstream-ack-wait, ...) are the
// broker's grammar with bare numbers refused.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s) {
  return broker::parse_duration(s, broker::BareDuration::kRefused);
}

TEST(RelayOptionsTest, DurationsTakeAUnit) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("0"), milliseconds(0));
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("30s"), milliseconds(30'000));
  EXPECT_EQ(parse_duration("15m"), milliseconds(900'000));
  EXPECT_EQ(parse_duration("24h"), milliseconds(86'400'000));
  EXPECT_EQ(parse_duration("7d"), milliseconds(604'800'000));
  for (const char* bad : {"", "10", "s", "-1s", "1.5h", "10w", "1 s"}) EXPECT_FALSE(parse_duration(bad)) << bad;
}

TEST(TopicPayloadTest, RoundTripsTopicAndBody) {
  alignas(8) std::byte buf[kMaxPayload];
  const std::size_t n = encode_topic_payload("AAPL", bytes("px=101.5"), buf);
  ASSERT_EQ(n, 1u + 4 + 8);
  const TopicView v = decode_topic_payload(std::span<const std::byte>(buf, n));
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.topic, "AAPL");
  EXPECT_EQ(v.body, "px=101.5");
}

TEST(TopicPayloadTest, EmptyBodyIsAllowed) {
  alignas(8) std::byte buf[kMaxPayload];
  const std::size_t n = encode_topic_payload("t", {}, buf);
  ASSERT_EQ(n, 2u);
  const TopicView v = decode_topic_payload(std::span<const std::byte>(buf, n));
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.topic, "t");
  EXPECT_TRUE(v.body.empty());
}

TEST(TopicPayloadTest, EncodeRefusesWhatDoesNotFit) {
  alignas(8) std::byte buf[kMaxPayload];
  EXPECT_EQ(encode_topic_payload("", bytes("x"), buf), 0u);
  EXPECT_EQ(encode_topic_payload(std::string(kMaxPayload - 1, 'a'), {}, buf), kMaxPayload);  // fills it exactly
  EXPECT_EQ(encode_topic_payload(std::string(kMaxPayload - 1, 'a'), bytes("x"), buf), 0u);
  EXPECT_EQ(encode_topic_payload(std::string_view("a\0b", 3), {}, buf), 0u);
  // A buffer for a larger ring's messages takes the longest topic a length
  // byte counts, and a long body; never a longer topic.
  std::vector<std::byte> big(1 + kMaxTopic + 4096);
  EXPECT_EQ(encode_topic_payload(std::string(kMaxTopic, 'a'), std::vector<std::byte>(4096), big), big.size());
  EXPECT_EQ(encode_topic_payload(std::string(kMaxTopic + 1, 'a'), {}, big), 0u);
  EXPECT_EQ(encode_topic_payload("t", std::vector<std::byte>(big.size() - 1), big), 0u);
}

TEST(TopicPayloadTest, LongTopicAndLongBodyRoundTrip) {
  const std::string topic(kMaxTopic, 'T');
  std::string body(64 * 1024, '\0');
  for (std::size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i % 253);
  std::vector<std::byte> buf(1 + topic.size() + body.size());
  ASSERT_EQ(encode_topic_payload(topic, bytes(body), buf), buf.size());
  const TopicView v = decode_topic_payload(buf);
  ASSERT_TRUE(v.ok);
  EXPECT_EQ(v.topic, topic);
  EXPECT_TRUE(v.body == body);
}

TEST(TopicPayloadTest, DecodeRejectsMalformedPayloads) {
  EXPECT_FALSE(decode_topic_payload({}).ok);
  EXPECT_FALSE(decode_topic_payload(bytes(std::string_view("\0abc", 4))).ok);  // zero length
  EXPECT_FALSE(decode_topic_payload(bytes("\x05"
                                          "abc"))
                   .ok);  // longer than the payload
  EXPECT_FALSE(decode_topic_payload(bytes(std::string_view("\x02"
                                                           "a\0",
                                                           3)))
                   .ok);  // NUL in topic
  EXPECT_FALSE(decode_topic_payload(bytes("\xff"
                                          "x"))
                   .ok);  // the longest topic, longer than the payload
}

TEST(TopicPayloadTest, SubjectValidityFollowsNatsRules) {
  EXPECT_TRUE(is_valid_subject("md.AAPL"));
  EXPECT_TRUE(is_valid_subject("ticks"));
  EXPECT_FALSE(is_valid_subject(""));
  EXPECT_FALSE(is_valid_subject("md.*"));
  EXPECT_FALSE(is_valid_subject("md.>"));
  EXPECT_FALSE(is_valid_subject("a b"));
  EXPECT_FALSE(is_valid_subject("a..b"));
  EXPECT_FALSE(is_valid_subject(".a"));
  EXPECT_FALSE(is_valid_subject("a."));
}

// MetricsServer::start reports in the setup-error shape (docs/design.md): a
// malformed address by text, a taken port by its errno.
TEST(MetricsServerTest, SetupErrorsNameTheAddressAndCarryTheErrno) {
  auto bad = MetricsServer::start("not-an-address", 0, [] { return std::string(); });
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, RelayError::Code::kMetrics);
  EXPECT_EQ(bad.error().message().rfind("metrics: address 'not-an-address'", 0), 0u) << bad.error().message();

  auto first = MetricsServer::start("127.0.0.1", 0, [] { return std::string(); });
  ASSERT_TRUE(first) << first.error().message();
  auto taken = MetricsServer::start("127.0.0.1", (*first)->port(), [] { return std::string(); });
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().code, RelayError::Code::kMetrics);
  EXPECT_EQ(taken.error().sys_errno, EADDRINUSE) << taken.error().message();
}

TEST(RelayMetricsTest, RingAndNatsSeriesParseWithTheirLabels) {
  RingStats fixed;
  fixed.path = "/dev/shm/a\"b.ring";
  fixed.name = "ticks";
  fixed.state = RingState::kRelaying;
  fixed.relayed = 42;
  fixed.lag = 3;
  RingStats topic;
  topic.path = "/dev/shm/md.ring";
  topic.name = "md.";
  topic.topic_in_payload = true;
  NatsStats nats;
  nats.status = "connected";
  nats.published = 42;
  nats.buffered_bytes = -1;
  const RingStats rings[] = {fixed, topic};
  broker::PrometheusWriter w;
  write_relay_metrics(w, rings, &nats);
  const std::string text = w.take();
  const auto m = test::parse_prometheus(text);
  ASSERT_TRUE(m.ok()) << m.error << "\n" << text;
  EXPECT_EQ(m.value("ringcast_relay_ring_messages_total", {{"ring", fixed.path}, {"channel", "ticks"}}), 42);
  EXPECT_EQ(m.value("ringcast_relay_ring_lag_messages", {{"channel", "ticks"}}), 3);
  EXPECT_EQ(m.types.at("ringcast_relay_ring_lag_messages"), "gauge");
  EXPECT_EQ(m.value("ringcast_relay_ring_messages_total", {{"channel", "md.*"}}), 0);
  EXPECT_EQ(m.value("ringcast_relay_ring_state", {{"channel", "ticks"}, {"state", "relaying"}}), 1);
  EXPECT_EQ(m.value("ringcast_relay_ring_state", {{"channel", "ticks"}, {"state", "failed"}}), 0);
  EXPECT_EQ(m.value("ringcast_relay_nats_connected"), 1);
  EXPECT_EQ(m.value("ringcast_relay_nats_published_total"), 42);
  EXPECT_EQ(m.value("ringcast_relay_nats_buffered_bytes"), -1);

  write_relay_metrics(w, rings, nullptr);
  const auto without_nats = test::parse_prometheus(w.take());
  ASSERT_TRUE(without_nats.ok()) << without_nats.error;
  EXPECT_FALSE(without_nats.has_family("ringcast_relay_nats_connected"));
}

}  // namespace
}  // namespace ringcast::relay
