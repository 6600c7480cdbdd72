// ringcast.RingError: how a C++ Errc or Error reaches Python.
//
// Every failure the library reports as a value becomes one exception type,
// RingError, whose attributes carry what the C++ caller would have seen:
//   errc   the ringcast.Errc member (its .name is the C++ enumerator's name)
//   errno  the errno of the failing system call, 0 if none
//   missed positions overwritten before they were read (errc == Errc.lapped)
//   needed the bytes the message needs (errc == Errc.buffer_too_small)
// Argument mistakes that are Python's to report (a wrong dtype, a negative
// timeout, a closed handle) raise TypeError / ValueError / RuntimeError instead.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ringcast/error.hpp"

namespace ringcast::python {

// Creates ringcast.RingError in `m`. Called once, at import.
void register_errors(pybind11::module_& m);

// Raise RingError (throws pybind11::error_already_set). `subject` names the
// ring ("/dev/shm/ticks.ring") and leads the message.
[[noreturn]] void raise_error(std::string_view subject, const Error& error);
[[noreturn]] void raise_errc(std::string_view subject, std::string_view operation, Errc code, std::uint64_t missed = 0,
                             std::uint64_t needed = 0);
// RingError payload_too_large naming both sizes: "<subject>: <operation>:
// payload_too_large (N bytes, at most M)".
[[noreturn]] void raise_too_large(std::string_view subject, std::string_view operation, std::size_t length,
                                  std::size_t max_message);

}  // namespace ringcast::python
