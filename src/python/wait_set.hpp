// ringcast.WaitSet: one sleep over many consumers' rings (the C++ WaitSet,
// include/ringcast/wait_set.hpp), for Python.
//
// Thread safety (ring.hpp's invariants, extended): every member is read and
// written with the GIL held; wait() releases it only between marking the set
// busy and unmarking it, and every other call raises RuntimeError while the
// set is busy. A member Consumer and its Ring cannot be closed while they are
// in a set (Consumer::wait_sets, Ring::wait_set_members): the C++ set, and its
// notifier thread, read their mappings at any time.
#pragma once

#include <pybind11/pybind11.h>

namespace ringcast::python {

void bind_wait_set(pybind11::module_& m);

}  // namespace ringcast::python
