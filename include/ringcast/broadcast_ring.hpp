// BroadcastRing: a single-producer, multi-consumer broadcast ring in shared
// memory. Every registered consumer sees every message, in order, at its own
// pace. The file format is include/ringcast/layout.hpp and docs/layout.md; the
// memory-ordering argument is docs/memory-ordering.md. This header is the
// contract; the inline hot path and the private helper types are in
// detail/broadcast_ring_inline.hpp and detail/broadcast_ring_state.hpp.
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
//  8. Positions count slots. A message longer than 52 bytes (or one written
//     through try_claim) is a record: a header slot and the slots after it,
//     never crossing a block boundary or the ring's end (layout.hpp,
//     block_slots). Readers enter a record only through its header, whose
//     version commits every byte of it, so a crash mid-record delivers nothing.
//  9. On rings with block_slots > 1 the producer stores write_intent = end
//     before it writes positions [pos, end) that hold a record or padding or
//     lie within a lap of one (below stamp_below_: the slots that can hold a
//     record's bytes), and before its scan of the cursors (full_slow) it
//     raises write_intent to its position. Before committing a message that
//     ends at `end` it leaves slot(end).version below 2*end+1 (the head stamp)
//     there: a reader waiting at the head never takes a previous lap's
//     payload bytes for a version. A reader that may be lapped validates
//     every message it copies by write_intent <= pos + capacity (a record's
//     payload overwrites other slots' version words in no set order, so a
//     version re-check alone cannot see it).
// 10. A consumer can be lapped only below its stable_from: on a lossy ring
//     everywhere; on a blocking ring below the write_intent it read after
//     registering, where the producer may have been writing without knowing
//     of it (invariant 7 and batches; the scan that let it do so stored an
//     intent at least its position). At and above it the producer waits for
//     the consumer, so it reads records in place (views, drain); below it,
//     it copies and validates (invariant 9).
//
// Costs: try_push and try_recv of a message of at most 52 bytes are a handful
// of loads and stores on two cache lines (the slot and the caller's own line)
// plus one load from the other side's wait line, which stays in every cache
// while nobody sleeps; on a ring that can hold records the producer also
// stores its write intent and loads the next slot's version. A record costs
// one copy of its bytes (none through try_claim and views on a blocking
// ring). Nothing on the hot path allocates, locks or throws, or makes a
// system call unless the other side is asleep (then one FUTEX_WAKE, however
// many sleep).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "ringcast/detail/broadcast_ring_state.hpp"
#include "ringcast/error.hpp"
#include "ringcast/layout.hpp"

namespace ringcast {

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
  // The largest message the ring carries, in bytes (fixed at creation). 0:
  // kDefaultMaxMessage, or less if the capacity cannot hold it
  // (layout::max_message_for: a message may take at most half the ring).
  // Values up to 52 keep the ring to one slot per message. A larger value
  // than the capacity allows is refused with payload_too_large.
  std::size_t max_message = 0;
  // The slots go in a second file, `<path>.slots`, created with `mode` less
  // the group and other write bits; the ring file keeps the header (cursors,
  // wait lines), which every consumer writes. So a reader needs write
  // permission on the ring file and read permission alone on the slots file,
  // and one without write permission on it maps the slots read-only
  // (OpenOptions::read_only_slots). create() only (create_shm and
  // create_anonymous refuse it: io_error, EINVAL). docs/design.md, "Read-only
  // readers", has the deployment recipe.
  bool separate_slots = false;
};

