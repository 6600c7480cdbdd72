// The blocking waits of BroadcastRing (recv_wait, push_wait, claim_wait) and
// the sleep handshake behind them: adaptive spinning, the futex epochs of the
// two wait lines, fenced mode, the wake chain and the waiter's time slice.
// docs/memory-ordering.md, "Sleeping and waking", argues the handshake.
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <thread>

#include "doorbell.hpp"
#include "futex.hpp"
#include "membarrier.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "sched_slice.hpp"
#include "timing.hpp"
#include "wait_line.hpp"

namespace ringcast {
namespace {

using detail::epoch_bits;
using detail::kChainRescueNs;
using detail::kUncoveredSleepNs;
using detail::must_pass_on;

// Adaptive spinning (IdleStrategy::kSpinThenBlock). A waiter spins only
// while spinning pays: while every process of the ring has a CPU (spin_pays)
// and its recent waits were short enough for a spin to catch. Sleeping and waking costs one futex round
// trip, 6-9 us p50 and ~28 us p99 on the 2-vCPU VM of docs/benchmarks.md, so a
// spin longer than kMaxSpinNs costs more CPU than the sleep it avoids.
constexpr std::uint32_t kMaxSpinNs = 20'000;
// Budgets below this do not spin at all: a spin that short rarely ends a wait.
constexpr std::uint32_t kMinSpinNs = 500;
// Polls between two clock reads while spinning (a poll is ~20 ns).
constexpr std::uint32_t kPollsPerClockRead = 16;
// IdleStrategy::kSpinThenYield: polls before the first sched_yield.
constexpr std::uint32_t kYieldAfterPolls = 2000;

// The adaptive budget after a wait that took `waited_ns` (succeeded or not):
// a wait a spin of twice its length would have caught raises the budget to
// that (up to kMaxSpinNs); a longer one halves it, so a quiet stream stops
// spinning after a few waits and an idle waiter uses ~0% CPU.
std::uint32_t next_spin_budget(std::uint32_t budget, std::int64_t waited_ns) noexcept {
  if (waited_ns <= kMaxSpinNs) {
    return std::max(budget, static_cast<std::uint32_t>(std::min<std::int64_t>(2 * waited_ns, kMaxSpinNs)));
  }
  return budget / 2;
}

// CPUs this process may run on (the first caller's affinity mask), counted once.
unsigned usable_cpus() noexcept {
  static const unsigned cpus = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1U;
    return static_cast<unsigned>(CPU_COUNT(&set));
  }();
  return cpus;
}

// The wake chain (docs/memory-ordering.md, "The wake chain"). A producer
// that wakes consumers more often than every kBusyWakeIntervalNs has no time
// to spare for one wake-up per sleeper (each costs it about a microsecond
// inside FUTEX_WAKE, and at 100 k msgs/s it has 10): it wakes only as many
// as can run beside it, and the first of them to run wakes the rest. A
// producer with time to spare wakes every sleeper itself, so the consumers,
// who are short of CPU when they outnumber the cores, are spared that work.
constexpr std::int64_t kBusyWakeIntervalNs = 50'000;
int producer_chain_wakes() noexcept {
  static const int wakes = static_cast<int>(std::max(usable_cpus(), 2U) - 1);
  return wakes;
}

// Clears the waiting bit of `line` and bumps its epoch in one step; with
// `fenced` also sets kSignalFenced, and sets or clears kSignalChained as
// `chained` says (data_wait, by the producer). Returns the futex bits of the
// epoch that ended, or 0 when no waiter had set the bit. Waiters only set the
// bit, wakers only clear it, so of several concurrent wakers (consumers waking
// the producer) exactly one wins and makes the system call; the rest see the
// bit clear. release: pairs with the acquire fetch_or in wait(), so a waiter
// that sees this value (and kSignalFenced) sees every store the waker made
// before it. acquire: pairs with a WaitSet's release fetch_or of the bit, so
// a producer sees the doorbell that WaitSet attached before it sleeps
// (ring_doorbells).
std::uint32_t end_epoch(layout::WaitLine& line, bool fenced, bool chained) noexcept {
  // relaxed: the CAS below decides.
  std::uint32_t v = line.signal.load(std::memory_order_relaxed);
  while ((v & kSignalWaiting) != 0) {
    std::uint32_t next = v & ~(kSignalWaiting | kSignalChained);
    if (fenced) next |= kSignalFenced;
    if (chained) next |= kSignalChained;
    if (line.signal.compare_exchange_weak(v, next + kSignalEpochStep, std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
      return epoch_bits(v);
    }
  }
  return 0;
}

// How often a waiter recounts the ring's processes (16 loads of lines that
// consumers write: too dear for every wait, cheap once per interval).
constexpr std::int64_t kRecountProcessesNs = 10'000'000;

}  // namespace

void BroadcastRing::wake_producer_after_free() noexcept {
  // Freeing an entry can make room, like advance_cursor; these paths are rare,
  // so they take a full fence (stronger than the light barrier) and need no
  // registration. seq_cst fence: pairs with the heavy side's fence in wait().
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // relaxed: ordered after the state store by the fence.
  if ((header_->space_wait.signal.load(std::memory_order_relaxed) & kSignalWaiting) != 0) {
    wake_producer();
  }
}

void BroadcastRing::wake_consumers() noexcept {
  // Set fenced_ first: the CAS in end_epoch() publishes kSignalFenced, and every
  // later publish of this thread must fence.
  fenced_ = true;
  quiet_publishes_ = 0;
  layout::WaitLine& line = header_->data_wait;
  const std::int64_t now = detail::monotonic_ns();
  // relaxed: `sleepers` only sizes the wake; kSignalChained keeps it correct.
  const bool chained =
      wake_policy_ == WakePolicy::kChain ||
      (wake_policy_ == WakePolicy::kAuto && now - last_wake_ns_ < kBusyWakeIntervalNs &&
       line.sleepers.load(std::memory_order_relaxed) > static_cast<std::uint32_t>(producer_chain_wakes()));
  last_wake_ns_ = now;
  if (const std::uint32_t bits = end_epoch(line, true, chained); bits != 0) {
    const int woken =
        ring_doorbells() +
        detail::futex_wake(line.signal, chained ? producer_chain_wakes() : std::numeric_limits<int>::max(), bits);
    // A sleeper just woken may be queued on this CPU, behind a producer that
    // will not sleep, and would wait for its slice to end (a tick at worst):
    // hand the CPU over, at most once per waiter slice, which bounds that wait
    // by about one slice while a saturating producer yields rarely
    // (docs/reliability.md, "Waking on a busy CPU").
    const std::int64_t slice_ns = std::chrono::nanoseconds(waiter_slice()).count();
    if (woken > 0 && slice_ns > 0 && now - last_yield_ns_ >= slice_ns) {
      last_yield_ns_ = now;
      ::sched_yield();
    }
  }
}

int BroadcastRing::ring_doorbells() noexcept {
  // acquire: pairs with the release fetch_or in WaitSet::add, so the token
  // stored before the bit is seen. (A bit set just now is seen through the
  // acquire CAS in end_epoch: that WaitSet's fetch_or of the waiting bit
  // comes after its add.)
  // Bits past the last entry are damage (nothing read from the mapping is
  // trusted as a bound): ignored.
  constexpr std::uint32_t kEntries = (std::uint32_t{1} << kMaxConsumers) - 1;
  std::uint32_t bells = header_->data_wait.doorbells.load(std::memory_order_acquire) & kEntries;
  int woken = 0;
  while (bells != 0) {
    const auto id = static_cast<ConsumerId>(std::countr_zero(bells));
    bells &= bells - 1;
    layout::ConsumerEntry& c = consumer(id);
    // acquire: as the mask's load (a token replaced since is re-read next time).
    const std::uint64_t token = c.doorbell.load(std::memory_order_acquire);
    if (token == 0) continue;
    const int rang = doorbells_[id].ring(fd_, token);
    woken += std::max(rang, 0);
    const std::uint64_t rung = rang >= 0 ? token : 0;
    // relaxed: the WaitSet reads it only to choose its words; a stale value
    // costs it one word more (0) or, after a takeover, the window
    // docs/layout.md bounds. Stored only when it changes: this is the
    // consumer's cursor line.
    if (c.doorbell_rung.load(std::memory_order_relaxed) != rung) c.doorbell_rung.store(rung, std::memory_order_relaxed);
  }
  return woken;
}

void BroadcastRing::clear_doorbell(ConsumerId id, bool owner_died) noexcept {
  layout::ConsumerEntry& c = consumer(id);
  // relaxed: the entry is ours (its lock or state), as below.
  if (owner_died) detail::unlink_doorbell(fd_, c.doorbell.load(std::memory_order_relaxed));
  // relaxed (all three): the entry changes hands only through the release
  // and acquire of its state (or its lock), which order these stores; a
  // producer that still sees the old bit and token rings a doorbell nobody
  // sleeps on.
  header_->data_wait.doorbells.fetch_and(~(1U << id), std::memory_order_relaxed);
  c.doorbell.store(0, std::memory_order_relaxed);
  c.doorbell_rung.store(0, std::memory_order_relaxed);
}

void BroadcastRing::leave_fenced() noexcept {
  layout::WaitLine& line = header_->data_wait;
  // relaxed: the CAS decides.
  std::uint32_t v = line.signal.load(std::memory_order_relaxed);
  for (;;) {
    // A waiter set its bit since our last check: it may have skipped its
    // membarrier on the strength of kSignalFenced, so wake it (still fenced).
    if ((v & kSignalWaiting) != 0) return wake_consumers();
    // relaxed: waiters that read the cleared bit use membarrier again, which
    // needs no ordering from this store; a waiter whose fetch_or came first
    // made this CAS fail (bit 0).
    if (line.signal.compare_exchange_weak(v, v & ~kSignalFenced, std::memory_order_relaxed,
                                          std::memory_order_relaxed)) {
      fenced_ = false;
      quiet_publishes_ = 0;
      return;
    }
  }
}

void BroadcastRing::wake_producer() noexcept {
  if (end_epoch(header_->space_wait, false, false) != 0) {
    detail::futex_wake(header_->space_wait.signal, std::numeric_limits<int>::max(), detail::kFutexAnyBits);
  }
}

// Spinning steals the CPU from whoever must run to end the wait (the producer,
// or a sleeping consumer that must wake up to read) unless every process of
// the ring has a CPU. Counting consumers is the cheap proxy: processes outside
// the ring are not counted, the adaptive budget absorbs them.
bool BroadcastRing::spin_pays(WaitState& ws, std::int64_t now_ns) const noexcept {
  if (ws.processes == 0 || now_ns - ws.processes_counted_ns >= kRecountProcessesNs) {
    ws.processes = static_cast<std::uint32_t>(active_consumer_count()) + 1;
    ws.processes_counted_ns = now_ns;
  }
  return ws.processes <= usable_cpus();
}

// The one waiting loop behind recv_wait, push_wait and claim_wait. attempt()
// tries the operation and returns true when the wait is over (any outcome but
// "not yet"). Returns false at the deadline.
template <class Attempt>
bool BroadcastRing::wait(layout::WaitLine& line, WaitState& ws, WaitOptions options, Attempt&& attempt) noexcept {
  if (attempt()) return true;
  const IdleStrategy idle = options.idle;
  const std::int64_t start = detail::monotonic_ns();
  const std::int64_t deadline = start + std::max<std::int64_t>(options.timeout.count(), 0);
  std::int64_t now = start;

  if (idle == IdleStrategy::kSpin || idle == IdleStrategy::kSpinThenYield) {
    for (std::uint32_t polls = 1;; ++polls) {
      if (attempt()) return true;
      if (idle == IdleStrategy::kSpinThenYield && polls >= kYieldAfterPolls) {
        ::sched_yield();
      } else {
        detail::cpu_relax();
      }
      if (polls % kPollsPerClockRead == 0 && detail::monotonic_ns() >= deadline) return false;
    }
  }

  bool done = false;
  if (idle == IdleStrategy::kSpinThenBlock && ws.spin_budget_ns >= kMinSpinNs && spin_pays(ws, start)) {
    const std::int64_t spin_end = std::min<std::int64_t>(start + ws.spin_budget_ns, deadline);
    for (std::uint32_t polls = 1; !(done = attempt()); ++polls) {
      detail::cpu_relax();
      if (polls % kPollsPerClockRead == 0 && (now = detail::monotonic_ns()) >= spin_end) break;
    }
  }
  // The sleep handshake (docs/memory-ordering.md, "Sleeping and waking").
  while (!done) {
    now = detail::monotonic_ns();
    if (now >= deadline) break;
    // About to sleep: a short slice lets this thread preempt whatever runs
    // where it is woken (docs/reliability.md, "Waking on a busy CPU"). A
    // system call on a thread's first sleep only, before the handshake.
    detail::cap_thread_slice(waiter_slice());
    // Set the waiting bit with an RMW even when another waiter already set
    // it: the proof needs a modification of the word by this waiter before
    // its heavy barrier. Reading the word before the re-check is what makes
    // futex_wait return at once if a wake lands between the re-check and the
    // sleep. acquire: pairs with the release CAS in end_epoch().
    const std::uint32_t old = line.signal.fetch_or(kSignalWaiting, std::memory_order_acquire);
    const std::uint32_t v = old | kSignalWaiting;
    // Heavy side. seq_cst fence: pairs with the light side's fence where that
    // side fences (wakeups rings, unregistered processes, TSan builds, a
    // producer in fenced mode: kSignalFenced seen above). membarrier: forces
    // that fence onto the light sides that only have a compiler barrier. If
    // the kernel refuses it, this sleep is capped.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const bool covered = (flags_ & kFlagWakeups) != 0 || (old & kSignalFenced) != 0 || detail::heavy_barrier();
    if ((done = attempt())) break;
    // Consumers may have to pass a wake-up on (the wake chain); the producer
    // is the only sleeper on space_wait and is always woken directly.
    const bool data_side = &line == &header_->data_wait;
    std::int64_t sleep_ns = deadline - now;
    if (!covered) sleep_ns = std::min(sleep_ns, kUncoveredSleepNs);
    if (data_side) sleep_ns = std::min(sleep_ns, kChainRescueNs);
    const bool capped = sleep_ns < deadline - now;
    // relaxed: a display counter (ring-top), read by nobody's protocol.
    line.sleepers.fetch_add(1, std::memory_order_relaxed);
    const bool woken = detail::futex_wait(line.signal, v, epoch_bits(v), now + sleep_ns);
    // First thing after a wake-up: wake the rest of our epoch if the
    // producer left them to us.
    if (woken && data_side && must_pass_on(line, v)) {
      detail::futex_wake(line.signal, std::numeric_limits<int>::max(), epoch_bits(v));
    }
    line.sleepers.fetch_sub(1, std::memory_order_relaxed);
    done = attempt();
    if (done && capped && !woken && detail::monotonic_ns() >= now + sleep_ns) {
      // relaxed: a statistic (late_wakeups()).
      late_wakeups_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  ws.spin_budget_ns = next_spin_budget(ws.spin_budget_ns, detail::monotonic_ns() - start);
  return done;
}

RecvResult BroadcastRing::recv_wait(ConsumerId id, std::span<std::byte> out, WaitOptions options) noexcept {
  if (!owns(id)) return {Errc::invalid_consumer};
  RecvResult r{Errc::empty};
  const bool done = wait(header_->data_wait, local_[id].wait, options, [&]() noexcept {
    r = try_recv(id, out);
    // stalled: the producer was preempted mid-write; it wakes us when it commits.
    return r.status != Errc::empty && r.status != Errc::stalled;
  });
  return done ? r : RecvResult{Errc::timed_out};
}

Errc BroadcastRing::push_wait(std::span<const std::byte> payload, WaitOptions options) noexcept {
  Errc e = Errc::full;
  const bool done = wait(header_->space_wait, push_wait_, options, [&]() noexcept {
    e = try_push(payload);
    return e != Errc::full;
  });
  return done ? e : Errc::timed_out;
}

ProducerClaim BroadcastRing::claim_wait(std::size_t length, WaitOptions options) noexcept {
  ProducerClaim claim;
  const bool done = wait(header_->space_wait, push_wait_, options, [&]() noexcept {
    claim = try_claim(length);
    return claim.status() != Errc::full;
  });
  if (!done) claim.status_ = Errc::timed_out;
  return claim;
}

Errc BroadcastRing::wait_for_consumers(std::size_t count, std::chrono::nanoseconds timeout) const noexcept {
  assert(count <= kMaxConsumers);
  // Registering wakes nobody, so this polls; once, before a producer's first
  // push, a millisecond's delay costs nothing.
  const std::int64_t now = detail::monotonic_ns();
  const std::int64_t deadline = timeout.count() >= std::numeric_limits<std::int64_t>::max() - now
                                    ? std::numeric_limits<std::int64_t>::max()
                                    : now + timeout.count();
  while (active_consumer_count() < count) {
    if (detail::monotonic_ns() >= deadline) return Errc::timed_out;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Errc::ok;
}

}  // namespace ringcast
