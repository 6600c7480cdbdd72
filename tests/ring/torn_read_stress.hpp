// A bounded torn-read stress: one producer thread at full speed on a tiny
// ring, reader threads verifying that every payload word agrees with the
// message's sequence. Shared by concurrency_test (expects zero tears) and
// seqlock_detector_test (SeqLock check compiled out: expects tears).
// run_oldest_joiner_stress is its late-joiner variant: readers repeatedly
// register at StartAt::kOldest, i.e. on the very slots the producer overwrites
// next, read a few messages and unregister.
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
  std::uint64_t joins = 0;      // oldest-joiner stress: registrations
  std::uint64_t bad_start = 0;  // oldest-joiner stress: a start outside [Pb - capacity, Pa - capacity]
};

struct StressConfig {
  std::uint64_t capacity = 2;
  bool lossy = true;
  int readers = 2;
  std::uint64_t max_messages = 2'000'000;
  std::chrono::milliseconds max_time{2000};
  bool stop_at_first_tear = false;
  int messages_per_join = 8;  // oldest-joiner stress: messages read before unregistering
};

// What the readers of both stresses count (relaxed: totals, read after join).
struct StressCounters {
  std::atomic<std::uint64_t> received{0}, torn{0}, out_of_order{0}, lapped{0}, joins{0}, bad_start{0};

  // A received message: its words intact (else torn; with stop_at_first_tear
  // the run ends) and exactly the one after `next` (else out of order).
  void check(std::span<const std::byte> msg, std::uint64_t& next, const StressConfig& cfg, std::atomic<bool>& done) {
    const auto seq = check_message(msg);
    if (!seq) {
      torn.fetch_add(1, std::memory_order_relaxed);
      if (cfg.stop_at_first_tear) done.store(true, std::memory_order_relaxed);
    } else {
      // Exact: the next message, or a lap reported how many were skipped.
      if (*seq != next) out_of_order.fetch_add(1, std::memory_order_relaxed);
      next = *seq + 1;
    }
    received.fetch_add(1, std::memory_order_relaxed);
  }

  [[nodiscard]] StressResult result(std::uint64_t pushed) const {
    return {pushed, received.load(), torn.load(), out_of_order.load(), lapped.load(), joins.load(), bad_start.load()};
  }
};

// Pushes numbered messages until max_messages, max_time or `done`, then sets
// `done` (release: pairs with the readers' acquire loads) and joins the
// readers. Returns how many were pushed. The clock is read every 1024
// attempts, not pushes: a blocking ring held full must not stop it.
inline std::uint64_t produce(BroadcastRing& ring, const StressConfig& cfg, std::atomic<bool>& done,
                             std::vector<std::thread>& readers) {
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  const auto until = std::chrono::steady_clock::now() + cfg.max_time;
  std::uint64_t seq = 0;
  for (std::uint64_t attempt = 0; seq < cfg.max_messages && !done.load(std::memory_order_relaxed); ++attempt) {
    if ((attempt & 1023) == 0 && std::chrono::steady_clock::now() > until) break;
    make_message(seq, msg);
    if (ring.try_push(msg) == Errc::ok) ++seq;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  return seq;
}

inline StressResult run_torn_read_stress(const StressConfig& cfg) {
  auto ring = BroadcastRing::create_anonymous(cfg.capacity, {.lossy = cfg.lossy});
  if (!ring) return {};
  std::vector<ConsumerId> ids;
  for (int i = 0; i < cfg.readers; ++i) ids.push_back(*ring->register_consumer());
  std::atomic<bool> done{false};
  StressCounters counts;
  std::vector<std::thread> readers;
  for (ConsumerId id : ids) {
    readers.emplace_back([&, id] {
      alignas(8) std::array<std::byte, kMaxPayload> buf{};
      std::uint64_t next = 0;
      for (;;) {
        const RecvResult r = ring->try_recv(id, buf);
        if (r.status == Errc::ok) {
          counts.check(std::span<const std::byte>(buf.data(), r.length), next, cfg, done);
        } else if (r.status == Errc::lapped) {
          next += r.missed;
          counts.lapped.fetch_add(1, std::memory_order_relaxed);
        } else if (done.load(std::memory_order_acquire) && ring->lag(id) == 0) {
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
// the previous, or a lap said how many were skipped), then unregister.
inline StressResult run_oldest_joiner_stress(const StressConfig& cfg) {
  auto ring = BroadcastRing::create_anonymous(cfg.capacity, {.lossy = cfg.lossy});
  if (!ring) return {};
  std::atomic<bool> done{false};
  StressCounters counts;
  const auto oldest_at = [&](std::uint64_t published) {
    return published >= cfg.capacity ? published - cfg.capacity : 0;
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < cfg.readers; ++i) {
    readers.emplace_back([&] {
      alignas(8) std::array<std::byte, kMaxPayload> buf{};
      while (!done.load(std::memory_order_acquire)) {
        const std::uint64_t before = ring->producer_position();
        auto id = ring->register_consumer(StartAt::kOldest);
        if (!id) continue;  // all entries taken for a moment: not this test's concern
        const std::uint64_t after = ring->producer_position();
        counts.joins.fetch_add(1, std::memory_order_relaxed);
        // Only this thread writes the cursor, so status() reads it exactly.
        std::uint64_t next = ring->status().consumers[*id].cursor;
        if (next < oldest_at(before) || next > oldest_at(after)) {
          counts.bad_start.fetch_add(1, std::memory_order_relaxed);
        }
        for (int got = 0; got < cfg.messages_per_join;) {
          const RecvResult r = ring->try_recv(*id, buf);
          if (r.status == Errc::ok) {
            counts.check(std::span<const std::byte>(buf.data(), r.length), next, cfg, done);
            ++got;
          } else if (r.status == Errc::lapped) {
            next += r.missed;
            counts.lapped.fetch_add(1, std::memory_order_relaxed);
          } else if (r.status != Errc::empty && r.status != Errc::stalled) {
            counts.out_of_order.fetch_add(1, std::memory_order_relaxed);  // no other status is expected
            break;
          } else if (done.load(std::memory_order_acquire)) {
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
