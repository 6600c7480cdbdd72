// consumer registers on an existing ring, prints "ready", then receives
// -count messages in batches (RecvBatch, sleeping in RecvWait when the ring
// is empty or its next message is still being written) and checks each
// against the example pattern: its sequence number and every byte. Exits 1
// on the first wrong, missing or lapped message.
//
//	consumer -ring /dev/shm/ticks.ring -count 10000
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"time"

	"ringcast"
	"ringcast/examples/pattern"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "consumer: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	path := flag.String("ring", "", "ring file (ringcast create)")
	count := flag.Uint64("count", 1000, "messages to receive")
	flag.Parse()
	ring, err := ringcast.Open(*path, nil)
	if err != nil {
		fail("%v", err)
	}
	defer ring.Close()
	id, err := ring.Register(ringcast.Latest)
	if err != nil {
		fail("%v", err)
	}
	fmt.Println("ready")

	buf := make([]byte, 64*ring.MaxMessage())
	lengths := make([]uint32, 64)
	next := uint64(0)
	check := func(m []byte) {
		if want := pattern.Message(next); !bytes.Equal(m, want) {
			fail("message %d: got %q, want %q", next, m, want)
		}
		next++
	}
	for next < *count {
		b := ring.RecvBatch(id, buf, lengths[:min(uint64(len(lengths)), *count-next)])
		switch b.Status {
		case ringcast.OK:
			at := 0
			for _, n := range lengths[:b.Count] {
				check(buf[at : at+int(n)])
				at += int(n)
			}
		case ringcast.Empty, ringcast.Stalled:
			// Stalled: the producer is between the two stores of a message
			// (preempted mid-write, or a busy host); it wakes sleepers when it
			// commits, as for an empty ring.
			r := ring.RecvWait(id, buf, 10*time.Second, ringcast.SpinThenBlock)
			if r.Status != ringcast.OK {
				fail("waiting for message %d: %v", next, r.Status)
			}
			check(buf[:r.Length])
		default:
			fail("receiving message %d: %v (missed %d)", next, b.Status, b.Missed)
		}
	}
	fmt.Printf("received %d\n", next)
}

func min(a, b uint64) uint64 {
	if a < b {
		return a
	}
	return b
}
