// A WaitSet's doorbell (docs/layout.md, "Doorbell"): one futex word, in a
// small file of its own beside the rings, that the producer of every member
// ring rings when it wakes that ring's sleepers. A WaitSet over N rings then
// sleeps on one word instead of N: futex_waitv costs a page lookup and a
// hash-bucket lock per word (220-340 ns each on the benchmarks' VM), paid on
// every sleep.
//
// Both sides name the file from the ring file's own descriptor: its directory
// (read back through /proc/self/fd, so each process finds it under its own
// mount namespace's path, as containers sharing a bind-mounted directory do)
// and the token. A ring without a directory (anonymous, unlinked, /proc not
// mounted) has no doorbell, and its WaitSet members sleep on data_wait as
// before.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "ringcast/detail/broadcast_ring_state.hpp"
#include "ringcast/layout.hpp"

namespace ringcast::detail {

// The producer's side is DoorbellLink (ringcast/detail/broadcast_ring_state.hpp).

// Unlinks the doorbell `token` beside the ring file `ring_fd`, left behind by
// a WaitSet whose process died (its consumer's entry is being reaped or
// taken over). No allocation; nothing if there is none.
void unlink_doorbell(int ring_fd, std::uint64_t token) noexcept;

// The WaitSet's side: a doorbell file it created, unlinked and unmapped when
// destroyed. One per directory its members' rings are in.
class DoorbellFile {
 public:
  // Creates a doorbell beside the ring file `ring_fd`, with the ring file's
  // permissions. nullopt when the ring has no directory or the file cannot
  // be made: the members then sleep on their rings' lines.
  static std::optional<DoorbellFile> create(int ring_fd);
  // The directory of the ring file `ring_fd`, as (device, inode), to tell
  // whether a doorbell already made serves it; nullopt as for create().
  static std::optional<std::pair<dev_t, ino_t>> directory_of(int ring_fd);

  DoorbellFile(DoorbellFile&& other) noexcept;
  DoorbellFile& operator=(DoorbellFile&& other) noexcept;
  DoorbellFile(const DoorbellFile&) = delete;
  DoorbellFile& operator=(const DoorbellFile&) = delete;
  ~DoorbellFile();

  [[nodiscard]] std::uint64_t token() const noexcept { return token_; }
  [[nodiscard]] std::pair<dev_t, ino_t> directory() const noexcept { return directory_; }
  [[nodiscard]] std::atomic<std::uint32_t>& word() const noexcept { return bell_->rings; }

 private:
  DoorbellFile() = default;
  void close() noexcept;
  std::uint64_t token_ = 0;
  std::pair<dev_t, ino_t> directory_{};
  std::string path_;
  layout::Doorbell* bell_ = nullptr;
};

}  // namespace ringcast::detail
