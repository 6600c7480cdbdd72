// HistoryStore in LMDB (history_store.hpp; the on-disk format is in
// docs/guarantees.md, "LMDB format"). One environment in HistoryOptions::dir
// with three named databases:
//   meta      "magic" -> "ringcast-history", "format" -> u32 BE (kFormat),
//             "epoch" -> the epoch, "boot_id" -> the kernel boot id of the
//             last open, "unsynced" -> "1" while a batch/off session is open
//   channels  channel name -> u64 BE id, floor, top, bytes
//   messages  u64 BE channel id ++ u64 BE offset -> i64 BE time_ms ++ payload
//   sessions  client id ++ NUL ++ channel -> u64 BE resume floor (durable
//             QoS 1 subscribers; created on open, so a format-1 directory
//             written before it gains it), and client id alone -> its owner
//             (the identity that created the session; a client id holds no
//             NUL, so the two kinds of key never meet)
// Keys are big-endian so that a cursor walks one channel in offset order.
//
// Thread safety: appends and prune() serialise on write_mu_ (LMDB has one
// writer anyway); every transaction, read or write, holds env_mu_ shared, and
// growing the map (MDB_MAP_FULL) holds it exclusive, because
// mdb_env_set_mapsize requires that no transaction is active in the process.
// Reads use their own read-only transactions (MDB_NOTLS), so they see committed
// runs only and never wait for a writer's fsync.
#include <lmdb.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>  // std::hash
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "broker/guarantees/dir_lock.hpp"
#include "broker/guarantees/history_store.hpp"

