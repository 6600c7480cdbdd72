#include "top/discovery.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "ringcast/layout.hpp"

namespace ringcast::top {

bool is_ring_file(const std::string& path) noexcept {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  // O_NOFOLLOW: discovery reports files, not links to them.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  bool ring = false;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) >= layout::kHeaderBytes) {
    // magic (8 bytes) then layout_version (4 bytes), little-endian like the
    // mapping itself: the ring is only ever shared between processes of one host.
    unsigned char head[12];
    ssize_t got = 0;
    do {
      got = ::pread(fd, head, sizeof head, 0);
    } while (got < 0 && errno == EINTR);
    if (got == static_cast<ssize_t>(sizeof head)) {
      std::uint64_t magic = 0;
      std::uint32_t version = 0;
      std::memcpy(&magic, head, sizeof magic);
      std::memcpy(&version, head + sizeof magic, sizeof version);
      ring = magic == kMagic && version == kLayoutVersion;
    }
  }
  ::close(fd);
  return ring;
}

std::vector<std::string> discover_rings(const std::string& dir) {
  std::vector<std::string> found;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return found;
  const std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  while (const dirent* e = ::readdir(d)) {
    // DT_UNKNOWN: some file systems do not fill d_type; is_ring_file checks.
    if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN) continue;
    std::string path = prefix + e->d_name;
    if (is_ring_file(path)) found.push_back(std::move(path));
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace ringcast::top
