// The C ABI (include/ringcast/ringcast.h) over BroadcastRing. Every entry
// point is noexcept: the setup calls catch what the C++ setup may throw
// (std::bad_alloc from a path string, a status snapshot) and report it as a
// status; the hot-path calls forward to noexcept inline C++ calls and cost
// the call: 3-4 ns on a push, which saves six registers and sets up the
// frame the inlined write needs (docs/benchmarks.md, "C ABI and bindings").
#include "ringcast/ringcast.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <new>
#include <span>
#include <string>

#include "c_ring.hpp"
#include "ringcast/broadcast_ring.hpp"

using ringcast::BroadcastRing;

namespace ringcast::detail {

// ringcast_native_state's view of a handle (ringcast.h, "native hot paths").
struct NativeAccess {
  static void fill(BroadcastRing& r, ringcast_native& n) noexcept {
    n.layout_version = kLayoutVersion;
    n.flags = r.flags_;
    n.capacity = r.capacity_;
    n.max_message = r.max_message_;
    n.block_slots = r.block_;
    n.header = r.header_;
    n.slots = r.slots_;
    n.is_producer = &r.is_producer_;
    n.seq = &r.seq_;
    n.payload_bytes = &r.payload_bytes_;
    n.cached_min = &r.cached_min_;
    n.stamp_below = &r.stamp_below_;
    n.fenced = &r.fenced_;
    n.owned = &r.owned_;
    n.stable_from = &r.local_[0].stable_from;
    n.stable_from_stride = sizeof(ConsumerLocal);
  }
  static void wake_consumers(BroadcastRing& r) noexcept { r.wake_consumers(); }
  static void wake_producer(BroadcastRing& r) noexcept { r.wake_producer(); }
};

}  // namespace ringcast::detail
using ringcast::Errc;

