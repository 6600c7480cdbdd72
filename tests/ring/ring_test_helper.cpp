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
//                                                  strategy; exits 0 if it returns message 0 and
//                                                  was woken, not rescued by a capped sleep
//   ring_test_helper die-mid-write PATH            claim the producer role, leave the next slot
//                                                  half-written, and SIGKILL itself
//   ring_test_helper die-mid-batch PATH            claim, push message 0, then die inside a
//                                                  batch: messages 1 and 2 committed but never
//                                                  published, slot 3 half-written
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "message_pattern.hpp"
#include "raw_slots.hpp"
#include "ringcast/broadcast_ring.hpp"

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
    const Errc e = ring->push_wait(msg, 60s, IdleStrategy::kSpinThenYield);
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
  const RecvResult r = ring->recv_wait(*id, buf, std::chrono::seconds(seconds));
  if (r.status != Errc::ok) return fail(std::string("recv_wait: ") + std::string(to_string(r.status)));
  const auto seq = test::check_message(std::span<const std::byte>(buf.data(), r.length));
  if (!seq || *seq != 0) return fail("wrong message");
  return ring->late_wakeups() == 0 ? 0 : fail("the wake-up never came: a capped sleep found the message");
}

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: ring_test_helper MODE PATH [ARG]");
  const std::string mode = argv[1];
  const std::string path = argv[2];
  const std::uint64_t arg = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  if (mode == "produce") return produce(path, arg);
  if (mode == "consume") return consume(path, arg);
  if (mode == "consume-lossy") return consume_lossy(path, static_cast<int>(arg));
  if (mode == "hold") return hold(path);
  if (mode == "wait-one") return wait_one(path, static_cast<int>(arg));
  if (mode == "die-mid-write") return die_mid_write(path);
  if (mode == "die-mid-batch") return die_mid_batch(path);
  return fail("unknown mode " + mode);
}
