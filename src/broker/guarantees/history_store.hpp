// Per-channel message history behind one interface (docs/guarantees.md,
// "Storage"): a memory store and an LMDB store, each one file, chosen by the
// broker at start (--data-dir picks LMDB).
//
// Model (Centrifugo's offset + epoch): every retained channel has a stream of
// uint64 offsets that only grow. The broker core assigns them (its per-channel
// message id, under its per-channel lock) and hands them in; the store accepts
// any offset above the channel's top and refuses the rest. A channel's history
// is always exactly the offsets in (floor, top]: pruning raises floor, and an
// append that skips ids raises floor to just below its first offset, because
// the skipped ids can never be served. The store's epoch changes whenever
// history may have been lost (a memory store's new start, an LMDB directory
// created anew or possibly rolled back by an OS crash), so a client holding
// {offset, epoch} learns whether its offset still means anything.
//
// Thread safety: every method may be called from any thread at any time.
//  * append() calls for one channel must come in offset order; the broker makes
//    them under its per-channel lock, so they do. Appends to different channels
//    may run concurrently (the memory store shards its channel map, 64 shards
//    each with a mutex; the LMDB store serialises them on LMDB's single writer).
//  * Reads (read_since, read_last, top) see a consistent snapshot of one channel:
//    some prefix of the appends that returned, never part of a run.
//  * prune() and flush() are for the broker's timer; usage() is for INFO and
//    /metrics, its counters are relaxed and may lag concurrent appends.
// Invariants:
//  1. A channel's retained offsets are exactly (floor, top], floor <= top.
//  2. top never decreases while the epoch stays the same.
//  3. After an append run returns, a reader either sees the whole run or (once
//     pruned) none of the pruned prefix; never a hole inside (floor, top].
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "broker/guarantees/retention.hpp"
#include "ringcast/broker/config.hpp"  // FsyncMode

namespace ringcast::broker {

// One message handed to append(); its offset is first_offset + its index in the run.
struct HistoryInput {
  std::string_view payload;
  std::int64_t time_ms = 0;  // publish time, ms since the Unix epoch; TTL counts from it
};

// One message read back.
struct HistoryMessage {
  std::uint64_t offset = 0;
  std::int64_t time_ms = 0;
  std::string payload;
};

enum class ReadStatus : std::uint8_t {
  kOk,         // every message after `since` that existed is returned (up to count)
  kTruncated,  // since < floor: messages after it were pruned or never stored
  kAhead,      // since > top: the offset is not from this store's history (epoch?)
};

struct HistoryRead {
  ReadStatus status = ReadStatus::kOk;
  std::uint64_t top = 0;                 // the channel's current top offset (0: nothing ever appended)
  std::uint64_t floor = 0;               // offsets <= floor are no longer retained
  std::vector<HistoryMessage> messages;  // ascending offsets, consecutive
};

// Bytes and messages held, for INFO and /metrics. bytes counts payload bytes
// plus kHistoryOverheadBytes per message (offset, time, bookkeeping).
struct HistoryUsage {
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  std::uint64_t channels = 0;
};
inline constexpr std::uint64_t kHistoryOverheadBytes = 16;

struct HistoryError {
  enum class Code : std::uint8_t {
    kNotIncreasing,  // append with first_offset <= top (detail has both)
    kNoRetention,    // append to a channel no retention rule matches
    kIo,             // a system call failed; sys_errno says why
    kCorrupt,        // the data directory is not a readable LMDB environment
    kForeign,        // the directory holds something that is not ringcast history
    kNewerFormat,    // the history was written by a newer ringcast (format version)
    kLocked,         // another broker holds the directory (dir_lock.hpp)
    kFull,           // the LMDB map cannot grow past HistoryOptions::max_map_bytes
    kLmdb,           // another LMDB error (detail has mdb_strerror)
  };
  Code code = Code::kLmdb;
  int sys_errno = 0;
  std::string detail;

  // "history dir /var/lib/x: written by a newer ringcast (format 3, this one reads 1)".
  [[nodiscard]] std::string message() const;
};

class HistoryStore {
 public:
  virtual ~HistoryStore() = default;

  // Appends `run` to `channel` with offsets first_offset, first_offset + 1, ...
  // (one transaction: a reader or a crash sees all of it or none), then prunes
  // the channel to its retention rule's size and TTL as of now_ms.
  // Errors: kNotIncreasing if first_offset <= top(channel) (nothing stored),
  // kNoRetention if no rule matches the channel, I/O and LMDB errors (LMDB
  // store; nothing of the run is stored). An empty run is a no-op.
  // With FsyncMode::kAlways the run is on disk when this returns.
  [[nodiscard]] virtual tl::expected<void, HistoryError> append(std::string_view channel, std::uint64_t first_offset,
                                                                std::span<const HistoryInput> run,
                                                                std::int64_t now_ms) = 0;

