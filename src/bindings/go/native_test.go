package ringcast

// The Go hot path (native.go) against the C++ one: the layout it relies on,
// the same results as the C ABI on the same stream, and messages exchanged
// with the C++ tools across processes (RINGCAST_CLI: the `ringcast` binary;
// tests/bindings/exchange_test.py sets it, the tests skip without it).

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"ringcast/examples/pattern"
)

// withoutNative turns the Go path off on r: every call crosses cgo, as
// before native.go. The reference the Go path is compared with.
func (r *Ring) withoutNative() *Ring {
	r.n = native{}
	return r
}

// The offsets native.go reads come from ringcast.h (pinned against
// layout.hpp by c_api.cpp's static_asserts); these are docs/layout.md's
// numbers, so that a change of either is seen here too.
func TestLayoutConstantsAreThoseOfDocsLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"version", layoutVersion, 5},
		{"slot bytes", layoutSlotBytes, 64},
		{"ProducerLine.producer_seq", layoutProducerSeq, 32},
		{"ProducerLine.payload_bytes", layoutPayloadBytes, 48},
		{"TailLine.write_intent", layoutWriteIntent, 64},
		{"data_wait.signal", layoutDataWait, 128},
		{"space_wait.signal", layoutSpaceWait, 192},
		{"consumers", layoutConsumers, 256},
		{"consumer entry bytes", layoutConsumerBytes, 64},
		{"ConsumerEntry.state", layoutConsumerState, 8},
		{"Slot.words", layoutSlotWords, 8},
		{"record bit", layoutRecordBit, 1 << 31},
		{"signal waiting bit", layoutSignalWaiting, 1},
		{"consumer active", layoutConsumerActive, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: ringcast.h says %d, docs/layout.md %d", c.name, c.got, c.want)
		}
	}
	// native.go addresses a slot's words as the 8 words from its version.
	if unsafe.Sizeof([8]uint64{}) != layoutSlotBytes || layoutSlotWords != 8 {
		t.Fatal("a slot is not a version word and seven data words")
	}
}

// The words native.go reads, written by C++ (the Go path off on the
// producer): the header fields where the C ABI's observers find them, and an
// inline slot as docs/layout.md lays it out.
func TestMappingReadsAsTheCAbiReportsIt(t *testing.T) {
	producer, consumer := pair(t)
	producer.withoutNative()
	id, err := consumer.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	n := &consumer.n
	if n.header == nil || n.capacity != 16 || n.mask != 15 || n.lossy {
		t.Fatalf("native view: %+v", *n)
	}
	for i := 0; i < 21; i++ { // past a wrap
		want(t, "TryPush", producer.TryPush([]byte(fmt.Sprintf("message %02d", i))), OK)
		pos := uint64(i)
		if got := *n.word64(layoutProducerSeq); got != pos+1 || got != producer.cProducerPosition() {
			t.Fatalf("producer_seq %d, C ABI %d", got, producer.cProducerPosition())
		}
		s := n.slot(pos)
		text := fmt.Sprintf("message %02d", i)
		if s[0] != 2*pos+2 || uint32(s[1]) != uint32(len(text)) {
			t.Fatalf("slot of %d: version %d, meta %#x", pos, s[0], uint32(s[1]))
		}
		var b [56]byte
		for w := 0; w < 7; w++ {
			binary.LittleEndian.PutUint64(b[8*w:], s[1+w])
		}
		if string(b[4:4+len(text)]) != text {
			t.Fatalf("slot of %d holds %q", pos, b[4:4+len(text)])
		}
		if n.lag(id) != consumer.cLag(id) || n.lag(id) != 1 {
			t.Fatalf("lag %d, C ABI %d", n.lag(id), consumer.cLag(id))
		}
		r := consumer.withoutNative().TryRecv(id, make([]byte, 64))
		consumer.adopt() // the Go path back on
		n = &consumer.n
		if r.Status != OK || *n.cursor(id) != pos+1 {
			t.Fatalf("receive %d: %+v, cursor %d", i, r, *n.cursor(id))
		}
	}
	if *n.word64(layoutPayloadBytes) != 21*10 {
		t.Fatalf("payload_bytes %d", *n.word64(layoutPayloadBytes))
	}
}

