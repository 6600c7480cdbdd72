#include "zero_copy.hpp"

#include <exception>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "errors.hpp"

namespace ringcast::python {
namespace {

// A buffer's pointer must not be null, even for 0 bytes (an empty span's may be).
std::byte empty_buffer[1];

// bf_getbuffer. A C entry point: nothing may propagate out of it, so each
// exception becomes the Python error it stands for.
template <class T>
int get_buffer(PyObject* self, Py_buffer* view, int flags) noexcept {
  try {
    T& lender = py::handle(self).cast<T&>();
    const std::span<std::byte> bytes = lender.lend();
    void* data = bytes.empty() ? empty_buffer : bytes.data();
    // Fills a 1-D run of unsigned bytes; BufferError for a writable request
    // on a view. Takes a reference to self for view->obj.
    if (PyBuffer_FillInfo(view, self, data, static_cast<Py_ssize_t>(bytes.size()), T::kReadOnly ? 1 : 0, flags) != 0) {
      return -1;
    }
    view->internal = &lender;  // for release_buffer, which gets the same Py_buffer back
    ++lender.exports;
    ++lender.ring().exports;
    return 0;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_BufferError, "unknown error while exporting a buffer");
  }
  view->obj = nullptr;
  return -1;
}

// bf_releasebuffer: called once per successful get_buffer, with the GIL held,
// before the reference to self is dropped.
template <class T>
void release_buffer(PyObject* /*self*/, Py_buffer* view) noexcept {
  T& lender = *static_cast<T*>(view->internal);
  --lender.exports;
  --lender.ring().exports;
}

}  // namespace

void check_not_exported(Py_ssize_t exports, std::string_view action, std::string_view lender) {
  if (exports == 0) return;
  throw py::buffer_error(
      fmt::format("cannot {} while {} buffer export(s) of {} are alive (a memoryview, or a NumPy array "
                  "made with numpy.frombuffer); delete them, or copy what you keep, first",
                  action, exports, lender));
}

template <class T>
void enable_lending(py::handle cls) {
  // pybind11's def_buffer has no release hook to count exports with (and
  // lets a C++ exception escape its C entry point), so the type's slots are
  // set here. Runs at import, before any instance exists.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = &get_buffer<T>;
  heap->as_buffer.bf_releasebuffer = &release_buffer<T>;
  heap->ht_type.tp_as_buffer = &heap->as_buffer;
}
template void enable_lending<Claim>(py::handle cls);
template void enable_lending<View>(py::handle cls);

// --- Claim ----------------------------------------------------------------------

Claim::Claim(std::shared_ptr<Ring> ring, ProducerClaim claim)
    : ring_(std::move(ring)), claim_(std::make_unique<ProducerClaim>(std::move(claim))) {
  ring_->open_claim = this;
}

Claim::~Claim() {
  if (ring_->open_claim == this) ring_->open_claim = nullptr;
  // In a forked child the claim is the parent's: abandon it (invariant 4 of
  // ring.hpp). Otherwise ProducerClaim's destructor aborts an open one.
  if (!closed() && ring_->inherited()) (void)claim_.release();
}

std::span<std::byte> Claim::lend() {
  (void)ring_->handle();  // ValueError once closed, RuntimeError in a forked child
  if (closed()) throw py::value_error("the claim is committed or aborted: its buffer is gone");
  return claim_->data();
}

void Claim::finish(const char* operation, bool commit, std::size_t length) {
  (void)ring_->handle();
  check_not_exported(exports, operation, "the claim");
  if (commit) {
    claim_->commit(length);
  } else {
    claim_->abort();
  }
  ring_->open_claim = nullptr;
}

void Claim::commit(std::optional<std::size_t> length) {
  if (closed()) throw py::value_error("commit of a claim that is already committed or aborted");
  const std::size_t claimed = claim_->data().size();
  if (length && *length > claimed) {
    throw py::value_error(fmt::format("commit({}) of a claim of {} bytes", *length, claimed));
  }
  finish("commit the claim", true, length.value_or(claimed));
}

void Claim::abort() {
  if (!closed()) finish("abort the claim", false, 0);
}

void Claim::exit(bool raised) {
  if (closed()) return;  // committed or aborted inside the block
  if (!raised) {
    commit(std::nullopt);
  } else if (exports == 0 && !ring_->inherited()) {
    abort();
  }
}

void Claim::end_with_ring() noexcept {
  if (ring_->inherited()) {
    (void)claim_.release();
  } else {
    claim_->abort();
  }
  ring_->open_claim = nullptr;
}

// --- View -----------------------------------------------------------------------

View::View(py::object consumer, std::span<const std::byte> data, bool in_place, bool consumed)
    : consumer_object_(std::move(consumer)),
      consumer_(&consumer_object_.cast<Consumer&>()),
      data_(data),
      in_place_(in_place),
      consumed_(consumed) {
  consumer_->view = this;
}

View::~View() { detach(); }

void View::detach() noexcept {
  if (consumer_->view == this) consumer_->view = nullptr;
}

bool View::closed() const { return state_ != State::kOpen || consumer_->closed(); }

std::span<std::byte> View::lend() {
  (void)consumer_->handle();  // ValueError once closed, RuntimeError in a forked child
  if (state_ != State::kOpen) throw py::value_error("the view is released, or ended by a later receive");
  // Read-only: get_buffer refuses writable requests (kReadOnly).
  return {const_cast<std::byte*>(data_.data()), data_.size()};
}

void View::release() {
  if (state_ == State::kReleased) return;
  if (state_ != State::kOpen) {
    throw py::value_error(state_ == State::kLeftUnread
                              ? "the view's with block raised, which left its message unread: receive it again"
                              : "the view was ended unconsumed by a later receive on its consumer");
  }
  BroadcastRing& ring = consumer_->handle();
  check_not_exported(exports, "release the view", "it");
  if (!consumed_) {
    if (const Errc e = ring.release_view(consumer_->id()); e != Errc::ok) {
      raise_errc(consumer_->ring()->name(), "release_view", e);
    }
  }
  state_ = State::kReleased;
  detach();
}

void View::exit(bool raised) {
  if (!raised) {
    release();
  } else if (state_ == State::kOpen) {
    // Unconsumed; the consumer keeps pointing at it, so that its next
    // receive still refuses to run while an export of it is alive.
    state_ = State::kLeftUnread;
  }
}

void View::supersede() {
  check_not_exported(exports, "receive on or close the consumer", "its last message view");
  // A view of a message view_wait took already stays what it is: consumed.
  if (state_ == State::kOpen) state_ = consumed_ ? State::kReleased : State::kSuperseded;
  detach();
}

}  // namespace ringcast::python