  // Up to `count` messages with offset > since, ascending. status says whether
  // messages after `since` are missing (kTruncated) or since is beyond top (kAhead).
  [[nodiscard]] virtual tl::expected<HistoryRead, HistoryError> read_since(std::string_view channel,
                                                                           std::uint64_t since,
                                                                           std::size_t count) const = 0;
  // The last min(n, retained) messages, ascending; status kOk.
  [[nodiscard]] virtual tl::expected<HistoryRead, HistoryError> read_last(std::string_view channel,
                                                                          std::size_t n) const = 0;
  // The channel's top offset (0 if nothing was ever appended). The broker
  // continues its per-channel ids from here after a restart.
  [[nodiscard]] virtual std::uint64_t top(std::string_view channel) const = 0;

  // Changes whenever history may have been lost (see the file comment).
  [[nodiscard]] virtual const std::string& epoch() const noexcept = 0;

  // Drops messages past their channel's TTL or size as of now_ms; returns how
  // many were dropped. For the broker's timer (appends prune their own channel).
  virtual tl::expected<std::uint64_t, HistoryError> prune(std::int64_t now_ms) = 0;

  // FsyncMode::kBatch: makes every returned append durable (mdb_env_sync);
  // no-op otherwise and for the memory store. For the broker's timer.
  virtual tl::expected<void, HistoryError> flush() = 0;

  [[nodiscard]] virtual HistoryUsage usage() const noexcept = 0;

  // Durable QoS 1 subscribers (docs/guarantees.md, "Durable subscribers"):
  // client `client_id` has acked every message of `channel` up to `floor`, so
  // it resumes after it. A floor never moves back (a lower one is ignored).
  // In LMDB its own database ("sessions") of the same environment, committed
  // like an append (synced per --fsync); resume_floor is 0 when none is kept.
  virtual tl::expected<void, HistoryError> put_resume_floor(std::string_view client_id, std::string_view channel,
                                                            std::uint64_t floor) = 0;
  [[nodiscard]] virtual std::uint64_t resume_floor(std::string_view client_id, std::string_view channel) const = 0;
  // The identity that owns `client_id`'s session (durable_sessions.hpp,
  // invariant 4), kept beside its floors; nullopt when none was saved.
  virtual tl::expected<void, HistoryError> put_session_owner(std::string_view client_id, std::string_view owner) = 0;
  [[nodiscard]] virtual std::optional<std::string> session_owner(std::string_view client_id) const = 0;
  // The client ids with at least one floor or an owner kept, each once
  // (sorted in LMDB).
  [[nodiscard]] virtual std::vector<std::string> session_clients() const = 0;
  // Drops every floor of `client_id` and its owner (its session expired:
  // --session-ttl), in one transaction; committed like an append.
  virtual tl::expected<void, HistoryError> erase_session(std::string_view client_id) = 0;
};

struct MemoryHistoryOptions {
  std::string epoch;  // empty: a new random one (new_history_epoch)
  // A cluster node's copy of the cluster's history (docs/cluster.md,
  // "History"): the cluster numbers every retained channel's messages in one
  // sequence, so a channel's offsets skip the other channels'. An append above
  // top then continues the channel (its messages are still (floor, top], with
  // holes that name no message of it); only the channel's first append sets
  // floor, to just below itself, as the cluster may have dropped older ones.
  bool sparse_offsets = false;
};

// A store in memory; `rules` decide which channels are retained and how much
// (first match wins).
[[nodiscard]] std::unique_ptr<HistoryStore> make_memory_history_store(std::vector<RetentionRule> rules,
                                                                      MemoryHistoryOptions options = {});

struct HistoryOptions {
  std::string dir;  // created if missing; must be empty or hold ringcast history
  FsyncMode fsync = FsyncMode::kBatch;
  std::size_t initial_map_bytes = std::size_t{64} << 20;
  std::size_t max_map_bytes = std::size_t{64} << 30;  // MDB_MAP_FULL past this is kFull
  std::vector<RetentionRule> rules;
  // The kernel's boot id, which tells a reboot from a process restart (the
  // epoch rule in docs/guarantees.md); tests point it at a file of their own.
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
};

// Opens or creates an LMDB history in options.dir. A directory that is not
// empty and holds no ringcast history (kForeign), a corrupt one (kCorrupt) or
// one of a newer format (kNewerFormat) is refused and left untouched.
[[nodiscard]] tl::expected<std::unique_ptr<HistoryStore>, HistoryError> open_lmdb_history_store(HistoryOptions options);

// A random 16-hex-digit epoch (std::random_device).
[[nodiscard]] std::string new_history_epoch();

}  // namespace ringcast::broker
