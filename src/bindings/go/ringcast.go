// Package ringcast is the Go binding of ringcast's shared-memory broadcast
// ring: one producer process, up to 16 consumer processes, each of which
// receives every message in order. It calls the C ABI (ringcast/ringcast.h)
// through cgo and links the C++ library, found with pkg-config (ringcast-c).
//
// The semantics, costs and thread-safety rules are those of the C ABI and of
// ringcast::BroadcastRing (include/ringcast/broadcast_ring.hpp): one
// goroutine at a time may produce on a Ring, and a consumer id is used by one
// goroutine at a time. Hot-path calls (TryPush, TryRecv, RecvBatch, ...)
// return a Status and do not allocate; setup calls return an *Error.
// TryPush and TryRecv of messages of at most 52 bytes, RecvBatch of such
// messages, Lag and ProducerPosition run in Go over the ring's mapping
// (native.go); every other call, and the uncommon cases of those, crosses
// cgo once (tens of nanoseconds): push in batches (TryPushBatch) where that
// matters. docs/bindings.md has a guide.
package ringcast

/*
#cgo pkg-config: ringcast-c
#include <stdint.h>
#include <stdlib.h>
#include "ringcast/ringcast.h"

// The hot path takes the handle as an integer, and returns out-values in
// the result. cgo checks every pointer argument at run time, and boxes a
// pointer to an incomplete C type (ringcast_ring) on the Go heap for the
// check: one allocation per call. The handle is C memory, which needs no
// check; an out-pointer to a Go variable would move it to the heap too.
typedef uintptr_t rc_handle;
static inline ringcast_ring* rc(rc_handle h) { return (ringcast_ring*)h; }
typedef struct { ringcast_status status; void* data; } rc_claim;
typedef struct { ringcast_status status; ringcast_view view; } rc_view;

static inline ringcast_status rc_try_push(rc_handle h, const void* data, size_t length) {
  return ringcast_try_push(rc(h), data, length);
}
static inline ringcast_batch_result rc_try_push_batch(rc_handle h, const void* data, const uint32_t* lengths,
                                                      size_t count) {
  return ringcast_try_push_batch(rc(h), data, lengths, count);
}
static inline ringcast_status rc_push_wait(rc_handle h, const void* data, size_t length, uint64_t timeout_ns,
                                           ringcast_idle idle) {
  return ringcast_push_wait(rc(h), data, length, timeout_ns, idle);
}
static inline rc_claim rc_try_claim(rc_handle h, size_t length) {
  rc_claim c = {RINGCAST_OK, NULL};
  c.status = ringcast_try_claim(rc(h), length, &c.data);
  return c;
}
static inline rc_claim rc_claim_wait(rc_handle h, size_t length, uint64_t timeout_ns, ringcast_idle idle) {
  rc_claim c = {RINGCAST_OK, NULL};
  c.status = ringcast_claim_wait(rc(h), length, &c.data, timeout_ns, idle);
  return c;
}
static inline ringcast_status rc_commit(rc_handle h, size_t length) { return ringcast_commit(rc(h), length); }
static inline ringcast_status rc_abort(rc_handle h) { return ringcast_abort(rc(h)); }
static inline ringcast_recv_result rc_try_recv(rc_handle h, uint32_t id, void* buffer, size_t capacity) {
  return ringcast_try_recv(rc(h), id, buffer, capacity);
}
static inline ringcast_recv_result rc_recv_wait(rc_handle h, uint32_t id, void* buffer, size_t capacity,
                                                uint64_t timeout_ns, ringcast_idle idle) {
  return ringcast_recv_wait(rc(h), id, buffer, capacity, timeout_ns, idle);
}
static inline ringcast_batch_result rc_recv_batch(rc_handle h, uint32_t id, void* buffer, size_t capacity,
                                                  uint32_t* lengths, size_t max) {
  return ringcast_recv_batch(rc(h), id, buffer, capacity, lengths, max);
}
static inline rc_view rc_try_view(rc_handle h, uint32_t id) {
  rc_view v;
  v.status = ringcast_try_view(rc(h), id, &v.view);
  return v;
}
static inline ringcast_status rc_release_view(rc_handle h, uint32_t id) { return ringcast_release_view(rc(h), id); }
static inline uint64_t rc_lag(rc_handle h, uint32_t id) { return ringcast_lag(rc(h), id); }
static inline uint64_t rc_producer_position(rc_handle h) { return ringcast_producer_position(rc(h)); }
static inline void rc_native_wake_consumers(rc_handle h) { ringcast_native_wake_consumers(rc(h)); }
static inline void rc_native_wake_producer(rc_handle h) { ringcast_native_wake_producer(rc(h)); }
*/
import "C"

