package ringcast

// The hot path in Go: TryPush and TryRecv of inline messages (at most 52
// bytes), Lag and ProducerPosition, run here over this process's mapping of
// the ring instead of crossing cgo, which costs several times the C++ call
// (docs/bench-history/2026-12-06-c-abi.md). Everything else, and every case
// of these calls that is not the plain one, is the C ABI's: the code below
// either completes the C++ fast path's exact steps or touches nothing shared
// and hands the call to C, which starts it again from shared memory.
//
// The bytes are those of docs/layout.md: the offsets come from ringcast.h's
// RINGCAST_LAYOUT_* constants (static_asserted against layout.hpp in
// src/ring/c_api.cpp), so a layout change does not build until they follow.
// The protocol is docs/memory-ordering.md's, step for step as
// include/ringcast/detail/broadcast_ring_inline.hpp runs it:
//
//   - Every word of the mapping is read with sync/atomic, and written with it
//     except the seven data words of a slot and payload_bytes, which a push
//     writes as C++ does, relaxed (storeRelaxed: a plain store on amd64 out of
//     -race builds, store_plain.go; an atomic one elsewhere, store_atomic.go).
//     Go's atomics are sequentially consistent, at least as strong as each
//     C++ order they stand for: a word load is an acquire that keeps the
//     version re-check after it, and tryPush says why each of its stores is
//     ordered enough. With plain word stores a Go producer and a Go consumer
//     in one process race under Go's memory model on the data words, a race
//     the model defines for a machine word and the seqlock check rejects
//     (store_plain.go); -race builds store them atomically.
//   - The store to producer_seq (after a push) or to the cursor (after a
//     receive), followed by the load of the other side's wait line, is the
//     store-then-load of the sleep handshake; Go's sequentially consistent
//     store (XCHG on amd64, STLR before LDAR on arm64) is at least the full
//     fence a fenced-mode producer or a wakeups ring uses there, which also
//     covers what the light barrier plus a waiter's membarrier would.
//   - The producer's handle state (the next position, the cached minimum
//     cursor, the payload total) is not copied: ringcast_native_state hands
//     out pointers to the C++ handle's own fields, so Go and C++ calls on one
//     handle share one copy, and the one-producing-goroutine rule covers them
//     as it covers the C++ handle.
//
// The C ABI keeps: pushes of records (more than 52 bytes) and pushes within
// a lap of a record, padding or claim (the head stamp, invariant 9), a push
// that may find the ring full (the scan of the cursors and its Dekker
// handshake with registration), a push before this handle holds the role or
// while a claim is open or while the producer is in fenced mode, the
// receives of records, paddings and loss markers, a receive of anything but
// a committed inline message or an empty slot (a lap, a half-written slot,
// a corrupt one), and a receive below the consumer's stable_from (invariant
// 10) that finds an empty slot. Views, claims, batches and waits are C's.

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// native is a Ring's view of its mapping; header is nil when the Go path is
// off (a closed ring, or a library of another layout version).
type native struct {
	header, slots unsafe.Pointer
	capacity      uint64
	mask          uint64 // capacity - 1 when a power of two, else 0 (index with %)
	lossy         bool

	// The C++ handle's fields (ringcast_native): the producing goroutine's.
	isProducer, fenced                       *bool
	seq, payloadBytes, cachedMin, stampBelow *uint64
	// owned is atomic (register and unregister change it); stableFrom is
	// id i's at stableFrom + i*stride.
	owned      *uint32
	stableFrom unsafe.Pointer
	stride     uintptr

	claimOpen bool // a TryClaim/ClaimWait not yet committed or aborted: pushes go to C
}

func (n *native) word64(off uintptr) *uint64 { return (*uint64)(unsafe.Add(n.header, off)) }
func (n *native) word32(off uintptr) *uint32 { return (*uint32)(unsafe.Add(n.header, off)) }

func (n *native) cursor(id ConsumerID) *uint64 {
	return n.word64(layoutConsumers + uintptr(id)*layoutConsumerBytes)
}

// slot is the version word of the slot of position pos; its seven data
// words follow it.
func (n *native) slot(pos uint64) *[8]uint64 {
	var i uint64
	if n.mask != 0 {
		i = pos & n.mask
	} else {
		i = pos % n.capacity // a division: only for capacities that are not powers of two
	}
	return (*[8]uint64)(unsafe.Add(n.slots, uintptr(i)*layoutSlotBytes))
}

func (n *native) stable(id ConsumerID) uint64 {
	return *(*uint64)(unsafe.Add(n.stableFrom, uintptr(id)*n.stride))
}