namespace ringcast::broker {
namespace {

constexpr std::string_view kMagic = "ringcast-history";
constexpr std::uint32_t kFormat = 1;

using Code = HistoryError::Code;

void put_be64(unsigned char* p, std::uint64_t v) noexcept {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
std::uint64_t get_be64(const unsigned char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

MDB_val val_of(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }
std::string_view view_of(const MDB_val& v) { return {static_cast<const char*>(v.mv_data), v.mv_size}; }

struct MessageKey {
  unsigned char bytes[16];
  MessageKey(std::uint64_t channel_id, std::uint64_t offset) noexcept {
    put_be64(bytes, channel_id);
    put_be64(bytes + 8, offset);
  }
  MDB_val val() noexcept { return MDB_val{sizeof bytes, bytes}; }
};

// A channels record.
struct ChannelState {
  std::uint64_t id = 0;
  std::uint64_t floor = 0;
  std::uint64_t top = 0;
  std::uint64_t bytes = 0;
  const RetentionRule* rule = nullptr;  // not stored: looked up on open and on first append
};
constexpr std::size_t kChannelRecord = 32;

void encode(const ChannelState& c, unsigned char* p) noexcept {
  put_be64(p, c.id);
  put_be64(p + 8, c.floor);
  put_be64(p + 16, c.top);
  put_be64(p + 24, c.bytes);
}
bool decode(const MDB_val& v, ChannelState& c) noexcept {
  if (v.mv_size != kChannelRecord) return false;
  const auto* p = static_cast<const unsigned char*>(v.mv_data);
  c.id = get_be64(p);
  c.floor = get_be64(p + 8);
  c.top = get_be64(p + 16);
  c.bytes = get_be64(p + 24);
  return c.floor <= c.top;
}

std::string read_boot_id(const std::string& path) {
  std::ifstream f(path);
  std::string id;
  std::getline(f, id);
  return id;
}

HistoryError lmdb_error(const std::string& dir, std::string_view what, int rc) {
  if (rc > 0) return HistoryError{Code::kIo, rc, fmt::format("history dir {}: {}", dir, what)};
  return HistoryError{rc == MDB_MAP_FULL ? Code::kFull : Code::kLmdb, 0,
                      fmt::format("history dir {}: {}: {}", dir, what, mdb_strerror(rc))};
}

// RAII for an environment handle.
struct Env {
  MDB_env* env = nullptr;
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  ~Env() {
    if (env != nullptr) mdb_env_close(env);
  }
};

// Checks an existing environment without writing a byte to it (read-only, no
// lock file): ok if it is ringcast history of a format this build reads.
tl::expected<void, HistoryError> validate_existing(const std::string& dir) {
  Env e;
  int rc = mdb_env_create(&e.env);
  if (rc == 0) rc = mdb_env_set_maxdbs(e.env, 4);
  if (rc != 0) return tl::unexpected(lmdb_error(dir, "mdb_env_create", rc));
  rc = mdb_env_open(e.env, dir.c_str(), MDB_RDONLY | MDB_NOLOCK, 0644);
  if (rc != 0)
    return tl::unexpected(HistoryError{
        Code::kCorrupt, 0,
        fmt::format("history dir {}: data.mdb is not a readable LMDB environment ({}); refusing to touch it", dir,
                    rc > 0 ? std::strerror(rc) : mdb_strerror(rc))});
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(e.env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0)
    return tl::unexpected(
        HistoryError{Code::kCorrupt, 0, fmt::format("history dir {}: cannot read ({})", dir, mdb_strerror(rc))});
  auto fail = [&](Code code, std::string text) {
    mdb_txn_abort(txn);
    return tl::unexpected(HistoryError{code, 0, fmt::format("history dir {}: {}", dir, text)});
  };
  MDB_dbi meta;
  rc = mdb_dbi_open(txn, "meta", 0, &meta);
  if (rc == MDB_NOTFOUND)
    return fail(Code::kForeign, "an LMDB environment without ringcast's meta record; refusing to touch it");
  if (rc != 0) return fail(Code::kCorrupt, fmt::format("cannot open the meta record ({})", mdb_strerror(rc)));
  MDB_val k = val_of("magic"), v;
  if (mdb_get(txn, meta, &k, &v) != 0 || view_of(v) != kMagic)
    return fail(Code::kForeign, "the meta record is not ringcast history's; refusing to touch it");
  k = val_of("format");
  if (mdb_get(txn, meta, &k, &v) != 0 || v.mv_size != 4)
    return fail(Code::kCorrupt, "the meta record has no valid format version");
  const auto* p = static_cast<const unsigned char*>(v.mv_data);
  const std::uint32_t format =
      (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
  if (format > kFormat)
    return fail(Code::kNewerFormat,
                fmt::format("written by a newer ringcast (format {}, this one reads up to {})", format, kFormat));
  mdb_txn_abort(txn);
  return {};
}

class LmdbHistoryStore final : public HistoryStore {
 public:
  explicit LmdbHistoryStore(HistoryOptions options) : opt_(std::move(options)) {}

  ~LmdbHistoryStore() override {
    if (env_ == nullptr) return;
    if (!ready_) {  // open() failed part way: nothing of ours to mark
      mdb_env_close(env_);
      return;
    }
    // A clean close: everything synced, then the session is marked synced so
    // that a later open after a reboot keeps the epoch.
    if (opt_.fsync != FsyncMode::kAlways && mdb_env_sync(env_, 1) == 0) {
      (void)write_txn([&](MDB_txn* txn) {
        MDB_val k = val_of("unsynced"), v = val_of("0");
        return mdb_put(txn, meta_, &k, &v, 0);
      });
      (void)mdb_env_sync(env_, 1);
    }
    mdb_env_close(env_);
  }

  tl::expected<void, HistoryError> open() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path dir(opt_.dir);
    if (!fs::exists(dir, ec)) {
      if (!fs::create_directories(dir, ec))
        return tl::unexpected(HistoryError{Code::kIo, ec.value(), fmt::format("history dir {}: mkdir", opt_.dir)});
    } else if (!fs::is_directory(dir, ec)) {
      return tl::unexpected(HistoryError{Code::kForeign, 0, fmt::format("history dir {}: not a directory", opt_.dir)});
    }
    bool fresh = !fs::exists(dir / "data.mdb", ec);
    if (fresh) {
      for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().filename() != "lock.mdb" && entry.path().filename() != kDirLockFile)
          return tl::unexpected(HistoryError{
              Code::kForeign, 0,
              fmt::format("history dir {}: not empty and holds no ringcast history ({}); refusing to touch it",
                          opt_.dir, entry.path().filename().string())});
      if (ec) return tl::unexpected(HistoryError{Code::kIo, ec.value(), fmt::format("history dir {}: list", opt_.dir)});
    } else if (auto ok = validate_existing(opt_.dir); !ok) {
      return tl::unexpected(ok.error());
    }
    // Ours or empty (checked without writing, so a refused directory gains no
    // lock file): now take it, before the first write, for as long as we live.
    auto lock = DirLock::acquire(opt_.dir);
    if (!lock) return tl::unexpected(std::move(lock.error()));
    dir_lock_.emplace(std::move(*lock));

    int rc = mdb_env_create(&env_);
    if (rc == 0) rc = mdb_env_set_maxdbs(env_, 4);
    if (rc == 0) rc = mdb_env_set_mapsize(env_, opt_.initial_map_bytes);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "mdb_env_create", rc));
    unsigned flags = MDB_NOTLS;
    if (opt_.fsync == FsyncMode::kBatch) flags |= MDB_NOSYNC;
    if (opt_.fsync == FsyncMode::kOff) flags |= MDB_NOSYNC | MDB_NOMETASYNC;
    rc = mdb_env_open(env_, opt_.dir.c_str(), flags, 0644);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "mdb_env_open", rc));
    MDB_envinfo info;
    if (mdb_env_info(env_, &info) == 0) map_bytes_ = info.me_mapsize;