namespace {

// ringcast_status names Errc's values one for one, so conversion is a cast.
#define RINGCAST_SAME_CODE(c, e) static_assert(static_cast<int>(c) == static_cast<int>(Errc::e))
RINGCAST_SAME_CODE(RINGCAST_OK, ok);
RINGCAST_SAME_CODE(RINGCAST_FULL, full);
RINGCAST_SAME_CODE(RINGCAST_EMPTY, empty);
RINGCAST_SAME_CODE(RINGCAST_NO_CONSUMER_SLOT, no_consumer_slot);
RINGCAST_SAME_CODE(RINGCAST_INVALID_CONSUMER, invalid_consumer);
RINGCAST_SAME_CODE(RINGCAST_PAYLOAD_TOO_LARGE, payload_too_large);
RINGCAST_SAME_CODE(RINGCAST_LAYOUT_MISMATCH, layout_mismatch);
RINGCAST_SAME_CODE(RINGCAST_IO_ERROR, io_error);
RINGCAST_SAME_CODE(RINGCAST_NOT_READY, not_ready);
RINGCAST_SAME_CODE(RINGCAST_PRODUCER_BUSY, producer_busy);
RINGCAST_SAME_CODE(RINGCAST_NOT_PRODUCER, not_producer);
RINGCAST_SAME_CODE(RINGCAST_LAPPED, lapped);
RINGCAST_SAME_CODE(RINGCAST_STALLED, stalled);
RINGCAST_SAME_CODE(RINGCAST_PRODUCER_DEAD, producer_dead);
RINGCAST_SAME_CODE(RINGCAST_TIMED_OUT, timed_out);
RINGCAST_SAME_CODE(RINGCAST_ALREADY_EXISTS, already_exists);
RINGCAST_SAME_CODE(RINGCAST_BUFFER_TOO_SMALL, buffer_too_small);
#undef RINGCAST_SAME_CODE
static_assert(RINGCAST_MAX_CONSUMERS == ringcast::kMaxConsumers);
static_assert(RINGCAST_MAX_INLINE_PAYLOAD == ringcast::kMaxPayload);
static_assert(sizeof(ringcast_recv_result) == 16, "returned in two registers, as RecvResult");
// The layout a native hot path relies on (ringcast.h, "native hot paths").
namespace L = ringcast::layout;
static_assert(RINGCAST_LAYOUT_VERSION == ringcast::kLayoutVersion);
static_assert(RINGCAST_LAYOUT_HEADER_BYTES == L::kHeaderBytes);
static_assert(RINGCAST_LAYOUT_SLOT_BYTES == ringcast::kSlotBytes && sizeof(L::Slot) == ringcast::kSlotBytes);
static_assert(RINGCAST_LAYOUT_PRODUCER_SEQ ==
              offsetof(L::RingHeader, producer) + offsetof(L::ProducerLine, producer_seq));
static_assert(RINGCAST_LAYOUT_PAYLOAD_BYTES ==
              offsetof(L::RingHeader, producer) + offsetof(L::ProducerLine, payload_bytes));
static_assert(RINGCAST_LAYOUT_WRITE_INTENT == offsetof(L::RingHeader, tail) + offsetof(L::TailLine, write_intent));
static_assert(RINGCAST_LAYOUT_DATA_WAIT == offsetof(L::RingHeader, data_wait) + offsetof(L::WaitLine, signal));
static_assert(RINGCAST_LAYOUT_SPACE_WAIT == offsetof(L::RingHeader, space_wait) + offsetof(L::WaitLine, signal));
static_assert(RINGCAST_LAYOUT_CONSUMERS == offsetof(L::RingHeader, consumers) &&
              offsetof(L::ConsumerEntry, cursor) == 0);
static_assert(RINGCAST_LAYOUT_CONSUMER_BYTES == sizeof(L::ConsumerEntry));
static_assert(RINGCAST_LAYOUT_CONSUMER_STATE == offsetof(L::ConsumerEntry, state));
static_assert(RINGCAST_LAYOUT_SLOT_WORDS == offsetof(L::Slot, words) && offsetof(L::Slot, version) == 0 &&
              sizeof(L::Slot::words) == 7 * 8);
static_assert(RINGCAST_LAYOUT_RECORD_BIT == ringcast::kRecordBit);
static_assert(RINGCAST_LAYOUT_SIGNAL_WAITING == ringcast::kSignalWaiting);
static_assert(RINGCAST_LAYOUT_CONSUMER_ACTIVE == ringcast::kConsumerActive);

ringcast_status to_c(Errc e) noexcept { return static_cast<ringcast_status>(e); }

ringcast_recv_result to_c(ringcast::RecvResult r) noexcept { return {to_c(r.status), r.length, r.missed}; }

ringcast_batch_result to_c(ringcast::BatchResult b) noexcept { return {to_c(b.status), b.count, b.missed}; }

// The last failed setup call's text, per thread (ringcast_last_error_message).
thread_local char tl_message[512] = "";

void set_message(const char* text) noexcept {
  const std::size_t n = std::min(std::strlen(text), sizeof tl_message - 1);
  std::memcpy(tl_message, text, n);
  tl_message[n] = '\0';
}

ringcast_status fail(const ringcast::Error& e) noexcept {
  try {
    set_message(e.message().c_str());
  } catch (...) {  // no memory for the text: its first part still says which step
    set_message(e.what);
  }
  return to_c(e.code);
}

ringcast_status fail(ringcast_status status, const char* text) noexcept {
  set_message(text);
  return status;
}

// Runs a setup step whose C++ call may throw; all it throws for is an
// allocation (std::bad_alloc, or std::length_error from a path string).
template <class F>
ringcast_status guarded(const char* what, F&& step) noexcept {
  try {
    return step();
  } catch (...) {
    return fail(RINGCAST_OUT_OF_MEMORY, what);
  }
}

ringcast::WaitOptions wait_options(std::uint64_t timeout_ns, ringcast_idle idle) noexcept {
  using ringcast::IdleStrategy;
  IdleStrategy strategy = IdleStrategy::kSpinThenBlock;
  switch (idle) {
    case RINGCAST_IDLE_SPIN:
      strategy = IdleStrategy::kSpin;
      break;
    case RINGCAST_IDLE_SPIN_THEN_YIELD:
      strategy = IdleStrategy::kSpinThenYield;
      break;
    case RINGCAST_IDLE_BLOCK:
      strategy = IdleStrategy::kBlock;
      break;
    default:  // RINGCAST_IDLE_SPIN_THEN_BLOCK, and any other value
      break;
  }
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return {std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(timeout_ns, kMax))), strategy};
}

ringcast::CreateOptions create_options(const ringcast_create_options* o) noexcept {
  ringcast::CreateOptions options;
  if (o == nullptr) return options;
  if (o->mode != 0) options.mode = static_cast<mode_t>(o->mode);
  options.replace = o->replace;
  options.lossy = o->lossy;
  options.wakeups = o->wakeups;
  options.claim_producer = !o->no_producer;
  options.reap_on_full = o->reap_on_full;
  options.max_message = o->max_message;
  options.separate_slots = o->separate_slots;
  return options;
}

// Wraps a new C++ ring in a handle for *out.
ringcast_status adopt(ringcast::Result<BroadcastRing>&& made, ringcast_ring** out) noexcept {
  if (!made) return fail(made.error());
  *out = new (std::nothrow) ringcast_ring(std::move(*made));
  return *out != nullptr ? RINGCAST_OK : fail(RINGCAST_OUT_OF_MEMORY, "allocating the handle");
}