// step is one operation of a script run once through the Go path and once
// through cgo alone; every result must be the same.
type step struct {
	push        []byte // push this (nil: receive)
	batch, room int    // receive with RecvBatch: up to batch messages into room bytes (batch 0: TryRecv)
}

func results(t *testing.T, native bool, capacity uint64, options *CreateOptions, script []step) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ring")
	options.Replace = true
	producer, err := Create(path, capacity, options)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	consumer, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	if !native {
		producer.withoutNative()
		consumer.withoutNative()
	}
	id, err := consumer.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	buf := make([]byte, 1024)
	lengths := make([]uint32, 8)
	for _, s := range script {
		if s.push != nil {
			out = append(out, fmt.Sprintf("push %d: %v pos %d", len(s.push), producer.TryPush(s.push),
				producer.ProducerPosition()))
			continue
		}
		if s.batch > 0 {
			b := consumer.RecvBatch(id, buf[:s.room], lengths[:s.batch])
			line := fmt.Sprintf("batch %d into %d: %v count %d missed %d lag %d", s.batch, s.room, b.Status, b.Count,
				b.Missed, consumer.Lag(id))
			used := 0
			for _, n := range lengths[:b.Count] {
				line += fmt.Sprintf(" %q", buf[used:used+int(n)])
				used += int(n)
			}
			if b.Status == BufferTooSmall {
				line += fmt.Sprintf(" needs %d", lengths[0])
			}
			out = append(out, line)
			continue
		}
		r := consumer.TryRecv(id, buf)
		line := fmt.Sprintf("recv: %v length %d missed %d lag %d", r.Status, r.Length, r.Missed, consumer.Lag(id))
		if r.Status == OK {
			line += " " + string(buf[:r.Length])
		}
		out = append(out, line)
	}
	return out
}

func sameResults(t *testing.T, capacity uint64, options CreateOptions, script []step) {
	t.Helper()
	o1, o2 := options, options
	got := results(t, true, capacity, &o1, script)
	ref := results(t, false, capacity, &o2, script)
	for i := range ref {
		if got[i] != ref[i] {
			t.Fatalf("step %d: Go path %q, cgo %q", i, got[i], ref[i])
		}
	}
}

// A script of pushes of sizes from 0 to 125 bytes (one slot and several)
// and receives, with the producer running ahead of the consumer by up to
// `ahead` messages, so that the ring fills and wraps.
func script(count, ahead int) []step {
	var s []step
	pending := 0
	for i := 0; i < count; i++ {
		s = append(s, step{push: pattern.Message(uint64(i))})
		pending++
		for pending > ahead || (i == count-1 && pending > 0) {
			s = append(s, step{})
			pending--
		}
	}
	return append(s, step{}) // and one of nothing
}

func TestGoPathGivesTheResultsOfTheCAbi(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity uint64
		options  CreateOptions
		ahead    int
	}{
		{"InlineOnlyBlockingWraps", 8, CreateOptions{MaxMessage: MaxInlinePayload}, 12},
		{"InlineOnlyNonPowerOfTwoCapacity", 7, CreateOptions{MaxMessage: MaxInlinePayload}, 5},
		{"RecordsBlockingWrapsAndFills", 16, CreateOptions{MaxMessage: 200}, 9},
		{"RecordsNonPowerOfTwoCapacity", 13, CreateOptions{MaxMessage: 120}, 5},
		{"LossyInlineLapsTheConsumer", 8, CreateOptions{Lossy: true, MaxMessage: MaxInlinePayload}, 11},
		{"LossyRecordsLapTheConsumer", 16, CreateOptions{Lossy: true, MaxMessage: 200}, 13},
	} {
		c := c
		t.Run(c.name, func(t *testing.T) {
			var s []step
			if largest := int(c.options.MaxMessage); largest <= MaxInlinePayload {
				for i := 0; i < 300; i++ {
					m := pattern.Message(uint64(i))
					if len(m) > largest {
						m = m[:largest]
					}
					s = append(s, step{push: m})
					if i%c.ahead == c.ahead-1 {
						for k := 0; k < c.ahead; k++ {
							s = append(s, step{})
						}
					}
				}
			} else {
				s = script(300, c.ahead)
			}
			t.Run("TryRecv", func(t *testing.T) { sameResults(t, c.capacity, c.options, s) })
			t.Run("RecvBatch", func(t *testing.T) { sameResults(t, c.capacity, c.options, asBatches(s)) })
		})
	}
}

