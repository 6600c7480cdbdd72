// The shared-memory layout of a ringcast ring file, byte by byte.
//
// This header is normative together with docs/layout.md; every offset the
// document lists is pinned by a static_assert below. Change one, change both,
// and bump kLayoutVersion.
//
//   offset 0     ProducerLine          64 B  (magic ... producer_seq, totals, max_message)
//   offset 64    TailLine              64 B  (write intent, upstream loss: rarely written)
//   offset 128   WaitLine data_wait    64 B  (consumers waiting for data)
//   offset 192   WaitLine space_wait   64 B  (the producer waiting for room)
//   offset 256   ConsumerEntry[16]   1024 B  (one cache line per consumer)
//   offset 1280  Slot[capacity]   64 B each  (SeqLock cells; a message larger than
//                                            52 bytes spans consecutive slots)
//
// A ring created with separate slots (kFlagSeparateSlots) is two files: the
// ring file holds the header alone (kHeaderBytes), and `<path>.slots`
// (kSlotsFileSuffix) holds Slot[capacity] from its offset 0, so that readers
// may have read permission alone on the slots (docs/layout.md, "Separate slots").
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
// The largest payload one slot holds inline (length and payload in its words).
inline constexpr std::size_t kMaxPayload = 52;
// A message of more bytes is a record: a header slot whose payload starts at
// this offset and runs on, contiguous, through the slots that follow.
inline constexpr std::size_t kRecordDataOffset = 16;
// CreateOptions::max_message when 0 is given (clamped to what the capacity allows).
inline constexpr std::size_t kDefaultMaxMessage = std::size_t{64} * 1024;
// The largest max_message a ring can be created with.
inline constexpr std::size_t kMaxMessageLimit = std::size_t{1} << 30;
inline constexpr std::size_t kMaxConsumers = 16;
inline constexpr std::uint64_t kMinCapacity = 2;
inline constexpr std::uint64_t kMaxCapacity = std::uint64_t{1} << 30;

// "RINGCAST" read as a little-endian 64-bit word.
inline constexpr std::uint64_t kMagic = 0x5453414347'4E4952;
// 5: the totals beside producer_seq, the upstream loss on the TailLine;
// docs/layout.md, "Version history", says what each version changed.
inline constexpr std::uint32_t kLayoutVersion = 5;

// ProducerLine::flags bits, fixed at creation.
inline constexpr std::uint32_t kFlagLossy = 1U << 0;    // producer never waits; readers may be lapped
inline constexpr std::uint32_t kFlagWakeups = 1U << 1;  // every side fences: exact wake-ups without membarrier(2)
// The slots are in the file `<ring path>` + kSlotsFileSuffix, not after the
// header. Builds that predate it refuse such a ring ("unknown flags").
inline constexpr std::uint32_t kFlagSeparateSlots = 1U << 2;
inline constexpr std::uint32_t kKnownFlags = kFlagLossy | kFlagWakeups | kFlagSeparateSlots;
inline constexpr char kSlotsFileSuffix[] = ".slots";
// A doorbell file's name: this prefix and its token, 16 lowercase hex digits.
inline constexpr char kDoorbellPrefix[] = ".ringcast-doorbell-";
// "RCDOORBL" read as a little-endian 64-bit word; at offset 8, so that no
// doorbell is taken for a ring (whose magic is at 0).
inline constexpr std::uint64_t kDoorbellMagic = 0x4C42524F4F444352;

// WaitLine::signal: bit 0, a waiter is (about to be) asleep on this line;
// bit 1 (data_wait only), the producer fences after every publish, so a
// waiter that sees it needs no membarrier; bit 2 (data_wait only), the wake
// that began this epoch woke only some of the previous epoch's sleepers, and
// each of them passes the wake-up on (the wake chain); bits 3..31, the epoch.
inline constexpr std::uint32_t kSignalWaiting = 1U;
inline constexpr std::uint32_t kSignalFenced = 2U;
inline constexpr std::uint32_t kSignalChained = 4U;
inline constexpr std::uint32_t kSignalEpochStep = 8U;