import (
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Status is a call's outcome: ringcast_status (OK, Full, Empty, ...).
type Status int32

const (
	OK              Status = C.RINGCAST_OK
	Full            Status = C.RINGCAST_FULL
	Empty           Status = C.RINGCAST_EMPTY
	NoConsumerSlot  Status = C.RINGCAST_NO_CONSUMER_SLOT
	InvalidConsumer Status = C.RINGCAST_INVALID_CONSUMER
	PayloadTooLarge Status = C.RINGCAST_PAYLOAD_TOO_LARGE
	LayoutMismatch  Status = C.RINGCAST_LAYOUT_MISMATCH
	IOError         Status = C.RINGCAST_IO_ERROR
	NotReady        Status = C.RINGCAST_NOT_READY
	ProducerBusy    Status = C.RINGCAST_PRODUCER_BUSY
	NotProducer     Status = C.RINGCAST_NOT_PRODUCER
	Lapped          Status = C.RINGCAST_LAPPED
	Stalled         Status = C.RINGCAST_STALLED
	ProducerDead    Status = C.RINGCAST_PRODUCER_DEAD
	TimedOut        Status = C.RINGCAST_TIMED_OUT
	AlreadyExists   Status = C.RINGCAST_ALREADY_EXISTS
	BufferTooSmall  Status = C.RINGCAST_BUFFER_TOO_SMALL
	InvalidArgument Status = C.RINGCAST_INVALID_ARGUMENT
	OutOfMemory     Status = C.RINGCAST_OUT_OF_MEMORY
	Cancelled       Status = C.RINGCAST_CANCELLED // the C ABI's drain only (Go uses RecvBatch)
)

const (
	MaxConsumers     = C.RINGCAST_MAX_CONSUMERS      // consumers per ring
	MaxInlinePayload = C.RINGCAST_MAX_INLINE_PAYLOAD // the largest message of one slot
)

// The layout the Go hot path reads (native.go): ringcast.h's values, which
// src/ring/c_api.cpp pins against layout.hpp.
const (
	layoutVersion        = C.RINGCAST_LAYOUT_VERSION
	layoutSlotBytes      = C.RINGCAST_LAYOUT_SLOT_BYTES
	layoutProducerSeq    = C.RINGCAST_LAYOUT_PRODUCER_SEQ
	layoutPayloadBytes   = C.RINGCAST_LAYOUT_PAYLOAD_BYTES
	layoutWriteIntent    = C.RINGCAST_LAYOUT_WRITE_INTENT
	layoutDataWait       = C.RINGCAST_LAYOUT_DATA_WAIT
	layoutSpaceWait      = C.RINGCAST_LAYOUT_SPACE_WAIT
	layoutConsumers      = C.RINGCAST_LAYOUT_CONSUMERS
	layoutConsumerBytes  = C.RINGCAST_LAYOUT_CONSUMER_BYTES
	layoutConsumerState  = C.RINGCAST_LAYOUT_CONSUMER_STATE
	layoutSlotWords      = C.RINGCAST_LAYOUT_SLOT_WORDS
	layoutRecordBit      = C.RINGCAST_LAYOUT_RECORD_BIT
	layoutSignalWaiting  = C.RINGCAST_LAYOUT_SIGNAL_WAITING
	layoutConsumerActive = C.RINGCAST_LAYOUT_CONSUMER_ACTIVE
)

// String is the status's stable lower-case name ("full").
func (s Status) String() string { return C.GoString(C.ringcast_status_name(C.ringcast_status(s))) }

// Error is a failed setup call: its status and the library's text
// ("create: open: io_error: No such file or directory").
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return e.Message }

// setup runs a setup call and turns its status into an error with the
// library's message. The message is per OS thread, and a goroutine may move
// between threads from one cgo call to the next: it stays on one here.
func setup(call func() C.ringcast_status) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s := call(); s != C.RINGCAST_OK {
		return &Error{Status: Status(s), Message: C.GoString(C.ringcast_last_error_message())}
	}
	return nil
}

// StartAt says where a new consumer starts.
type StartAt int32

