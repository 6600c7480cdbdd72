// Setup, the producer role, consumers and the slow paths of BroadcastRing.
// The hot path is inline in include/ringcast/broadcast_ring.hpp; records are
// in record.cpp, the blocking waits in waiting.cpp.
//
// Mappings use mmap on a descriptor we own rather than Boost's mapped_region:
// the descriptor carries the liveness locks (ofd_lock.hpp), files are created
// with O_EXCL|O_NOFOLLOW and an exact mode, and nothing here may throw.
// Boost.Interprocess names POSIX shared-memory objects (create_shm/open_shm).
#include "ringcast/broadcast_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <utility>

#include <boost/interprocess/shared_memory_object.hpp>

#include "membarrier.hpp"
#include "ofd_lock.hpp"
#include "pid_namespace.hpp"
#include "timing.hpp"

namespace ringcast {
namespace {

namespace bip = boost::interprocess;

// How long a reader spins on a half-written slot before asking whether the
// producer is alive. A live producer finishes a slot in nanoseconds unless it
// is preempted; this bounds the wait without a system call per poll.
constexpr int kHalfWrittenSpins = 4096;

int close_keep_errno(int fd) noexcept {
  const int saved = errno;
  ::close(fd);
  return saved;
}

// Whether this process's light side of the sleep handshake must be a full
// fence: on wakeups rings (every side fences, no membarrier needed), when this
// process could not register for membarrier(2), and under TSan, which models
// neither membarrier nor a compiler barrier.
bool needs_light_fence(std::uint32_t flags) noexcept {
#if RINGCAST_TSAN
  (void)flags;
  return true;
#else
  return (flags & kFlagWakeups) != 0 || !detail::register_light_side();
#endif
}

bool valid_capacity(std::uint64_t capacity) noexcept { return capacity >= kMinCapacity && capacity <= kMaxCapacity; }

static_assert(kMinCapacity == 2 && kMaxCapacity == std::uint64_t{1} << 30, "the range in the texts below");

tl::unexpected<Error> capacity_out_of_range(const char* what, std::uint64_t capacity) noexcept {
  return tl::unexpected<Error>(Error{Errc::layout_mismatch, 0, what, capacity, 0});
}

// `ring`, its error naming `path` (Error::path).
Result<BroadcastRing> naming(Result<BroadcastRing> ring, const std::string& path) {
  if (!ring) ring.error().path = path;
  return ring;
}

std::uint32_t flags_of(const CreateOptions& options) noexcept {
  return (options.lossy ? kFlagLossy : 0U) | (options.wakeups ? kFlagWakeups : 0U) |
         (options.separate_slots ? kFlagSeparateSlots : 0U);
}

// Creates the file `path` with exactly `mode`, first unlinking a file there
// if `replace`. Returns its descriptor (O_RDWR).
Result<int> create_file(const std::string& path, mode_t mode, bool replace) {
  if (replace) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return make_error(Errc::io_error, "create: path is a directory", EISDIR);
      // unlink removes a symlink itself, never its target.
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return make_error(Errc::io_error, "create: unlink existing file", errno);
      }
    }
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) return make_error(Errc::already_exists, "create: path exists");
    return make_error(Errc::io_error, "create: open", errno);
  }
  // The mode must not depend on the caller's umask.
  if (::fchmod(fd, mode) != 0) {
    const int err = close_keep_errno(fd);
    ::unlink(path.c_str());
    return make_error(Errc::io_error, "create: fchmod", err);
  }
  return fd;
}

// Sizes a new file to `bytes` and allocates every block now: a ring larger
// than its filesystem's room (a 64 MB /dev/shm in a container) fails here,
// with ENOSPC, instead of SIGBUS in whichever process first touches a slot
// past the room (docs/containers.md).
Result<void> allocate(int fd, std::uint64_t bytes) {
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return make_error(Errc::io_error, "create: ftruncate", errno);
  // posix_fallocate returns the error number; it does not set errno.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    return make_error(Errc::io_error, "create: the ring does not fit its filesystem (posix_fallocate)", err);
  }
  return {};
}

tl::unexpected<Error> separate_slots_need_a_path(const char* what) noexcept {
  return make_error(Errc::io_error, what, EINVAL);
}

}  // namespace

// --- creation ----------------------------------------------------------------

Result<BroadcastRing> BroadcastRing::create(const std::string& path, std::uint64_t capacity,
                                            const CreateOptions& options) {
  return naming(
      [&]() -> Result<BroadcastRing> {
        if (!valid_capacity(capacity))
          return capacity_out_of_range("create: capacity out of range (2..1073741824 slots)", capacity);
        const auto fd = create_file(path, options.mode, options.replace);
        if (!fd) return tl::unexpected(fd.error());
        const std::string slots_path = path + kSlotsFileSuffix;
        int slots_fd = -1;
        if (options.separate_slots) {
          // Whoever may read the ring may read its slots; only the owner may
          // write them (docs/design.md, "Read-only readers").
          auto made = create_file(slots_path, options.mode & ~mode_t{S_IWGRP | S_IWOTH}, options.replace);
          if (!made) {
            ::close(*fd);
            ::unlink(path.c_str());
            if (made.error().code == Errc::already_exists)
              made.error().what = "create: the slots file (<path>.slots) exists";
            return tl::unexpected(made.error());
          }
          slots_fd = *made;
        }
        auto ring = init_fd(*fd, slots_fd, capacity, options);
        if (!ring) {
          ::unlink(path.c_str());
          if (slots_fd >= 0) ::unlink(slots_path.c_str());
        }
        return ring;
      }(),
      path);
}

