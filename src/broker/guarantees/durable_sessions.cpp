#include "broker/guarantees/durable_sessions.hpp"

#include "broker/guarantees/history_store.hpp"

namespace ringcast::broker {

// The store keeps floor + 1, so that its 0 ("none kept") differs from a floor
// of 0 (a subscription made before the channel's first message).
std::optional<std::uint64_t> DurableSessions::saved_floor(std::string_view client_id, std::string_view channel) const {
  const std::uint64_t kept = store_ == nullptr ? 0 : store_->resume_floor(client_id, channel);
  if (kept == 0) return std::nullopt;
  return kept - 1;
}

void DurableSessions::save_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) {
  if (store_ != nullptr) (void)store_->put_resume_floor(client_id, channel, floor + 1);
}

}  // namespace ringcast::broker
