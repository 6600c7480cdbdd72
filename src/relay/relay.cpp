#include "ringcast/relay/relay.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "relay/broker_target.hpp"
#include "relay/jetstream_publisher.hpp"
#include "relay/metrics.hpp"
#include "relay/nats_connection.hpp"
#include "relay/nats_ingress.hpp"
#include "relay/ring_reader.hpp"
#include "relay/ring_target.hpp"
#include "relay/sinks/broker_sink.hpp"
#include "relay/sinks/credit_window.hpp"
#include "relay/sinks/jetstream_sink.hpp"
#include "relay/sinks/nats_sink.hpp"
#include "ringcast/relay/nats_cluster.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

struct Relay::Impl {
  RelayConfig config;
  LogFn log;
  // Before broker: the broker calls its cluster link until it is destroyed.
  std::unique_ptr<NatsCluster> cluster;
  std::unique_ptr<broker::Broker> broker;
  std::unique_ptr<NatsConnection> nats;
  // After nats: destroyed first, so its JetStream context goes before the connection.
  std::unique_ptr<JetStreamPublisher> jetstream;
  std::vector<std::unique_ptr<RingReader>> readers;
  std::vector<std::unique_ptr<NatsIngress>> ingress;  // --nats-in: rings first, then the broker's
  std::vector<std::thread> threads;
  // Set once by stop(); readers poll it between batches.
  std::atomic<bool> stop_flag{false};

  std::mutex stop_mu;    // serialises stop(): one caller joins, the others wait
  bool stopped = false;  // guarded by stop_mu

  mutable std::mutex failure_mu;
  std::string failure;  // guarded by failure_mu; the first fatal error

  void fail(const std::string& why) {
    {
      std::lock_guard lock(failure_mu);
      if (failure.empty()) failure = why;
    }
    log(LogLevel::kError, why);
  }

  // "# Relay" INFO section; any thread.
  std::string info_text() const {
    std::string out = fmt::format("# Relay\r\nrelay_rings:{}\r\n", readers.size());
    for (std::size_t i = 0; i < readers.size(); ++i) {
      const RingStats r = readers[i]->stats();
      out += fmt::format(
          "ring_{}:path={},channel={}{},state={},consumer={},producer_alive={},relayed={},batches={},lag={},"
          "lapped={},malformed={},deliveries={},refused={},nats_published={},nats_failed={},reopens={}\r\n",
          i, r.path, r.name, r.topic_in_payload ? "*" : "", to_string(r.state), r.consumer_id, r.producer_alive ? 1 : 0,
          r.relayed, r.batches, r.lag, r.lapped, r.malformed, r.deliveries, r.refused, r.nats_published, r.nats_failed,
          r.reopens);
      if (r.window) {
        out += fmt::format(
            "ring_{}_window:size={},in_flight={},ingresses={},waits={},probes={},acks={},expired={},left={},"
            "overflow={}\r\n",
            i, r.window_size, r.window_in_flight, r.window_ingresses, r.window_waits, r.window_probes, r.window_acks,
            r.window_expired, r.window_left, r.window_overflow);
      }
    }
    out += ingress_info_lines(ingress_stats());
    if (nats) {
      const NatsStats n = nats_stats();
      out += fmt::format(
          "nats_status:{}\r\nnats_published:{}\r\nnats_buffer_full:{}\r\nnats_failed:{}\r\nnats_disconnects:{}\r\n"
          "nats_reconnects:{}\r\nnats_buffered_bytes:{}\r\nnats_out_msgs:{}\r\n",
          n.status, n.published, n.buffer_full, n.failed, n.disconnects, n.reconnects, n.buffered_bytes, n.out_msgs);
      if (n.jetstream) {
        out += fmt::format(
            "nats_js_published:{}\r\nnats_js_acked:{}\r\nnats_js_duplicates:{}\r\nnats_js_retried:{}\r\n"
            "nats_js_failed:{}\r\nnats_js_pending:{}\r\nnats_js_stalls:{}\r\n",
            n.js_published, n.js_acked, n.js_duplicates, n.js_retried, n.js_failed, n.js_pending, n.js_stalls);
      }
    }
    return out;
  }

  // The relay's Prometheus series; any thread.
  void write_metrics(broker::PrometheusWriter& w) const {
    const std::vector<RingStats> rings = ring_stats();
    if (nats) {
      const NatsStats n = nats_stats();
      write_relay_metrics(w, rings, &n);
    } else {
      write_relay_metrics(w, rings, nullptr);
    }
    write_ingress_metrics(w, ingress_stats());
  }