struct OpenOptions {
  std::uint64_t expected_capacity = 0;  // 0: take the header's; else layout_mismatch on disagreement
  bool read_only = false;               // map read-only (observers such as ring-top)
  // A reader whose message slots are mapped read-only: it registers,
  // receives and reads views as any consumer, its cursor and liveness stay
  // writable, but a stray write through a view (or anywhere in the slots
  // past the header's page) faults in this process instead of corrupting
  // every reader's messages. Such a handle cannot produce (claim_producer:
  // not_producer). The ring file is still opened read-write: its header is
  // shared state every consumer writes (docs/design.md, "Read-only readers").
  // On a ring with separate slots the slots file is then opened read-only;
  // without this option it is opened read-write where this process may
  // write it, and read-only (with the same effect as this option) where it
  // may not.
  bool read_only_slots = false;
  bool reap_on_full = false;     // as CreateOptions::reap_on_full, if this handle produces
  ClockNs reap_clock = nullptr;  // as CreateOptions::reap_clock
};

// Outcome of a single receive. 16 bytes, returned in registers.
struct [[nodiscard]] RecvResult {
  Errc status = Errc::ok;    // ok, empty, invalid_consumer, lapped, stalled, producer_dead,
                             // layout_mismatch (corrupt slot), timed_out (recv_wait),
                             // buffer_too_small (nothing consumed)
  std::uint32_t length = 0;  // payload bytes written to `out` when status == ok; the
                             // bytes the message needs when status == buffer_too_small
  std::uint64_t missed = 0;  // positions skipped when status == lapped (messages, on a
                             // ring of one slot per message)
  explicit operator bool() const noexcept { return status == Errc::ok; }
};

struct [[nodiscard]] BatchResult {
  std::size_t count = 0;     // messages pushed or received
  Errc status = Errc::ok;    // why the batch stopped early (ok if it did not)
  std::uint64_t missed = 0;  // drain on a lossy ring: positions skipped when status == lapped
};

// The next message of a consumer, read without consuming it
// (BroadcastRing::try_view). `data` stays valid and unchanged until the
// consumer's next try_view, release_view, receive or unregister, whichever
// comes first.
//
// When it is in place, and why that is safe: the producer never writes a
// slot an active consumer of a blocking ring has not passed (invariant 3),
// and the view does not move the cursor. That holds across a producer
// takeover (a new producer rescans the cursors before it overwrites
// anything) and cannot be broken by reaping (only an entry whose owner has
// died or closed its handle is reaped, and its views died with it). It does
// not hold on a lossy ring, nor for history a consumer joined with
// (invariant 10): there the view is a copy, validated after copying, and a
// message overwritten first is reported as `lapped`, never returned torn.
struct [[nodiscard]] MessageView {
  Errc status = Errc::ok;  // as RecvResult (never buffer_too_small)
  std::span<const std::byte> data;
  // data points into the ring itself (zero copy): a record on a blocking ring
  // read by a consumer the producer waits for (invariant 10). Otherwise it
  // points into a buffer of the handle that holds a validated copy.
  bool in_place = false;
  std::uint64_t missed = 0;  // positions skipped when status == lapped
  explicit operator bool() const noexcept { return status == Errc::ok; }
};

class BroadcastRing;

// Room for one message claimed at the head of a ring (BroadcastRing::try_claim):
// write the payload through data(), then commit() publishes it or abort()
// gives the room back; destroying an open claim aborts it. On a blocking ring
// data() points into the ring (zero copy). On a lossy ring it points into a
// buffer of the handle and commit() copies it in: a lapped reader may read
// those slots at any moment, so they are written with atomic stores only.
// Until commit, readers see nothing of the message, and if the producer dies
// they never will (a new producer reuses the room).
// REQUIRES: used by the producing thread; no push or other claim on the
// handle while it is open; the handle outlives it.
class [[nodiscard]] ProducerClaim {
 public:
  ProducerClaim() = default;
  ProducerClaim(ProducerClaim&& other) noexcept { *this = std::move(other); }
  ProducerClaim& operator=(ProducerClaim&& other) noexcept;
  ProducerClaim(const ProducerClaim&) = delete;
  ProducerClaim& operator=(const ProducerClaim&) = delete;
  ~ProducerClaim() { abort(); }

