#include "relay/ring_target.hpp"

#include <sys/stat.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace ringcast::relay {

tl::expected<std::unique_ptr<RingTarget>, std::string> RingTarget::open(const std::string& path,
                                                                        const NatsIngressConfig& config,
                                                                        const LogFn& log) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  // reap_on_full: a consumer that died holding its entry must not stall the
  // ingress (and NATS delivery behind it) forever.
  Result<BroadcastRing> ring = exists ? BroadcastRing::open(path, {.reap_on_full = true})
                                      : BroadcastRing::create(path, config.ring_capacity,
                                                              {.lossy = config.ring_lossy,
                                                               .claim_producer = false,
                                                               .reap_on_full = true,
                                                               .max_message = config.ring_max_message});
  if (!ring) return tl::unexpected(fmt::format("ring {}", ring.error().message()));  // "ring PATH: ..."
  if (auto claimed = ring->claim_producer(); !claimed) {
    const RingStatus s = ring->status();
    return tl::unexpected(fmt::format("ring {}: cannot become its producer: {}{}", path, claimed.error().message(),
                                      s.producer_alive ? fmt::format(" (pid {} holds the role)", s.producer_pid) : ""));
  }
  log(LogLevel::kInfo, fmt::format("ring {}: {} (capacity {}, max message {} bytes, {}); producing into it from NATS",
                                   path, exists ? "opened" : "created", ring->capacity(), ring->max_message(),
                                   ring->lossy() ? "lossy" : "blocking"));
  return std::unique_ptr<RingTarget>(new RingTarget(std::move(*ring), path, log));
}

void RingTarget::on_gap(std::string_view /*subject*/, std::uint64_t lost) noexcept {
  ring_.report_upstream_loss(lost);  // the totals, at once
  // The marker goes into the stream before the next message: now if there is
  // room, else from deliver().
  unmarked_lost_ += lost;
  if (ring_.mark_upstream_loss(unmarked_lost_) == Errc::ok) unmarked_lost_ = 0;
}

bool RingTarget::mark_loss(const std::atomic<bool>& stopping) noexcept {
  for (bool waited = false;; waited = true) {
    const Errc e = ring_.mark_upstream_loss(unmarked_lost_);
    if (e != Errc::full) {
      // Written, or refused for good (the producer role lost): the totals
      // already hold the loss, and the message goes on to deliver(), which
      // counts and logs whatever refuses it too.
      unmarked_lost_ = 0;
      return true;
    }
    // acquire: pairs with the release store in NatsIngress::stop().
    if (stopping.load(std::memory_order_acquire)) return false;
    // Ring B is full, so the message behind the marker would wait too; a
    // marker is rare (one per gap), so a short sleep is the whole wait.
    if (!waited) full_waits_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

IngressTarget::Outcome RingTarget::deliver(std::string_view subject, std::span<const std::byte> payload,
                                           const std::atomic<bool>& stopping) noexcept {
  if (unmarked_lost_ != 0 && !mark_loss(stopping)) return Outcome::kStopped;
  Errc e = ring_.try_push(payload);
  if (e == Errc::ok) return Outcome::kDelivered;
  if (e == Errc::full) {
    // relaxed: statistic, single writer.
    full_waits_.fetch_add(1, std::memory_order_relaxed);
    // acquire: pairs with the release store in NatsIngress::stop().
    while (e == Errc::full || e == Errc::timed_out) {
      if (stopping.load(std::memory_order_acquire)) return Outcome::kStopped;
      e = ring_.push_wait(payload, std::chrono::milliseconds(50));
    }
    if (e == Errc::ok) return Outcome::kDelivered;
  }
  // payload_too_large (over the ring's max_message), or a lost producer role:
  // not deliverable.
  refuse(subject, payload.size(), e);
  return Outcome::kRefused;
}

void RingTarget::refuse(std::string_view subject, std::size_t length, Errc why) noexcept {
  oversize_.fetch_add(1, std::memory_order_relaxed);  // relaxed: statistic
  const auto now = std::chrono::steady_clock::now();
  if (last_logged_ != std::chrono::steady_clock::time_point{} && now - last_logged_ < kOversizeLogInterval) {
    ++unlogged_;
    return;
  }
  try {
    const std::string earlier =
        unlogged_ > 0 ? fmt::format(" ({} more refused since the last such line)", unlogged_) : std::string();
    if (why == Errc::payload_too_large) {
      log_(LogLevel::kWarning,
           fmt::format("ring {}: a NATS message of {} bytes on {} is over the ring's max message of {} bytes; not "
                       "delivered (counted as oversize){}",
                       path_, length, subject, ring_.max_message(), earlier));
    } else {
      log_(LogLevel::kWarning, fmt::format("ring {}: a NATS message on {} was refused: {}; not delivered (counted as "
                                           "oversize){}",
                                           path_, subject, to_string(why), earlier));
    }
    last_logged_ = now;
    unlogged_ = 0;
  } catch (...) {
    ++unlogged_;  // out of memory for the line: the count still has it
  }
}

std::size_t RingTarget::deliver_batch(std::string_view subject, std::span<const std::span<const std::byte>> payloads,
                                      const std::atomic<bool>& stopping) noexcept {
  std::size_t delivered = 0;
  if (unmarked_lost_ != 0 && !mark_loss(stopping)) return 0;
  while (!payloads.empty()) {
    // One producer_seq publish for as many as fit.
    const BatchResult b = ring_.try_push_batch(payloads);
    delivered += b.count;
    payloads = payloads.subspan(b.count);
    if (payloads.empty()) break;
    // The first that did not fit: full (wait, as deliver does) or refused.
    if (deliver(subject, payloads.front(), stopping) == Outcome::kDelivered) {
      ++delivered;
    } else if (stopping.load(std::memory_order_acquire)) {  // acquire: pairs with NatsIngress::stop()
      break;
    }
    payloads = payloads.subspan(1);
  }
  return delivered;
}

void RingTarget::fill(NatsIngressStats& s) const {
  // relaxed: statistics.
  s.oversize = oversize_.load(std::memory_order_relaxed);
  s.full_waits = full_waits_.load(std::memory_order_relaxed);
  // The ring's header: what every ingress into it counted as lost (report_upstream_loss).
  const RingStatus st = ring_.status();
  s.upstream_lost = st.upstream_lost;
  s.upstream_gaps = st.upstream_gaps;
}

tl::expected<std::unique_ptr<NatsIngress>, std::string> start_ring_ingress(natsConnection* conn,
                                                                           const NatsRingIngressRoute& route,
                                                                           const NatsIngressConfig& config, LogFn log,
                                                                           const JetStreamConfig* jetstream) {
  auto target = RingTarget::open(route.path, config, log);
  if (!target) return tl::unexpected(target.error());
  if (jetstream != nullptr) {
    std::string durable =
        jetstream->durable.empty() ? JetStreamIngress::default_durable(route.path) : jetstream->durable;
    return NatsIngress::start_jetstream(conn, route.subject, route.path, /*to_ring=*/true, std::move(*target),
                                        *jetstream, std::move(durable), std::move(log));
  }
  return NatsIngress::start(conn, route.subject, route.path, /*to_ring=*/true, std::move(*target), config);
}

}  // namespace ringcast::relay
