// One wait over many rings: a WaitSet sleeps until any of its members (a
// consumer of a ring, up to kMaxMembers of them, each on its own ring or not)
// has a message, with no polling and no thread per ring.
//
// How: before it sleeps it makes the handshake a recv_wait makes on one ring
// on every member ring's data_wait line, and then sleeps on one futex word,
// its doorbell: a small file beside the rings (one per directory they are
// in) that each member's producer rings when it wakes that ring's sleepers
// (docs/layout.md, "Doorbell"). A member whose producer has not rung it yet
// (or cannot: an anonymous ring, an older build) is slept on through its
// line's word as well, all in one futex_waitv(2) (Linux 5.16 and later). On
// an older kernel that must sleep on several words (futex_waitv fails with
// ENOSYS) it sleeps on one at a time for at most kFallbackSleep, so a message
// on another member is seen up to that late (docs/memory-ordering.md,
// "Waiting on many rings").
//
// For an event loop (epoll, Boost.Asio's posix::stream_descriptor), notify_fd()
// returns an eventfd that turns readable when a member has a message: one
// helper thread per WaitSet (not per ring) sleeps as wait() does and writes
// the eventfd. The fd is one-shot: after it turned readable, receive what you
// want, then call arm() to be notified again (arm() clears the fd).
//
// Readiness is level-triggered and may be spurious: a member is ready when
// its consumer's cursor is behind the producer's position (Errc::lapped,
// paddings and loss markers included) or its next slot is half-written by a
// producer that died (try_recv then reports producer_dead). Receive with
// try_recv/drain/try_view until Errc::empty; a ready member whose try_recv
// says empty is harmless.
//
// Thread safety: one thread at a time calls add, remove and wait. While the
// notifier is armed (from notify_fd() or arm() until the fd turns readable)
// only arm() and the destructor may be called: the helper thread reads the
// members.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ringcast/broadcast_ring.hpp"
#include "ringcast/error.hpp"

namespace ringcast {

struct [[nodiscard]] WaitSetResult {
  Errc status = Errc::ok;  // ok (count >= 1) or timed_out (count 0)
  std::size_t count = 0;   // member indices written to `ready`
  explicit operator bool() const noexcept { return status == Errc::ok; }
};

class WaitSet {
 public:
  // futex_waitv takes 128 words; the WaitSet keeps one for its notifier.
  static constexpr std::size_t kMaxMembers = 127;
  // The longest a sleep lasts on kernels without futex_waitv.
  static constexpr std::chrono::milliseconds kFallbackSleep{1};

  WaitSet();
  WaitSet(WaitSet&& other) noexcept;
  WaitSet& operator=(WaitSet&& other) noexcept;
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;
  // Stops the notifier thread and closes its fd, if any.
  ~WaitSet();

  // Adds consumer `id` of `ring`; returns its member index, the lowest free
  // one. The first member whose ring file is in a directory makes the
  // WaitSet's doorbell there (`.ringcast-doorbell-<token>`, with the ring
  // file's permissions; unlinked when its last member is removed); if it
  // cannot, the member is slept on through its ring's line, which costs more
  // CPU per sleep but works the same. Errors: invalid_consumer (`id` not
  // registered through `ring`), no_consumer_slot (kMaxMembers members
  // already).
  // REQUIRES: `ring` is neither moved nor destroyed, and `id` not
  // unregistered, until the member is removed (or the WaitSet destroyed).
  Result<std::size_t> add(BroadcastRing& ring, ConsumerId id);
  // Removes a member; its index becomes free. invalid_consumer if it is none.
  Errc remove(std::size_t member) noexcept;
  // Members present.
  [[nodiscard]] std::size_t size() const noexcept;

  // Returns at once if a member has a message, else sleeps until one has or
  // `timeout` passes. Writes the indices of ready members to `ready` (at most
  // ready.size(); the scan starts after the last member reported, so none
  // starves) and returns their count with ok, or timed_out. Allocation-free.
  WaitSetResult wait(std::span<std::size_t> ready, std::chrono::nanoseconds timeout) noexcept;
  // Whether `member` has a message now (false for a free index). No sleep.
  [[nodiscard]] bool ready(std::size_t member) const noexcept;
  // Sleeps that ended at their cap (the wake chain's rescue interval, or 1 ms
  // when membarrier(2) is refused) rather than by a wake-up, after which a
  // member had a message: a wake-up lost, or late because its waker was
  // stopped or starved. As BroadcastRing::late_wakeups(); any thread.
  [[nodiscard]] std::uint64_t late_wakeups() const noexcept;

  // An eventfd (non-blocking, close-on-exec, owned by the WaitSet) that turns
  // readable when a member has a message; the first call starts the helper
  // thread and arms it. io_error if the eventfd or the thread cannot be made.
  Result<int> notify_fd();
  // Clears the fd and re-arms the helper: it fires again at once if a member
  // still has a message, else when one gets one. No effect while armed.
  void arm() noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ringcast