  // ok while the claim is open; otherwise why try_claim failed (full,
  // payload_too_large, not_producer, producer_busy) or ok after commit/abort.
  [[nodiscard]] Errc status() const noexcept { return status_; }
  explicit operator bool() const noexcept { return ring_ != nullptr; }
  // The claimed bytes; empty once committed or aborted.
  [[nodiscard]] std::span<std::byte> data() const noexcept { return {data_, ring_ != nullptr ? length_ : 0}; }
  // Publishes the message with its first `length` bytes (at most the claimed
  // length; by default all of them). No-op on a closed claim.
  void commit() noexcept { commit(length_); }
  void commit(std::size_t length) noexcept;
  // Gives the room back unpublished. No-op on a closed claim.
  void abort() noexcept;

 private:
  friend class BroadcastRing;
  BroadcastRing* ring_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t length_ = 0;
  std::uint64_t pos_ = 0;
  Errc status_ = Errc::ok;
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

// How a blocking call (recv_wait, push_wait, claim_wait) waits: for how long,
// and how it idles meanwhile. A duration converts to one with the default
// strategy, so both spellings work:
//   ring.recv_wait(id, out, 1s);
//   ring.push_wait(payload, {1s, IdleStrategy::kSpin});
// Only the durations that convert to std::chrono::nanoseconds implicitly do
// (no loss of precision: not a floating-point duration, nor a finer unit than
// nanoseconds), as when the calls took a nanoseconds timeout.
struct WaitOptions {
  std::chrono::nanoseconds timeout;  // the call returns timed_out once it has waited this long
  IdleStrategy idle = IdleStrategy::kSpinThenBlock;

  template <class Rep, class Period>
  requires std::is_convertible_v<std::chrono::duration<Rep, Period>, std::chrono::nanoseconds>
  constexpr WaitOptions(std::chrono::duration<Rep, Period> t, IdleStrategy i = IdleStrategy::kSpinThenBlock) noexcept
      : timeout(t), idle(i) {}
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
  bool owner_pid_here = true;  // owner_pid is a pid of the caller's pid namespace (false: the owner is in
                               // another, e.g. another container, and owner_pid is its pid there)
  std::uint64_t cursor = 0;
  std::uint64_t lag = 0;
};

// The producer role as RingStatus sees it; ringcast info and ring-top show
// these words.
enum class ProducerState : std::uint8_t {
  kNone,  // "none": no producer has published yet
  kLive,  // "live": a live handle holds the role
  kLeft,  // "left": the last producer released the role (release_producer, or its handle's destructor)
  kDead,  // "dead": the last producer's process ended holding the role (killed, crashed)
};
[[nodiscard]] std::string_view to_string(ProducerState state) noexcept;

// A moment's view of the whole ring, for tools (ringcast info, ring-top).
struct RingStatus {
  std::uint64_t capacity = 0;
  std::uint32_t flags = 0;
  std::uint64_t producer_seq = 0;
  std::uint32_t producer_pid = 0;  // the live or dead producer's; 0 once it left or before any
  bool producer_alive = false;     // some live handle holds the producer role
  bool producer_pid_here = true;   // producer_pid is a pid of the caller's pid namespace (as owner_pid_here)
  ProducerState producer = ProducerState::kNone;
  bool half_written_slot = false;        // the next slot is odd: a producer died mid-write
  std::uint32_t sleeping_consumers = 0;  // consumers asleep in recv_wait
  bool producer_sleeping = false;        // the producer is asleep in push_wait
  std::uint64_t upstream_lost = 0;       // messages lost before the producer (report_upstream_loss)
  std::uint64_t upstream_gaps = 0;       // gap events behind upstream_lost
  std::uint64_t max_message = 0;         // the largest payload the ring carries
  std::uint64_t messages = 0;            // messages published (positions count slots)
  std::uint64_t payload_bytes = 0;       // their payload bytes
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
  // Unlinks the ring file at `path` and, if its slots are separate, its slots
  // file. Refuses (with open's errors) a file that is not a ring, so a typo
  // deletes nothing. Handles still open keep their mappings.
  static Result<void> remove(const std::string& path);

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

