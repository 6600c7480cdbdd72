// The shared-memory layout of a ringcast ring file, byte by byte.
//
// This header is normative together with docs/layout.md; every offset the
// document lists is pinned by a static_assert below. Change one, change both,
// and bump kLayoutVersion.
//
//   offset 0     ProducerLine          64 B  (magic ... producer_seq, upstream loss)
//   offset 64    WaitLine data_wait    64 B  (consumers waiting for data)
//   offset 128   WaitLine space_wait   64 B  (the producer waiting for room)
//   offset 192   ConsumerEntry[16]   1024 B  (one cache line per consumer)
//   offset 1216  Slot[capacity]   64 B each  (SeqLock cells)
//
// Every field is read and written only through std::atomic, which is valid
// across processes because the atomics used here are lock-free and therefore
// address-free (static_asserts below). Nothing read from the mapping is
// trusted as a bound: BroadcastRing validates capacity against the file size
// once, on open, and keeps its own copy.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ringcast {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kSlotBytes = 64;
inline constexpr std::size_t kMaxPayload = 52;
inline constexpr std::size_t kMaxConsumers = 16;
inline constexpr std::uint64_t kMinCapacity = 2;
inline constexpr std::uint64_t kMaxCapacity = std::uint64_t{1} << 30;

// "RINGCAST" read as a little-endian 64-bit word.
inline constexpr std::uint64_t kMagic = 0x5453414347'4E4952;
// 2: the wait lines (offsets 64 and 128) replace version 1's futex words in the
// ProducerLine, and blocking works on every ring (docs/memory-ordering.md).
inline constexpr std::uint32_t kLayoutVersion = 3;

// ProducerLine::flags bits, fixed at creation.
inline constexpr std::uint32_t kFlagLossy = 1U << 0;    // producer never waits; readers may be lapped
inline constexpr std::uint32_t kFlagWakeups = 1U << 1;  // every side fences: exact wake-ups without membarrier(2)
inline constexpr std::uint32_t kKnownFlags = kFlagLossy | kFlagWakeups;

// WaitLine::signal: bit 0, a waiter is (about to be) asleep on this line;
// bit 1 (data_wait only), the producer fences after every publish, so a
// waiter that sees it needs no membarrier; bit 2 (data_wait only), the wake
// that began this epoch woke only some of the previous epoch's sleepers, and
// each of them passes the wake-up on (the wake chain); bits 3..31, the epoch.
inline constexpr std::uint32_t kSignalWaiting = 1U;
inline constexpr std::uint32_t kSignalFenced = 2U;
inline constexpr std::uint32_t kSignalChained = 4U;
inline constexpr std::uint32_t kSignalEpochStep = 8U;

// ConsumerEntry::state values.
inline constexpr std::uint32_t kConsumerFree = 0;
inline constexpr std::uint32_t kConsumerActive = 1;

