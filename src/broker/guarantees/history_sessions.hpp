// A broker's durable sessions kept in its own history store (memory, or LMDB
// with --data-dir): the SessionStore of a broker alone. The store's floors
// and owners live as long as it does; nothing expires by itself, so the
// broker's DurableSessions expires them (refresh() is a no-op).
//
// Thread safety: as HistoryStore's session methods, which may be called from
// any thread.
#pragma once

#include "broker/guarantees/history_store.hpp"
#include "ringcast/broker/session_store.hpp"

namespace ringcast::broker {

class HistorySessions final : public SessionStore {
 public:
  // `store` must outlive this.
  explicit HistorySessions(HistoryStore& store) noexcept : store_(store) {}

  [[nodiscard]] std::optional<std::string> claim(std::string_view client_id, std::string_view owner) override;
  [[nodiscard]] std::optional<std::uint64_t> floor(std::string_view client_id, std::string_view channel) const override;
  void put_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) noexcept override;
  // One node: nobody to tell.
  [[nodiscard]] std::optional<std::uint64_t> hold(std::string_view /*client_id*/) override { return 0; }
  void watch_taken(TakenFn /*taken*/) override {}
  void refresh(std::string_view /*client_id*/) noexcept override {}
  [[nodiscard]] std::vector<std::string> detached_clients() const override { return store_.session_clients(); }
  void expire(std::string_view client_id) noexcept override;

 private:
  HistoryStore& store_;
};

}  // namespace ringcast::broker
