// Batches between the ring and NumPy, with no Python object per message.
//
// A batch is a 1-D, C-contiguous NumPy array in which one element is one
// message:
//  * a record dtype the user chooses (itemsize 1..max_message bytes, no
//    Python-object fields): every message must be exactly one record long;
//  * or RAW_DTYPE, {length: u4, data: u1[52]} (56 bytes): any message of at
//    most 52 bytes, its length beside it and the bytes after it zero.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>

#include "ring.hpp"
#include "ringcast/layout.hpp"

namespace ringcast::python {

struct RawRecord {
  std::uint32_t length;
  std::uint8_t data[kMaxPayload];
};
static_assert(sizeof(RawRecord) == 56 && offsetof(RawRecord, data) == 4, "RAW_DTYPE is {u4, u1[52]}");

// Registers RawRecord's dtype with pybind11 and sets ringcast.RAW_DTYPE.
void register_records(py::module_& m);

// Fills `out` from its first element with up to len(out) messages and
// returns how many. 0 when nothing is ready. RingError for lapped (nothing was
// received; the next call continues after the gap), producer_dead and corrupt
// slots; ValueError when the next message's length is not the record size,
// or for RAW_DTYPE over 52 bytes (the messages before it are returned first;
// that one stays unread).
std::size_t drain_into(Consumer& consumer, const py::object& out);
// drain_into a new array of `dtype` (None: RAW_DTYPE) with room for
// min(max, the most messages of that size the ring holds) elements, shrunk
// to the count received.
py::array drain(Consumer& consumer, std::size_t max, const py::object& dtype);
// Pushes the array's elements in order until the ring is full; returns how
// many were pushed. One record per message (RAW_DTYPE: data[:length]).
std::size_t push_batch(Ring& ring, const py::object& records);

}  // namespace ringcast::python
