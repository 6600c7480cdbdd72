#include "ringcast/relay/relay.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "relay/nats_sink.hpp"
#include "relay/prometheus.hpp"
#include "relay/ring_reader.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

struct Relay::Impl {
  RelayConfig config;
  LogFn log;
  std::unique_ptr<broker::Broker> broker;
  std::unique_ptr<NatsSink> nats;
  std::vector<std::unique_ptr<RingReader>> readers;
  std::vector<std::thread> threads;
  // Set once by stop(); readers poll it between batches.
  std::atomic<bool> stop_flag{false};

  std::mutex stop_mu;        // serialises stop(): one caller joins, the others wait
  bool stopped = false;      // guarded by stop_mu

  mutable std::mutex failure_mu;
  std::string failure;       // guarded by failure_mu; the first fatal error

  void fail(const std::string& why) {
    {
      std::lock_guard lock(failure_mu);
      if (failure.empty()) failure = why;
    }
    log(LogLevel::error, why);
  }

  // "# Relay" INFO section; any thread.
  std::string info_text() const {
    std::string out = fmt::format("# Relay\r\nrelay_rings:{}\r\n", readers.size());
    for (std::size_t i = 0; i < readers.size(); ++i) {
      const RingStats r = readers[i]->stats();
      out += fmt::format(
          "ring_{}:path={},channel={}{},state={},consumer={},producer_alive={},relayed={},batches={},lag={},"
          "lapped={},malformed={},deliveries={},refused={},nats_published={},nats_failed={},reopens={}\r\n",
          i, r.path, r.name, r.topic_in_payload ? "*" : "", to_string(r.state), r.consumer_id,
          r.producer_alive ? 1 : 0, r.relayed, r.batches, r.lag, r.lapped, r.malformed, r.deliveries,
          r.refused, r.nats_published, r.nats_failed, r.reopens);
    }
    if (nats) {
      const NatsStats n = nats->stats();
      out += fmt::format(
          "nats_status:{}\r\nnats_published:{}\r\nnats_buffer_full:{}\r\nnats_failed:{}\r\nnats_disconnects:{}\r\n"
          "nats_reconnects:{}\r\nnats_buffered_bytes:{}\r\nnats_out_msgs:{}\r\n",
          n.status, n.published, n.buffer_full, n.failed, n.disconnects, n.reconnects, n.buffered_bytes, n.out_msgs);
    }
    return out;
  }

  void do_stop() noexcept {
    std::lock_guard lock(stop_mu);
    if (stopped) return;
    // release: pairs with the readers' acquire loads (RingReader::stopping).
    stop_flag.store(true, std::memory_order_release);
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    if (nats) nats->close(std::chrono::milliseconds(1000));
    if (broker) {
      broker->stop();
      broker->wait();
    }
    stopped = true;
  }
};

namespace {

void default_log(LogLevel level, std::string_view text) {
  const char* tag = level == LogLevel::error ? "error: " : level == LogLevel::warning ? "warning: " : "";
  // One fputs per line: stdio locks the stream, so lines from threads do not interleave.
  const std::string line = fmt::format("ringcast-relay: {}{}\n", tag, text);
  std::fputs(line.c_str(), stderr);
}

}  // namespace

