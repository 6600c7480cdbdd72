#include "top/model.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "ringcast/broadcast_ring.hpp"
#include "top/discovery.hpp"

namespace ringcast::top {
namespace {

// Owns one file descriptor; closing never throws and is never retried (a
// retried close(2) on Linux may close a descriptor another thread just got).
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) noexcept : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct ConsumerHistory {
  bool seen = false;
  std::uint32_t pid = 0;
  std::uint64_t prev_cursor = 0;
  TimePoint last_advance{};
  bool advance_observed = false;
  std::string process;  // the owner's name while it was alive, kept once it dies
};

}  // namespace

std::string process_name(std::uint32_t pid) {
  if (pid == 0) return {};
  std::ifstream comm(fmt::format("/proc/{}/comm", pid));
  std::string name;
  if (!comm || !std::getline(comm, name)) return {};
  return name;
}

struct Monitor::Entry {
  std::uint64_t id = 0;
  std::string path;
  bool named = false;
  // Our own descriptor of the very file that is mapped: its (dev, ino) tells a
  // replaced file from the one we watch, and its size tells a truncated one
  // (reading a mapping past the end of its file would raise SIGBUS).
  UniqueFd fd;
  dev_t dev = 0;
  ino_t ino = 0;
  std::optional<BroadcastRing> ring;  // empty once gone
  std::string gone_reason;
  TimePoint gone_since{};
  bool sampled = false;
  TimePoint prev_time{};
  std::uint64_t prev_messages = 0;
  std::uint64_t prev_bytes = 0;
  std::array<ConsumerHistory, kMaxConsumers> consumers{};
  RingView last;  // the last live view, shown (without consumers) once gone
};

Monitor::Monitor(MonitorOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = [] { return std::chrono::steady_clock::now(); };
}
Monitor::Monitor(Monitor&&) noexcept = default;
Monitor& Monitor::operator=(Monitor&&) noexcept = default;
Monitor::~Monitor() = default;

tl::expected<Monitor, std::vector<std::string>> Monitor::create(MonitorOptions options) {
  std::vector<std::string> args = options.targets;
  if (args.empty()) args.emplace_back(kDefaultRingDir);
  Monitor m(std::move(options));
  std::vector<std::string> problems;
  for (const std::string& arg : args) {
    std::string path = arg;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 && arg.find('/') == std::string::npos) {
      // A bare name, as given to open_shm ("ticks" for "/ticks").
      const std::string shm = fmt::format("{}/{}", kDefaultRingDir, arg);
      if (::stat(shm.c_str(), &st) == 0) path = shm;
    }
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      if (::access(path.c_str(), R_OK | X_OK) != 0) {
        problems.push_back(fmt::format("{}: cannot read directory: {}", path, std::strerror(errno)));
        continue;
      }
      m.targets_.push_back({path, true});
      continue;
    }
    if (m.watching_file_at(path)) continue;  // named twice
    auto entry = m.open_entry(path, true);
    if (!entry) {
      problems.push_back(std::move(entry).error());
      continue;
    }
    m.entries_.push_back(std::move(*entry));
    m.targets_.push_back({path, false});
  }
  if (!problems.empty()) return tl::unexpected(std::move(problems));
  return m;
}

Monitor::Entry* Monitor::live_entry(const std::string& path) noexcept {
  for (auto& e : entries_) {
    if (e->ring && e->path == path) return e.get();
  }
  return nullptr;
}

bool Monitor::watching_file_at(const std::string& path) const noexcept {
  // One file under two spellings ("./ticks" named, "/dev/shm/ticks" found by
  // a scan, a symlink) is one ring.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return std::any_of(entries_.begin(), entries_.end(), [&](const std::unique_ptr<Entry>& e) {
    return e->ring && e->dev == st.st_dev && e->ino == st.st_ino;
  });
}

