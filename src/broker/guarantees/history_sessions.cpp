#include "broker/guarantees/history_sessions.hpp"

namespace ringcast::broker {

std::optional<std::string> HistorySessions::claim(std::string_view client_id, std::string_view owner) {
  if (std::optional<std::string> saved = store_.session_owner(client_id)) return saved;
  // None saved: a new session, or one saved before owners were kept, which
  // its first attach claims (durable_sessions.hpp, invariant 4). A failed
  // write leaves it as the latter.
  (void)store_.put_session_owner(client_id, owner);
  return std::string(owner);
}

// The store keeps floor + 1, so that its 0 ("none kept") differs from a floor
// of 0 (a subscription made before the channel's first message).
std::optional<std::uint64_t> HistorySessions::floor(std::string_view client_id, std::string_view channel) const {
  const std::uint64_t kept = store_.resume_floor(client_id, channel);
  if (kept == 0) return std::nullopt;
  return kept - 1;
}

void HistorySessions::put_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) noexcept {
  try {
    (void)store_.put_resume_floor(client_id, channel, floor + 1);
  } catch (...) {  // std::bad_alloc: a floor not saved means duplicates, never loss
  }
}

void HistorySessions::expire(std::string_view client_id) noexcept {
  try {
    (void)store_.erase_session(client_id);  // a failure leaves floors: duplicates, never loss
  } catch (...) {
  }
}

}  // namespace ringcast::broker
