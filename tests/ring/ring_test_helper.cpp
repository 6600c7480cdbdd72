// A child process for the cross-process and crash tests. Each mode prints
// "ready" on stdout once it is registered, so the parent can synchronise on
// the pipe rather than on time, and exits 0 only if every check passed.
//
//   ring_test_helper produce PATH COUNT            push COUNT patterned messages
//   ring_test_helper consume PATH COUNT            receive COUNT, verify order and contents
//   ring_test_helper consume-lossy PATH SECONDS    verify untorn, increasing messages until the
//                                                  producer is gone or time is up
//   ring_test_helper hold PATH                     register a consumer and sleep (to be killed)
//   ring_test_helper wait-one PATH SECONDS         register, then one recv_wait with the default
//                                                  strategy; exits 0 if it returns message 0,
//                                                  printing "rescued 0|1" (1: a capped sleep, not a
//                                                  wake-up, gave it the message) and "run-queue-ms N"
//                                                  (how long it waited for a CPU meanwhile), "end"
//   ring_test_helper die-mid-write PATH            claim the producer role, leave the next slot
//                                                  half-written, and SIGKILL itself
//   ring_test_helper die-mid-batch PATH            claim, push message 0, then die inside a
//                                                  batch: messages 1 and 2 committed but never
//                                                  published, slot 3 half-written
//   ring_test_helper produce-sized PATH COUNT [FIRST]  push messages FIRST.. FIRST+COUNT-1 of
//                                                  random sizes up to max_message (records)
//   ring_test_helper consume-sized PATH LAST       receive sized messages by try_recv, drain
//                                                  and views in turn until message LAST; each
//                                                  whole and the one after the previous, but
//                                                  for one forward jump (a producer takeover);
//                                                  prints "jumps N" and "received N"
//   ring_test_helper consume-sized-lossy PATH SECONDS  as consume-lossy, for sized messages
//   ring_test_helper die-mid-claim PATH            push sized message 0, claim room for a
//                                                  record, write half of message 1 into it and
//                                                  SIGKILL itself
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "message_pattern.hpp"
#include "raw_slots.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/wait_set.hpp"
#include "run_queue_delay.hpp"

using namespace ringcast;
using namespace std::chrono_literals;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "ring_test_helper: %s\n", what.c_str());
  return 1;
}

void ready() {
  std::printf("ready\n");
  std::fflush(stdout);
}

int produce(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  ready();
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  for (std::uint64_t seq = ring->producer_position(); seq < count; ++seq) {
    test::make_message(seq, msg);
    const Errc e = ring->push_wait(msg, {60s, IdleStrategy::kSpinThenYield});
    if (e != Errc::ok) return fail("push " + std::to_string(seq) + ": " + std::string(to_string(e)));
  }
  return 0;
}

int consume(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  std::uint64_t expected = 0;
  bool bad = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (expected < count && !bad) {
    const BatchResult r = ring->drain(
        *id,
        [&](std::span<const std::byte> p) {
          const auto seq = test::check_message(p);
          if (!seq || *seq != expected) bad = true;
          ++expected;
        },
        256);
    if (r.count == 0) {
      if (r.status != Errc::empty && r.status != Errc::stalled) return fail(std::string(to_string(r.status)));
      if (std::chrono::steady_clock::now() > deadline) return fail("timed out at " + std::to_string(expected));
      std::this_thread::yield();
    }
  }
  if (bad) return fail("message " + std::to_string(expected - 1) + " torn or out of order");
  return 0;
}

// As consume, through a WaitSet; then whether the producer confirmed the
// WaitSet's doorbell in this consumer's entry (it rang it: a producer in
// another mount namespace finds the file by its own path to the directory).
int consume_waitset(const std::string& path, std::uint64_t count) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  WaitSet ws;
  if (auto m = ws.add(*ring, *id); !m) return fail(m.error().message());
  ready();
  std::array<std::size_t, 1> members{};
  alignas(8) std::array<std::byte, kMaxPayload> buf{};
  for (std::uint64_t expected = 0; expected < count;) {
    if (const WaitSetResult w = ws.wait(members, 60s); !w) return fail("wait timed out at " + std::to_string(expected));
    for (RecvResult r = ring->try_recv(*id, buf); r.status != Errc::empty && r.status != Errc::stalled;
         r = ring->try_recv(*id, buf)) {
      if (r.status != Errc::ok) return fail(std::string(to_string(r.status)));
      const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
      if (!seq || *seq != expected) return fail("message " + std::to_string(expected) + " torn or out of order");
      ++expected;
    }
  }
  const test::RawSlots raw(path, ring->capacity());
  const layout::ConsumerEntry& e = raw.header().consumers[*id];
  if (e.doorbell.load() == 0 || e.doorbell_rung.load() != e.doorbell.load()) {
    return fail("the producer did not ring the WaitSet's doorbell");
  }
  return 0;
}

