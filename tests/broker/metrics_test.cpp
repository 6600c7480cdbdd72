// Broker::metrics_text(): the writer, the exposition format as a scraper reads
// it (tests/common/prometheus_text.hpp), the broker's series after real
// traffic from loopback clients, and the MetricsProvider hook.
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "eventually.hpp"
#include "fd_io.hpp"
#include "prometheus_text.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/metrics.hpp"
#include "tcp_loopback.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;

TEST(PrometheusWriterTest, WritesHeadersSamplesAndEscapedLabels) {
  PrometheusWriter w;
  w.header("x_total", "Things.", MetricType::kCounter);
  w.sample("x_total", {{"ring", "/dev/shm/a\"b\\c\nd"}}, 42);
  w.sample("x_total", {}, 0.5);
  w.metric("y", "One gauge.", MetricType::kGauge, 9007199254740993.0);
  const std::string text = w.take();
  EXPECT_EQ(text,
            "# HELP x_total Things.\n# TYPE x_total counter\n"
            "x_total{ring=\"/dev/shm/a\\\"b\\\\c\\nd\"} 42\n"
            "x_total 0.5\n"
            "# HELP y One gauge.\n# TYPE y gauge\n"
            "y 9007199254740992\n");
  EXPECT_EQ(w.take(), "");
  const auto parsed = test::parse_prometheus(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  EXPECT_EQ(parsed.value("x_total", {{"ring", "/dev/shm/a\"b\\c\nd"}}), 42);
}

TEST(PrometheusTextTest, RefusesSamplesBeforeTheirTypeAndSplitFamilies) {
  EXPECT_FALSE(test::parse_prometheus("x 1\n").ok());
  EXPECT_FALSE(test::parse_prometheus("# TYPE x gauge\nx 1\n").ok());  // no HELP
  EXPECT_FALSE(
      test::parse_prometheus("# HELP x h\n# TYPE x gauge\n# HELP y h\n# TYPE y gauge\nx 1\ny 1\nx{a=\"b\"} 2\n").ok());
  EXPECT_FALSE(test::parse_prometheus("# HELP x h\n# TYPE x gauge\nx{a=\"b} 1\n").ok());
  EXPECT_FALSE(test::parse_prometheus("# HELP x h\n# TYPE x gauge\nx one\n").ok());
  EXPECT_TRUE(test::parse_prometheus("# HELP x h\n# TYPE x gauge\nx{a=\"b\",c=\"d\"} 1\nx 2.5\n").ok());
}

std::unique_ptr<Broker> start_broker() {
  BrokerConfig cfg;
  cfg.bind_address = "127.0.0.1";
  cfg.port = 0;
  cfg.io_threads = 1;
  auto b = Broker::start(cfg);
  EXPECT_TRUE(b.has_value()) << (b ? "" : b.error().message());
  return b ? std::move(*b) : nullptr;
}

// Sends `command` and reads until `reply` has arrived (bounded).
bool roundtrip(int fd, const std::string& command, std::string_view reply) {
  std::string got;
  return test::send_all(fd, command) && test::read_until(fd, got, reply, test::deadline_in(20s));
}

TEST(BrokerMetricsTest, IdleBrokerHasEveryFamilyAndParses) {
  auto broker = start_broker();
  ASSERT_NE(broker, nullptr);
  const auto m = test::parse_prometheus(broker->metrics_text());
  ASSERT_TRUE(m.ok()) << m.error;
  for (const char* family :
       {"ringcast_broker_connected_clients", "ringcast_broker_connections_total",
        "ringcast_broker_rejected_connections_total", "ringcast_broker_commands_processed_total",
        "ringcast_broker_messages_published_total", "ringcast_broker_deliveries_total", "ringcast_broker_dropped_total",
        "ringcast_broker_conflated_total", "ringcast_broker_slow_disconnects_total",
        "ringcast_broker_refused_publishes_total", "ringcast_broker_publisher_stalls_total",
        "ringcast_broker_publisher_stall_seconds_total", "ringcast_broker_slow_subscribers_total",
        "ringcast_broker_channels", "ringcast_broker_patterns", "ringcast_broker_shard_channels",
        "ringcast_broker_connection_queued_bytes", "ringcast_broker_connection_dropped_total",
        "ringcast_broker_connection_conflated_total"}) {
    EXPECT_TRUE(m.has_family(family)) << family;
  }
  EXPECT_EQ(m.types.at("ringcast_broker_deliveries_total"), "counter");
  EXPECT_EQ(m.types.at("ringcast_broker_shard_channels"), "gauge");
  EXPECT_EQ(m.value("ringcast_broker_messages_published_total"), 0);
  EXPECT_EQ(m.value("ringcast_broker_dropped_total", {{"reason", "hard_limit"}}), 0);
}

TEST(BrokerMetricsTest, SeriesCountTrafficFromRealClients) {
  auto broker = start_broker();
  ASSERT_NE(broker, nullptr);
  const int sub = test::connect_loopback(broker->port());
  ASSERT_GE(sub, 0);
  ASSERT_TRUE(roundtrip(sub, "CLIENT SETNAME watcher\r\n", "+OK\r\n"));
  ASSERT_TRUE(roundtrip(sub, "SUBSCRIBE t\r\n", ":1\r\n"));
  ASSERT_TRUE(roundtrip(sub, "PSUBSCRIBE t*\r\n", ":2\r\n"));
  ASSERT_TRUE(roundtrip(sub, "SSUBSCRIBE s\r\n", ":1\r\n"));
  const int pub = test::connect_loopback(broker->port());
  ASSERT_GE(pub, 0);
  ASSERT_TRUE(roundtrip(pub, "PUBLISH t hello\r\n", ":2\r\n"));  // the channel and the pattern
  ASSERT_TRUE(roundtrip(pub, "SPUBLISH s hi\r\n", ":1\r\n"));
  ASSERT_EQ(broker->publish("t", "from the embedder").receivers, 2u);
  std::string got;
  ASSERT_TRUE(test::read_until(sub, got, "from the embedder", test::deadline_in(20s)));

  const std::string text = broker->metrics_text();
  const auto m = test::parse_prometheus(text);
  ASSERT_TRUE(m.ok()) << m.error << "\n" << text;
  EXPECT_EQ(m.value("ringcast_broker_connected_clients"), 2) << text;
  EXPECT_EQ(m.value("ringcast_broker_connections_total"), 2);
  EXPECT_EQ(m.value("ringcast_broker_messages_published_total"), 3);
  EXPECT_EQ(m.value("ringcast_broker_deliveries_total"), 5);
  EXPECT_EQ(m.value("ringcast_broker_channels"), 1);
  EXPECT_EQ(m.value("ringcast_broker_patterns"), 1);
  EXPECT_EQ(m.value("ringcast_broker_shard_channels"), 1);
  EXPECT_GE(*m.value("ringcast_broker_commands_processed_total"), 6);
  EXPECT_EQ(m.value("ringcast_broker_connection_subscriptions", {{"name", "watcher"}}), 3);
  // The subscriber's five frames left through its writer (the test read them).
  EXPECT_GE(m.value("ringcast_broker_connection_sent_frames_total", {{"name", "watcher"}}).value_or(0), 5);
  EXPECT_EQ(m.value("ringcast_broker_connection_dropped_total", {{"name", "watcher"}, {"reason", "soft_limit"}}), 0);
  ::close(pub);
  ::close(sub);
  EXPECT_TRUE(test::eventually(
      [&] { return test::parse_prometheus(broker->metrics_text()).value("ringcast_broker_connected_clients") == 0; }));
}

TEST(BrokerMetricsTest, ProviderSeriesFollowTheBrokersUntilRemoved) {
  auto broker = start_broker();
  ASSERT_NE(broker, nullptr);
  int calls = 0;
  broker->set_metrics_provider([&calls](PrometheusWriter& w) {
    ++calls;
    w.metric("embedder_widgets_total", "Widgets.", MetricType::kCounter, 7);
  });
  const std::string text = broker->metrics_text();
  const auto m = test::parse_prometheus(text);
  ASSERT_TRUE(m.ok()) << m.error;
  EXPECT_EQ(m.value("embedder_widgets_total"), 7);
  EXPECT_GT(text.find("embedder_widgets_total"), text.find("ringcast_broker_connection_dropped_total"));
  EXPECT_EQ(calls, 1);
  broker->set_metrics_provider({});
  EXPECT_FALSE(test::parse_prometheus(broker->metrics_text()).has_family("embedder_widgets_total"));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace ringcast::broker
