// A log of lines on stderr that a flood cannot turn into a flood of lines: at
// most kBurst lines a second, each "ringcast broker: <topic>: <line>"; the
// lines dropped are counted and said on the next line written. For events an
// outsider can cause at will (bad TLS handshakes, failed authentications).
//
// Thread safety: write() may be called from any thread. Its three fields are
// relaxed atomics: a burst a line or two over the limit does no harm.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace ringcast::broker {

class RateLimitedLog {
 public:
  static constexpr std::uint32_t kBurst = 20;

  // `topic` must outlive the log (a literal).
  explicit RateLimitedLog(std::string_view topic) noexcept : topic_(topic) {}

  void write(std::string_view line) noexcept;

 private:
  const std::string_view topic_;
  // The second the lines are counted in and the lines written in it.
  std::atomic<std::int64_t> second_{0};
  std::atomic<std::uint32_t> lines_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace ringcast::broker