// Invariant 9 from the reader's side: on a lossy ring of records, a reader
// lapped by a record may find that record's inner bytes in its slot, and
// zero bytes read as a version older than its position ("not yet"): only
// the write intent tells it it was lapped. TryRecv and RecvBatch must then
// report the lap, as the C ABI does, not an empty ring.
func TestLappedReaderFindingZeroRecordBytesReportsTheLap(t *testing.T) {
	s := []step{{push: []byte("first")}, {}} // the reader at position 1
	for i := 1; i < 15; i++ {
		s = append(s, step{push: []byte{byte(i)}})
	}
	// A padding at 15, then the record at 16 to 18 (records start at a
	// multiple of their block, docs/layout.md): slot 1, the reader's, now
	// holds the record's zero payload bytes, version word included.
	s = append(s, step{push: make([]byte, 150)}, step{}, step{}, step{})
	options := CreateOptions{Lossy: true, MaxMessage: 200}
	batches := make([]step, len(s))
	for i, st := range s {
		if st.push == nil {
			st.batch, st.room = 4, 1024 // rounds of 4 (1024 / 200 bytes)
		}
		batches[i] = st
	}
	for _, receive := range []struct {
		name  string
		steps []step
	}{{"TryRecv", s}, {"RecvBatch", batches}} {
		t.Run(receive.name, func(t *testing.T) {
			o := options
			if got := results(t, true, 16, &o, receive.steps)[17]; !strings.Contains(got, "lapped") {
				t.Fatalf("first receive: %q", got)
			}
			sameResults(t, 16, options, receive.steps)
		})
	}
}

// asBatches is script s with its receives made RecvBatch calls of 1 to 7
// messages into 10 to 1024 bytes: rooms for less than one message of the
// largest size (one, as TryRecv), for rounds of one, and for rounds of
// several, which meet records, paddings, laps and empty slots at their
// first position and after it.
func asBatches(s []step) []step {
	rooms := []int{10, 52, 130, 256, 1024}
	out := make([]step, len(s))
	k := 0
	for i, st := range s {
		if st.push == nil {
			st.batch, st.room = 1+k%7, rooms[k%len(rooms)]
			k++
		}
		out[i] = st
	}
	return out
}

// countBatchesInC counts, until the test ends, the RecvBatch calls whose
// rest the Go path hands to C.
func countBatchesInC(t *testing.T) *int {
	inC := new(int)
	testHookBatchInC = func() { *inC++ }
	t.Cleanup(func() { testHookBatchInC = nil })
	return inC
}

// recvAll receives with RecvBatch (up to batch messages into room bytes a
// call) until the ring is empty, and checks every message against
// pattern.Message of the sequence number it starts with: in order from
// first, each byte, each length. It returns the next sequence number.
func recvAll(t *testing.T, r *Ring, id ConsumerID, first uint64, batch, room int, truncate int) uint64 {
	t.Helper()
	buf, lengths := make([]byte, room), make([]uint32, batch)
	next := first
	for {
		b := r.RecvBatch(id, buf, lengths)
		if b.Status == Empty && b.Count == 0 {
			return next
		}
		if b.Status != OK || b.Count == 0 {
			t.Fatalf("batch at %d: %+v", next, b)
		}
		used := 0
		for _, n := range lengths[:b.Count] {
			m := pattern.Message(next)
			if len(m) > truncate {
				m = m[:truncate]
			}
			if got := buf[used : used+int(n)]; !bytes.Equal(got, m) {
				t.Fatalf("message %d: %q, want %q", next, got, m)
			}
			used += int(n)
			next++
		}
	}
}