// The low half of a slot's words[0] ("meta"). Bit 31 clear: an inline
// message, meta is its length (0..52) and the high half its first 4 bytes.
// Bit 31 set: a record header; bits 28..30 its kind, bits 0..27 the slots it
// spans (header included), and the high half of words[0] its payload length.
inline constexpr std::uint32_t kRecordBit = 1U << 31;
inline constexpr std::uint32_t kRecordKindShift = 28;
inline constexpr std::uint32_t kRecordKindMask = 7U;
inline constexpr std::uint32_t kRecordSlotsMask = (1U << kRecordKindShift) - 1;
inline constexpr std::uint32_t kRecordMessage = 0;  // a message of more than 52 bytes (or a claim)
inline constexpr std::uint32_t kRecordPadding = 1;  // skipped: the rest of a block (length 0)
// Skipped and counted: `length` messages were lost before the producer got
// the next one (report_upstream_loss); one slot.
inline constexpr std::uint32_t kRecordLoss = 2;

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
  std::atomic<std::uint32_t> producer_pid;    // 28: pid of the producer; 0 once it released the role (display only)
  std::atomic<std::uint64_t> producer_seq;    // 32: positions published (a lower bound on committed)
  // 40, 48: for display. The messages published are producer_seq minus
  // extra_slots (the positions of paddings and of records' slots after their
  // headers, stored only when one is written); their payload bytes are
  // stored with producer_seq by every publish (this line is written then
  // anyway, so they cost no extra cache line).
  std::atomic<std::uint64_t> extra_slots;    // 40
  std::atomic<std::uint64_t> payload_bytes;  // 48
  std::atomic<std::uint32_t> max_message;    // 56: largest payload, fixed at creation
  std::atomic<std::uint32_t> block_slots;    // 60: slots of the largest record (1: inline only)
};

// Fields the producer writes rarely, on a line of their own: readers that may
// be lapped load write_intent on every read, so nothing written per message
// lives here.
struct alignas(kCacheLine) TailLine {
  // 0: how far the producer may have written: stored before it writes a
  // record, a padding or a head stamp, and before each scan of the cursors
  // (rings with block_slots > 1 only; invariant 9 in broadcast_ring.hpp).
  std::atomic<std::uint64_t> write_intent;
  // 8, 16: what the producer knows was lost before it (a NATS ingress that
  // saw gaps in its source's sequence; docs/scale-out.md): messages, and gap
  // events. Zero in files whose producers never report loss.
  std::atomic<std::uint64_t> upstream_lost;  // 8
  std::atomic<std::uint64_t> upstream_gaps;  // 16
  // 24: the pid namespace producer_pid belongs to (the inode of the
  // producer's /proc/self/ns/pid; 0: unknown). Display only.
  std::atomic<std::uint64_t> producer_pidns;
  std::uint8_t reserved[32];  // 32: zero
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
  // 8 (data_wait only; zero on space_wait): bit i set while consumer entry i
  // has a doorbell (ConsumerEntry::doorbell): the producer rings it whenever
  // it ends an epoch of this line. Set by the WaitSet that added the
  // consumer; cleared by it, by unregister, reap and a new registration.
  std::atomic<std::uint32_t> doorbells;
  std::uint8_t reserved[52];  // 12: zero
};

struct alignas(kCacheLine) ConsumerEntry {
  std::atomic<std::uint64_t> cursor;     // 0: next position this consumer will read
  std::atomic<std::uint32_t> state;      // 8: kConsumerFree or kConsumerActive
  std::atomic<std::uint32_t> owner_pid;  // 12: pid of the registering process (display only)
  // 16: the pid namespace owner_pid belongs to (inode of /proc/self/ns/pid; 0: unknown)
  std::atomic<std::uint64_t> owner_pidns;
  // 24: the token naming this consumer's WaitSet doorbell, the file
  // kDoorbellPrefix + 16 hex digits in the ring file's directory (0: none).
  // Written by the consumer's WaitSet; cleared as WaitLine::doorbells says.
  std::atomic<std::uint64_t> doorbell;
  // 32: the token of the doorbell the producer has mapped and rings; 0 when
  // it could not (the WaitSet then sleeps on data_wait too). Written by the
  // producer, cleared when it takes the role.
  std::atomic<std::uint64_t> doorbell_rung;
  std::uint8_t reserved[24];  // 40: zero
};

