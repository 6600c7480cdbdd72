// Ring memory lent to Python without a copy: a producer's Claim (writable room
// for one message, BroadcastRing::try_claim) and a consumer's MessageView (the
// next message, read-only, BroadcastRing::try_view; class View here).
//
// Both are Python objects that export their bytes through the buffer protocol
// (memoryview(obj), numpy.frombuffer(obj, dtype), bytes(obj)) and count the
// exports alive. The memory is the ring's mapping or a buffer of the ring
// handle, so a live export must never outlive it, nor see it reused:
//   1. commit() / abort() of a claim, release() of a view, the consumer's next
//      receive (which ends its view), Consumer.close() and Ring.close() raise
//      BufferError while an export is alive, and do nothing (as mmap.close()
//      does). Objects made from an export keep it alive: a memoryview, a
//      NumPy array from numpy.frombuffer, a slice or a scalar of that array.
//   2. Once a claim or a view is closed, it exports nothing more (ValueError).
//   3. A claim or view keeps its Ring (and a view its Consumer) alive, so
//      garbage collection cannot unmap memory a live object points into.
// Not covered: a memoryview the caller releases by hand while a NumPy array
// made from it lives (numpy.frombuffer(memoryview(obj)) keeps the memoryview,
// not an export); pass the claim or view itself to NumPy.
//
// Thread safety: as ring.hpp; every member is touched with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "ring.hpp"

namespace ringcast::python {

// Room for one message at the head of a ring (Ring.try_claim). A context
// manager: the block's normal end commits it, an exception aborts it.
class Claim {
 public:
  Claim(std::shared_ptr<Ring> ring, ProducerClaim claim);
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  // Aborts an open claim (no export can be alive: each holds a reference).
  ~Claim();

  [[nodiscard]] bool closed() const noexcept { return !claim_ || !*claim_; }
  // The claimed length (0 once closed).
  [[nodiscard]] std::size_t size() const noexcept { return closed() ? 0 : claim_->data().size(); }
  // Publishes the first `length` bytes (default: all). ValueError when closed
  // or `length` exceeds the claim; BufferError while exported.
  void commit(std::optional<std::size_t> length);
  // Gives the room back unpublished. No-op when closed; BufferError while exported.
  void abort();
  // __exit__: commit, or abort when the block raised. An exception with an
  // export still alive leaves the claim open until the claim is collected
  // (its exports gone): raising BufferError then would hide the block's error.
  void exit(bool raised);
  // Ring::close(): aborts the claim (the ring checked that nothing is exported).
  void end_with_ring() noexcept;

  // The buffer protocol (zero_copy.cpp).
  [[nodiscard]] std::span<std::byte> lend();
  [[nodiscard]] Ring& ring() const noexcept { return *ring_; }
  static constexpr bool kReadOnly = false;
  Py_ssize_t exports = 0;

 private:
  // Commits `length` bytes or aborts, after the checks both share.
  void finish(const char* operation, bool commit, std::size_t length);

  std::shared_ptr<Ring> ring_;
  // On the heap so that a forked child can abandon it (leak it) instead of
  // aborting the parent's claim (ring.hpp, invariant 4).
  std::unique_ptr<ProducerClaim> claim_;
};

// The next message of a consumer, read in place where the ring allows it
// (Consumer.try_view / view_wait; ringcast.MessageView in Python). A context
// manager: the block's normal end releases it (consumes the message); an
// exception leaves the message unread, so the consumer's next receive returns
// it again.
class View {
 public:
  View(py::object consumer, std::span<const std::byte> data, bool in_place, bool consumed);
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  ~View();

  enum class State : unsigned char {
    kOpen,        // the message is readable and not consumed
    kReleased,    // release(): consumed
    kLeftUnread,  // the with block raised: not consumed, closed to new exports
    kSuperseded,  // a later receive on the consumer (or its close) ended it, unconsumed
  };
  [[nodiscard]] State state() const noexcept { return state_; }
  [[nodiscard]] bool closed() const;
  [[nodiscard]] std::size_t size() const noexcept { return data_.size(); }
  [[nodiscard]] bool in_place() const noexcept { return in_place_; }
  // Consumes the message. No-op once released; ValueError if it was left
  // unread or superseded, or the consumer is closed; BufferError while exported.
  void release();
  // __exit__: release, or leave the message unread when the block raised.
  void exit(bool raised);
  // Consumer::receive_handle / close: end this view without consuming it.
  // BufferError while exported.
  void supersede();

  // The buffer protocol (zero_copy.cpp).
  [[nodiscard]] std::span<std::byte> lend();
  [[nodiscard]] Ring& ring() const noexcept { return *consumer_->ring(); }
  static constexpr bool kReadOnly = true;
  Py_ssize_t exports = 0;

 private:
  void detach() noexcept;  // the consumer forgets this view

  py::object consumer_object_;  // keeps the consumer (and through it the ring) alive
  Consumer* consumer_;
  std::span<const std::byte> data_;
  bool in_place_;
  bool consumed_;  // view_wait took a 0-byte message already: release consumes nothing
  State state_ = State::kOpen;
};

// Invariant 1: BufferError "cannot <action> while N buffer export(s) of
// <lender> are alive ..." unless `exports` is 0.
void check_not_exported(Py_ssize_t exports, std::string_view action, std::string_view lender);

// Gives the bound class `cls` (Claim or View) the buffer protocol:
// one contiguous run of unsigned bytes (format "B"), read-only for views.
template <class T>
void enable_lending(py::handle cls);

}  // namespace ringcast::python
