// ringcast broker: a Redis-protocol (RESP2/RESP3) pub/sub fan-out server that can
// also be embedded, so a process can publish to its subscribers in-process.
//
// Thread safety:
//  * Broker::start may be called from any thread; it returns once the listener is
//    bound and the I/O threads run.
//  * publish(), port(), stats(), metrics_text() and stop() may be called
//    concurrently from any thread, including threads the broker does not own
//    (e.g. a relay's reader).
//  * wait() may be called from any thread other than the broker's I/O threads.
//  * The destructor stops and joins the I/O threads; it must not run concurrently
//    with any other member call.
//
// Delivery contract (docs/broker.md): per publisher thread, per connection, FIFO.
// Publishers are paced while subscribers' queues are full ("Publisher pacing");
// a connection that still cannot keep up loses messages or is disconnected
// according to its overflow policy, and is told about the loss in-band, except
// under the `block` policy, where the publish is refused for the whole channel.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "ringcast/broker/cluster.hpp"
#include "ringcast/broker/config.hpp"
#include "ringcast/broker/error.hpp"
#include "ringcast/broker/message.hpp"
#include "ringcast/broker/metrics.hpp"
#include "ringcast/broker/stats.hpp"

namespace ringcast::broker {

// How a Broker::publish call ended.
enum class PublishStatus : std::uint8_t {
  kPublished,   // every message was offered to every matching subscription
  kWouldBlock,  // PublishWait::kNoWait and publishers are being paced: nothing was published
  kRefused,     // message `published` was refused: a `block` subscriber of its channel had
                // no room, even after BrokerConfig::max_block, or (in a cluster) the cluster
                // could not take it so long (unreachable, or its history's stores in flight
                // at their bound); it and the later ones were not published
  kStopped,     // the broker is stopped: nothing was published
  kNotStored,   // message `published` is QoS 1 (Message::qos) and its channel's history
                // failed to store it (docs/guarantees.md): it reached nobody and took no
                // id; it and the later ones were not published
};

// What Broker::publish does while publishers are paced (docs/broker.md,
// "Publisher pacing").
enum class PublishWait : std::uint8_t {
  kWait,    // block the calling thread until the pressure ends, at most max_stall, then publish;
            // a message a `block` subscriber refuses is held up to max_block, then kRefused
  kNoWait,  // return kWouldBlock at once; a refused message is kRefused at once
  // As kWait, but a refused message is held until it is accepted (every
  // max_block of waiting counts one refusal, in BrokerStats and PublishHold),
  // the broker stops (kStopped) or PublishHold::cancel is set (kRefused): for a
  // caller that must lose nothing, such as the relay, which then stops taking
  // from its source.
  kUntilAccepted,
};

struct [[nodiscard]] PublishResult {
  PublishStatus status = PublishStatus::kPublished;
  std::size_t published = 0;  // messages published: a prefix of those given
  std::size_t receivers = 0;  // their deliveries (one message: Redis's PUBLISH reply)
};

// What a PublishWait::kUntilAccepted publish watches while a refused message
// waits for room. What they point to must outlive the call.
struct PublishHold {
  const std::atomic<bool>* cancel = nullptr;  // set (read with acquire): give up, kRefused
  // Called with `context` on the publishing thread, outside the broker's
  // locks, for each max_block period a message waits (each one counted in
  // BrokerStats::refused_publishes too): lets the caller keep its own
  // statistics current while it is held. Must not publish.
  void (*on_refused)(void* context) = nullptr;
  void* context = nullptr;
};

class Broker {
 public:
  // Validates `config` (validate()), binds the listener and starts the I/O
  // threads. Fails with kInvalidConfig, kBadAddress, kBind (with errno) or
  // kThread (with errno); never throws.
  // With `cluster` (may be null; it must outlive the broker), the broker is
  // one node of a cluster (ringcast/broker/cluster.hpp): every message
  // published here is also handed to the link, and the link hears which
  // channels, patterns and shard channels this node's clients subscribe to.
  [[nodiscard]] static tl::expected<std::unique_ptr<Broker>, BrokerError> start(const BrokerConfig& config,
                                                                                ClusterLink* cluster = nullptr);

  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;
  ~Broker();

  // The bound TCP port (the kernel's choice when the config asked for 0).
  [[nodiscard]] std::uint16_t port() const noexcept;
  // The bound WebSocket port, or 0 when BrokerConfig::ws_port is unset.
  [[nodiscard]] std::uint16_t ws_port() const noexcept;
  // The bound RESP-over-TLS port, or 0 when BrokerConfig::tls.port is unset.
  // port() is 0 when BrokerConfig::plain_port is false.
  [[nodiscard]] std::uint16_t tls_port() const noexcept;

  // Reads the TLS certificate, key and CA files again (SIGHUP in
  // ringcast-broker): connections accepted from now on use them; open ones
  // keep theirs and are not dropped. On failure the old ones stay in use and
  // the error names the file and the reason. Any thread.
  [[nodiscard]] tl::expected<void, std::string> reload_tls();

