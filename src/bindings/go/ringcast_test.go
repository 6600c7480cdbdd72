package ringcast

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pair makes a blocking ring file of 16 slots (messages up to 200 bytes) and
// a second handle on it, as another process would have.
func pair(t *testing.T) (producer, consumer *Ring) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring")
	producer, err := Create(path, 16, &CreateOptions{MaxMessage: 200})
	if err != nil {
		t.Fatal(err)
	}
	consumer, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { consumer.Close(); producer.Close() })
	return producer, consumer
}

// anonymousWithConsumer is an anonymous ring (closed when the test ends)
// with one consumer registered at Latest.
func anonymousWithConsumer(t *testing.T, capacity uint64, options *CreateOptions) (*Ring, ConsumerID) {
	t.Helper()
	r, err := CreateAnonymous(capacity, options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	id, err := r.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	return r, id
}

func want(t *testing.T, what string, got, expected Status) {
	t.Helper()
	if got != expected {
		t.Fatalf("%s: %v, want %v", what, got, expected)
	}
}

func TestSetupErrorsCarryStatusAndMessage(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing"), nil)
	var e *Error
	if !errors.As(err, &e) || e.Status != IOError || !strings.Contains(e.Message, "No such file") {
		t.Fatalf("Open of a missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "ring")
	r, err := Create(path, 8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := Create(path, 8, nil); !errors.As(err, &e) || e.Status != AlreadyExists {
		t.Fatalf("Create over an existing ring: %v", err)
	}
	_, err = Open(path, &OpenOptions{ExpectedCapacity: 16})
	if !errors.As(err, &e) || e.Status != LayoutMismatch || !strings.Contains(e.Message, "layout_mismatch") {
		t.Fatalf("Open with the wrong capacity: %v", err)
	}
	if Full.String() != "full" || OutOfMemory.String() != "out_of_memory" {
		t.Fatalf("names: %v %v", Full, OutOfMemory)
	}
}

func TestPushAndReceiveEveryWay(t *testing.T) {
	producer, consumer := pair(t)
	id, err := consumer.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	want(t, "TryRecv of nothing", consumer.TryRecv(id, buf).Status, Empty)
	want(t, "TryPush", producer.TryPush([]byte("hello")), OK)
	if consumer.Lag(id) != 1 || producer.ProducerPosition() != 1 || producer.IsFullyDrained() {
		t.Fatal("lag, position or drained wrong after one push")
	}
	r := consumer.TryRecv(id, buf)
	if r.Status != OK || string(buf[:r.Length]) != "hello" {
		t.Fatalf("TryRecv: %+v", r)
	}
	long := bytes.Repeat([]byte("x"), 150)
	want(t, "TryPush of a record", producer.TryPush(long), OK)
	if r := consumer.TryRecv(id, buf[:MaxInlinePayload]); r.Status != BufferTooSmall || r.Length != 150 {
		t.Fatalf("TryRecv into a small buffer: %+v", r)
	}
	if r := consumer.RecvWait(id, buf, time.Second, Block); r.Status != OK || !bytes.Equal(buf[:r.Length], long) {
		t.Fatalf("RecvWait: %+v", r)
	}
	want(t, "RecvWait of nothing", consumer.RecvWait(id, buf, time.Millisecond, Spin).Status, TimedOut)
	want(t, "TryPush too long", producer.TryPush(make([]byte, 201)), PayloadTooLarge)

	// A batch, and one whose lengths overrun its bytes.
	if b := producer.TryPushBatch([]byte("abcdef"), []uint32{1, 2, 3}); b.Status != OK || b.Count != 3 {
		t.Fatalf("TryPushBatch: %+v", b)
	}
	for _, w := range []string{"a", "bc", "def"} {
		if r := consumer.TryRecv(id, buf); r.Status != OK || string(buf[:r.Length]) != w {
			t.Fatalf("TryRecv after TryPushBatch: %+v, want %q", r, w)
		}
	}
	want(t, "TryPushBatch past its bytes", producer.TryPushBatch([]byte("abc"), []uint32{2, 2}).Status, InvalidArgument)

	// A claim, committed short, and one aborted.
	room, s := producer.TryClaim(100)
	want(t, "TryClaim", s, OK)
	copy(room, "claimed")
	want(t, "Commit", producer.Commit(7), OK)
	want(t, "Commit without a claim", producer.Commit(1), InvalidArgument)
	if r := consumer.TryRecv(id, buf); r.Status != OK || string(buf[:r.Length]) != "claimed" {
		t.Fatalf("TryRecv of a claim: %+v", r)
	}
	_, s = producer.TryClaim(3)
	want(t, "TryClaim", s, OK)
	want(t, "Abort", producer.Abort(), OK)
	want(t, "TryRecv after an abort", consumer.TryRecv(id, buf).Status, Empty)

	// Full, then room again.
	for i := 0; i < 16; i++ {
		want(t, "TryPush", producer.TryPush([]byte{byte(i)}), OK)
	}
	want(t, "TryPush into a full ring", producer.TryPush([]byte{1}), Full)
	want(t, "PushWait into a full ring", producer.PushWait([]byte{1}, time.Millisecond, SpinThenBlock), TimedOut)
	_, s = producer.ClaimWait(1, time.Millisecond, SpinThenYield)
	want(t, "ClaimWait on a full ring", s, TimedOut)

	// A view, then a batch of the rest.
	v, s := consumer.TryView(id)
	want(t, "TryView", s, OK)
	if len(v.Data) != 1 || v.Data[0] != 0 {
		t.Fatalf("TryView: %+v", v)
	}
	want(t, "ReleaseView", consumer.ReleaseView(id), OK)
	want(t, "ReleaseView twice", consumer.ReleaseView(id), InvalidConsumer)
	lengths := make([]uint32, 32)
	b := consumer.RecvBatch(id, make([]byte, 4096), lengths)
	if b.Status != OK || b.Count != 15 || lengths[14] != 1 {
		t.Fatalf("RecvBatch: %+v", b)
	}
	want(t, "PushWait", producer.PushWait([]byte{1}, time.Second, SpinThenBlock), OK)
	room, s = producer.ClaimWait(1, time.Second, SpinThenBlock)
	want(t, "ClaimWait", s, OK)
	room[0] = 2
	want(t, "Commit", producer.Commit(1), OK)

	st, err := consumer.Status()
	if err != nil {
		t.Fatal(err)
	}
	c := st.Consumers[id]
	if st.Capacity != 16 || st.MaxMessage != 200 || !st.ProducerAlive || st.ProducerPID != uint32(os.Getpid()) ||
		!c.Active || !c.OwnerAlive || c.Lag != 2 {
		t.Fatalf("Status: %+v", st)
	}
	if consumer.Capacity() != 16 || consumer.MaxMessage() != 200 || consumer.IsLossy() ||
		consumer.ActiveConsumerCount() != 1 {
		t.Fatal("observers disagree with the ring")
	}
	want(t, "Unregister", consumer.Unregister(id), OK)
	want(t, "Unregister twice", consumer.Unregister(id), InvalidConsumer)
}

func TestProducerRoleAndConsumerSlots(t *testing.T) {
	producer, other := pair(t)
	var e *Error
	if err := other.ClaimProducer(); !errors.As(err, &e) || e.Status != ProducerBusy {
		t.Fatalf("ClaimProducer while another holds it: %v", err)
	}
	want(t, "TryPush from a non-producer", other.TryPush(nil), ProducerBusy)
	producer.ReleaseProducer()
	if err := other.ClaimProducer(); err != nil || !other.IsProducer() || producer.IsProducer() {
		t.Fatalf("ClaimProducer after release: %v", err)
	}
	for i := 0; i < MaxConsumers; i++ {
		if _, err := producer.Register(Oldest); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := producer.Register(Latest); !errors.As(err, &e) || e.Status != NoConsumerSlot {
		t.Fatalf("Register past the last slot: %v", err)
	}
	if n, err := producer.ReapDeadConsumers(); err != nil || n != 0 {
		t.Fatalf("ReapDeadConsumers: %d %v", n, err)
	}
}

func TestLossyRingReportsLap(t *testing.T) {
	r, id := anonymousWithConsumer(t, 4, &CreateOptions{Lossy: true, MaxMessage: MaxInlinePayload})
	for i := 0; i < 10; i++ {
		want(t, "TryPush", r.TryPush([]byte{byte(i)}), OK)
	}
	buf := make([]byte, 64)
	if res := r.TryRecv(id, buf); res.Status != Lapped || res.Missed != 7 {
		t.Fatalf("TryRecv after a lap: %+v", res)
	}
	if res := r.TryRecv(id, buf); res.Status != OK || buf[0] != 7 {
		t.Fatalf("TryRecv after the lap: %+v", res)
	}
}

// A regression test: cgo boxed the *C.ringcast_ring argument of every call
// on the Go heap for its pointer check, one allocation per TryPush/TryRecv.
func TestHotPathDoesNotAllocate(t *testing.T) {
	producer, consumer := pair(t)
	id, err := consumer.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	m := make([]byte, MaxInlinePayload)
	out := make([]byte, MaxInlinePayload)
	buf := make([]byte, 64*200)
	lengths := make([]uint32, 64)
	lengths[0] = MaxInlinePayload
	allocs := testing.AllocsPerRun(100, func() {
		producer.TryPush(m)
		producer.TryPushBatch(m, lengths[:1])
		producer.PushWait(m, time.Second, SpinThenBlock)
		if room, s := producer.TryClaim(4); s == OK {
			copy(room, "room")
			producer.Commit(4)
		}
		consumer.TryRecv(id, out)
		if _, s := consumer.TryView(id); s == OK {
			consumer.ReleaseView(id)
		}
		consumer.RecvBatch(id, buf, lengths)
		consumer.Lag(id)
		producer.ProducerPosition()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round of hot-path calls", allocs)
	}
}
