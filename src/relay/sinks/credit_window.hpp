// CreditWindow: the relay's side of the credit window over core NATS
// (docs/scale-out.md, "Credit window", normative).
//
// A ring reader publishing a fixed-subject route to core NATS asks every
// ringcast ingress that receives it to acknowledge: each message carries this
// window's inbox as its reply subject, and an ingress answers there with
// "<ingress id hex> <run hex> <position>" once everything up to that ring
// position is in its target (ring B, a broker). The reader publishes position
// p only while p <= base + window, base being the lowest position acknowledged
// by the ingresses it knows; while the window is full it stops reading its
// ring, so a blocking ring's producer meets `full`.
//
// Thread safety
//  * open(), wait(), reset(), published() and leave() are the reader thread's.
//  * on_ack() runs on libnats' delivery thread for the inbox subscription.
//  * stats() from any thread.
//  * mu_ guards the ingress table and the counters it keeps; the reader takes
//    it only in wait() and reset() (the window is full, or a ring was opened),
//    never on the hot path, which is one acquire load (open()).
//
// Invariants
//  1. base_ is kNone while no ingress is known, else the minimum of the known
//     ingresses' acknowledged positions of the current run (computed under
//     mu_, published with a release store).
//  2. An ingress's acknowledged position never moves back within a run; acks
//     of another run (a ring reopened) are ignored.
//  3. An ingress not heard from (an ack or a heartbeat) for ack_timeout while
//     the reader waits on it is forgotten (counted in expired, logged): a dead
//     ingress stops holding up the ring, and loses what it misses (it counts
//     that as a gap when it returns).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class CreditWindow {
 public:
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};
  static constexpr std::size_t kMaxIngresses = 64;  // more are not waited for (counted: overflow)

  struct Config {
    std::uint64_t window = 131072;                  // positions in flight
    std::chrono::milliseconds probe_interval{100};  // a probe after this long without progress
    std::chrono::milliseconds ack_timeout{3000};    // forget a silent ingress after this
  };
  struct Stats {
    std::uint64_t waits = 0;      // times the window was full
    std::uint64_t probes = 0;     // probes sent
    std::uint64_t acks = 0;       // acks received
    std::uint64_t expired = 0;    // ingresses forgotten (silent for ack_timeout)
    std::uint64_t left = 0;       // ingresses that said they left
    std::uint64_t overflow = 0;   // acks from ingresses beyond kMaxIngresses
    std::uint64_t ingresses = 0;  // known now
    std::uint64_t in_flight = 0;  // last published position - base (0 without ingresses)
  };

  // Subscribes to a new inbox on `conn` (which must outlive this object).
  static tl::expected<std::unique_ptr<CreditWindow>, std::string> start(natsConnection* conn, Config config, LogFn log);
  CreditWindow(const CreditWindow&) = delete;
  CreditWindow& operator=(const CreditWindow&) = delete;
  ~CreditWindow();

  [[nodiscard]] const char* inbox() const noexcept { return inbox_.c_str(); }
  [[nodiscard]] std::uint64_t size() const noexcept { return config_.window; }

  // A new run (the reader opened a ring; `run` is its Ringcast-Msg run):
  // forgets every ingress; acks of another run are ignored from now on.
  void reset(std::uint32_t run) noexcept;
  // Hot path: may position `seq` be published now? Yes while it is within
  // the window, and also whenever everything published is acknowledged: a
  // batch, a record or a lap can move `seq` more than a window past the last
  // position published, and waiting then would wait for an ack that never
  // comes. In flight is then at most a window plus one message or batch.
  [[nodiscard]] bool open(std::uint64_t seq) const noexcept {
    // acquire: pairs with the release store in publish_base(); nothing else is
    // read through it, but a fresh base is what lets the reader go on.
    const std::uint64_t base = base_.load(std::memory_order_acquire);
    // relaxed: written only by the reader thread, which is the caller.
    return base == kNone || seq <= base + config_.window || base >= last_published_.load(std::memory_order_relaxed);
  }
  // The reader published up to `seq` (for in_flight). Relaxed store.
  void published(std::uint64_t seq) noexcept {
    // relaxed: a statistic, single writer.
    last_published_.store(seq, std::memory_order_relaxed);
  }
  // Waits until open(seq) or `stop`; calls probe() each probe_interval
  // without progress and forgets silent ingresses (invariant 3). False: stopped.
  template <typename Probe>
  bool wait(std::uint64_t seq, const std::atomic<bool>& stop, Probe&& probe);

  [[nodiscard]] Stats stats() const;

 private:
  CreditWindow(Config config, LogFn log) : config_(config), log_(std::move(log)) {}
  static void on_ack(natsConnection* nc, natsSubscription* sub, natsMsg* msg, void* closure);
  static void on_complete(void* closure);
  void publish_base_locked() noexcept;
  // Forgets ingresses silent since before `cutoff`; returns whether any was. mu_ held.
  bool expire_locked(std::chrono::steady_clock::time_point cutoff, std::chrono::steady_clock::time_point wait_began);
  bool wait_slice(std::uint64_t seq, std::chrono::steady_clock::time_point wait_began,
                  std::chrono::steady_clock::time_point& last_progress, std::uint64_t& last_base);

  struct Ingress {
    std::uint64_t id = 0;
    std::uint64_t acked = 0;
    std::chrono::steady_clock::time_point heard{};
  };

  const Config config_;
  const LogFn log_;
  std::string inbox_;
  natsConnection* conn_ = nullptr;  // outlives this object (start)
  natsSubscription* sub_ = nullptr;
  // Reader thread (wait_slice): the last time our connection was seen down.
  std::chrono::steady_clock::time_point down_until_{};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t run_locked_ = 0;
  std::array<Ingress, kMaxIngresses> table_{};
  std::size_t known_ = 0;
  bool done_ = false;  // libnats' completion callback fired
  Stats counts_;       // acks, expired, left, overflow (mu_); waits, probes (reader, under mu_ too)

  std::atomic<std::uint64_t> base_{kNone};
  std::atomic<std::uint64_t> last_published_{0};
};

template <typename Probe>
bool CreditWindow::wait(std::uint64_t seq, const std::atomic<bool>& stop, Probe&& probe) {
  const auto began = std::chrono::steady_clock::now();
  auto last_progress = began;
  // relaxed: under the reader's own use; wait_slice re-reads under mu_.
  std::uint64_t last_base = base_.load(std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);
    ++counts_.waits;
  }
  // acquire: pairs with the release store in Relay::stop().
  while (!open(seq)) {
    if (stop.load(std::memory_order_acquire)) return false;
    if (wait_slice(seq, began, last_progress, last_base)) {
      probe();
      std::lock_guard lock(mu_);
      ++counts_.probes;
    }
  }
  return true;
}

}  // namespace ringcast::relay
