#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "broker/auth/failure_table.hpp"

namespace ringcast::broker {
namespace {

using namespace std::chrono_literals;
using Time = std::chrono::steady_clock::time_point;

TEST(FailureTableTest, DelayDoublesWithEachFailureUpToTheMaximum) {
  FailureTable t;
  const Time now{};
  std::chrono::milliseconds want = FailureTable::kBaseDelay;
  for (std::uint32_t n = 1; n <= 40; ++n) {
    const FailureTable::Verdict v = t.record("10.0.0.1", now);
    EXPECT_EQ(v.failures, n);
    EXPECT_EQ(v.delay, want);
    want = std::min(want * 2, std::chrono::milliseconds(FailureTable::kMaxDelay));
  }
  EXPECT_EQ(t.record("10.0.0.2", now).delay, FailureTable::kBaseDelay) << "sources are counted apart";
}

TEST(FailureTableTest, SourceIsForgottenAfterAQuietMinute) {
  FailureTable t;
  const Time start{};
  (void)t.record("10.0.0.1", start);
  EXPECT_EQ(t.record("10.0.0.1", start + FailureTable::kForgetAfter).failures, 2u);
  EXPECT_EQ(t.record("10.0.0.1", start + 2 * FailureTable::kForgetAfter + 1ms).failures, 1u);
}

TEST(FailureTableTest, HoldsAtMostMaxSourcesAndForgetsTheOldestFirst) {
  FailureTable t;
  const Time start{};
  for (std::size_t i = 0; i < FailureTable::kMaxSources; ++i) {
    (void)t.record("s" + std::to_string(i), start + std::chrono::milliseconds(i));
  }
  EXPECT_EQ(t.sources(), FailureTable::kMaxSources);
  const Time later = start + std::chrono::milliseconds(FailureTable::kMaxSources);
  (void)t.record("s1", later);        // known: no room needed, and no longer the oldest but one
  (void)t.record("newcomer", later);  // full: "s0", the oldest, makes room
  EXPECT_EQ(t.sources(), FailureTable::kMaxSources);
  EXPECT_EQ(t.record("s1", later).failures, 3u);
  EXPECT_EQ(t.record("s0", later).failures, 1u) << "s0 was forgotten";
}

}  // namespace
}  // namespace ringcast::broker
