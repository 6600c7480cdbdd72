// The shared-memory layout of a ringcast ring file, byte by byte.
//
// This header is normative together with docs/layout.md; every offset the
// document lists is pinned by a static_assert below. Change one, change both,
// and bump kLayoutVersion.
//
//   offset 0     ProducerLine          64 B  (magic ... producer_seq, futex words)
//   offset 64    ConsumerEntry[16]   1024 B  (one cache line per consumer)
//   offset 1088  Slot[capacity]   64 B each  (SeqLock cells)
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
inline constexpr std::uint32_t kLayoutVersion = 1;

// ProducerLine::flags bits, fixed at creation.
inline constexpr std::uint32_t kFlagLossy = 1U << 0;    // producer never waits; readers may be lapped
inline constexpr std::uint32_t kFlagWakeups = 1U << 1;  // futex wake-ups for recv_wait/push_wait
inline constexpr std::uint32_t kKnownFlags = kFlagLossy | kFlagWakeups;

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
  std::atomic<std::uint32_t> consumer_sleepers;  // 40: consumers blocked in recv_wait
  std::atomic<std::uint32_t> data_signal;        // 44: futex word consumers sleep on
  std::atomic<std::uint32_t> producer_sleepers;  // 48: producers blocked in push_wait (0 or 1)
  std::atomic<std::uint32_t> space_signal;       // 52: futex word the producer sleeps on
  std::uint8_t reserved[8];                      // 56: zero
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
  ProducerLine producer;                     // 0
  ConsumerEntry consumers[kMaxConsumers];    // 64
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
static_assert(offsetof(ProducerLine, consumer_sleepers) == 40);
static_assert(offsetof(ProducerLine, data_signal) == 44);
static_assert(offsetof(ProducerLine, producer_sleepers) == 48);
static_assert(offsetof(ProducerLine, space_signal) == 52);
static_assert(offsetof(ProducerLine, reserved) == 56);

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
static_assert(offsetof(RingHeader, consumers) == 64);
static_assert(kHeaderBytes == 1088 && kHeaderBytes % kCacheLine == 0);
static_assert(file_size(kMaxCapacity) < (std::uint64_t{1} << 40), "below the lock offsets");

}  // namespace layout
}  // namespace ringcast
