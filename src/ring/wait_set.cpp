// WaitSet: one sleep over many rings' data_wait lines (futex_waitv), and the
// notifier thread behind notify_fd(). docs/memory-ordering.md, "Waiting on
// many rings", argues that no wake-up is lost.
#include "ringcast/wait_set.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <limits>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "doorbell.hpp"
#include "futex.hpp"
#include "membarrier.hpp"
#include "ofd_lock.hpp"
#include "sched_slice.hpp"
#include "timing.hpp"
#include "wait_line.hpp"

namespace ringcast {

namespace detail {

struct WaitSetAccess {
  static bool owns(const BroadcastRing& ring, ConsumerId id) noexcept { return ring.owns(id); }
  static layout::WaitLine& data_wait(BroadcastRing& ring) noexcept { return ring.header_->data_wait; }
  static int fd(const BroadcastRing& ring) noexcept { return ring.fd_; }
  static layout::ConsumerEntry& entry(BroadcastRing& ring, ConsumerId id) noexcept { return ring.consumer(id); }

  // Names the doorbell `token` in consumer `id`'s entry, for its producer to ring.
  static void attach_doorbell(BroadcastRing& ring, ConsumerId id, std::uint64_t token) noexcept {
    // relaxed: published by the release fetch_or below.
    ring.consumer(id).doorbell.store(token, std::memory_order_relaxed);
    // release: pairs with the acquire load in ring_doorbells().
    ring.header_->data_wait.doorbells.fetch_or(1U << id, std::memory_order_release);
  }
  static void detach_doorbell(BroadcastRing& ring, ConsumerId id) noexcept { ring.clear_doorbell(id, false); }

  // A message (or a lap, a padding, a loss marker) waits for `id`, or its
  // next slot is half-written by a producer that died: what would end a
  // recv_wait. A slot half-written by a live producer is not: it wakes the
  // sleepers when it commits.
  static bool has_message(const BroadcastRing& ring, ConsumerId id) noexcept {
    if (ring.lag(id) > 0) return true;
    // relaxed: the cursor is ours; a half-written slot is re-read by try_recv.
    const std::uint64_t pos = ring.consumer(id).cursor.load(std::memory_order_relaxed);
    if (ring.slot(pos).version.load(std::memory_order_relaxed) != 2 * pos + 1) return false;
    return !ring.is_producer_ && !ring.lock_is_held(kProducerLock);
  }
};

}  // namespace detail

namespace {

using detail::WaitSetAccess;

// WaitSet::State::control, the notifier's state. wait() run by the user
// leaves it at kDisarmed.
constexpr std::uint32_t kDisarmed = 0;  // the notifier sleeps until arm()
constexpr std::uint32_t kArmed = 1;     // the notifier waits for a message
constexpr std::uint32_t kStop = 2;      // the notifier exits

}  // namespace

struct WaitSet::State {
  struct Member {
    BroadcastRing* ring = nullptr;  // nullptr: a free index
    ConsumerId id = 0;
    layout::WaitLine* line = nullptr;
    std::uint32_t slept = 0;  // the line's signal this sleep expects
    int bell = -1;            // its doorbell's index in `bells`; -1: none
    bool on_line = false;     // this sleep includes the line's word
  };
  // A doorbell (doorbell.hpp), one per directory the members' rings are in.
  struct Bell {
    detail::DoorbellFile file;
    std::size_t members = 0;  // members whose entries name it
    std::uint32_t seen = 0;   // its word before this sleep's handshake
  };
  std::array<Member, kMaxMembers> members{};
  std::vector<std::optional<Bell>> bells;  // an empty place is reused
  std::size_t end = 0;                     // members at or past this index are free
  std::size_t next_scan = 0;               // where the next scan starts (fairness)
  std::size_t fallback_on = 0;             // the member the ENOSYS fallback sleeps on next
  // The notifier's state (kDisarmed, kArmed, kStop): a futex word of this
  // process that the notifier sleeps on beside the rings' words, so arm() and
  // the destructor can wake it.
  std::atomic<std::uint32_t> control{kDisarmed};
  int event_fd = -1;
  std::thread notifier;
  std::atomic<std::uint64_t> late_wakeups{0};  // see WaitSet::late_wakeups()