  // Delivers `payload` to every subscription matching `channel`, exactly as a
  // client's PUBLISH does; result.receivers is the number of deliveries (Redis's
  // PUBLISH reply). The payload is encoded once per wire format and pattern; the
  // cost per subscriber is one queue push. Never blocks on a socket; may briefly
  // wait for a subscriber's SUBSCRIBE/UNSUBSCRIBE to finish. Blocks the calling
  // thread (never call it on a broker I/O thread, e.g. from an InfoProvider):
  //  * while publishers are paced, up to max_stall, unless `wait` is kNoWait,
  //    which returns kWouldBlock instead and publishes nothing;
  //  * while a `block` subscriber of the channel has no room, up to max_block
  //    (kNoWait: not at all), then returns kRefused (published = 0);
  //    kUntilAccepted: until it has room, the broker stops or hold.cancel is
  //    set.
  // Returns kStopped once stopped.
  PublishResult publish(std::string_view channel, std::string_view payload, PublishWait wait = PublishWait::kWait,
                        const PublishHold& hold = {}) noexcept;
  // Publishes `msgs` in order, exactly as consecutive publish() calls would, and
  // stores message i's delivery count in receivers[i] for each published one.
  // Consecutive messages on one channel are encoded once into one shared block and
  // reach each subscriber with one queue push and one iovec: the way to publish a
  // burst. Pacing is waited for (or reported) once, before the first message. On
  // kRefused, messages [0, published) were delivered and the rest were not: call
  // again with the rest to retry in order, or use kUntilAccepted (the relay
  // does). REQUIRES: receivers.size() == msgs.size().
  PublishResult publish(std::span<const Message> msgs, std::span<std::size_t> receivers,
                        PublishWait wait = PublishWait::kWait, const PublishHold& hold = {}) noexcept;

  // A cluster link's way in: `msgs`, published on another node of the
  // cluster (`shard`: by SPUBLISH), are published to this node's subscribers
  // as publish() with PublishWait::kWait does, and are not handed back to the
  // link. Same thread rules as publish().
  PublishResult publish_from_cluster(bool shard, std::span<const Message> msgs,
                                     std::span<std::size_t> receivers) noexcept;
  // The other way in, for retained channels in a cluster with history
  // (ClusterLink::open_history): `msgs`, published on any node (this one
  // too), each with the offset the cluster's history gave it in offsets[i],
  // in the history's order (read, not written). Published here as publish_from_cluster does, each
  // stored in this node's copy of the history under its offset; one at or
  // below its channel's last offset here was published before and is
  // skipped. REQUIRES: offsets.size() == receivers.size() == msgs.size().
  PublishResult publish_from_history(std::span<const Message> msgs, std::span<std::uint64_t> offsets,
                                     std::span<std::size_t> receivers) noexcept;
  // For an ingress that feeds the broker from another system (the NATS
  // ingress, docs/scale-out.md): `lost` messages on `channel` were lost before
  // they reached the broker (a gap in the source's sequence). Every connection
  // subscribed to `channel` (exactly or by pattern) gets the usual in-band loss
  // notice (docs/broker.md, "Loss notices"; the count appears in its
  // `upstream=` field), queued ahead of the channel's next message when there
  // is room. Returns how many connections were told (0 once stopped). Any
  // thread; allocates only the notices.
  std::size_t report_upstream_loss(std::string_view channel, std::uint64_t lost) noexcept;

  [[nodiscard]] BrokerStats stats() const noexcept;

  // Every connected client, ordered by id. Takes the registry lock and each
  // connection's queue lock briefly; allocates the result.
  [[nodiscard]] std::vector<ConnectionStats> connection_stats() const;

  // Installs (or, with an empty function, removes) a provider whose sections are
  // appended to INFO replies. It runs on the broker's I/O threads, outside the
  // broker's locks, until wait() has returned, so whatever it captures must
  // live that long. May be called at any time from any thread.
  void set_info_provider(InfoProvider provider);

  // Prometheus text exposition (0.0.4): every ringcast_broker_* series
  // (docs/broker.md, "Metrics"), per-connection ones included, then those of
  // the metrics provider, if any. What GET /metrics serves. Takes the same
  // locks as stats() and connection_stats(); allocates the text. Any thread.
  [[nodiscard]] std::string metrics_text() const;
  // Installs (or, with an empty function, removes) a provider whose series
  // follow the broker's in metrics_text(). Same lifetime rule as
  // set_info_provider: it may run until wait() has returned.
  void set_metrics_provider(MetricsProvider provider);

  // Closes the listener and all connections and lets the I/O threads finish.
  // Idempotent; returns without waiting.
  void stop() noexcept;
  // Blocks until stop() has been called and the I/O threads have exited.
  void wait() noexcept;

  struct Impl;

 private:
  explicit Broker(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringcast::broker