tl::expected<std::unique_ptr<Relay>, RelayError> Relay::start(RelayConfig config) {
  using Code = RelayError::Code;
  if (config.rings.empty()) return tl::unexpected(RelayError{Code::kInvalidConfig, 0, "no --ring given"});
  if (!config.broker && !config.nats) {
    return tl::unexpected(RelayError{Code::kInvalidConfig, 0, "no sink: enable the broker, NATS or both"});
  }
  for (const RingRoute& r : config.rings) {
    if (r.path.empty()) return tl::unexpected(RelayError{Code::kInvalidConfig, 0, "a ring has an empty path"});
    if (!r.topic_in_payload && r.name.empty()) {
      return tl::unexpected(RelayError{Code::kInvalidConfig, 0, fmt::format("ring {}: empty channel", r.path)});
    }
    if (config.nats && !r.topic_in_payload && !is_valid_subject(r.name)) {
      return tl::unexpected(RelayError{
          Code::kInvalidConfig, 0, fmt::format("ring {}: '{}' is not a valid NATS subject to publish on", r.path, r.name)});
    }
  }
  for (std::size_t i = 0; i < config.rings.size(); ++i) {
    for (std::size_t j = i + 1; j < config.rings.size(); ++j) {
      if (config.rings[i].path == config.rings[j].path) {
        return tl::unexpected(RelayError{Code::kInvalidConfig, 0,
                                         fmt::format("ring {} is given twice", config.rings[i].path)});
      }
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->log = config.log ? config.log : LogFn(default_log);
  impl->config = std::move(config);
  Impl& im = *impl;

  if (im.config.broker) {
    auto b = broker::Broker::start(*im.config.broker);
    if (!b) return tl::unexpected(RelayError{Code::kBroker, b.error().sys_errno, b.error().message()});
    im.broker = std::move(*b);
    // INFO relay (and a bare INFO / INFO all) shows the per-ring section. The
    // provider runs on broker I/O threads until broker->wait() returns in
    // do_stop(), while im and its readers are alive.
    im.broker->set_info_provider([&im](std::string_view section) -> std::string {
      if (section.empty() || section == "all" || section == "default" || section == "everything" ||
          section == "relay") {
        return im.info_text();
      }
      return {};
    });
  }
  if (im.config.nats) {
    auto n = NatsSink::connect(*im.config.nats, im.log);
    if (!n) {
      if (im.broker) {
        im.broker->stop();
        im.broker->wait();
      }
      return tl::unexpected(RelayError{Code::kNats, 0, n.error()});
    }
    im.nats = std::move(*n);
  }
  for (const RingRoute& route : im.config.rings) {
    im.readers.push_back(std::make_unique<RingReader>(route, im.broker.get(), im.nats.get(), im.config.batch,
                                                      im.config.poll_interval, im.log, im.stop_flag,
                                                      [&im](const std::string& why) { im.fail(why); }));
  }
  try {
    for (auto& r : im.readers) im.threads.emplace_back([reader = r.get()] { reader->run(); });
  } catch (const std::system_error& e) {
    im.do_stop();
    return tl::unexpected(RelayError{Code::kThread, e.code().value(), "reader thread"});
  }
  return std::unique_ptr<Relay>(new Relay(std::move(impl)));
}

Relay::Relay(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Relay::~Relay() {
  if (impl_) impl_->do_stop();
}

void Relay::stop() noexcept { impl_->do_stop(); }

broker::Broker* Relay::broker() noexcept { return impl_->broker.get(); }

std::string Relay::failure() const {
  std::lock_guard lock(impl_->failure_mu);
  return impl_->failure;
}

std::vector<RingStats> Relay::ring_stats() const {
  std::vector<RingStats> out;
  out.reserve(impl_->readers.size());
  for (const auto& r : impl_->readers) out.push_back(r->stats());
  return out;
}

NatsStats Relay::nats_stats() const {
  if (!impl_->nats) return {};
  return impl_->nats->stats();
}

std::string Relay::info_text() const { return impl_->info_text(); }

std::string Relay::prometheus_text() const {
  PrometheusWriter w;
  const auto rings = ring_stats();
  const auto ring_labels = [](const RingStats& r) {
    return Labels{{"ring", r.path}, {"channel", r.topic_in_payload ? r.name + "*" : r.name}};
  };
  struct Counter {
    const char* name;
    const char* help;
    std::uint64_t RingStats::*field;
    bool gauge;
  };
  static constexpr Counter kRingSeries[] = {
      {"ringcast_relay_ring_messages_total", "Messages taken from the ring and published.", &RingStats::relayed, false},
      {"ringcast_relay_ring_batches_total", "Drains that returned at least one message.", &RingStats::batches, false},
      {"ringcast_relay_ring_lag_messages", "Messages published on the ring not yet taken by the relay.",
       &RingStats::lag, true},
      {"ringcast_relay_ring_lapped_total", "Lossy ring: messages overwritten before the relay read them.",
       &RingStats::lapped, false},
      {"ringcast_relay_ring_malformed_total", "Topic-in-payload messages that did not parse (not published).",
       &RingStats::malformed, false},
      {"ringcast_relay_ring_deliveries_total", "Broker deliveries (subscriptions reached) of this ring's messages.",
       &RingStats::deliveries, false},
      {"ringcast_relay_ring_refused_total",
       "Broker publishes refused by a block-policy subscriber and retried (the ring is not drained meanwhile).",
       &RingStats::refused, false},
      {"ringcast_relay_ring_nats_published_total", "Messages accepted by libnats.", &RingStats::nats_published,
       false},
      {"ringcast_relay_ring_nats_failed_total", "Messages libnats refused (buffer full, closed, bad subject).",
       &RingStats::nats_failed, false},
      {"ringcast_relay_ring_reopens_total", "Times the ring file was replaced and reopened.", &RingStats::reopens,
       false},
  };
  for (const Counter& c : kRingSeries) {
    w.header(c.name, c.help, c.gauge ? "gauge" : "counter");
    for (const auto& r : rings) w.sample(c.name, ring_labels(r), static_cast<double>(r.*c.field));
  }
  w.header("ringcast_relay_ring_producer_alive", "1 when a live process holds the ring's producer role.", "gauge");
  for (const auto& r : rings) w.sample("ringcast_relay_ring_producer_alive", ring_labels(r), r.producer_alive ? 1 : 0);
  w.header("ringcast_relay_ring_state", "The reader's state (one series per state, 1 for the current one).", "gauge");
  for (const auto& r : rings) {
    for (const RingState s : {RingState::waiting_for_ring, RingState::waiting_for_producer, RingState::relaying,
                              RingState::stopped, RingState::failed}) {
      Labels l = ring_labels(r);
      l.emplace_back("state", std::string(to_string(s)));
      w.sample("ringcast_relay_ring_state", l, r.state == s ? 1 : 0);
    }
  }

  if (impl_->nats) {
    const NatsStats n = impl_->nats->stats();
    w.header("ringcast_relay_nats_connected", "1 while libnats is connected.", "gauge");
    w.sample("ringcast_relay_nats_connected", {}, n.status == "connected" ? 1 : 0);
    const std::pair<const char*, std::uint64_t> counters[] = {
        {"ringcast_relay_nats_published_total", n.published},
        {"ringcast_relay_nats_buffer_full_total", n.buffer_full},
        {"ringcast_relay_nats_failed_total", n.failed},
        {"ringcast_relay_nats_disconnects_total", n.disconnects},
        {"ringcast_relay_nats_reconnects_total", n.reconnects},
        {"ringcast_relay_nats_out_messages_total", n.out_msgs},
        {"ringcast_relay_nats_out_bytes_total", n.out_bytes},
    };
    for (const auto& [name, value] : counters) {
      w.header(name, "libnats connection statistics (docs/relay.md).", "counter");
      w.sample(name, {}, static_cast<double>(value));
    }
    w.header("ringcast_relay_nats_buffered_bytes", "Bytes libnats holds not yet written (-1 once closed).", "gauge");
    w.sample("ringcast_relay_nats_buffered_bytes", {}, static_cast<double>(n.buffered_bytes));
  }

  if (impl_->broker) {
    const broker::BrokerStats b = impl_->broker->stats();
    w.header("ringcast_broker_connected_clients", "Connected clients.", "gauge");
    w.sample("ringcast_broker_connected_clients", {}, static_cast<double>(b.connected_clients));
    w.header("ringcast_broker_messages_published_total", "Messages published into the broker.", "counter");
    w.sample("ringcast_broker_messages_published_total", {}, static_cast<double>(b.messages_published));
    w.header("ringcast_broker_deliveries_total", "Frames offered to connection queues.", "counter");
    w.sample("ringcast_broker_deliveries_total", {}, static_cast<double>(b.deliveries));
    w.header("ringcast_broker_dropped_total", "Frames lost, by reason.", "counter");
    w.sample("ringcast_broker_dropped_total", {{"reason", "hard_limit"}}, static_cast<double>(b.dropped_hard_limit));
    w.sample("ringcast_broker_dropped_total", {{"reason", "soft_limit"}}, static_cast<double>(b.dropped_soft_limit));
    w.sample("ringcast_broker_dropped_total", {{"reason", "disconnect"}}, static_cast<double>(b.dropped_disconnect));
    w.header("ringcast_broker_slow_disconnects_total", "Connections closed by the disconnect policy.", "counter");
    w.sample("ringcast_broker_slow_disconnects_total", {}, static_cast<double>(b.slow_disconnects));
    w.header("ringcast_broker_refused_publishes_total", "Messages refused for a block-policy subscriber with no room.",
             "counter");
    w.sample("ringcast_broker_refused_publishes_total", {}, static_cast<double>(b.refused_publishes));
    w.header("ringcast_broker_publisher_stalls_total", "Publisher pauses for pacing.", "counter");
    w.sample("ringcast_broker_publisher_stalls_total", {}, static_cast<double>(b.publisher_stalls));
    w.header("ringcast_broker_publisher_stall_seconds_total", "Total time publishers were paused for pacing.",
             "counter");
    w.sample("ringcast_broker_publisher_stall_seconds_total", {}, static_cast<double>(b.publisher_stall_ns) / 1e9);
    w.header("ringcast_broker_slow_subscribers_total",
             "Subscriber queues over the pace mark for max_stall (no longer pacing publishers).", "counter");
    w.sample("ringcast_broker_slow_subscribers_total", {}, static_cast<double>(b.slow_subscribers));

    // Per connection.
    struct Conn {
      Labels labels;
      double queued_bytes = 0, queued_frames = 0, subscriptions = 0, notices = 0;
      double dropped[3] = {0, 0, 0};  // hard, soft, disconnect
      double sent = 0;
    };
    std::vector<Conn> conns;
    for (const broker::ConnectionStats& c : impl_->broker->connection_stats()) {
      Conn x;
      x.labels = {{"id", std::to_string(c.id)}, {"addr", c.peer}, {"name", c.name}};
      x.queued_bytes = static_cast<double>(c.queued_bytes);
      x.queued_frames = static_cast<double>(c.queued_frames);
      x.subscriptions = static_cast<double>(c.subscriptions);
      x.notices = static_cast<double>(c.loss_notices);
      x.dropped[0] = static_cast<double>(c.dropped_hard_limit);
      x.dropped[1] = static_cast<double>(c.dropped_soft_limit);
      x.dropped[2] = static_cast<double>(c.dropped_disconnect);
      x.sent = static_cast<double>(c.sent_frames);
      conns.push_back(std::move(x));
    }
    w.header("ringcast_broker_connection_queued_bytes", "Bytes queued or in flight for the connection (omem).",
             "gauge");
    for (const auto& c : conns) w.sample("ringcast_broker_connection_queued_bytes", c.labels, c.queued_bytes);
    w.header("ringcast_broker_connection_queued_frames", "Frames queued for the connection.", "gauge");
    for (const auto& c : conns) w.sample("ringcast_broker_connection_queued_frames", c.labels, c.queued_frames);
    w.header("ringcast_broker_connection_subscriptions", "Channels plus patterns the connection subscribes to.",
             "gauge");
    for (const auto& c : conns) w.sample("ringcast_broker_connection_subscriptions", c.labels, c.subscriptions);
    w.header("ringcast_broker_connection_sent_frames_total", "Frames handed to the connection's socket writer.",
             "counter");
    for (const auto& c : conns) w.sample("ringcast_broker_connection_sent_frames_total", c.labels, c.sent);
    w.header("ringcast_broker_connection_dropped_total", "Frames the connection lost, by reason.", "counter");
    static constexpr const char* kReasons[] = {"hard_limit", "soft_limit", "disconnect"};
    for (const auto& c : conns) {
      for (std::size_t i = 0; i < 3; ++i) {
        Labels l = c.labels;
        l.emplace_back("reason", kReasons[i]);
        w.sample("ringcast_broker_connection_dropped_total", l, c.dropped[i]);
      }
    }
    w.header("ringcast_broker_connection_loss_notices_total", "Loss notices queued to the connection.", "counter");
    for (const auto& c : conns) w.sample("ringcast_broker_connection_loss_notices_total", c.labels, c.notices);
  }
  return w.take();
}

}  // namespace ringcast::relay