  bool has_message(std::size_t i) const noexcept {
    const Member& m = members[i];
    return m.ring != nullptr && WaitSetAccess::has_message(*m.ring, m.id);
  }

  // Writes up to ready.size() ready members, scanning from next_scan.
  std::size_t collect(std::span<std::size_t> ready) noexcept {
    std::size_t n = 0;
    for (std::size_t k = 0; k < end && n < ready.size(); ++k) {
      const std::size_t i = (next_scan + k) % end;
      if (has_message(i)) ready[n++] = i;
    }
    if (n > 0) next_scan = (ready[n - 1] + 1) % end;
    return n;
  }

  bool any_message() const noexcept {
    for (std::size_t i = 0; i < end; ++i) {
      if (has_message(i)) return true;
    }
    return false;
  }

  // Sleeps until a member may have a message, `control` leaves `expected`,
  // or the deadline; the caller re-scans. Returns true when the sleep ended at
  // a cap shorter than the deadline, not by a wake-up (late_wakeups). The
  // handshake of BroadcastRing::wait(), made on every member's line before
  // one sleep on all of them.
  bool sleep(std::int64_t now, std::int64_t deadline, std::uint32_t expected) noexcept {
    detail::cap_thread_slice(kDefaultWaiterSlice);
    // Each doorbell's word before the lines' bits are set: a producer that
    // ends an epoch this handshake begins rings after it, so the sleep sees
    // the change. acquire: pairs with the release fetch_add in
    // DoorbellLink::ring (nothing is read through it; the rings' own loads
    // re-check).
    for (std::optional<Bell>& b : bells) {
      if (b) b->seen = b->file.word().load(std::memory_order_acquire);
    }
    bool need_barrier = false;
    for (std::size_t i = 0; i < end; ++i) {
      Member& m = members[i];
      if (m.ring == nullptr) continue;
      // An RMW on every line before the heavy barrier, as a recv_wait makes on
      // its one line. acquire: pairs with the release CAS in end_epoch().
      // release: pairs with that CAS's acquire, so the producer that ends
      // this epoch sees the doorbell add() attached (ring_doorbells()).
      const std::uint32_t old = m.line->signal.fetch_or(kSignalWaiting, std::memory_order_acq_rel);
      m.slept = old | kSignalWaiting;
      if (!m.ring->wakeups() && (old & kSignalFenced) == 0) need_barrier = true;
    }
    // Heavy side, once for all lines. seq_cst fence: pairs with the light
    // side's fence on rings that fence; membarrier forces it onto the
    // producers that only have a compiler barrier. If refused, capped sleep.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const bool covered = !need_barrier || detail::heavy_barrier();
    if (any_message() || control.load(std::memory_order_relaxed) != expected) return false;

    std::int64_t sleep_ns = std::min(deadline - now, detail::kChainRescueNs);
    if (!covered) sleep_ns = std::min(sleep_ns, detail::kUncoveredSleepNs);
    // The line's word of each member whose producer has not rung our
    // doorbell (once it has, it rings it whenever it ends an epoch of this
    // line). relaxed: a stale 0 costs one word; docs/layout.md, "Doorbell",
    // bounds a stale confirmation (a producer taking over).
    std::size_t lines = 0;
    std::size_t live_bells = 0;
    for (const std::optional<Bell>& b : bells) live_bells += b.has_value() ? 1U : 0U;
    for (std::size_t i = 0; i < end; ++i) {
      Member& m = members[i];
      if (m.ring == nullptr) continue;
      m.on_line = m.bell < 0 || WaitSetAccess::entry(*m.ring, m.id).doorbell_rung.load(std::memory_order_relaxed) !=
                                    bells[static_cast<std::size_t>(m.bell)]->file.token();
      lines += m.on_line ? 1U : 0U;
    }
    // Members in more directories than futex_waitv has room for beside
    // their lines (and the notifier's word): every line, no doorbell.
    const bool with_bells = live_bells + lines + 1 <= detail::kFutexWaitAnyMax;
    std::array<detail::FutexWaiter, detail::kFutexWaitAnyMax> waiters;
    std::size_t n = 0;
    for (std::optional<Bell>& b : bells) {
      if (b && with_bells) waiters[n++] = {&b->file.word(), b->seen};
    }
    for (std::size_t i = 0; i < end; ++i) {
      Member& m = members[i];
      if (m.ring == nullptr) continue;
      // relaxed: a display counter (ring-top), read by nobody's protocol.
      m.line->sleepers.fetch_add(1, std::memory_order_relaxed);
      m.on_line = m.on_line || !with_bells;
      if (m.on_line) waiters[n++] = {&m.line->signal, m.slept};
    }
    // Only the notifier's wait can see `control` change (arm(), the
    // destructor); a user's wait() leaves the word out, one key less per
    // call, unless it has no member (then it sleeps on it until the deadline).
    if (expected == kArmed || n == 0) waiters[n++] = {&control, expected};
    // One word (a doorbell every producer has rung, or one member): a plain
    // futex wait, which also needs no futex_waitv.
    detail::WaitAny woken =
        n == 1 ? (detail::futex_wait(*waiters[0].word, waiters[0].expected, detail::kFutexAnyBits, now + sleep_ns)
                      ? detail::WaitAny::kWoken
                      : detail::WaitAny::kNotSleeping)
               : detail::futex_wait_any(std::span(waiters.data(), n), now + sleep_ns);
    if (woken == detail::WaitAny::kUnsupported) woken = fallback_sleep(now + sleep_ns);
    for (std::size_t i = 0; i < end; ++i) {
      Member& m = members[i];
      if (m.ring == nullptr) continue;
      // The wake chain: a producer that woke us may have left the rest of
      // the epoch to us. We cannot tell which of the lines woke us (several
      // may have), so pass on every line whose epoch ended since we slept.
      // relaxed: as must_pass_on's load; a stale value passes on, never wrong.
      const std::uint32_t now_signal = m.line->signal.load(std::memory_order_relaxed);
      if (woken == detail::WaitAny::kWoken && m.on_line &&
          now_signal / kSignalEpochStep != m.slept / kSignalEpochStep && detail::must_pass_on(*m.line, m.slept)) {
        detail::futex_wake(m.line->signal, std::numeric_limits<int>::max(), detail::epoch_bits(m.slept));
      }
      m.line->sleepers.fetch_sub(1, std::memory_order_relaxed);
    }
    return sleep_ns < deadline - now && woken != detail::WaitAny::kWoken && detail::monotonic_ns() >= now + sleep_ns;
  }

