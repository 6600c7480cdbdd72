//go:build !amd64 || race

package ringcast

import "sync/atomic"

// storeRelaxed is a C++ relaxed store of a word of the mapping (native.go,
// tryPush): sequentially consistent here, which is stronger. Plain stores
// (store_plain.go) are kept to amd64, whose stores become visible in program
// order; on arm64 a plain store after the odd version's store may become
// visible before it (Go's atomic.StoreUint64 is STLR, which orders earlier
// accesses only, and even a swap is not enough on ARMv8.0: its LDAXR/STLXR
// loop orders later accesses after its load, not after its store), so every
// word stays a release store (STLR), as before. Under the race detector the
// plain stores would be reported as racing with a Go consumer's loads.
func storeRelaxed(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
