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
#include "wait_set.hpp"
#include "zero_copy.hpp"

namespace ringcast::python {
namespace {

using RingPtr = std::shared_ptr<Ring>;

RingPtr make_ring(Result<BroadcastRing> ring, std::string name) {
  if (!ring) raise_error(name, ring.error());
  return std::make_shared<Ring>(std::move(*ring), std::move(name));
}

CreateOptions create_options(std::uint32_t mode, bool replace, bool lossy, bool wakeups, bool claim_producer,
                             bool reap_on_full, std::size_t max_message, bool separate_slots = false) {
  return {.mode = static_cast<mode_t>(mode),
          .replace = replace,
          .lossy = lossy,
          .wakeups = wakeups,
          .claim_producer = claim_producer,
          .reap_on_full = reap_on_full,
          .max_message = max_message,
          .separate_slots = separate_slots};
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
      .value("already_exists", Errc::already_exists)
      .value("buffer_too_small", Errc::buffer_too_small);
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
                                 R"(A handle on a broadcast ring: one producer, up to 16 consumers, messages of
0..max_message bytes (64 KiB by default).

Open one with Ring.create / Ring.open (a file, e.g. under /dev/shm), Ring.create_shm /
Ring.open_shm (a POSIX shared-memory name) or Ring.create_anonymous (this process only).
A Ring is a context manager: leaving the block closes it, which unregisters its
consumers and gives up the producer role. Errors raise RingError.)");

  ring.def_static(
          "create",
          [](const std::filesystem::path& path, std::uint64_t capacity, std::uint32_t mode, bool replace, bool lossy,
             bool wakeups, bool claim_producer, bool reap_on_full, std::size_t max_message, bool separate_slots) {
            return make_ring(BroadcastRing::create(path.string(), capacity,
                                                   create_options(mode, replace, lossy, wakeups, claim_producer,
                                                                  reap_on_full, max_message, separate_slots)),
                             path.string());
          },
          py::arg("path"), py::arg("capacity"), py::kw_only(), py::arg("mode") = 0600, py::arg("replace") = false,
          py::arg("lossy") = false, py::arg("wakeups") = false, py::arg("claim_producer") = true,
          py::arg("reap_on_full") = false, py::arg("max_message") = 0, py::arg("separate_slots") = false,
          R"(Create a ring file with `capacity` 64-byte slots (2 .. 2**30).

mode: file mode (default 0o600). replace: unlink an existing regular file first
(otherwise RingError already_exists). lossy: the producer never waits and slow
consumers are lapped. wakeups: recv_wait / push_wait sleep on a futex (costs one
fence per push and receive). claim_producer: this handle becomes the producer.
reap_on_full: the producer frees dead consumers' entries when the ring is full.
max_message: the largest message in bytes, fixed at creation; 0 means 64 KiB, or
less if the capacity cannot hold it (a message may take at most half the ring:
max_message_for(capacity)); up to 52 keeps one slot per message. A larger value
than the capacity allows raises RingError payload_too_large. separate_slots: the
slots go in the file path + ".slots", made with `mode` less group and other
write, so readers need write permission on the ring file and only read
permission on the slots file (docs/design.md, "Read-only readers"); Ring.remove
deletes both.)")
      .def_static(
          "open",
          [](const std::filesystem::path& path, std::uint64_t expected_capacity, bool read_only, bool read_only_slots,
             bool reap_on_full) {
            return make_ring(BroadcastRing::open(path.string(), {.expected_capacity = expected_capacity,
                                                                 .read_only = read_only,
                                                                 .read_only_slots = read_only_slots,
                                                                 .reap_on_full = reap_on_full}),
                             path.string());
          },
          py::arg("path"), py::kw_only(), py::arg("expected_capacity") = 0, py::arg("read_only") = false,
          py::arg("read_only_slots") = false, py::arg("reap_on_full") = false,
          R"(Open an existing ring file.

read_only_slots: a reader whose message slots are mapped read-only (its cursor
stays writable): a stray write through its views faults in this process instead
of corrupting everyone's messages; it cannot produce (docs/design.md,
"Read-only readers").

RingError io_error (no such file, permissions), not_ready (its creator is still
initialising it), layout_mismatch (not a ring, another version, a capacity other
than expected_capacity when that is not 0, a truncated file).)")
      .def_static(
          "create_shm",
          [](const std::string& name, std::uint64_t capacity, std::uint32_t mode, bool lossy, bool wakeups,
             bool claim_producer, bool reap_on_full, std::size_t max_message) {
            return make_ring(BroadcastRing::create_shm(name, capacity,
                                                       create_options(mode, false, lossy, wakeups, claim_producer,
                                                                      reap_on_full, max_message)),
                             name);
          },
          py::arg("name"), py::arg("capacity"), py::kw_only(), py::arg("mode") = 0600, py::arg("lossy") = false,
          py::arg("wakeups") = false, py::arg("claim_producer") = true, py::arg("reap_on_full") = false,
          py::arg("max_message") = 0,
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
          "remove",
          [](const std::filesystem::path& path) {
            if (auto r = BroadcastRing::remove(path.string()); !r) raise_error(path.string(), r.error());
          },
          py::arg("path"),
          "Remove the ring file `path` and, if its slots are separate, its slots file (handles already open keep "
          "working). RingError, removing nothing, if `path` is not a ring.")
      .def_static(
          "create_anonymous",
          [](std::uint64_t capacity, bool lossy, bool wakeups, std::size_t max_message) {
            return make_ring(BroadcastRing::create_anonymous(
                                 capacity, create_options(0600, false, lossy, wakeups, true, false, max_message)),
                             "<anonymous>");
          },
          py::arg("capacity"), py::kw_only(), py::arg("lossy") = false, py::arg("wakeups") = false,
          py::arg("max_message") = 0,
          "A ring in anonymous shared memory for the threads of this process (no file, no liveness checks).");

