// The one place where the binding blocks (Consumer::recv_wait, Ring::push_wait).
//
// A wait runs the C++ blocking call in slices of at most kWaitSlice with the
// GIL released, so other Python threads run meanwhile. Between slices it takes
// the GIL back and runs Python's signal handlers (PyErr_CheckSignals): Ctrl-C
// raises KeyboardInterrupt within one slice, even with no timeout. While it
// waits, the ring and the waiting role are marked (ring.hpp, invariants 1-3).
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "ring.hpp"

namespace ringcast::python {

// Short enough that Ctrl-C feels immediate; long enough that re-taking the GIL
// and restarting the C++ wait costs nothing measurable.
inline constexpr std::chrono::milliseconds kWaitSlice{50};

// A timeout in seconds as Python passes it: None or +inf waits forever.
// ValueError for a negative or NaN value.
inline std::optional<std::chrono::nanoseconds> to_timeout(std::optional<double> seconds) {
  if (!seconds || (std::isinf(*seconds) && *seconds > 0)) return std::nullopt;
  if (!(*seconds >= 0)) throw py::value_error("timeout must be >= 0 seconds (or None to wait forever)");
  // Clamp: a year is forever for a wait, and keeps the arithmetic in range.
  const double ns = std::min(*seconds, 365.0 * 24 * 3600) * 1e9;
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

// The C++ wait for one slice: `idle`, or (None from Python) WaitOptions'
// default strategy.
inline WaitOptions slice_wait(std::chrono::nanoseconds slice, std::optional<IdleStrategy> idle) noexcept {
  return idle ? WaitOptions{slice, *idle} : WaitOptions{slice};
}

inline Errc status_of(Errc e) noexcept { return e; }
inline Errc status_of(const RecvResult& r) noexcept { return r.status; }

// Calls attempt(slice) -> Errc or RecvResult with the GIL released until it
// returns anything but timed_out, or `timeout` has passed (then returns the
// timed_out result). `role` is the flag that marks the waiting role; the
// caller has checked it is clear. Throws pybind11::error_already_set when a
// signal handler raises (KeyboardInterrupt).
template <class Attempt>
auto wait_in_slices(Ring& ring, bool& role, std::optional<std::chrono::nanoseconds> timeout, Attempt&& attempt) {
  // Marks the wait for its whole length, exceptions included (invariants 1-3).
  struct Mark {
    Ring& marked_ring;
    bool& marked_role;
    Mark(Ring& r, bool& f) : marked_ring(r), marked_role(f) {
      ++marked_ring.waits_in_flight;
      marked_role = true;
    }
    ~Mark() {
      --marked_ring.waits_in_flight;
      marked_role = false;
    }
  } mark(ring, role);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    std::chrono::nanoseconds slice = kWaitSlice;
    if (timeout) slice = std::clamp(*timeout - (Clock::now() - start), std::chrono::nanoseconds{0}, slice);
    decltype(attempt(slice)) result;
    {
      py::gil_scoped_release nogil;
      result = attempt(slice);
    }
    if (status_of(result) != Errc::timed_out) return result;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (timeout && Clock::now() - start >= *timeout) return result;
  }
}

}  // namespace ringcast::python
