/* ringcast.h: the ring's C ABI (C11), for C and for other languages' FFIs
 * (the Go and Rust bindings in src/bindings/ call nothing else, except that
 * Go runs the inline cases of try_push and try_recv itself over the mapping:
 * "native hot paths" below).
 *
 * A thin layer over ringcast::BroadcastRing (broadcast_ring.hpp), with the
 * same semantics, costs and thread-safety rules; read that header for the
 * full contract of each call. Here:
 *  * A ring is an opaque ringcast_ring*, made by ringcast_create,
 *    ringcast_create_anonymous or ringcast_open and freed by ringcast_close.
 *  * Every call returns a ringcast_status (or a struct carrying one) and
 *    never throws, aborts or unwinds: no C++ exception crosses this boundary.
 *    The statuses are the C++ Errc values plus three of this layer's own
 *    (RINGCAST_INVALID_ARGUMENT, RINGCAST_OUT_OF_MEMORY, RINGCAST_CANCELLED).
 *  * ringcast_status_name names a status; ringcast_last_error_message gives
 *    the full text of the calling thread's last failed setup call
 *    ("create: open: io_error: Permission denied").
 *  * The hot path (try_push, try_recv, try_claim, commit, lag) forwards to the
 *    inline C++ calls: no allocation, lock, exception or system call beyond
 *    the C++ API's own. Setup calls (create, open, register, status) may
 *    allocate. No call checks its ring handle: a NULL or closed handle is
 *    undefined, as in C++ (REQUIRES), except that ringcast_close(NULL) is a
 *    no-op. Other pointers are checked where the comment says so.
 *
 * Thread safety (as the C++ handle): one producing thread per handle (push,
 * claim, commit); a consumer id is used by one thread at a time, through the
 * handle that registered it; observers (lag, producer_position, status) from
 * any thread. ringcast_close must not race any other call on the handle.
 *
 * Link with pkg-config's ringcast-c (the C++ library and its runtime) or
 * CMake's ringcast::ringcast. Guide and examples: docs/bindings.md. */