tl::expected<std::unique_ptr<Monitor::Entry>, std::string> Monitor::open_entry(const std::string& path, bool named) {
  // O_NONBLOCK: a FIFO named by mistake must not hang the tool.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) return tl::unexpected(fmt::format("{}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return tl::unexpected(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return tl::unexpected(fmt::format("{}: not a regular file", path));
  // Map the file behind our descriptor, not whatever the path names a moment
  // later: /proc/self/fd/N reopens the same inode, so (dev, ino) above is the
  // identity of the mapped ring. Falls back to the path where /proc is absent.
  const OpenOptions ro{.read_only = true};
  auto ring = BroadcastRing::open(fmt::format("/proc/self/fd/{}", fd.get()), ro);
  if (!ring && ring.error().code == Errc::io_error && ring.error().sys_errno == ENOENT) {
    ring = BroadcastRing::open(path, ro);
  }
  if (!ring) return tl::unexpected(fmt::format("{}: {}", path, ring.error().message()));
  auto e = std::make_unique<Entry>();
  e->id = next_id_++;
  e->path = path;
  e->named = named;
  e->fd = std::move(fd);
  e->dev = st.st_dev;
  e->ino = st.st_ino;
  e->ring.emplace(std::move(*ring));
  e->last.id = e->id;
  e->last.path = path;
  e->last.name = base_name(path);
  e->last.named = named;
  e->last.capacity = e->ring->capacity();
  return e;
}

void Monitor::check_still_there(Entry& e, TimePoint now) {
  std::string reason;
  struct stat st {};
  struct stat own {};
  if (::stat(e.path.c_str(), &st) != 0) {
    reason = errno == ENOENT ? "removed" : std::strerror(errno);
  } else if (st.st_dev != e.dev || st.st_ino != e.ino) {
    reason = "replaced";
  } else if (::fstat(e.fd.get(), &own) != 0 ||
             static_cast<std::uint64_t>(own.st_size) <
                 (e.ring->separate_slots() ? layout::kHeaderBytes : layout::file_size(e.ring->capacity()))) {
    // Another process shrank the file under us. There is a window between this
    // check and the next read, so a truncation at that instant still raises
    // SIGBUS; ring files are never truncated by ringcast itself. (A separate
    // slots file is not watched: its ring file is the header alone.)
    reason = "truncated";
  }
  if (reason.empty()) return;
  e.gone_reason = std::move(reason);
  e.gone_since = now;
  e.ring.reset();
  e.fd.reset();
}

RingView Monitor::sample(Entry& e, TimePoint now) {
  const RingStatus st = e.ring->status();
  RingView v;
  v.id = e.id;
  v.path = e.path;
  v.name = base_name(e.path);
  v.named = e.named;
  v.state = RingPresence::kLive;
  v.capacity = st.capacity;
  v.lossy = (st.flags & kFlagLossy) != 0;
  v.wakeups = (st.flags & kFlagWakeups) != 0;
  v.max_message = st.max_message;
  v.producer_seq = st.producer_seq;
  v.messages = st.messages;
  v.payload_bytes = st.payload_bytes;
  v.producer_pid = st.producer_pid;
  v.producer_alive = st.producer_alive;
  v.producer = st.producer;
  // A pid of another pid namespace (another container) names some other process here.
  if (st.producer_alive && st.producer_pid_here) v.producer_process = process_name(st.producer_pid);
  v.half_written_slot = st.half_written_slot;
  v.producer_sleeping = st.producer_sleeping;
  v.sleeping_consumers = st.sleeping_consumers;
  v.upstream_lost = st.upstream_lost;
  v.upstream_gaps = st.upstream_gaps;

  // Rates from the producer's totals, not its position: a position counts
  // slots, and a message longer than 52 bytes takes several.
  const double dt = e.sampled ? seconds(now - e.prev_time) : 0.0;
  if (dt > 0.0 && st.messages >= e.prev_messages && st.payload_bytes >= e.prev_bytes) {
    v.push_rate = static_cast<double>(st.messages - e.prev_messages) / dt;
    v.byte_rate = static_cast<double>(st.payload_bytes - e.prev_bytes) / dt;
  }

  const double capacity = static_cast<double>(st.capacity);
  for (std::uint32_t id = 0; id < kMaxConsumers; ++id) {
    const ConsumerStatus& cs = st.consumers[id];
    ConsumerHistory& h = e.consumers[id];
    if (!cs.active) {
      h.seen = false;
      continue;
    }
    ConsumerView c;
    c.index = id;
    c.pid = cs.owner_pid;
    c.alive = cs.owner_alive;
    c.cursor = cs.cursor;
    c.lag = cs.lag;
    c.lag_pct = capacity > 0 ? 100.0 * static_cast<double>(cs.lag) / capacity : 0.0;
    // A new owner of the entry (another pid), or a cursor that moved back
    // (only a re-registration does that), starts a new history.
    if (!h.seen || h.pid != cs.owner_pid || cs.cursor < h.prev_cursor) {
      h = ConsumerHistory{true, cs.owner_pid, cs.cursor, now, false, {}};
    } else {
      if (dt > 0.0) c.recv_rate = static_cast<double>(cs.cursor - h.prev_cursor) / dt;
      if (cs.cursor != h.prev_cursor) {
        h.last_advance = now;
        h.advance_observed = true;
      }
      h.prev_cursor = cs.cursor;
    }
    // A dead owner's pid may already belong to an unrelated process: name it
    // only from what was seen while it lived.
    if (cs.owner_alive && cs.owner_pid_here) h.process = process_name(cs.owner_pid);
    c.process = h.process;
    c.since_advance_s = seconds(now - h.last_advance);
    c.since_advance_is_lower_bound = !h.advance_observed;
    c.behind = c.alive && cs.lag > 0 && c.lag_pct >= options_.behind_pct;

    ++v.active_consumers;
    if (!c.alive) ++v.dead_consumers;
    if (c.behind) ++v.behind_consumers;
    v.max_lag = std::max(v.max_lag, c.lag);
    v.consumers.push_back(std::move(c));
  }
  v.fill = capacity > 0 ? std::min(1.0, static_cast<double>(v.max_lag) / capacity) : 0.0;
  v.blocked = !v.lossy && v.active_consumers > 0 && v.max_lag >= st.capacity;
  v.drained = v.max_lag == 0;

  e.sampled = true;
  e.prev_time = now;
  e.prev_messages = st.messages;
  e.prev_bytes = st.payload_bytes;
  e.last = v;
  return v;
}

