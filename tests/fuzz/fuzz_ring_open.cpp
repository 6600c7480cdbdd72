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
  const bool written = size == 0 || ::write(fd, data, size) == static_cast<ssize_t>(size);
  ::close(fd);
  // The handle keeps its descriptor and mapping; the name goes at once, so a
  // fuzzer that crashes or is stopped leaves nothing in /dev/shm.
  auto ring = BroadcastRing::open(path);
  ::unlink(path.c_str());
  if (ring && written) {
    (void)ring->status();
    (void)ring->is_fully_drained();
    (void)ring->active_consumer_count();
    for (ConsumerId id = 0; id <= kMaxConsumers; ++id) (void)ring->lag(id);
    if (auto id = ring->register_consumer()) {
      std::array<std::byte, 1024> buf{};
      for (int i = 0; i < 4; ++i) (void)ring->try_recv(*id, buf);
      (void)ring->drain(
          *id, [](std::span<const std::byte>) {}, 8);
      for (int i = 0; i < 4; ++i) {
        if (ring->try_view(*id)) (void)ring->release_view(*id);
      }
    }
    (void)ring->reap_dead_consumers();
    std::array<std::byte, 1024> msg{};
    for (std::size_t n : {8U, 60U, 1000U}) (void)ring->try_push(std::span<const std::byte>(msg.data(), n));
    if (ProducerClaim claim = ring->try_claim(200)) claim.commit(100);
  }
  return 0;
}