  std::vector<NatsIngressStats> ingress_stats() const {
    std::vector<NatsIngressStats> out;
    out.reserve(ingress.size());
    for (const auto& i : ingress) out.push_back(i->stats());
    return out;
  }

  // The connection's statistics and, with --jetstream, the publisher's.
  NatsStats nats_stats() const {
    NatsStats n = nats->stats();
    if (jetstream) jetstream->stats(n);
    return n;
  }

  std::vector<RingStats> ring_stats() const {
    std::vector<RingStats> out;
    out.reserve(readers.size());
    for (const auto& r : readers) out.push_back(r->stats());
    return out;
  }

  void do_stop() noexcept {
    std::lock_guard lock(stop_mu);
    if (stopped) return;
    // First the ingress: nothing more reaches the broker or the rings, and no
    // subscription outlives the connection.
    for (auto& i : ingress) i->stop();
    // release: pairs with the readers' acquire loads (RingReader::stopping).
    stop_flag.store(true, std::memory_order_release);
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
    // Outstanding JetStream acks first (what stays unacked is counted failed),
    // then the connection.
    if (jetstream) {
      jetstream->close(
          std::max<std::chrono::milliseconds>(config.nats->jetstream->ack_timeout, std::chrono::milliseconds(1000)));
    }
    if (nats) nats->close(std::chrono::milliseconds(1000));
    if (cluster) cluster->stop();  // nothing more from the other nodes
    if (broker) {
      broker->stop();
      broker->wait();
    }
    stopped = true;
  }
};

namespace {

void default_log(LogLevel level, std::string_view text) {
  const char* tag = level == LogLevel::kError ? "error: " : level == LogLevel::kWarning ? "warning: " : "";
  // One fputs per line: stdio locks the stream, so lines from threads do not interleave.
  const std::string line = fmt::format("ringcast-relay: {}{}\n", tag, text);
  std::fputs(line.c_str(), stderr);
}

// A --ring path that holds something other than a ring (a typo naming another
// file) fails the start, before anything registers on a ring. Waited for, by
// its reader, as before: a path with nothing at it yet, an empty file and a
// ring whose creator has not published its header (both what a ring being
// created looks like; create() sizes the file in one step).
std::optional<RelayError> refuse_non_ring(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || (S_ISREG(st.st_mode) && st.st_size == 0)) return std::nullopt;
  // Opening registers nothing and claims nothing.
  const Result<BroadcastRing> ring = BroadcastRing::open(path);
  if (ring || ring.error().code == Errc::not_ready || ring.error().sys_errno == ENOENT) return std::nullopt;
  return RelayError{RelayError::Code::kRing, 0,
                    ring.error().message() + " (a --ring path: create the ring there, or fix the path)"};
}

}  // namespace

