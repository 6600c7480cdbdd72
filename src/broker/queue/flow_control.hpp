// Publisher pacing (docs/broker.md, "Publisher pacing"): the broker stops taking
// new messages from publishers while some subscriber queue holds more than
// pace_bytes, and takes them again once every such queue is back under half of
// that, or once the pause has lasted max_stall.
//
// Thread safety: every member may be called from any thread.
//  * Queues report their transitions (begin_pressure / end_pressure) under their
//    own lock; the wake-up of waiters happens inside end_pressure, so the lock
//    order is queue -> mu_. Publishers register and cancel under mu_ alone.
//  * Statistics are relaxed atomics.
//
// Invariants:
//  1. pressured_ is the number of queues whose paced flag is set
//     (connection_queue.hpp, invariant 7): each queue adds one when it sets the
//     flag and removes it when it clears the flag, at most once each way.
//  2. A waiter is in waiters_ from wait_async() returning true until it is told
//     (on_room(), once) or cancel()ed, whichever comes first. on_room() is
//     called under mu_, so cancel() returning means it will not be called.
//  3. No lost wake-up: wait_async() reads pressured_ under mu_ after adding the
//     waiter, and end_pressure() takes mu_ after its decrement reached zero, so
//     either the waiter sees zero and is not registered, or the waker sees it.
//  4. Room waiters (wait_room_async) are told at the next notify_room(), once,
//     under mu_, or forgotten by cancel(). Writers call notify_room() only
//     when has_blocked_waiters() (a relaxed hint) says someone waits, and room
//     made before a waiter registered is not reported to it: every room
//     waiter also waits a bounded time (the held connection's retry slice).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ringcast::broker {

// A publisher parked until the pressure ends (the server's paused connection),
// or until a `block` queue makes room (a connection held by a refused publish).
class PaceWaiter {
 public:
  // Called once per registration, under FlowControl's lock, from the thread
  // that ended the pressure or made room (a writer): must not block or call
  // back into FlowControl.
  virtual void on_room() noexcept = 0;

 protected:
  ~PaceWaiter() = default;
};

struct FlowStats {
  std::uint64_t stalls = 0;       // publisher pauses
  std::uint64_t stall_ns = 0;     // their total duration
  std::uint64_t slow_marked = 0;  // queues over the pace mark for max_stall: excluded from pacing
  std::uint64_t pressured = 0;    // current: queues over the pace mark
};

class FlowControl {
 public:
  // pace_bytes == 0 disables pacing: pressured() is then always false.
  FlowControl(std::size_t pace_bytes, std::chrono::nanoseconds max_stall) noexcept
      : pace_bytes_(pace_bytes), max_stall_(max_stall) {}
  FlowControl(const FlowControl&) = delete;
  FlowControl& operator=(const FlowControl&) = delete;

  [[nodiscard]] std::size_t pace_bytes() const noexcept { return pace_bytes_; }
  // A paced queue stops counting once it has drained to this.
  [[nodiscard]] std::size_t resume_bytes() const noexcept { return pace_bytes_ / 2; }
  [[nodiscard]] std::chrono::nanoseconds max_stall() const noexcept { return max_stall_; }

  // Queue side (under the queue's lock).
  void begin_pressure() noexcept;
  void end_pressure() noexcept;
  void count_slow() noexcept { slow_marked_.fetch_add(1, std::memory_order_relaxed); }  // relaxed: statistic

  // True while some queue is over the pace mark. One relaxed load: a publisher
  // that misses a concurrent change pauses (or not) one read later.
  [[nodiscard]] bool pressured() const noexcept {
    return pressured_.load(std::memory_order_relaxed) > 0;  // relaxed: advisory, re-checked under mu_
  }

  // Publisher side. Registers `w` to be told when the pressure ends; returns
  // false, registering nothing, if there is none now (invariant 3).
  [[nodiscard]] bool wait_async(PaceWaiter& w);
  // Registers `w` to be told at the next notify_room() (invariant 4).
  void wait_room_async(PaceWaiter& w);
  // Forgets `w` (as a pace or a room waiter) if still registered. After it
  // returns, on_room() is not called.
  void cancel(PaceWaiter& w) noexcept;
  // Blocks the calling thread until the pressure ends or `timeout` passes;
  // returns true if there is no pressure. Never call it on an I/O thread.
  bool wait_for(std::chrono::nanoseconds timeout);
  // Wakes wait_room() callers and tells room waiters that a `block` queue made
  // room (see ConnectionQueue::complete); cheap when nobody waits.
  void notify_room() noexcept;
  [[nodiscard]] bool has_blocked_waiters() const noexcept {
    return blocked_waiters_.load(std::memory_order_relaxed) > 0;  // relaxed: a hint; wait_for times out anyway
  }
  // Blocks up to `timeout` or until notify_room(); for a publisher refused by a
  // `block` queue, holding up to --max-block-ms.
  void wait_room(std::chrono::nanoseconds timeout);

  // A publisher pause of `d` ended.
  void record_stall(std::chrono::nanoseconds d) noexcept;
  [[nodiscard]] FlowStats stats() const noexcept;

 private:
  const std::size_t pace_bytes_;
  const std::chrono::nanoseconds max_stall_;
  std::atomic<std::int64_t> pressured_{0};
  std::atomic<std::uint64_t> stalls_{0};
  std::atomic<std::uint64_t> stall_ns_{0};
  std::atomic<std::uint64_t> slow_marked_{0};
  std::atomic<std::uint32_t> blocked_waiters_{0};

  std::mutex mu_;
  std::condition_variable cv_;             // wait_for / wait_room sleepers
  std::vector<PaceWaiter*> waiters_;       // guarded by mu_
  std::vector<PaceWaiter*> room_waiters_;  // guarded by mu_; each counted in blocked_waiters_
  std::uint64_t room_epoch_ = 0;           // guarded by mu_; bumped by notify_room
};

}  // namespace ringcast::broker
