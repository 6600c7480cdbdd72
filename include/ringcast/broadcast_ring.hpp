// BroadcastRing: a single-producer, multi-consumer broadcast ring in shared
// memory. Every registered consumer sees every message, in order, at its own
// pace. The file format is include/ringcast/layout.hpp and docs/layout.md; the
// memory-ordering argument is docs/memory-ordering.md.
//
// Thread safety
//  * One producer per ring, across all processes: the producer role is an
//    advisory lock the kernel drops when its holder dies (docs/reliability.md).
//    Within the producing handle, exactly one thread at a time may call
//    try_push / try_push_batch / push_wait (REQUIRES).
//  * A consumer id may be used by one thread at a time, and only through the
//    handle that registered it. Different ids may be used concurrently from
//    different threads of one handle.
//  * Observers (lag, is_fully_drained, producer_position, status, ...) may be
//    called from any thread or process at any time; they read a moment's view.
//
// Invariants (numbered as in docs/memory-ordering.md)
//  1. Only the producer writes slots and producer_seq; only consumer i's owner
//     writes consumers[i].cursor. No read-modify-write touches either.
//  2. A slot's version is odd exactly while the producer writes it, and
//     2*seq+2 once message `seq` is committed in it.
//  3. In the default (blocking) mode the producer writes message `seq` only
//     after every active cursor is > seq - capacity, so a slot is never
//     overwritten while an active consumer still needs it.
//  4. producer_seq <= committed messages; the two are equal outside a push.
//  5. A consumer's cursor never passes a committed message it did not read,
//     except on a `lapped` result, which reports how many it skipped.
//  6. A waiter sleeps only after setting bit 0 of its wait line's signal and
//     then issuing the heavy barrier (skipped if bit 1, fenced mode, was set)
//     and re-checking; every store that can end a wait (publish, cursor
//     advance, unregister, reap) is followed by a light barrier (a full fence
//     in fenced mode) and a check of that bit. Only wakers clear bit 0, and
//     clearing it always bumps the epoch; bit 1 is cleared only from a value
//     with bit 0 clear.
//  7. A consumer registered at StartAt::kOldest may start below the producer's
//     cached minimum; until the producer's next rescan sees it (it rescans at
//     least once per `capacity` messages written) invariant 3 does not cover
//     its messages below that minimum, and the version check (invariant 2) turns
//     any overwrite of them into a `lapped` result, never a torn or
//     out-of-order message. From that rescan on, invariant 3 holds for it.
//
// Costs: try_push and try_recv are a handful of loads and stores on two cache
// lines (the slot and the caller's own line) plus one load from the other
// side's wait line, which stays in every cache while nobody sleeps; neither
// allocates, locks or throws, and neither makes a system call unless the
// other side is asleep (then one FUTEX_WAKE, however many sleep).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "ringcast/error.hpp"
#include "ringcast/layout.hpp"

#if defined(__SANITIZE_THREAD__)
#define RINGCAST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGCAST_TSAN 1
#endif
#endif