Result<BroadcastRing> BroadcastRing::create_shm(const std::string& name, std::uint64_t capacity,
                                                const CreateOptions& options) {
  return naming(
      [&]() -> Result<BroadcastRing> {
        if (!valid_capacity(capacity))
          return capacity_out_of_range("create_shm: capacity out of range (2..1073741824 slots)", capacity);
        if (options.separate_slots) return separate_slots_need_a_path("create_shm: separate_slots needs create()");
        int fd = -1;
        try {
          if (options.replace) bip::shared_memory_object::remove(name.c_str());
          bip::permissions perms(static_cast<int>(options.mode));
          bip::shared_memory_object shm(bip::create_only, name.c_str(), bip::read_write, perms);
          fd = ::fcntl(shm.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0);
          if (fd < 0) return make_error(Errc::io_error, "create_shm: dup", errno);
        } catch (const bip::interprocess_exception& e) {
          if (e.get_error_code() == bip::already_exists_error) {
            return make_error(Errc::already_exists, "create_shm: name exists");
          }
          return make_error(Errc::io_error, "create_shm: shm_open", e.get_native_error());
        }
        auto ring = init_fd(fd, -1, capacity, options);
        if (!ring) bip::shared_memory_object::remove(name.c_str());
        return ring;
      }(),
      name);
}

Result<BroadcastRing> BroadcastRing::create_anonymous(std::uint64_t capacity, const CreateOptions& options) {
  if (!valid_capacity(capacity))
    return capacity_out_of_range("create_anonymous: capacity out of range (2..1073741824 slots)", capacity);
  if (options.separate_slots) return separate_slots_need_a_path("create_anonymous: separate_slots needs create()");
  BroadcastRing ring;
  if (auto r = ring.map_and_initialise(capacity, options); !r) return tl::unexpected(r.error());
  return ring;
}

Result<BroadcastRing> BroadcastRing::init_fd(int fd, int slots_fd, std::uint64_t capacity,
                                             const CreateOptions& options) {
  BroadcastRing ring;
  ring.fd_ = fd;  // owned by ring from here on
  const bool separate = slots_fd >= 0;
  auto r = allocate(fd, separate ? layout::kHeaderBytes : layout::file_size(capacity));
  if (r && separate) r = allocate(slots_fd, layout::slots_file_size(capacity));
  if (separate) {
    if (r) r = ring.map_slots_file(slots_fd, capacity, PROT_READ | PROT_WRITE, "create: mmap slots file");
    else ::close(slots_fd);
  }
  if (r) r = ring.map_and_initialise(capacity, options);
  if (!r) return tl::unexpected(r.error());
  return ring;
}

Result<void> BroadcastRing::map_slots_file(int slots_fd, std::uint64_t capacity, int prot, const char* what) {
  void* slots = ::mmap(nullptr, layout::slots_file_size(capacity), prot, MAP_SHARED, slots_fd, 0);
  const int err = close_keep_errno(slots_fd);  // the mapping keeps the file
  if (slots == MAP_FAILED) return make_error(Errc::io_error, what, err);
  slots_map_ = static_cast<std::byte*>(slots);
  slots_map_bytes_ = layout::slots_file_size(capacity);
  slots_read_only_ = (prot & PROT_WRITE) == 0;
  return {};
}

Result<void> BroadcastRing::set_geometry(std::uint64_t capacity, std::uint32_t flags, std::uint64_t max_message) {
  capacity_ = capacity;
  mask_ = std::has_single_bit(capacity) ? capacity - 1 : 0;
  flags_ = flags;
  max_message_ = max_message;
  block_ = layout::block_slots(max_message);
  records_ = block_ > 1;
  // Room for any message, whole 64-bit words, and at least an inline one.
  buffer_bytes_ = std::max<std::size_t>((max_message + 7) / 8 * 8, 56);
  if (records_ && (flags & kFlagLossy) != 0 && !read_only_) {
    // Untouched until a claim writes it: large rings cost address space only.
    staging_.reset(new (std::nothrow) std::byte[buffer_bytes_]);
    if (!staging_) return make_error(Errc::io_error, "create: claim buffer", ENOMEM);
  }
  return {};
}

Result<void> BroadcastRing::map_and_initialise(std::uint64_t capacity, const CreateOptions& options) {
  const std::uint64_t allowed = layout::max_message_for(capacity);
  const std::uint64_t max_message = options.max_message == 0
                                        ? std::min<std::uint64_t>(kDefaultMaxMessage, allowed)
                                        : std::max<std::uint64_t>(options.max_message, kMaxPayload);
  if (max_message > allowed) {
    return tl::unexpected(Error{Errc::payload_too_large, 0,
                                "create: max_message is larger than the capacity allows (a message may "
                                "take half the ring)",
                                max_message, allowed});
  }
  if (auto r = set_geometry(capacity, flags_of(options), max_message); !r) return r;
  // The slots file, if separate, is mapped already (init_fd).
  map_bytes_ = slots_map_ != nullptr ? layout::kHeaderBytes : layout::file_size(capacity);
  const int map_flags = fd_ >= 0 ? MAP_SHARED : (MAP_SHARED | MAP_ANONYMOUS);
  void* base = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, map_flags, fd_, 0);
  if (base == MAP_FAILED) {
    map_bytes_ = 0;
    return make_error(Errc::io_error, "create: mmap", errno);
  }
  base_ = static_cast<std::byte*>(base);
  header_ = reinterpret_cast<layout::RingHeader*>(base_);
  slots_ = reinterpret_cast<layout::Slot*>(slots_map_ != nullptr ? slots_map_ : base_ + layout::kHeaderBytes);
  reap_on_full_ = options.reap_on_full;
  reap_clock_ = options.reap_clock != nullptr ? options.reap_clock : detail::monotonic_ns;
  light_fence_ = needs_light_fence(flags_);

  // The file is zero-filled by ftruncate/mmap: slots read as "never written"
  // (version 0) and every consumer entry as free. Fill the header, then take
  // the producer role, then publish the magic last so that an opener that sees
  // the magic sees a complete header (the Aeron attach handshake).
  layout::ProducerLine& p = producer();
  // relaxed (these four): published by the release store of the magic below.
  p.layout_version.store(kLayoutVersion, std::memory_order_relaxed);
  p.slot_size.store(static_cast<std::uint32_t>(kSlotBytes), std::memory_order_relaxed);
  p.capacity.store(capacity, std::memory_order_relaxed);
  p.flags.store(flags_, std::memory_order_relaxed);
  p.max_message.store(static_cast<std::uint32_t>(max_message_), std::memory_order_relaxed);
  p.block_slots.store(static_cast<std::uint32_t>(block_), std::memory_order_relaxed);
  if (options.claim_producer) {
    if (auto r = claim_producer(); !r) return r;
  }
  // release: pairs with the acquire load of the magic in attach_fd.
  p.magic.store(kMagic, std::memory_order_release);
  return {};
}

