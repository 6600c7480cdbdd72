package ringcast

import (
	"encoding/binary"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"unsafe"
)

// threadCPU pins the benchmark to its OS thread; the function it returns,
// deferred, reports that thread's CPU time per iteration since the call
// ("cpu-ns/op"), as Google Benchmark's CPU column does for the C++ shapes:
// on a loaded host wall time also counts the time other processes had the
// CPU.
func threadCPU(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadNanos()
	return func() {
		b.ReportMetric(float64(threadNanos()-start)/float64(b.N), "cpu-ns/op")
		runtime.UnlockOSThread()
	}
}

func threadNanos() int64 {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3 // CLOCK_THREAD_CPUTIME_ID
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// The shapes of bench/ring/c_abi_bench.cpp from Go, 52-byte messages, one
// goroutine (docs/benchmarks.md, "C ABI and bindings"):
//
//	go test -run '^$' -bench . -benchtime 2000000x
//
// PushNoConsumer and PushThenRecv take the Go path (native.go); their Cgo
// variants turn it off, so every call crosses cgo as before it.

func benchRing(b *testing.B, consumer bool) (*Ring, ConsumerID) {
	r, err := CreateAnonymous(1024, &CreateOptions{MaxMessage: MaxInlinePayload})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.Close)
	var id ConsumerID
	if consumer {
		if id, err = r.Register(Latest); err != nil {
			b.Fatal(err)
		}
	}
	return r, id
}

func BenchmarkPushNoConsumer(b *testing.B) { pushNoConsumer(b, true) }

func BenchmarkPushNoConsumerCgo(b *testing.B) { pushNoConsumer(b, false) }

func pushNoConsumer(b *testing.B, native bool) {
	r, _ := benchRing(b, false)
	if !native {
		r.withoutNative()
	}
	m := make([]byte, MaxInlinePayload)
	b.ResetTimer()
	defer threadCPU(b)()
	for i := 0; i < b.N; i++ {
		if r.TryPush(m) != OK {
			b.Fatal("push failed")
		}
	}
}

func BenchmarkPushThenRecv(b *testing.B) { pushThenRecv(b, true) }

func BenchmarkPushThenRecvCgo(b *testing.B) { pushThenRecv(b, false) }

func pushThenRecv(b *testing.B, native bool) {
	r, id := benchRing(b, true)
	if !native {
		r.withoutNative()
	}
	m := make([]byte, MaxInlinePayload)
	out := make([]byte, MaxInlinePayload)
	b.ResetTimer()
	defer threadCPU(b)()
	for i := 0; i < b.N; i++ {
		binary.LittleEndian.PutUint64(m, uint64(i))
		if r.TryPush(m) != OK {
			b.Fatal("push failed")
		}
		if res := r.TryRecv(id, out); res.Status != OK || binary.LittleEndian.Uint64(out) != uint64(i) {
			b.Fatalf("message %d: %+v", i, res)
		}
	}
}

// BenchmarkBatch64: 64 messages written back to back, pushed by one
// TryPushBatch and received by one RecvBatch; an iteration is one message.
func BenchmarkBatch64(b *testing.B) {
	const batch = 64
	r, id := benchRing(b, true)
	flat := make([]byte, batch*MaxInlinePayload)
	flatLengths := make([]uint32, batch)
	for k := range flatLengths {
		flatLengths[k] = MaxInlinePayload
	}
	buf := make([]byte, batch*MaxInlinePayload)
	lengths := make([]uint32, batch)
	b.ResetTimer()
	defer threadCPU(b)()
	for i := 0; i < b.N; i += batch {
		for k := 0; k < batch; k++ {
			binary.LittleEndian.PutUint64(flat[k*MaxInlinePayload:], uint64(i+k))
		}
		if p := r.TryPushBatch(flat, flatLengths); p.Count != batch {
			b.Fatalf("push batch at %d: %+v", i, p)
		}
		res := r.RecvBatch(id, buf, lengths)
		if res.Status != OK || res.Count != batch {
			b.Fatalf("batch at %d: %+v", i, res)
		}
		for k := 0; k < batch; k++ {
			if binary.LittleEndian.Uint64(buf[k*MaxInlinePayload:]) != uint64(i+k) {
				b.Fatalf("message %d wrong", i+k)
			}
		}
	}
}

// BenchmarkStoreFloor is the floor under the Go path's push: the stores it
// makes (a slot's two versions and seven words, payload_bytes and
// producer_seq), as it makes them (three sync/atomic stores, XCHG on amd64,
// and eight storeRelaxed), to one cache line of Go memory and nothing else.
func BenchmarkStoreFloor(b *testing.B) {
	var line [8]uint64
	b.ResetTimer()
	defer threadCPU(b)()
	for i := 0; i < b.N; i++ {
		v := uint64(i)
		atomic.StoreUint64(&line[0], v)
		for k := 1; k < 8; k++ {
			storeRelaxed(&line[k], v)
		}
		atomic.StoreUint64(&line[0], v)
		storeRelaxed(&line[1], v)
		atomic.StoreUint64(&line[2], v)
	}
}