#ifndef RINGCAST_RINGCAST_H
#define RINGCAST_RINGCAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define RINGCAST_NOEXCEPT noexcept
extern "C" {
#else
#define RINGCAST_NOEXCEPT
#endif

/* Fixed by the file format (layout.hpp): consumers per ring, and the largest
 * message that takes a single slot. */
#define RINGCAST_MAX_CONSUMERS 16
#define RINGCAST_MAX_INLINE_PAYLOAD 52

/* Each enum below has a last enumerator that is no value of its own: at
 * INT32_MIN, it makes every int32_t a valid value of the enum in C++ too, so
 * that a caller's out-of-range value (from C or an FFI) is checked by the
 * library (INVALID_ARGUMENT, "unknown") rather than undefined behaviour. */

/* ringcast::Errc, value for value, then this layer's own codes. */
typedef enum ringcast_status {
  RINGCAST_OK = 0,
  RINGCAST_FULL = 1,              /* push: the slowest consumer is too far behind */
  RINGCAST_EMPTY = 2,             /* receive: nothing new */
  RINGCAST_NO_CONSUMER_SLOT = 3,  /* register: all RINGCAST_MAX_CONSUMERS entries taken */
  RINGCAST_INVALID_CONSUMER = 4,  /* id not registered through this handle */
  RINGCAST_PAYLOAD_TOO_LARGE = 5, /* longer than the ring's max message */
  RINGCAST_LAYOUT_MISMATCH = 6,   /* open: not a ring file of this version, or a corrupt slot */
  RINGCAST_IO_ERROR = 7,          /* a system call failed (the message says which, and why) */
  RINGCAST_NOT_READY = 8,         /* open: the creator is still initialising the file */
  RINGCAST_PRODUCER_BUSY = 9,     /* another live handle is the producer */
  RINGCAST_NOT_PRODUCER = 10,     /* push on a handle that cannot claim the producer role */
  RINGCAST_LAPPED = 11,           /* receive: `missed` positions were overwritten unread */
  RINGCAST_STALLED = 12,          /* receive: a slot stays half-written while its producer lives */
  RINGCAST_PRODUCER_DEAD = 13,    /* receive: a slot is half-written and its producer died */
  RINGCAST_TIMED_OUT = 14,        /* a _wait call's timeout elapsed */
  RINGCAST_ALREADY_EXISTS = 15,   /* create: the path exists and replace was not asked */
  RINGCAST_BUFFER_TOO_SMALL = 16, /* receive: the message needs `length` bytes; nothing consumed */
  RINGCAST_INVALID_ARGUMENT = 64, /* a NULL pointer or an out-of-range value where one is checked */
  RINGCAST_OUT_OF_MEMORY = 65,    /* setup could not allocate */
  RINGCAST_CANCELLED = 66,        /* drain: the callback stopped the batch; nothing was consumed */
  RINGCAST_STATUS_INT32_ = INT32_MIN
} ringcast_status;

/* Where a new consumer starts (ringcast::StartAt). */
typedef enum ringcast_start_at {
  RINGCAST_START_LATEST = 0, /* messages published from now on */
  RINGCAST_START_OLDEST = 1, /* the oldest message still in the ring */
  RINGCAST_START_AT_INT32_ = INT32_MIN
} ringcast_start_at;

/* How a _wait call idles (ringcast::IdleStrategy); 0, the C++ default, is
 * also what any value not listed here means. */
typedef enum ringcast_idle {
  RINGCAST_IDLE_SPIN_THEN_BLOCK = 0,
  RINGCAST_IDLE_SPIN = 1,
  RINGCAST_IDLE_SPIN_THEN_YIELD = 2,
  RINGCAST_IDLE_BLOCK = 3,
  RINGCAST_IDLE_INT32_ = INT32_MIN
} ringcast_idle;

/* All-zero (or a NULL pointer) is the C++ defaults. */
typedef struct ringcast_create_options {
  uint32_t mode;     /* file mode of a new file; 0: 0600 */
  bool replace;      /* unlink an existing regular file first */
  bool lossy;        /* the producer never waits; slow consumers are lapped */
  bool wakeups;      /* fence every push and receive instead of membarrier(2) */
  bool no_producer;  /* the creating handle does not take the producer role */
  bool reap_on_full; /* the producer reaps dead consumers when it finds the ring full */
  /* The slots in the file "<path>.slots", which only the owner may write
   * (ringcast_create only). Added in the padding before max_message: the
   * struct keeps its size and every earlier offset. */
  bool separate_slots;
  uint64_t max_message; /* largest message in bytes; 0: 64 KiB or what the capacity allows */
} ringcast_create_options;

typedef struct ringcast_open_options {
  uint64_t expected_capacity; /* 0: the file's; else RINGCAST_LAYOUT_MISMATCH if it differs */
  bool read_only;             /* map read-only (observers) */
  bool reap_on_full;          /* as in ringcast_create_options, if this handle produces */
  bool read_only_slots;       /* a reader whose message slots are mapped read-only (cannot produce) */
} ringcast_open_options;

/* One receive (ringcast::RecvResult); 16 bytes, returned in registers. */
typedef struct ringcast_recv_result {
  ringcast_status status;
  uint32_t length; /* bytes written when OK; bytes needed when BUFFER_TOO_SMALL */
  uint64_t missed; /* positions skipped when LAPPED */
} ringcast_recv_result;

/* A batch (ringcast::BatchResult). */
typedef struct ringcast_batch_result {
  ringcast_status status; /* why the batch stopped early; OK if it delivered any */
  size_t count;           /* messages delivered */
  uint64_t missed;        /* positions skipped when LAPPED */
} ringcast_batch_result;

/* The next message, read without consuming it (ringcast::MessageView). */
typedef struct ringcast_view {
  const void* data; /* valid until the consumer's next view, release, receive or unregister */
  size_t length;
  uint64_t missed; /* positions skipped when the call returned LAPPED */
  bool in_place;   /* data points into the ring itself (zero copy) */
} ringcast_view;

typedef struct ringcast_consumer_status {
  bool active;
  bool owner_alive; /* false once the owner died without unregistering */
  uint32_t owner_pid;
  uint64_t cursor;
  uint64_t lag;
} ringcast_consumer_status;

/* A moment's view of the whole ring (ringcast::RingStatus). */
typedef struct ringcast_ring_status {
  uint64_t capacity;
  uint32_t flags; /* bit 0: lossy, bit 1: wakeups */
  uint32_t producer_pid;
  uint64_t producer_seq;
  bool producer_alive;
  bool half_written_slot;
  bool producer_sleeping;
  uint32_t sleeping_consumers;
  uint64_t upstream_lost;
  uint64_t upstream_gaps;
  uint64_t max_message;
  uint64_t messages;
  uint64_t payload_bytes;
  ringcast_consumer_status consumers[RINGCAST_MAX_CONSUMERS];
} ringcast_ring_status;

typedef struct ringcast_ring ringcast_ring;

/* Called by ringcast_drain for each message; the bytes are valid during the
 * call only. Returns 0 to go on; anything else stops the batch (see
 * ringcast_drain). It must return: no longjmp or unwinding may leave it. */
typedef int (*ringcast_message_fn)(void* context, const void* data, size_t length);

/* --- errors ---------------------------------------------------------------- */

/* A stable lower-case name ("full", "layout_mismatch"); "unknown" otherwise. */
const char* ringcast_status_name(ringcast_status status) RINGCAST_NOEXCEPT;
/* The text of this thread's last failed setup call (create, open,
 * claim_producer, register, reap, status), "" if none failed yet. Valid until
 * this thread's next failed setup call. */
const char* ringcast_last_error_message(void) RINGCAST_NOEXCEPT;

/* --- setup: may allocate and make system calls ---------------------------- */

/* Creates a ring file at `path` with `capacity` slots (2..2^30); on OK *ring
 * is the new handle. ALREADY_EXISTS unless options->replace. */
ringcast_status ringcast_create(const char* path, uint64_t capacity, const ringcast_create_options* options,
                                ringcast_ring** ring) RINGCAST_NOEXCEPT;
/* A ring in anonymous shared memory for the threads of this process. */
ringcast_status ringcast_create_anonymous(uint64_t capacity, const ringcast_create_options* options,
                                          ringcast_ring** ring) RINGCAST_NOEXCEPT;
/* Opens an existing ring file: IO_ERROR, NOT_READY, LAYOUT_MISMATCH. */
ringcast_status ringcast_open(const char* path, const ringcast_open_options* options,
                              ringcast_ring** ring) RINGCAST_NOEXCEPT;
/* Unregisters the handle's consumers, aborts an open claim, releases the
 * producer role and unmaps. NULL is a no-op. */
void ringcast_close(ringcast_ring* ring) RINGCAST_NOEXCEPT;

/* Takes the producer role now (try_push takes it lazily); PRODUCER_BUSY if
 * another live handle holds it. */
ringcast_status ringcast_claim_producer(ringcast_ring* ring) RINGCAST_NOEXCEPT;
void ringcast_release_producer(ringcast_ring* ring) RINGCAST_NOEXCEPT;
bool ringcast_is_producer(const ringcast_ring* ring) RINGCAST_NOEXCEPT;

/* Registers a consumer; on OK *id is its id (0..RINGCAST_MAX_CONSUMERS-1).
 * NO_CONSUMER_SLOT, IO_ERROR, INVALID_ARGUMENT (an unknown `start`). */
ringcast_status ringcast_register(ringcast_ring* ring, ringcast_start_at start, uint32_t* id) RINGCAST_NOEXCEPT;
/* INVALID_CONSUMER if `id` was not registered through this handle. */
ringcast_status ringcast_unregister(ringcast_ring* ring, uint32_t id) RINGCAST_NOEXCEPT;
/* Frees the entries of consumers whose owner died; *freed (may be NULL) says how many. */
ringcast_status ringcast_reap_dead_consumers(ringcast_ring* ring, size_t* freed) RINGCAST_NOEXCEPT;

/* --- producer (one thread per handle) -------------------------------------- */

/* Copies `length` bytes (0..max message) into the ring: OK, FULL,
 * PAYLOAD_TOO_LARGE, NOT_PRODUCER, PRODUCER_BUSY. */
ringcast_status ringcast_try_push(ringcast_ring* ring, const void* data, size_t length) RINGCAST_NOEXCEPT;
/* Pushes `count` messages in order until one does not fit: their bytes back
 * to back in data, their lengths in lengths[0, count). The producer position
 * is published once per up to 64 messages. status: what stopped it (OK if
 * nothing did), as try_push, or INVALID_ARGUMENT (lengths NULL); count: how
 * many were pushed. */
ringcast_batch_result ringcast_try_push_batch(ringcast_ring* ring, const void* data, const uint32_t* lengths,
                                              size_t count) RINGCAST_NOEXCEPT;
/* As try_push, waiting up to timeout_ns for room: TIMED_OUT after it. */
ringcast_status ringcast_push_wait(ringcast_ring* ring, const void* data, size_t length, uint64_t timeout_ns,
                                   ringcast_idle idle) RINGCAST_NOEXCEPT;
/* Claims room for a message of `length` bytes at the head; on OK *data points
 * at it (into the ring on a blocking ring). Write the payload, then
 * ringcast_commit publishes it or ringcast_abort gives the room back. No
 * push while it is open. Errors as try_push, and INVALID_ARGUMENT while
 * another claim of the handle is open. */
ringcast_status ringcast_try_claim(ringcast_ring* ring, size_t length, void** data) RINGCAST_NOEXCEPT;
/* As try_claim, waiting up to timeout_ns for room. */
ringcast_status ringcast_claim_wait(ringcast_ring* ring, size_t length, void** data, uint64_t timeout_ns,
                                    ringcast_idle idle) RINGCAST_NOEXCEPT;
/* Publishes the open claim with its first `length` bytes (at most the claimed
 * length). INVALID_ARGUMENT if no claim is open. */
ringcast_status ringcast_commit(ringcast_ring* ring, size_t length) RINGCAST_NOEXCEPT;
/* Gives the open claim's room back unpublished. INVALID_ARGUMENT if none is open. */
ringcast_status ringcast_abort(ringcast_ring* ring) RINGCAST_NOEXCEPT;

/* --- consumer (one thread per id) ------------------------------------------ */

/* Copies the next message for `id` into buffer[0, capacity): OK (length),
 * EMPTY, INVALID_CONSUMER, BUFFER_TOO_SMALL (length: bytes needed; nothing
 * consumed), LAPPED (missed), STALLED, PRODUCER_DEAD, LAYOUT_MISMATCH. A
 * buffer of at least 52 bytes takes the fast path for short messages. */
ringcast_recv_result ringcast_try_recv(ringcast_ring* ring, uint32_t id, void* buffer,
                                       size_t capacity) RINGCAST_NOEXCEPT;
/* As try_recv, waiting up to timeout_ns for a message: TIMED_OUT after it. */
ringcast_recv_result ringcast_recv_wait(ringcast_ring* ring, uint32_t id, void* buffer, size_t capacity,
                                        uint64_t timeout_ns, ringcast_idle idle) RINGCAST_NOEXCEPT;
/* Receives up to `max` messages, calling fn(context, data, length) for each
 * (zero copy where a view would be), and publishes the cursor once. status is
 * OK when any was delivered, else as try_recv. When fn returns nonzero (or, a
 * C++ fn, throws), none of the batch is consumed: the call returns CANCELLED
 * with count 0 and the next one delivers the same messages again. Stopping
 * costs a C++ throw inside the library (microseconds): it is for errors. */
/* NOLINTNEXTLINE(bugprone-exception-escape): a clang-tidy 14 false positive (src/ring/c_api.cpp) */
ringcast_batch_result ringcast_drain(ringcast_ring* ring, uint32_t id, ringcast_message_fn fn, void* context,
                                     size_t max) RINGCAST_NOEXCEPT;
/* Batch receive without a callback (for FFIs where calling back is costly):
 * copies up to `max` messages back to back into buffer[0, capacity) and their
 * lengths into lengths[0, max); publishes the cursor once. It takes at most
 * capacity / ringcast_max_message(ring) messages, so any of them fits; with
 * room for less than one such message it receives one as try_recv does (then
 * BUFFER_TOO_SMALL sets lengths[0] to the bytes needed). */
ringcast_batch_result ringcast_recv_batch(ringcast_ring* ring, uint32_t id, void* buffer, size_t capacity,
                                          uint32_t* lengths, size_t max) RINGCAST_NOEXCEPT;
/* Reads the next message without consuming it (*view, see ringcast_view);
 * statuses as try_recv. Again before release_view: the same message. */
ringcast_status ringcast_try_view(ringcast_ring* ring, uint32_t id, ringcast_view* view) RINGCAST_NOEXCEPT;
/* Consumes the viewed message. INVALID_CONSUMER if no view is open. */
ringcast_status ringcast_release_view(ringcast_ring* ring, uint32_t id) RINGCAST_NOEXCEPT;

/* --- observers (any thread) ------------------------------------------------ */

/* Positions published but not received by `id`; 0 for an inactive id. */
uint64_t ringcast_lag(const ringcast_ring* ring, uint32_t id) RINGCAST_NOEXCEPT;
/* The next position the producer writes (positions count 64-byte slots). */
uint64_t ringcast_producer_position(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
uint64_t ringcast_capacity(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
/* The largest payload a message may have. */
size_t ringcast_max_message(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
bool ringcast_is_lossy(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
/* Every active consumer has received every published message. */
bool ringcast_is_fully_drained(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
size_t ringcast_active_consumer_count(const ringcast_ring* ring) RINGCAST_NOEXCEPT;
/* Fills *status with a moment's view (one fcntl per active consumer). */
ringcast_status ringcast_get_status(const ringcast_ring* ring, ringcast_ring_status* status) RINGCAST_NOEXCEPT;

/* --- native hot paths: for bindings that run try_push/try_recv themselves --- */

/* A binding whose every call into C costs several times the ring's own hot
 * path (Go: a cgo transition) may run the inline message cases of try_push
 * and try_recv itself, over this process's mapping, following docs/layout.md
 * and docs/memory-ordering.md exactly, with an atomic access for every
 * shared word; everything else stays a call into C (src/bindings/go/native.go
 * does this; docs/bindings.md, "Go"). The offsets below are those of
 * docs/layout.md, static_asserted against layout.hpp in src/ring/c_api.cpp:
 * a layout change does not build until they follow it. */
#define RINGCAST_LAYOUT_VERSION 5
#define RINGCAST_LAYOUT_HEADER_BYTES 1280
#define RINGCAST_LAYOUT_SLOT_BYTES 64
#define RINGCAST_LAYOUT_PRODUCER_SEQ 32  /* ProducerLine::producer_seq, u64 */
#define RINGCAST_LAYOUT_PAYLOAD_BYTES 48 /* ProducerLine::payload_bytes, u64 */
#define RINGCAST_LAYOUT_WRITE_INTENT 64  /* TailLine::write_intent, u64 */
#define RINGCAST_LAYOUT_DATA_WAIT 128    /* data_wait.signal, u32 */
#define RINGCAST_LAYOUT_SPACE_WAIT 192   /* space_wait.signal, u32 */
#define RINGCAST_LAYOUT_CONSUMERS 256    /* ConsumerEntry[16]; cursor u64 at 0 of each */
#define RINGCAST_LAYOUT_CONSUMER_BYTES 64
#define RINGCAST_LAYOUT_CONSUMER_STATE 8 /* ConsumerEntry::state, u32 */
#define RINGCAST_LAYOUT_SLOT_WORDS 8     /* Slot::words[7] (u64), after the u64 version at 0 */
#define RINGCAST_LAYOUT_RECORD_BIT 0x80000000u
#define RINGCAST_LAYOUT_SIGNAL_WAITING 1u
#define RINGCAST_LAYOUT_CONSUMER_ACTIVE 1u

/* The mapping and the handle's own hot-path state (fields of the C++
 * BroadcastRing), for ringcast_native_state. Every pointer is valid until
 * ringcast_close. The producer fields are read and written by the producing
 * thread only, between its calls into C (which read and write them too: they
 * are the one copy); `owned` is a 32-bit atomic word (load it atomically),
 * bit i set while consumer id i is registered through this handle;
 * stable_from (invariant 10 of broadcast_ring.hpp) is set by registration
 * and read by id i's thread. */
typedef struct ringcast_native {
  uint32_t layout_version; /* RINGCAST_LAYOUT_VERSION of the library */
  uint32_t flags;          /* the ring's flags (bit 0: lossy) */
  uint64_t capacity;       /* slots (validated on open) */
  uint64_t max_message;
  uint64_t block_slots;    /* 1: the ring holds inline messages only */
  void* header;            /* offset 0 of the ring file (RingHeader) */
  void* slots;             /* Slot[capacity] */
  bool* is_producer;       /* this handle holds the producer role */
  uint64_t* seq;           /* the next position to write */
  uint64_t* payload_bytes; /* the producer's total, stored to the header on publish */
  uint64_t* cached_min;    /* a lower bound on every active cursor */
  uint64_t* stamp_below;   /* positions below it need the head stamp: leave them to C */
  bool* fenced;            /* fenced mode: leave publishes to C */
  const void* owned;
  const uint64_t* stable_from; /* id i's at (const char*)stable_from + i * stable_from_stride */
  size_t stable_from_stride;
} ringcast_native;

/* Fills *native. INVALID_ARGUMENT if native is NULL. */
ringcast_status ringcast_native_state(ringcast_ring* ring, ringcast_native* native) RINGCAST_NOEXCEPT;
/* A native publish stored producer_seq and then found RINGCAST_LAYOUT_SIGNAL_WAITING
 * in data_wait.signal: wakes the sleeping consumers as try_push would (and
 * enters fenced mode: *fenced turns true). Producer thread. */
void ringcast_native_wake_consumers(ringcast_ring* ring) RINGCAST_NOEXCEPT;
/* A native receive stored its cursor and then found the waiting bit in
 * space_wait.signal: wakes the producer as try_recv would. */
void ringcast_native_wake_producer(ringcast_ring* ring) RINGCAST_NOEXCEPT;

/* --- wait sets: one wait over many rings (ringcast::WaitSet, wait_set.hpp) --- */

/* A set of up to RINGCAST_WAIT_SET_MAX_MEMBERS consumers (each a ring handle
 * and an id registered through it) that one thread sleeps on until any has a
 * message. Used by one thread at a time; a member's ring must stay open and
 * its id registered until it is removed or the set closed. */
typedef struct ringcast_wait_set ringcast_wait_set;
#define RINGCAST_WAIT_SET_MAX_MEMBERS 127

/* On OK *set is a new, empty set. OUT_OF_MEMORY. */
ringcast_status ringcast_wait_set_create(ringcast_wait_set** set) RINGCAST_NOEXCEPT;
/* Stops the notifier thread and closes its fd, if any. NULL is a no-op. */
void ringcast_wait_set_close(ringcast_wait_set* set) RINGCAST_NOEXCEPT;
/* Adds consumer `id` of `ring`; *member (may be NULL) is its index, the
 * lowest free one. INVALID_CONSUMER (id not registered through ring),
 * NO_CONSUMER_SLOT (the set is full), INVALID_ARGUMENT (ring NULL). */
ringcast_status ringcast_wait_set_add(ringcast_wait_set* set, ringcast_ring* ring, uint32_t id,
                                      size_t* member) RINGCAST_NOEXCEPT;
/* INVALID_CONSUMER if `member` is no member. */
ringcast_status ringcast_wait_set_remove(ringcast_wait_set* set, size_t member) RINGCAST_NOEXCEPT;
/* Returns at once if a member has a message, else sleeps until one has or
 * timeout_ns passes: OK with the indices of ready members in ready[0, *count)
 * (at most `capacity`), or TIMED_OUT (*count 0). Readiness may be spurious:
 * receive until EMPTY. INVALID_ARGUMENT if ready or count is NULL. */
ringcast_status ringcast_wait_set_wait(ringcast_wait_set* set, size_t* ready, size_t capacity, size_t* count,
                                       uint64_t timeout_ns) RINGCAST_NOEXCEPT;
/* Whether `member` has a message now. */
bool ringcast_wait_set_ready(const ringcast_wait_set* set, size_t member) RINGCAST_NOEXCEPT;
/* An eventfd (owned by the set) that turns readable when a member has a
 * message, for epoll and event loops; the first call starts the set's helper
 * thread. After it fired, receive, then ringcast_wait_set_arm. No add or
 * remove while armed. IO_ERROR. */
ringcast_status ringcast_wait_set_notify_fd(ringcast_wait_set* set, int* fd) RINGCAST_NOEXCEPT;
/* Clears the fd and re-arms it (it fires at once if a member still has a message). */
void ringcast_wait_set_arm(ringcast_wait_set* set) RINGCAST_NOEXCEPT;

#ifdef __cplusplus
}
#endif

#endif /* RINGCAST_RINGCAST_H */