// A SeqLock cell. Positions count slots. version is 0 before the first
// write, 2*pos+1 while the message at position `pos` is being written and
// 2*pos+2 once it is committed, so a reader that expects `pos` can tell "not
// yet written" (smaller), "being written" (odd, 2*pos+1) and "overwritten by
// a later lap" (larger) apart with one load. An inline message: words[0..7)
// hold the 4-byte length (low half of words[0]) followed by the 52 payload
// bytes, little-endian. A record (kRecordBit): words[0] holds meta and length,
// the payload starts at byte 16 and continues through the next slots, which
// are plain bytes with no version of their own (docs/layout.md, "Records").
struct alignas(kCacheLine) Slot {
  std::atomic<std::uint64_t> version;   // 0
  std::atomic<std::uint64_t> words[7];  // 8: length u32, payload[52]
};

// A WaitSet's doorbell: a file of its own (kDoorbellBytes) in the directory
// of the rings it waits on, so that one futex word wakes it whichever of
// those rings' producers has a message for it (docs/layout.md, "Doorbell").
struct alignas(kCacheLine) Doorbell {
  // 0: futex word. Producers add 1 (release) and wake it; the WaitSet sleeps
  // while it holds the value read before its handshake.
  std::atomic<std::uint32_t> rings;
  std::uint32_t reserved0;           // 4: zero
  std::atomic<std::uint64_t> magic;  // 8: kDoorbellMagic, stored last by the creator (release)
  std::uint8_t reserved[48];         // 16: zero
};

struct RingHeader {
  ProducerLine producer;                   // 0
  TailLine tail;                           // 64
  WaitLine data_wait;                      // 128
  WaitLine space_wait;                     // 192
  ConsumerEntry consumers[kMaxConsumers];  // 256
};

inline constexpr std::size_t kHeaderBytes = sizeof(RingHeader);

[[nodiscard]] constexpr std::uint64_t file_size(std::uint64_t capacity) noexcept {
  return kHeaderBytes + capacity * kSlotBytes;
}
// The size of a separate slots file (kFlagSeparateSlots); its ring file is kHeaderBytes.
[[nodiscard]] constexpr std::uint64_t slots_file_size(std::uint64_t capacity) noexcept { return capacity * kSlotBytes; }

