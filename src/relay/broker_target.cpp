#include "relay/broker_target.hpp"

#include <algorithm>

namespace ringcast::relay {

namespace {

// PublishHold::on_refused: a delivery waited one --max-block for a `block`
// subscriber's room.
void count_refused(void* refused) noexcept {
  static_cast<std::atomic<std::uint64_t>*>(refused)->fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
}

constexpr std::string_view kSubjectField = "{subject}";

}  // namespace

BrokerTarget::BrokerTarget(broker::Broker& broker, std::string channel_template)
    : broker_(broker),
      template_(channel_template.empty() ? std::string(kSubjectField) : std::move(channel_template)),
      fixed_(template_.find(kSubjectField) == std::string::npos) {
  channel_.reserve(256);
  batch_.reserve(kMaxNatsBatch);
  receivers_.resize(kMaxNatsBatch);
}

void BrokerTarget::map_channel(std::string_view channel_template, std::string_view subject, std::string& out) {
  out.clear();
  if (channel_template.empty()) channel_template = kSubjectField;
  for (std::size_t pos = 0;;) {
    const std::size_t at = channel_template.find(kSubjectField, pos);
    if (at == std::string_view::npos) {
      out.append(channel_template.substr(pos));
      return;
    }
    out.append(channel_template.substr(pos, at - pos));
    out.append(subject);
    pos = at + kSubjectField.size();
  }
}

std::string_view BrokerTarget::channel_for(std::string_view subject) noexcept {
  if (fixed_) return template_;
  try {
    map_channel(template_, subject, channel_);
  } catch (...) {
    return template_;  // out of memory growing the buffer: the template's literal name
  }
  return channel_;
}

void BrokerTarget::on_gap(std::string_view subject, std::uint64_t lost) noexcept {
  const std::size_t told = broker_.report_upstream_loss(channel_for(subject), lost);
  // relaxed: statistic, single writer.
  loss_notices_.fetch_add(told, std::memory_order_relaxed);
}

IngressTarget::Outcome BrokerTarget::deliver(std::string_view subject, std::span<const std::byte> payload,
                                             const std::atomic<bool>& stopping) noexcept {
  const std::string_view channel = channel_for(subject);
  const std::string_view body(reinterpret_cast<const char*>(payload.data()), payload.size());
  // Waits while the broker paces publishers (at most max_stall), and while a
  // `block` subscriber has no room, until it has: NATS delivery waits with it,
  // bounded by the subscription's pending limits.
  const broker::PublishResult r =
      broker_.publish(channel, body, broker::PublishWait::kUntilAccepted, {&stopping, count_refused, &refused_});
  return r.status == broker::PublishStatus::kPublished ? Outcome::kDelivered : Outcome::kStopped;
}

std::size_t BrokerTarget::deliver_batch(std::string_view subject, std::span<const std::span<const std::byte>> payloads,
                                        const std::atomic<bool>& stopping) noexcept {
  const std::string_view channel = channel_for(subject);
  batch_.clear();
  for (const auto& p : payloads.first(std::min(payloads.size(), batch_.capacity()))) {
    batch_.push_back({channel, std::string_view(reinterpret_cast<const char*>(p.data()), p.size())});
  }
  // One call per run: one shared frame block per channel, as the relay's reader does.
  const broker::PublishResult r =
      broker_.publish(batch_, std::span<std::size_t>(receivers_.data(), batch_.size()),
                      broker::PublishWait::kUntilAccepted, {&stopping, count_refused, &refused_});
  return r.published;
}

void BrokerTarget::fill(NatsIngressStats& s) const {
  // relaxed: statistics.
  s.refused = refused_.load(std::memory_order_relaxed);
  s.loss_notices = loss_notices_.load(std::memory_order_relaxed);
}

tl::expected<std::unique_ptr<NatsIngress>, std::string> start_broker_ingress(
    natsConnection* conn, broker::Broker& broker, const NatsBrokerIngressRoute& route, const NatsIngressConfig& config,
    const JetStreamConfig* jetstream, LogFn log) {
  const std::string shown = route.channel.empty() ? std::string(kSubjectField) : route.channel;
  if (jetstream != nullptr) {
    std::string durable =
        jetstream->durable.empty() ? JetStreamIngress::default_durable("broker-" + route.subject) : jetstream->durable;
    return NatsIngress::start_jetstream(
        conn, route.subject, shown, /*to_ring=*/false, std::make_unique<BrokerTarget>(broker, route.channel),
        *jetstream, std::move(durable), log ? std::move(log) : LogFn([](LogLevel, std::string_view) {}));
  }
  return NatsIngress::start(conn, route.subject, shown, /*to_ring=*/false,
                            std::make_unique<BrokerTarget>(broker, route.channel), config);
}

}  // namespace ringcast::relay
