package ringcast

// The hot path in Go: TryPush, TryRecv and RecvBatch of inline messages (at
// most 52 bytes), Lag and ProducerPosition, run here over this process's
// mapping of the ring instead of crossing cgo, which costs several times the
// C++ call (docs/bench-history/2026-12-06-c-abi.md). Everything else, and
// every case of these calls that is not the plain one, is the C ABI's: the
// code below either completes the C++ fast path's exact steps or touches
// nothing shared and hands the call to C, which starts it again from shared
// memory (RecvBatch: from the start of the round it was in, after the rounds
// it completed, as ringcast_recv_batch would go on from there).
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
// a corrupt one), a receive below the consumer's stable_from (invariant
// 10) that finds an empty slot, and a RecvBatch round that meets any of
// those (from the round's first position). Views, claims, push batches and
// waits are C's.

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
	largest       uint64 // max_message (at least 52): ringcast_recv_batch's room per message
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

// recvBatch is ringcast_recv_batch (src/ring/c_api.cpp) while it reads
// committed inline messages; handled false when the whole call is C's, with
// nothing stored. Like the C ABI it drains in rounds of as many messages as
// surely fit in the room left (len(buf)-used over max_message, at most the
// lengths left), each round one BroadcastRing::drain: a read_slot per
// position as tryRecv makes it, then one cursor store for the round. A round
// that meets anything else (a record or padding, a lap, a half-written or
// corrupt slot, an empty slot a lappable reader must classify) has consumed
// nothing: the call goes on in C from that round's first position, which
// reads the round again and gives what ringcast_recv_batch gives from there.
//
// Each message's 52 slot bytes go straight into buf as they are loaded
// (read_slot's layout): buf's bytes after the last message received may
// change, as TryRecv's do. ringcast_recv_batch stages each message in
// drain's buffer and then memcpys it: that memcpy was a third of the cgo
// RecvBatch benchmark's samples, push included
// (docs/bench-history/2026-12-08-go-batch.md).
func (r *Ring) recvBatch(id ConsumerID, buf []byte, lengths []uint32) (BatchResult, bool) {
	n := &r.n
	if n.header == nil || len(lengths) == 0 || id >= MaxConsumers || atomic.LoadUint32(n.owned)>>id&1 == 0 ||
		n.largest < MaxInlinePayload {
		// invalid_argument and invalid_consumer are C's; max_message is at
		// least 52 on every ring (create raises it, open checks it).
		return BatchResult{}, false
	}
	if uint64(len(buf)) < n.largest {
		// Room for less than one message of the largest size: one, as
		// TryRecv (ringcast_recv_batch calls ringcast_try_recv).
		res := r.TryRecv(id, buf)
		lengths[0] = uint32(res.Length)
		b := BatchResult{Status: res.Status, Missed: res.Missed}
		if res.Status == OK {
			b.Count = 1
		}
		return b, true
	}
	cursor := n.cursor(id)
	pos := atomic.LoadUint64(cursor) // relaxed in C++: only this consumer writes it (invariant 1)
	// Invariant 10: below stable_from the reader may be lapped (lappable(id,
	// pos)). Only registration changes it, never during this call.
	stable := n.stable(id)
	largest := int(n.largest)
	count, used := 0, 0
	for {
		round := (len(buf) - used) / largest
		if left := len(lengths) - count; left < round {
			round = left
		}
		if round == 0 {
			return BatchResult{Status: OK, Count: count}, true
		}
		start, startCount, startUsed := pos, count, used
		for end := count + round; count < end; pos++ {
			// read_slot(pos), as tryRecv: R1, R2, R3 and R4.
			s := n.slot(pos)
			want := 2*pos + 2
			// R1: pairs with the producer's committing store of the version
			// (W3: write_slot's release store, tryPush's atomic store).
			v1 := atomic.LoadUint64(&s[0])
			if v1 != want {
				if v1 < want-1 && pos >= stable {
					// kNotYet for a reader that cannot be lapped: drain stops
					// here and delivers what the round read; at a round's
					// first position recv_slow says empty, which the call
					// reports only if it received nothing.
					if pos != start {
						r.advance(cursor, pos)
					}
					if count == 0 {
						return BatchResult{Status: Empty}, true
					}
					return BatchResult{Status: OK, Count: count}, true
				}
				return r.recvBatchInC(id, buf[startUsed:], lengths[startCount:], startCount), true
			}
			// R2: the words, each stored into buf as it is loaded (a copy whose
			// bytes are discarded unless R3 and the checks after it pass: a
			// round that fails them is read again by C from its start). Go's
			// atomic loads are acquires, each ordered after the one before,
			// and the stores to buf are this goroutine's own memory.
			//
			// A round of k messages starts with room for k of max_message (at
			// least 52) bytes, and each message takes at most 52: the slot's 52
			// bytes always fit.
			dst := (*[MaxInlinePayload]byte)(buf[used:])
			le := binary.LittleEndian // read_slot's layout: the head in words[0]'s high half, then six words
			w0 := atomic.LoadUint64(&s[1])
			le.PutUint64(dst[0:], w0>>32) // bytes 4 to 7 are the next word's, stored next
			le.PutUint64(dst[4:], atomic.LoadUint64(&s[2]))
			le.PutUint64(dst[12:], atomic.LoadUint64(&s[3]))
			le.PutUint64(dst[20:], atomic.LoadUint64(&s[4]))
			le.PutUint64(dst[28:], atomic.LoadUint64(&s[5]))
			le.PutUint64(dst[36:], atomic.LoadUint64(&s[6]))
			le.PutUint64(dst[44:], atomic.LoadUint64(&s[7]))
			// R3: a word stored by a later write makes this load see that
			// write's odd version (W1 is ordered before its word stores: tryPush
			// and write_slot's release fence say how).
			if atomic.LoadUint64(&s[0]) != v1 {
				return r.recvBatchInC(id, buf[startUsed:], lengths[startCount:], startCount), true // overwritten while read
			}
			// R4, invariant 9, for a reader that may be lapped: a later lap's
			// record may have rewritten the words but not the version yet.
			// Pairs with begin_write's release fence (the acquire loads above
			// order it after the words).
			if pos < stable && atomic.LoadUint64(n.word64(layoutWriteIntent)) > pos+n.capacity {
				return r.recvBatchInC(id, buf[startUsed:], lengths[startCount:], startCount), true
			}
			length := uint32(w0)
			if w0&layoutRecordBit != 0 || length > MaxInlinePayload {
				// A record (drain_record is C's), or a corrupt slot (layout_mismatch).
				return r.recvBatchInC(id, buf[startUsed:], lengths[startCount:], startCount), true
			}
			lengths[count] = length
			used += int(length)
			count++
		}
		r.advance(cursor, pos) // drain's one advance_cursor for the round
	}
}