// --- opening -----------------------------------------------------------------

Result<BroadcastRing> BroadcastRing::open(const std::string& path, const OpenOptions& options) {
  // O_NONBLOCK: opening a FIFO must not wait for its other end (attach_fd
  // then refuses it as not a regular file); O_NOCTTY: nor may opening a
  // terminal make it ours. Neither changes anything for a regular file.
  const int fd = ::open(path.c_str(), (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return naming(make_error(Errc::io_error, "open", errno), path);
  const std::string slots_path = path + kSlotsFileSuffix;
  return naming(attach_fd(fd, "open", options, &slots_path), path);
}

Result<void> BroadcastRing::remove(const std::string& path) {
  // Only remove what is recognisably a ring: a typo must not delete a file.
  auto ring = open(path, {.read_only = true});
  if (!ring) return tl::unexpected(ring.error());
  const bool separate = ring->separate_slots();
  const auto failed = [&](const char* what) {
    Error e{Errc::io_error, errno, what};
    e.path = path;
    return tl::unexpected<Error>(std::move(e));
  };
  if (::unlink(path.c_str()) != 0) return failed("remove: unlink");
  if (separate && ::unlink((path + kSlotsFileSuffix).c_str()) != 0) return failed("remove: unlink the slots file");
  return {};
}

Result<BroadcastRing> BroadcastRing::open_shm(const std::string& name, const OpenOptions& options) {
  return naming(
      [&]() -> Result<BroadcastRing> {
        int fd = -1;
        try {
          bip::shared_memory_object shm(bip::open_only, name.c_str(),
                                        options.read_only ? bip::read_only : bip::read_write);
          fd = ::fcntl(shm.get_mapping_handle().handle, F_DUPFD_CLOEXEC, 0);
          if (fd < 0) return make_error(Errc::io_error, "open_shm: dup", errno);
        } catch (const bip::interprocess_exception& e) {
          return make_error(Errc::io_error, "open_shm: shm_open", e.get_native_error());
        }
        return attach_fd(fd, "open_shm", options, nullptr);
      }(),
      name);
}

Result<void> BroadcastRing::remove_shm(const std::string& name) {
  if (!bip::shared_memory_object::remove(name.c_str())) {
    return make_error(Errc::io_error, "remove_shm", ENOENT);
  }
  return {};
}

Result<BroadcastRing> BroadcastRing::attach_fd(int fd, const char* what, const OpenOptions& options,
                                               const std::string* slots_path) {
  BroadcastRing ring;
  ring.fd_ = fd;
  ring.read_only_ = options.read_only;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(Errc::io_error, what, errno);
  if (!S_ISREG(st.st_mode)) {
    return make_error(Errc::layout_mismatch,
                      "open: not a ringcast ring (not a regular file: a directory, FIFO or device)");
  }
  const auto file_bytes = static_cast<std::uint64_t>(st.st_size);
  if (file_bytes < layout::kHeaderBytes)
    return make_error(Errc::layout_mismatch, "open: not a ringcast ring (file too small for a header)");

  // Map the header alone first: its capacity decides how much more to map.
  const int prot = options.read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  void* head = ::mmap(nullptr, layout::kHeaderBytes, prot, MAP_SHARED, fd, 0);
  if (head == MAP_FAILED) return make_error(Errc::io_error, "open: mmap header", errno);
  const auto* header = static_cast<const layout::RingHeader*>(head);
  const layout::ProducerLine& p = header->producer;
  // acquire: pairs with the creator's release store of the magic; the fields
  // below were written before it.
  const std::uint64_t magic = p.magic.load(std::memory_order_acquire);
  // relaxed (these four): ordered after the acquire load of the magic.
  const std::uint32_t version = p.layout_version.load(std::memory_order_relaxed);
  const std::uint32_t slot_size = p.slot_size.load(std::memory_order_relaxed);
  const std::uint64_t capacity = p.capacity.load(std::memory_order_relaxed);
  const std::uint32_t flags = p.flags.load(std::memory_order_relaxed);
  const std::uint32_t max_message = p.max_message.load(std::memory_order_relaxed);
  const std::uint32_t block = p.block_slots.load(std::memory_order_relaxed);
  ::munmap(head, layout::kHeaderBytes);

  if (magic == 0) return make_error(Errc::not_ready, "open: creator has not published the header yet");
  if (magic != kMagic) return make_error(Errc::layout_mismatch, "open: bad magic (not a ringcast ring)");
  if (version != kLayoutVersion) return make_mismatch("open: unsupported layout version", version, kLayoutVersion);
  if (slot_size != kSlotBytes) return make_mismatch("open: slot size is not 64", slot_size, kSlotBytes);
  if ((flags & ~kKnownFlags) != 0) return make_error(Errc::layout_mismatch, "open: unknown flags");
  if (!valid_capacity(capacity))
    return capacity_out_of_range("open: capacity out of range (2..1073741824 slots)", capacity);
  const bool separate = (flags & kFlagSeparateSlots) != 0;
  if (!separate && file_bytes < layout::file_size(capacity)) {
    return make_mismatch("open: file smaller than its capacity needs", file_bytes, layout::file_size(capacity));
  }
  if (options.expected_capacity != 0 && options.expected_capacity != capacity) {
    return make_mismatch("open: capacity differs from the expected one", capacity, options.expected_capacity);
  }
  if (max_message < kMaxPayload || max_message > layout::max_message_for(capacity)) {
    return make_mismatch("open: max_message out of range for the capacity", max_message,
                         layout::max_message_for(capacity));
  }
  if (block != layout::block_slots(max_message)) {
    return make_mismatch("open: block_slots disagrees with max_message", block, layout::block_slots(max_message));
  }
  if (auto r = ring.set_geometry(capacity, flags, max_message); !r) return tl::unexpected(r.error());

  if (separate) {
    if (slots_path == nullptr) {
      return make_error(Errc::layout_mismatch, "open_shm: the ring's slots are in a separate file; open it by path");
    }
    // Read-write where this process may write the slots file (a producer);
    // else read-only, as read_only_slots (a reader: its mode lets only the
    // producer's user write it).
    constexpr int kFlags = O_CLOEXEC | O_NONBLOCK | O_NOCTTY;  // as open() above
    const bool try_write = !options.read_only && !options.read_only_slots;
    int slots_fd = try_write ? ::open(slots_path->c_str(), O_RDWR | kFlags) : -1;
    const bool writable = slots_fd >= 0;
    if (!writable && (!try_write || errno == EACCES || errno == EPERM || errno == EROFS)) {
      slots_fd = ::open(slots_path->c_str(), O_RDONLY | kFlags);
    }
    if (slots_fd < 0) return make_error(Errc::io_error, "open: the slots file (<path>.slots)", errno);
    struct stat slots_st {};
    if (::fstat(slots_fd, &slots_st) != 0 || !S_ISREG(slots_st.st_mode) ||
        static_cast<std::uint64_t>(slots_st.st_size) < layout::slots_file_size(capacity)) {
      const auto found = S_ISREG(slots_st.st_mode) ? static_cast<std::uint64_t>(slots_st.st_size) : 0;
      ::close(slots_fd);
      return make_mismatch("open: the slots file (<path>.slots) is smaller than the capacity needs, or not a file",
                           found, layout::slots_file_size(capacity));
    }
    const int slots_prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
    if (auto r = ring.map_slots_file(slots_fd, capacity, slots_prot, "open: mmap the slots file"); !r) {
      return tl::unexpected(r.error());
    }
  }

  const bool slots_read_only = !separate && options.read_only_slots && !options.read_only;
  // With read-only slots, the writable mapping is the header's pages alone;
  // with separate slots, the ring file is the header.
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  ring.map_bytes_ = separate          ? layout::kHeaderBytes
                    : slots_read_only ? (layout::kHeaderBytes + page - 1) / page * page
                                      : layout::file_size(capacity);
  void* base = ::mmap(nullptr, ring.map_bytes_, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    ring.map_bytes_ = 0;
    return make_error(Errc::io_error, "open: mmap", errno);
  }
  ring.base_ = static_cast<std::byte*>(base);
  ring.header_ = reinterpret_cast<layout::RingHeader*>(ring.base_);
  ring.slots_ = reinterpret_cast<layout::Slot*>(separate ? ring.slots_map_ : ring.base_ + layout::kHeaderBytes);
  if (slots_read_only) {
    void* all = ::mmap(nullptr, layout::file_size(capacity), PROT_READ, MAP_SHARED, fd, 0);
    if (all == MAP_FAILED) return make_error(Errc::io_error, "open: mmap slots read-only", errno);
    ring.slots_map_ = static_cast<std::byte*>(all);
    ring.slots_map_bytes_ = layout::file_size(capacity);
    ring.slots_ = reinterpret_cast<layout::Slot*>(ring.slots_map_ + layout::kHeaderBytes);
    ring.slots_read_only_ = true;
  }
  ring.reap_on_full_ = options.reap_on_full;
  ring.reap_clock_ = options.reap_clock != nullptr ? options.reap_clock : detail::monotonic_ns;
  // A read-only handle neither pushes nor receives: it has no light side.
  ring.light_fence_ = options.read_only || needs_light_fence(flags);
  return ring;
}

// --- lifetime ----------------------------------------------------------------

BroadcastRing::BroadcastRing(BroadcastRing&& other) noexcept { *this = std::move(other); }

BroadcastRing& BroadcastRing::operator=(BroadcastRing&& other) noexcept {
  if (this == &other) return *this;
  close();
  base_ = std::exchange(other.base_, nullptr);
  map_bytes_ = std::exchange(other.map_bytes_, 0);
  slots_map_ = std::exchange(other.slots_map_, nullptr);
  slots_map_bytes_ = std::exchange(other.slots_map_bytes_, 0);
  fd_ = std::exchange(other.fd_, -1);
  read_only_ = other.read_only_;
  slots_read_only_ = other.slots_read_only_;
  header_ = std::exchange(other.header_, nullptr);
  slots_ = std::exchange(other.slots_, nullptr);
  capacity_ = other.capacity_;
  mask_ = other.mask_;
  flags_ = other.flags_;
  max_message_ = other.max_message_;
  block_ = other.block_;
  records_ = other.records_;
  reap_on_full_ = other.reap_on_full_;
  light_fence_ = other.light_fence_;
  push_wait_ = other.push_wait_;
  staging_ = std::move(other.staging_);
  buffer_bytes_ = other.buffer_bytes_;
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    local_[id].wait = other.local_[id].wait;
    local_[id].stable_from = other.local_[id].stable_from;
    local_[id].view_next = other.local_[id].view_next;
    local_[id].buffer = std::move(other.local_[id].buffer);
  }
  is_producer_ = std::exchange(other.is_producer_, false);
  seq_ = other.seq_;
  extra_slots_ = other.extra_slots_;
  payload_bytes_ = other.payload_bytes_;
  intent_ = other.intent_;
  stamp_below_ = other.stamp_below_;
  cached_min_ = other.cached_min_;
  next_reap_ns_ = other.next_reap_ns_;
  reap_clock_ = other.reap_clock_;
  fenced_ = other.fenced_;
  quiet_publishes_ = other.quiet_publishes_;
  last_wake_ns_ = other.last_wake_ns_;
  last_yield_ns_ = other.last_yield_ns_;
  wake_policy_ = other.wake_policy_;
  doorbells_ = std::move(other.doorbells_);
  // relaxed: the moved-from handle is not in use (move requires exclusive access).
  late_wakeups_.store(other.late_wakeups_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  waiter_slice_us_.store(other.waiter_slice_us_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  // relaxed: a handle is not used while it is moved (the caller's duty), and
  // owned_ is this handle's own bookkeeping, not part of the shared protocol.
  owned_.store(other.owned_.exchange(0, std::memory_order_relaxed), std::memory_order_relaxed);
  return *this;
}

BroadcastRing::~BroadcastRing() { close(); }

void BroadcastRing::close() noexcept {
  if (base_ != nullptr) {
    for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
      if (owns(id)) (void)unregister_consumer(id);
    }
    release_producer();
    ::munmap(base_, map_bytes_);
    base_ = nullptr;
    header_ = nullptr;
  }
  // Mapped before base_ on creation and on opening a ring with separate slots.
  if (slots_map_ != nullptr) ::munmap(slots_map_, slots_map_bytes_);
  slots_map_ = nullptr;
  slots_ = nullptr;
  if (fd_ >= 0) ::close(fd_);  // drops any lock this handle still holds
  fd_ = -1;
}

// --- producer role -----------------------------------------------------------

Result<void> BroadcastRing::claim_producer() {
  if (is_producer_) return {};
  if (read_only_) return make_error(Errc::not_producer, "claim_producer: ring opened read-only");
  if (slots_read_only_) {
    return make_error(Errc::not_producer,
                      "claim_producer: a reader with read-only slots (read_only_slots, or no write permission on "
                      "the slots file)");
  }
  if (fd_ >= 0) {
    if (const int err = detail::try_lock(fd_, detail::kProducerLock); err != 0) {
      if (err == EAGAIN) return make_error(Errc::producer_busy, "claim_producer: another producer is live");
      return make_error(Errc::io_error, "claim_producer: fcntl", err);
    }
  }
  // We hold the role, so nobody else writes slots or producer_seq. Resume after
  // the last committed message: a producer that died inside a batch may have
  // committed slots past the producer_seq it published, and consumers may
  // already have read them, so scan forward by version (invariant 2).
  layout::ProducerLine& p = producer();
  // acquire: pairs with the previous producer's release store in publish().
  std::uint64_t seq = p.producer_seq.load(std::memory_order_acquire);
  for (std::uint64_t n = 0; n < capacity_;) {
    const layout::Slot& s = slot(seq);
    // acquire: pairs with the previous producer's committing release store of
    // the version in write_slot or commit_record.
    if (s.version.load(std::memory_order_acquire) != 2 * seq + 2) break;
    // relaxed: ordered by the acquire load above. A record is stepped over
    // whole (invariant 8); a header that claims to cross its block is damage:
    // stop there, as at any slot that is not committed.
    const std::uint64_t w0 = s.words[0].load(std::memory_order_relaxed);
    std::uint64_t step = 1;
    if ((w0 & kRecordBit) != 0) {
      step = w0 & kRecordSlotsMask;
      if (step == 0 || step > room_before_boundary(seq)) break;
    }
    seq += step;
    n += step;
  }
  layout::Slot& next = slot(seq);
  // relaxed: we hold the role, so nobody else writes versions now (invariant 1);
  // the previous producer's stores are ordered by the acquire loads above.
  if (next.version.load(std::memory_order_relaxed) == 2 * seq + 1) {
    // Half-written by a dead producer. 2*seq is "older than seq" for readers
    // waiting for seq (they see empty) and "newer than seq - capacity" for a
    // lapped reader (it sees lapped), and matches no reader's expectation, so
    // the torn bytes can never be returned. release: pairs with the acquire
    // load of the version in read_slot, like write_slot's commit.
    next.version.store(2 * seq, std::memory_order_release);
  }
  seq_ = seq;
  // relaxed (these three): written only by producers, the previous one
  // ordered before us by the producer lock. The intent never moves back: a
  // lapped reader validates against it, and the previous producer may have
  // written up to it (an open claim) before it died.
  layout::TailLine& tail = header_->tail;
  intent_ = std::max(tail.write_intent.load(std::memory_order_relaxed), seq);
  if (records_) tail.write_intent.store(intent_, std::memory_order_relaxed);
  // A previous producer may have left record bytes in any slot: check every
  // stamp for a lap, by the end of which we have written every slot.
  stamp_below_ = records_ ? seq + capacity_ : 0;
  extra_slots_ = p.extra_slots.load(std::memory_order_relaxed);
  payload_bytes_ = p.payload_bytes.load(std::memory_order_relaxed);
  // A previous producer may have left fenced mode on: consumers that see the
  // bit skip their membarrier, so keep fencing until leave_fenced() clears it.
  // acquire: pairs with the release CAS that set it (end_epoch()).
  fenced_ = (header_->data_wait.signal.load(std::memory_order_acquire) & kSignalFenced) != 0;
  quiet_publishes_ = 0;
  // 0 is a lower bound on every cursor; it makes the first push past
  // `capacity` rescan the consumers. (Starting at `seq` would let a new
  // producer overwrite the slots of a consumer lagging behind the old one.)
  cached_min_ = 0;
  // The previous producer's doorbell confirmations were its own: a WaitSet
  // sleeps on our members' lines too until we ring (ring_doorbells).
  // relaxed: a WaitSet that read a confirmation before this store is the
  // window docs/layout.md, "Doorbell", bounds.
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) consumer(id).doorbell_rung.store(0, std::memory_order_relaxed);
  // relaxed: display only (ring-top); no protocol reads it.
  p.producer_pid.store(static_cast<std::uint32_t>(::getpid()), std::memory_order_relaxed);
  header_->tail.producer_pidns.store(detail::own_pid_namespace(), std::memory_order_relaxed);
  // release: pairs with the acquire loads of producer_seq, as in publish().
  p.producer_seq.store(seq, std::memory_order_release);
  is_producer_ = true;
  return {};
}

void BroadcastRing::release_producer() noexcept {
  if (!is_producer_) return;
  is_producer_ = false;
  for (detail::DoorbellLink& link : doorbells_) link.reset();
  // relaxed: display only (status()); 0 with a published position is a
  // producer that left, not one that died holding the role.
  producer().producer_pid.store(0, std::memory_order_relaxed);
  if (fd_ >= 0) detail::unlock(fd_, detail::kProducerLock);
}

Errc BroadcastRing::claim_slow() noexcept {
  auto r = claim_producer();
  return r ? Errc::ok : r.error().code;
}

Errc BroadcastRing::full_slow(std::uint64_t slots) noexcept {
  // Invariant 10: a consumer registering after this scan's fence reads at
  // least this intent into its stable_from, so the positions the scan's
  // minimum lets us overwrite without seeing it (below that minimum <= seq_)
  // are below its stable_from. relaxed: ordered before the fence below.
  if (records_ && seq_ > intent_) {
    intent_ = seq_;
    header_->tail.write_intent.store(seq_, std::memory_order_relaxed);
  }
  // seq_cst fence: Dekker with register_consumer (it stores state=active, fences,
  // then reads producer_seq). Either this scan sees the new consumer, or the new
  // consumer starts at a position >= every position this scan allows us to fill.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::uint64_t min = seq_;
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    const layout::ConsumerEntry& c = consumer(id);
    // acquire: pairs with the release store of state in register_consumer.
    if (c.state.load(std::memory_order_acquire) != kConsumerActive) continue;
    // acquire: pairs with advance_cursor's release store (invariant 3).
    const std::uint64_t cursor = c.cursor.load(std::memory_order_acquire);
    if (cursor < min) min = cursor;
  }
  cached_min_ = min;
  if (seq_ + slots - min <= capacity_) return Errc::ok;
  if (reap_on_full_ && fd_ >= 0) {
    const std::int64_t now = reap_clock_();
    if (now >= next_reap_ns_) {
      next_reap_ns_ = now + kReapOnFullIntervalNs;
      auto reaped = reap_dead_consumers();
      if (reaped && *reaped > 0) return full_slow(slots);
    }
  }
  return Errc::full;
}