  // REQUIRES: the calling thread is this handle's only producing thread, and
  // no claim is open. Copies `payload` (0..max_message() bytes) into the ring.
  // Returns ok, full (blocking mode: the slowest consumer is too far behind
  // for the message's slots), payload_too_large, or not_producer /
  // producer_busy when the role cannot be claimed.
  [[nodiscard, gnu::always_inline]] Errc try_push(std::span<const std::byte> payload) noexcept;
  // Pushes payloads (any mix of sizes) in order until one does not fit;
  // publishes producer_seq once. count = how many were pushed; status = why
  // it stopped early.
  BatchResult try_push_batch(std::span<const std::span<const std::byte>> payloads) noexcept;
  // Claims room for a message of `length` bytes (0..max_message()) to be
  // written in place; see ProducerClaim. Fails (status() set, no room held)
  // as try_push does. REQUIRES: as try_push.
  ProducerClaim try_claim(std::size_t length) noexcept;

  // Copies the next message for `id` into `out`. ok (length set), empty,
  // invalid_consumer, buffer_too_small (the message needs `length` bytes;
  // nothing is consumed), lapped (lossy rings, and history a StartAt::kOldest
  // consumer had not read yet: `missed` positions were overwritten; the cursor
  // now points at the oldest message still in the ring), stalled
  // (a slot stayed half-written past a bounded spin while its producer lives),
  // producer_dead (half-written slot, producer gone), layout_mismatch (corrupt slot).
  // A buffer of at least 52 bytes takes the fastest path for short messages.
  [[gnu::always_inline]] RecvResult try_recv(ConsumerId id, std::span<std::byte> out) noexcept;

  // Receives up to `max` messages, calling on_message(std::span<const std::byte>)
  // for each, and publishes the cursor once for the whole batch. The span is
  // valid during the call only; it points into the ring (zero copy) where a
  // view would (MessageView::in_place). status is ok when at least one message
  // was delivered; otherwise as try_recv (a lap stops the batch and reports
  // `missed` like try_recv). If on_message throws, the batch's cursor is not
  // published: those messages are delivered again by the next call.
  template <class OnMessage>
  BatchResult drain(ConsumerId id, OnMessage&& on_message,
                    std::size_t max) noexcept(noexcept(on_message(std::span<const std::byte>{})));

  // Reads the next message for `id` without consuming it: see MessageView for
  // how long its bytes stay valid and when they are read in place. Statuses as
  // try_recv. Calling it again before release_view returns the same message.
  MessageView try_view(ConsumerId id) noexcept;
  // Consumes the message the last successful try_view returned: the producer
  // may reuse its slots from now on. invalid_consumer if `id` is not
  // registered through this handle or has no view open.
  Errc release_view(ConsumerId id) noexcept;

  // Records that `lost` messages were lost before this producer got them (one
  // gap event): a NATS ingress that saw a skipped sequence (docs/scale-out.md).
  // Observers see the totals in RingStatus::upstream_lost / upstream_gaps
  // (ring-top, ringcast info). REQUIRES: this handle holds the producer role.
  // One relaxed fetch_add on each of two header fields.
  void report_upstream_loss(std::uint64_t lost) noexcept;
  // Writes a loss marker at this point of the stream: one slot that consumers
  // pass without a message and count in upstream_lost_seen, so a consumer
  // learns that `lost` messages were lost just before the next one it
  // receives (at most 2^32 - 1 per marker). Only on a ring that carries
  // records (max_message above 52); on others it writes nothing and returns
  // ok. Otherwise as try_push (full: nothing written; call again before
  // pushing the next message). REQUIRES: as try_push.
  [[nodiscard]] Errc mark_upstream_loss(std::uint64_t lost) noexcept;
  // Messages lost upstream before the messages `id` has received since it
  // registered: the loss markers its cursor has passed (not those a lap
  // skipped). Read it before and after a receive to learn how many were lost
  // just before that message. 0 on a ring without records, or for an id this
  // handle does not own. REQUIRES: the consumer-id rule, as try_recv.
  [[nodiscard]] std::uint64_t upstream_lost_seen(ConsumerId id) const noexcept;