namespace ringcast {
namespace detail {
// Calls f(0), f(1), ..., f(N-1), fully unrolled: the seven slot words are then
// moved between registers and the slot with no loop and no stack staging.
template <std::size_t N, class F>
inline void unrolled(F&& f) noexcept {
  [&]<std::size_t... I>(std::index_sequence<I...>) { (f(I), ...); }
  (std::make_index_sequence<N>{});
}
}  // namespace detail

using ConsumerId = std::uint32_t;

// Fenced publishes without a sleeper after which the producer drops the fence.
inline constexpr std::uint32_t kQuietPublishesBeforeUnfence = 1024;
// reap_on_full: at most one reaping pass per this many nanoseconds of its clock.
inline constexpr std::int64_t kReapOnFullIntervalNs = 10'000'000;
// set_waiter_slice's default: the scheduler slice a thread gets when it
// first sleeps in recv_wait or push_wait (the shortest the kernel allows),
// and the least time between two of the producer's yields after a wake-up.
inline constexpr std::chrono::microseconds kDefaultWaiterSlice{100};
// A monotonic clock in nanoseconds (reap_on_full's rate limit).
using ClockNs = std::int64_t (*)() noexcept;

struct CreateOptions {
  mode_t mode = 0600;            // file mode of a new file or shared-memory object
  bool replace = false;          // unlink an existing regular file first (never a directory)
  bool lossy = false;            // producer never waits; slow consumers are lapped
  bool wakeups = false;          // every push and receive also issues a full fence, so
                                 // wake-ups stay exact without membarrier(2) (kernels
                                 // before 4.16, seccomp). Blocking works on every ring;
                                 // this only chooses who pays for it (docs/memory-ordering.md)
  bool claim_producer = true;    // the creating handle becomes the producer
  bool reap_on_full = false;     // producer reaps dead consumers when it finds the ring full
  ClockNs reap_clock = nullptr;  // reap_on_full's clock; nullptr: CLOCK_MONOTONIC (tests inject one)
};

struct OpenOptions {
  std::uint64_t expected_capacity = 0;  // 0: take the header's; else layout_mismatch on disagreement
  bool read_only = false;               // map read-only (observers such as ring-top)
  bool reap_on_full = false;            // as CreateOptions::reap_on_full, if this handle produces
  ClockNs reap_clock = nullptr;         // as CreateOptions::reap_clock
};

// Outcome of a single receive. 16 bytes, returned in registers.
struct [[nodiscard]] RecvResult {
  Errc status = Errc::ok;    // ok, empty, invalid_consumer, lapped, stalled, producer_dead,
                             // layout_mismatch (corrupt slot), timed_out (recv_wait)
  std::uint32_t length = 0;  // payload bytes written to `out` when status == ok
  std::uint64_t missed = 0;  // messages skipped when status == lapped
  explicit operator bool() const noexcept { return status == Errc::ok; }
};

struct [[nodiscard]] BatchResult {
  std::size_t count = 0;     // messages pushed or received
  Errc status = Errc::ok;    // why the batch stopped early (ok if it did not)
  std::uint64_t missed = 0;  // drain on a lossy ring: messages skipped when status == lapped
};

enum class IdleStrategy : std::uint8_t {
  kSpin,           // busy-poll: lowest latency, burns a core
  kSpinThenYield,  // poll, then sched_yield between polls
  kSpinThenBlock,  // the default: spin while spinning pays, then sleep on the futex.
                   // "Pays": every process of the ring has a CPU (active consumers + 1
                   // <= CPUs this process may use), and this waiter's recent waits were
                   // short enough for a spin of at most 20 us to catch (adaptive)
  kBlock,          // sleep on the futex at once
};

// How a producer wakes consumers asleep in recv_wait (set_wake_policy).
enum class WakePolicy : std::uint8_t {
  kAuto,     // the default: kChain while the producer wakes sleepers more often than every
             // 50 us and more of them sleep than it has other CPUs, else kWakeAll
  kWakeAll,  // the producer wakes every sleeper in its one FUTEX_WAKE: the lowest
             // latency when it has time to spare (each sleeper costs it ~1 us)
  kChain,    // the producer wakes one sleeper per other CPU, and the first of them to
             // run wakes the rest: the producer's cost stays flat however many sleep
};

// Where a new consumer's cursor starts (register_consumer).
enum class StartAt : std::uint8_t {
  kLatest,  // the current producer position: only messages published from now on
  kOldest,  // the oldest message still in the ring: the last `capacity` messages
            // (all of them before the ring first wraps), then live ones.
            // History the producer overwrites before the consumer reads it is
            // reported as `lapped` with its count, on any ring
            // (docs/memory-ordering.md, "Joining at the oldest message")
};

struct ConsumerStatus {
  bool active = false;
  bool owner_alive = false;  // false when the owner's lock is gone (it died without unregistering)
  std::uint32_t owner_pid = 0;
  std::uint64_t cursor = 0;
  std::uint64_t lag = 0;
};

// A moment's view of the whole ring, for tools (ringcast info, ring-top).
struct RingStatus {
  std::uint64_t capacity = 0;
  std::uint32_t flags = 0;
  std::uint64_t producer_seq = 0;
  std::uint32_t producer_pid = 0;
  bool producer_alive = false;           // some live handle holds the producer role
  bool half_written_slot = false;        // the next slot is odd: a producer died mid-write
  std::uint32_t sleeping_consumers = 0;  // consumers asleep in recv_wait
  bool producer_sleeping = false;        // the producer is asleep in push_wait
  std::uint64_t upstream_lost = 0;       // messages lost before the producer (report_upstream_loss)
  std::uint64_t upstream_gaps = 0;       // gap events behind upstream_lost
  ConsumerStatus consumers[kMaxConsumers];
};

class BroadcastRing {
 public:
  // --- setup (may allocate and make system calls; never throw) -------------

