// open() on arbitrary file bytes, then every operation a consumer or an
// observer would make. Whatever the bytes, the result is an error code or a
// working handle: never a crash, a hang or an out-of-bounds access.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>

#include "ringcast/broadcast_ring.hpp"

using namespace ringcast;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/dev/shm/ringcast-fuzz-open-" + std::to_string(::getpid());
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  if (size > 0 && ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    ::close(fd);
    return 0;
  }
  ::close(fd);
  auto ring = BroadcastRing::open(path);
  if (ring) {
    (void)ring->status();
    (void)ring->is_fully_drained();
    (void)ring->active_consumer_count();
    for (ConsumerId id = 0; id <= kMaxConsumers; ++id) (void)ring->lag(id);
    if (auto id = ring->register_consumer()) {
      std::array<std::byte, kMaxPayload> buf{};
      for (int i = 0; i < 4; ++i) (void)ring->try_recv(*id, buf);
      (void)ring->drain(*id, [](std::span<const std::byte>) {}, 8);
    }
    (void)ring->reap_dead_consumers();
    std::array<std::byte, 8> msg{};
    for (int i = 0; i < 4; ++i) (void)ring->try_push(msg);
  }
  ::unlink(path.c_str());
  return 0;
}