Snapshot Monitor::refresh() {
  const TimePoint now = options_.clock();
  for (auto& e : entries_) {
    if (e->ring) check_still_there(*e, now);
  }

  // Candidates: named files, then directory contents; a path named and also
  // found in a directory counts as named.
  std::vector<std::pair<std::string, bool>> candidates;
  for (const Target& t : targets_) {
    if (!t.directory) candidates.emplace_back(t.path, true);
  }
  for (const Target& t : targets_) {
    if (!t.directory) continue;
    for (std::string& p : discover_rings(t.path)) {
      const bool dup = std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) { return c.first == p; });
      if (!dup) candidates.emplace_back(std::move(p), false);
    }
  }
  for (const auto& candidate : candidates) {
    // Not a structured binding: clang 14 cannot capture those in a lambda.
    const std::string& path = candidate.first;
    const bool named = candidate.second;
    if (live_entry(path) != nullptr || watching_file_at(path)) continue;
    auto entry = open_entry(path, named);
    if (entry) {
      entries_.push_back(std::move(*entry));
      continue;
    }
    // A directory's file that does not open (still initialising, no
    // permission) is skipped silently. A named ring stays listed as gone.
    if (!named) continue;
    const bool listed = std::any_of(entries_.begin(), entries_.end(), [&](const auto& e) { return e->path == path; });
    if (!listed) {
      auto gone = std::make_unique<Entry>();
      gone->id = next_id_++;
      gone->path = path;
      gone->named = true;
      gone->gone_reason = std::move(entry).error();
      gone->gone_since = now;
      gone->last.id = gone->id;
      gone->last.path = path;
      gone->last.name = base_name(path);
      gone->last.named = true;
      entries_.push_back(std::move(gone));
    }
  }

  // Forget rings gone for long enough, except a named ring with nothing live
  // at its path: the operator asked for that one.
  std::erase_if(entries_, [&](const std::unique_ptr<Entry>& e) {
    if (e->ring) return false;
    if (now - e->gone_since < options_.gone_linger) return false;
    return !e->named || live_entry(e->path) != nullptr;
  });

  Snapshot snap;
  snap.behind_pct = options_.behind_pct;
  for (const Target& t : targets_) snap.watched.push_back(t.path);
  for (auto& e : entries_) {
    if (e->ring) {
      snap.rings.push_back(sample(*e, now));
      continue;
    }
    RingView v;
    v.id = e->id;
    v.path = e->path;
    v.name = e->last.name;
    v.named = e->named;
    v.state = RingPresence::kGone;
    v.gone_reason = e->gone_reason;
    v.capacity = e->last.capacity;
    v.lossy = e->last.lossy;
    v.wakeups = e->last.wakeups;
    v.max_message = e->last.max_message;
    v.producer_seq = e->last.producer_seq;
    snap.rings.push_back(std::move(v));
  }
  std::sort(snap.rings.begin(), snap.rings.end(),
            [](const RingView& a, const RingView& b) { return a.path != b.path ? a.path < b.path : a.id < b.id; });
  return snap;
}

}  // namespace ringcast::top