const (
	Latest StartAt = C.RINGCAST_START_LATEST // messages published from now on
	Oldest StartAt = C.RINGCAST_START_OLDEST // the oldest message still in the ring
)

// Idle says how a Wait call idles.
type Idle int32

const (
	SpinThenBlock Idle = C.RINGCAST_IDLE_SPIN_THEN_BLOCK // the default
	Spin          Idle = C.RINGCAST_IDLE_SPIN
	SpinThenYield Idle = C.RINGCAST_IDLE_SPIN_THEN_YIELD
	Block         Idle = C.RINGCAST_IDLE_BLOCK
)

// CreateOptions: the zero value is the C++ defaults.
type CreateOptions struct {
	Mode       uint32 // file mode; 0: 0600
	Replace    bool   // unlink an existing file first
	Lossy      bool   // the producer never waits; slow consumers are lapped
	Wakeups    bool   // fence every push and receive instead of membarrier(2)
	NoProducer bool   // the creating handle does not take the producer role
	ReapOnFull bool   // the producer reaps dead consumers when the ring is full
	MaxMessage uint64 // largest message in bytes; 0: 64 KiB or what the capacity allows
	// The slots in path + ".slots", which only the owner may write (Create only).
	SeparateSlots bool
}

// OpenOptions: the zero value opens read-write and takes the file's capacity.
type OpenOptions struct {
	ExpectedCapacity uint64
	ReadOnly         bool
	ReapOnFull       bool
	ReadOnlySlots    bool // a reader whose message slots are mapped read-only (cannot produce)
}

// ConsumerID names a consumer registered through a Ring.
type ConsumerID uint32

// Ring is a handle on a ring; Close frees it.
type Ring struct {
	c *C.ringcast_ring // for setup calls
	h C.rc_handle      // the same, for the hot path (see the cgo preamble)
	n native           // the mapping, for the hot path in Go (native.go)
}

// adopt completes a Ring whose c a setup call has just set.
func (r *Ring) adopt() *Ring {
	r.h = C.rc_handle(uintptr(unsafe.Pointer(r.c)))
	var s C.ringcast_native
	if C.ringcast_native_state(r.c, &s) == C.RINGCAST_OK && s.layout_version == layoutVersion &&
		s.capacity >= 2 && s.header != nil && s.slots != nil {
		r.n = native{header: s.header, slots: s.slots, capacity: uint64(s.capacity), lossy: s.flags&1 != 0,
			isProducer: (*bool)(unsafe.Pointer(s.is_producer)), fenced: (*bool)(unsafe.Pointer(s.fenced)),
			seq: (*uint64)(unsafe.Pointer(s.seq)), payloadBytes: (*uint64)(unsafe.Pointer(s.payload_bytes)),
			cachedMin: (*uint64)(unsafe.Pointer(s.cached_min)), stampBelow: (*uint64)(unsafe.Pointer(s.stamp_below)),
			owned: (*uint32)(s.owned), stableFrom: unsafe.Pointer(s.stable_from), stride: uintptr(s.stable_from_stride)}
		r.n.largest = uint64(s.max_message) // ringcast_max_message's value
		if c := r.n.capacity; c&(c-1) == 0 {
			r.n.mask = c - 1
		}
	}
	return r
}

func (r *Ring) nativeWakeConsumers() { C.rc_native_wake_consumers(r.h) }
func (r *Ring) nativeWakeProducer()  { C.rc_native_wake_producer(r.h) }

func (o *CreateOptions) toC() *C.ringcast_create_options {
	if o == nil {
		return nil
	}
	return &C.ringcast_create_options{mode: C.uint32_t(o.Mode), replace: C.bool(o.Replace), lossy: C.bool(o.Lossy),
		wakeups: C.bool(o.Wakeups), no_producer: C.bool(o.NoProducer), reap_on_full: C.bool(o.ReapOnFull),
		max_message: C.uint64_t(o.MaxMessage), separate_slots: C.bool(o.SeparateSlots)}
}

// Create makes a ring file at path with capacity 64-byte slots (2..2^30).
func Create(path string, capacity uint64, options *CreateOptions) (*Ring, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	r := &Ring{}
	err := setup(func() C.ringcast_status {
		return C.ringcast_create(cpath, C.uint64_t(capacity), options.toC(), &r.c)
	})
	if err != nil {
		return nil, err
	}
	return r.adopt(), nil
}

