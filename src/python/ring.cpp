#include "ring.hpp"

#include <pthread.h>

#include <array>
#include <atomic>

#include "errors.hpp"
#include "wait.hpp"
#include "zero_copy.hpp"

namespace ringcast::python {

BufferBytes::BufferBytes(const py::buffer& buffer, bool writable) {
  // PyBUF_SIMPLE: the exporter must hand over one contiguous block of bytes.
  if (PyObject_GetBuffer(buffer.ptr(), &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
    throw py::error_already_set();
  }
}

// --- fork guard (invariant 4) ------------------------------------------------

namespace {
// Bumped in every child at fork; a handle compares it with its own copy.
// relaxed: written by the forking thread in the child before any other thread
// exists there, and read with the GIL held.
std::atomic<std::uint64_t> fork_generation{0};
}  // namespace

void register_fork_guard() {
  ::pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
}

// --- Ring ---------------------------------------------------------------------

Ring::Ring(BroadcastRing ring, std::string name)
    : ring_(std::make_unique<BroadcastRing>(std::move(ring))),
      name_(std::move(name)),
      fork_generation_(fork_generation.load(std::memory_order_relaxed)) {}

Ring::~Ring() {
  // The parent's handle, copied by fork: destroying it would unregister the
  // parent's consumers. Abandon it; the mapping goes with this process.
  if (inherited()) (void)ring_.release();
}

bool Ring::inherited() const noexcept { return fork_generation_ != fork_generation.load(std::memory_order_relaxed); }

BroadcastRing& Ring::handle() {
  if (!ring_) throw py::value_error("operation on a closed ring");
  if (inherited()) [[unlikely]] {
    throw std::runtime_error("this ring handle was opened by the parent of a fork; open the ring again here");
  }
  return *ring_;
}

BroadcastRing& Ring::producer_handle() {
  BroadcastRing& ring = handle();
  if (producer_waiting) throw std::runtime_error("another thread is waiting in push_wait on this ring handle");
  return ring;
}

BroadcastRing& Ring::push_handle() {
  BroadcastRing& ring = producer_handle();
  if (open_claim != nullptr) throw std::runtime_error("a claim is open on this ring handle: commit or abort it first");
  return ring;
}

void Ring::close() {
  if (waits_in_flight != 0) throw std::runtime_error("cannot close a ring while a thread waits on it");
  if (wait_set_members != 0) throw std::runtime_error("cannot close a ring while its consumers are in a WaitSet");
  check_not_exported(exports, "close the ring", "its claims and views");
  if (open_claim != nullptr) open_claim->end_with_ring();
  if (inherited()) {
    (void)ring_.release();  // see ~Ring
  } else {
    ring_.reset();
  }
}

bool Ring::try_push(const py::buffer& payload) {
  BroadcastRing& ring = push_handle();
  const BufferBytes bytes(payload);
  const Errc e = ring.try_push(bytes.bytes());
  if (e == Errc::ok) return true;
  if (e == Errc::full) return false;
  if (e == Errc::payload_too_large) raise_too_large(name_, "try_push", bytes.bytes().size(), ring.max_message());
  raise_errc(name_, "try_push", e);
}

bool Ring::mark_upstream_loss(std::uint64_t lost) {
  BroadcastRing& ring = push_handle();
  const Errc e = ring.mark_upstream_loss(lost);
  if (e == Errc::ok) {
    ring.report_upstream_loss(lost);
    return true;
  }
  if (e == Errc::full) return false;
  raise_errc(name_, "mark_upstream_loss", e);
}

bool Ring::push_wait(const py::buffer& payload, std::optional<double> timeout, std::optional<IdleStrategy> idle) {
  BroadcastRing& ring = push_handle();
  const auto limit = to_timeout(timeout);
  const BufferBytes bytes(payload);
  const std::span<const std::byte> message = bytes.bytes();
  // Checked here so that an oversized payload fails at once, not after a wait.
  if (message.size() > ring.max_message()) raise_too_large(name_, "push_wait", message.size(), ring.max_message());
  const Errc e = wait_in_slices(*this, producer_waiting, limit, [&](std::chrono::nanoseconds slice) {
    return ring.push_wait(message, slice_wait(slice, idle));
  });
  if (e == Errc::ok) return true;
  if (e == Errc::timed_out) return false;
  raise_errc(name_, "push_wait", e);
}

py::object Ring::try_claim(std::size_t length) {
  BroadcastRing& ring = push_handle();
  ProducerClaim claim = ring.try_claim(length);
  if (!claim) {
    if (claim.status() == Errc::full) return py::none();
    if (claim.status() == Errc::payload_too_large) raise_too_large(name_, "try_claim", length, ring.max_message());
    raise_errc(name_, "try_claim", claim.status());
  }
  return py::cast(std::make_unique<Claim>(shared_from_this(), std::move(claim)));
}

py::object Ring::claim_wait(std::size_t length, std::optional<double> timeout, std::optional<IdleStrategy> idle) {
  BroadcastRing& ring = push_handle();
  const auto limit = to_timeout(timeout);
  // Checked here so that an oversized claim fails at once, not after a wait.
  if (length > ring.max_message()) raise_too_large(name_, "claim_wait", length, ring.max_message());
  ProducerClaim claim;
  const Errc e = wait_in_slices(*this, producer_waiting, limit, [&](std::chrono::nanoseconds slice) {
    claim = ring.claim_wait(length, slice_wait(slice, idle));
    return claim ? Errc::ok : claim.status();
  });
  if (e == Errc::timed_out) return py::none();
  if (e != Errc::ok) raise_errc(name_, "claim_wait", e);
  return py::cast(std::make_unique<Claim>(shared_from_this(), std::move(claim)));
}

// --- Consumer -----------------------------------------------------------------

Consumer::~Consumer() {
  // The GIL is held (pybind11 deallocates with it), so no thread waits here:
  // a waiting thread's call holds a reference to this object. In a forked
  // child the entry is the parent's: left alone (invariant 4).
  if (registered_ && !ring_->closed() && !ring_->inherited()) (void)ring_->handle().unregister_consumer(id_);
}

BroadcastRing& Consumer::handle() {
  if (!registered_) throw py::value_error("operation on a closed consumer");
  BroadcastRing& ring = ring_->handle();
  if (waiting) throw std::runtime_error("another thread is waiting in recv_wait on this consumer");
  return ring;
}

BroadcastRing& Consumer::receive_handle() {
  BroadcastRing& ring = handle();
  if (view != nullptr) view->supersede();
  return ring;
}

void Consumer::close() {
  if (!registered_) return;
  if (waiting) throw std::runtime_error("cannot close a consumer while a thread waits on it");
  if (wait_sets != 0) throw std::runtime_error("cannot close a consumer while it is in a WaitSet (remove it first)");
  if (view != nullptr) view->supersede();
  registered_ = false;
  // A closed ring has unregistered it already; a forked child's is the parent's.
  if (!ring_->closed() && !ring_->inherited()) (void)ring_->handle().unregister_consumer(id_);
}

void Consumer::raise_recv(const RecvResult& r, const char* operation) {
  raise_errc(ring_->name(), operation, r.status, r.missed, r.status == Errc::buffer_too_small ? r.length : 0);
}

py::object Consumer::result(const RecvResult& r, std::span<const std::byte> buffer, const char* operation) {
  switch (r.status) {
    case Errc::ok:
      return py::bytes(reinterpret_cast<const char*>(buffer.data()), r.length);
    case Errc::empty:
    case Errc::stalled:  // the producer is between its two stores: nothing to read yet
    case Errc::timed_out:
      return py::none();
    default:
      raise_recv(r, operation);
  }
}

py::object Consumer::length_result(const RecvResult& r, const char* operation) {
  if (r.status == Errc::ok) return py::int_(r.length);
  return result(r, {}, operation);
}

py::object Consumer::recv_long(BroadcastRing& ring, std::uint32_t length, const char* operation) {
  // A bytes object of the message's length, left uninitialised and filled by
  // the receive itself: one copy, from the ring (or, on a lossy ring, from
  // the validated read) into the object Python gets.
  auto bytes = py::reinterpret_steal<py::object>(PyBytes_FromStringAndSize(nullptr, length));
  if (!bytes) throw py::error_already_set();
  const RecvResult r = ring.try_recv(id_, {reinterpret_cast<std::byte*>(PyBytes_AS_STRING(bytes.ptr())), length});
  // Nobody else received on this id since the first try (the GIL, or the
  // wait's mark, kept them out): the same message, or on a lossy ring a lap.
  if (r.status != Errc::ok) return result(r, {}, operation);
  return bytes;
}

RecvResult Consumer::wait_for(BroadcastRing& ring, std::span<std::byte> out,
                              std::optional<std::chrono::nanoseconds> timeout, std::optional<IdleStrategy> idle) {
  return wait_in_slices(*ring_, waiting, timeout, [&](std::chrono::nanoseconds slice) {
    return ring.recv_wait(id_, out, slice_wait(slice, idle));
  });
}

py::object Consumer::try_recv() {
  BroadcastRing& ring = receive_handle();
  alignas(8) std::array<std::byte, kMaxPayload> buffer;
  const RecvResult r = ring.try_recv(id_, buffer);
  if (r.status == Errc::buffer_too_small) return recv_long(ring, r.length, "try_recv");
  return result(r, buffer, "try_recv");
}

py::object Consumer::recv_wait(std::optional<double> timeout, std::optional<IdleStrategy> idle) {
  const auto limit = to_timeout(timeout);  // a bad timeout fails before the view ends
  BroadcastRing& ring = receive_handle();
  // A message of up to 52 bytes lands here; a longer one ends the wait as
  // buffer_too_small, unconsumed, and is then received into its own bytes.
  alignas(8) std::array<std::byte, kMaxPayload> buffer;
  const RecvResult r = wait_for(ring, buffer, limit, idle);
  if (r.status == Errc::buffer_too_small) return recv_long(ring, r.length, "recv_wait");
  return result(r, buffer, "recv_wait");
}

py::object Consumer::try_recv_into(const py::buffer& out) {
  const BufferBytes bytes(out, true);
  BroadcastRing& ring = receive_handle();
  return length_result(ring.try_recv(id_, bytes.writable_bytes()), "try_recv_into");
}

py::object Consumer::recv_wait_into(const py::buffer& out, std::optional<double> timeout,
                                    std::optional<IdleStrategy> idle) {
  const auto limit = to_timeout(timeout);
  // The export pins `out` (a bytearray cannot be resized, an array's memory
  // stays) while the receive writes into it with the GIL released.
  const BufferBytes bytes(out, true);
  BroadcastRing& ring = receive_handle();
  return length_result(wait_for(ring, bytes.writable_bytes(), limit, idle), "recv_wait_into");
}

py::object Consumer::make_view(const py::object& self, BroadcastRing& ring, bool consumed, const char* operation) {
  if (consumed) return py::cast(std::make_unique<View>(self, std::span<const std::byte>{}, false, true));
  const MessageView v = ring.try_view(id_);
  switch (v.status) {
    case Errc::ok:
      return py::cast(std::make_unique<View>(self, v.data, v.in_place, false));
    case Errc::empty:
    case Errc::stalled:
      return py::none();
    default:
      raise_recv({v.status, 0, v.missed}, operation);
  }
}

py::object Consumer::try_view(const py::object& self) {
  BroadcastRing& ring = receive_handle();
  return make_view(self, ring, false, "try_view");
}

py::object Consumer::view_wait(const py::object& self, std::optional<double> timeout,
                               std::optional<IdleStrategy> idle) {
  const auto limit = to_timeout(timeout);
  BroadcastRing& ring = receive_handle();
  // Waits for a message without taking it: a receive into no room ends the
  // wait with buffer_too_small and consumes nothing. The exception is a
  // message of 0 bytes, which fits and is taken: its view has nothing to
  // release. (A non-null pointer: the room is empty, not absent.)
  std::byte no_room[1];
  const RecvResult r = wait_for(ring, std::span<std::byte>(no_room, 0), limit, idle);
  if (r.status == Errc::buffer_too_small) return make_view(self, ring, false, "view_wait");
  if (r.status == Errc::ok) return make_view(self, ring, true, "view_wait");
  return result(r, {}, "view_wait");
}

}  // namespace ringcast::python