// Slots a record of `length` payload bytes spans, its header slot included.
[[nodiscard]] constexpr std::uint64_t record_slots(std::uint64_t length) noexcept {
  constexpr std::uint64_t first = kSlotBytes - kRecordDataOffset;  // 48 bytes in the header slot
  return length <= first ? 1 : 1 + (length - first + kSlotBytes - 1) / kSlotBytes;
}
// Slots a message of `length` bytes takes when pushed by copy.
[[nodiscard]] constexpr std::uint64_t message_slots(std::uint64_t length) noexcept {
  return length <= kMaxPayload ? 1 : record_slots(length);
}
// The block size of a ring whose largest message is `max_message`: no record
// crosses a slot index that is a multiple of it (nor the ring's end), so each
// such index starts a record in every lap (docs/layout.md, "Blocks").
[[nodiscard]] constexpr std::uint64_t block_slots(std::uint64_t max_message) noexcept {
  return max_message <= kMaxPayload ? 1 : record_slots(max_message);
}
// The largest max_message a ring of `capacity` slots allows: its block may
// take at most half the ring, so a record and the paddings before it (at most
// two: the second over the ring's last, shorter segment) always fit.
[[nodiscard]] constexpr std::uint64_t max_message_for(std::uint64_t capacity) noexcept {
  const std::uint64_t block = capacity / 2;
  const std::uint64_t bytes = block <= 1 ? kMaxPayload : (kSlotBytes - kRecordDataOffset) + (block - 1) * kSlotBytes;
  return bytes < kMaxMessageLimit ? bytes : kMaxMessageLimit;
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
static_assert(offsetof(ProducerLine, extra_slots) == 40);
static_assert(offsetof(ProducerLine, payload_bytes) == 48);
static_assert(offsetof(ProducerLine, max_message) == 56);
static_assert(offsetof(ProducerLine, block_slots) == 60);

static_assert(sizeof(TailLine) == 64 && alignof(TailLine) == 64);
static_assert(offsetof(TailLine, write_intent) == 0);
static_assert(offsetof(TailLine, upstream_lost) == 8);
static_assert(offsetof(TailLine, upstream_gaps) == 16);
static_assert(offsetof(TailLine, producer_pidns) == 24);
static_assert(offsetof(TailLine, reserved) == 32);

static_assert(sizeof(WaitLine) == 64 && alignof(WaitLine) == 64);
static_assert(offsetof(WaitLine, signal) == 0);
static_assert(offsetof(WaitLine, sleepers) == 4);
static_assert(offsetof(WaitLine, doorbells) == 8);
static_assert(offsetof(WaitLine, reserved) == 12);
static_assert(kMaxConsumers <= 32, "WaitLine::doorbells has a bit per consumer");

static_assert(sizeof(ConsumerEntry) == 64 && alignof(ConsumerEntry) == 64);
static_assert(offsetof(ConsumerEntry, cursor) == 0);
static_assert(offsetof(ConsumerEntry, state) == 8);
static_assert(offsetof(ConsumerEntry, owner_pid) == 12);
static_assert(offsetof(ConsumerEntry, owner_pidns) == 16);
static_assert(offsetof(ConsumerEntry, doorbell) == 24);
static_assert(offsetof(ConsumerEntry, doorbell_rung) == 32);
static_assert(offsetof(ConsumerEntry, reserved) == 40);

static_assert(sizeof(Doorbell) == 64 && alignof(Doorbell) == 64);
static_assert(offsetof(Doorbell, rings) == 0);
static_assert(offsetof(Doorbell, reserved0) == 4);
static_assert(offsetof(Doorbell, magic) == 8);
static_assert(offsetof(Doorbell, reserved) == 16);
inline constexpr std::size_t kDoorbellBytes = sizeof(Doorbell);

static_assert(sizeof(Slot) == kSlotBytes && alignof(Slot) == 64);
static_assert(offsetof(Slot, version) == 0);
static_assert(offsetof(Slot, words) == 8);
static_assert(sizeof(Slot::words) == 4 + kMaxPayload, "length + payload fill the slot");
static_assert(kRecordDataOffset == offsetof(Slot, words) + 8, "a record's payload follows words[0]");
static_assert(record_slots(48) == 1 && record_slots(49) == 2 && record_slots(112) == 2 && record_slots(113) == 3);
static_assert(block_slots(kDefaultMaxMessage) == 1025 && max_message_for(2050) >= kDefaultMaxMessage &&
                  max_message_for(2048) < kDefaultMaxMessage,
              "64 KiB messages need 2050 slots");
static_assert(record_slots(kMaxMessageLimit) <= kRecordSlotsMask, "meta holds the slots of the largest record");

static_assert(offsetof(RingHeader, producer) == 0);
static_assert(offsetof(RingHeader, tail) == 64);
static_assert(offsetof(RingHeader, data_wait) == 128);
static_assert(offsetof(RingHeader, space_wait) == 192);
static_assert(offsetof(RingHeader, consumers) == 256);
static_assert(kHeaderBytes == 1280 && kHeaderBytes % kCacheLine == 0);
static_assert(file_size(kMaxCapacity) < (std::uint64_t{1} << 40), "below the lock offsets");

}  // namespace layout
}  // namespace ringcast
