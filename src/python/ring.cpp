#include "ring.hpp"

#include <pthread.h>

#include <array>
#include <atomic>

#include "errors.hpp"
#include "wait.hpp"

namespace ringcast::python {

BufferBytes::BufferBytes(const py::buffer& buffer) {
  // PyBUF_SIMPLE: the exporter must hand over one contiguous block of bytes.
  if (PyObject_GetBuffer(buffer.ptr(), &view_, PyBUF_SIMPLE) != 0) throw py::error_already_set();
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

void Ring::close() {
  if (waits_in_flight != 0) throw std::runtime_error("cannot close a ring while a thread waits on it");
  if (inherited()) {
    (void)ring_.release();  // see ~Ring
  } else {
    ring_.reset();
  }
}

bool Ring::try_push(const py::buffer& payload) {
  BroadcastRing& ring = producer_handle();
  const BufferBytes bytes(payload);
  const Errc e = ring.try_push(bytes.bytes());
  if (e == Errc::ok) return true;
  if (e == Errc::full) return false;
  raise_errc(name_, "try_push", e);
}

bool Ring::push_wait(const py::buffer& payload, std::optional<double> timeout, std::optional<IdleStrategy> idle) {
  BroadcastRing& ring = producer_handle();
  const auto limit = to_timeout(timeout);
  const BufferBytes bytes(payload);
  const std::span<const std::byte> message = bytes.bytes();
  // Checked here so that an oversized payload fails at once, not after a wait.
  if (message.size() > kMaxPayload) raise_errc(name_, "push_wait", Errc::payload_too_large);
  const Errc e = wait_in_slices(*this, producer_waiting, limit, [&](std::chrono::nanoseconds slice) {
    return idle ? ring.push_wait(message, slice, *idle) : ring.push_wait(message, slice);
  });
  if (e == Errc::ok) return true;
  if (e == Errc::timed_out) return false;
  raise_errc(name_, "push_wait", e);
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

void Consumer::close() {
  if (!registered_) return;
  if (waiting) throw std::runtime_error("cannot close a consumer while a thread waits on it");
  registered_ = false;
  // A closed ring has unregistered it already; a forked child's is the parent's.
  if (!ring_->closed() && !ring_->inherited()) (void)ring_->handle().unregister_consumer(id_);
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
      raise_errc(ring_->name(), operation, r.status, r.missed);
  }
}

py::object Consumer::try_recv() {
  BroadcastRing& ring = handle();
  alignas(8) std::array<std::byte, kMaxPayload> buffer;
  const RecvResult r = ring.try_recv(id_, buffer);
  return result(r, buffer, "try_recv");
}

py::object Consumer::recv_wait(std::optional<double> timeout, std::optional<IdleStrategy> idle) {
  BroadcastRing& ring = handle();
  const auto limit = to_timeout(timeout);
  alignas(8) std::array<std::byte, kMaxPayload> buffer;
  const RecvResult r = wait_in_slices(*ring_, waiting, limit, [&](std::chrono::nanoseconds slice) {
    return idle ? ring.recv_wait(id_, buffer, slice, *idle) : ring.recv_wait(id_, buffer, slice);
  });
  return result(r, buffer, "recv_wait");
}

}  // namespace ringcast::python
