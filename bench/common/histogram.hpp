// LatencyHistogram: a fixed-size log-linear histogram of nanosecond values
// (HdrHistogram's bucketing with 64 linear sub-buckets per power of two, so
// any recorded value is reported within 1/64 = 1.6 % above its true value).
// Recording is a count increment; no allocation. Plain data: it is copied
// through a pipe from a consumer process to the harness as raw bytes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace ringcast::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;  // 64 sub-buckets per octave
  static constexpr std::uint64_t kSub = 1U << kSubBits;
  static constexpr int kMaxBit = 40;  // values up to 2^40 ns (18 minutes)
  static constexpr std::size_t kBuckets = (kMaxBit - kSubBits + 1) * kSub;

  void record(std::uint64_t ns) noexcept {
    ns = std::min<std::uint64_t>(ns, (std::uint64_t{1} << kMaxBit) - 1);
    ++counts_[index(ns)];
    ++total_;
    sum_ += ns;
    max_ = std::max(max_, ns);
    min_ = std::min(min_, ns);
  }

  void merge(const LatencyHistogram& o) noexcept {
    for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    sum_ += o.sum_;
    max_ = std::max(max_, o.max_);
    min_ = std::min(min_, o.min_);
  }

  [[nodiscard]] std::uint64_t count() const noexcept { return total_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return total_ ? max_ : 0; }
  [[nodiscard]] std::uint64_t min() const noexcept { return total_ ? min_ : 0; }
  [[nodiscard]] double mean() const noexcept {
    return total_ ? static_cast<double>(sum_) / static_cast<double>(total_) : 0.0;
  }

  // The smallest recorded-bucket upper edge at or below which a fraction `q`
  // of the samples lie (capped at the true maximum).
  [[nodiscard]] std::uint64_t percentile(double q) const noexcept {
    if (total_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_) + 0.5);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= std::max<std::uint64_t>(rank, 1)) return std::min(upper(i), max_);
    }
    return max_;
  }

  [[nodiscard]] std::uint64_t bucket_count(std::size_t i) const noexcept { return counts_[i]; }
  [[nodiscard]] static std::uint64_t lower(std::size_t i) noexcept {
    if (i < kSub) return i;
    const std::size_t octave = i / kSub;  // 1.. ; octave k holds [2^(k+5), 2^(k+6))
    const std::uint64_t sub = i % kSub;
    return (kSub + sub) << (octave - 1);
  }
  [[nodiscard]] static std::uint64_t upper(std::size_t i) noexcept { return lower(i + 1) - 1; }

 private:
  [[nodiscard]] static std::size_t index(std::uint64_t v) noexcept {
    if (v < kSub) return static_cast<std::size_t>(v);
    const int bit = 63 - std::countl_zero(v);  // >= kSubBits
    const int shift = bit - kSubBits;
    const std::uint64_t sub = (v >> shift) & (kSub - 1);
    return static_cast<std::size_t>(shift + 1) * kSub + static_cast<std::size_t>(sub);
  }

  std::uint64_t counts_[kBuckets] = {};
  std::uint64_t total_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
};

}  // namespace ringcast::bench
