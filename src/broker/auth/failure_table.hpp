// Failed authentications per source address (docs/security.md, "Before
// authentication"): how many a source has had lately, which sets how long the
// broker waits before it answers the source's next refusal. A guesser on one
// connection is closed after a few failures (Client::authenticate); this table
// makes every further connection from the same address slower, up to kMaxDelay
// per guess.
//
// Thread safety: record() and sources() may be called from any thread; one
// mutex guards the table. Only refusals take it, never an accepted
// authentication.
//
// Invariants:
//  1. At most kMaxSources addresses are held. A source is forgotten kForgetAfter
//     after its last failure; a full table makes room by forgetting the source
//     whose last failure is oldest (O(kMaxSources), on a refusal only).
//  2. The delay of a source's n-th failure in a row is kBaseDelay * 2^(n-1),
//     at most kMaxDelay: it grows with every failure and never lets a source
//     wait longer than kMaxDelay for one answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ringcast::broker {

class FailureTable {
 public:
  static constexpr std::size_t kMaxSources = 4096;
  static constexpr std::chrono::minutes kForgetAfter{1};
  static constexpr std::chrono::milliseconds kBaseDelay{100};
  static constexpr std::chrono::milliseconds kMaxDelay{5000};

  struct Verdict {
    std::uint32_t failures = 0;         // the source's failures, this one included
    std::chrono::milliseconds delay{};  // before this refusal is answered (invariant 2)
  };

  // Records one failure of `source` (an address, without the port) at `now`.
  Verdict record(std::string_view source, std::chrono::steady_clock::time_point now);
  // Sources held now (for INFO).
  [[nodiscard]] std::size_t sources() const;

 private:
  struct Entry {
    std::uint32_t failures = 0;
    std::chrono::steady_clock::time_point last{};
  };
  // Invariant 1: forgets what expired and, if the table is still full, the
  // oldest source. REQUIRES: mu_ held.
  void make_room(std::chrono::steady_clock::time_point now);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> table_;  // guarded by mu_
};

}  // namespace ringcast::broker
