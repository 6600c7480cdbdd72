// RingTarget: a NATS ingress's local ring (docs/scale-out.md, "Ring ingress").
// The ingress is the ring's producer: it creates the ring or opens it and
// claims the producer role, which fails while another live process holds it.
//
// Thread safety: deliver() and on_gap() on the ingress's delivery thread only
// (the ring's one-producing-thread REQUIRES); fill() from any thread reads
// single-writer relaxed counters.
//
// Too long: a NATS message longer than the ring's max_message cannot go into
// it. It is counted (oversize) and logged with its length, subject and the
// limit: the first one at once, then at most one line per
// kOversizeLogInterval with the count since the last line, so a flood of them
// cannot flood the log. A push refused because the producer role was lost
// is counted the same way and logged with its reason.
//
// Full ring: a blocking ring makes deliver() wait (push_wait, in slices so it
// sees `stopping`), which holds up libnats' delivery thread; messages then wait
// in libnats up to the subscription's pending limits, beyond which libnats
// drops them (counted, and seen as a gap by the next message's sequence). A
// lossy ring never waits: its slow readers are lapped, as on any lossy ring.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "relay/nats_ingress.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace ringcast::relay {

class RingTarget final : public IngressTarget {
 public:
  // Opens the ring at `path` (or creates it with config's capacity and mode)
  // and claims its producer role. Errors name the path and the reason
  // ("has a live producer (pid 123)").
  static tl::expected<std::unique_ptr<RingTarget>, std::string> open(const std::string& path,
                                                                     const NatsIngressConfig& config, const LogFn& log);

  void on_gap(std::string_view subject, std::uint64_t lost) noexcept override;
  Outcome deliver(std::string_view subject, std::span<const std::byte> payload,
                  const std::atomic<bool>& stopping) noexcept override;
  std::size_t deliver_batch(std::string_view subject, std::span<const std::span<const std::byte>> payloads,
                            const std::atomic<bool>& stopping) noexcept override;
  void fill(NatsIngressStats& s) const override;

  static constexpr std::chrono::seconds kOversizeLogInterval{10};

 private:
  RingTarget(BroadcastRing ring, std::string path, LogFn log)
      : ring_(std::move(ring)), path_(std::move(path)), log_(std::move(log)) {}
  // Counts a message the ring refused and logs it (rate-limited, above).
  void refuse(std::string_view subject, std::size_t length, Errc why) noexcept;
  // Writes the loss marker still owed (unmarked_lost_), waiting for room;
  // false if the ingress stops first.
  bool mark_loss(const std::atomic<bool>& stopping) noexcept;

  BroadcastRing ring_;
  const std::string path_;
  const LogFn log_;
  std::atomic<std::uint64_t> oversize_{0}, full_waits_{0};
  // Delivery thread only: when the last refusal was logged, and how many
  // refusals since then went unlogged.
  std::chrono::steady_clock::time_point last_logged_{};
  std::uint64_t unlogged_ = 0;
  // Delivery thread only: messages lost upstream whose marker is not yet in
  // the ring (it was full at the gap); written before the next message.
  std::uint64_t unmarked_lost_ = 0;
};

// Opens the route's ring (RingTarget::open) and subscribes to its subject on
// `conn`; with `jetstream`, reads it from that stream's durable consumer
// instead (NatsIngress::start_jetstream; durable: jetstream->durable, or
// JetStreamIngress::default_durable(route.path)).
[[nodiscard]] tl::expected<std::unique_ptr<NatsIngress>, std::string> start_ring_ingress(
    natsConnection* conn, const NatsRingIngressRoute& route, const NatsIngressConfig& config, LogFn log,
    const JetStreamConfig* jetstream = nullptr);

}  // namespace ringcast::relay