  // --- blocking variants ---------------------------------------------------
  // Wait for a message / for room, up to `options.timeout`, idling as
  // `options.idle` says (WaitOptions); timed_out after it. On any
  // ring, kSpinThenBlock and kBlock sleep on a futex in the mapping, and the
  // other side wakes them with one FUTEX_WAKE per push (or per receive, for
  // push_wait) only while someone sleeps. Going to sleep costs the waiter one
  // membarrier(2) call (docs/memory-ordering.md, "Sleeping and waking"); if
  // the kernel refuses it on a ring created without `wakeups`, sleeps last at
  // most 1 ms each, so a wake-up is never later than that. Same threading
  // rules as try_recv / try_push.
  RecvResult recv_wait(ConsumerId id, std::span<std::byte> out, WaitOptions options) noexcept;
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
  void set_waiter_slice(std::chrono::microseconds slice) noexcept;
  [[nodiscard]] std::chrono::microseconds waiter_slice() const noexcept;
  // Waits of this handle that ended on a capped sleep rather than a wake-up:
  // membarrier(2) refused, or a consumer stopped or killed while it should
  // have passed a wake-up on. Each was late by up to the cap (1 ms / 100 ms).
  [[nodiscard]] std::uint64_t late_wakeups() const noexcept;
  [[nodiscard]] Errc push_wait(std::span<const std::byte> payload, WaitOptions options) noexcept;
  // try_claim that waits for room like push_wait; status() timed_out after
  // `options.timeout`. Same threading rules as try_claim.
  ProducerClaim claim_wait(std::size_t length, WaitOptions options) noexcept;
  // Waits until at least `count` consumers are registered (in any process),
  // polling every millisecond, for up to `timeout`: ok, or timed_out. For a
  // producer whose first messages must reach its first consumers; a consumer
  // that registers later starts at the position of that moment
  // (StartAt::kLatest), or at the ring's history (kOldest). Any thread.
  // REQUIRES: count <= kMaxConsumers.
  [[nodiscard]] Errc wait_for_consumers(std::size_t count, std::chrono::nanoseconds timeout) const noexcept;

  // --- observers (any thread, any process) --------------------------------
  // Positions (slots) published but not yet received by `id`: messages, on a
  // ring of one slot per message. 0 for an inactive or out-of-range id.
  [[nodiscard]] std::uint64_t lag(ConsumerId id) const noexcept;
  // The position of the next message `id` will receive (its cursor; positions
  // count slots from 0, so a message of more than 52 bytes advances it by
  // several). REQUIRES: `id` is registered through this handle and the caller
  // is its reading thread.
  [[nodiscard]] std::uint64_t position(ConsumerId id) const noexcept;
  // True when every active consumer has received every published message.
  [[nodiscard]] bool is_fully_drained() const noexcept;
  [[nodiscard]] std::uint64_t producer_position() const noexcept;
  [[nodiscard]] std::size_t active_consumer_count() const noexcept;
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  // The largest payload a message may have (CreateOptions::max_message).
  [[nodiscard]] std::size_t max_message() const noexcept { return max_message_; }
  [[nodiscard]] bool lossy() const noexcept { return (flags_ & kFlagLossy) != 0; }
  [[nodiscard]] bool wakeups() const noexcept { return (flags_ & kFlagWakeups) != 0; }
  // The slots are in `<path>.slots` (CreateOptions::separate_slots); the ring file is the header alone.
  [[nodiscard]] bool separate_slots() const noexcept { return (flags_ & kFlagSeparateSlots) != 0; }
  // Full view including owner liveness (makes one fcntl per active entry).
  [[nodiscard]] RingStatus status() const;

