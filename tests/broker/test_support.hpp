// Helpers shared by the broker's unit tests: a manual clock, frames of a given
// size, and a subscriber that records wakeups.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "broker/connection_queue.hpp"
#include "broker/frame.hpp"
#include "broker/subscription_index.hpp"

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

inline std::uint64_t seq_of(const FrameRef& f) {
  std::uint64_t seq = 0;
  std::memcpy(&seq, f->data(), sizeof seq);
  return seq;
}

// Pops everything queued (as a writer would) and returns the frames.
inline std::vector<FrameRef> drain_all(ConnectionQueue& q) {
  std::vector<FrameRef> out;
  for (;;) {
    const PopResult r = q.pop_batch(SIZE_MAX, SIZE_MAX, out);
    if (r.frames == 0) break;
    q.release(r.bytes);
  }
  return out;
}

inline std::string concat(const std::vector<FrameRef>& frames) {
  std::string s;
  for (const FrameRef& f : frames) s.append(f->view());
  return s;
}

class FakeSubscriber final : public Subscriber {
 public:
  explicit FakeSubscriber(Resp resp = Resp::kResp2, QueueLimits limits = {},
                          OverflowPolicy policy = OverflowPolicy::kDisconnect)
      : Subscriber(limits, policy, steady_clock_source()) {
    resp_ = resp;
    queue().set_resp(resp);
  }
  ~FakeSubscriber() override = default;
  void on_queue_ready() noexcept override { wakes.fetch_add(1, std::memory_order_relaxed); }
  std::atomic<int> wakes{0};
};

}  // namespace ringcast::broker::testing