// Rounds of committed inline messages are the Go path's from start to end:
// no part of those calls goes to C; a round that meets a record goes to C
// from its first message, and the call still gives every message in order.
func TestRecvBatchOfInlineMessagesStaysInGo(t *testing.T) {
	inC := countBatchesInC(t)
	t.Run("InlineOnly", func(t *testing.T) {
		r, id := anonymousWithConsumer(t, 16, &CreateOptions{MaxMessage: MaxInlinePayload})
		*inC = 0
		next := uint64(0)
		for lap := 0; lap < 20; lap++ { // lengths 0 to 52, past many wraps
			for k := 0; k < 13; k++ {
				m := pattern.Message(next + uint64(k))
				m = m[:(int(next)+k)*5%(MaxInlinePayload+1)%(len(m)+1)]
				want(t, "TryPush", r.TryPush(m), OK)
			}
			buf, lengths := make([]byte, 5*MaxInlinePayload), make([]uint32, 64)
			for got := 0; got < 13; {
				b := r.RecvBatch(id, buf, lengths)
				if b.Status != OK || b.Count == 0 {
					t.Fatalf("lap %d: %+v", lap, b)
				}
				used := 0
				for _, n := range lengths[:b.Count] {
					m := pattern.Message(next)
					m = m[:int(next)*5%(MaxInlinePayload+1)%(len(m)+1)]
					if !bytes.Equal(buf[used:used+int(n)], m) {
						t.Fatalf("message %d: %q, want %q", next, buf[used:used+int(n)], m)
					}
					used += int(n)
					next++
					got++
				}
			}
			if b := r.RecvBatch(id, buf, lengths); b.Status != Empty || b.Count != 0 {
				t.Fatalf("batch of nothing: %+v", b)
			}
		}
		if *inC != 0 {
			t.Fatalf("%d calls went on in C", *inC)
		}
	})
	t.Run("RecordInTheSecondRound", func(t *testing.T) {
		r, id := anonymousWithConsumer(t, 16, &CreateOptions{MaxMessage: 200})
		// pattern.Message(i) is inline for i = 0..7 (2 to 51 bytes) and a
		// record for 8 and 9 (58 and 65 bytes).
		for i := uint64(0); i < 10; i++ {
			want(t, "TryPush", r.TryPush(pattern.Message(i)), OK)
		}
		*inC = 0
		// Rounds of 2 (400 bytes / 200): 0-1, 2-3, 4-5 and 6-7 in Go, then
		// 8-9 meets a record and the call goes on in C.
		if next := recvAll(t, r, id, 0, 8, 400, 1<<30); next != 10 {
			t.Fatalf("received up to %d", next)
		}
		if *inC != 1 {
			t.Fatalf("%d calls went on in C, want 1", *inC)
		}
	})
}