// CreateAnonymous makes a ring in anonymous shared memory, for the goroutines
// and threads of this process.
func CreateAnonymous(capacity uint64, options *CreateOptions) (*Ring, error) {
	r := &Ring{}
	if err := setup(func() C.ringcast_status {
		return C.ringcast_create_anonymous(C.uint64_t(capacity), options.toC(), &r.c)
	}); err != nil {
		return nil, err
	}
	return r.adopt(), nil
}

// Open opens an existing ring file.
func Open(path string, options *OpenOptions) (*Ring, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var o *C.ringcast_open_options
	if options != nil {
		o = &C.ringcast_open_options{expected_capacity: C.uint64_t(options.ExpectedCapacity),
			read_only: C.bool(options.ReadOnly), reap_on_full: C.bool(options.ReapOnFull),
			read_only_slots: C.bool(options.ReadOnlySlots)}
	}
	r := &Ring{}
	err := setup(func() C.ringcast_status {
		return C.ringcast_open(cpath, o, &r.c)
	})
	if err != nil {
		return nil, err
	}
	return r.adopt(), nil
}

// Close unregisters the handle's consumers, aborts an open claim, gives the
// producer role up and unmaps. Safe to call twice.
func (r *Ring) Close() {
	C.ringcast_close(r.c)
	r.c, r.h, r.n = nil, 0, native{}
}

// ClaimProducer takes the producer role now (TryPush takes it lazily).
func (r *Ring) ClaimProducer() error {
	return setup(func() C.ringcast_status { return C.ringcast_claim_producer(r.c) })
}

// ReleaseProducer gives the producer role up.
func (r *Ring) ReleaseProducer() { C.ringcast_release_producer(r.c) }

// IsProducer reports whether this handle holds the producer role.
func (r *Ring) IsProducer() bool { return bool(C.ringcast_is_producer(r.c)) }

// Register adds a consumer that starts at start.
func (r *Ring) Register(start StartAt) (ConsumerID, error) {
	var id C.uint32_t
	err := setup(func() C.ringcast_status {
		return C.ringcast_register(r.c, C.ringcast_start_at(start), &id)
	})
	if err != nil {
		return 0, err
	}
	return ConsumerID(id), nil
}

// Unregister frees the consumer's entry: InvalidConsumer if it is not this handle's.
func (r *Ring) Unregister(id ConsumerID) Status {
	return Status(C.ringcast_unregister(r.c, C.uint32_t(id)))
}

// ReapDeadConsumers frees the entries of consumers whose owner died.
func (r *Ring) ReapDeadConsumers() (int, error) {
	var freed C.size_t
	err := setup(func() C.ringcast_status {
		return C.ringcast_reap_dead_consumers(r.c, &freed)
	})
	if err != nil {
		return 0, err
	}
	return int(freed), nil
}

// bytesOf is the C view of p (NULL for an empty slice). p is Go memory with
// no Go pointers in it, which cgo lets C read and write during the call.
func bytesOf(p []byte) unsafe.Pointer {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Pointer(&p[0])
}

func nanos(d time.Duration) C.uint64_t {
	if d < 0 {
		return 0
	}
	return C.uint64_t(d)
}

// TryPush copies p into the ring: OK, Full, PayloadTooLarge, NotProducer, ProducerBusy.
// Messages of at most 52 bytes take a path in Go where they can (native.go).
func (r *Ring) TryPush(p []byte) Status {
	if r.tryPush(p) {
		return OK
	}
	return Status(C.rc_try_push(r.h, bytesOf(p), C.size_t(len(p))))
}

// TryPushBatch pushes messages in order until one does not fit: their bytes
// back to back in data, their lengths in lengths; one cgo call, and the
// producer position published once per up to 64. InvalidArgument (nothing
// pushed) if the lengths add up to more than len(data).
func (r *Ring) TryPushBatch(data []byte, lengths []uint32) BatchResult {
	total := 0
	for _, n := range lengths {
		total += int(n)
	}
	if total > len(data) {
		return BatchResult{Status: InvalidArgument}
	}
	var l *C.uint32_t
	if len(lengths) > 0 {
		l = (*C.uint32_t)(unsafe.Pointer(&lengths[0]))
	}
	b := C.rc_try_push_batch(r.h, bytesOf(data), l, C.size_t(len(lengths)))
	return BatchResult{Status(b.status), int(b.count), uint64(b.missed)}
}

