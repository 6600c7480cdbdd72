#include "broker/resp/publish_batch.hpp"

namespace ringcast::broker {

bool PublishBatch::add(std::string_view channel, std::string_view payload, bool reply) {
  entries_.push_back({static_cast<std::uint32_t>(channel.size()), static_cast<std::uint32_t>(payload.size()), reply});
  bytes_ += channel;
  bytes_ += payload;
  return entries_.size() >= kMaxPublishes || bytes_.size() >= kMaxBytes;
}

void PublishBatch::messages(std::vector<Message>& out) const {
  out.clear();
  const std::string_view bytes(bytes_);
  std::size_t offset = 0;
  for (const Entry& e : entries_) {
    out.push_back({bytes.substr(offset, e.channel_len), bytes.substr(offset + e.channel_len, e.payload_len)});
    offset += e.channel_len + e.payload_len;
  }
}

void PublishBatch::drop_front(std::size_t n) {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < n; ++i) bytes += entries_[i].channel_len + entries_[i].payload_len;
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(n));
  bytes_.erase(0, bytes);
}

void PublishBatch::clear() noexcept {
  entries_.clear();
  bytes_.clear();
}

}  // namespace ringcast::broker
