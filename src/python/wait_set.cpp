#include "wait_set.hpp"

#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "errors.hpp"
#include "ring.hpp"
#include "ringcast/wait_set.hpp"
#include "wait.hpp"

namespace ringcast::python {
namespace {

class PyWaitSet {
 public:
  PyWaitSet() : members_(WaitSet::kMaxMembers) {}
  PyWaitSet(const PyWaitSet&) = delete;
  PyWaitSet& operator=(const PyWaitSet&) = delete;
  ~PyWaitSet() {
    ws_.reset();  // first: its notifier thread reads the members' mappings
    release_members();
  }

  std::size_t add(const py::object& consumer_object) {
    Consumer& consumer = consumer_object.cast<Consumer&>();
    WaitSet& ws = set("add");
    if (ws_fd_) throw std::runtime_error("WaitSet.add: the members are fixed once fileno() was called");
    BroadcastRing& ring = consumer.handle();  // ValueError once closed, RuntimeError in a forked child
    auto index = ws.add(ring, consumer.id());
    if (!index) raise_error("WaitSet.add", index.error());
    members_[*index] = consumer_object;
    ++consumer.wait_sets;
    ++consumer.ring()->wait_set_members;
    return *index;
  }

  void remove(std::size_t index) {
    WaitSet& ws = set("remove");
    if (ws_fd_) throw std::runtime_error("WaitSet.remove: the members are fixed once fileno() was called");
    if (index >= members_.size() || ws.remove(index) != Errc::ok) {
      throw py::index_error("WaitSet.remove: no member " + std::to_string(index));
    }
    release(index);
  }

  std::size_t size() const { return ws_ ? ws_->size() : 0; }

  // The indices of the members with a message, [] on timeout.
  std::vector<std::size_t> wait(std::optional<double> timeout_seconds) {
    const auto timeout = to_timeout(timeout_seconds);
    WaitSet& ws = set("wait");
    check_members();
    std::array<std::size_t, WaitSet::kMaxMembers> ready{};
    WaitSetResult r;
    busy_ = true;
    struct Unmark {
      bool& busy;
      ~Unmark() { busy = false; }
    } unmark{busy_};
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    for (;;) {
      std::chrono::nanoseconds slice = kWaitSlice;
      if (timeout) slice = std::clamp(*timeout - (Clock::now() - start), std::chrono::nanoseconds{0}, slice);
      {
        py::gil_scoped_release nogil;
        r = ws.wait(ready, slice);
      }
      if (r) break;
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (timeout && Clock::now() - start >= *timeout) break;
    }
    return {ready.begin(), ready.begin() + static_cast<std::ptrdiff_t>(r.count)};
  }

  bool ready(std::size_t index) {
    WaitSet& ws = set("ready");
    check_members();
    return ws.ready(index);
  }

  int fileno() {
    WaitSet& ws = set("fileno");
    check_members();
    auto fd = ws.notify_fd();
    if (!fd) raise_error("WaitSet.fileno", fd.error());
    ws_fd_ = true;
    return *fd;
  }

  void arm() { set("arm").arm(); }

  // Stops the notifier thread, closes its fd and lets the members go.
  void close() {
    if (busy_) throw std::runtime_error("cannot close a WaitSet while a thread waits on it");
    ws_.reset();
    release_members();
  }

 private:
  WaitSet& set(const char* operation) {
    if (busy_) throw std::runtime_error(std::string("WaitSet.") + operation + ": another thread waits on this set");
    if (!ws_) throw py::value_error(std::string("WaitSet.") + operation + ": the set is closed");
    return *ws_;
  }

  // Every member's handle is still usable here (not in a forked child).
  void check_members() {
    for (const py::object& m : members_) {
      if (m) (void)m.cast<Consumer&>().ring()->handle();
    }
  }

  void release(std::size_t index) {
    Consumer& consumer = members_[index].cast<Consumer&>();
    --consumer.wait_sets;
    --consumer.ring()->wait_set_members;
    members_[index] = py::object();
  }

  void release_members() {
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (members_[i]) release(i);
    }
  }

  std::unique_ptr<WaitSet> ws_ = std::make_unique<WaitSet>();
  std::vector<py::object> members_;  // the Consumer objects, by index; null: free
  bool busy_ = false;                // a thread is inside wait() with the GIL released
  bool ws_fd_ = false;               // fileno() was called: the notifier runs
};

}  // namespace

void bind_wait_set(py::module_& m) {
  py::class_<PyWaitSet>(m, "WaitSet",
                        R"(One wait over many consumers, each on its own ring or not (up to 127): wait()
sleeps until any of them has a message, with no thread per ring and no polling.
For an event loop, fileno() is an fd that turns readable when a member has a
message (selectors, asyncio's loop.add_reader); after receiving, call arm() to be
notified again. A member cannot be closed while it is in a set. A context manager.)")
      .def(py::init<>())
      .def("add", &PyWaitSet::add, py::arg("consumer"),
           "Add a Consumer; returns its index (the lowest free one). RuntimeError after fileno().")
      .def("remove", &PyWaitSet::remove, py::arg("index"), "Remove the member at `index` (IndexError if none).")
      .def("__len__", &PyWaitSet::size)
      .def("wait", &PyWaitSet::wait, py::arg("timeout") = py::none(),
           R"(The indices of the members that have a message, waiting up to `timeout` seconds
(None: forever) for one; [] on timeout. Receive from them with try_recv until it
returns None: readiness may be spurious (a padding, a lap). Releases the GIL.)")
      .def("ready", &PyWaitSet::ready, py::arg("index"), "Whether the member at `index` has a message now.")
      .def("fileno", &PyWaitSet::fileno,
           "An fd (owned by the set) that turns readable when a member has a message; starts the notifier.")
      .def("arm", &PyWaitSet::arm, "Clear the fd and be notified again (at once if a member still has a message).")
      .def("close", &PyWaitSet::close, "Stop the notifier, close the fd, let the members go. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyWaitSet& ws, const py::args&) { ws.close(); });
}

}  // namespace ringcast::python
