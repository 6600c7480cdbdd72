#include "records.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "errors.hpp"

namespace ringcast::python {
namespace {

constexpr std::size_t kPushChunk = 256;  // payload spans built on the stack per try_push_batch

// An array checked to be a batch: 1-D, C-contiguous, plain-data records.
struct Batch {
  std::byte* data = nullptr;
  std::size_t count = 0;
  std::size_t itemsize = 0;
  bool raw = false;  // RAW_DTYPE
};

// NumPy's NPY_ITEM_HASOBJECT descriptor flag: the dtype holds PyObject pointers.
constexpr char kNpyItemHasObject = 0x01;

// RAW_DTYPE, made once at import (the interpreter keeps the module, and with
// it this reference, until exit).
PyObject* raw_dtype_object = nullptr;

py::dtype raw_dtype() { return py::reinterpret_borrow<py::dtype>(raw_dtype_object); }

// Per call, so cheap: an identity test, then NumPy's own equivalence test only
// for a 56-byte dtype.
bool is_raw(const py::dtype& dtype) {
  return dtype.ptr() == raw_dtype_object ||
         (static_cast<std::size_t>(dtype.itemsize()) == sizeof(RawRecord) &&
          py::detail::npy_api::get().PyArray_EquivTypes_(dtype.ptr(), raw_dtype_object));
}

// max_message: the ring's (a record is one message).
void check_record_dtype(const py::dtype& dtype, std::size_t max_message) {
  if ((dtype.flags() & kNpyItemHasObject) != 0) {
    throw py::type_error("record dtype must not hold Python objects");
  }
  const auto size = static_cast<std::size_t>(dtype.itemsize());
  if (size == 0 || size > max_message) {
    throw py::value_error(
        fmt::format("a record is one message: dtype itemsize must be 1..{} bytes (the ring's max_message), "
                    "not {} (or use ringcast.RAW_DTYPE)",
                    max_message, size));
  }
}

Batch batch_of(const py::object& object, bool writable, std::size_t max_message) {
  if (!py::isinstance<py::array>(object)) throw py::type_error("expected a numpy.ndarray of records");
  auto array = py::reinterpret_borrow<py::array>(object);
  if (array.ndim() != 1) throw py::value_error("expected a 1-D array (one element per message)");
  if ((array.flags() & py::array::c_style) == 0) {
    throw py::value_error("expected a C-contiguous array (numpy.ascontiguousarray makes one)");
  }
  if (writable && !array.writeable()) throw py::value_error("output array is read-only");
  Batch b;
  const py::dtype dtype = array.dtype();
  b.raw = is_raw(dtype);
  if (!b.raw) check_record_dtype(dtype, max_message);
  b.itemsize = static_cast<std::size_t>(array.itemsize());
  b.count = static_cast<std::size_t>(array.shape(0));
  b.data = static_cast<std::byte*>(writable ? array.mutable_data() : const_cast<void*>(array.data()));
  return b;
}

// Thrown out of ring.drain's callback for a message the batch cannot hold
// (another length than a record's, or RAW_DTYPE over 52 bytes): the batch's
// cursor is then not published, and the messages before index `at` are
// drained again.
struct WrongLength {
  std::size_t at;
  std::size_t length;
};

}  // namespace

void register_records(py::module_& m) {
  PYBIND11_NUMPY_DTYPE(RawRecord, length, data);
  raw_dtype_object = py::dtype::of<RawRecord>().release().ptr();
  m.attr("RAW_DTYPE") = raw_dtype();
}

std::size_t drain_into(Consumer& consumer, const py::object& out) {
  BroadcastRing& ring = consumer.handle();
  const Batch b = batch_of(out, true, ring.max_message());
  (void)consumer.receive_handle();  // after the checks: a bad array leaves an open view alone
  std::size_t max = b.count;
  for (;;) {
    std::byte* dst = b.data;
    std::size_t n = 0;
    try {
      BatchResult r;
      if (b.raw) {
        r = ring.drain(
            consumer.id(),
            [&](std::span<const std::byte> p) {
              if (p.size() > kMaxPayload) throw WrongLength{n, p.size()};
              RawRecord& rec = reinterpret_cast<RawRecord*>(dst)[n++];
              rec.length = static_cast<std::uint32_t>(p.size());
              std::memcpy(rec.data, p.data(), p.size());
              std::memset(rec.data + p.size(), 0, kMaxPayload - p.size());
            },
            max);
      } else {
        r = ring.drain(
            consumer.id(),
            [&](std::span<const std::byte> p) {
              if (p.size() != b.itemsize) throw WrongLength{n, p.size()};
              std::memcpy(dst + n * b.itemsize, p.data(), b.itemsize);
              ++n;
            },
            max);
      }
      if (r.count != 0 || r.status == Errc::ok || r.status == Errc::empty || r.status == Errc::stalled) {
        return r.count;
      }
      raise_errc(consumer.ring()->name(), "drain", r.status, r.missed);
    } catch (const WrongLength& w) {
      if (w.at == 0) {
        throw py::value_error(fmt::format(
            "the next message is {} bytes but {}; it was left unread (try_recv or try_view reads it)", w.length,
            b.raw ? fmt::format("RAW_DTYPE holds at most {}", kMaxPayload)
                  : fmt::format("a record is {}", b.itemsize)));
      }
      max = w.at;  // take the records before it; the next call reports it
    }
  }
}

py::array drain(Consumer& consumer, std::size_t max, const py::object& dtype) {
  const py::dtype type = dtype.is_none() ? raw_dtype() : py::dtype::from_args(dtype);
  // More than a ring's worth in one call is never needed, and a careless max
  // (drain(10**9)) would otherwise allocate gigabytes: at most as many
  // messages of this size as the ring holds (each takes message_slots).
  const BroadcastRing& ring = consumer.handle();
  const auto itemsize = static_cast<std::uint64_t>(std::max<py::ssize_t>(type.itemsize(), 1));
  const std::uint64_t fits = ring.capacity() / layout::message_slots(is_raw(type) ? kMaxPayload : itemsize);
  max = static_cast<std::size_t>(std::min<std::uint64_t>(max, std::max<std::uint64_t>(fits, 1)));
  py::array out(type, py::array::ShapeContainer{static_cast<py::ssize_t>(max)});
  const std::size_t n = drain_into(consumer, out);
  if (n != max) {
    // We hold the only reference: shrink in place (realloc), no copy.
    out.attr("resize")(n, py::arg("refcheck") = false);
  }
  return out;
}

std::size_t push_batch(Ring& ring, const py::object& records) {
  BroadcastRing& handle = ring.push_handle();
  const Batch b = batch_of(records, false, handle.max_message());
  if (b.raw) {
    // Checked before anything is pushed, so an error leaves the ring untouched.
    const auto* raw = reinterpret_cast<const RawRecord*>(b.data);
    for (std::size_t i = 0; i < b.count; ++i) {
      if (raw[i].length > kMaxPayload) {
        throw py::value_error(fmt::format("record {} has length {} > {}", i, raw[i].length, kMaxPayload));
      }
    }
  }
  std::array<std::span<const std::byte>, kPushChunk> spans;
  std::size_t pushed = 0;
  while (pushed < b.count) {
    const std::size_t n = std::min(kPushChunk, b.count - pushed);
    for (std::size_t i = 0; i < n; ++i) {
      const std::byte* record = b.data + (pushed + i) * b.itemsize;
      spans[i] = b.raw ? std::span<const std::byte>(record + offsetof(RawRecord, data),
                                                    reinterpret_cast<const RawRecord*>(record)->length)
                       : std::span<const std::byte>(record, b.itemsize);
    }
    const BatchResult r = handle.try_push_batch({spans.data(), n});
    pushed += r.count;
    if (r.status == Errc::full) break;
    if (r.status != Errc::ok) raise_errc(ring.name(), "push_batch", r.status);
  }
  return pushed;
}

}  // namespace ringcast::python