 private:
  // The private part: how a handle keeps its state. The bodies of the inline
  // members are in detail/broadcast_ring_inline.hpp, its helper types in
  // detail/broadcast_ring_state.hpp.
  friend class ProducerClaim;
  friend struct detail::WaitSetAccess;  // WaitSet sleeps on data_wait (src/ring/wait_set.cpp)
  friend struct detail::NativeAccess;   // ringcast_native_state (src/ring/c_api.cpp): Go's own hot path
  BroadcastRing() = default;
  // `slots_path`: where the slots file of a ring with separate slots is
  // (nullptr: nowhere, such a ring is refused).
  static Result<BroadcastRing> attach_fd(int fd, const char* what, const OpenOptions& options,
                                         const std::string* slots_path);
  // Maps the separate slots file `slots_fd` of a ring of `capacity` slots
  // into slots_map_ and closes `slots_fd` (on failure too).
  Result<void> map_slots_file(int slots_fd, std::uint64_t capacity, int prot, const char* what);
  // `slots_fd`: a new separate slots file (the ring owns it from here on), or -1.
  static Result<BroadcastRing> init_fd(int fd, int slots_fd, std::uint64_t capacity, const CreateOptions& options);
  Result<void> map_and_initialise(std::uint64_t capacity, const CreateOptions& options);
  // Validated geometry into the handle; allocates a lossy ring's claim buffer.
  Result<void> set_geometry(std::uint64_t capacity, std::uint32_t flags, std::uint64_t max_message);
  void close() noexcept;

  [[nodiscard]] layout::ProducerLine& producer() const noexcept;
  [[nodiscard]] layout::ConsumerEntry& consumer(ConsumerId id) const noexcept;
  // `id` was registered through this handle.
  [[nodiscard]] bool owns(ConsumerId id) const noexcept;
  // The slot of position `pos`.
  [[nodiscard]] std::uint64_t index(std::uint64_t pos) const noexcept;
  [[nodiscard]] layout::Slot& slot(std::uint64_t pos) const noexcept;
  // The first byte of a record's payload (invariant 8): byte 16 of its header slot.
  [[nodiscard]] std::byte* record_payload(std::uint64_t pos) const noexcept;

  using ReadOutcome = detail::ReadOutcome;
  // Reads an inline message into out (52 bytes of room), or reports a record.
  // `lappable`: pos is below the reader's stable_from (invariant 10), so the
  // copy is validated against the write intent too.
  [[gnu::always_inline]] ReadOutcome read_slot(std::uint64_t pos, std::byte* out, std::uint32_t& length,
                                               std::uint64_t& w0, bool lappable) const noexcept;
  // pos is below the consumer's stable_from (invariant 10).
  [[nodiscard]] bool lappable(ConsumerId id, std::uint64_t pos) const noexcept;
  [[gnu::always_inline]] void write_slot(std::uint64_t pos, std::span<const std::byte> payload) noexcept;
  // Writes a message of at most 52 bytes at seq_ (room checked) without
  // publishing it: the head stamp where one is due, the slot, the position
  // and the totals.
  [[gnu::always_inline]] void write_inline(std::span<const std::byte> payload) noexcept;
  [[nodiscard, gnu::always_inline]] Errc check_room(std::uint64_t slots) noexcept;
  // Before writing positions [pos, end): the write intent and the head stamp
  // (invariant 9). Only on rings with records_.
  void begin_write(std::uint64_t end) noexcept;
  [[gnu::always_inline]] void publish(std::uint64_t next_pos) noexcept;
  [[gnu::always_inline]] void advance_cursor(ConsumerId id, std::uint64_t next) noexcept;
  // Classifies a read of `pos` that was not ok, re-reading a half-written
  // slot for a bounded spin. On ok the message is in `out` and the cursor is
  // NOT moved (the caller advances it once the message is delivered); on a lap
  // the cursor moves past the overwritten messages. A record found by the
  // re-read is returned as status ok with its header's words[0] in `missed`
  // (never 0: it has kRecordBit) and nothing copied; an inline message has
  // missed 0. (A value, not an out-parameter: the hot callers keep their
  // locals in registers.)
  RecvResult recv_slow(ConsumerId id, std::uint64_t pos, ReadOutcome outcome, std::byte* out) noexcept;
  // try_recv past its fast path: a record, or any outcome but an inline message.
  RecvResult recv_other(ConsumerId id, std::uint64_t pos, ReadOutcome outcome, std::uint64_t w0,
                        std::span<std::byte> out) noexcept;
  // try_recv into a buffer of fewer than 52 bytes (through one of 52).
  RecvResult recv_short(ConsumerId id, std::span<std::byte> out) noexcept;
  Errc claim_slow() noexcept;
  Errc full_slow(std::uint64_t slots) noexcept;

