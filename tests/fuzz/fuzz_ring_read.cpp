// A hostile co-tenant: a valid ring whose header and slots the fuzzer rewrites
// between calls (as any process with write access to the file could), while
// this handle keeps producing, consuming and observing. The handle must never
// crash, hang or touch memory outside its mapping.
//
// Input: byte 0 picks the capacity (2..33; rings of 4 slots or more can hold
// records, so the header fields, record headers, paddings and the write
// intent are all in reach); then records of
// [op][offset lo][offset hi][len][bytes...]: op selects the next API call;
// the bytes are written into the file at offset (mod file size).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>

#include "ringcast/broadcast_ring.hpp"

using namespace ringcast;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static const std::string path = "/dev/shm/ringcast-fuzz-read-" + std::to_string(::getpid());
  const std::uint64_t capacity = 2 + data[0] % 32;
  auto ring = BroadcastRing::create(path, capacity, {.replace = true, .lossy = (data[0] & 0x80) != 0});
  if (!ring) return 0;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  // The handle and fd keep the file; the name goes at once, so a fuzzer that
  // crashes or is stopped leaves nothing in /dev/shm.
  ::unlink(path.c_str());
  if (fd < 0) return 0;
  const std::size_t file_bytes = layout::file_size(capacity);
  std::array<ConsumerId, 2> ids{};
  for (auto& id : ids) id = ring->register_consumer().value_or(0);
  std::array<std::byte, 1024> buf{};

  std::size_t pos = 1;
  while (pos + 4 <= size) {
    const std::uint8_t op = data[pos];
    const std::size_t offset = (data[pos + 1] | (std::size_t{data[pos + 2]} << 8)) % file_bytes;
    std::size_t len = data[pos + 3] % 16;
    pos += 4;
    if (len > size - pos) len = size - pos;
    if (len > file_bytes - offset) len = file_bytes - offset;
    if (len > 0 && ::pwrite(fd, data + pos, len, static_cast<off_t>(offset)) < 0) break;
    pos += len;
    switch (op % 10) {
      case 0:
        (void)ring->try_push(std::span<const std::byte>(buf.data(), (op * 7U) % (ring->max_message() + 2)));
        break;
      case 1:
        (void)ring->try_recv(ids[0], buf);
        break;
      case 2:
        (void)ring->try_recv(ids[1], std::span<std::byte>(buf.data(), op % 64));
        break;
      case 3:
        (void)ring->drain(
            ids[op & 1], [](std::span<const std::byte>) {}, op);
        break;
      case 4:
        (void)ring->lag(op % (kMaxConsumers + 2));
        (void)ring->is_fully_drained();
        break;
      case 5:
        (void)ring->status();
        break;
      case 6:
        (void)ring->reap_dead_consumers();
        break;
      case 7:
        (void)ring->unregister_consumer(ids[0]);
        ids[0] = ring->register_consumer().value_or(0);
        break;
      case 8:
        if (const MessageView v = ring->try_view(ids[op & 1])) {
          volatile std::byte sink{};
          for (std::byte b : v.data) sink = b;  // every byte of a view must be readable
          (void)ring->release_view(ids[op & 1]);
        }
        break;
      case 9:
        if (ProducerClaim claim = ring->try_claim((op * 5U) % (ring->max_message() + 1))) {
          if (op & 1) claim.commit(op % 64);
        }
        break;
    }
  }
  ::close(fd);
  return 0;
}
