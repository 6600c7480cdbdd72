#include "errors.hpp"

#include <fmt/format.h>

namespace py = pybind11;

namespace ringcast::python {
namespace {

// The exception type, created at import and kept for the life of the
// interpreter (module objects are never unloaded).
PyObject* ring_error_type = nullptr;

[[noreturn]] void raise(const std::string& message, Errc code, int sys_errno, std::uint64_t missed,
                        std::uint64_t needed) {
  py::object type = py::reinterpret_borrow<py::object>(ring_error_type);
  py::object exc = type(message);
  exc.attr("errc") = py::cast(code);
  exc.attr("errno") = sys_errno;
  exc.attr("missed") = missed;
  exc.attr("needed") = needed;
  PyErr_SetObject(ring_error_type, exc.ptr());
  throw py::error_already_set();
}

}  // namespace

void register_errors(py::module_& m) {
  ring_error_type =
      PyErr_NewExceptionWithDoc("ringcast.RingError",
                                "A ringcast operation failed. Attributes: errc (ringcast.Errc; errc.name is the C++\n"
                                "enumerator, e.g. 'layout_mismatch'), errno (of the failing system call, 0 if none),\n"
                                "missed (positions overwritten before they were read, for Errc.lapped: messages on\n"
                                "a ring of one slot per message, slots otherwise), needed (the bytes the message\n"
                                "needs, for Errc.buffer_too_small).",
                                PyExc_Exception, nullptr);
  if (ring_error_type == nullptr) throw py::error_already_set();
  py::object type = py::reinterpret_borrow<py::object>(ring_error_type);
  type.attr("errc") = py::cast(Errc::ok);
  type.attr("errno") = 0;
  type.attr("missed") = 0;
  type.attr("needed") = 0;
  m.attr("RingError") = type;
}

void raise_error(std::string_view subject, const Error& error) {
  // An error of create or open names its path itself (Error::path).
  raise(error.path.empty() ? fmt::format("{}: {}", subject, error.message()) : error.message(), error.code,
        error.sys_errno, 0, 0);
}

void raise_errc(std::string_view subject, std::string_view operation, Errc code, std::uint64_t missed,
                std::uint64_t needed) {
  std::string message = fmt::format("{}: {}: {}", subject, operation, to_string(code));
  if (code == Errc::lapped) message += fmt::format(" ({} positions overwritten before they were read)", missed);
  if (code == Errc::buffer_too_small) message += fmt::format(" (the message is {} bytes)", needed);
  raise(message, code, 0, missed, needed);
}

void raise_too_large(std::string_view subject, std::string_view operation, std::size_t length,
                     std::size_t max_message) {
  raise(fmt::format("{}: {}: payload_too_large ({} bytes, at most {})", subject, operation, length, max_message),
        Errc::payload_too_large, 0, 0, 0);
}

}  // namespace ringcast::python
