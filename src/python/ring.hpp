// The Python-facing handle types: Ring (one BroadcastRing handle) and Consumer
// (one registered consumer id of a Ring). module.cpp binds them; records.cpp
// adds the NumPy batch calls; zero_copy.hpp the claims and views that lend
// ring memory to Python; wait.hpp holds the blocking calls' loop.
//
// Thread safety
//  Every member is read and written with the GIL held. The GIL is released
//  only inside wait_in_slices (wait.hpp), which first marks the ring
//  (waits_in_flight) and the role that waits (Ring::producer_waiting or
//  Consumer::waiting). Calls that would then break a C++ REQUIRES raise
//  RuntimeError instead of racing:
//   1. While a thread waits in push_wait, no other thread may push or change
//      the producer role of that handle (one producing thread per handle).
//   2. While a thread waits in recv_wait (or view_wait) on a consumer, no
//      other thread may receive on, or unregister, that consumer (one thread
//      per id).
//   3. While any thread waits on a ring, it cannot be closed (the waiter uses
//      the mapping). A Consumer holds its Ring alive, so garbage collection
//      cannot unmap it either.
//   4. A handle belongs to the process that opened it. In a child forked
//      after that (os.fork, multiprocessing's fork start method) every call
//      on it raises RuntimeError, and closing or collecting it there neither
//      unregisters the parent's consumers nor gives up the parent's producer
//      role: the child's copy is abandoned, not destroyed.
//   5. While a Claim is open on a handle, no push, other claim or change of
//      the producer role may be made through it (ProducerClaim's REQUIRES).
//   6. Memory lent to Python (a Claim's room, a MessageView's message) stays
//      mapped and unchanged while any buffer export of it is alive: the calls
//      that would end it (commit, abort, release, a consumer's next receive,
//      closing the consumer or the ring) raise BufferError instead, as
//      mmap.close() does (zero_copy.hpp).
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ringcast/broadcast_ring.hpp"

namespace ringcast::python {

namespace py = pybind11;

// Registers the fork hook behind invariant 4. Called once, at import.
void register_fork_guard();

class Claim;
class View;

// Always owned by a shared_ptr (module.cpp's make_ring): claims keep it alive.
class Ring : public std::enable_shared_from_this<Ring> {
 public:
  Ring(BroadcastRing ring, std::string name);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  // The open handle; ValueError once closed.
  BroadcastRing& handle();
  // The handle for a producing call that does not push (set_wake_policy):
  // RuntimeError while another thread waits in push_wait (invariant 1).
  BroadcastRing& producer_handle();
  // The handle for a push, a claim or a change of the producer role: as
  // producer_handle, and RuntimeError while a claim is open (invariant 5).
  BroadcastRing& push_handle();
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool closed() const noexcept { return ring_ == nullptr; }
  // True in a process forked after this handle was opened (invariant 4).
  [[nodiscard]] bool inherited() const noexcept;
  // Aborts an open claim, unregisters this handle's consumers, releases the
  // producer role, unmaps. Idempotent. RuntimeError while a thread waits on
  // this ring (invariant 3); BufferError while memory of it is lent out
  // (invariant 6).
  void close();

  // Producer side. try_push: True when pushed, False when full. push_wait:
  // True when pushed, False on timeout. Payloads of 0..max_message bytes.
  bool try_push(const py::buffer& payload);
  // report_upstream_loss and mark_upstream_loss together: False when full.
  bool mark_upstream_loss(std::uint64_t lost);
  bool push_wait(const py::buffer& payload, std::optional<double> timeout, std::optional<IdleStrategy> idle);
  // A Claim of `length` bytes at the head, or None when the ring is full.
  py::object try_claim(std::size_t length);
  // try_claim waiting for room like push_wait: None on timeout.
  py::object claim_wait(std::size_t length, std::optional<double> timeout, std::optional<IdleStrategy> idle);

  int waits_in_flight = 0;        // threads inside wait_in_slices on this ring
  bool producer_waiting = false;  // a thread is inside push_wait
  Claim* open_claim = nullptr;    // the claim open on this handle (invariant 5)
  Py_ssize_t exports = 0;         // live buffer exports of this handle's claims and views
  int wait_set_members = 0;       // its consumers in WaitSets (wait_set.hpp): no close meanwhile