// The Go path's receive into a lossy ring that lapped it reports what the
// C++ consumer (the same ring through cgo) reports, and both go on with the
// same messages: 100 messages of 2 to 125 bytes (records too) into 16 slots,
// pushed by a Go producer or by `ringcast pub` in another process, received
// with TryRecv, or with RecvBatch in rounds of 3 (up to 5 messages a call).
func TestLappedGoConsumerReportsWhatTheCppConsumerReports(t *testing.T) {
	for _, c := range []struct{ producerKind, receive string }{
		{"Go", "TryRecv"}, {"RingcastPub", "TryRecv"}, {"Go", "RecvBatch"}, {"RingcastPub", "RecvBatch"},
	} {
		producerKind, receive := c.producerKind, c.receive
		t.Run(c.producerKind+c.receive, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ring")
			creator, err := Create(path, 16, &CreateOptions{Lossy: true, MaxMessage: 200,
				NoProducer: producerKind != "Go"})
			if err != nil {
				t.Fatal(err)
			}
			defer creator.Close()
			goSide, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer goSide.Close()
			cSide, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cSide.Close()
			cSide.withoutNative()
			goID, err := goSide.Register(Latest)
			if err != nil {
				t.Fatal(err)
			}
			cID, err := cSide.Register(Latest)
			if err != nil {
				t.Fatal(err)
			}
			const count = 100
			if producerKind == "Go" {
				for i := 0; i < count; i++ {
					want(t, "TryPush", creator.TryPush(pattern.Message(uint64(i))), OK)
				}
			} else {
				pub := exec.Command(cli(t), "pub", path, "--binary")
				pub.Stdin = bytes.NewReader(frames(count))
				if out, err := pub.CombinedOutput(); err != nil {
					t.Fatalf("ringcast pub: %v: %s", err, out)
				}
			}
			gb, cb := make([]byte, 3*200), make([]byte, 3*200)
			gl, cl := make([]uint32, 5), make([]uint32, 5)
			laps, received, next := 0, 0, -1 // next: the message expected after the lap
			for {
				var g, c BatchResult
				if receive == "RecvBatch" {
					g, c = goSide.RecvBatch(goID, gb, gl), cSide.RecvBatch(cID, cb, cl)
				} else {
					gr, cr := goSide.TryRecv(goID, gb), cSide.TryRecv(cID, cb)
					g, c = BatchResult{gr.Status, 0, gr.Missed}, BatchResult{cr.Status, 0, cr.Missed}
					gl[0], cl[0] = uint32(gr.Length), uint32(cr.Length)
					if gr.Status == OK {
						g.Count, c.Count = 1, 1
					}
				}
				used := 0
				for _, n := range gl[:g.Count] {
					used += int(n)
				}
				if g != c || fmt.Sprint(gl[:g.Count]) != fmt.Sprint(cl[:c.Count]) || !bytes.Equal(gb[:used], cb[:used]) {
					t.Fatalf("Go %+v %v %q, C++ %+v %v %q", g, gl[:g.Count], gb[:used], c, cl[:c.Count], cb[:used])
				}
				at := 0
				for _, n := range gl[:g.Count] { // messages, before a lap's report
					m := gb[at : at+int(n)]
					at += int(n)
					var seq int
					if _, err := fmt.Sscan(string(m), &seq); err != nil || (next >= 0 && seq != next) ||
						!bytes.Equal(m, pattern.Message(uint64(seq))) {
						t.Fatalf("message %.20q after %d, want message %d", m, received, next)
					}
					next = seq + 1
					received++
				}
				if g.Status == Lapped {
					laps++
					next = -1 // the next message is the oldest intact one
				} else if g.Status == Empty {
					break
				} else if g.Status != OK {
					t.Fatalf("receive: %+v", g)
				}
			}
			if laps != 1 || received == 0 || next != count {
				t.Fatalf("%d laps and %d messages after %d pushes into 16 slots", laps, received, count)
			}
		})
	}
}

func cli(t *testing.T) string {
	t.Helper()
	path := os.Getenv("RINGCAST_CLI")
	if path == "" {
		t.Skip("RINGCAST_CLI (the ringcast tool) not set: run through tests/bindings/exchange_test.py")
	}
	return path
}

// frames are `ringcast pub --binary`'s input: a 4-byte length, then the bytes.
func frames(count int) []byte {
	return framesOf(count, func(i int) []byte { return pattern.Message(uint64(i)) })
}

// framesOf is frames of message(0), ..., message(count-1).
func framesOf(count int, message func(int) []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < count; i++ {
		m := message(i)
		var l [4]byte
		binary.LittleEndian.PutUint32(l[:], uint32(len(m)))
		b.Write(l[:])
		b.Write(m)
	}
	return b.Bytes()
}

