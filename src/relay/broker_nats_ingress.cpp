#include "ringcast/relay/broker_nats_ingress.hpp"

#include <fmt/format.h>

#include "relay/broker_target.hpp"
#include "relay/metrics.hpp"
#include "relay/nats_connection.hpp"
#include "relay/nats_ingress.hpp"

namespace ringcast::relay {

struct BrokerNatsIngress::Impl {
  std::unique_ptr<NatsConnection> nats;  // the connection (nothing is published through it)
  std::vector<std::unique_ptr<NatsIngress>> ingress;
  bool stopped = false;

  std::vector<NatsIngressStats> stats() const {
    std::vector<NatsIngressStats> out;
    out.reserve(ingress.size());
    for (const auto& i : ingress) out.push_back(i->stats());
    return out;
  }
  void stop() noexcept {
    if (stopped) return;
    stopped = true;
    for (auto& i : ingress) i->stop();
    nats->close(std::chrono::milliseconds(200));
  }
};

BrokerNatsIngress::BrokerNatsIngress(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

BrokerNatsIngress::~BrokerNatsIngress() {
  if (impl_) impl_->stop();
}

tl::expected<std::unique_ptr<BrokerNatsIngress>, RelayError> BrokerNatsIngress::start(
    broker::Broker& broker, const NatsConfig& nats, const std::vector<NatsBrokerIngressRoute>& routes,
    const NatsIngressConfig& config, const LogFn& log) {
  using Code = RelayError::Code;
  if (routes.empty()) return tl::unexpected(RelayError{Code::kInvalidConfig, 0, "no --nats-in given"});
  const JetStreamConfig* const jetstream = nats.jetstream ? &*nats.jetstream : nullptr;
  if (jetstream != nullptr) {
    if (auto wrong = JetStreamIngress::check_routes(*jetstream, routes.size())) {
      return tl::unexpected(RelayError{Code::kInvalidConfig, 0, std::move(*wrong)});
    }
  }
  auto impl = std::make_unique<Impl>();
  auto conn = NatsConnection::connect(nats, log);
  if (!conn) return tl::unexpected(RelayError{Code::kNats, 0, conn.error()});
  impl->nats = std::move(*conn);
  for (const NatsBrokerIngressRoute& route : routes) {
    auto in = start_broker_ingress(impl->nats->connection(), broker, route, config, jetstream, log);
    if (!in) {
      impl->stop();
      return tl::unexpected(RelayError{Code::kNats, 0, in.error()});
    }
    impl->ingress.push_back(std::move(*in));
  }
  return std::unique_ptr<BrokerNatsIngress>(new BrokerNatsIngress(std::move(impl)));
}

void BrokerNatsIngress::stop() noexcept { impl_->stop(); }

std::vector<NatsIngressStats> BrokerNatsIngress::stats() const { return impl_->stats(); }

std::string BrokerNatsIngress::info_text() const {
  const NatsStats n = impl_->nats->stats();
  return fmt::format("# NATS-in\r\nnats_status:{}\r\nnats_disconnects:{}\r\nnats_reconnects:{}\r\n{}", n.status,
                     n.disconnects, n.reconnects, ingress_info_lines(impl_->stats()));
}

void BrokerNatsIngress::write_metrics(broker::PrometheusWriter& w) const { write_ingress_metrics(w, impl_->stats()); }

}  // namespace ringcast::relay