std::span<const std::byte> bytes(const void* data, std::size_t length) noexcept {
  return {static_cast<const std::byte*>(data), length};
}

// Thrown by ringcast_drain's callback wrapper to stop a batch.
struct StopBatch {};

// A claim's outcome: its room in *data on ok.
ringcast_status open_claim(ringcast_ring* ring, ringcast::ProducerClaim&& claim, void** data) noexcept {
  if (!claim) return to_c(claim.status());
  *data = claim.data().data();
  ring->claim = std::move(claim);
  return RINGCAST_OK;
}

}  // namespace

extern "C" {

const char* ringcast_status_name(ringcast_status status) noexcept {
  switch (status) {
    case RINGCAST_INVALID_ARGUMENT:
      return "invalid_argument";
    case RINGCAST_OUT_OF_MEMORY:
      return "out_of_memory";
    case RINGCAST_CANCELLED:
      return "cancelled";
    default:
      break;
  }
  if (status < RINGCAST_OK || status > RINGCAST_BUFFER_TOO_SMALL) return "unknown";
  return ringcast::to_string(static_cast<Errc>(status)).data();  // the names are NUL-terminated literals
}

const char* ringcast_last_error_message(void) noexcept { return tl_message; }

ringcast_status ringcast_create(const char* path, std::uint64_t capacity, const ringcast_create_options* options,
                                ringcast_ring** ring) noexcept {
  if (path == nullptr || ring == nullptr) return fail(RINGCAST_INVALID_ARGUMENT, "create: path or ring is NULL");
  return guarded("create", [&] { return adopt(BroadcastRing::create(path, capacity, create_options(options)), ring); });
}

ringcast_status ringcast_create_anonymous(std::uint64_t capacity, const ringcast_create_options* options,
                                          ringcast_ring** ring) noexcept {
  if (ring == nullptr) return fail(RINGCAST_INVALID_ARGUMENT, "create_anonymous: ring is NULL");
  return guarded("create_anonymous",
                 [&] { return adopt(BroadcastRing::create_anonymous(capacity, create_options(options)), ring); });
}

ringcast_status ringcast_open(const char* path, const ringcast_open_options* options, ringcast_ring** ring) noexcept {
  if (path == nullptr || ring == nullptr) return fail(RINGCAST_INVALID_ARGUMENT, "open: path or ring is NULL");
  ringcast::OpenOptions o;
  if (options != nullptr) {
    o.expected_capacity = options->expected_capacity;
    o.read_only = options->read_only;
    o.reap_on_full = options->reap_on_full;
    o.read_only_slots = options->read_only_slots;
  }
  return guarded("open", [&] { return adopt(BroadcastRing::open(path, o), ring); });
}

void ringcast_close(ringcast_ring* ring) noexcept { delete ring; }

ringcast_status ringcast_claim_producer(ringcast_ring* ring) noexcept {
  return guarded("claim_producer", [&] {
    const auto claimed = ring->ring.claim_producer();
    return claimed ? RINGCAST_OK : fail(claimed.error());
  });
}

void ringcast_release_producer(ringcast_ring* ring) noexcept { ring->ring.release_producer(); }

bool ringcast_is_producer(const ringcast_ring* ring) noexcept { return ring->ring.is_producer(); }

ringcast_status ringcast_register(ringcast_ring* ring, ringcast_start_at start, std::uint32_t* id) noexcept {
  if (id == nullptr || (start != RINGCAST_START_LATEST && start != RINGCAST_START_OLDEST)) {
    return fail(RINGCAST_INVALID_ARGUMENT, "register: id is NULL or start is not a ringcast_start_at");
  }
  return guarded("register", [&] {
    const auto got = ring->ring.register_consumer(start == RINGCAST_START_OLDEST ? ringcast::StartAt::kOldest
                                                                                 : ringcast::StartAt::kLatest);
    if (!got) return fail(got.error());
    *id = *got;
    return RINGCAST_OK;
  });
}

ringcast_status ringcast_unregister(ringcast_ring* ring, std::uint32_t id) noexcept {
  return to_c(ring->ring.unregister_consumer(id));
}

ringcast_status ringcast_reap_dead_consumers(ringcast_ring* ring, std::size_t* freed) noexcept {
  return guarded("reap_dead_consumers", [&] {
    const auto reaped = ring->ring.reap_dead_consumers();
    if (!reaped) return fail(reaped.error());
    if (freed != nullptr) *freed = *reaped;
    return RINGCAST_OK;
  });
}

ringcast_status ringcast_try_push(ringcast_ring* ring, const void* data, std::size_t length) noexcept {
  return to_c(ring->ring.try_push(bytes(data, length)));
}

ringcast_batch_result ringcast_try_push_batch(ringcast_ring* ring, const void* data, const std::uint32_t* lengths,
                                              std::size_t count) noexcept {
  if (lengths == nullptr && count != 0) return {RINGCAST_INVALID_ARGUMENT, 0, 0};
  // The C++ call takes spans: made here, kChunk at a time, on the stack.
  constexpr std::size_t kChunk = 64;
  std::array<std::span<const std::byte>, kChunk> chunk;
  const auto* at = static_cast<const std::byte*>(data);
  std::size_t pushed = 0;
  while (pushed < count) {
    const std::size_t n = std::min(kChunk, count - pushed);
    for (std::size_t i = 0; i < n; ++i) {
      chunk[i] = {at, lengths[pushed + i]};
      at += lengths[pushed + i];
    }
    const ringcast::BatchResult b = ring->ring.try_push_batch({chunk.data(), n});
    pushed += b.count;
    if (b.count < n) return {to_c(b.status), pushed, 0};
  }
  return {RINGCAST_OK, pushed, 0};
}

ringcast_status ringcast_push_wait(ringcast_ring* ring, const void* data, std::size_t length, std::uint64_t timeout_ns,
                                   ringcast_idle idle) noexcept {
  return to_c(ring->ring.push_wait(bytes(data, length), wait_options(timeout_ns, idle)));
}

ringcast_status ringcast_try_claim(ringcast_ring* ring, std::size_t length, void** data) noexcept {
  if (ring->claim) return RINGCAST_INVALID_ARGUMENT;
  return open_claim(ring, ring->ring.try_claim(length), data);
}

ringcast_status ringcast_claim_wait(ringcast_ring* ring, std::size_t length, void** data, std::uint64_t timeout_ns,
                                    ringcast_idle idle) noexcept {
  if (ring->claim) return RINGCAST_INVALID_ARGUMENT;
  return open_claim(ring, ring->ring.claim_wait(length, wait_options(timeout_ns, idle)), data);
}

ringcast_status ringcast_commit(ringcast_ring* ring, std::size_t length) noexcept {
  if (!ring->claim) return RINGCAST_INVALID_ARGUMENT;
  ring->claim.commit(length);
  return RINGCAST_OK;
}

ringcast_status ringcast_abort(ringcast_ring* ring) noexcept {
  if (!ring->claim) return RINGCAST_INVALID_ARGUMENT;
  ring->claim.abort();
  return RINGCAST_OK;
}

ringcast_recv_result ringcast_try_recv(ringcast_ring* ring, std::uint32_t id, void* buffer,
                                       std::size_t capacity) noexcept {
  return to_c(ring->ring.try_recv(id, {static_cast<std::byte*>(buffer), capacity}));
}

ringcast_recv_result ringcast_recv_wait(ringcast_ring* ring, std::uint32_t id, void* buffer, std::size_t capacity,
                                        std::uint64_t timeout_ns, ringcast_idle idle) noexcept {
  return to_c(ring->ring.recv_wait(id, {static_cast<std::byte*>(buffer), capacity}, wait_options(timeout_ns, idle)));
}

// clang-tidy 14 reports an escape from any noexcept function that catches,
// with catch (...), what a lambda throws through a template's call (here, and
// in the header's declaration): a false positive.
// NOLINTNEXTLINE(bugprone-exception-escape)
ringcast_batch_result ringcast_drain(ringcast_ring* ring, std::uint32_t id, ringcast_message_fn fn, void* context,
                                     std::size_t max) noexcept {
  if (fn == nullptr) return {RINGCAST_INVALID_ARGUMENT, 0, 0};
  // A callback's stop leaves drain as an exception, which is how drain
  // leaves the whole batch unconsumed; it never leaves this function.
  const auto deliver = [fn, context](std::span<const std::byte> m) {
    if (fn(context, m.data(), m.size()) != 0) throw StopBatch{};
  };
  try {
    return to_c(ring->ring.drain(id, deliver, max));
  } catch (...) {  // StopBatch, or what a C++ callback threw
    return {RINGCAST_CANCELLED, 0, 0};
  }
}

ringcast_batch_result ringcast_recv_batch(ringcast_ring* ring, std::uint32_t id, void* buffer, std::size_t capacity,
                                          std::uint32_t* lengths, std::size_t max) noexcept {
  if (lengths == nullptr || max == 0) return {RINGCAST_INVALID_ARGUMENT, 0, 0};
  auto* const out = static_cast<std::byte*>(buffer);
  const std::size_t largest = std::max<std::size_t>(ring->ring.max_message(), 1);
  if (capacity < largest) {
    // Room for less than one message of the largest size: one, as try_recv.
    const ringcast_recv_result r = ringcast_try_recv(ring, id, buffer, capacity);
    lengths[0] = r.length;
    return {r.status, r.status == RINGCAST_OK ? 1U : 0U, r.missed};
  }
  // Drain in rounds of as many messages as are sure to fit in the room left;
  // each round publishes the cursor once.
  std::size_t count = 0;
  std::size_t used = 0;
  const auto copy = [&](std::span<const std::byte> m) noexcept {
    std::memcpy(out + used, m.data(), m.size());
    used += m.size();
    lengths[count++] = static_cast<std::uint32_t>(m.size());
  };
  while (true) {
    const std::size_t round = std::min(max - count, (capacity - used) / largest);
    if (round == 0) return {RINGCAST_OK, count, 0};
    const ringcast::BatchResult b = ring->ring.drain(id, copy, round);
    if (b.count == round) continue;
    // Stopped early. A lap has moved the cursor already, so it is reported
    // even after messages; the rest (empty, stalled, ...) will be found again.
    if (count == 0 || b.status == Errc::lapped) return {to_c(b.status), count, b.missed};
    return {RINGCAST_OK, count, 0};
  }
}

ringcast_status ringcast_try_view(ringcast_ring* ring, std::uint32_t id, ringcast_view* view) noexcept {
  const ringcast::MessageView v = ring->ring.try_view(id);
  *view = {v.data.data(), v.data.size(), v.missed, v.in_place};
  return to_c(v.status);
}

ringcast_status ringcast_release_view(ringcast_ring* ring, std::uint32_t id) noexcept {
  return to_c(ring->ring.release_view(id));
}

std::uint64_t ringcast_lag(const ringcast_ring* ring, std::uint32_t id) noexcept { return ring->ring.lag(id); }

std::uint64_t ringcast_producer_position(const ringcast_ring* ring) noexcept { return ring->ring.producer_position(); }

std::uint64_t ringcast_capacity(const ringcast_ring* ring) noexcept { return ring->ring.capacity(); }

std::size_t ringcast_max_message(const ringcast_ring* ring) noexcept { return ring->ring.max_message(); }

bool ringcast_is_lossy(const ringcast_ring* ring) noexcept { return ring->ring.lossy(); }

bool ringcast_is_fully_drained(const ringcast_ring* ring) noexcept { return ring->ring.is_fully_drained(); }

std::size_t ringcast_active_consumer_count(const ringcast_ring* ring) noexcept {
  return ring->ring.active_consumer_count();
}

ringcast_status ringcast_get_status(const ringcast_ring* ring, ringcast_ring_status* status) noexcept {
  if (status == nullptr) return fail(RINGCAST_INVALID_ARGUMENT, "status: status is NULL");
  return guarded("status", [&] {
    const ringcast::RingStatus s = ring->ring.status();
    *status = {};
    status->capacity = s.capacity;
    status->flags = s.flags;
    status->producer_pid = s.producer_pid;
    status->producer_seq = s.producer_seq;
    status->producer_alive = s.producer_alive;
    status->half_written_slot = s.half_written_slot;
    status->producer_sleeping = s.producer_sleeping;
    status->sleeping_consumers = s.sleeping_consumers;
    status->upstream_lost = s.upstream_lost;
    status->upstream_gaps = s.upstream_gaps;
    status->max_message = s.max_message;
    status->messages = s.messages;
    status->payload_bytes = s.payload_bytes;
    for (std::size_t i = 0; i < ringcast::kMaxConsumers; ++i) {
      const ringcast::ConsumerStatus& c = s.consumers[i];
      status->consumers[i] = {c.active, c.owner_alive, c.owner_pid, c.cursor, c.lag};
    }
    return RINGCAST_OK;
  });
}

ringcast_status ringcast_native_state(ringcast_ring* ring, ringcast_native* native) noexcept {
  if (native == nullptr) return RINGCAST_INVALID_ARGUMENT;
  ringcast::detail::NativeAccess::fill(ring->ring, *native);
  return RINGCAST_OK;
}

void ringcast_native_wake_consumers(ringcast_ring* ring) noexcept {
  ringcast::detail::NativeAccess::wake_consumers(ring->ring);
}

void ringcast_native_wake_producer(ringcast_ring* ring) noexcept {
  ringcast::detail::NativeAccess::wake_producer(ring->ring);
}

}  // extern "C"
