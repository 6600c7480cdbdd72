// HistoryStore in memory (history_store.hpp). Each channel is a ring of at most
// `size` entries whose payload strings are reused once the ring is full, so a
// steady-state append copies bytes but allocates only when a payload outgrows
// the slot it lands in.
//
// Thread safety: channels live in kShards maps, each behind its own mutex;
// every operation on a channel holds its shard's mutex. The usage counters are
// relaxed atomics: they are statistics, read without ordering against the data.
#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "broker/guarantees/history_store.hpp"

namespace ringcast::broker {
namespace {

constexpr std::size_t kShards = 64;

struct Entry {
  std::uint64_t offset = 0;
  std::int64_t time_ms = 0;
  std::string payload;
};

struct Channel {
  const RetentionRule* rule = nullptr;
  std::vector<Entry> ring;  // grows to rule->size, then wraps
  std::size_t head = 0;     // index of the oldest entry
  std::size_t count = 0;
  std::uint64_t floor = 0;  // invariant 1: entries hold exactly (floor, top]
  std::uint64_t top = 0;

  [[nodiscard]] const Entry& at(std::size_t i) const { return ring[(head + i) % ring.size()]; }
};

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Shard {
  mutable std::mutex mu;
  std::unordered_map<std::string, Channel, StringHash, std::equal_to<>> channels;
};

class MemoryHistoryStore final : public HistoryStore {
 public:
  MemoryHistoryStore(std::vector<RetentionRule> rules, MemoryHistoryOptions options)
      : rules_(std::move(rules)),
        epoch_(options.epoch.empty() ? new_history_epoch() : std::move(options.epoch)),
        sparse_offsets_(options.sparse_offsets) {}

  tl::expected<void, HistoryError> append(std::string_view channel, std::uint64_t first_offset,
                                          std::span<const HistoryInput> run, std::int64_t now_ms) override {
    if (run.empty()) return {};
    Shard& s = shard(channel);
    std::lock_guard lock(s.mu);
    auto it = s.channels.find(channel);
    if (it == s.channels.end()) {
      const RetentionRule* rule = find_retention(rules_, channel);
      if (rule == nullptr)
        return tl::unexpected(HistoryError{HistoryError::Code::kNoRetention, 0,
                                           fmt::format("history: no --history rule matches channel '{}'", channel)});
      it = s.channels.emplace(std::string(channel), Channel{}).first;
      it->second.rule = rule;
      channels_.fetch_add(1, std::memory_order_relaxed);
    }
    Channel& c = it->second;
    if (first_offset <= c.top)
      return tl::unexpected(HistoryError{
          HistoryError::Code::kNotIncreasing, 0,
          fmt::format("history: channel '{}' offset {} is not above its top {}", channel, first_offset, c.top)});
    // The skipped ids can never be served; with sparse offsets they name other
    // channels' messages, except before the channel's first.
    if (first_offset != c.top + 1 && (!sparse_offsets_ || c.top == 0)) {
      drop_front(c, c.count);
      c.floor = first_offset - 1;
    }
    const std::size_t cap = static_cast<std::size_t>(c.rule->size);
    // Only the last `cap` messages of the run can survive the size cap.
    const std::size_t skip = run.size() > cap ? run.size() - cap : 0;
    if (skip > 0) {
      drop_front(c, c.count);
      c.floor = first_offset + skip - 1;
    }
    for (std::size_t i = skip; i < run.size(); ++i) {
      if (c.count == cap) drop_front(c, 1);
      Entry* e;
      if (c.count == c.ring.size()) {  // every slot used and below the cap: grow, oldest first
        std::rotate(c.ring.begin(), c.ring.begin() + static_cast<std::ptrdiff_t>(c.head), c.ring.end());
        c.head = 0;
        c.ring.emplace_back();
        e = &c.ring.back();
      } else {
        e = &c.ring[(c.head + c.count) % c.ring.size()];
      }
      e->offset = first_offset + i;
      e->time_ms = run[i].time_ms;
      e->payload.assign(run[i].payload);
      ++c.count;
      messages_.fetch_add(1, std::memory_order_relaxed);
      bytes_.fetch_add(run[i].payload.size() + kHistoryOverheadBytes, std::memory_order_relaxed);
    }
    c.top = first_offset + run.size() - 1;
    prune_ttl(c, now_ms);
    return {};
  }

  tl::expected<HistoryRead, HistoryError> read_since(std::string_view channel, std::uint64_t since,
                                                     std::size_t count) const override {
    HistoryRead r;
    const Shard& s = shard(channel);
    std::lock_guard lock(s.mu);
    auto it = s.channels.find(channel);
    if (it == s.channels.end()) {
      if (since > 0) r.status = ReadStatus::kAhead;
      return r;
    }
    const Channel& c = it->second;
    r.top = c.top;
    r.floor = c.floor;
    if (since > c.top) {
      r.status = ReadStatus::kAhead;
      return r;
    }
    if (since < c.floor) r.status = ReadStatus::kTruncated;
    // The first entry above `since` (offsets ascend along the ring, with holes
    // when sparse): a binary search over the ring's indexes.
    std::size_t lo = 0, hi = c.count;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (c.at(mid).offset <= since) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    copy_out(c, lo, std::min(count, c.count - lo), r);
    return r;
  }

