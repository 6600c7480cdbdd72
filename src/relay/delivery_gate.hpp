// DeliveryGate: libnats' delivery thread publishing into the broker against
// a stop() on another thread (NatsCluster's deliveries, ClusterHistory's
// copy). A delivery enters (announces itself), then reads `closed`; close()
// sets `closed`, and wait_empty() waits until no delivery is inside. Both in
// seq_cst, so of a delivery and a close one sees the other: no delivery runs
// into the broker after close() and wait_empty() return.
//
// Thread safety: enter() from any thread; close() from any thread, once or
// more (later calls return at once when nothing is inside).
#pragma once

#include <atomic>
#include <thread>

namespace ringcast::relay {

class DeliveryGate {
 public:
  // Held for the length of one delivery; open() false: closed, do nothing.
  class Pass {
   public:
    explicit Pass(DeliveryGate& g) noexcept : gate_(g) {
      gate_.inside_.fetch_add(1);
      open_ = !gate_.closed_.load();
    }
    ~Pass() { gate_.inside_.fetch_sub(1); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    [[nodiscard]] bool open() const noexcept { return open_; }

   private:
    DeliveryGate& gate_;
    bool open_ = false;
  };

  // Closes the gate: no delivery that enters from now on is open. Returns
  // whether this call closed it.
  bool close() noexcept { return !closed_.exchange(true); }
  // After close(): returns once the deliveries inside have left. Must not be
  // called while holding a lock a delivery may wait for.
  void wait_empty() const noexcept {
    while (inside_.load() != 0) std::this_thread::yield();
  }
  // A hint for callers that refuse work early (relaxed: a late one is counted
  // by whoever meets the closed gate).
  [[nodiscard]] bool closed_hint() const noexcept { return closed_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> closed_{false};
  std::atomic<int> inside_{0};
};

}  // namespace ringcast::relay
