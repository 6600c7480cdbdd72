// This machine's single-core memcpy bandwidth per message size, measured in
// the same run as the transports: the yardstick for a copying transport,
// which moves every byte at least once (ringcast's copying API: twice, once
// on each side, on two cores in parallel).
#pragma once

#include <cstddef>

namespace ringcast::bench {

struct CopyBandwidth {
  std::size_t size = 0;
  double hot_gbps = 0;   // the same two buffers over and over: in L1/L2 up to the L2's size
  double ring_gbps = 0;  // walking through two buffers of ring_bytes (what a transport holds)
  double far_gbps = 0;   // walking through two buffers of far_bytes (> any cache: DRAM)
  std::size_t ring_bytes = 0;
  std::size_t far_bytes = 0;
};

// memcpy of `size` bytes, one thread, for about `seconds` per figure, from
// and to buffers of `ring_bytes` and of 256 MiB. GB/s are 1e9 bytes copied
// (read once, written once) per second.
[[nodiscard]] CopyBandwidth measure_memcpy(std::size_t size, std::size_t ring_bytes, double seconds);

}  // namespace ringcast::bench