  tl::expected<HistoryRead, HistoryError> read_last(std::string_view channel, std::size_t n) const override {
    HistoryRead r;
    const Shard& s = shard(channel);
    std::lock_guard lock(s.mu);
    auto it = s.channels.find(channel);
    if (it == s.channels.end()) return r;
    const Channel& c = it->second;
    r.top = c.top;
    r.floor = c.floor;
    const std::size_t k = std::min(n, c.count);
    copy_out(c, c.count - k, k, r);
    return r;
  }

  std::uint64_t top(std::string_view channel) const override {
    const Shard& s = shard(channel);
    std::lock_guard lock(s.mu);
    auto it = s.channels.find(channel);
    return it == s.channels.end() ? 0 : it->second.top;
  }

  const std::string& epoch() const noexcept override { return epoch_; }

  tl::expected<std::uint64_t, HistoryError> prune(std::int64_t now_ms) override {
    std::uint64_t dropped = 0;
    for (Shard& s : shards_) {
      std::lock_guard lock(s.mu);
      for (auto& [name, c] : s.channels) dropped += prune_ttl(c, now_ms);
    }
    return dropped;
  }

  tl::expected<void, HistoryError> flush() override { return {}; }

  HistoryUsage usage() const noexcept override {
    return {messages_.load(std::memory_order_relaxed), bytes_.load(std::memory_order_relaxed),
            channels_.load(std::memory_order_relaxed)};
  }

  tl::expected<void, HistoryError> put_resume_floor(std::string_view client_id, std::string_view channel,
                                                    std::uint64_t floor) override {
    std::lock_guard lock(sessions_mu_);
    std::uint64_t& f = sessions_[session_key(client_id, channel)];
    f = std::max(f, floor);
    return {};
  }

  std::uint64_t resume_floor(std::string_view client_id, std::string_view channel) const override {
    std::lock_guard lock(sessions_mu_);
    const auto it = sessions_.find(session_key(client_id, channel));
    return it == sessions_.end() ? 0 : it->second;
  }

  tl::expected<void, HistoryError> put_session_owner(std::string_view client_id, std::string_view owner) override {
    std::lock_guard lock(sessions_mu_);
    owners_.insert_or_assign(std::string(client_id), std::string(owner));
    return {};
  }

  std::optional<std::string> session_owner(std::string_view client_id) const override {
    std::lock_guard lock(sessions_mu_);
    const auto it = owners_.find(std::string(client_id));
    if (it == owners_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<std::string> session_clients() const override {
    std::vector<std::string> out;
    {
      std::lock_guard lock(sessions_mu_);
      for (const auto& [key, floor] : sessions_) out.emplace_back(key.substr(0, key.find('\0')));
      for (const auto& [id, owner] : owners_) out.push_back(id);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  tl::expected<void, HistoryError> erase_session(std::string_view client_id) override {
    const std::string prefix = session_key(client_id, {});
    std::lock_guard lock(sessions_mu_);
    std::erase_if(sessions_, [&](const auto& kv) { return kv.first.compare(0, prefix.size(), prefix) == 0; });
    owners_.erase(std::string(client_id));
    return {};
  }

 private:
  Shard& shard(std::string_view channel) { return shards_[StringHash{}(channel) % kShards]; }
  const Shard& shard(std::string_view channel) const { return shards_[StringHash{}(channel) % kShards]; }

  static void copy_out(const Channel& c, std::size_t first, std::size_t n, HistoryRead& r) {
    r.messages.reserve(n);
    for (std::size_t i = first; i < first + n; ++i) {
      const Entry& e = c.at(i);
      r.messages.push_back(HistoryMessage{e.offset, e.time_ms, e.payload});
    }
  }

  // Drops the n oldest entries (their strings keep their capacity for reuse).
  void drop_front(Channel& c, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      const Entry& e = c.at(0);
      bytes_.fetch_sub(e.payload.size() + kHistoryOverheadBytes, std::memory_order_relaxed);
      c.floor = e.offset;
      c.head = (c.head + 1) % c.ring.size();
      --c.count;
    }
    messages_.fetch_sub(n, std::memory_order_relaxed);
    if (c.count == 0) c.head = 0;  // the ring is refilled from index 0
  }

  std::uint64_t prune_ttl(Channel& c, std::int64_t now_ms) {
    if (c.rule->ttl.count() == 0) return 0;
    std::size_t n = 0;
    while (n < c.count && c.at(n).time_ms + c.rule->ttl.count() <= now_ms) ++n;
    drop_front(c, n);
    return n;
  }

  // client id, a NUL, the channel (a client id holds no NUL: it is JSON text).
  static std::string session_key(std::string_view client_id, std::string_view channel) {
    std::string k(client_id);
    k += '\0';
    k += channel;
    return k;
  }

  const std::vector<RetentionRule> rules_;
  const std::string epoch_;
  const bool sparse_offsets_;
  std::array<Shard, kShards> shards_;
  mutable std::mutex sessions_mu_;  // a leaf lock: guards sessions_ and owners_
  std::unordered_map<std::string, std::uint64_t> sessions_;
  std::unordered_map<std::string, std::string> owners_;  // client id -> owner
  std::atomic<std::uint64_t> messages_{0};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> channels_{0};
};

}  // namespace

std::unique_ptr<HistoryStore> make_memory_history_store(std::vector<RetentionRule> rules,
                                                        MemoryHistoryOptions options) {
  return std::make_unique<MemoryHistoryStore>(std::move(rules), std::move(options));
}

}  // namespace ringcast::broker