// advance is advance_cursor for a batch: the store pairs with the
// producer's acquire load of the cursor in full_slow (the slot reads before
// it happen before the producer reuses those slots); being sequentially
// consistent, it is also the store-then-load of the sleep handshake with a
// producer asleep waiting for room, whose flag is loaded next.
func (r *Ring) advance(cursor *uint64, next uint64) {
	atomic.StoreUint64(cursor, next)
	if atomic.LoadUint32(r.n.word32(layoutSpaceWait))&layoutSignalWaiting != 0 {
		r.nativeWakeProducer()
	}
}

// recvBatchInC is the rest of a recvBatch call in C, after the `done`
// messages of its completed rounds, with buf and lengths past them. It maps
// the result as ringcast_recv_batch does after a round: a lap has moved the
// cursor, so it is reported even after messages; any other stop after
// messages is ok (the next call finds it again).
func (r *Ring) recvBatchInC(id ConsumerID, buf []byte, lengths []uint32, done int) BatchResult {
	if testHookBatchInC != nil {
		testHookBatchInC()
	}
	res := r.cRecvBatch(id, buf, lengths)
	if done == 0 {
		return res
	}
	if res.Count == 0 && res.Status != Lapped {
		return BatchResult{Status: OK, Count: done}
	}
	res.Count += done
	return res
}

// testHookBatchInC, when set (by tests, before any goroutine receives), is
// called each time recvBatch hands the rest of a call to C.
var testHookBatchInC func()

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
