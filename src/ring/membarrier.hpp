// Asymmetric memory barriers across processes (membarrier(2)).
//
// A Dekker handshake (store my flag, full fence, load yours) needs a full
// fence on both sides. When one side runs on every message (the producer's
// "does anyone sleep?" check) and the other rarely (a waiter going to sleep),
// the fence can move entirely to the rare side: the frequent side keeps only a
// compiler barrier (light_barrier) and the rare side calls heavy_barrier(),
// which makes the kernel run a full barrier on every CPU that is running a
// thread of a registered process. The argument is in docs/memory-ordering.md
// ("Sleeping and waking").
//
// The light side is valid only in a process that registered, so
// register_light_side() reports whether it did; a process that could not
// register fences on its light side instead (BroadcastRing::light_fence_).
#pragma once

namespace ringcast::detail {

// Registers this process for MEMBARRIER_CMD_GLOBAL_EXPEDITED, once per
// process (later calls in the same process return the first answer). False when the kernel lacks
// the command (before 4.16), or a seccomp filter forbids membarrier.
bool register_light_side() noexcept;

// A full memory barrier on every CPU running a thread of a registered process,
// and in the calling thread (MEMBARRIER_CMD_GLOBAL_EXPEDITED). Returns false if
// the kernel refused: the caller cannot rely on it and must not sleep
// unboundedly on the strength of it.
bool heavy_barrier() noexcept;

}  // namespace ringcast::detail