// --- consumers ---------------------------------------------------------------

Result<ConsumerId> BroadcastRing::register_consumer(StartAt start) {
  if (read_only_) return make_error(Errc::io_error, "register_consumer: ring opened read-only", EROFS);
  layout::ProducerLine& p = producer();
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    layout::ConsumerEntry& c = consumer(id);
    const std::uint32_t bit = 1U << id;
    // relaxed: a hint only; the fetch_or below decides.
    if ((owned_.load(std::memory_order_relaxed) & bit) != 0) continue;
    // Reserve the id within this handle first: threads of one handle share its
    // open file description, so the lock below cannot tell them apart. The
    // bit also hands local_[id] from thread to thread within this handle:
    // acquire pairs with the release of every fetch_and that gives the bit
    // back, so we see the previous holder's writes to local_[id]. The shared
    // entry itself is handed over by the lock or the state CAS, not this word.
    if ((owned_.fetch_or(bit, std::memory_order_acquire) & bit) != 0) continue;
    ConsumerLocal& local = local_[id];
    if (!local.buffer) {
      // Views and drain copy into it where they cannot read in place; kept
      // for the id's next registrant through this handle.
      local.buffer.reset(new (std::nothrow) std::byte[buffer_bytes_]);
      if (!local.buffer) {
        owned_.fetch_and(~bit, std::memory_order_release);
        return make_error(Errc::io_error, "register_consumer: copy buffer", ENOMEM);
      }
    }
    if (fd_ >= 0) {
      // The entry's lock serialises its owners across handles and processes:
      // whoever holds it owns the entry. An entry still marked active whose
      // lock we could take belonged to a process that died without
      // unregistering: it is reused.
      const int err = detail::try_lock(fd_, detail::consumer_lock(id));
      if (err != 0) {
        owned_.fetch_and(~bit, std::memory_order_release);
        if (err == EAGAIN) continue;
        return make_error(Errc::io_error, "register_consumer: fcntl", err);
      }
    } else {
      std::uint32_t expected = kConsumerFree;
      // acquire: pairs with the release store of kConsumerFree in
      // unregister_consumer, so we see the previous owner's final stores; the
      // entry is ours after this.
      if (!c.state.compare_exchange_strong(expected, kConsumerActive, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
        owned_.fetch_and(~bit, std::memory_order_release);
        continue;
      }
    }
    // latest: start conservatively at the published position, become visible,
    // then move to the position read after the seq_cst fence (Dekker with
    // full_slow). oldest: start at the oldest message still in the ring and
    // stay there (invariant 7, docs/memory-ordering.md, "Joining at the
    // oldest message"). The cursor is stored before the state, so the first
    // scan that sees the entry active already holds the producer at it.
    // acquire load: pairs with the release store in publish(); for oldest it
    // is what makes the slots below `published` committed for our reads
    // (relaxed would do for latest: any value <= the final one is safe).
    const std::uint64_t published = p.producer_seq.load(std::memory_order_acquire);
    // oldest: the first record start at or after published - capacity, a
    // block boundary (invariant 8; below published, as a block is at most
    // half the ring).
    const std::uint64_t first = start == StartAt::kOldest && published >= capacity_
                                    ? next_boundary(published - capacity_)
                                : start == StartAt::kOldest ? 0
                                                            : published;
    // A previous owner that died inside a WaitSet left its doorbell (a
    // cleanly freed entry names none).
    clear_doorbell(id, true);
    // relaxed store: published by the release store of state below.
    c.cursor.store(first, std::memory_order_relaxed);
    // relaxed: display only (ring-top); no protocol reads it.
    c.owner_pid.store(static_cast<std::uint32_t>(::getpid()), std::memory_order_relaxed);
    c.owner_pidns.store(detail::own_pid_namespace(), std::memory_order_relaxed);
    // release: a producer that acquire-loads state=active sees the cursor above.
    c.state.store(kConsumerActive, std::memory_order_release);
    // seq_cst fence: pairs with the seq_cst fence in full_slow (Dekker). Every
    // scan after it in the total order sees this entry with a cursor >= first.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (start == StartAt::kLatest) {
      // relaxed load: ordered after the state store by the fence above.
      // release store: pairs with full_slow's acquire load of the cursor.
      c.cursor.store(p.producer_seq.load(std::memory_order_relaxed), std::memory_order_release);
    }
    // Invariant 10. relaxed: ordered after the state store by the fence
    // above. A scan ordered before our fence stored, before its own fence, an
    // intent at least the producer's position then, so we read at least that
    // ([atomics.fences]: seq_cst fences order it), and its cached minimum (at
    // most that position) lets the producer write only below the minimum plus
    // `capacity`: it overwrites positions below this value at most. From
    // here on, every overwrite of our slots waits for a scan that sees us.
    // A ring without records keeps no intent and needs none: each slot's
    // version guards it. A lossy ring can lap anyone anywhere.
    local.stable_from = !records_                    ? 0
                        : (flags_ & kFlagLossy) != 0 ? ~std::uint64_t{0}
                                                     : header_->tail.write_intent.load(std::memory_order_relaxed);
    local.view_next = 0;
    local.upstream_lost_seen = 0;
    // oldest: the cursor stays at `first`, possibly below the producer's
    // cached minimum until its next scan (invariant 7). No re-validation is
    // needed here: every receive accepts slot `seq` only when its version is
    // exactly 2*seq+2 before and after the copy (read_slot), so a slot
    // overwritten since `first` was chosen, or while it is copied (a later
    // lap's odd version is above 2*seq+1), is reported as lapped, and
    // recv_slow moves the cursor forward past it, never back.
    return id;
  }
  return make_error(Errc::no_consumer_slot, "register_consumer: all 16 entries are taken");
}