  // Creates a ring file at `path` with `capacity` slots (kMinCapacity..kMaxCapacity;
  // any value, powers of two index with a mask). Refuses an existing path with
  // already_exists unless options.replace; never follows a symlink at the final
  // component. The file is complete before its magic is published.
  static Result<BroadcastRing> create(const std::string& path, std::uint64_t capacity,
                                      const CreateOptions& options = {});
  // Opens an existing ring file. Errors: io_error, not_ready (creator still
  // initialising), layout_mismatch (magic, version, slot size, capacity, size).
  static Result<BroadcastRing> open(const std::string& path, const OpenOptions& options = {});

  // The same over a POSIX shared-memory object name ("/ticks"), via Boost.Interprocess.
  static Result<BroadcastRing> create_shm(const std::string& name, std::uint64_t capacity,
                                          const CreateOptions& options = {});
  static Result<BroadcastRing> open_shm(const std::string& name, const OpenOptions& options = {});
  static Result<void> remove_shm(const std::string& name);

  // An in-process ring in anonymous shared memory, for threads of one process.
  // No file, no locks: liveness checks report every owner alive.
  static Result<BroadcastRing> create_anonymous(std::uint64_t capacity, const CreateOptions& options = {});

  BroadcastRing(BroadcastRing&& other) noexcept;
  BroadcastRing& operator=(BroadcastRing&& other) noexcept;
  BroadcastRing(const BroadcastRing&) = delete;
  BroadcastRing& operator=(const BroadcastRing&) = delete;
  // Unregisters this handle's consumers, releases the producer role, unmaps.
  ~BroadcastRing();

  // Claims the producer role for this handle. producer_busy if another live
  // handle holds it. When the previous producer died, repairs the slot it left
  // half-written and resumes after the last committed message (no duplicate,
  // no gap). try_push claims lazily, so calling this is optional.
  Result<void> claim_producer();
  // Gives the role up so another handle may claim it.
  void release_producer() noexcept;
  [[nodiscard]] bool is_producer() const noexcept { return is_producer_; }

  // Registers a consumer starting at the current producer position (latest, no
  // history) or at the oldest message still in the ring (max(0, P - capacity)
  // for the published position P). Every message it then receives is whole and
  // in sequence order; a message overwritten before it was read is reported as
  // `lapped`, never returned torn or out of order. Reuses an entry whose owner
  // died. Errors: no_consumer_slot, io_error.
  Result<ConsumerId> register_consumer(StartAt start = StartAt::kLatest);
  // Frees the entry; the producer stops waiting for it. invalid_consumer if
  // `id` was not registered through this handle.
  Errc unregister_consumer(ConsumerId id) noexcept;
  // Frees every active entry whose owner is dead (lock released by the kernel).
  // Returns how many were freed. Never frees a live owner's entry.
  Result<std::size_t> reap_dead_consumers();

  // --- hot path (noexcept, no allocation, no lock, no system call) ---------

  // REQUIRES: the calling thread is this handle's only producing thread.
  // Returns ok, full (blocking mode: slowest consumer is capacity behind),
  // payload_too_large, or not_producer / producer_busy when the role cannot be
  // claimed.
  [[nodiscard]] Errc try_push(std::span<const std::byte> payload) noexcept;
  // Pushes payloads in order until one does not fit; publishes producer_seq
  // once. count = how many were pushed; status = why it stopped early.
  BatchResult try_push_batch(std::span<const std::span<const std::byte>> payloads) noexcept;

  // Copies the next message for `id` into `out`. ok (length set), empty,
  // invalid_consumer, lapped (lossy rings, and history a StartAt::kOldest
  // consumer had not read yet: `missed` messages were overwritten; the cursor
  // now points at the oldest message still in the ring), stalled
  // (a slot stayed half-written past a bounded spin while its producer lives),
  // producer_dead (half-written slot, producer gone), layout_mismatch (corrupt slot).
  RecvResult try_recv(ConsumerId id, std::span<std::byte, kMaxPayload> out) noexcept;

