// The C ABI's ring handle (include/ringcast/ringcast.h's opaque
// ringcast_ring), shared by c_api.cpp and c_wait_set.cpp.
#pragma once

#include <utility>

#include "ringcast/broadcast_ring.hpp"

// The C++ ring and the producer's one open claim (ringcast.h allows one per
// handle, as the C++ API does). Declared in this order so that destruction
// aborts the claim before the ring is closed.
struct ringcast_ring {
  explicit ringcast_ring(ringcast::BroadcastRing&& r) noexcept : ring(std::move(r)) {}
  ringcast::BroadcastRing ring;
  ringcast::ProducerClaim claim;
};
