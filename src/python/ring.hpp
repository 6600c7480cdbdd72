// The Python-facing handle types: Ring (one BroadcastRing handle) and Consumer
// (one registered consumer id of a Ring). module.cpp binds them; records.cpp
// adds the NumPy batch calls; wait.hpp holds the blocking calls' loop.
//
// Thread safety
//  Every member is read and written with the GIL held. The GIL is released
//  only inside wait_in_slices (wait.hpp), which first marks the ring
//  (waits_in_flight) and the role that waits (Ring::producer_waiting or
//  Consumer::waiting). Calls that would then break a C++ REQUIRES raise
//  RuntimeError instead of racing:
//   1. While a thread waits in push_wait, no other thread may push or change
//      the producer role of that handle (one producing thread per handle).
//   2. While a thread waits in recv_wait on a consumer, no other thread may
//      receive on, or unregister, that consumer (one thread per id).
//   3. While any thread waits on a ring, it cannot be closed (the waiter uses
//      the mapping). A Consumer holds its Ring alive, so garbage collection
//      cannot unmap it either.
//   4. A handle belongs to the process that opened it. In a child forked
//      after that (os.fork, multiprocessing's fork start method) every call
//      on it raises RuntimeError, and closing or collecting it there neither
//      unregisters the parent's consumers nor gives up the parent's producer
//      role: the child's copy is abandoned, not destroyed.
#pragma once

#include <pybind11/pybind11.h>

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

class Ring {
 public:
  Ring(BroadcastRing ring, std::string name);
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring();

  // The open handle; ValueError once closed.
  BroadcastRing& handle();
  // The handle for a producing call: RuntimeError while another thread waits
  // in push_wait (invariant 1).
  BroadcastRing& producer_handle();
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] bool closed() const noexcept { return ring_ == nullptr; }
  // True in a process forked after this handle was opened (invariant 4).
  [[nodiscard]] bool inherited() const noexcept;
  // Unregisters this handle's consumers, releases the producer role, unmaps.
  // Idempotent. RuntimeError while a thread waits on this ring (invariant 3).
  void close();

  // Producer side. try_push: True when pushed, False when full. push_wait:
  // True when pushed, False on timeout.
  bool try_push(const py::buffer& payload);
  bool push_wait(const py::buffer& payload, std::optional<double> timeout, std::optional<IdleStrategy> idle);

  int waits_in_flight = 0;        // threads inside wait_in_slices on this ring
  bool producer_waiting = false;  // a thread is inside push_wait

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
  // The ring handle for a receiving call: ValueError once closed,
  // RuntimeError while another thread waits in recv_wait (invariant 2).
  BroadcastRing& handle();
  // Unregisters. Idempotent; RuntimeError while a thread waits on it.
  void close();

  // bytes, or None when nothing is ready (empty, or the next slot is still
  // being written: stalled). RingError for lapped, producer_dead, corrupt slots.
  py::object try_recv();
  // bytes, or None when `timeout` seconds (None: forever) pass first.
  py::object recv_wait(std::optional<double> timeout, std::optional<IdleStrategy> idle);
  [[nodiscard]] std::uint64_t lag() { return handle().lag(id_); }

  bool waiting = false;  // a thread is inside recv_wait on this consumer

 private:
  py::object result(const RecvResult& r, std::span<const std::byte> buffer, const char* operation);

  std::shared_ptr<Ring> ring_;
  ConsumerId id_;
  bool registered_ = true;
};

// The bytes of a C-contiguous buffer (bytes, bytearray, memoryview, a NumPy
// record), without copying, held for the object's lifetime. The exporter's
// error (BufferError, NumPy's ValueError) for a non-contiguous one.
class BufferBytes {
 public:
  explicit BufferBytes(const py::buffer& buffer);
  BufferBytes(const BufferBytes&) = delete;
  BufferBytes& operator=(const BufferBytes&) = delete;
  ~BufferBytes() { PyBuffer_Release(&view_); }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }

 private:
  Py_buffer view_{};
};

}  // namespace ringcast::python
