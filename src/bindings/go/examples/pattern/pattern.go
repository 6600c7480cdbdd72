// Package pattern is the message stream the examples exchange with the C++
// tools and the Rust examples (tests/bindings/exchange_test.py checks the
// same): message i is "<i> " followed by i*7 % 120 copies of the letter
// 'a' + i % 26, so lengths run from 2 to 125 bytes, above and below the 52
// that fit one slot, and every byte depends on i.
package pattern

import (
	"bytes"
	"strconv"
)

// Message returns message i.
func Message(i uint64) []byte {
	m := strconv.AppendUint(nil, i, 10)
	m = append(m, ' ')
	return append(m, bytes.Repeat([]byte{byte('a' + i%26)}, int(i*7%120))...)
}