 private:
  std::unique_ptr<BroadcastRing> ring_;  // null once closed
  std::string name_;
  std::uint64_t fork_generation_;  // the process's fork count when opened
};

class Consumer {
 public:
  Consumer(std::shared_ptr<Ring> ring, ConsumerId id) : ring_(std::move(ring)), id_(id) {}
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;
  // Unregisters (a consumer dropped without close() frees its entry too).
  ~Consumer();

  [[nodiscard]] ConsumerId id() const noexcept { return id_; }
  [[nodiscard]] const std::shared_ptr<Ring>& ring() const noexcept { return ring_; }
  [[nodiscard]] bool closed() const noexcept { return !registered_ || ring_->closed(); }
  // The ring handle for a call on this consumer: ValueError once closed,
  // RuntimeError while another thread waits in recv_wait (invariant 2).
  BroadcastRing& handle();
  // The handle for a receive: as handle(), after ending the open view (its
  // memory is the C++ view's, which the receive invalidates); BufferError
  // while that view is exported (invariant 6).
  BroadcastRing& receive_handle();
  // Ends the open view, then unregisters. Idempotent; RuntimeError while a
  // thread waits on it, BufferError while its view is exported.
  void close();

  // bytes, or None when nothing is ready (empty, or the next slot is still
  // being written: stalled). RingError for lapped, producer_dead, corrupt slots.
  py::object try_recv();
  // bytes, or None when `timeout` seconds (None: forever) pass first.
  py::object recv_wait(std::optional<double> timeout, std::optional<IdleStrategy> idle);
  // The message copied into `out` (a writable C-contiguous buffer): its
  // length, or None as try_recv / recv_wait. RingError buffer_too_small
  // (needed = the message's length; nothing consumed) when `out` is short.
  py::object try_recv_into(const py::buffer& out);
  py::object recv_wait_into(const py::buffer& out, std::optional<double> timeout, std::optional<IdleStrategy> idle);
  // The next message as a View (zero_copy.hpp), or None as try_recv /
  // recv_wait. `self` is this consumer's Python object, which the view keeps.
  py::object try_view(const py::object& self);
  py::object view_wait(const py::object& self, std::optional<double> timeout, std::optional<IdleStrategy> idle);
  [[nodiscard]] std::uint64_t lag() { return handle().lag(id_); }
  [[nodiscard]] std::uint64_t upstream_lost_seen() { return handle().upstream_lost_seen(id_); }

  bool waiting = false;  // a thread is inside recv_wait or view_wait on this consumer
  int wait_sets = 0;     // WaitSets it is a member of (wait_set.hpp): no close meanwhile
  View* view = nullptr;  // the view whose message the C++ view holds, until released or superseded

 private:
  py::object result(const RecvResult& r, std::span<const std::byte> buffer, const char* operation);
  // try_recv's second step for a message longer than 52 bytes: a bytes
  // object of `length`, received into in place.
  py::object recv_long(BroadcastRing& ring, std::uint32_t length, const char* operation);
  // try_recv_into's result: the length, None, or RingError.
  py::object length_result(const RecvResult& r, const char* operation);
  // recv_wait into `out` in slices with the GIL released (wait.hpp).
  RecvResult wait_for(BroadcastRing& ring, std::span<std::byte> out, std::optional<std::chrono::nanoseconds> timeout,
                      std::optional<IdleStrategy> idle);
  // A View of the next message; or, when `consumed` (view_wait took a
  // message of 0 bytes), an empty View with nothing to release.
  py::object make_view(const py::object& self, BroadcastRing& ring, bool consumed, const char* operation);
  [[noreturn]] void raise_recv(const RecvResult& r, const char* operation);

  std::shared_ptr<Ring> ring_;
  ConsumerId id_;
  bool registered_ = true;
};

// The bytes of a C-contiguous buffer (bytes, bytearray, memoryview, a NumPy
// array or record), without copying, held for the object's lifetime. The exporter's
// error (BufferError, NumPy's ValueError) for a non-contiguous one.
class BufferBytes {
 public:
  // writable: the exporter must allow writes (BufferError from bytes, a
  // ValueError from a read-only NumPy array).
  explicit BufferBytes(const py::buffer& buffer, bool writable = false);
  BufferBytes(const BufferBytes&) = delete;
  BufferBytes& operator=(const BufferBytes&) = delete;
  ~BufferBytes() { PyBuffer_Release(&view_); }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }
  [[nodiscard]] std::span<std::byte> writable_bytes() const noexcept {
    return {static_cast<std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace ringcast::python