// PushWait is TryPush waiting up to timeout for room: TimedOut after it.
func (r *Ring) PushWait(p []byte, timeout time.Duration, idle Idle) Status {
	return Status(C.rc_push_wait(r.h, bytesOf(p), C.size_t(len(p)), nanos(timeout), C.ringcast_idle(idle)))
}

func (r *Ring) claimed(c C.rc_claim, n int) ([]byte, Status) {
	if c.status != C.RINGCAST_OK {
		return nil, Status(c.status)
	}
	r.n.claimOpen = true
	return unsafe.Slice((*byte)(c.data), n), OK
}

// TryClaim reserves room for an n-byte message at the head; write it through
// the returned slice (memory of the ring or the handle: do not keep it), then
// Commit or Abort. No push while a claim is open.
func (r *Ring) TryClaim(n int) ([]byte, Status) {
	return r.claimed(C.rc_try_claim(r.h, C.size_t(n)), n)
}

// ClaimWait is TryClaim waiting up to timeout for room.
func (r *Ring) ClaimWait(n int, timeout time.Duration, idle Idle) ([]byte, Status) {
	return r.claimed(C.rc_claim_wait(r.h, C.size_t(n), nanos(timeout), C.ringcast_idle(idle)), n)
}

// Commit publishes the open claim's first n bytes.
func (r *Ring) Commit(n int) Status {
	r.n.claimOpen = false
	return Status(C.rc_commit(r.h, C.size_t(n)))
}

// Abort gives the open claim's room back.
func (r *Ring) Abort() Status {
	r.n.claimOpen = false
	return Status(C.rc_abort(r.h))
}

// RecvResult is one receive's outcome.
type RecvResult struct {
	Status Status
	Length int    // bytes written when OK; bytes needed when BufferTooSmall
	Missed uint64 // positions skipped when Lapped
}

func recvResult(r C.ringcast_recv_result) RecvResult {
	return RecvResult{Status(r.status), int(r.length), uint64(r.missed)}
}

// TryRecv copies the next message for id into buf. A buf of at least
// MaxInlinePayload bytes takes the fast path for short messages, which runs
// in Go for messages of at most 52 bytes (native.go).
func (r *Ring) TryRecv(id ConsumerID, buf []byte) RecvResult {
	if res, ok := r.tryRecv(id, buf); ok {
		return res
	}
	return recvResult(C.rc_try_recv(r.h, C.uint32_t(id), bytesOf(buf), C.size_t(len(buf))))
}

// RecvWait is TryRecv waiting up to timeout for a message.
func (r *Ring) RecvWait(id ConsumerID, buf []byte, timeout time.Duration, idle Idle) RecvResult {
	return recvResult(C.rc_recv_wait(r.h, C.uint32_t(id), bytesOf(buf), C.size_t(len(buf)), nanos(timeout),
		C.ringcast_idle(idle)))
}

// BatchResult is a batch receive's outcome.
type BatchResult struct {
	Status Status // OK when messages came, else as RecvResult's
	Count  int
	Missed uint64
}

// RecvBatch receives up to len(lengths) messages in one call: their bytes
// back to back in buf, their lengths in lengths[:Count]. It takes as many as
// surely fit (len(buf) / MaxMessage per round); with less room than one
// MaxMessage it receives one as TryRecv does. Rounds of messages of at most
// 52 bytes run in Go (native.go), which writes each message's 52 slot bytes
// into buf: bytes of buf after the last message received may change.
func (r *Ring) RecvBatch(id ConsumerID, buf []byte, lengths []uint32) BatchResult {
	if b, ok := r.recvBatch(id, buf, lengths); ok {
		return b
	}
	return r.cRecvBatch(id, buf, lengths)
}

// cRecvBatch is ringcast_recv_batch: RecvBatch's calls and rounds that are C's.
func (r *Ring) cRecvBatch(id ConsumerID, buf []byte, lengths []uint32) BatchResult {
	var l *C.uint32_t
	if len(lengths) > 0 {
		l = (*C.uint32_t)(unsafe.Pointer(&lengths[0]))
	}
	b := C.rc_recv_batch(r.h, C.uint32_t(id), bytesOf(buf), C.size_t(len(buf)), l, C.size_t(len(lengths)))
	return BatchResult{Status(b.status), int(b.count), uint64(b.missed)}
}

// View is the next message, read without consuming it.
type View struct {
	Data    []byte // C memory: valid until id's next view, release, receive or unregister
	InPlace bool   // Data points into the ring itself
	Missed  uint64 // positions skipped when the status is Lapped
}

