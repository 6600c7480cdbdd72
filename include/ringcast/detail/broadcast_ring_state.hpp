// BroadcastRing's private helper types (broadcast_ring.hpp includes this
// header before the class, whose members hold them). Not part of the API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ringcast/layout.hpp"

namespace ringcast::detail {

// Reads what a WaitSet needs of a ring's internals (src/ring/wait_set.cpp).
struct WaitSetAccess;
// Hands a language binding that runs the hot path itself the mapping and the
// handle's hot-path state (ringcast_native_state, src/ring/c_api.cpp).
struct NativeAccess;

// How a read of a slot went (BroadcastRing::read_slot). kRecord: the slot at
// `pos` is a committed record header; `w0` holds its words[0] (meta and
// length) and nothing was copied.
enum class ReadOutcome : std::uint8_t { kOk, kNotYet, kWriting, kOverwritten, kCorrupt, kRecord };

// What a reader learnt from a record header (BroadcastRing::read_record).
struct RecordRead {
  ReadOutcome outcome = ReadOutcome::kOk;
  std::uint64_t slots = 0;          // positions the record takes
  std::uint64_t length = 0;         // payload bytes
  bool padding = false;             // skip it: no message (a padding or a loss marker)
  std::uint64_t lost = 0;           // a loss marker's count
  bool in_place = false;            // data points into the ring
  std::span<const std::byte> data;  // the payload (in place or in `copy_to`)
};

// What one waiter (a consumer id, or the producer) learnt from its past waits.
struct WaitState {
  std::uint32_t spin_budget_ns = 0;  // adaptive: how long the next wait may spin
  std::uint32_t processes = 0;       // active consumers + 1 as last counted; 0: never
  std::int64_t processes_counted_ns = 0;
};

// A handle's state for one consumer id it registered, touched only by the
// thread using that id, on a cache line of its own.
struct alignas(kCacheLine) ConsumerLocal {
  WaitState wait;                        // recv_wait's history
  std::uint64_t stable_from = 0;         // invariant 10 (0 on a ring without records)
  std::uint64_t view_next = 0;           // the cursor release_view sets; 0: no view open
  std::uint64_t upstream_lost_seen = 0;  // loss markers passed (upstream_lost_seen())
  std::unique_ptr<std::byte[]> buffer;   // copies for views and drain (buffer_bytes_)
};

// The producer's link to the WaitSet doorbell one consumer entry names
// (ConsumerEntry::doorbell; src/ring/doorbell.cpp): mapped on the first ring,
// kept until the token changes. Touched only by the producing thread.
class DoorbellLink {
 public:
  DoorbellLink() = default;
  DoorbellLink(DoorbellLink&& other) noexcept;
  DoorbellLink& operator=(DoorbellLink&& other) noexcept;
  DoorbellLink(const DoorbellLink&) = delete;
  DoorbellLink& operator=(const DoorbellLink&) = delete;
  ~DoorbellLink() { reset(); }

  // Rings the doorbell `token` beside the ring file `ring_fd` (maps it first
  // when the token is new; a token that could not be mapped is not retried
  // until it changes). Returns the sleepers it woke (0 or more), or -1 when
  // it could not ring. No allocation.
  int ring(int ring_fd, std::uint64_t token) noexcept;
  // Unmaps the doorbell, if any.
  void reset() noexcept;

 private:
  std::uint64_t token_ = 0;
  layout::Doorbell* bell_ = nullptr;
};

}  // namespace ringcast::detail
