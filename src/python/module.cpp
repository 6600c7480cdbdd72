// ringcast._ringcast: the pybind11 bindings. The Python package (ringcast/)
// re-exports them; ringcast/__init__.pyi is the typed contract and
// docs/python.md the guide.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "errors.hpp"
#include "records.hpp"
#include "ring.hpp"

namespace ringcast::python {
namespace {

using RingPtr = std::shared_ptr<Ring>;

RingPtr make_ring(Result<BroadcastRing> ring, std::string name) {
  if (!ring) raise_error(name, ring.error());
  return std::make_shared<Ring>(std::move(*ring), std::move(name));
}

CreateOptions create_options(std::uint32_t mode, bool replace, bool lossy, bool wakeups, bool claim_producer,
                             bool reap_on_full) {
  return {.mode = static_cast<mode_t>(mode),
          .replace = replace,
          .lossy = lossy,
          .wakeups = wakeups,
          .claim_producer = claim_producer,
          .reap_on_full = reap_on_full};
}

void bind_enums(py::module_& m) {
  py::enum_<Errc>(m, "Errc", "Status codes of ringcast operations; RingError.errc is one of them.")
      .value("ok", Errc::ok)
      .value("full", Errc::full)
      .value("empty", Errc::empty)
      .value("no_consumer_slot", Errc::no_consumer_slot)
      .value("invalid_consumer", Errc::invalid_consumer)
      .value("payload_too_large", Errc::payload_too_large)
      .value("layout_mismatch", Errc::layout_mismatch)
      .value("io_error", Errc::io_error)
      .value("not_ready", Errc::not_ready)
      .value("producer_busy", Errc::producer_busy)
      .value("not_producer", Errc::not_producer)
      .value("lapped", Errc::lapped)
      .value("stalled", Errc::stalled)
      .value("producer_dead", Errc::producer_dead)
      .value("timed_out", Errc::timed_out)
      .value("already_exists", Errc::already_exists);
  py::enum_<IdleStrategy>(m, "IdleStrategy", "How recv_wait / push_wait wait between polls.")
      .value("spin", IdleStrategy::kSpin, "busy-poll: lowest latency, burns a core")
      .value("spin_then_yield", IdleStrategy::kSpinThenYield, "poll, then sched_yield between polls")
      .value("spin_then_block", IdleStrategy::kSpinThenBlock,
             "poll, then sleep (futex on a wakeups ring, else back off with nanosleep)")
      .value("block", IdleStrategy::kBlock, "sleep at once");

  py::enum_<WakePolicy>(m, "WakePolicy", "How a producer wakes consumers asleep in recv_wait (Ring.set_wake_policy).")
      .value("auto", WakePolicy::kAuto,
             "the default: chain while the producer wakes sleepers more often than every 50 us and more of "
             "them sleep than it has other CPUs, else wake_all")
      .value("wake_all", WakePolicy::kWakeAll, "the producer wakes every sleeper itself (~1 us each)")
      .value("chain", WakePolicy::kChain,
             "the producer wakes one sleeper per other CPU and the first of them to run wakes the rest");
  py::enum_<StartAt>(m, "StartAt", "Where a new consumer starts (Ring.register_consumer).")
      .value("latest", StartAt::kLatest, "the current producer position: only messages published from now on")
      .value("oldest", StartAt::kOldest,
             "the oldest message still in the ring (its last capacity messages), then live ones");
}

void bind_ring(py::module_& m) {
  py::class_<Ring, RingPtr> ring(m, "Ring",
                                 R"(A handle on a broadcast ring: one producer, up to 16 consumers, 52-byte messages.

Open one with Ring.create / Ring.open (a file, e.g. under /dev/shm), Ring.create_shm /
Ring.open_shm (a POSIX shared-memory name) or Ring.create_anonymous (this process only).
A Ring is a context manager: leaving the block closes it, which unregisters its
consumers and gives up the producer role. Errors raise RingError.)");

  ring.def_static(
          "create",
          [](const std::filesystem::path& path, std::uint64_t capacity, std::uint32_t mode, bool replace, bool lossy,
             bool wakeups, bool claim_producer, bool reap_on_full) {
            return make_ring(
                BroadcastRing::create(path.string(), capacity,
                                      create_options(mode, replace, lossy, wakeups, claim_producer, reap_on_full)),
                path.string());
          },
          py::arg("path"), py::arg("capacity"), py::kw_only(), py::arg("mode") = 0600, py::arg("replace") = false,
          py::arg("lossy") = false, py::arg("wakeups") = false, py::arg("claim_producer") = true,
          py::arg("reap_on_full") = false,
          R"(Create a ring file with `capacity` slots (2 .. 2**30).

mode: file mode (default 0o600). replace: unlink an existing regular file first
(otherwise RingError already_exists). lossy: the producer never waits and slow
consumers are lapped. wakeups: recv_wait / push_wait sleep on a futex (costs one
fence per push and receive). claim_producer: this handle becomes the producer.
reap_on_full: the producer frees dead consumers' entries when the ring is full.)")
      .def_static(
          "open",
          [](const std::filesystem::path& path, std::uint64_t expected_capacity, bool read_only, bool reap_on_full) {
            return make_ring(BroadcastRing::open(path.string(), {.expected_capacity = expected_capacity,
                                                                 .read_only = read_only,
                                                                 .reap_on_full = reap_on_full}),
                             path.string());
          },
          py::arg("path"), py::kw_only(), py::arg("expected_capacity") = 0, py::arg("read_only") = false,
          py::arg("reap_on_full") = false,
          R"(Open an existing ring file.

RingError io_error (no such file, permissions), not_ready (its creator is still
initialising it), layout_mismatch (not a ring, another version, a capacity other
than expected_capacity when that is not 0, a truncated file).)")
      .def_static(
          "create_shm",
          [](const std::string& name, std::uint64_t capacity, std::uint32_t mode, bool lossy, bool wakeups,
             bool claim_producer, bool reap_on_full) {
            return make_ring(
                BroadcastRing::create_shm(name, capacity,
                                          create_options(mode, false, lossy, wakeups, claim_producer, reap_on_full)),
                name);
          },
          py::arg("name"), py::arg("capacity"), py::kw_only(), py::arg("mode") = 0600, py::arg("lossy") = false,
          py::arg("wakeups") = false, py::arg("claim_producer") = true, py::arg("reap_on_full") = false,
          "Create a ring in the POSIX shared-memory object `name` (\"/ticks\"); options as create().")
      .def_static(
          "open_shm",
          [](const std::string& name, std::uint64_t expected_capacity, bool read_only, bool reap_on_full) {
            return make_ring(BroadcastRing::open_shm(name, {.expected_capacity = expected_capacity,
                                                            .read_only = read_only,
                                                            .reap_on_full = reap_on_full}),
                             name);
          },
          py::arg("name"), py::kw_only(), py::arg("expected_capacity") = 0, py::arg("read_only") = false,
          py::arg("reap_on_full") = false, "Open the ring in the POSIX shared-memory object `name`; as open().")
      .def_static(
          "remove_shm",
          [](const std::string& name) {
            if (auto r = BroadcastRing::remove_shm(name); !r) raise_error(name, r.error());
          },
          py::arg("name"), "Remove the shared-memory object `name` (handles already open keep working).")
      .def_static(
          "create_anonymous",
          [](std::uint64_t capacity, bool lossy, bool wakeups) {
            return make_ring(
                BroadcastRing::create_anonymous(capacity, create_options(0600, false, lossy, wakeups, true, false)),
                "<anonymous>");
          },
          py::arg("capacity"), py::kw_only(), py::arg("lossy") = false, py::arg("wakeups") = false,
          "A ring in anonymous shared memory for the threads of this process (no file, no liveness checks).");

  ring.def_property_readonly("name", &Ring::name, "The path or shared-memory name the ring was opened by.")
      .def_property_readonly("closed", &Ring::closed)
      .def_property_readonly(
          "capacity", [](Ring& r) { return r.handle().capacity(); }, "Slots in the ring.")
      .def_property_readonly("lossy", [](Ring& r) { return r.handle().lossy(); })
      .def_property_readonly("wakeups", [](Ring& r) { return r.handle().wakeups(); })
      .def_property_readonly(
          "is_producer", [](Ring& r) { return r.handle().is_producer(); },
          "True while this handle holds the producer role.")
      .def_property_readonly(
          "producer_waiting", [](const Ring& r) { return r.producer_waiting; },
          "True while a thread waits in push_wait on this handle (with the GIL released).")
      .def("close", &Ring::close,
           "Unregister this handle's consumers, release the producer role, unmap. Idempotent.\n"
           "RuntimeError while another thread waits on the ring.")
      .def("__enter__", [](RingPtr self) { return self; })
      .def("__exit__", [](Ring& r, const py::args&) { r.close(); })
      .def("__repr__", [](Ring& r) {
        if (r.closed()) return fmt::format("<ringcast.Ring '{}' closed>", r.name());
        if (r.inherited()) return fmt::format("<ringcast.Ring '{}' opened by the parent of a fork>", r.name());
        const BroadcastRing& h = r.handle();
        return fmt::format("<ringcast.Ring '{}' capacity={}{}{}{}>", r.name(), h.capacity(), h.lossy() ? " lossy" : "",
                           h.wakeups() ? " wakeups" : "", h.is_producer() ? " producer" : "");
      });

  // Producer side.
  ring.def(
          "claim_producer",
          [](Ring& r) {
            if (auto c = r.producer_handle().claim_producer(); !c) raise_error(r.name(), c.error());
          },
          "Take the producer role (try_push also takes it on first use). RingError producer_busy\n"
          "while another live handle holds it; after a producer died, resumes after its last message.")
      .def(
          "release_producer", [](Ring& r) { r.producer_handle().release_producer(); },
          "Give the producer role up so another handle may claim it.")
      .def(
          "set_wake_policy", [](Ring& r, WakePolicy policy) { r.producer_handle().set_wake_policy(policy); },
          py::arg("policy"),
          "How this handle, as the producer, wakes consumers asleep in recv_wait (a WakePolicy; auto\n"
          "by default). RuntimeError while a thread waits in push_wait on this handle.")
      .def_property(
          "waiter_slice", [](Ring& r) { return r.handle().waiter_slice().count(); },
          [](Ring& r, std::int64_t microseconds) {
            if (microseconds < 0) throw py::value_error("waiter_slice must be >= 0 microseconds");
            r.handle().set_waiter_slice(std::chrono::microseconds(microseconds));
          },
          "How long, in microseconds, a woken sleeper may wait for a CPU (100 by default; 0 turns this\n"
          "off). On Linux >= 6.12 a thread's first sleep in this handle's recv_wait or push_wait shortens\n"
          "its SCHED_OTHER slice to this, so that it preempts a busy task when woken; and this handle, as\n"
          "the producer, yields its CPU after a wake-up at most once per this interval. A slice is never\n"
          "lengthened, nice is kept, and real-time, batch and idle threads keep theirs.")
      .def_property_readonly(
          "late_wakeups", [](Ring& r) { return r.handle().late_wakeups(); },
          "Waits of this handle (recv_wait, push_wait) that ended on a capped sleep instead of a\n"
          "wake-up: a consumer stopped or killed while it should have passed a wake-up on, or\n"
          "membarrier(2) refused. Each was late by up to the cap (1 ms / 100 ms); 0 normally.")
      .def("try_push", &Ring::try_push, py::arg("payload"),
           R"(Push one message (any bytes-like object of at most 52 bytes).

Returns True when pushed, False when the ring is full (the slowest consumer is
`capacity` behind; never on a lossy ring). RingError payload_too_large,
producer_busy, not_producer.)")
      .def("push_wait", &Ring::push_wait, py::arg("payload"), py::arg("timeout") = py::none(),
           py::arg("idle") = py::none(),
           R"(Push one message, waiting up to `timeout` seconds (None: forever) for room.

Returns True when pushed, False on timeout. The GIL is released while it waits,
and Ctrl-C interrupts it (KeyboardInterrupt). idle: an IdleStrategy, or None for
the library's default.)")
      .def("push_batch", &push_batch, py::arg("records"),
           R"(Push the elements of a 1-D NumPy array, one message each, in order, until the
ring is full. Returns how many were pushed (the rest were not).

The dtype is either a record type of 1..52 bytes (the message is the record's
bytes) or RAW_DTYPE (the message is data[:length]). No Python object is made per
message.)");

  // Consumers and observers.
  ring.def(
          "register_consumer",
          [](const RingPtr& self, StartAt start) {
            auto id = self->handle().register_consumer(start);
            if (!id) raise_error(self->name(), id.error());
            return std::make_unique<Consumer>(self, *id);
          },
          py::arg("start") = StartAt::kLatest,
          R"(Register a consumer that starts at the current producer position
(StartAt.latest, the default: no history) or at the oldest message still in the
ring (StartAt.oldest: its last `capacity` messages, then live ones). History the
producer overwrites before it is read raises RingError lapped with the count
missed; a message is never returned torn or out of order.

Returns a Consumer (a context manager: leaving it unregisters). RingError
no_consumer_slot when all 16 entries are taken by live consumers.)")
      .def(
          "lag", [](Ring& r, ConsumerId id) { return r.handle().lag(id); }, py::arg("consumer_id"),
          "Messages published but not yet received by consumer `consumer_id` (any process's);\n"
          "0 for an inactive or out-of-range id.")
      .def(
          "lag", [](Ring& r, const Consumer& c) { return r.handle().lag(c.id()); }, py::arg("consumer"))
      .def(
          "is_fully_drained", [](Ring& r) { return r.handle().is_fully_drained(); },
          "True when every active consumer has received every published message.")
      .def(
          "producer_position", [](Ring& r) { return r.handle().producer_position(); },
          "Messages published since the ring was created.")
      .def("active_consumer_count", [](Ring& r) { return r.handle().active_consumer_count(); })
      .def(
          "reap_dead_consumers",
          [](Ring& r) {
            auto n = r.handle().reap_dead_consumers();
            if (!n) raise_error(r.name(), n.error());
            return *n;
          },
          "Free every consumer entry whose owner process died; returns how many.");
}

void bind_consumer(py::module_& m) {
  py::class_<Consumer>(m, "Consumer",
                       R"(A consumer registered on a Ring: it sees every message pushed after it registered,
in order. Use it from one thread at a time. A context manager: leaving the block
(or close(), or dropping the last reference) unregisters it.)")
      .def_property_readonly("id", &Consumer::id, "Its entry in the ring's consumer table (0..15).")
      .def_property_readonly("ring", &Consumer::ring)
      .def_property_readonly("closed", &Consumer::closed)
      .def_property_readonly(
          "waiting", [](const Consumer& c) { return c.waiting; },
          "True while a thread waits in recv_wait on it (with the GIL released).")
      .def("close", &Consumer::close, "Unregister. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Consumer& c, const py::args&) { c.close(); })
      .def("__repr__",
           [](const Consumer& c) {
             return fmt::format("<ringcast.Consumer {} of '{}'{}>", c.id(), c.ring()->name(),
                                c.closed() ? " closed" : "");
           })
      .def("try_recv", &Consumer::try_recv,
           R"(The next message as bytes, or None when there is none yet.

RingError lapped (lossy ring: e.missed messages were overwritten; the next call
returns the oldest one still there), producer_dead (the producer died mid-write),
layout_mismatch (a corrupt slot).)")
      .def("recv_wait", &Consumer::recv_wait, py::arg("timeout") = py::none(), py::arg("idle") = py::none(),
           R"(The next message as bytes, waiting up to `timeout` seconds (None: forever);
None on timeout.

The GIL is released while it waits, and Ctrl-C interrupts it (KeyboardInterrupt).
idle: an IdleStrategy, or None for the library's default. Errors as try_recv.)")
      .def("drain", &drain, py::arg("max") = 1024, py::arg("dtype") = py::none(),
           R"(Receive up to `max` (at most `capacity`) messages into a new 1-D NumPy array, one element each.

dtype: a record dtype of 1..52 bytes (every message must be one record; a message
of another length stops the batch before it and raises ValueError when it is
first), or None for RAW_DTYPE (length + 52 data bytes). Returns an empty array
when nothing is ready. Errors as try_recv.)")
      .def("drain_into", &drain_into, py::arg("out"),
           R"(As drain(), into a preallocated 1-D array (record dtype or RAW_DTYPE), from its
first element; returns how many were received. Allocates nothing.)")
      .def("lag", &Consumer::lag, "Messages published but not yet received by this consumer.");
}

}  // namespace
}  // namespace ringcast::python

PYBIND11_MODULE(_ringcast, m) {
  namespace rp = ringcast::python;
  m.doc() = "ringcast: shared-memory broadcast rings (the C++ extension; import ringcast)";
  rp::bind_enums(m);
  rp::register_errors(m);
  rp::register_records(m);
  rp::register_fork_guard();
  rp::bind_ring(m);
  rp::bind_consumer(m);
  m.attr("MAX_PAYLOAD") = ringcast::kMaxPayload;
  m.attr("MAX_CONSUMERS") = ringcast::kMaxConsumers;
  m.attr("MIN_CAPACITY") = ringcast::kMinCapacity;
  m.attr("MAX_CAPACITY") = ringcast::kMaxCapacity;
}