  // Receives up to `max` messages, calling on_message(std::span<const std::byte>)
  // for each, and publishes the cursor once for the whole batch. status is ok
  // when at least one message was delivered; otherwise as try_recv (a lap
  // stops the batch and reports `missed` like try_recv). If
  // on_message throws, the batch's cursor is not published: those messages are
  // delivered again by the next call.
  template <class OnMessage>
  BatchResult drain(ConsumerId id, OnMessage&& on_message,
                    std::size_t max) noexcept(noexcept(on_message(std::span<const std::byte>{})));

  // Records that `lost` messages were lost before this producer got them (one
  // gap event): a NATS ingress that saw a skipped sequence (docs/scale-out.md).
  // Readers see the totals in RingStatus::upstream_lost / upstream_gaps
  // (ring-top, ringcast info). REQUIRES: this handle holds the producer role.
  // One relaxed fetch_add on each of two header fields.
  void report_upstream_loss(std::uint64_t lost) noexcept {
    // relaxed: display-only counters (docs/layout.md); only the producer writes them.
    producer().upstream_lost.fetch_add(lost, std::memory_order_relaxed);
    producer().upstream_gaps.fetch_add(1, std::memory_order_relaxed);
  }

  // --- blocking variants ---------------------------------------------------
  // Wait for a message / for room, up to `timeout`; timed_out after it. On any
  // ring, kSpinThenBlock and kBlock sleep on a futex in the mapping, and the
  // other side wakes them with one FUTEX_WAKE per push (or per receive, for
  // push_wait) only while someone sleeps. Going to sleep costs the waiter one
  // membarrier(2) call (docs/memory-ordering.md, "Sleeping and waking"); if
  // the kernel refuses it on a ring created without `wakeups`, sleeps last at
  // most 1 ms each, so a wake-up is never later than that. Same threading
  // rules as try_recv / try_push.
  RecvResult recv_wait(ConsumerId id, std::span<std::byte, kMaxPayload> out, std::chrono::nanoseconds timeout,
                       IdleStrategy idle = IdleStrategy::kSpinThenBlock) noexcept;
  // How this handle, as the producer, wakes sleeping consumers (docs/memory-ordering.md,
  // "The wake chain"). Process-local; set it before pushing (producer thread).
  void set_wake_policy(WakePolicy policy) noexcept { wake_policy_ = policy; }
  // How long a woken sleeper may wait for a CPU (default kDefaultWaiterSlice;
  // 0 turns both of the following off). On Linux >= 6.12 a thread's first
  // sleep in this handle's recv_wait or push_wait shortens its SCHED_OTHER
  // slice to this, so that when it is woken on a CPU where a longer-slice
  // task runs (a compiler, another consumer) it preempts that task instead of
  // waiting for the task's slice to end, up to a tick later. And this handle,
  // as the producer, yields its CPU after a wake-up at most once per this
  // interval, so that a sleeper woken onto the producer's own CPU runs then
  // rather than when the producer's slice ends (docs/reliability.md, "Waking
  // on a busy CPU"). The slice decides how soon a thread runs, not its share
  // of the CPU. A slice is never lengthened, nice is kept, and real-time,
  // SCHED_BATCH and SCHED_IDLE threads keep theirs. Any thread.
  void set_waiter_slice(std::chrono::microseconds slice) noexcept {
    // relaxed: a setting read on each sleep; no other data hangs on it.
    waiter_slice_us_.store(std::max<std::int64_t>(slice.count(), 0), std::memory_order_relaxed);
  }
  [[nodiscard]] std::chrono::microseconds waiter_slice() const noexcept {
    // relaxed: as in set_waiter_slice().
    return std::chrono::microseconds(waiter_slice_us_.load(std::memory_order_relaxed));
  }
  // Waits of this handle that ended on a capped sleep rather than a wake-up:
  // membarrier(2) refused, or a consumer stopped or killed while it should
  // have passed a wake-up on. Each was late by up to the cap (1 ms / 100 ms).
  [[nodiscard]] std::uint64_t late_wakeups() const noexcept {
    // relaxed: a statistic, read by nobody's protocol.
    return late_wakeups_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] Errc push_wait(std::span<const std::byte> payload, std::chrono::nanoseconds timeout,
                               IdleStrategy idle = IdleStrategy::kSpinThenBlock) noexcept;