Errc BroadcastRing::unregister_consumer(ConsumerId id) noexcept {
  if (!owns(id)) return Errc::invalid_consumer;
  clear_doorbell(id, false);
  // release: our last cursor store and slot reads happen-before a later
  // registrant's acquire (CAS or lock) of the entry, and the producer's
  // acquire load of state in full_slow.
  consumer(id).state.store(kConsumerFree, std::memory_order_release);
  if (fd_ >= 0) detail::unlock(fd_, detail::consumer_lock(id));
  // Last: until the bit clears no other thread of this handle can take the id,
  // so none can take the lock (its owner is this open file description, shared
  // by all our threads) just before the unlock above drops it. release: hands
  // local_[id] to that next registrant (the acquire fetch_or in
  // register_consumer).
  owned_.fetch_and(~(1U << id), std::memory_order_release);
  wake_producer_after_free();
  return Errc::ok;
}

Result<std::size_t> BroadcastRing::reap_dead_consumers() {
  if (fd_ < 0) return std::size_t{0};  // anonymous rings live and die with their process
  if (read_only_) return make_error(Errc::io_error, "reap_dead_consumers: ring opened read-only", EROFS);
  std::size_t reaped = 0;
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    layout::ConsumerEntry& c = consumer(id);
    // acquire: pairs with the release store of state in register_consumer.
    if (owns(id) || c.state.load(std::memory_order_acquire) != kConsumerActive) continue;
    // Taking the lock proves its owner is gone; a live owner keeps us out.
    const int err = detail::try_lock(fd_, detail::consumer_lock(id));
    if (err == EAGAIN) continue;
    if (err != 0) return make_error(Errc::io_error, "reap_dead_consumers: fcntl", err);
    // acquire: pairs with the release stores of state in register_consumer and
    // unregister_consumer (another reaper may have freed it meanwhile).
    if (c.state.load(std::memory_order_acquire) == kConsumerActive) {
      clear_doorbell(id, true);
      // release: as in unregister_consumer, for a later registrant.
      c.state.store(kConsumerFree, std::memory_order_release);
      ++reaped;
    }
    detail::unlock(fd_, detail::consumer_lock(id));
  }
  if (reaped > 0) wake_producer_after_free();
  return reaped;
}