  ring.def_property_readonly("name", &Ring::name, "The path or shared-memory name the ring was opened by.")
      .def_property_readonly("closed", &Ring::closed)
      .def_property_readonly(
          "capacity", [](Ring& r) { return r.handle().capacity(); },
          "Slots in the ring (64 bytes each; a message of more than 52 bytes takes several).")
      .def_property_readonly(
          "max_message", [](Ring& r) { return r.handle().max_message(); },
          "The largest message the ring carries, in bytes (fixed at creation).")
      .def_property_readonly("lossy", [](Ring& r) { return r.handle().lossy(); })
      .def_property_readonly("wakeups", [](Ring& r) { return r.handle().wakeups(); })
      .def_property_readonly(
          "is_producer", [](Ring& r) { return r.handle().is_producer(); },
          "True while this handle holds the producer role.")
      .def_property_readonly(
          "producer_waiting", [](const Ring& r) { return r.producer_waiting; },
          "True while a thread waits in push_wait on this handle (with the GIL released).")
      .def("close", &Ring::close,
           "Abort an open claim, unregister this handle's consumers, release the producer role, unmap.\n"
           "Idempotent. RuntimeError while another thread waits on the ring; BufferError while a\n"
           "buffer of one of its claims or views is exported.")
      .def("__enter__", [](RingPtr self) { return self; })
      .def("__exit__", [](Ring& r, const py::args&) { r.close(); })
      .def("__repr__", [](Ring& r) {
        if (r.closed()) return fmt::format("<ringcast.Ring '{}' closed>", r.name());
        if (r.inherited()) return fmt::format("<ringcast.Ring '{}' opened by the parent of a fork>", r.name());
        const BroadcastRing& h = r.handle();
        return fmt::format("<ringcast.Ring '{}' capacity={} max_message={}{}{}{}>", r.name(), h.capacity(),
                           h.max_message(), h.lossy() ? " lossy" : "", h.wakeups() ? " wakeups" : "",
                           h.is_producer() ? " producer" : "");
      });