  // --- observers (any thread, any process) --------------------------------
  // Messages published but not yet received by `id`; 0 for an inactive or
  // out-of-range id.
  [[nodiscard]] std::uint64_t lag(ConsumerId id) const noexcept;  // inline below
  // The sequence number of the next message `id` will receive (its cursor;
  // messages are numbered from 0 in publish order). REQUIRES: `id` is
  // registered through this handle and the caller is its reading thread.
  [[nodiscard]] std::uint64_t position(ConsumerId id) const noexcept {
    // relaxed: only this consumer writes its cursor (invariant 1).
    return consumer(id).cursor.load(std::memory_order_relaxed);
  }
  // True when every active consumer has received every published message.
  [[nodiscard]] bool is_fully_drained() const noexcept;
  [[nodiscard]] std::uint64_t producer_position() const noexcept {
    // acquire: pairs with the producer's release store in publish().
    return producer().producer_seq.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::size_t active_consumer_count() const noexcept;
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] bool lossy() const noexcept { return (flags_ & kFlagLossy) != 0; }
  [[nodiscard]] bool wakeups() const noexcept { return (flags_ & kFlagWakeups) != 0; }
  // Full view including owner liveness (makes one fcntl per active entry).
  [[nodiscard]] RingStatus status() const;

 private:
  BroadcastRing() = default;
  static Result<BroadcastRing> attach_fd(int fd, const char* what, const OpenOptions& options);
  static Result<BroadcastRing> init_fd(int fd, std::uint64_t capacity, const CreateOptions& options);
  Result<void> map_and_initialise(std::uint64_t capacity, const CreateOptions& options);
  void close() noexcept;

  [[nodiscard]] layout::ProducerLine& producer() const noexcept { return header_->producer; }
  [[nodiscard]] layout::ConsumerEntry& consumer(ConsumerId id) const noexcept { return header_->consumers[id]; }
  [[nodiscard]] layout::Slot& slot(std::uint64_t seq) const noexcept {
    return slots_[mask_ != 0 ? (seq & mask_) : (seq % capacity_)];
  }
  [[nodiscard]] bool owns(ConsumerId id) const noexcept {
    // relaxed: owned_ is this handle's bookkeeping; an id's bit changes only in
    // register/unregister, which the id's single user orders with its own calls.
    return id < kMaxConsumers && ((owned_.load(std::memory_order_relaxed) >> id) & 1U) != 0;
  }

  enum class ReadOutcome : std::uint8_t { kOk, kNotYet, kWriting, kOverwritten, kCorrupt };
  ReadOutcome read_slot(std::uint64_t seq, std::span<std::byte, kMaxPayload> out, std::uint32_t& length) const noexcept;
  void write_slot(std::uint64_t seq, std::span<const std::byte> payload) noexcept;
  [[nodiscard]] Errc check_room() noexcept;
  void publish(std::uint64_t next_seq) noexcept;
  void advance_cursor(ConsumerId id, std::uint64_t next) noexcept;
  // Classifies a read of `seq` that was not ok, re-reading a half-written
  // slot for a bounded spin. On ok the message is in `out` and the cursor is
  // NOT moved (the caller advances it once the message is delivered); on a lap
  // the cursor moves past the overwritten messages.
  RecvResult recv_slow(ConsumerId id, std::uint64_t seq, ReadOutcome outcome,
                       std::span<std::byte, kMaxPayload> out) noexcept;
  Errc claim_slow() noexcept;
  Errc full_slow() noexcept;
  // Light side of the sleep handshake: a compiler barrier in a process
  // registered for membarrier(2), else (and on wakeups rings) a full fence.
  // Pairs with the heavy side in wait() (seq_cst fence plus membarrier).
  void light_barrier() const noexcept {
    if (light_fence_) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
    } else {
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  }
  // After an entry is freed (unregister, reap): wakes a producer waiting for room.
  void wake_producer_after_free() noexcept;
  // A consumer advanced or an entry was freed while the producer sleeps for room: wake it.
  void wake_producer() noexcept;
  // The producer found consumers asleep: wake the first of them (the rest
  // follow along the wake chain) and fence from now on.
  void wake_consumers() noexcept;
  // The producer's fenced mode found no sleeper for a while: drop it.
  void leave_fenced() noexcept;
  // What one waiter (a consumer id, or the producer) learnt from its past waits.
  struct WaitState {
    std::uint32_t spin_budget_ns = 0;  // adaptive: how long the next wait may spin
    std::uint32_t processes = 0;       // active consumers + 1 as last counted; 0: never
    std::int64_t processes_counted_ns = 0;
  };
  [[nodiscard]] bool spin_pays(WaitState& ws, std::int64_t now_ns) const noexcept;
  template <class Attempt>
  bool wait(layout::WaitLine& line, WaitState& ws, IdleStrategy idle, std::chrono::nanoseconds timeout,
            Attempt&& attempt) noexcept;
  [[nodiscard]] bool lock_is_held(off_t offset) const noexcept;

