// The public facade (include/ringcast/broker/broker.hpp): a BrokerCore, and a
// Server listening on the RESP port with RespSessions and, with ws_port, on the
// WebSocket port with WsSessions.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "broker/core/broker_core.hpp"
#include "broker/core/refusal_hold.hpp"
#include "broker/guarantees/channel_history.hpp"
#include "broker/resp/session.hpp"
#include "broker/server/server.hpp"
#include "broker/tls/tls_context.hpp"
#include "broker/ws/http_upgrade.hpp"
#include "broker/ws/metrics_route.hpp"
#include "broker/ws/ws_session.hpp"
#include "ringcast/broker/broker.hpp"

namespace ringcast::broker {

struct Broker::Impl {
  Impl(const BrokerConfig& cfg, std::unique_ptr<ChannelHistory> history, ClusterLink* cluster)
      : core(cfg, steady_clock_source(), std::move(history), cluster), server(core, cfg.io_threads) {}

  BrokerCore core;  // declared first: the server's connections use it until they close
  // TLS listeners' context (null without TLS); before server: its connections
  // use it until they close.
  std::unique_ptr<tls::TlsContext> tls;
  // The WebSocket port's plain-HTTP routes (ws/http_upgrade.hpp); read by every
  // I/O thread, so complete before the server starts.
  ws::HttpRoutes http_routes = ws::default_http_routes();
  Server server;
  std::uint16_t port = 0;
  std::uint16_t ws_port = 0;
  std::uint16_t tls_port = 0;
};

tl::expected<std::unique_ptr<Broker>, BrokerError> Broker::start(const BrokerConfig& config, ClusterLink* cluster) {
  if (auto valid = validate(config); !valid) return tl::unexpected(std::move(valid.error()));
  BrokerConfig cfg = config;
  if (cfg.io_threads == 0) cfg.io_threads = std::max(1u, std::thread::hardware_concurrency());
  // Before any listener: a data dir that cannot be used stops the start.
  auto history = ChannelHistory::open(cfg, cluster);
  if (!history) return tl::unexpected(std::move(history.error()));
  auto impl = std::make_unique<Impl>(cfg, std::move(*history), cluster);
  // The broker's Prometheus text, with whatever the embedder adds (the relay's
  // series): one place for /metrics (docs/broker.md, "Metrics"), behind the
  // password or a token that may read every channel (ws/metrics_route.hpp).
  impl->http_routes.add("/metrics", ws::metrics_route(impl->core));
  if (cfg.tls.enabled()) {
    auto tls = tls::TlsContext::create(cfg.tls, impl->core.tls_stats());
    if (!tls) return tl::unexpected(std::move(tls.error()));
    impl->tls = std::move(*tls);
  }
  const ClientFactory resp = [](BrokerCore& core, std::string peer, Waker& waker) -> std::unique_ptr<Client> {
    return std::make_unique<RespSession>(core, std::move(peer), waker);
  };
  if (cfg.plain_port) {
    auto port = impl->server.listen(Listener{cfg.bind_address, cfg.port, resp, "-ERR max number of clients reached\r\n",
                                             nullptr, "-ERR max number of unauthenticated clients reached\r\n"});
    if (!port) return tl::unexpected(std::move(port.error()));
    impl->port = *port;
  }
  if (cfg.tls.port) {
    auto port = impl->server.listen(Listener{cfg.bind_address, *cfg.tls.port, resp, {}, impl->tls.get()});
    if (!port) return tl::unexpected(std::move(port.error()));
    impl->tls_port = *port;
    impl->core.set_tls_port(*port);
  }
  if (cfg.ws_port) {
    const ws::HttpRoutes& routes = impl->http_routes;
    auto wsp = impl->server.listen(
        Listener{cfg.bind_address, *cfg.ws_port,
                 [&routes](BrokerCore& core, std::string peer, Waker& waker) -> std::unique_ptr<Client> {
                   return std::make_unique<ws::WsSession>(core, std::move(peer), waker, routes);
                 },
                 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 30\r\n"
                 "Connection: close\r\n\r\nmax number of clients reached\n",
                 cfg.tls.ws ? impl->tls.get() : nullptr,
                 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 46\r\n"
                 "Connection: close\r\n\r\nmax number of unauthenticated clients reached\n",
                 /*upgrade=*/true});
    if (!wsp) return tl::unexpected(std::move(wsp.error()));
    impl->ws_port = *wsp;
  }
  impl->core.set_listener_info(impl->port, cfg.io_threads);
  if (auto started = impl->server.start(); !started) return tl::unexpected(std::move(started.error()));
  return std::unique_ptr<Broker>(new Broker(std::move(impl)));
}
Broker::Broker(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Broker::~Broker() {
  stop();
  wait();
}

std::uint16_t Broker::port() const noexcept { return impl_->port; }

std::uint16_t Broker::ws_port() const noexcept { return impl_->ws_port; }

std::uint16_t Broker::tls_port() const noexcept { return impl_->tls_port; }

tl::expected<void, std::string> Broker::reload_tls() {
  if (!impl_->tls) return tl::unexpected(std::string("TLS is off"));
  return impl_->tls->reload();
}

namespace {

// Broker::publish and publish_from_cluster: pacing, then the core, with each
// refusal held as RefusalHold says.
PublishResult publish_paced(Broker::Impl& impl, std::span<const Message> msgs, std::span<std::size_t> receivers,
                            PublishWait wait, const PublishHold& hold, BrokerCore::Space space,
                            BrokerCore::Origin origin, std::span<std::uint64_t> ids = {}) noexcept {
  // acquire: pairs with the release store in stop(); a publish that sees "not
  // stopped" may still race with shutdown, which is safe (the index outlives it).
  if (impl.server.stopped()) return {PublishStatus::kStopped, 0, 0};
  BrokerCore& core = impl.core;
  FlowControl& flow = core.flow();
  if (flow.pressured()) {
    if (wait == PublishWait::kNoWait) return {PublishStatus::kWouldBlock, 0, 0};
    // Bounded: after max_stall the publish goes ahead, and its pushes are what
    // call a stuck subscriber slow (connection_queue.hpp, invariant 6).
    const auto t0 = std::chrono::steady_clock::now();
    (void)flow.wait_for(core.config().max_stall);
    flow.record_stall(std::chrono::steady_clock::now() - t0);
  }
  // kUntilAccepted counts a refusal per hold period; at least 1 ms, so that
  // max_block 0 does not spin. kNoWait refuses at once.
  const bool until_accepted = wait == PublishWait::kUntilAccepted;
  const std::chrono::nanoseconds max_block =
      wait == PublishWait::kNoWait ? std::chrono::nanoseconds(0)
      : until_accepted ? std::max<std::chrono::nanoseconds>(core.config().max_block, std::chrono::milliseconds(1))
                       : core.config().max_block;
  RefusalHold refusals(core, max_block,
                       wait == PublishWait::kNoWait ? RefusalHold::Mode::kAtOnce
                       : until_accepted             ? RefusalHold::Mode::kUntilAccepted
                                                    : RefusalHold::Mode::kHold);
  PublishResult r;
  while (r.published < msgs.size()) {
    const PublishOutcome o = core.publish(msgs.subspan(r.published), receivers.subspan(r.published),
                                          ids.empty() ? ids : ids.subspan(r.published), space, origin);
    for (std::size_t i = r.published; i < r.published + o.published; ++i) r.receivers += receivers[i];
    r.published += o.published;
    if (o.status == PublishOutcome::Status::kPublished) break;
    if (o.status == PublishOutcome::Status::kNotStored) {  // retrying cannot help a failing store now
      r.status = PublishStatus::kNotStored;
      return r;
    }
    // Refused: hold the caller (woken when a `block` queue drains).
    const bool stopped = impl.server.stopped();
    if (until_accepted && stopped) {
      r.status = PublishStatus::kStopped;
      return r;
    }
    // acquire: pairs with the caller's release store of its cancel flag.
    if (stopped || (hold.cancel != nullptr && hold.cancel->load(std::memory_order_acquire))) {
      refusals.refuse_now();
      r.status = PublishStatus::kRefused;
      return r;
    }
    const auto now = RefusalHold::Clock::now();
    switch (refusals.on_refused(now, o.status)) {
      case RefusalHold::Verdict::kRefuse:
        r.status = PublishStatus::kRefused;
        return r;
      case RefusalHold::Verdict::kWaitReported:
        if (hold.on_refused != nullptr) hold.on_refused(hold.context);
        break;
      case RefusalHold::Verdict::kWait:
        break;
    }
    // In slices: a drain between the refusal and the wait is not lost for long.
    flow.wait_room(
        std::min<std::chrono::steady_clock::duration>(refusals.deadline() - now, std::chrono::milliseconds(5)));
  }
  return r;
}

}  // namespace

PublishResult Broker::publish(std::string_view channel, std::string_view payload, PublishWait wait,
                              const PublishHold& hold) noexcept {
  const Message m{channel, payload};
  std::size_t receivers = 0;
  return publish({&m, 1}, {&receivers, 1}, wait, hold);
}

std::size_t Broker::report_upstream_loss(std::string_view channel, std::uint64_t lost) noexcept {
  if (impl_->server.stopped()) return 0;
  try {
    return impl_->core.index().report_upstream_loss(channel, lost);
  } catch (...) {
    return 0;  // out of memory for the scratch list: the notice is not sent
  }
}

PublishResult Broker::publish(std::span<const Message> msgs, std::span<std::size_t> receivers, PublishWait wait,
                              const PublishHold& hold) noexcept {
  return publish_paced(*impl_, msgs, receivers, wait, hold, BrokerCore::Space::kChannels,
                       BrokerCore::Origin::kThisNode);
}

PublishResult Broker::publish_from_cluster(bool shard, std::span<const Message> msgs,
                                           std::span<std::size_t> receivers) noexcept {
  return publish_paced(*impl_, msgs, receivers, PublishWait::kWait, {},
                       shard ? BrokerCore::Space::kShardChannels : BrokerCore::Space::kChannels,
                       BrokerCore::Origin::kCluster);
}

PublishResult Broker::publish_from_history(std::span<const Message> msgs, std::span<std::uint64_t> offsets,
                                           std::span<std::size_t> receivers) noexcept {
  return publish_paced(*impl_, msgs, receivers, PublishWait::kWait, {}, BrokerCore::Space::kChannels,
                       BrokerCore::Origin::kHistory, offsets);
}

BrokerStats Broker::stats() const noexcept { return impl_->core.stats(); }

std::vector<ConnectionStats> Broker::connection_stats() const { return impl_->core.connection_stats(); }

void Broker::set_info_provider(InfoProvider provider) { impl_->core.set_info_provider(std::move(provider)); }

std::string Broker::metrics_text() const { return impl_->core.metrics_text(); }

void Broker::set_metrics_provider(MetricsProvider provider) { impl_->core.set_metrics_provider(std::move(provider)); }

void Broker::stop() noexcept { impl_->server.stop(); }

void Broker::wait() noexcept { impl_->server.wait(); }

}  // namespace ringcast::broker
