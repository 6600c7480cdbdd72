#include "memcpy_bandwidth.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "workload.hpp"

namespace ringcast::bench {
namespace {

// Larger than the last-level cache of any machine this runs on (32 MiB on
// the one docs/benchmarks.md describes): copies through it stream from DRAM.
constexpr std::size_t kFarBytes = std::size_t{256} << 20;

// An anonymous mapping, pre-faulted so that page faults stay out of the figures.
class Arena {
 public:
  explicit Arena(std::size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of the memcpy arena failed");
    base_ = static_cast<std::byte*>(p);
    std::memset(base_, 0x5A, bytes);
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { ::munmap(base_, bytes_); }
  [[nodiscard]] std::byte* data() const noexcept { return base_; }

 private:
  std::size_t bytes_;
  std::byte* base_ = nullptr;
};

// Keeps the compiler from dropping or merging copies whose result nobody reads.
inline void clobber(const void* p) noexcept { asm volatile("" : : "r"(p) : "memory"); }

// Copies `size` bytes from src + at to dst + at, at = next_offset() before
// each copy, until `seconds` have passed; returns 1e9 bytes per second.
template <class Offset>
double copy_rate(std::byte* dst, const std::byte* src, std::size_t size, double seconds, Offset next_offset) {
  const auto budget = static_cast<std::uint64_t>(seconds * 1e9);
  // Batches of about 1 MiB between clock reads (at least one copy).
  const std::size_t batch = std::max<std::size_t>(1, (std::size_t{1} << 20) / size);
  std::uint64_t copies = 0;
  const std::uint64_t start = monotonic_ns();
  std::uint64_t now = start;
  do {
    for (std::size_t k = 0; k < batch; ++k, ++copies) {
      const std::size_t at = next_offset();
      std::memcpy(dst + at, src + at, size);
      clobber(dst + at);
    }
    now = monotonic_ns();
  } while (now - start < budget);
  return static_cast<double>(copies) * static_cast<double>(size) / static_cast<double>(now - start);
}

}  // namespace

CopyBandwidth measure_memcpy(std::size_t size, std::size_t ring_bytes, double seconds) {
  static Arena src(kFarBytes);
  static Arena dst(kFarBytes);
  CopyBandwidth bw;
  bw.size = size;
  bw.ring_bytes = std::clamp(ring_bytes, size, kFarBytes);
  bw.far_bytes = kFarBytes;
  bw.hot_gbps = copy_rate(dst.data(), src.data(), size, seconds, [] { return std::size_t{0}; });
  // Consecutive copies at consecutive cache-line-aligned offsets, wrapping
  // around the first `span` bytes: each touches lines last used a span ago.
  auto walking = [&](std::size_t span) {
    const std::size_t stride = (size + 63) / 64 * 64;
    const std::size_t last = span >= stride ? span - stride : 0;
    return copy_rate(dst.data(), src.data(), size, seconds, [at = last, stride, last]() mutable {
      at = at + stride > last ? 0 : at + stride;
      return at;
    });
  };
  bw.ring_gbps = walking(bw.ring_bytes);
  bw.far_gbps = walking(kFarBytes);
  return bw;
}

}  // namespace ringcast::bench