  // Mapping. header_/slots_ point into [base_, base_ + map_bytes_).
  std::byte* base_ = nullptr;
  std::size_t map_bytes_ = 0;
  int fd_ = -1;  // -1 for anonymous rings
  bool read_only_ = false;
  layout::RingHeader* header_ = nullptr;
  layout::Slot* slots_ = nullptr;
  // Validated copies of header fields; the mapping is never trusted for bounds.
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;  // capacity - 1 when a power of two, else 0
  std::uint32_t flags_ = 0;
  bool reap_on_full_ = false;
  bool light_fence_ = true;  // light_barrier() must be a full fence
  // See set_waiter_slice(); read by waiters before they sleep and by the
  // producer after it wakes them, never on the fast path.
  std::atomic<std::int64_t> waiter_slice_us_{kDefaultWaiterSlice.count()};
  // Producer-local state (the producing thread only), on a cache line of its
  // own: consumer threads sharing this handle read the fields above and
  // owned_ on every receive, and a push would otherwise invalidate that line
  // for them once per message (false sharing: 1 producer + 1 consumer thread on
  // one handle went from 9.1 M to 46.0 M msgs/s, docs/benchmarks.md).
  alignas(kCacheLine) bool is_producer_ = false;
  std::uint64_t seq_ = 0;          // next sequence to write
  std::uint64_t cached_min_ = 0;   // a lower bound on every active cursor
  std::int64_t next_reap_ns_ = 0;  // rate limit for reap_on_full, on reap_clock_
  ClockNs reap_clock_ = nullptr;   // read only when full_slow considers reaping
  // Fenced mode (docs/memory-ordering.md, "Fenced mode"): while consumers
  // sleep, the producer makes a system call per wake anyway, so it takes the
  // full fence on itself and spares each sleeper a membarrier.
  bool fenced_ = false;
  std::uint32_t quiet_publishes_ = 0;  // fenced publishes since the last wake
  std::int64_t last_wake_ns_ = 0;      // when this producer last woke consumers
  std::int64_t last_yield_ns_ = 0;     // when it last yielded its CPU to them
  WakePolicy wake_policy_ = WakePolicy::kAuto;
  std::atomic<std::uint64_t> late_wakeups_{0};  // see late_wakeups()
  WaitState push_wait_;                         // push_wait's history
  // Consumers registered through this handle, one bit per id (read by every
  // receive, written only by register/unregister): a line of its own too.
  alignas(kCacheLine) std::atomic<std::uint32_t> owned_{0};
  // recv_wait's history per consumer id: element i is touched only by the
  // thread using id i (the consumer-id rule above).
  alignas(kCacheLine) WaitState recv_wait_[kMaxConsumers];
};

// ---------------------------------------------------------------------------
// Inline hot path. Memory orders: docs/memory-ordering.md, "Slots".

inline void BroadcastRing::write_slot(std::uint64_t seq, std::span<const std::byte> payload) noexcept {
  layout::Slot& s = slot(seq);
  // Assemble the seven words in registers straight from the payload (length in
  // the low half of words[0]); a short payload is first zero-padded to 52 bytes.
  const std::byte* src = payload.data();
  alignas(8) std::byte padded[kMaxPayload];
  if (payload.size() != kMaxPayload) [[unlikely]] {
    std::memset(padded, 0, sizeof padded);
    if (!payload.empty()) std::memcpy(padded, payload.data(), payload.size());
    src = padded;
  }
  std::uint64_t words[7];
  std::uint32_t head = 0;
  std::memcpy(&head, src, 4);
  words[0] = static_cast<std::uint64_t>(payload.size()) | (static_cast<std::uint64_t>(head) << 32);
  detail::unrolled<6>([&](std::size_t i) { std::memcpy(&words[i + 1], src + 4 + 8 * i, 8); });
  // relaxed: only this thread writes versions (invariant 1); ordering comes from the fence.
  s.version.store(2 * seq + 1, std::memory_order_relaxed);
#if RINGCAST_TSAN
  // TSan does not model standalone fences: give each data store release
  // semantics instead, so a reader that acquire-loads any word written here
  // also sees the odd version above.
  detail::unrolled<7>([&](std::size_t i) { s.words[i].store(words[i], std::memory_order_release); });
#else
  // release fence: pairs with the reader's acquire fence in read_slot. A reader
  // whose relaxed word loads see any store below then sees the odd version.
  std::atomic_thread_fence(std::memory_order_release);
  detail::unrolled<7>([&](std::size_t i) { s.words[i].store(words[i], std::memory_order_relaxed); });
#endif
  // release: pairs with the reader's acquire load of the version; a reader that
  // sees the committed version sees every word above.
  s.version.store(2 * seq + 2, std::memory_order_release);
}

inline BroadcastRing::ReadOutcome BroadcastRing::read_slot(std::uint64_t seq, std::span<std::byte, kMaxPayload> out,
                                                           std::uint32_t& length) const noexcept {
  const layout::Slot& s = slot(seq);
  const std::uint64_t want = 2 * seq + 2;
  // acquire: pairs with the release store of the committed version in write_slot.
  const std::uint64_t v1 = s.version.load(std::memory_order_acquire);
  if (v1 != want) {
    if (v1 < want - 1) return ReadOutcome::kNotYet;
    return v1 == want - 1 ? ReadOutcome::kWriting : ReadOutcome::kOverwritten;
  }
  std::uint64_t words[7];
#if RINGCAST_TSAN
  // acquire per word: pairs with the per-word release stores (TSan variant).
  detail::unrolled<7>([&](std::size_t i) { words[i] = s.words[i].load(std::memory_order_acquire); });
#else
  detail::unrolled<7>([&](std::size_t i) { words[i] = s.words[i].load(std::memory_order_relaxed); });
  // acquire fence: pairs with the writer's release fence; if any load above saw
  // a later write, the version load below sees that write's odd version.
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
  // relaxed: ordered after the word loads by the fence (or the acquire loads).
  // (R3 in docs/memory-ordering.md; seqlock_detector_test builds without it.)
  if (s.version.load(std::memory_order_relaxed) != v1) return ReadOutcome::kOverwritten;
  length = static_cast<std::uint32_t>(words[0]);
  if (length > kMaxPayload) return ReadOutcome::kCorrupt;  // a hostile or damaged file
  // Straight from the words into `out`: no staging copy.
  const auto head = static_cast<std::uint32_t>(words[0] >> 32);
  std::memcpy(out.data(), &head, 4);
  detail::unrolled<6>([&](std::size_t i) { std::memcpy(out.data() + 4 + 8 * i, &words[i + 1], 8); });
  return ReadOutcome::kOk;
}

inline Errc BroadcastRing::check_room() noexcept {
  if (!is_producer_) [[unlikely]] {
    if (const Errc e = claim_slow(); e != Errc::ok) return e;
  }
  if ((flags_ & kFlagLossy) == 0 && seq_ - cached_min_ >= capacity_) [[unlikely]] {
    return full_slow();
  }
  return Errc::ok;
}

inline void BroadcastRing::publish(std::uint64_t next_seq) noexcept {
  // release: pairs with acquire loads in producer_position/lag/register_consumer.
  producer().producer_seq.store(next_seq, std::memory_order_release);
  // Light side of the sleep handshake with wait() (docs/memory-ordering.md,
  // "Sleeping and waking"): the slot stores above are ordered before this
  // load by the barrier pair, so either we see a sleeper's waiting bit or its
  // re-check after the heavy barrier sees the message.
  if (fenced_) [[unlikely]] {
    // seq_cst fence: Dekker with a waiter that saw kSignalFenced and skipped
    // its membarrier.
    std::atomic_thread_fence(std::memory_order_seq_cst);
  } else {
    light_barrier();
  }
  // relaxed: ordered by the barrier pair above.
  const std::uint32_t signal = header_->data_wait.signal.load(std::memory_order_relaxed);
  if ((signal & kSignalWaiting) != 0) [[unlikely]] {
    wake_consumers();
  } else if (fenced_ && ++quiet_publishes_ >= kQuietPublishesBeforeUnfence) [[unlikely]] {
    leave_fenced();
  }
}

inline Errc BroadcastRing::try_push(std::span<const std::byte> payload) noexcept {
  if (payload.size() > kMaxPayload) [[unlikely]]
    return Errc::payload_too_large;
  if (const Errc e = check_room(); e != Errc::ok) return e;
  write_slot(seq_, payload);
  ++seq_;
  publish(seq_);
  return Errc::ok;
}

inline void BroadcastRing::advance_cursor(ConsumerId id, std::uint64_t next) noexcept {
  // release: pairs with the producer's acquire load of the cursor (full_slow);
  // our slot reads happen-before its overwrite of those slots (invariant 3).
  consumer(id).cursor.store(next, std::memory_order_release);
  // Light side of the handshake with push_wait, as in publish().
  light_barrier();
  // relaxed: ordered by the barrier pair above.
  if ((header_->space_wait.signal.load(std::memory_order_relaxed) & kSignalWaiting) != 0) [[unlikely]] {
    wake_producer();
  }
}

inline RecvResult BroadcastRing::try_recv(ConsumerId id, std::span<std::byte, kMaxPayload> out) noexcept {
  if (!owns(id)) [[unlikely]]
    return {Errc::invalid_consumer};
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t seq = consumer(id).cursor.load(std::memory_order_relaxed);
  std::uint32_t length = 0;
  const ReadOutcome outcome = read_slot(seq, out, length);
  if (outcome != ReadOutcome::kOk) [[unlikely]] {
    const RecvResult r = recv_slow(id, seq, outcome, out);
    if (r.status != Errc::ok) return r;
    length = r.length;
  }
  advance_cursor(id, seq + 1);
  return {Errc::ok, length};
}

template <class OnMessage>
BatchResult BroadcastRing::drain(ConsumerId id, OnMessage&& on_message,
                                 std::size_t max) noexcept(noexcept(on_message(std::span<const std::byte>{}))) {
  if (!owns(id)) [[unlikely]]
    return {0, Errc::invalid_consumer};
  // relaxed: only this consumer writes its cursor (invariant 1).
  const std::uint64_t start = consumer(id).cursor.load(std::memory_order_relaxed);
  std::uint64_t seq = start;
  alignas(8) std::byte buffer[kMaxPayload];
  while (seq - start < max) {
    std::uint32_t length = 0;
    const ReadOutcome outcome = read_slot(seq, buffer, length);
    if (outcome != ReadOutcome::kOk) [[unlikely]] {
      if (seq != start) break;  // the next call classifies what stopped this batch
      // Nothing read yet: let the single-message slow path classify it (it
      // moves the cursor only on a lap). A message it read is delivered like
      // any other below, so a throwing on_message leaves the cursor alone.
      const RecvResult r = recv_slow(id, seq, outcome, buffer);
      if (r.status != Errc::ok) return {0, r.status, r.missed};
      length = r.length;
    }
    on_message(std::span<const std::byte>(buffer, length));
    ++seq;
  }
  if (seq != start) advance_cursor(id, seq);
  return {static_cast<std::size_t>(seq - start), Errc::ok};
}

inline std::uint64_t BroadcastRing::lag(ConsumerId id) const noexcept {
  if (id >= kMaxConsumers) return 0;
  const layout::ConsumerEntry& c = consumer(id);
  // acquire: pairs with the release store of state in register_consumer.
  if (c.state.load(std::memory_order_acquire) != kConsumerActive) return 0;
  // Load the cursor first: producer_seq only grows, so the race between the
  // two loads never understates the lag. A consumer may read slots committed
  // inside a batch before producer_seq is published: clamp at 0.
  // acquire: pairs with advance_cursor's release store.
  const std::uint64_t cursor = c.cursor.load(std::memory_order_acquire);
  const std::uint64_t published = producer_position();
  return published > cursor ? published - cursor : 0;
}

}  // namespace ringcast