RecvResult BroadcastRing::recv_slow(ConsumerId id, std::uint64_t seq, ReadOutcome outcome, std::byte* out) noexcept {
  for (int spins = 0;; ++spins) {
    switch (outcome) {
      case ReadOutcome::kOk:  // only reached through the re-read below
      case ReadOutcome::kRecord:
        break;
      case ReadOutcome::kNotYet:
        // On a ring of records the inner bytes of a later lap's record can
        // read as "not yet written" (invariant 9 stamps only the head), so a
        // reader that can be lapped (any reader of a lossy ring, one inside
        // its registration window) asks the producer's intent: past
        // seq + capacity, our slot has been reused. relaxed: the acquire load
        // of the version that saw such bytes already orders the intent the
        // producer stored before writing them (begin_write's fence).
        if (lappable(id, seq) && header_->tail.write_intent.load(std::memory_order_relaxed) > seq + capacity_) {
          outcome = ReadOutcome::kOverwritten;
          continue;
        }
        return {Errc::empty};
      case ReadOutcome::kCorrupt:
        return {Errc::layout_mismatch};
      case ReadOutcome::kOverwritten: {
        // Lapped: resume at the oldest message that cannot be overwritten
        // before we read it. The slot held a later lap, so producer_seq is at
        // least seq + capacity once that lap is published; never move back.
        // acquire: pairs with the producer's release store in publish().
        std::uint64_t published = producer().producer_seq.load(std::memory_order_acquire);
        // On a ring of records the producer may be writing past it: the
        // oldest intact record is then found from its intent (invariant 9),
        // at a position that starts a record in every lap. relaxed: a hint;
        // the next read validates whatever is there.
        if (records_) published = std::max(published, header_->tail.write_intent.load(std::memory_order_relaxed));
        const std::uint64_t oldest = published >= capacity_ ? published - capacity_ + 1 : 0;
        const std::uint64_t resume = next_boundary(std::max(seq + 1, oldest));
        advance_cursor(id, resume);
        return {Errc::lapped, 0, resume - seq};
      }
      case ReadOutcome::kWriting:
        if (spins >= kHalfWrittenSpins) {
          const bool alive = is_producer_ || lock_is_held(detail::kProducerLock);
          return {alive ? Errc::stalled : Errc::producer_dead};
        }
        detail::cpu_relax();
        break;
    }
    std::uint32_t length = 0;
    std::uint64_t w0 = 0;
    outcome = read_slot(seq, out, length, w0, lappable(id, seq));
    // the caller advances the cursor (and reads a record's bytes)
    if (outcome == ReadOutcome::kOk || outcome == ReadOutcome::kRecord) return {Errc::ok, length, w0};
  }
}