  // Producer side.
  ring.def(
          "claim_producer",
          [](Ring& r) {
            if (auto c = r.push_handle().claim_producer(); !c) raise_error(r.name(), c.error());
          },
          "Take the producer role (try_push also takes it on first use). RingError producer_busy\n"
          "while another live handle holds it; after a producer died, resumes after its last message.")
      .def(
          "release_producer", [](Ring& r) { r.push_handle().release_producer(); },
          "Give the producer role up so another handle may claim it. RuntimeError while a claim is open.")
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
           R"(Push one message: a C-contiguous bytes-like object of 0..max_message bytes, copied in.

Returns True when pushed, False when the ring is full (the slowest consumer is too
far behind for the message's slots; never on a lossy ring). RingError
payload_too_large, producer_busy, not_producer. RuntimeError while a claim is open.)")
      .def("mark_upstream_loss", &Ring::mark_upstream_loss, py::arg("lost"),
           R"(Record that `lost` messages were lost before this producer got them: counted in
status().upstream_lost, and (on a ring that carries records) a marker in the stream
that consumers pass and count in Consumer.upstream_lost_seen() before the next
message. Returns False when the ring is full (nothing recorded; call again).)")
      .def("push_wait", &Ring::push_wait, py::arg("payload"), py::arg("timeout") = py::none(),
           py::arg("idle") = py::none(),
           R"(Push one message, waiting up to `timeout` seconds (None: forever) for room.

Returns True when pushed, False on timeout. The GIL is released while it waits,
and Ctrl-C interrupts it (KeyboardInterrupt). idle: an IdleStrategy, or None for
the library's default.)")
      .def("push_batch", &push_batch, py::arg("records"),
           R"(Push the elements of a 1-D NumPy array, one message each, in order, until the
ring is full. Returns how many were pushed (the rest were not).

The dtype is either a record type of 1..max_message bytes (the message is the
record's bytes) or RAW_DTYPE (the message is data[:length]). No Python object is
made per message.)")
      .def("try_claim", &Ring::try_claim, py::arg("length"),
           R"(Claim room for one message of `length` bytes (0..max_message) to write in place.

Returns a Claim, or None when the ring is full (as try_push). The Claim is a
writable buffer of `length` bytes (memoryview(claim), numpy.frombuffer(claim,
dtype)) and a context manager: the block's normal end commits it (publishes the
message), an exception aborts it. On a blocking ring a message of more than 52
bytes is written straight into the ring (no copy); otherwise the claim's buffer
is the handle's and commit copies it in. No other push or claim may be made
through this handle while it is open (RuntimeError). RingError
payload_too_large, producer_busy, not_producer.)")
      .def("claim_wait", &Ring::claim_wait, py::arg("length"), py::arg("timeout") = py::none(),
           py::arg("idle") = py::none(),
           R"(try_claim, waiting up to `timeout` seconds (None: forever) for room.

Returns a Claim, or None on timeout. The GIL is released while it waits, and
Ctrl-C interrupts it (KeyboardInterrupt). RingError as try_claim.)");

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
          "Positions (slots) published but not yet received by consumer `consumer_id` (any\n"
          "process's): messages, on a ring of one slot per message. 0 for an inactive or\n"
          "out-of-range id.")
      .def(
          "lag", [](Ring& r, const Consumer& c) { return r.handle().lag(c.id()); }, py::arg("consumer"))
      .def(
          "is_fully_drained", [](Ring& r) { return r.handle().is_fully_drained(); },
          "True when every active consumer has received every published message.")
      .def(
          "producer_position", [](Ring& r) { return r.handle().producer_position(); },
          "Positions (slots) published since the ring was created: messages, on a ring of one\n"
          "slot per message (status().messages counts messages on any ring).")
      .def("active_consumer_count", [](Ring& r) { return r.handle().active_consumer_count(); })
      .def(
          "reap_dead_consumers",
          [](Ring& r) {
            auto n = r.handle().reap_dead_consumers();
            if (!n) raise_error(r.name(), n.error());
            return *n;
          },
          "Free every consumer entry whose owner process died; returns how many.")
      .def(
          "status", [](Ring& r) { return r.handle().status(); },
          "A moment's view of the whole ring (RingStatus): positions, totals, producer and consumers.");
}

