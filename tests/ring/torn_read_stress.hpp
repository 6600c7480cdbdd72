// A bounded torn-read stress: one producer thread at full speed on a tiny
// ring, reader threads verifying that every payload word agrees with the
// message's sequence. Shared by concurrency_test (expects zero tears) and
// seqlock_detector_test (SeqLock check compiled out: expects tears).
#pragma once

#include <atomic>
#include <chrono>
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
};

struct StressConfig {
  std::uint64_t capacity = 2;
  bool lossy = true;
  int readers = 2;
  std::uint64_t max_messages = 2'000'000;
  std::chrono::milliseconds max_time{2000};
  bool stop_at_first_tear = false;
};

inline StressResult run_torn_read_stress(const StressConfig& cfg) {
  auto ring = BroadcastRing::create_anonymous(cfg.capacity, {.lossy = cfg.lossy});
  StressResult result;
  if (!ring) return result;
  std::vector<ConsumerId> ids;
  for (int i = 0; i < cfg.readers; ++i) ids.push_back(*ring->register_consumer());
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> received{0}, torn{0}, out_of_order{0}, lapped{0};
  std::vector<std::thread> readers;
  for (ConsumerId id : ids) {
    readers.emplace_back([&, id] {
      alignas(8) std::array<std::byte, kMaxPayload> buf{};
      std::uint64_t next = 0;
      for (;;) {
        const RecvResult r = ring->try_recv(id, buf);
        if (r.status == Errc::ok) {
          const auto seq = check_message(std::span<const std::byte>(buf.data(), r.length));
          if (!seq) {
            torn.fetch_add(1, std::memory_order_relaxed);
            if (cfg.stop_at_first_tear) done.store(true, std::memory_order_relaxed);
          } else {
            // Exact: the next message, or a lap reported how many were skipped.
            if (*seq != next) out_of_order.fetch_add(1, std::memory_order_relaxed);
            next = *seq + 1;
          }
          received.fetch_add(1, std::memory_order_relaxed);
        } else if (r.status == Errc::lapped) {
          next += r.missed;
          lapped.fetch_add(1, std::memory_order_relaxed);
        } else if (done.load(std::memory_order_acquire) && ring->lag(id) == 0) {
          return;
        }
      }
    });
  }
  alignas(8) std::array<std::byte, kMaxPayload> msg{};
  const auto until = std::chrono::steady_clock::now() + cfg.max_time;
  std::uint64_t seq = 0;
  while (seq < cfg.max_messages && !done.load(std::memory_order_relaxed)) {
    if ((seq & 1023) == 0 && std::chrono::steady_clock::now() > until) break;
    make_message(seq, msg);
    if (ring->try_push(msg) == Errc::ok) ++seq;
  }
  done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  result.pushed = seq;
  result.received = received.load();
  result.torn = torn.load();
  result.out_of_order = out_of_order.load();
  result.lapped = lapped.load();
  return result;
}

}  // namespace ringcast::test