int consume_lossy(const std::string& path, int seconds) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  // Exact accounting: every message is the one after the previous, unless a
  // lapped result said how many were skipped.
  std::optional<std::uint64_t> next;
  std::uint64_t received = 0;
  alignas(8) std::array<std::byte, kMaxPayload> buf{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    const RecvResult r = ring->try_recv(*id, buf);
    if (r.status == Errc::ok) {
      const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
      if (!seq) return fail("torn read after " + std::to_string(received) + " messages");
      if (next && *seq != *next) return fail("expected " + std::to_string(*next) + ", got " + std::to_string(*seq));
      next = *seq + 1;
      ++received;
    } else if (r.status == Errc::lapped) {
      if (next) *next += r.missed;  // before the first message the start is unknown
    } else if (r.status == Errc::empty) {
      if (!ring->status().producer_alive && ring->lag(*id) == 0) break;
    } else if (r.status != Errc::stalled) {
      return fail(std::string(to_string(r.status)));
    }
  }
  std::printf("received %llu\n", static_cast<unsigned long long>(received));
  return received > 0 ? 0 : fail("received nothing");
}

int produce_sized(const std::string& path, std::uint64_t count, std::uint64_t first) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  ready();
  std::vector<std::byte> msg(ring->max_message());
  for (std::uint64_t seq = first; seq < first + count; ++seq) {
    const std::span<std::byte> payload(msg.data(), test::sized_length(seq, ring->max_message()));
    test::make_sized_message(seq, payload);
    const Errc e = ring->push_wait(payload, {60s, IdleStrategy::kSpinThenYield});
    if (e != Errc::ok) return fail("push " + std::to_string(seq) + ": " + std::string(to_string(e)));
  }
  return 0;
}

// One sized message for `id` by try_recv, drain or a view (mode 0, 1, 2),
// checked whole; its sequence, or the status that stopped it.
struct SizedRead {
  RecvResult r;
  std::optional<std::uint64_t> seq;
};
SizedRead read_sized(BroadcastRing& ring, ConsumerId id, int mode, std::vector<std::byte>& buf) {
  SizedRead out;
  const auto check = [&](std::span<const std::byte> m) { out.seq = test::check_sized_message(m, ring.max_message()); };
  switch (mode % 3) {
    case 1: {
      const BatchResult b = ring.drain(id, check, 1);
      out.r = b.count == 1 ? RecvResult{Errc::ok} : RecvResult{b.status, 0, b.missed};
      break;
    }
    case 2: {
      const MessageView v = ring.try_view(id);
      out.r = {v.status, 0, v.missed};
      if (v) {
        check(v.data);
        out.r.status = ring.release_view(id);
      }
      break;
    }
    default:
      out.r = ring.try_recv(id, buf);
      if (out.r) check(std::span<const std::byte>(buf.data(), out.r.length));
  }
  return out;
}

int consume_sized(const std::string& path, std::uint64_t last) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  std::vector<std::byte> buf(ring->max_message());
  std::uint64_t next = 0;
  std::uint64_t received = 0;
  int jumps = 0;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (int mode = 0;; ++mode) {
    const SizedRead got = read_sized(*ring, *id, mode, buf);
    if (got.r.status == Errc::ok) {
      if (!got.seq) return fail("torn message after " + std::to_string(received));
      if (*got.seq != next) {
        // A producer that died leaves the rest of its stream unsent; its
        // successor starts a new range. Never back, never twice.
        if (*got.seq < next || jumps++ > 0) {
          return fail("expected " + std::to_string(next) + ", got " + std::to_string(*got.seq));
        }
      }
      next = *got.seq + 1;
      ++received;
      if (*got.seq == last) break;
    } else if (got.r.status == Errc::empty || got.r.status == Errc::stalled || got.r.status == Errc::producer_dead) {
      // producer_dead: killed mid-write; a successor repairs the slot.
      if (std::chrono::steady_clock::now() > deadline) return fail("timed out at " + std::to_string(next));
      std::this_thread::yield();
    } else {
      return fail(std::string(to_string(got.r.status)));
    }
  }
  std::printf("jumps %d\nreceived %llu\n", jumps, static_cast<unsigned long long>(received));
  return 0;
}

