#include "ofd_lock.hpp"

#include <fcntl.h>

#include <cerrno>

namespace ringcast::detail {
namespace {

struct flock one_byte(short type, off_t offset) noexcept {
  struct flock lock {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = offset;
  lock.l_len = 1;
  lock.l_pid = 0;  // required to be 0 for OFD locks
  return lock;
}

}  // namespace

int try_lock(int fd, off_t offset) noexcept {
  struct flock lock = one_byte(F_WRLCK, offset);
  while (::fcntl(fd, F_OFD_SETLK, &lock) != 0) {
    if (errno == EINTR) continue;
    return errno == EACCES ? EAGAIN : errno;
  }
  return 0;
}

void unlock(int fd, off_t offset) noexcept {
  struct flock lock = one_byte(F_UNLCK, offset);
  while (::fcntl(fd, F_OFD_SETLK, &lock) != 0 && errno == EINTR) {
  }
}

bool held_by_other(int fd, off_t offset) noexcept {
  struct flock lock = one_byte(F_WRLCK, offset);
  while (::fcntl(fd, F_OFD_GETLK, &lock) != 0) {
    if (errno != EINTR) return false;
  }
  return lock.l_type != F_UNLCK;
}

}  // namespace ringcast::detail