void bind_status(py::module_& m) {
  py::class_<ConsumerStatus>(m, "ConsumerStatus", "One entry of the consumer table (RingStatus.consumers).")
      .def_readonly("active", &ConsumerStatus::active)
      .def_readonly("owner_alive", &ConsumerStatus::owner_alive,
                    "False when the owner died without unregistering (reap_dead_consumers frees it).")
      .def_readonly("owner_pid", &ConsumerStatus::owner_pid)
      .def_readonly("cursor", &ConsumerStatus::cursor, "The next position it reads.")
      .def_readonly("lag", &ConsumerStatus::lag, "Positions published but not yet read.")
      .def("__repr__", [](const ConsumerStatus& c) {
        return fmt::format("<ringcast.ConsumerStatus active={} pid={} cursor={} lag={}>", c.active ? "True" : "False",
                           c.owner_pid, c.cursor, c.lag);
      });
  py::class_<RingStatus>(m, "RingStatus",
                         "A moment's view of a ring (Ring.status()). Positions (producer_seq, cursors, lag)\n"
                         "count 64-byte slots; messages and payload_bytes count what was published.")
      .def_readonly("capacity", &RingStatus::capacity)
      .def_readonly("flags", &RingStatus::flags)
      .def_readonly("max_message", &RingStatus::max_message, "The largest payload the ring carries.")
      .def_readonly("producer_seq", &RingStatus::producer_seq, "The position published so far (slots).")
      .def_readonly("messages", &RingStatus::messages, "Messages published.")
      .def_readonly("payload_bytes", &RingStatus::payload_bytes, "Their payload bytes.")
      .def_readonly("producer_pid", &RingStatus::producer_pid)
      .def_readonly("producer_alive", &RingStatus::producer_alive, "Some live handle holds the producer role.")
      .def_readonly("half_written_slot", &RingStatus::half_written_slot,
                    "The next slot is half-written: a producer died mid-write.")
      .def_readonly("sleeping_consumers", &RingStatus::sleeping_consumers)
      .def_readonly("producer_sleeping", &RingStatus::producer_sleeping)
      .def_readonly("upstream_lost", &RingStatus::upstream_lost)
      .def_readonly("upstream_gaps", &RingStatus::upstream_gaps)
      .def_property_readonly(
          "consumers",
          [](const RingStatus& s) {
            py::list entries;
            for (const ConsumerStatus& c : s.consumers) entries.append(c);
            return entries;
          },
          "The consumer table: MAX_CONSUMERS entries, indexed by consumer id.")
      .def("__repr__", [](const RingStatus& s) {
        return fmt::format(
            "<ringcast.RingStatus capacity={} max_message={} producer_seq={} messages={} "
            "payload_bytes={}>",
            s.capacity, s.max_message, s.producer_seq, s.messages, s.payload_bytes);
      });
}