// TryView reads the next message for id without consuming it.
func (r *Ring) TryView(id ConsumerID) (View, Status) {
	res := C.rc_try_view(r.h, C.uint32_t(id))
	s, v := Status(res.status), res.view
	view := View{InPlace: bool(v.in_place), Missed: uint64(v.missed)}
	if s == OK && v.length > 0 {
		view.Data = unsafe.Slice((*byte)(v.data), int(v.length))
	}
	return view, s
}

// ReleaseView consumes the viewed message.
func (r *Ring) ReleaseView(id ConsumerID) Status {
	return Status(C.rc_release_view(r.h, C.uint32_t(id)))
}

// Lag is the positions published but not yet received by id.
func (r *Ring) Lag(id ConsumerID) uint64 {
	if r.n.header != nil {
		return r.n.lag(id)
	}
	return uint64(C.rc_lag(r.h, C.uint32_t(id)))
}

// ProducerPosition is the next position the producer writes.
func (r *Ring) ProducerPosition() uint64 {
	if r.n.header != nil {
		return atomic.LoadUint64(r.n.word64(layoutProducerSeq)) // pairs with publish's release store
	}
	return uint64(C.rc_producer_position(r.h))
}

// cLag and cProducerPosition are the C ABI's answers, never the Go path's
// (for the tests, which cannot call cgo themselves).
func (r *Ring) cLag(id ConsumerID) uint64 { return uint64(C.rc_lag(r.h, C.uint32_t(id))) }
func (r *Ring) cProducerPosition() uint64 { return uint64(C.rc_producer_position(r.h)) }

// Capacity is the ring's size in 64-byte slots.
func (r *Ring) Capacity() uint64 { return uint64(C.ringcast_capacity(r.c)) }

// MaxMessage is the largest payload a message may have.
func (r *Ring) MaxMessage() int { return int(C.ringcast_max_message(r.c)) }

// IsLossy reports whether the producer never waits.
func (r *Ring) IsLossy() bool { return bool(C.ringcast_is_lossy(r.c)) }

// IsFullyDrained reports whether every consumer has received everything.
func (r *Ring) IsFullyDrained() bool { return bool(C.ringcast_is_fully_drained(r.c)) }

// ActiveConsumerCount is the number of registered consumers.
func (r *Ring) ActiveConsumerCount() int { return int(C.ringcast_active_consumer_count(r.c)) }

// ConsumerStatus is one consumer entry in a RingStatus.
type ConsumerStatus struct {
	Active, OwnerAlive bool
	OwnerPID           uint32
	Cursor, Lag        uint64
}

// RingStatus is a moment's view of the whole ring.
type RingStatus struct {
	Capacity                               uint64
	Flags, ProducerPID                     uint32
	ProducerSeq                            uint64
	ProducerAlive, HalfWrittenSlot         bool
	ProducerSleeping                       bool
	SleepingConsumers                      uint32
	UpstreamLost, UpstreamGaps, MaxMessage uint64
	Messages, PayloadBytes                 uint64
	Consumers                              [MaxConsumers]ConsumerStatus
}

// Status reads the ring's status (one fcntl per active consumer).
func (r *Ring) Status() (RingStatus, error) {
	var s C.ringcast_ring_status
	err := setup(func() C.ringcast_status {
		return C.ringcast_get_status(r.c, &s)
	})
	if err != nil {
		return RingStatus{}, err
	}
	out := RingStatus{Capacity: uint64(s.capacity), Flags: uint32(s.flags), ProducerPID: uint32(s.producer_pid),
		ProducerSeq: uint64(s.producer_seq), ProducerAlive: bool(s.producer_alive),
		HalfWrittenSlot: bool(s.half_written_slot), ProducerSleeping: bool(s.producer_sleeping),
		SleepingConsumers: uint32(s.sleeping_consumers), UpstreamLost: uint64(s.upstream_lost),
		UpstreamGaps: uint64(s.upstream_gaps), MaxMessage: uint64(s.max_message), Messages: uint64(s.messages),
		PayloadBytes: uint64(s.payload_bytes)}
	for i := range out.Consumers {
		c := s.consumers[i]
		out.Consumers[i] = ConsumerStatus{bool(c.active), bool(c.owner_alive), uint32(c.owner_pid), uint64(c.cursor),
			uint64(c.lag)}
	}
	return out, nil
}