  // Kernels before 5.16: one member's word at a time, for kFallbackSleep.
  detail::WaitAny fallback_sleep(std::int64_t deadline) noexcept {
    const std::int64_t capped =
        std::min(deadline, detail::monotonic_ns() + std::chrono::nanoseconds(kFallbackSleep).count());
    for (std::size_t k = 0; k < end; ++k) {
      Member& m = members[(fallback_on + k) % end];
      if (m.ring == nullptr) continue;
      fallback_on = (fallback_on + k + 1) % end;
      return detail::futex_wait(m.line->signal, m.slept, detail::kFutexAnyBits, capped) ? detail::WaitAny::kWoken
                                                                                        : detail::WaitAny::kNotSleeping;
    }
    return detail::futex_wait(control, control.load(std::memory_order_relaxed), detail::kFutexAnyBits, capped)
               ? detail::WaitAny::kWoken
               : detail::WaitAny::kNotSleeping;
  }

  // The clock is read only after a scan found nothing: a busy consumer calls
  // wait() after every batch it drains, and a read on entry cost one read
  // more per batch than the one its sleep needs (clock_gettime was 5 % of a
  // 16-ring consumer's samples).
  WaitSetResult wait_for(std::span<std::size_t> ready, std::chrono::nanoseconds timeout,
                         std::uint32_t expected) noexcept {
    std::int64_t deadline = -1;  // set at the first empty scan
    for (;;) {
      if (const std::size_t n = collect(ready); n > 0) return {Errc::ok, n};
      const std::int64_t now = detail::monotonic_ns();
      if (deadline < 0) {
        deadline = timeout.count() >= std::numeric_limits<std::int64_t>::max() - now
                       ? std::numeric_limits<std::int64_t>::max()
                       : now + std::max<std::int64_t>(timeout.count(), 0);
      }
      // acquire: pairs with arm()'s release store (the members it may change).
      if (now >= deadline || control.load(std::memory_order_acquire) != expected) return {Errc::timed_out};
      if (sleep(now, deadline, expected) && any_message()) {
        // relaxed: a statistic.
        late_wakeups.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // The notifier thread: while armed, wait; on a message, disarm and make the
  // eventfd readable.
  void notify_loop() noexcept {
    std::size_t one[1];
    for (;;) {
      // acquire: pairs with the release stores of arm() and the destructor.
      const std::uint32_t c = control.load(std::memory_order_acquire);
      if (c == kStop) return;
      if (c == kDisarmed) {
        (void)detail::futex_wait(control, kDisarmed, detail::kFutexAnyBits, std::numeric_limits<std::int64_t>::max());
        continue;
      }
      if (!wait_for(one, std::chrono::nanoseconds::max(), kArmed)) continue;
      std::uint32_t armed = kArmed;
      // relaxed: the eventfd write publishes nothing the user reads from us.
      if (control.compare_exchange_strong(armed, kDisarmed, std::memory_order_relaxed)) {
        const std::uint64_t v = 1;
        while (::write(event_fd, &v, sizeof v) < 0 && errno == EINTR) {
        }
      }
    }
  }

  // Gives member `i` the doorbell of its ring's directory, making one if
  // none serves it yet; leaves it without one when the ring has no directory
  // or the file cannot be made (it then sleeps on its line).
  void attach_bell(std::size_t i) {
    Member& m = members[i];
    const int fd = WaitSetAccess::fd(*m.ring);
    const auto dir = detail::DoorbellFile::directory_of(fd);
    if (!dir) return;
    std::size_t b = 0;
    while (b < bells.size() && !(bells[b] && bells[b]->file.directory() == *dir)) ++b;
    if (b == bells.size()) {
      auto file = detail::DoorbellFile::create(fd);
      if (!file) return;
      b = 0;
      while (b < bells.size() && bells[b]) ++b;
      if (b == bells.size()) bells.emplace_back();
      bells[b].emplace(Bell{std::move(*file)});
    }
    ++bells[b]->members;
    m.bell = static_cast<int>(b);
    WaitSetAccess::attach_doorbell(*m.ring, m.id, bells[b]->file.token());
  }

  // Takes member `i`'s doorbell out of its entry; a doorbell no member names
  // any more is unlinked.
  void detach_bell(std::size_t i) noexcept {
    Member& m = members[i];
    if (m.bell < 0) return;
    WaitSetAccess::detach_doorbell(*m.ring, m.id);
    std::optional<Bell>& b = bells[static_cast<std::size_t>(m.bell)];
    if (--b->members == 0) b.reset();
    m.bell = -1;
  }

  ~State() {
    if (notifier.joinable()) {
      // release: pairs with notify_loop's acquire load.
      control.store(kStop, std::memory_order_release);
      detail::futex_wake(control, std::numeric_limits<int>::max(), detail::kFutexAnyBits);
      notifier.join();
    }
    if (event_fd >= 0) ::close(event_fd);
    for (std::size_t i = 0; i < end; ++i) {
      if (members[i].ring != nullptr) detach_bell(i);
    }
  }
};

WaitSet::WaitSet() : state_(std::make_unique<State>()) {}
WaitSet::WaitSet(WaitSet&& other) noexcept = default;
WaitSet& WaitSet::operator=(WaitSet&& other) noexcept = default;
WaitSet::~WaitSet() = default;

Result<std::size_t> WaitSet::add(BroadcastRing& ring, ConsumerId id) {
  if (!WaitSetAccess::owns(ring, id))
    return make_error(Errc::invalid_consumer, "wait set: add: not a consumer of the ring");
  State& s = *state_;
  std::size_t i = 0;
  while (i < kMaxMembers && s.members[i].ring != nullptr) ++i;
  if (i == kMaxMembers) return make_error(Errc::no_consumer_slot, "wait set: add: already 127 members");
  s.members[i] = {&ring, id, &WaitSetAccess::data_wait(ring)};
  s.end = std::max(s.end, i + 1);
  s.attach_bell(i);
  return i;
}

Errc WaitSet::remove(std::size_t member) noexcept {
  State& s = *state_;
  if (member >= s.end || s.members[member].ring == nullptr) return Errc::invalid_consumer;
  s.detach_bell(member);
  s.members[member] = {};
  while (s.end > 0 && s.members[s.end - 1].ring == nullptr) --s.end;
  if (s.next_scan >= s.end) s.next_scan = 0;
  return Errc::ok;
}

std::size_t WaitSet::size() const noexcept {
  std::size_t n = 0;
  for (std::size_t i = 0; i < state_->end; ++i)
    if (state_->members[i].ring != nullptr) ++n;
  return n;
}

WaitSetResult WaitSet::wait(std::span<std::size_t> ready, std::chrono::nanoseconds timeout) noexcept {
  // relaxed: only this thread changes control while the notifier is not armed.
  return state_->wait_for(ready, timeout, state_->control.load(std::memory_order_relaxed));
}

bool WaitSet::ready(std::size_t member) const noexcept { return member < state_->end && state_->has_message(member); }

std::uint64_t WaitSet::late_wakeups() const noexcept {
  // relaxed: a statistic.
  return state_->late_wakeups.load(std::memory_order_relaxed);
}

Result<int> WaitSet::notify_fd() {
  State& s = *state_;
  if (s.event_fd >= 0) return s.event_fd;
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return make_error(Errc::io_error, "wait set: eventfd", errno);
  s.event_fd = fd;
  // relaxed: the thread's start orders it.
  s.control.store(kArmed, std::memory_order_relaxed);
  try {
    s.notifier = std::thread([&s] { s.notify_loop(); });
  } catch (const std::system_error& e) {
    ::close(fd);
    s.event_fd = -1;
    s.control.store(kDisarmed, std::memory_order_relaxed);
    return make_error(Errc::io_error, "wait set: notifier thread", e.code().value());
  }
  return fd;
}

void WaitSet::arm() noexcept {
  State& s = *state_;
  if (s.event_fd < 0) return;
  std::uint64_t v = 0;
  while (::read(s.event_fd, &v, sizeof v) < 0 && errno == EINTR) {
  }
  std::uint32_t disarmed = kDisarmed;
  // release: pairs with notify_loop's acquire load, so the notifier sees the
  // members as this thread left them.
  if (s.control.compare_exchange_strong(disarmed, kArmed, std::memory_order_release, std::memory_order_relaxed)) {
    detail::futex_wake(s.control, 1, detail::kFutexAnyBits);
  }
}

}  // namespace ringcast
