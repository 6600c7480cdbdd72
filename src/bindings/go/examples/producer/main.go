// producer publishes -count messages of the example pattern to an existing
// ring, half of them with PushWait (a copy) and half through a claim written
// in place (ClaimWait/Commit), then exits.
//
//	producer -ring /dev/shm/ticks.ring -count 10000
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"ringcast"
	"ringcast/examples/pattern"
)

func main() {
	path := flag.String("ring", "", "ring file (ringcast create)")
	count := flag.Uint64("count", 1000, "messages to publish")
	flag.Parse()
	ring, err := ringcast.Open(*path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
	defer ring.Close()
	if err := ring.ClaimProducer(); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
	for i := uint64(0); i < *count; i++ {
		m := pattern.Message(i)
		var s ringcast.Status
		if i%2 == 0 {
			s = ring.PushWait(m, 10*time.Second, ringcast.SpinThenBlock)
		} else if room, cs := ring.ClaimWait(len(m), 10*time.Second, ringcast.SpinThenBlock); cs == ringcast.OK {
			copy(room, m)
			s = ring.Commit(len(m))
		} else {
			s = cs
		}
		if s != ringcast.OK {
			fmt.Fprintf(os.Stderr, "producer: message %d: %v\n", i, s)
			os.Exit(1)
		}
	}
	fmt.Printf("published %d\n", *count)
}
