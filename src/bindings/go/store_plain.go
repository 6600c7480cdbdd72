//go:build amd64 && !race

package ringcast

// storeRelaxed is a C++ relaxed store of a word of the mapping that tryPush
// writes between two sequentially consistent stores (native.go, tryPush):
// here a plain MOV. Two facts make it one: the Go compiler threads memory
// through sync/atomic's intrinsics and through plain stores alike, so it
// keeps them in program order (tryPush's comment shows the assembly); and
// amd64 makes stores visible in program order (TSO), so what is ordered in
// the instruction stream is ordered for every reader. The word is naturally
// aligned, so a reader sees all of a store or none of it. A Go consumer in
// this process reads the word with sync/atomic while the producer may write
// it: a race under Go's memory model, whose outcome for a machine word the
// model does define (the load sees some store, whole), and which the seqlock
// check rejects when it matters; the race detector would report it, so a
// -race build stores atomically instead (store_atomic.go).
func storeRelaxed(p *uint64, v uint64) { *p = v }
