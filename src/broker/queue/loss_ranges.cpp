#include "broker/queue/loss_ranges.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace ringcast::broker {

std::string format_qos1_loss_notice(Qos1Loss kind, std::string_view channel, std::uint64_t first, std::uint64_t last,
                                    std::uint64_t count, std::uint64_t total, std::uint32_t sends) {
  std::string out = kind == Qos1Loss::kExpired
                        ? fmt::format("expired topic={} message_id={} sends={} total={}", channel, first, sends, total)
                        : fmt::format("window-dropped topic={} message_id={} total={}", channel, first, total);
  if (count > 1) out += fmt::format(" count={} last_message_id={}", count, last);
  return out;
}

void LossRanges::make_key(Qos1Loss kind, std::string_view channel) {
  key_.assign(1, static_cast<char>(kind));
  key_ += channel;
}

void LossRanges::add(Qos1Loss kind, std::string_view channel, std::uint64_t id, std::uint64_t total,
                     std::uint32_t sends) {
  make_key(kind, channel);
  if (const auto it = index_.find(std::string_view(key_)); it != index_.end()) {
    Range& r = ranges_[it->second - popped_];
    r.first = std::min(r.first, id);
    r.last = std::max(r.last, id);
    ++r.count;
    r.total = total;
    return;
  }
  index_.emplace(key_, popped_ + ranges_.size());
  ranges_.push_back(Range{kind, std::string(channel), id, id, 1, total, sends});
}

std::string LossRanges::front() const {
  const Range& r = ranges_.front();
  return format_qos1_loss_notice(r.kind, r.channel, r.first, r.last, r.count, r.total, r.sends);
}

void LossRanges::pop_front() {
  const Range& r = ranges_.front();
  make_key(r.kind, r.channel);
  index_.erase(index_.find(std::string_view(key_)));
  ranges_.pop_front();
  ++popped_;
}

}  // namespace ringcast::broker