  // --- records (src/ring/record.cpp) ---
  // Writes a message of more than 52 bytes at seq_ without publishing it.
  [[nodiscard]] Errc write_record(std::span<const std::byte> payload) noexcept;
  Errc push_record(std::span<const std::byte> payload) noexcept;
  // Reserves `slots` for a record at the head, first filling the rest of a
  // block with a padding record if the record would cross its end. Sets pos.
  [[nodiscard]] Errc reserve_record(std::uint64_t slots, std::uint64_t& pos) noexcept;
  // Counts n more positions that start no message (paddings, a record's inner
  // slots): status() derives the message count from them.
  void add_extra_slots(std::uint64_t n) noexcept;
  // Commits a record header at pos (invariant 8) after its payload is written.
  void commit_record(std::uint64_t pos, std::uint32_t kind, std::uint64_t slots, std::uint64_t length) noexcept;
  void finish_claim(ProducerClaim& claim, std::size_t length, bool commit) noexcept;
  using RecordRead = detail::RecordRead;
  // Reads the record whose header at `pos` held `w0`. In place where
  // invariant 10 allows and `copy_to` is null or in_place_ok; else copies it
  // into `copy_to` (room for `room` bytes; too small: data.size() says how
  // many are needed and nothing is copied) and validates the copy.
  RecordRead read_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0, std::byte* copy_to, std::size_t room,
                         bool in_place_ok) const noexcept;
  // Slots from pos to the next block boundary or the ring's end (invariant 8).
  [[nodiscard]] std::uint64_t room_before_boundary(std::uint64_t pos) const noexcept;
  // The first position >= pos that starts a record in every lap: a block
  // boundary or the ring's start.
  [[nodiscard]] std::uint64_t next_boundary(std::uint64_t pos) const noexcept;
  RecvResult recv_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0, std::span<std::byte> out) noexcept;
  // drain's record step: calls on_record for a message; returns the positions
  // passed, or 0 when the batch must stop (r.status says why if nothing was read).
  template <class OnMessage>
  std::uint64_t drain_record(ConsumerId id, std::uint64_t pos, std::uint64_t w0, OnMessage& on_message, RecvResult& r,
                             bool first) noexcept(noexcept(on_message(std::span<const std::byte>{})));
  // Light side of the sleep handshake: a compiler barrier in a process
  // registered for membarrier(2), else (and on wakeups rings) a full fence.
  // Pairs with the heavy side in wait() (seq_cst fence plus membarrier).
  void light_barrier() const noexcept;
  // After an entry is freed (unregister, reap): wakes a producer waiting for room.
  void wake_producer_after_free() noexcept;
  // A consumer advanced or an entry was freed while the producer sleeps for room: wake it.
  void wake_producer() noexcept;
  // The producer found consumers asleep: wake the first of them (the rest
  // follow along the wake chain) and fence from now on.
  void wake_consumers() noexcept;
  // wake_consumers' part for WaitSets: rings the doorbell of every consumer
  // that has one (docs/layout.md, "Doorbell") and says in its entry whether
  // it could. Returns the sleepers woken.
  int ring_doorbells() noexcept;
  // Clears consumer `id`'s doorbell (its bit in data_wait.doorbells, its
  // token and the producer's confirmation): on registering, unregistering
  // and reaping the entry. `owner_died`: the entry's previous owner died
  // holding it (reaping, or registering over it), and with it its WaitSet,
  // so the doorbell file it left is unlinked too.
  void clear_doorbell(ConsumerId id, bool owner_died) noexcept;
  // The producer's fenced mode found no sleeper for a while: drop it.
  void leave_fenced() noexcept;
  using WaitState = detail::WaitState;
  [[nodiscard]] bool spin_pays(WaitState& ws, std::int64_t now_ns) const noexcept;
  template <class Attempt>
  bool wait(layout::WaitLine& line, WaitState& ws, WaitOptions options, Attempt&& attempt) noexcept;
  [[nodiscard]] bool lock_is_held(off_t offset) const noexcept;

  // Mapping. header_/slots_ point into [base_, base_ + map_bytes_), or
  // header_ into [base_, base_ + map_bytes_) (the header's pages) and slots_
  // into a second mapping [slots_map_, slots_map_ + slots_map_bytes_): of
  // the whole file, read-only (OpenOptions::read_only_slots), or of a
  // separate slots file (CreateOptions::separate_slots), read-only unless
  // this handle may write it.
  std::byte* base_ = nullptr;
  std::size_t map_bytes_ = 0;
  std::byte* slots_map_ = nullptr;
  std::size_t slots_map_bytes_ = 0;
  int fd_ = -1;  // -1 for anonymous rings
  bool read_only_ = false;
  bool slots_read_only_ = false;  // slots_ points into a read-only mapping: cannot produce
  layout::RingHeader* header_ = nullptr;
  layout::Slot* slots_ = nullptr;
  // Validated copies of header fields; the mapping is never trusted for bounds.
  std::uint64_t capacity_ = 0;
  std::uint64_t mask_ = 0;  // capacity - 1 when a power of two, else 0
  std::uint32_t flags_ = 0;
  std::size_t max_message_ = kMaxPayload;
  std::uint64_t block_ = 1;  // layout::block_slots(max_message_)
  bool records_ = false;     // block_ > 1: multi-slot records, write intent and head stamps
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
  std::uint64_t seq_ = 0;            // next position to write
  std::uint64_t extra_slots_ = 0;    // positions that start no message (ProducerLine::extra_slots)
  std::uint64_t payload_bytes_ = 0;  // and their bytes (ProducerLine::payload_bytes)
  std::uint64_t intent_ = 0;         // the last write_intent stored (records_ rings)
  // No slot at a position >= this can hold a previous lap's record bytes,
  // so the head stamp's check is skipped there (begin_write): one lap past
  // the end of the last record, padding or claim written, and one lap past
  // the position a producer took over at (docs/memory-ordering.md, "Records").
  // 0 on a ring without records.
  std::uint64_t stamp_below_ = 0;
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
  // The WaitSet doorbells this producer rings, per consumer entry.
  std::array<detail::DoorbellLink, kMaxConsumers> doorbells_;
  WaitState push_wait_;                              // push_wait's history
  std::unique_ptr<std::byte[]> staging_;             // a lossy ring's record claims (max_message_ bytes)
  alignas(8) std::byte small_claim_[kMaxPayload]{};  // claims of at most 52 bytes (inline messages)
  // Consumers registered through this handle, one bit per id (read by every
  // receive, written only by register/unregister): a line of its own too.
  alignas(kCacheLine) std::atomic<std::uint32_t> owned_{0};
  // Per consumer id, touched only by the thread using that id (the
  // consumer-id rule above), a cache line each.
  using ConsumerLocal = detail::ConsumerLocal;
  std::size_t buffer_bytes_ = 0;  // max_message_ rounded up to 8, at least 56
  ConsumerLocal local_[kMaxConsumers];
};

}  // namespace ringcast

// The inline members' bodies: the hot path.
#include "ringcast/detail/broadcast_ring_inline.hpp"