// tryPush is try_push of a message of at most 52 bytes, when it takes the
// inline fast path (write_inline and publish with none of their rare
// branches); false when the call is C's, with nothing stored.
func (r *Ring) tryPush(p []byte) bool {
	n := &r.n
	if n.header == nil || len(p) > MaxInlinePayload || n.claimOpen || !*n.isProducer || *n.fenced {
		return false
	}
	seq := *n.seq
	// check_room(1), and write_inline's stamp condition: either sends the
	// call to C (full_slow's scan, begin_write's intent and head stamp).
	if (!n.lossy && seq+1-*n.cachedMin > n.capacity) || seq+1 < *n.stampBelow {
		return false
	}
	// write_slot: the length in the low half of words[0], then the payload
	// zero-padded to 52 bytes, little-endian; a full 52 bytes straight from p.
	// Unrolled over an array pointer, with no bounds check: a loop over
	// slices of p cost a quarter of the push (4 ns of 14).
	q := &[MaxInlinePayload]byte{}
	if len(p) == MaxInlinePayload {
		q = (*[MaxInlinePayload]byte)(p)
	} else {
		copy(q[:], p)
	}
	le := binary.LittleEndian
	w := [7]uint64{uint64(len(p)) | uint64(le.Uint32(q[0:]))<<32, le.Uint64(q[4:]), le.Uint64(q[12:]),
		le.Uint64(q[20:]), le.Uint64(q[28:]), le.Uint64(q[36:]), le.Uint64(q[44:])}
	s := n.slot(seq)
	// W1, F_w, W2, W3 (docs/memory-ordering.md, "Slots"), three full
	// barriers on amd64 where every store used to be one (eleven XCHGs,
	// docs/bench-history/2026-12-07-go-stores.md).
	//
	// W1 and F_w: a sequentially consistent store, XCHG on amd64, a locked
	// instruction that no later store passes; the Go compiler emits the word
	// stores after it (it threads memory through atomics and plain stores
	// alike: go build -gcflags=-S shows XCHGQ, the loop's MOVQ, XCHGQ). On other
	// architectures it is STLR, and the words' own release stores
	// (store_atomic.go) keep it first, as before. So a reader whose R2 sees a
	// word of this write sees at R3 this odd version or a later one. A swap
	// would be the same XCHG on amd64, and on ARMv8.0 (LDAXR/STLXR) it orders
	// later accesses after its load only, so it would not make plain word
	// stores safe there either.
	atomic.StoreUint64(&s[0], 2*seq+1)
	// W2: relaxed, as in C++ (storeRelaxed says why a plain store is one).
	for i := 0; i < 7; i++ {
		storeRelaxed(&s[1+i], w[i])
	}
	// W3: a release at least (XCHG; STLR), pairs with R1: every W2 happens
	// before the loads of a reader that sees this version, also under Go's
	// memory model, the words being sequenced before it.
	atomic.StoreUint64(&s[0], 2*seq+2)
	*n.seq = seq + 1
	total := *n.payloadBytes + uint64(len(p))
	*n.payloadBytes = total
	// publish(): the display total, relaxed as in C++ (readers only show it;
	// the store to producer_seq below orders it anyway), then the position
	// (pairs with the acquire loads of producer_seq), then the check for
	// sleepers.
	storeRelaxed(n.word64(layoutPayloadBytes), total)
	atomic.StoreUint64(n.word64(layoutProducerSeq), seq+1)
	if atomic.LoadUint32(n.word32(layoutDataWait))&layoutSignalWaiting != 0 {
		r.nativeWakeConsumers()
	}
	return true
}

// tryRecv is try_recv into a buffer of at least 52 bytes when it reads a
// committed inline message (ok) or an empty slot (empty); handled false
// when the call is C's, with nothing stored.
func (r *Ring) tryRecv(id ConsumerID, buf []byte) (res RecvResult, handled bool) {
	n := &r.n
	if n.header == nil || len(buf) < MaxInlinePayload || id >= MaxConsumers ||
		atomic.LoadUint32(n.owned)>>id&1 == 0 {
		return RecvResult{}, false
	}
	cursor := n.cursor(id)
	pos := atomic.LoadUint64(cursor) // only this consumer writes it
	lappable := pos < n.stable(id)
	s := n.slot(pos)
	want := 2*pos + 2
	// R1: pairs with the producer's committing store of the version.
	v1 := atomic.LoadUint64(&s[0])
	if v1 != want {
		if v1 < want-1 && !lappable {
			return RecvResult{Status: Empty}, true // recv_slow's kNotYet for a reader that cannot be lapped
		}
		return RecvResult{}, false
	}
	// R2, then R3: a word stored by a later write makes R3 see its odd version.
	var w [7]uint64
	for i := range w {
		w[i] = atomic.LoadUint64(&s[1+i])
	}
	if atomic.LoadUint64(&s[0]) != v1 {
		return RecvResult{}, false // overwritten while read: C classifies the lap
	}
	// Invariant 9 (R4) for a reader that may be lapped; a record is C's.
	if lappable && atomic.LoadUint64(n.word64(layoutWriteIntent)) > pos+n.capacity {
		return RecvResult{}, false
	}
	length := uint32(w[0])
	if w[0]&layoutRecordBit != 0 || length > MaxInlinePayload {
		return RecvResult{}, false // a record, or a corrupt slot (layout_mismatch)
	}
	// As read_slot: all 52 bytes of the slot into buf.
	q := (*[MaxInlinePayload]byte)(buf) // unrolled, as tryPush's words
	le := binary.LittleEndian
	le.PutUint32(q[0:], uint32(w[0]>>32))
	le.PutUint64(q[4:], w[1])
	le.PutUint64(q[12:], w[2])
	le.PutUint64(q[20:], w[3])
	le.PutUint64(q[28:], w[4])
	le.PutUint64(q[36:], w[5])
	le.PutUint64(q[44:], w[6])
	// advance_cursor: pairs with the producer's acquire load in full_slow;
	// then the check for a producer asleep waiting for room.
	atomic.StoreUint64(cursor, pos+1)
	if atomic.LoadUint32(n.word32(layoutSpaceWait))&layoutSignalWaiting != 0 {
		r.nativeWakeProducer()
	}
	return RecvResult{Status: OK, Length: int(length)}, true
}

// lag is BroadcastRing::lag.
func (n *native) lag(id ConsumerID) uint64 {
	if id >= MaxConsumers {
		return 0
	}
	if atomic.LoadUint32(n.word32(layoutConsumers+uintptr(id)*layoutConsumerBytes+layoutConsumerState)) !=
		layoutConsumerActive {
		return 0
	}
	cursor := atomic.LoadUint64(n.cursor(id)) // first: producer_seq only grows
	published := atomic.LoadUint64(n.word64(layoutProducerSeq))
	if published > cursor {
		return published - cursor
	}
	return 0
}