    const std::string boot_id = read_boot_id(opt_.boot_id_file);
    auto setup = write_txn([&](MDB_txn* txn) {
      int r = mdb_dbi_open(txn, "meta", MDB_CREATE, &meta_);
      if (r == 0) r = mdb_dbi_open(txn, "channels", MDB_CREATE, &channels_);
      if (r == 0) r = mdb_dbi_open(txn, "messages", MDB_CREATE, &messages_);
      if (r == 0) r = mdb_dbi_open(txn, "sessions", MDB_CREATE, &sessions_);
      if (r != 0) return r;
      auto get = [&](std::string_view key) -> std::string {
        MDB_val k = val_of(key), v;
        return mdb_get(txn, meta_, &k, &v) == 0 ? std::string(view_of(v)) : std::string();
      };
      auto put = [&](std::string_view key, std::string_view value) {
        MDB_val k = val_of(key), v = val_of(value);
        return mdb_put(txn, meta_, &k, &v, 0);
      };
      epoch_ = get("epoch");
      // A batch/off session that did not close cleanly, followed by a reboot:
      // the OS may have lost commits it had acknowledged, so offsets may be
      // reissued for other messages. The epoch says so.
      const bool maybe_lost = get("unsynced") == "1" && get("boot_id") != boot_id;
      if (fresh || epoch_.empty() || maybe_lost) {
        epoch_ = new_history_epoch();
        if ((r = put("epoch", epoch_)) != 0) return r;
      }
      if (fresh) {
        const unsigned char format[4] = {0, 0, 0, static_cast<unsigned char>(kFormat)};
        if ((r = put("magic", kMagic)) != 0) return r;
        if ((r = put("format", std::string_view(reinterpret_cast<const char*>(format), 4))) != 0) return r;
      }
      if ((r = put("boot_id", boot_id)) != 0) return r;
      return put("unsynced", opt_.fsync == FsyncMode::kAlways ? "0" : "1");
    });
    if (!setup) return setup;
    if ((rc = mdb_env_sync(env_, 1)) != 0) return tl::unexpected(lmdb_error(opt_.dir, "mdb_env_sync", rc));
    auto loaded = load_channels();
    ready_ = loaded.has_value();
    return loaded;
  }

  tl::expected<void, HistoryError> append(std::string_view channel, std::uint64_t first_offset,
                                          std::span<const HistoryInput> run, std::int64_t now_ms) override {
    if (run.empty()) return {};
    std::lock_guard lock(write_mu_);
    auto it = state_.find(channel);
    ChannelState cur;
    if (it != state_.end()) {
      cur = it->second;  // its rule was looked up when it was loaded or first appended to
    } else {
      cur.rule = find_retention(opt_.rules, channel);
      cur.id = next_id_;
    }
    if (cur.rule == nullptr)  // also a channel kept on disk whose rule is gone from the flags
      return tl::unexpected(
          HistoryError{Code::kNoRetention, 0, fmt::format("history: no --history rule matches channel '{}'", channel)});
    if (first_offset <= cur.top)
      return tl::unexpected(HistoryError{
          Code::kNotIncreasing, 0,
          fmt::format("history: channel '{}' offset {} is not above its top {}", channel, first_offset, cur.top)});
    ChannelState next;
    std::uint64_t dropped = 0;
    auto done = write_txn([&](MDB_txn* txn) {
      next = cur;
      dropped = 0;
      MDB_cursor* c = nullptr;
      int r = mdb_cursor_open(txn, messages_, &c);
      if (r != 0) return r;
      const std::uint64_t cap = cur.rule->size;
      const std::uint64_t last = first_offset + run.size() - 1;
      // Only the last `cap` of the run can survive; skipped ids are never served.
      std::uint64_t new_floor = first_offset == cur.top + 1 ? cur.floor : first_offset - 1;
      new_floor = std::max(new_floor, last >= cap ? last - cap : 0);
      r = drop_through(c, next, new_floor, dropped);
      for (std::size_t i = 0; r == 0 && i < run.size(); ++i) {
        const std::uint64_t off = first_offset + i;
        if (off <= new_floor) continue;
        MessageKey key(next.id, off);
        MDB_val k = key.val();
        MDB_val v{8 + run[i].payload.size(), nullptr};
        r = mdb_cursor_put(c, &k, &v, MDB_RESERVE);
        if (r == 0) {
          auto* p = static_cast<unsigned char*>(v.mv_data);
          put_be64(p, static_cast<std::uint64_t>(run[i].time_ms));
          if (!run[i].payload.empty()) std::memcpy(p + 8, run[i].payload.data(), run[i].payload.size());
          next.bytes += run[i].payload.size() + kHistoryOverheadBytes;
        }
      }
      next.floor = std::max(next.floor, new_floor);
      next.top = last;
      if (r == 0) r = drop_expired(c, next, now_ms, dropped);
      mdb_cursor_close(c);
      if (r == 0) r = put_channel(txn, channel, next);
      return r;
    });
    if (!done) return done;
    if (it == state_.end()) {
      state_.emplace(std::string(channel), next);
      ++next_id_;
      channel_count_.fetch_add(1, std::memory_order_relaxed);
    } else {
      it->second = next;
    }
    account(cur, next);
    return {};
  }

  tl::expected<HistoryRead, HistoryError> read_since(std::string_view channel, std::uint64_t since,
                                                     std::size_t count) const override {
    return read(channel, [&](HistoryRead& r, std::uint64_t& from, std::size_t& n) {
      if (since > r.top) {
        r.status = ReadStatus::kAhead;
        n = 0;
        return;
      }
      if (since < r.floor) r.status = ReadStatus::kTruncated;
      from = std::max(since, r.floor) + 1;
      n = static_cast<std::size_t>(std::min<std::uint64_t>(count, r.top - from + 1));
    });
  }

  tl::expected<HistoryRead, HistoryError> read_last(std::string_view channel, std::size_t n) const override {
    return read(channel, [&](HistoryRead& r, std::uint64_t& from, std::size_t& k) {
      k = static_cast<std::size_t>(std::min<std::uint64_t>(n, r.top - r.floor));
      from = r.top - k + 1;
    });
  }

  std::uint64_t top(std::string_view channel) const override {
    auto r = read_last(channel, 0);
    return r ? r->top : 0;
  }

  const std::string& epoch() const noexcept override { return epoch_; }

  tl::expected<std::uint64_t, HistoryError> prune(std::int64_t now_ms) override {
    std::lock_guard lock(write_mu_);
    std::vector<std::pair<ChannelState*, ChannelState>> changed;
    std::uint64_t dropped = 0;
    auto done = write_txn([&](MDB_txn* txn) {
      changed.clear();
      dropped = 0;
      MDB_cursor* c = nullptr;
      int r = mdb_cursor_open(txn, messages_, &c);
      for (auto it = state_.begin(); r == 0 && it != state_.end(); ++it) {
        ChannelState next = it->second;
        if (next.rule == nullptr) continue;
        const std::uint64_t before = dropped;
        if (next.top - next.floor > next.rule->size) r = drop_through(c, next, next.top - next.rule->size, dropped);
        if (r == 0) r = drop_expired(c, next, now_ms, dropped);
        if (r == 0 && dropped != before) {
          r = put_channel(txn, it->first, next);
          changed.emplace_back(&it->second, next);
        }
      }
      if (c != nullptr) mdb_cursor_close(c);
      return r;
    });
    if (!done) return tl::unexpected(done.error());
    for (auto& [slot, next] : changed) {
      account(*slot, next);
      *slot = next;
    }
    return dropped;
  }

  tl::expected<void, HistoryError> flush() override {
    if (opt_.fsync != FsyncMode::kBatch) return {};
    const int rc = mdb_env_sync(env_, 1);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "mdb_env_sync", rc));
    return {};
  }

  HistoryUsage usage() const noexcept override {
    return {messages_held_.load(std::memory_order_relaxed), bytes_held_.load(std::memory_order_relaxed),
            channel_count_.load(std::memory_order_relaxed)};
  }

  tl::expected<void, HistoryError> put_resume_floor(std::string_view client_id, std::string_view channel,
                                                    std::uint64_t floor) override {
    const std::string key = session_key(client_id, channel);
    std::lock_guard lock(write_mu_);
    return write_txn([&](MDB_txn* txn) {
      MDB_val k = val_of(key), v;
      int r = mdb_get(txn, sessions_, &k, &v);
      if (r == 0 && v.mv_size == 8 && get_be64(static_cast<const unsigned char*>(v.mv_data)) >= floor) return 0;
      if (r != 0 && r != MDB_NOTFOUND) return r;
      unsigned char rec[8];
      put_be64(rec, floor);
      MDB_val nv{sizeof rec, rec};
      return mdb_put(txn, sessions_, &k, &nv, 0);
    });
  }

  std::uint64_t resume_floor(std::string_view client_id, std::string_view channel) const override {
    const std::string key = session_key(client_id, channel);
    std::shared_lock env_lock(env_mu_);
    MDB_txn* txn = nullptr;
    if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn) != 0) return 0;
    MDB_val k = val_of(key), v;
    std::uint64_t floor = 0;
    if (mdb_get(txn, sessions_, &k, &v) == 0 && v.mv_size == 8)
      floor = get_be64(static_cast<const unsigned char*>(v.mv_data));
    mdb_txn_abort(txn);
    return floor;
  }

  tl::expected<void, HistoryError> put_session_owner(std::string_view client_id, std::string_view owner) override {
    std::lock_guard lock(write_mu_);
    return write_txn([&](MDB_txn* txn) {
      MDB_val k = val_of(client_id), v = val_of(owner);
      return mdb_put(txn, sessions_, &k, &v, 0);
    });
  }

  std::optional<std::string> session_owner(std::string_view client_id) const override {
    std::shared_lock env_lock(env_mu_);
    MDB_txn* txn = nullptr;
    if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn) != 0) return std::nullopt;
    MDB_val k = val_of(client_id), v;
    std::optional<std::string> owner;
    if (mdb_get(txn, sessions_, &k, &v) == 0) owner.emplace(view_of(v));
    mdb_txn_abort(txn);
    return owner;
  }

  // Keys are client id, or client id ++ NUL ++ channel, and a client id holds
  // no NUL, so one client's keys are adjacent in key order.
  std::vector<std::string> session_clients() const override {
    std::vector<std::string> out;
    std::shared_lock env_lock(env_mu_);
    MDB_txn* txn = nullptr;
    if (mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn) != 0) return out;
    MDB_cursor* cur = nullptr;
    if (mdb_cursor_open(txn, sessions_, &cur) == 0) {
      MDB_val k, v;
      for (int r = mdb_cursor_get(cur, &k, &v, MDB_FIRST); r == 0; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        const std::string_view key(static_cast<const char*>(k.mv_data), k.mv_size);
        const std::string_view id = key.substr(0, key.find('\0'));
        if (out.empty() || out.back() != id) out.emplace_back(id);
      }
      mdb_cursor_close(cur);
    }
    mdb_txn_abort(txn);
    return out;
  }

  tl::expected<void, HistoryError> erase_session(std::string_view client_id) override {
    const std::string prefix = session_key(client_id, {});
    std::lock_guard lock(write_mu_);
    return write_txn([&](MDB_txn* txn) {
      MDB_val owner_key = val_of(client_id);
      int r = mdb_del(txn, sessions_, &owner_key, nullptr);
      if (r != 0 && r != MDB_NOTFOUND) return r;
      MDB_cursor* cur = nullptr;
      r = mdb_cursor_open(txn, sessions_, &cur);
      if (r != 0) return r;
      MDB_val k = val_of(prefix), v;
      for (r = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); r == 0; r = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size < prefix.size() || std::memcmp(k.mv_data, prefix.data(), prefix.size()) != 0) break;
        r = mdb_cursor_del(cur, 0);  // the cursor then stands before the next key: MDB_NEXT reaches it
        if (r != 0) break;
      }
      mdb_cursor_close(cur);
      return r == MDB_NOTFOUND ? 0 : r;
    });
  }

 private:
  static std::string session_key(std::string_view client_id, std::string_view channel) {
    std::string k(client_id);
    k += '\0';
    k += channel;
    return k;
  }

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  // Runs body(txn) in a write transaction and commits it; on MDB_MAP_FULL
  // doubles the map (up to max_map_bytes) and runs body again from scratch.
  // A template, not std::function: the append's lambda captures too much for
  // std::function's small buffer, and an append should not allocate for it.
  template <class Body>
  tl::expected<void, HistoryError> write_txn(Body&& body) const {
    for (;;) {
      int rc;
      {
        std::shared_lock env_lock(env_mu_);
        MDB_txn* txn = nullptr;
        rc = mdb_txn_begin(env_, nullptr, 0, &txn);
        if (rc == 0) {
          rc = body(txn);
          if (rc == 0) rc = mdb_txn_commit(txn);
          else mdb_txn_abort(txn);
        }
      }
      if (rc == 0) return {};
      if (rc != MDB_MAP_FULL) return tl::unexpected(lmdb_error(opt_.dir, "write", rc));
      std::unique_lock env_lock(env_mu_);
      if (map_bytes_ >= opt_.max_map_bytes)
        return tl::unexpected(HistoryError{
            Code::kFull, 0,
            fmt::format("history dir {}: the map is full at its maximum of {} bytes", opt_.dir, opt_.max_map_bytes)});
      const std::size_t grown = std::min(map_bytes_ * 2, opt_.max_map_bytes);
      rc = mdb_env_set_mapsize(env_, grown);
      if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "mdb_env_set_mapsize", rc));
      map_bytes_ = grown;
    }
  }

  // Reads the channel record and then `n` messages from offset `from`, where
  // plan(result, from, n) decides both from the record.
  template <class Plan>
  tl::expected<HistoryRead, HistoryError> read(std::string_view channel, Plan plan) const {
    HistoryRead r;
    std::shared_lock env_lock(env_mu_);
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "read", rc));
    MDB_val k = val_of(channel), v;
    ChannelState cs;
    rc = mdb_get(txn, channels_, &k, &v);
    if (rc == 0 && !decode(v, cs)) rc = MDB_CORRUPTED;
    if (rc == MDB_NOTFOUND) rc = 0;  // never appended: top = floor = 0
    r.top = cs.top;
    r.floor = cs.floor;
    std::uint64_t from = 0;
    std::size_t n = 0;
    if (rc == 0) plan(r, from, n);
    MDB_cursor* c = nullptr;
    if (rc == 0 && n > 0) rc = mdb_cursor_open(txn, messages_, &c);
    if (rc == 0 && n > 0) {
      r.messages.reserve(n);
      MessageKey key(cs.id, from);
      MDB_val mk = key.val(), mv;
      for (rc = mdb_cursor_get(c, &mk, &mv, MDB_SET_KEY); rc == 0 && r.messages.size() < n;
           rc = mdb_cursor_get(c, &mk, &mv, MDB_NEXT)) {
        if (mk.mv_size != 16 || mv.mv_size < 8) {
          rc = MDB_CORRUPTED;
          break;
        }
        const auto* kp = static_cast<const unsigned char*>(mk.mv_data);
        const auto* vp = static_cast<const unsigned char*>(mv.mv_data);
        const std::uint64_t off = get_be64(kp + 8);
        if (get_be64(kp) != cs.id || off != from + r.messages.size()) {
          rc = MDB_CORRUPTED;  // invariant 1 broken: a hole inside (floor, top]
          break;
        }
        r.messages.push_back(HistoryMessage{off, static_cast<std::int64_t>(get_be64(vp)),
                                            std::string(static_cast<const char*>(mv.mv_data) + 8, mv.mv_size - 8)});
      }
      // Fewer than n: invariant 1 says they exist, so the file is damaged.
      if (r.messages.size() == n) rc = 0;
      else if (rc == 0 || rc == MDB_NOTFOUND) rc = MDB_CORRUPTED;
    }
    if (c != nullptr) mdb_cursor_close(c);
    mdb_txn_abort(txn);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, fmt::format("read channel '{}'", channel), rc));
    return r;
  }

  // Deletes the channel's messages with offset <= through; raises s.floor.
  int drop_through(MDB_cursor* c, ChannelState& s, std::uint64_t through, std::uint64_t& dropped) const {
    if (through <= s.floor) return 0;
    return drop_while(c, s, dropped, [&](std::uint64_t off, std::int64_t) { return off <= through; });
  }

  int drop_expired(MDB_cursor* c, ChannelState& s, std::int64_t now_ms, std::uint64_t& dropped) const {
    if (s.rule == nullptr || s.rule->ttl.count() == 0) return 0;
    const std::int64_t ttl = s.rule->ttl.count();
    return drop_while(c, s, dropped, [&](std::uint64_t, std::int64_t t) { return t + ttl <= now_ms; });
  }

  // Deletes the channel's oldest messages while pred(offset, time_ms) holds.
  template <class Pred>
  int drop_while(MDB_cursor* c, ChannelState& s, std::uint64_t& dropped, Pred pred) const {
    if (s.top == s.floor) return 0;
    MessageKey key(s.id, s.floor + 1);
    MDB_val k = key.val(), v;
    int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
      if (k.mv_size != 16 || v.mv_size < 8) return MDB_CORRUPTED;
      const auto* kp = static_cast<const unsigned char*>(k.mv_data);
      if (get_be64(kp) != s.id) break;
      const std::uint64_t off = get_be64(kp + 8);
      if (off > s.top || !pred(off, static_cast<std::int64_t>(get_be64(static_cast<const unsigned char*>(v.mv_data)))))
        break;
      s.bytes -= v.mv_size - 8 + kHistoryOverheadBytes;
      s.floor = off;
      ++dropped;
      if ((rc = mdb_cursor_del(c, 0)) != 0) return rc;
    }
    return rc == MDB_NOTFOUND ? 0 : rc;
  }

  int put_channel(MDB_txn* txn, std::string_view name, const ChannelState& s) const {
    unsigned char rec[kChannelRecord];
    encode(s, rec);
    MDB_val k = val_of(name), v{sizeof rec, rec};
    return mdb_put(txn, channels_, &k, &v, 0);
  }

  void account(const ChannelState& before, const ChannelState& after) noexcept {
    // relaxed: statistics for INFO, not ordered with the data.
    messages_held_.fetch_add((after.top - after.floor) - (before.top - before.floor), std::memory_order_relaxed);
    bytes_held_.fetch_add(after.bytes - before.bytes, std::memory_order_relaxed);
  }

  tl::expected<void, HistoryError> load_channels() {
    std::shared_lock env_lock(env_mu_);
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
    MDB_cursor* c = nullptr;
    if (rc == 0) rc = mdb_cursor_open(txn, channels_, &c);
    MDB_val k, v;
    if (rc == 0) {
      for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        ChannelState s;
        if (!decode(v, s)) {
          rc = MDB_CORRUPTED;
          break;
        }
        const std::string_view name = view_of(k);
        s.rule = find_retention(opt_.rules, name);
        next_id_ = std::max(next_id_, s.id + 1);
        messages_held_.fetch_add(s.top - s.floor, std::memory_order_relaxed);
        bytes_held_.fetch_add(s.bytes, std::memory_order_relaxed);
        channel_count_.fetch_add(1, std::memory_order_relaxed);
        state_.emplace(std::string(name), s);
      }
      if (rc == MDB_NOTFOUND) rc = 0;
      mdb_cursor_close(c);
    }
    if (txn != nullptr) mdb_txn_abort(txn);
    if (rc != 0) return tl::unexpected(lmdb_error(opt_.dir, "load channels", rc));
    return {};
  }

  const HistoryOptions opt_;
  // Held from open() until after the destructor closed env_ (members are
  // destroyed after the destructor's body).
  std::optional<DirLock> dir_lock_;
  MDB_env* env_ = nullptr;
  bool ready_ = false;  // open() succeeded: the destructor marks a clean close
  MDB_dbi meta_ = 0, channels_ = 0, messages_ = 0, sessions_ = 0;
  std::string epoch_;
  mutable std::shared_mutex env_mu_;   // shared: any transaction; exclusive: mdb_env_set_mapsize
  mutable std::size_t map_bytes_ = 0;  // guarded by env_mu_ (exclusive to change)
  std::mutex write_mu_;                // appends and prune: state_, next_id_
  std::unordered_map<std::string, ChannelState, StringHash, std::equal_to<>> state_;
  std::uint64_t next_id_ = 1;
  std::atomic<std::uint64_t> messages_held_{0};
  std::atomic<std::uint64_t> bytes_held_{0};
  std::atomic<std::uint64_t> channel_count_{0};
};

}  // namespace

tl::expected<std::unique_ptr<HistoryStore>, HistoryError> open_lmdb_history_store(HistoryOptions options) {
  auto store = std::make_unique<LmdbHistoryStore>(std::move(options));
  if (auto ok = store->open(); !ok) return tl::unexpected(ok.error());
  return store;
}

}  // namespace ringcast::broker
