// A bounded torn-read stress: one producer thread at full speed on a tiny
// ring, reader threads verifying that every payload word agrees with the
// message's sequence. Shared by concurrency_test (expects zero tears) and
// seqlock_detector_test (SeqLock check compiled out: expects tears).
// run_oldest_joiner_stress is its late-joiner variant: readers repeatedly
// register at StartAt::kOldest, i.e. on the very slots the producer overwrites
// next, read a few messages and unregister.
// With `sized`, messages have random sizes up to the ring's max_message
// (records spanning slots, message_pattern.hpp), and the readers take turns
// at the three ways to read: try_recv (a copy), drain (in place on a blocking
// ring) and try_view/release_view.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "message_pattern.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace ringcast::test {

struct StressResult {
  std::uint64_t pushed = 0;
  std::uint64_t received = 0;
  std::uint64_t torn = 0;
  std::uint64_t out_of_order = 0;
  std::uint64_t lapped = 0;
  std::uint64_t joins = 0;         // oldest-joiner stress: registrations
  std::uint64_t bad_start = 0;     // oldest-joiner stress: a start outside [Pb - capacity, Pa - capacity]
  std::uint64_t in_place = 0;      // sized: messages read in place (views and drain)
  std::uint64_t torn_records = 0;  // sized: torn messages that were read as records (> 52 bytes)
  Errc unexpected = Errc::ok;      // oldest-joiner stress: the last status no reader expected
};

struct StressConfig {
  std::uint64_t capacity = 2;
  bool lossy = true;
  int readers = 2;
  std::uint64_t max_messages = 2'000'000;
  std::chrono::milliseconds max_time{2000};
  bool stop_at_first_tear = false;
  int messages_per_join = 8;  // oldest-joiner stress: messages read before unregistering
  bool sized = false;         // variable sizes up to max_message; else 52-byte messages
  // The ring's max_message: one slot per message unless `sized`.
  std::size_t max_message = kMaxPayload;
};

// What the readers of both stresses count (relaxed: totals, read after join).
struct StressCounters {
  std::atomic<std::uint64_t> received{0}, torn{0}, out_of_order{0}, lapped{0}, joins{0}, bad_start{0}, in_place{0},
      torn_records{0};
  std::atomic<Errc> unexpected{Errc::ok};

  // A received message: its words intact (else torn; with stop_at_first_tear
  // the run ends) and exactly the one after `next` (else out of order). Once a
  // lap has skipped an unknown number of messages (`exact` false: on a ring of
  // records a lap counts slots), only a later message is accepted.
  void check(std::span<const std::byte> msg, std::uint64_t& next, bool& exact, const StressConfig& cfg,
             std::atomic<bool>& done) {
    const auto seq = cfg.sized ? check_sized_message(msg, cfg.max_message) : check_message(msg);
    if (!seq) {
      torn.fetch_add(1, std::memory_order_relaxed);
      const bool record = msg.size() > kMaxPayload;
      if (record) torn_records.fetch_add(1, std::memory_order_relaxed);
      // sized: the record detector wants a torn record, not an inline tear.
      if (cfg.stop_at_first_tear && (record || !cfg.sized)) done.store(true, std::memory_order_relaxed);
    } else {
      if (exact ? *seq != next : *seq < next) out_of_order.fetch_add(1, std::memory_order_relaxed);
      next = *seq + 1;
      exact = true;
    }
    received.fetch_add(1, std::memory_order_relaxed);
  }
  // A lap: `missed` positions were skipped.
  void lap(std::uint64_t missed, std::uint64_t& next, bool& exact, const StressConfig& cfg) {
    if (cfg.sized) {
      exact = false;
    } else {
      next += missed;
    }
    lapped.fetch_add(1, std::memory_order_relaxed);
  }

  [[nodiscard]] StressResult result(std::uint64_t pushed) const {
    return {pushed,       received.load(),  torn.load(),     out_of_order.load(), lapped.load(),
            joins.load(), bad_start.load(), in_place.load(), torn_records.load(), unexpected.load()};
  }
};

// One receive of reader `mode` (0 try_recv, 1 drain of one message, 2 a view
// released after checking): on a message calls on_message(span) and returns
// ok; otherwise the status (and `missed` for a lap).
template <class OnMessage>
RecvResult receive_one(BroadcastRing& ring, ConsumerId id, int mode, std::span<std::byte> buf, StressCounters& counts,
                       OnMessage&& on_message) {
  switch (mode % 3) {
    case 1: {
      const BatchResult b = ring.drain(id, on_message, 1);
      return b.count == 1 ? RecvResult{Errc::ok} : RecvResult{b.status, 0, b.missed};
    }
    case 2: {
      const MessageView v = ring.try_view(id);
      if (!v) return {v.status, 0, v.missed};
      if (v.in_place) counts.in_place.fetch_add(1, std::memory_order_relaxed);
      on_message(v.data);
      return {ring.release_view(id)};
    }
    default: {
      const RecvResult r = ring.try_recv(id, buf);
      if (r) on_message(buf.first(r.length));
      return r;
    }
  }
}