// --- observers ---------------------------------------------------------------

bool BroadcastRing::is_fully_drained() const noexcept {
  const std::uint64_t published = producer_position();
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    const layout::ConsumerEntry& c = consumer(id);
    // acquire: pairs with the release store of state in register_consumer and
    // with advance_cursor's release store of the cursor.
    if (c.state.load(std::memory_order_acquire) == kConsumerActive &&
        c.cursor.load(std::memory_order_acquire) < published) {
      return false;
    }
  }
  return true;
}

std::size_t BroadcastRing::active_consumer_count() const noexcept {
  std::size_t n = 0;
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    // relaxed: a count for the spin policy (spin_pays) and for
    // wait_for_consumers, which only decide when to spin or to start pushing;
    // nothing is read through it (a push reads each entry itself).
    if (consumer(id).state.load(std::memory_order_relaxed) == kConsumerActive) ++n;
  }
  return n;
}

bool BroadcastRing::lock_is_held(off_t offset) const noexcept { return fd_ < 0 || detail::held_by_other(fd_, offset); }

std::string_view to_string(ProducerState state) noexcept {
  switch (state) {
    case ProducerState::kNone:
      return "none";
    case ProducerState::kLive:
      return "live";
    case ProducerState::kLeft:
      return "left";
    case ProducerState::kDead:
      return "dead";
  }
  return "unknown";
}