namespace layout {

// Writers and readers of each field are listed in docs/layout.md.
struct alignas(kCacheLine) ProducerLine {
  std::atomic<std::uint64_t> magic;           // 0: kMagic, stored last by the creator (release)
  std::atomic<std::uint32_t> layout_version;  // 8
  std::atomic<std::uint32_t> slot_size;       // 12: kSlotBytes
  std::atomic<std::uint64_t> capacity;        // 16: number of slots
  std::atomic<std::uint32_t> flags;           // 24: kFlag* bits
  std::atomic<std::uint32_t> producer_pid;    // 28: pid of the last producer (display only)
  std::atomic<std::uint64_t> producer_seq;    // 32: messages published (a lower bound on committed)
  // 40, 48: what the producer knows was lost before it (a NATS ingress that saw
  // gaps in its source's sequence; docs/scale-out.md): messages, and gap
  // events. Zero in files whose producers never report loss (and in files from
  // builds before these fields, where the bytes were reserved zero).
  std::atomic<std::uint64_t> upstream_lost;  // 40
  std::atomic<std::uint64_t> upstream_gaps;  // 48
  std::uint8_t reserved[8];                  // 56: zero
};

// One side's sleeping place: consumers wait for data on RingHeader::data_wait,
// the producer waits for room on RingHeader::space_wait. Each has a line of
// its own so that the other side's per-message check (one relaxed load of
// `signal`) hits a line that is written only when someone goes to sleep.
struct alignas(kCacheLine) WaitLine {
  // 0: futex word (kSignal* bits). Waiters set bit 0 (fetch_or) and sleep
  // with the futex bit of their epoch; the waking side clears bit 0 and bumps
  // the epoch in one CAS, then makes one FUTEX_WAKE for that epoch's sleepers
  // (on data_wait a busy producer wakes only some and sets bit 2: each of
  // them wakes the rest). Only the producer sets or clears bits 1 and 2.
  std::atomic<std::uint32_t> signal;
  std::atomic<std::uint32_t> sleepers;  // 4: waiters inside futex_wait (display only)
  std::uint8_t reserved[56];            // 8: zero
};

struct alignas(kCacheLine) ConsumerEntry {
  std::atomic<std::uint64_t> cursor;     // 0: next sequence this consumer will read
  std::atomic<std::uint32_t> state;      // 8: kConsumerFree or kConsumerActive
  std::atomic<std::uint32_t> owner_pid;  // 12: pid of the registering process (display only)
  std::uint8_t reserved[48];             // 16: zero
};

// A SeqLock cell. version is 0 before the first write, 2*seq+1 while message
// `seq` is being written and 2*seq+2 once it is committed, so a reader that
// expects `seq` can tell "not yet written" (smaller), "being written" (odd,
// 2*seq+1) and "overwritten by a later lap" (larger) apart with one load.
// words[0..7) hold the 4-byte length (low half of words[0]) followed by the
// 52 payload bytes, little-endian; the SeqLock protects all of them.
struct alignas(kCacheLine) Slot {
  std::atomic<std::uint64_t> version;   // 0
  std::atomic<std::uint64_t> words[7];  // 8: length u32, payload[52]
};

struct RingHeader {
  ProducerLine producer;                   // 0
  WaitLine data_wait;                      // 64
  WaitLine space_wait;                     // 128
  ConsumerEntry consumers[kMaxConsumers];  // 192
};

inline constexpr std::size_t kHeaderBytes = sizeof(RingHeader);

[[nodiscard]] constexpr std::uint64_t file_size(std::uint64_t capacity) noexcept {
  return kHeaderBytes + capacity * kSlotBytes;
}

static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "address-free 64-bit atomics");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free, "address-free 32-bit atomics");
static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && sizeof(std::atomic<std::uint32_t>) == 4);

static_assert(sizeof(ProducerLine) == 64 && alignof(ProducerLine) == 64);
static_assert(offsetof(ProducerLine, magic) == 0);
static_assert(offsetof(ProducerLine, layout_version) == 8);
static_assert(offsetof(ProducerLine, slot_size) == 12);
static_assert(offsetof(ProducerLine, capacity) == 16);
static_assert(offsetof(ProducerLine, flags) == 24);
static_assert(offsetof(ProducerLine, producer_pid) == 28);
static_assert(offsetof(ProducerLine, producer_seq) == 32);
static_assert(offsetof(ProducerLine, upstream_lost) == 40);
static_assert(offsetof(ProducerLine, upstream_gaps) == 48);
static_assert(offsetof(ProducerLine, reserved) == 56);

static_assert(sizeof(WaitLine) == 64 && alignof(WaitLine) == 64);
static_assert(offsetof(WaitLine, signal) == 0);
static_assert(offsetof(WaitLine, sleepers) == 4);
static_assert(offsetof(WaitLine, reserved) == 8);

static_assert(sizeof(ConsumerEntry) == 64 && alignof(ConsumerEntry) == 64);
static_assert(offsetof(ConsumerEntry, cursor) == 0);
static_assert(offsetof(ConsumerEntry, state) == 8);
static_assert(offsetof(ConsumerEntry, owner_pid) == 12);
static_assert(offsetof(ConsumerEntry, reserved) == 16);

static_assert(sizeof(Slot) == kSlotBytes && alignof(Slot) == 64);
static_assert(offsetof(Slot, version) == 0);
static_assert(offsetof(Slot, words) == 8);
static_assert(sizeof(Slot::words) == 4 + kMaxPayload, "length + payload fill the slot");

static_assert(offsetof(RingHeader, producer) == 0);
static_assert(offsetof(RingHeader, data_wait) == 64);
static_assert(offsetof(RingHeader, space_wait) == 128);
static_assert(offsetof(RingHeader, consumers) == 192);
static_assert(kHeaderBytes == 1216 && kHeaderBytes % kCacheLine == 0);
static_assert(file_size(kMaxCapacity) < (std::uint64_t{1} << 40), "below the lock offsets");

}  // namespace layout
}  // namespace ringcast