// Pushes numbered messages until max_messages, max_time or `done`, then sets
// `done` (release: pairs with the readers' acquire loads) and joins the
// readers. Returns how many were pushed. The clock is read every 1024
// attempts, not pushes: a blocking ring held full must not stop it.
inline std::uint64_t produce(BroadcastRing& ring, const StressConfig& cfg, std::atomic<bool>& done,
                             std::vector<std::thread>& readers) {
  std::vector<std::byte> msg(cfg.sized ? cfg.max_message : kMaxPayload);
  const auto until = std::chrono::steady_clock::now() + cfg.max_time;
  std::uint64_t seq = 0;
  for (std::uint64_t attempt = 0; seq < cfg.max_messages && !done.load(std::memory_order_relaxed); ++attempt) {
    if ((attempt & 1023) == 0 && std::chrono::steady_clock::now() > until) break;
    const std::span<std::byte> payload(msg.data(), cfg.sized ? sized_length(seq, cfg.max_message) : kMaxPayload);
    if (cfg.sized) {
      make_sized_message(seq, payload);
    } else {
      make_message(seq, std::span<std::byte, kMaxPayload>(msg.data(), kMaxPayload));
    }
    if (ring.try_push(payload) == Errc::ok) ++seq;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  return seq;
}

inline Result<BroadcastRing> stress_ring(const StressConfig& cfg) {
  return BroadcastRing::create_anonymous(cfg.capacity, {.lossy = cfg.lossy, .max_message = cfg.max_message});
}

inline StressResult run_torn_read_stress(const StressConfig& cfg) {
  auto ring = stress_ring(cfg);
  if (!ring) return {};
  std::vector<ConsumerId> ids;
  for (int i = 0; i < cfg.readers; ++i) ids.push_back(*ring->register_consumer());
  std::atomic<bool> done{false};
  StressCounters counts;
  std::vector<std::thread> readers;
  for (int i = 0; i < cfg.readers; ++i) {
    readers.emplace_back([&, id = ids[static_cast<std::size_t>(i)], mode = cfg.sized ? i : 0] {
      std::vector<std::byte> buf(std::max(cfg.max_message, kMaxPayload));
      std::uint64_t next = 0;
      bool exact = true;
      for (;;) {
        const RecvResult r = receive_one(*ring, id, mode, buf, counts, [&](std::span<const std::byte> m) {
          counts.check(m, next, exact, cfg, done);
        });
        if (r.status == Errc::lapped) {
          counts.lap(r.missed, next, exact, cfg);
        } else if (r.status != Errc::ok && done.load(std::memory_order_acquire) && ring->lag(id) == 0) {
          return;
        }
      }
    });
  }
  return counts.result(produce(*ring, cfg, done, readers));
}

// Readers loop: note the published position Pb, register at oldest, note Pa,
// then read `messages_per_join` messages checking each one's words (torn) and
// exact accounting from the registered cursor (each message is the one after
// the previous, or a lap said how many were skipped), then unregister. On a
// ring of records the start is the first block boundary at or after
// Pb - capacity (at most a block later), and the first message's sequence is
// not known from it.
inline StressResult run_oldest_joiner_stress(const StressConfig& cfg) {
  auto ring = stress_ring(cfg);
  if (!ring) return {};
  std::atomic<bool> done{false};
  StressCounters counts;
  const auto oldest_at = [&](std::uint64_t published) {
    return published >= cfg.capacity ? published - cfg.capacity : 0;
  };
  const std::uint64_t block = layout::block_slots(ring->max_message());
  std::vector<std::thread> readers;
  for (int i = 0; i < cfg.readers; ++i) {
    readers.emplace_back([&, mode = cfg.sized ? i : 0] {
      std::vector<std::byte> buf(std::max(cfg.max_message, kMaxPayload));
      while (!done.load(std::memory_order_acquire)) {
        const std::uint64_t before = ring->producer_position();
        auto id = ring->register_consumer(StartAt::kOldest);
        if (!id) continue;  // all entries taken for a moment: not this test's concern
        const std::uint64_t after = ring->producer_position();
        counts.joins.fetch_add(1, std::memory_order_relaxed);
        // Only this thread writes the cursor, so status() reads it exactly.
        const std::uint64_t start = ring->status().consumers[*id].cursor;
        if (start < oldest_at(before) || start > oldest_at(after) + block - 1) {
          counts.bad_start.fetch_add(1, std::memory_order_relaxed);
        }
        // One slot per message: the start is the first message's sequence.
        std::uint64_t next = cfg.sized ? 0 : start;
        bool exact = !cfg.sized;
        for (int got = 0; got < cfg.messages_per_join;) {
          const RecvResult r = receive_one(*ring, *id, mode, buf, counts, [&](std::span<const std::byte> m) {
            counts.check(m, next, exact, cfg, done);
            ++got;
          });
          if (r.status == Errc::lapped) {
            counts.lap(r.missed, next, exact, cfg);
          } else if (r.status != Errc::ok && r.status != Errc::empty && r.status != Errc::stalled) {
            counts.out_of_order.fetch_add(1, std::memory_order_relaxed);  // no other status is expected
            counts.unexpected.store(r.status, std::memory_order_relaxed);
            break;
          } else if (r.status != Errc::ok && done.load(std::memory_order_acquire)) {
            break;
          }
        }
        (void)ring->unregister_consumer(*id);
      }
    });
  }
  // Start overwriting once every reader has joined at least once, so a fast
  // producer cannot finish before the readers run.
  while (counts.joins.load(std::memory_order_relaxed) < static_cast<std::uint64_t>(cfg.readers)) {
    std::this_thread::yield();
  }
  return counts.result(produce(*ring, cfg, done, readers));
}

}  // namespace ringcast::test
