// Helpers shared by the broker's unit tests: a manual clock, frames of a given
// size, and a subscriber that records wakeups.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "broker/core/client.hpp"
#include "broker/core/subscription_index.hpp"
#include "broker/queue/connection_queue.hpp"
#include "broker/queue/frame.hpp"

namespace ringcast::broker::testing {

class ManualClock final : public Clock {
 public:
  [[nodiscard]] std::chrono::nanoseconds now() const noexcept override { return now_; }
  void advance(std::chrono::nanoseconds d) noexcept { now_ += d; }

 private:
  std::chrono::nanoseconds now_{1'000'000'000};
};

// A droppable frame of exactly `size` bytes (>= 8) whose first 8 bytes hold `seq`.
inline FrameRef numbered_frame(std::uint64_t seq, std::size_t size, bool droppable = true) {
  FrameRef f = FrameRef::allocate(size, droppable);
  std::memset(f.mutable_data(), 'x', size);
  std::memcpy(f.mutable_data(), &seq, sizeof seq);
  return f;
}

// One block of `count` droppable frames of `size` bytes (>= 8) each, numbered
// first, first + 1, ...: a run as a publish of several messages encodes it.
inline FrameRef numbered_run(std::uint64_t first, std::uint32_t count, std::uint32_t size) {
  const std::vector<std::uint32_t> sizes(count, size);
  FrameRef f = FrameRef::allocate_frames(sizes, /*droppable=*/true);
  std::memset(f.mutable_data(), 'x', std::size_t{count} * size);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t seq = first + i;
    std::memcpy(f.mutable_data() + std::size_t{i} * size, &seq, sizeof seq);
  }
  return f;
}

// The number of every frame in `spans`, in order.
inline std::vector<std::uint64_t> seqs_of(const std::vector<FrameSpan>& spans) {
  std::vector<std::uint64_t> out;
  for (const FrameSpan& s : spans) {
    for (std::uint32_t i = s.first; i < s.first + s.count; ++i) {
      std::uint64_t seq = 0;
      std::memcpy(&seq, s.block->frame(i).data(), sizeof seq);
      out.push_back(seq);
    }
  }
  return out;
}

// Pops everything queued (as a writer would) and returns the spans.
inline std::vector<FrameSpan> drain_all(ConnectionQueue& q) {
  std::vector<FrameSpan> out;
  for (;;) {
    const PopResult r = q.pop_batch(SIZE_MAX, SIZE_MAX, out);
    if (r.frames == 0) break;
    q.release(r.bytes);
  }
  return out;
}

inline std::size_t frame_count(const std::vector<FrameSpan>& spans) {
  std::size_t n = 0;
  for (const FrameSpan& s : spans) n += s.count;
  return n;
}

inline std::string concat(const std::vector<FrameSpan>& frames) {
  std::string s;
  for (const FrameSpan& f : frames) s.append(f.view());
  return s;
}

// A waker for clients no writer serves: the tests drain their queues directly.
class NullWaker final : public Waker {
 public:
  void wake() noexcept override {}
};

inline Waker& null_waker() {
  static NullWaker w;
  return w;
}

class FakeSubscriber final : public Subscriber {
 public:
  // What the sessions choose: WebSocket clients (the JSON formats) get one
  // delivery per message, RESP clients one per matching subscription.
  static Deliveries deliveries_of(WireFormat f) noexcept {
    const bool json = f == WireFormat::kJson || f == WireFormat::kPopSubJson;
    return json ? Deliveries::kPerMessage : Deliveries::kPerSubscription;
  }

  explicit FakeSubscriber(WireFormat resp = WireFormat::kResp2, QueueLimits limits = {},
                          OverflowPolicy policy = OverflowPolicy::kDisconnect)
      : Subscriber(resp, deliveries_of(resp), limits, policy, steady_clock_source()) {}
  ~FakeSubscriber() override = default;
  void on_queue_ready() noexcept override { wakes.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<int> wakes{0};
};

// A message's entry in publish_each()'s result when it was refused.
inline constexpr std::size_t kRefused = static_cast<std::size_t>(-1);    // a `block` subscriber had no room
inline constexpr std::size_t kNotStored = static_cast<std::size_t>(-2);  // QoS 1, the RunLog failed to store it

// Publishes `msgs` as one publish per message would: where the index stops at
// a refused message, that message is marked and the rest published on.
// Returns each message's reply, kRefused or kNotStored.
inline std::vector<std::size_t> publish_each(SubscriptionIndex& index, std::span<const Message> msgs,
                                             bool dedupe = false, std::span<std::uint64_t> ids = {}) {
  std::vector<std::size_t> receivers(msgs.size());
  for (std::size_t at = 0; at < msgs.size();) {
    const PublishOutcome o =
        index.publish(msgs.subspan(at), dedupe, std::span(receivers).subspan(at), ids.empty() ? ids : ids.subspan(at));
    at += o.published;
    if (at == msgs.size()) break;
    receivers[at++] = o.status == PublishOutcome::Status::kNotStored ? kNotStored : kRefused;
  }
  return receivers;
}

}  // namespace ringcast::broker::testing
