#include "doorbell.hpp"

#include <fcntl.h>
#include <linux/limits.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "futex.hpp"

namespace ringcast::detail {
namespace {

// The path of the doorbell `token` beside the ring file `ring_fd`, written to
// `out` (no allocation: the producer calls this in its wake path). false when
// the ring has no directory: an anonymous ring (memfd), a file since unlinked,
// or no /proc.
bool doorbell_path(int ring_fd, std::uint64_t token, char (&out)[PATH_MAX]) noexcept {
  if (ring_fd < 0) return false;
  char link[32];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", ring_fd);
  const ssize_t n = ::readlink(link, out, sizeof out - 1);
  if (n <= 0 || out[0] != '/') return false;
  out[n] = '\0';
  constexpr char kDeleted[] = " (deleted)";
  constexpr std::size_t kDeletedLen = sizeof kDeleted - 1;
  if (static_cast<std::size_t>(n) >= kDeletedLen && std::strcmp(out + n - kDeletedLen, kDeleted) == 0) return false;
  char* slash = std::strrchr(out, '/');
  const std::size_t dir_len = static_cast<std::size_t>(slash - out) + 1;
  const int written = std::snprintf(out + dir_len, sizeof out - dir_len, "%s%016llx", kDoorbellPrefix,
                                    static_cast<unsigned long long>(token));
  return written > 0 && static_cast<std::size_t>(written) < sizeof out - dir_len;
}

std::uint64_t new_token() noexcept {
  std::uint64_t token = 0;
  while (token == 0) {
    if (::getrandom(&token, sizeof token, 0) != static_cast<ssize_t>(sizeof token)) {
      // No entropy source: the pid and the clock still make a collision with
      // a live doorbell unlikely, and O_EXCL refuses one.
      token = (static_cast<std::uint64_t>(::getpid()) << 40) ^ static_cast<std::uint64_t>(::time(nullptr)) ^
              reinterpret_cast<std::uintptr_t>(&token);
    }
  }
  return token;
}

}  // namespace

// --- the producer's side -------------------------------------------------------

DoorbellLink::DoorbellLink(DoorbellLink&& other) noexcept
    : token_(std::exchange(other.token_, 0)), bell_(std::exchange(other.bell_, nullptr)) {}

DoorbellLink& DoorbellLink::operator=(DoorbellLink&& other) noexcept {
  if (this != &other) {
    reset();
    token_ = std::exchange(other.token_, 0);
    bell_ = std::exchange(other.bell_, nullptr);
  }
  return *this;
}

void DoorbellLink::reset() noexcept {
  if (bell_ != nullptr) ::munmap(bell_, layout::kDoorbellBytes);
  bell_ = nullptr;
  token_ = 0;
}

int DoorbellLink::ring(int ring_fd, std::uint64_t token) noexcept {
  if (token != token_) {
    reset();
    token_ = token;
    char path[PATH_MAX];
    if (!doorbell_path(ring_fd, token, path)) return -1;
    // O_NOFOLLOW and the checks below: a consumer names the file, so take
    // nothing but a regular doorbell-sized file with the doorbell's magic.
    const int fd = ::open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    struct stat st {};
    void* map = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == static_cast<off_t>(layout::kDoorbellBytes)) {
      map = ::mmap(nullptr, layout::kDoorbellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    ::close(fd);
    if (map == MAP_FAILED) return -1;
    auto* bell = static_cast<layout::Doorbell*>(map);
    // acquire: pairs with the creator's release store of the magic.
    if (bell->magic.load(std::memory_order_acquire) != kDoorbellMagic) {
      ::munmap(map, layout::kDoorbellBytes);
      return -1;
    }
    bell_ = bell;
  }
  if (bell_ == nullptr) return -1;
  // release: pairs with the WaitSet's acquire load of the word before its
  // handshake; the change itself is what makes its futex wait return (or not
  // begin), the wake what ends a sleep already begun.
  bell_->rings.fetch_add(1, std::memory_order_release);
  return futex_wake(bell_->rings, std::numeric_limits<int>::max(), kFutexAnyBits);
}

// --- the WaitSet's side --------------------------------------------------------

void unlink_doorbell(int ring_fd, std::uint64_t token) noexcept {
  char path[PATH_MAX];
  if (token != 0 && doorbell_path(ring_fd, token, path)) ::unlink(path);
}

std::optional<std::pair<dev_t, ino_t>> DoorbellFile::directory_of(int ring_fd) {
  char path[PATH_MAX];
  if (!doorbell_path(ring_fd, 1, path)) return std::nullopt;
  *std::strrchr(path, '/') = '\0';
  struct stat st {};
  if (::stat(path[0] == '\0' ? "/" : path, &st) != 0) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

std::optional<DoorbellFile> DoorbellFile::create(int ring_fd) {
  const auto dir = directory_of(ring_fd);
  struct stat ring_st {};
  if (!dir || ::fstat(ring_fd, &ring_st) != 0) return std::nullopt;
  const std::uint64_t token = new_token();
  char path[PATH_MAX];
  if (!doorbell_path(ring_fd, token, path)) return std::nullopt;
  // Whoever may write the ring may ring its consumers: the ring file's
  // permission bits (fchmod, as the umask may have cut them at creation).
  const mode_t mode = ring_st.st_mode & 0666;
  const int fd = ::open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return std::nullopt;
  DoorbellFile file;
  file.path_ = path;  // from here on the destructor unlinks it
  void* map = MAP_FAILED;
  if (::fchmod(fd, mode) == 0 && ::ftruncate(fd, static_cast<off_t>(layout::kDoorbellBytes)) == 0) {
    map = ::mmap(nullptr, layout::kDoorbellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (map == MAP_FAILED) return std::nullopt;
  file.bell_ = static_cast<layout::Doorbell*>(map);
  file.token_ = token;
  file.directory_ = *dir;
  // release: last, as a ring's creator stores its magic (a producer that
  // acquire-loads it sees a zeroed doorbell).
  file.bell_->magic.store(kDoorbellMagic, std::memory_order_release);
  return file;
}

DoorbellFile::DoorbellFile(DoorbellFile&& other) noexcept
    : token_(std::exchange(other.token_, 0)),
      directory_(other.directory_),
      path_(std::move(other.path_)),
      bell_(std::exchange(other.bell_, nullptr)) {
  other.path_.clear();
}

DoorbellFile& DoorbellFile::operator=(DoorbellFile&& other) noexcept {
  if (this != &other) {
    close();
    token_ = std::exchange(other.token_, 0);
    directory_ = other.directory_;
    path_ = std::move(other.path_);
    other.path_.clear();
    bell_ = std::exchange(other.bell_, nullptr);
  }
  return *this;
}

DoorbellFile::~DoorbellFile() { close(); }

void DoorbellFile::close() noexcept {
  if (bell_ != nullptr) ::munmap(bell_, layout::kDoorbellBytes);
  if (!path_.empty()) ::unlink(path_.c_str());
  bell_ = nullptr;
  path_.clear();
}

}  // namespace ringcast::detail