int consume_sized_lossy(const std::string& path, int seconds) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  // A lap skips an unknown number of messages (it counts slots): after one,
  // any later message is accepted; otherwise exactly the next.
  std::optional<std::uint64_t> next;
  std::uint64_t received = 0;
  std::vector<std::byte> buf(ring->max_message());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool exact = false;
  for (int mode = 0; std::chrono::steady_clock::now() < deadline; ++mode) {
    const SizedRead got = read_sized(*ring, *id, mode, buf);
    if (got.r.status == Errc::ok) {
      if (!got.seq) return fail("torn read after " + std::to_string(received) + " messages");
      if (next && (exact ? *got.seq != *next : *got.seq < *next)) {
        return fail("expected " + std::to_string(*next) + ", got " + std::to_string(*got.seq));
      }
      next = *got.seq + 1;
      exact = true;
      ++received;
    } else if (got.r.status == Errc::lapped) {
      exact = false;
    } else if (got.r.status == Errc::empty) {
      if (!ring->status().producer_alive && ring->lag(*id) == 0) break;
    } else if (got.r.status != Errc::stalled) {
      return fail(std::string(to_string(got.r.status)));
    }
  }
  std::printf("received %llu\n", static_cast<unsigned long long>(received));
  return received > 0 ? 0 : fail("received nothing");
}

// A producer killed while it writes a record in place: the claim's room is
// reserved (and its write intent announced) but its header is not committed.
int die_mid_claim(const std::string& path) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  std::vector<std::byte> msg(ring->max_message());
  const std::span<std::byte> first(msg.data(), test::sized_length(0, ring->max_message()));
  test::make_sized_message(0, first);
  if (ring->try_push(first) != Errc::ok) return fail("first push");
  ProducerClaim claim = ring->try_claim(ring->max_message());
  if (!claim) return fail("claim");
  test::make_sized_message(1, claim.data());
  std::memset(claim.data().data() + claim.data().size() / 2, 0xEE, claim.data().size() / 2);
  ready();
  ::kill(::getpid(), SIGKILL);
  return 1;
}

int hold(const std::string& path) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  for (;;) ::pause();
}

int die_mid_write(const std::string& path) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  test::make_message(ring->producer_position(), msg);
  if (ring->try_push(msg) != Errc::ok) return fail("first push");
  // Scribble over the next slot as a producer killed between its odd-version
  // store and its commit would leave it: odd version, partial payload.
  const test::RawSlots raw(path, ring->capacity());
  if (!raw.ok()) return fail("map slots");
  raw.begin_write(ring->producer_position());
  ready();
  ::kill(::getpid(), SIGKILL);
  return 1;
}

// try_push_batch commits each slot as it goes and publishes producer_seq once
// at the end: a producer killed inside a batch leaves committed slots past the
// published position, which consumers may already have read.
int die_mid_batch(const std::string& path) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  if (auto c = ring->claim_producer(); !c) return fail(c.error().message());
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  test::make_message(0, msg);
  if (ring->try_push(msg) != Errc::ok) return fail("first push");
  const test::RawSlots raw(path, ring->capacity());
  if (!raw.ok()) return fail("map slots");
  for (std::uint64_t seq = 1; seq <= 2; ++seq) {
    test::make_message(seq, msg);
    raw.begin_write(seq);
    raw.commit(seq, msg);
  }
  raw.begin_write(3);
  ready();
  ::kill(::getpid(), SIGKILL);
  return 1;
}

}  // namespace

int wait_one(const std::string& path, int seconds) {
  auto ring = BroadcastRing::open(path);
  if (!ring) return fail(ring.error().message());
  auto id = ring->register_consumer();
  if (!id) return fail(id.error().message());
  ready();
  alignas(8) std::array<std::byte, kMaxPayload> buf{};
  const auto delay_before = test::run_queue_delay();
  const RecvResult r = ring->recv_wait(*id, buf, std::chrono::seconds(seconds));
  const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(test::run_queue_delay() - delay_before);
  if (r.status != Errc::ok) return fail(std::string("recv_wait: ") + std::string(to_string(r.status)));
  const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
  if (!seq || *seq != 0) return fail("wrong message");
  std::printf("rescued %d\nrun-queue-ms %lld\nend\n", ring->late_wakeups() == 0 ? 0 : 1,
              static_cast<long long>(delay.count()));
  std::fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: ring_test_helper MODE PATH [ARG]");
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const std::uint64_t arg = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  const std::uint64_t arg2 = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0;
  if (mode == "produce") return produce(path, arg);
  if (mode == "consume") return consume(path, arg);
  if (mode == "consume-waitset") return consume_waitset(path, arg);
  if (mode == "consume-lossy") return consume_lossy(path, static_cast<int>(arg));
  if (mode == "hold") return hold(path);
  if (mode == "wait-one") return wait_one(path, static_cast<int>(arg));
  if (mode == "die-mid-write") return die_mid_write(path);
  if (mode == "die-mid-batch") return die_mid_batch(path);
  if (mode == "produce-sized") return produce_sized(path, arg, arg2);
  if (mode == "consume-sized") return consume_sized(path, arg);
  if (mode == "consume-sized-lossy") return consume_sized_lossy(path, static_cast<int>(arg));
  if (mode == "die-mid-claim") return die_mid_claim(path);
  return fail("unknown mode " + mode);
}
