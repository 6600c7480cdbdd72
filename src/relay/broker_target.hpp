// BrokerTarget: a NATS ingress's broker (docs/scale-out.md, "Broker ingress").
// Publishes each message through Broker::publish, the path every publisher
// takes, so RESP and WebSocket subscribers, patterns, overflow policies and
// pacing all apply as for a local publisher; a gap becomes the usual in-band
// loss notice (Broker::report_upstream_loss). The broker knows nothing of NATS.
//
// Channel: a fixed name, or a template in which "{subject}" stands for the
// message's NATS subject (an empty template is "{subject}").
//
// Thread safety: deliver() and on_gap() on the ingress's delivery thread only
// (they share the channel buffer); fill() from any thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "relay/nats_ingress.hpp"
#include "ringcast/broker/broker.hpp"

namespace ringcast::relay {

class BrokerTarget final : public IngressTarget {
 public:
  // `broker` must outlive this target.
  BrokerTarget(broker::Broker& broker, std::string channel_template);

  void on_gap(std::string_view subject, std::uint64_t lost) noexcept override;
  Outcome deliver(std::string_view subject, std::span<const std::byte> payload,
                  const std::atomic<bool>& stopping) noexcept override;
  std::size_t deliver_batch(std::string_view subject, std::span<const std::span<const std::byte>> payloads,
                            const std::atomic<bool>& stopping) noexcept override;
  void fill(NatsIngressStats& s) const override;

  // The channel for `subject` under `channel_template` (pure; for tests).
  static void map_channel(std::string_view channel_template, std::string_view subject, std::string& out);

 private:
  // The channel for `subject`, in channel_ (reused: no allocation once it has
  // grown to the longest channel). A view of channel_.
  std::string_view channel_for(std::string_view subject) noexcept;

  broker::Broker& broker_;
  const std::string template_;
  const bool fixed_;  // the template has no "{subject}"
  std::string channel_;
  // A batch as broker messages and their delivery counts; reserved once
  // (kMaxNatsBatch), so the delivery thread does not allocate.
  std::vector<broker::Message> batch_;
  std::vector<std::size_t> receivers_;
  std::atomic<std::uint64_t> refused_{0}, loss_notices_{0};
};

// Subscribes to the route's subject on `conn`, publishing into `broker`
// (which must outlive the ingress); with `jetstream`, reads it from that
// stream's durable consumer instead (durable: jetstream->durable, or
// JetStreamIngress::default_durable("broker-" + subject)), logging to `log`.
[[nodiscard]] tl::expected<std::unique_ptr<NatsIngress>, std::string> start_broker_ingress(
    natsConnection* conn, broker::Broker& broker, const NatsBrokerIngressRoute& route, const NatsIngressConfig& config,
    const JetStreamConfig* jetstream = nullptr, LogFn log = {});

}  // namespace ringcast::relay
