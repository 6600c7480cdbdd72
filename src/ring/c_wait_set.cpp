// The C ABI's wait sets (include/ringcast/ringcast.h, "wait sets") over
// ringcast::WaitSet; noexcept like c_api.cpp, whose ringcast_ring it reads.
#include <algorithm>
#include <chrono>
#include <limits>
#include <new>
#include <span>

#include "c_ring.hpp"
#include "ringcast/ringcast.h"
#include "ringcast/wait_set.hpp"

struct ringcast_wait_set {
  ringcast::WaitSet set;
};

static_assert(RINGCAST_WAIT_SET_MAX_MEMBERS == ringcast::WaitSet::kMaxMembers);

extern "C" {

ringcast_status ringcast_wait_set_create(ringcast_wait_set** set) noexcept {
  if (set == nullptr) return RINGCAST_INVALID_ARGUMENT;
  try {
    *set = new ringcast_wait_set{};
  } catch (...) {  // std::bad_alloc, from the handle or the set's state
    return RINGCAST_OUT_OF_MEMORY;
  }
  return RINGCAST_OK;
}

void ringcast_wait_set_close(ringcast_wait_set* set) noexcept { delete set; }

ringcast_status ringcast_wait_set_add(ringcast_wait_set* set, ringcast_ring* ring, std::uint32_t id,
                                      std::size_t* member) noexcept {
  if (ring == nullptr) return RINGCAST_INVALID_ARGUMENT;
  auto added = set->set.add(ring->ring, id);
  if (!added) return static_cast<ringcast_status>(added.error().code);
  if (member != nullptr) *member = *added;
  return RINGCAST_OK;
}

ringcast_status ringcast_wait_set_remove(ringcast_wait_set* set, std::size_t member) noexcept {
  return static_cast<ringcast_status>(set->set.remove(member));
}

ringcast_status ringcast_wait_set_wait(ringcast_wait_set* set, std::size_t* ready, std::size_t capacity,
                                       std::size_t* count, std::uint64_t timeout_ns) noexcept {
  if (ready == nullptr || count == nullptr) return RINGCAST_INVALID_ARGUMENT;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const ringcast::WaitSetResult r =
      set->set.wait({ready, capacity}, std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(timeout_ns, kMax))));
  *count = r.count;
  return static_cast<ringcast_status>(r.status);
}

bool ringcast_wait_set_ready(const ringcast_wait_set* set, std::size_t member) noexcept {
  return set->set.ready(member);
}

ringcast_status ringcast_wait_set_notify_fd(ringcast_wait_set* set, int* fd) noexcept {
  if (fd == nullptr) return RINGCAST_INVALID_ARGUMENT;
  auto made = set->set.notify_fd();
  if (!made) return static_cast<ringcast_status>(made.error().code);
  *fd = *made;
  return RINGCAST_OK;
}

void ringcast_wait_set_arm(ringcast_wait_set* set) noexcept { set->set.arm(); }

}  // extern "C"
