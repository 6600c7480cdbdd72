// Direct access to a ring file's header and slots, bypassing BroadcastRing,
// for the tests that leave them as a producer killed at a chosen instruction
// would (half-written, or committed but never published), or as a consumer
// that died inside a WaitSet would (its doorbell).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "ringcast/layout.hpp"

namespace ringcast::test {

// A second read-write mapping of a ring file's slot area. Invalid (ok() false)
// if the file cannot be opened or mapped.
class RawSlots {
 public:
  RawSlots(const std::string& path, std::uint64_t capacity) : capacity_(capacity), bytes_(layout::file_size(capacity)) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return;
    void* base = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the file
    if (base != MAP_FAILED) base_ = static_cast<std::byte*>(base);
  }
  RawSlots(const RawSlots&) = delete;
  RawSlots& operator=(const RawSlots&) = delete;
  ~RawSlots() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  [[nodiscard]] bool ok() const { return base_ != nullptr; }
  // The ring file's header (the slots' mapping starts at the file's offset 0).
  [[nodiscard]] layout::RingHeader& header() const { return *reinterpret_cast<layout::RingHeader*>(base_); }

  [[nodiscard]] layout::Slot& slot(std::uint64_t seq) const {
    return reinterpret_cast<layout::Slot*>(base_ + layout::kHeaderBytes)[seq % capacity_];
  }
  // What write_slot's first store leaves: the odd version of `seq` and a
  // garbage first word.
  void begin_write(std::uint64_t seq) const {
    layout::Slot& s = slot(seq);
    s.version.store(2 * seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.words[0].store(0xDEADBEEFDEADBEEF, std::memory_order_relaxed);
  }
  // Fills the words of `seq` with `payload` and commits the version (release),
  // as write_slot does after begin_write. Does not publish producer_seq.
  void commit(std::uint64_t seq, std::span<const std::byte, kMaxPayload> payload) const {
    layout::Slot& s = slot(seq);
    std::uint64_t words[7] = {};
    std::uint32_t head = 0;
    std::memcpy(&head, payload.data(), 4);
    words[0] = kMaxPayload | (std::uint64_t{head} << 32);
    for (std::size_t i = 0; i < 6; ++i) std::memcpy(&words[i + 1], payload.data() + 4 + 8 * i, 8);
    for (std::size_t i = 0; i < 7; ++i) s.words[i].store(words[i], std::memory_order_release);
    s.version.store(2 * seq + 2, std::memory_order_release);
  }

 private:
  std::uint64_t capacity_;
  std::size_t bytes_;
  std::byte* base_ = nullptr;
};

}  // namespace ringcast::test