// A Go producer (inline messages through the Go path, records through
// cgo) to `ringcast sub`, across processes: 20000 messages of 2 to 125
// bytes through 64 slots, every one checked as sub prints it.
func TestGoProducerToRingcastSub(t *testing.T) {
	tool := cli(t)
	const count = 20000
	path := filepath.Join(t.TempDir(), "ring")
	producer, err := Create(path, 64, &CreateOptions{MaxMessage: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	sub := exec.Command(tool, "sub", path, "--binary", "--count", fmt.Sprint(count))
	stderr, err := sub.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	defer sub.Wait()
	defer sub.Process.Kill()
	errs := bufio.NewReader(stderr)
	if line, err := errs.ReadString('\n'); err != nil || !strings.Contains(line, "subscribed") {
		t.Fatalf("ringcast sub: %q %v", line, err)
	}
	go io.Copy(io.Discard, errs)
	pushed := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for i := 0; i < count; {
			switch s := producer.TryPush(pattern.Message(uint64(i))); s {
			case OK:
				i++
			case Full:
				if time.Now().After(deadline) {
					pushed <- fmt.Errorf("message %d: still full after 60 s", i)
					return
				}
				runtime.Gosched()
			default:
				pushed <- fmt.Errorf("message %d: %v", i, s)
				return
			}
		}
		pushed <- nil
	}()
	in := bufio.NewReader(stdout)
	for i := 0; i < count; i++ {
		var l [4]byte
		if _, err := io.ReadFull(in, l[:]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		got := make([]byte, binary.LittleEndian.Uint32(l[:]))
		if _, err := io.ReadFull(in, got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m := pattern.Message(uint64(i)); !bytes.Equal(got, m) {
			t.Fatalf("message %d: %d bytes %.20q, want %d bytes %.20q", i, len(got), got, len(m), m)
		}
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
}

// `ringcast pub` (C++) pushing while a Go consumer reads through the Go
// path, across processes: every message checked, in order, none missed.
// The consumer receives with TryRecv, or with RecvBatch (rounds of 4, up to
// 16 messages a call) from a ring of records or of inline messages only
// (the stream cut to 52 bytes: no records).
func TestRingcastPubToGoConsumerWhilePushing(t *testing.T) {
	tool := cli(t)
	const count = 20000
	for _, c := range []struct {
		name    string
		largest int
		batch   bool
	}{{"TryRecv", 200, false}, {"RecvBatch", 200, true}, {"RecvBatchInline", MaxInlinePayload, true}} {
		c := c
		t.Run(c.name, func(t *testing.T) {
			message := func(i int) []byte {
				m := pattern.Message(uint64(i))
				return m[:min(len(m), c.largest)]
			}
			path := filepath.Join(t.TempDir(), "ring")
			creator, err := Create(path, 64, &CreateOptions{MaxMessage: uint64(c.largest), NoProducer: true})
			if err != nil {
				t.Fatal(err)
			}
			defer creator.Close()
			id, err := creator.Register(Latest)
			if err != nil {
				t.Fatal(err)
			}
			pub := exec.Command(tool, "pub", path, "--binary")
			pub.Stdin = bytes.NewReader(framesOf(count, message))
			var out bytes.Buffer
			pub.Stdout, pub.Stderr = &out, &out
			if err := pub.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := pub.Wait(); err != nil {
					t.Errorf("ringcast pub: %v: %s", err, out.String())
				}
			}()
			buf, lengths := make([]byte, 4*c.largest), make([]uint32, 16)
			deadline := time.Now().Add(60 * time.Second)
			for i := 0; i < count; {
				var r BatchResult
				if c.batch {
					r = creator.RecvBatch(id, buf, lengths)
				} else if one := creator.TryRecv(id, buf); one.Status == OK {
					r, lengths[0] = BatchResult{Status: OK, Count: 1}, uint32(one.Length)
				} else {
					r = BatchResult{Status: one.Status, Missed: one.Missed}
				}
				at := 0
				for _, n := range lengths[:r.Count] {
					if m := message(i); !bytes.Equal(buf[at:at+int(n)], m) {
						t.Fatalf("message %d: %.20q, want %.20q", i, buf[at:at+int(n)], m)
					}
					at += int(n)
					i++
				}
				switch r.Status {
				case OK:
				case Empty, Stalled: // Stalled: pub descheduled mid-write; retry
					if time.Now().After(deadline) {
						t.Fatalf("message %d: %v for 60 s (pub: %s)", i, r.Status, out.String())
					}
					runtime.Gosched()
				default:
					t.Fatalf("message %d: %+v", i, r)
				}
			}
		})
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// A Go producer goroutine and Go consumer goroutines on one ring, both
// sides on the Go path, for `go test -race`: every message checked. One
// consumer receives with TryRecv, one with RecvBatch (up to 4 a call), and
// one with RecvBatch through C (the C++ reader of the Go producer's plain
// word stores).
func TestGoProducerAndConsumersConcurrently(t *testing.T) {
	for _, lossy := range []bool{false, true} {
		t.Run(fmt.Sprintf("Lossy%v", lossy), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ring")
			producer, err := Create(path, 8, &CreateOptions{Lossy: lossy, MaxMessage: MaxInlinePayload})
			if err != nil {
				t.Fatal(err)
			}
			defer producer.Close()
			const count, readers = 50000, 3
			var wg sync.WaitGroup
			errs := make(chan error, readers)
			ready := make(chan struct{}, readers)
			for k := 0; k < readers; k++ {
				consumer, err := Open(path, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer consumer.Close()
				id, err := consumer.Register(Latest)
				if err != nil {
					t.Fatal(err)
				}
				batch := k >= 1
				if k == 2 {
					consumer.withoutNative()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					ready <- struct{}{}
					buf := make([]byte, 4*MaxInlinePayload)
					lengths := make([]uint32, 4)
					next := uint64(0) // the sequence expected next
					deadline := time.Now().Add(60 * time.Second)
					for next < count {
						var r BatchResult
						if batch {
							r = consumer.RecvBatch(id, buf, lengths)
						} else if one := consumer.TryRecv(id, buf); one.Status == OK {
							r, lengths[0] = BatchResult{Status: OK, Count: 1}, uint32(one.Length)
						} else {
							r = BatchResult{Status: one.Status, Missed: one.Missed}
						}
						for m := 0; m < r.Count; m++ { // a batch's messages, back to back
							msg := buf[m*MaxInlinePayload:]
							seq := binary.LittleEndian.Uint64(msg)
							if seq != next || lengths[m] != MaxInlinePayload {
								errs <- fmt.Errorf("got %d (%d bytes), want %d", seq, lengths[m], next)
								return
							}
							for j := 8; j < MaxInlinePayload; j++ { // every word of it
								if msg[j] != byte(seq+uint64(j)) {
									errs <- fmt.Errorf("message %d: byte %d torn", seq, j)
									return
								}
							}
							next++
						}
						switch r.Status {
						case OK:
						case Lapped: // after a batch's messages, if any
							if !lossy {
								errs <- fmt.Errorf("lapped on a blocking ring at %d", next)
								return
							}
							next += r.Missed
						case Empty, Stalled:
							// Stalled: the producer goroutine was descheduled
							// (or preempted) between a slot's odd and even
							// version for longer than the reader's spin; the
							// slot is whole once it runs again.
							if time.Now().After(deadline) {
								errs <- fmt.Errorf("stuck at %d (%v)", next, r.Status)
								return
							}
							runtime.Gosched()
						default:
							errs <- fmt.Errorf("at %d: %+v", next, r)
							return
						}
					}
				}()
			}
			for k := 0; k < readers; k++ {
				<-ready
			}
			m := make([]byte, MaxInlinePayload)
			deadline := time.Now().Add(60 * time.Second)
			for i := uint64(0); i < count && !t.Failed(); {
				binary.LittleEndian.PutUint64(m, i)
				for j := 8; j < MaxInlinePayload; j++ {
					m[j] = byte(i + uint64(j))
				}
				switch s := producer.TryPush(m); s {
				case OK:
					i++
				case Full:
					if time.Now().After(deadline) {
						t.Errorf("push %d: still full after 60 s", i)
					}
					runtime.Gosched()
				default:
					t.Errorf("push %d: %v", i, s)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// A producer asleep in PushWait for room is woken by a RecvBatch that the Go
// path runs (its cursor store, then the check of space_wait), not by its
// timeout: a missed wake-up would hold it for the whole 20 s.
func TestRecvBatchWakesAProducerWaitingForRoom(t *testing.T) {
	inC := countBatchesInC(t)
	producer, consumer := pair(t)
	id, err := consumer.Register(Latest)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		want(t, "TryPush", producer.TryPush([]byte{byte(i)}), OK)
	}
	want(t, "TryPush into a full ring", producer.TryPush([]byte{16}), Full)
	pushed := make(chan Status, 1)
	go func() { pushed <- producer.PushWait([]byte{16}, 20*time.Second, Block) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		st, err := consumer.Status()
		if err != nil {
			t.Fatal(err)
		}
		if st.ProducerSleeping {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the producer did not go to sleep")
		}
	}
	woken := time.Now()
	buf, lengths := make([]byte, 4*200), make([]uint32, 4)
	if b := consumer.RecvBatch(id, buf, lengths); b.Status != OK || b.Count != 4 || buf[3] != 3 {
		t.Fatalf("RecvBatch: %+v", b)
	}
	select {
	case s := <-pushed:
		want(t, "PushWait", s, OK)
	case <-time.After(5 * time.Second):
		<-pushed // its timeout, before the cleanup closes the ring under it
		t.Fatal("the producer still slept 5 s after the receive")
	}
	if *inC != 0 {
		t.Fatalf("%d calls went on in C", *inC)
	}
	t.Logf("woken after %v", time.Since(woken))
}
