// The snapshot model behind ring-top: which rings exist, and for each a
// moment's view with rates computed against the previous refresh.
//
// Monitor owns read-only mappings of the rings it watches (BroadcastRing::open
// with read_only = true). It never registers a consumer, never claims the
// producer role and never writes to a mapping: watching cannot perturb a ring.
// Liveness comes from RingStatus (the owners' OFD locks, tested with
// F_OFD_GETLK, which takes no lock).
//
// Time is injected (MonitorOptions::clock), so rates and "time since the
// cursor last moved" are deterministic in tests.
//
// Thread safety: a Monitor is used by one thread at a time. Snapshots are
// plain values and may be copied anywhere.
//
// Costs: refresh() makes, per watched ring, one stat, one fstat and one fcntl
// per active consumer (RingStatus), and reads /proc/<pid>/comm for live
// owners; per watched directory, one readdir pass with a 12-byte pread of each
// regular file.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast::top {

using TimePoint = std::chrono::steady_clock::time_point;
using Clock = std::function<TimePoint()>;

struct ConsumerView {
  std::uint32_t index = 0;  // consumer id, 0..kMaxConsumers-1
  std::uint32_t pid = 0;    // owner_pid as registered (display only)
  std::string process;      // /proc/<pid>/comm of the owner while alive; for a dead owner
                            // the name last seen alive, empty if never seen alive
  bool alive = false;       // the owner's lock is held (RingStatus::owner_alive)
  // Positions count 64-byte slots: messages, on a ring of one slot per message
  // (max_message <= 52); a longer message takes several.
  std::uint64_t cursor = 0;                  // next position it will read
  std::uint64_t lag = 0;                     // positions published but not yet read
  double lag_pct = 0.0;                      // lag as % of capacity (above 100 only when lapped on a lossy ring)
  std::optional<double> recv_rate;           // positions/s since the previous refresh; empty on first sight
  double since_advance_s = 0.0;              // seconds since its cursor last moved
  bool since_advance_is_lower_bound = true;  // not seen moving yet: "at least" since_advance_s
  bool behind = false;                       // alive, and lag_pct >= the behind threshold (dead ones are DEAD)
};

enum class RingPresence : std::uint8_t {
  kLive,  // mapped and sampled in this refresh
  kGone,  // the file was removed, replaced, truncated, or (named rings) cannot be opened
};

struct RingView {
  std::uint64_t id = 0;  // stable while watched; a replaced file gets a new id
  std::string path;
  std::string name;    // last path component
  bool named = false;  // given on the command line (not found by a directory scan)
  RingPresence state = RingPresence::kLive;
  std::string gone_reason;     // "removed", "replaced", "truncated" or an open error
  std::uint64_t capacity = 0;  // slots; kept from the last live sample when gone
  bool lossy = false;
  bool wakeups = false;
  std::uint64_t max_message = 0;    // the largest payload the ring carries, bytes
  std::uint64_t producer_seq = 0;   // the producer's position (slots)
  std::uint64_t messages = 0;       // messages published
  std::uint64_t payload_bytes = 0;  // their payload bytes
  std::uint32_t producer_pid = 0;
  bool producer_alive = false;
  ProducerState producer = ProducerState::kNone;  // none, live, left (released the role) or dead
  std::string producer_process;                   // as ConsumerView::process
  bool half_written_slot = false;                 // a producer died mid-write (repaired by the next producer)
  bool producer_sleeping = false;                 // asleep in push_wait for room
  std::uint32_t sleeping_consumers = 0;           // consumers asleep in recv_wait
  std::uint64_t upstream_lost = 0;                // lost before the producer (NATS ingress gaps, docs/scale-out.md)
  std::uint64_t upstream_gaps = 0;
  std::optional<double> push_rate;  // messages/s since the previous refresh
  std::optional<double> byte_rate;  // payload bytes/s since the previous refresh
  std::uint64_t max_lag = 0;        // lag of the slowest active consumer
  double fill = 0.0;                // max_lag / capacity, clamped to [0, 1]
  std::size_t active_consumers = 0;
  std::size_t dead_consumers = 0;
  std::size_t behind_consumers = 0;
  bool blocked = false;                 // blocking ring whose slowest consumer is capacity behind:
                                        // the producer's next try_push returns full
  bool drained = false;                 // every active consumer has read everything (is_fully_drained)
  std::vector<ConsumerView> consumers;  // active entries, by index
};

struct Snapshot {
  std::vector<std::string> watched;  // the targets, for "no rings under ..."
  double behind_pct = 50.0;          // the threshold the views were computed with
  std::vector<RingView> rings;       // by path, then by id (a replaced ring's old entry first)
};

struct MonitorOptions {
  // Ring files or directories. Empty: kDefaultRingDir. A bare name that is not
  // a file here ("ticks") is looked up in kDefaultRingDir, like shm_open names.
  std::vector<std::string> targets;
  double behind_pct = 50.0;  // a consumer is "behind" from this lag % of capacity
  // How long a ring that went away stays listed as gone (named rings stay
  // listed until a ring is back at their path).
  std::chrono::nanoseconds gone_linger = std::chrono::seconds(10);
  Clock clock;  // empty: std::chrono::steady_clock::now
};

class Monitor {
 public:
  // Resolves the targets and opens every named ring. Fails with one message
  // per target that cannot be watched ("PATH: reason"): a named ring that does
  // not open, a directory that cannot be read.
  static tl::expected<Monitor, std::vector<std::string>> create(MonitorOptions options);

  Monitor(Monitor&&) noexcept;
  Monitor& operator=(Monitor&&) noexcept;
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  ~Monitor();

  // Rescans directories, notices rings that went away or were replaced, opens
  // new ones and samples every live ring. Rates compare against the previous
  // refresh, so the first snapshot of a ring has none. Never fails: a ring that
  // cannot be read any more is reported gone.
  [[nodiscard]] Snapshot refresh();

 private:
  struct Entry;
  struct Target {
    std::string path;
    bool directory = false;
  };
  explicit Monitor(MonitorOptions options);
  Entry* live_entry(const std::string& path) noexcept;
  [[nodiscard]] bool watching_file_at(const std::string& path) const noexcept;
  void check_still_there(Entry& e, TimePoint now);
  tl::expected<std::unique_ptr<Entry>, std::string> open_entry(const std::string& path, bool named);
  RingView sample(Entry& e, TimePoint now);

  MonitorOptions options_;
  std::vector<Target> targets_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::uint64_t next_id_ = 1;
};

// The comm name of a process ("" when it has exited or cannot be read).
[[nodiscard]] std::string process_name(std::uint32_t pid);

}  // namespace ringcast::top