tl::expected<std::unique_ptr<Relay>, RelayError> Relay::start(RelayConfig config) {
  using Code = RelayError::Code;
  if (auto valid = validate(config); !valid) return tl::unexpected(valid.error());
  for (const RingRoute& route : config.rings) {
    if (auto refused = refuse_non_ring(route.path)) return tl::unexpected(*refused);
  }
  auto impl = std::make_unique<Impl>();
  impl->log = config.log ? config.log : LogFn(default_log);
  impl->config = std::move(config);
  Impl& im = *impl;

  if (im.config.cluster) {
    auto c = NatsCluster::connect(*im.config.cluster, im.log);
    if (!c) return tl::unexpected(RelayError{Code::kNats, 0, c.error()});
    im.cluster = std::move(*c);
  }
  if (im.config.broker) {
    auto b = broker::Broker::start(*im.config.broker, im.cluster.get());
    if (!b) {
      if (im.cluster) im.cluster->stop();
      return tl::unexpected(RelayError{Code::kBroker, b.error().sys_errno, b.error().message()});
    }
    im.broker = std::move(*b);
    if (im.cluster) im.cluster->attach(*im.broker);
  }
  if (im.config.nats) {
    auto n = NatsConnection::connect(*im.config.nats, im.log);
    if (!n) {
      im.do_stop();
      return tl::unexpected(RelayError{Code::kNats, 0, n.error()});
    }
    im.nats = std::move(*n);
    if (im.config.nats->jetstream && !im.config.rings.empty()) {
      // validate() refused routes without subjects where none were given.
      const auto subjects = JetStreamPublisher::route_subjects(im.config.rings);
      auto js = JetStreamPublisher::create(im.nats->connection(), *im.config.nats->jetstream,
                                           subjects.value_or(std::vector<std::string>{}), im.log);
      if (!js) {
        im.nats->close(std::chrono::milliseconds(100));
        im.do_stop();
        return tl::unexpected(RelayError{Code::kNats, 0, js.error()});
      }
      im.jetstream = std::move(*js);
    }
  }
  for (const RingRoute& route : im.config.rings) {
    // The route's sinks (relay/sinks/sink.hpp), NATS first: a flush publishes
    // the NATS batch before the broker's.
    std::vector<std::unique_ptr<Sink>> sinks;
    if (im.jetstream) {
      sinks.push_back(std::make_unique<JetStreamSink>(route, *im.jetstream, im.stop_flag));
    } else if (im.nats) {
      // The credit window (docs/scale-out.md, "Credit window"): core NATS,
      // fixed subject, unless --nats-at-most-once.
      std::unique_ptr<CreditWindow> window;
      if (!route.topic_in_payload && im.config.nats->window > 0) {
        auto w = CreditWindow::start(
            im.nats->connection(),
            {im.config.nats->window, im.config.nats->probe_interval, im.config.nats->ack_timeout}, im.log);
        if (!w) {
          im.do_stop();
          return tl::unexpected(RelayError{Code::kNats, 0, fmt::format("ring {}: {}", route.path, w.error())});
        }
        window = std::move(*w);
      }
      sinks.push_back(
          std::make_unique<NatsSink>(route, *im.nats, im.stop_flag, im.config.nats->batch, std::move(window)));
    }
    if (im.broker) sinks.push_back(std::make_unique<BrokerSink>(*im.broker, im.stop_flag));
    im.readers.push_back(std::make_unique<RingReader>(route, std::move(sinks), im.config.batch, im.config.poll_interval,
                                                      im.log, im.stop_flag,
                                                      [&im](const std::string& why) { im.fail(why); }));
  }
  if (im.broker) {
    // Installed once im.nats and im.readers are final: the providers read them
    // from broker I/O threads, which may serve a client already. They run
    // until broker->wait() returns in do_stop(), while im and its readers are
    // alive. INFO relay (and a bare INFO / INFO all) shows the per-ring
    // section; metrics_text() (GET /metrics, Relay::prometheus_text) appends
    // the relay's series to the broker's.
    im.broker->set_info_provider([&im](std::string_view section) -> std::string {
      const bool all = section.empty() || section == "all" || section == "default" || section == "everything";
      std::string text;
      if (all || section == "relay") text += im.info_text();
      if (im.cluster && (all || section == "cluster")) text += im.cluster->info_text();
      return text;
    });
    im.broker->set_metrics_provider([&im](broker::PrometheusWriter& w) {
      im.write_metrics(w);
      if (im.cluster) im.cluster->write_metrics(w);
    });
  }
  // The ingress last: the broker (and its providers) and the connection are up.
  // With --jetstream each route reads the stream through its durable consumer.
  const JetStreamConfig* const jetstream_in =
      im.config.nats && im.config.nats->jetstream ? &*im.config.nats->jetstream : nullptr;
  if (jetstream_in != nullptr) {
    if (auto wrong = JetStreamIngress::check_routes(*jetstream_in,
                                                    im.config.nats_rings_in.size() + im.config.nats_broker_in.size())) {
      im.do_stop();
      return tl::unexpected(RelayError{Code::kInvalidConfig, 0, std::move(*wrong)});
    }
  }
  for (const NatsRingIngressRoute& route : im.config.nats_rings_in) {
    auto in = start_ring_ingress(im.nats->connection(), route, im.config.nats_in, im.log, jetstream_in);
    if (!in) {
      im.do_stop();
      return tl::unexpected(RelayError{Code::kNats, 0, in.error()});
    }
    im.ingress.push_back(std::move(*in));
  }
  for (const NatsBrokerIngressRoute& route : im.config.nats_broker_in) {
    auto in = start_broker_ingress(im.nats->connection(), *im.broker, route, im.config.nats_in, jetstream_in, im.log);
    if (!in) {
      im.do_stop();
      return tl::unexpected(RelayError{Code::kNats, 0, in.error()});
    }
    im.ingress.push_back(std::move(*in));
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

std::vector<RingStats> Relay::ring_stats() const { return impl_->ring_stats(); }

std::vector<NatsIngressStats> Relay::ingress_stats() const { return impl_->ingress_stats(); }

NatsStats Relay::nats_stats() const {
  if (!impl_->nats) return {};
  return impl_->nats_stats();
}

std::string Relay::info_text() const { return impl_->info_text(); }

std::string Relay::prometheus_text() const {
  if (impl_->broker) return impl_->broker->metrics_text();  // with ours, through the provider
  broker::PrometheusWriter w;
  impl_->write_metrics(w);
  return w.take();
}

}  // namespace ringcast::relay