void bind_zero_copy(py::module_& m) {
  py::class_<Claim> claim(m, "Claim", py::buffer_protocol(),
                          R"(Room for one message at the head of a ring (Ring.try_claim): a writable buffer.

Write the message through memoryview(claim) or numpy.frombuffer(claim, dtype), then
commit() publishes it (commit(n): its first n bytes) or abort() gives the room back;
as a context manager the block's normal end commits and an exception aborts.
Whatever is made from the buffer (memoryviews, arrays) must be gone by then:
commit and abort raise BufferError while it lives, and leave the claim open.)");
  enable_lending<Claim>(claim);
  claim.def("__len__", &Claim::size, "The claimed length in bytes (0 once closed).")
      .def_property_readonly("closed", &Claim::closed, "True once committed or aborted.")
      .def("commit", &Claim::commit, py::arg("length") = py::none(),
           "Publish the message: its first `length` bytes (default: all). ValueError when closed or\n"
           "`length` is longer than the claim; BufferError while the buffer is exported.")
      .def("abort", &Claim::abort, "Give the room back unpublished. No-op when closed.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](Claim& c, const py::object& type, const py::object&, const py::object&) { c.exit(!type.is_none()); })
      .def("__repr__", [](const Claim& c) {
        return c.closed() ? std::string("<ringcast.Claim closed>") : fmt::format("<ringcast.Claim {} bytes>", c.size());
      });

  py::class_<View> view(m, "MessageView", py::buffer_protocol(),
                        R"(The next message of a consumer, read without a copy where the ring allows it
(Consumer.try_view / view_wait): a read-only buffer.

Read it through memoryview(view), numpy.frombuffer(view, dtype) or bytes(view).
release() consumes the message; as a context manager the block's normal end
releases it, and an exception leaves it unread (the next receive returns it
again). Whatever is made from the buffer must be gone by then: release, and the
consumer's next receive or close, raise BufferError while it lives. in_place:
the bytes are the ring's own (a message of more than 52 bytes on a blocking ring).)");
  enable_lending<View>(view);
  view.def("__len__", &View::size, "The message's length in bytes.")
      .def_property_readonly("in_place", &View::in_place,
                             "True when the bytes are read in the ring itself (zero copy); otherwise they are a\n"
                             "validated copy in a buffer of the ring handle.")
      .def_property_readonly("closed", &View::closed,
                             "True once released, left unread by its with block, or ended by a later receive.")
      .def("release", &View::release,
           "Consume the message. No-op once released; ValueError if it was left unread or ended by a\n"
           "later receive; BufferError while the buffer is exported.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](View& v, const py::object& type, const py::object&, const py::object&) { v.exit(!type.is_none()); })
      .def("__repr__", [](const View& v) {
        return fmt::format("<ringcast.MessageView {} bytes{}{}>", v.size(), v.in_place() ? " in place" : "",
                           v.state() == View::State::kOpen ? "" : " closed");
      });
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
          "True while a thread waits in recv_wait, recv_wait_into or view_wait on it (with the GIL\n"
          "released).")
      .def("close", &Consumer::close,
           "Unregister (an open view ends unconsumed). Idempotent. BufferError while its view is exported.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Consumer& c, const py::args&) { c.close(); })
      .def("__repr__",
           [](const Consumer& c) {
             return fmt::format("<ringcast.Consumer {} of '{}'{}>", c.id(), c.ring()->name(),
                                c.closed() ? " closed" : "");
           })
      .def("try_recv", &Consumer::try_recv,
           R"(The next message as bytes (one copy, of any length), or None when there is none yet.

RingError lapped (lossy ring: e.missed positions were overwritten; the next call
returns the oldest message still there), producer_dead (the producer died
mid-write), layout_mismatch (a corrupt slot).)")
      .def("recv_wait", &Consumer::recv_wait, py::arg("timeout") = py::none(), py::arg("idle") = py::none(),
           R"(The next message as bytes, waiting up to `timeout` seconds (None: forever);
None on timeout.

The GIL is released while it waits, and Ctrl-C interrupts it (KeyboardInterrupt).
idle: an IdleStrategy, or None for the library's default. Errors as try_recv.)")
      .def("try_recv_into", &Consumer::try_recv_into, py::arg("buffer"),
           R"(Copy the next message into `buffer` (a writable C-contiguous bytes-like object:
bytearray, memoryview, NumPy array) from its first byte; return its length, or
None when there is none yet.

RingError buffer_too_small when the message is longer than the buffer (e.needed
says how long; nothing is consumed). Other errors as try_recv.)")
      .def("recv_wait_into", &Consumer::recv_wait_into, py::arg("buffer"), py::arg("timeout") = py::none(),
           py::arg("idle") = py::none(),
           R"(As try_recv_into, waiting up to `timeout` seconds (None: forever) as recv_wait does;
None on timeout.)")
      .def(
          "try_view", [](const py::object& self) { return self.cast<Consumer&>().try_view(self); },
          R"(The next message as a MessageView (read in the ring itself where it can be), or None
when there is none yet. The message is consumed when the view is released.

Calling it again (or any receive) before release ends the view unconsumed and
returns the same message again. Errors as try_recv.)")
      .def(
          "view_wait",
          [](const py::object& self, std::optional<double> timeout, std::optional<IdleStrategy> idle) {
            return self.cast<Consumer&>().view_wait(self, timeout, idle);
          },
          py::arg("timeout") = py::none(), py::arg("idle") = py::none(),
          R"(As try_view, waiting up to `timeout` seconds (None: forever) as recv_wait does; None
on timeout. A message of 0 bytes is consumed as the wait ends (its view has
nothing to release).)")
      .def("drain", &drain, py::arg("max") = 1024, py::arg("dtype") = py::none(),
           R"(Receive up to `max` messages (at most as many as the ring holds) into a new 1-D NumPy
array, one element each.

dtype: a record dtype of 1..max_message bytes (every message must be one record; a
message of another length stops the batch before it and raises ValueError when it
is first), or None for RAW_DTYPE (length + 52 data bytes: a message over 52 bytes
is refused the same way). Returns an empty array when nothing is ready. Errors as
try_recv.)")
      .def("drain_into", &drain_into, py::arg("out"),
           R"(As drain(), into a preallocated 1-D array (record dtype or RAW_DTYPE), from its
first element; returns how many were received. Allocates nothing.)")
      .def("lag", &Consumer::lag, "Positions (slots) published but not yet received by this consumer.")
      .def("upstream_lost_seen", &Consumer::upstream_lost_seen,
           R"(Messages lost upstream (a NATS ingress's gaps) before the messages this consumer
has received: read it before and after a receive to learn how many were lost just
before that message. 0 on a ring created with max_message 52.)");
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
  rp::bind_status(m);
  rp::bind_ring(m);
  rp::bind_consumer(m);
  rp::bind_zero_copy(m);
  rp::bind_wait_set(m);
  m.def(
      "max_message_for", [](std::uint64_t capacity) { return ringcast::layout::max_message_for(capacity); },
      pybind11::arg("capacity"),
      "The largest max_message a ring of `capacity` slots allows (a message may take at most half the ring).");
  m.attr("MAX_PAYLOAD") = ringcast::kMaxPayload;
  m.attr("DEFAULT_MAX_MESSAGE") = ringcast::kDefaultMaxMessage;
  m.attr("MAX_CONSUMERS") = ringcast::kMaxConsumers;
  m.attr("MIN_CAPACITY") = ringcast::kMinCapacity;
  m.attr("MAX_CAPACITY") = ringcast::kMaxCapacity;
}