RingStatus BroadcastRing::status() const {
  RingStatus s;
  const layout::ProducerLine& p = producer();
  s.capacity = capacity_;
  s.flags = flags_;
  s.producer_seq = producer_position();
  // The lock before the pid: release_producer clears the pid before it
  // unlocks, so a producer that left is not shown dead for a moment.
  s.producer_alive = is_producer_ || lock_is_held(detail::kProducerLock);
  // relaxed (this and the five display reads below): a moment's view for
  // ring-top; no data is read through them.
  s.producer_pid = p.producer_pid.load(std::memory_order_relaxed);
  s.producer_pid_here = detail::pid_namespace_is_ours(header_->tail.producer_pidns.load(std::memory_order_relaxed));
  if (s.producer_alive) {
    s.producer = ProducerState::kLive;
  } else if (s.producer_pid != 0) {
    s.producer = ProducerState::kDead;
  } else {
    s.producer = s.producer_seq == 0 ? ProducerState::kNone : ProducerState::kLeft;
  }
  s.half_written_slot = slot(s.producer_seq).version.load(std::memory_order_relaxed) == 2 * s.producer_seq + 1;
  s.sleeping_consumers = header_->data_wait.sleepers.load(std::memory_order_relaxed);
  s.producer_sleeping = header_->space_wait.sleepers.load(std::memory_order_relaxed) != 0;
  s.upstream_lost = header_->tail.upstream_lost.load(std::memory_order_relaxed);
  s.upstream_gaps = header_->tail.upstream_gaps.load(std::memory_order_relaxed);
  s.max_message = max_message_;
  // Positions minus those that start no message. Loaded after producer_seq
  // (acquire above), so it is at least the value published with it; a
  // record reserved since can make it larger for a moment: clamp.
  const std::uint64_t extra = p.extra_slots.load(std::memory_order_relaxed);
  s.messages = s.producer_seq > extra ? s.producer_seq - extra : 0;
  s.payload_bytes = p.payload_bytes.load(std::memory_order_relaxed);
  for (ConsumerId id = 0; id < kMaxConsumers; ++id) {
    const layout::ConsumerEntry& c = consumer(id);
    ConsumerStatus& cs = s.consumers[id];
    // acquire: pairs with the release store of state in register_consumer.
    cs.active = c.state.load(std::memory_order_acquire) == kConsumerActive;
    if (!cs.active) continue;
    // acquire: pairs with advance_cursor's release store.
    cs.cursor = c.cursor.load(std::memory_order_acquire);
    // relaxed: display only.
    cs.owner_pid = c.owner_pid.load(std::memory_order_relaxed);
    cs.owner_pid_here = detail::pid_namespace_is_ours(c.owner_pidns.load(std::memory_order_relaxed));
    cs.owner_alive = owns(id) || lock_is_held(detail::consumer_lock(id));
    cs.lag = s.producer_seq > cs.cursor ? s.producer_seq - cs.cursor : 0;
  }
  return s;
}

}  // namespace ringcast
