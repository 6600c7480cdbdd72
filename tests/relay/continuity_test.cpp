// ContinuityChecker: per-stream sequence tracking over the relay's NATS
// headers (include/ringcast/relay/continuity.hpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "ringcast/relay/continuity.hpp"

namespace ringcast::relay {
namespace {

constexpr const char* kA = "hostA:/dev/shm/ticks.ring@803.10";
constexpr const char* kARecreated = "hostA:/dev/shm/ticks.ring@803.11";
constexpr const char* kB = "hostB:/dev/shm/ticks.ring@803.10";

// Feeds the messages that set up a test's scenario (the stream's baseline);
// their verdicts are checked by the tests about them, not here.
void feed(ContinuityChecker& c, const char* source, std::initializer_list<std::uint64_t> seqs) {
  for (const std::uint64_t seq : seqs) (void)c.check(source, seq);
}

TEST(ContinuityTest, SourceSplitsAtTheLastAt) {
  const SourceName n = split_source("h:/dev/shm/a@b.ring@803.1f");
  EXPECT_EQ(n.stream, "h:/dev/shm/a@b.ring");
  EXPECT_EQ(n.instance, "803.1f");
  EXPECT_EQ(split_source("plain").instance, "");
  EXPECT_EQ(format_source("h", "/dev/shm/x.ring", 0x803, 0x1f), "h:/dev/shm/x.ring@803.1f");
}

TEST(ContinuityTest, ConsecutiveSequencesAreInOrder) {
  ContinuityChecker c;
  EXPECT_EQ(c.check(kA, 7).kind, Continuity::kFirst);  // a late joiner: no gap before its first
  for (std::uint64_t s = 8; s < 100; ++s) EXPECT_EQ(c.check(kA, s).kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().gaps, 0u);
  EXPECT_EQ(c.stats().checked, 93u);
  EXPECT_EQ(c.stats().sources, 1u);
}

TEST(ContinuityTest, SkippedSequenceIsOneGapOfTheMissingCount) {
  ContinuityChecker c;
  feed(c, kA, {0, 1});
  const ContinuityResult r = c.check(kA, 5);
  EXPECT_EQ(r.kind, Continuity::kGap);
  EXPECT_EQ(r.lost, 3u);
  EXPECT_TRUE(r.deliver());
  EXPECT_EQ(c.check(kA, 6).kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().gaps, 1u);
  EXPECT_EQ(c.stats().lost, 3u);
}

TEST(ContinuityTest, OldOrRepeatedSequenceIsADuplicateAndKeepsTheBaseline) {
  ContinuityChecker c;
  feed(c, kA, {10, 11});
  const ContinuityResult r = c.check(kA, 11);
  EXPECT_EQ(r.kind, Continuity::kDuplicate);
  EXPECT_FALSE(r.deliver());
  EXPECT_EQ(c.check(kA, 3).kind, Continuity::kDuplicate);
  EXPECT_EQ(c.check(kA, 12).kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().duplicates, 2u);
  EXPECT_EQ(c.stats().gaps, 0u);
}

TEST(ContinuityTest, NewInstanceOfAStreamIsARestartNotAGap) {
  ContinuityChecker c;
  feed(c, kA, {1000});
  const ContinuityResult r = c.check(kARecreated, 0);  // the ring was recreated: sequences start over
  EXPECT_EQ(r.kind, Continuity::kRestart);
  EXPECT_EQ(r.lost, 0u);
  EXPECT_EQ(c.check(kARecreated, 1).kind, Continuity::kInOrder);
  EXPECT_EQ(c.check(kARecreated, 3).kind, Continuity::kGap);
  EXPECT_EQ(c.stats().restarts, 1u);
  EXPECT_EQ(c.stats().sources, 1u);
}

TEST(ContinuityTest, StreamsAreTrackedSeparately) {
  ContinuityChecker c;
  feed(c, kA, {0});
  feed(c, kB, {50});
  EXPECT_EQ(c.check(kA, 1).kind, Continuity::kInOrder);
  EXPECT_EQ(c.check(kB, 51).kind, Continuity::kInOrder);
  EXPECT_EQ(c.check(kB, 53).lost, 1u);
  EXPECT_EQ(c.stats().sources, 2u);
  EXPECT_EQ(c.stats().lost, 1u);
}

TEST(ContinuityTest, MissingOrBadHeadersAreUnsequencedAndDelivered) {
  ContinuityChecker c;
  EXPECT_EQ(c.check_headers(nullptr, "1").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, nullptr).kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "12x").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "-1").kind, Continuity::kUnsequenced);
  EXPECT_TRUE(c.check_headers(kA, "-1").deliver());
  EXPECT_EQ(c.check_headers(kA, "41").kind, Continuity::kFirst);
  EXPECT_EQ(c.check_headers(kA, "42").kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().unsequenced, 6u);
}

TEST(ContinuityTest, BatchesAdvanceByTheirCountAndOverlapsSkipWhatWasSeen) {
  ContinuityChecker c;
  EXPECT_EQ(c.check(kA, 0, 10).kind, Continuity::kFirst);    // 0..9
  EXPECT_EQ(c.check(kA, 10, 5).kind, Continuity::kInOrder);  // 10..14
  const ContinuityResult gap = c.check(kA, 20, 5);           // 15..19 missing
  EXPECT_EQ(gap.kind, Continuity::kGap);
  EXPECT_EQ(gap.lost, 5u);
  const ContinuityResult overlap = c.check(kA, 22, 6);  // 22..24 seen, 25..27 new
  EXPECT_EQ(overlap.kind, Continuity::kInOrder);
  EXPECT_EQ(overlap.skip, 3u);
  const ContinuityResult dup = c.check(kA, 20, 8);
  EXPECT_EQ(dup.kind, Continuity::kDuplicate);
  EXPECT_EQ(dup.skip, 8u);
  EXPECT_EQ(c.check_headers(kA, "28", "2").kind, Continuity::kInOrder);
  EXPECT_EQ(c.check_headers(kA, "30", "0").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "30", "x").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.stats().duplicates, 11u);
  EXPECT_EQ(c.stats().lost, 5u);
}

TEST(ContinuityTest, MessagesOfSeveralSlotsAreInOrderWhenEachStartsWhereTheLastEnded) {
  ContinuityChecker c;
  // Positions 0 (one slot), 1..4 (a 200-byte message), a padding at 5..1024,
  // then a 64 KiB message at 1025..2049: each accounts for the positions
  // from the one after the last message's, paddings included.
  EXPECT_EQ(c.check(kA, 0).kind, Continuity::kFirst);
  EXPECT_EQ(c.check_from(kA, 1, 4, 1).kind, Continuity::kInOrder);
  EXPECT_EQ(c.check_from(kA, 5, 2049, 1).kind, Continuity::kInOrder);
  EXPECT_EQ(c.check(kA, 2050).kind, Continuity::kInOrder);
  // The same message again (a relay restarted with --from oldest): a duplicate.
  EXPECT_EQ(c.check_from(kA, 5, 2049, 1).kind, Continuity::kDuplicate);
  // Positions 2051..2099 never arrived: counted in positions, not messages.
  const ContinuityResult gap = c.check_from(kA, 2100, 2103, 1);
  EXPECT_EQ(gap.kind, Continuity::kGap);
  EXPECT_EQ(gap.lost, 49u);
  EXPECT_EQ(c.stats().lost, 49u);
  EXPECT_EQ(c.stats().gaps, 1u);
  EXPECT_EQ(c.stats().duplicates, 1u);
}

TEST(ContinuityTest, FromHeaderIsReadAndAFromPastTheSequenceIsUnsequenced) {
  ContinuityChecker c;
  EXPECT_EQ(c.check_headers(kA, "9").kind, Continuity::kFirst);
  EXPECT_EQ(c.check_headers(kA, "1034", nullptr, "10").kind, Continuity::kInOrder);
  EXPECT_EQ(c.check_headers(kA, "1035", nullptr, "1035").kind, Continuity::kInOrder);  // from = seq: one slot
  EXPECT_EQ(c.check_headers(kA, "1040", nullptr, "1041").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "1040", nullptr, "x").kind, Continuity::kUnsequenced);
  EXPECT_EQ(c.check_headers(kA, "1040", nullptr, "1036").kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().unsequenced, 2u);
}

TEST(ContinuityTest, StreamsBeyondTheLimitAreUntracked) {
  ContinuityChecker c(1);
  feed(c, kA, {0});
  EXPECT_EQ(c.check(kB, 0).kind, Continuity::kUntracked);
  EXPECT_EQ(c.check(kB, 9).kind, Continuity::kUntracked);
  EXPECT_EQ(c.check(kA, 1).kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().untracked, 2u);
}

// Ringcast-Msg (issue 29): messages of two slots each; a gap counts the
// messages missing, not the slots.
TEST(ContinuityTest, NumberedMessagesCountMessagesNotPositions) {
  ContinuityChecker c;
  EXPECT_EQ(c.check_headers(kA, "1", nullptr, "0", "a1.0").kind, Continuity::kFirst);
  EXPECT_EQ(c.check_headers(kA, "3", nullptr, "2", "a1.1").kind, Continuity::kInOrder);
  // Messages 2 and 3 (positions 4..7) never arrived.
  const ContinuityResult r = c.check_headers(kA, "9", nullptr, "8", "a1.4");
  EXPECT_EQ(r.kind, Continuity::kGap);
  EXPECT_EQ(r.lost, 2u);
  // A batch of 3 numbered 5..7 follows in order; then 8 is missing.
  EXPECT_EQ(c.check_headers(kA, "10", "3", nullptr, "a1.5").kind, Continuity::kInOrder);
  EXPECT_EQ(c.check_headers(kA, "14", nullptr, "14", "a1.9").lost, 1u);
  // Another relay run: its numbers start over, so the slots are counted.
  EXPECT_EQ(c.check_headers(kA, "20", nullptr, "20", "b2.0").lost, 5u);
  EXPECT_EQ(c.check_headers(kA, "21", nullptr, "21", "b2.1").kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().lost, 8u);
  EXPECT_EQ(c.stats().gaps, 3u);
  std::uint32_t run = 0;
  std::uint64_t m = 0;
  EXPECT_TRUE(parse_msg_number("ff.12", run, m));
  EXPECT_EQ(run, 0xffu);
  EXPECT_EQ(m, 12u);
  EXPECT_FALSE(parse_msg_number("12", run, m));
  EXPECT_FALSE(parse_msg_number(".1", run, m));
  EXPECT_FALSE(parse_msg_number("1.", run, m));
  EXPECT_FALSE(parse_msg_number("x.1", run, m));
}

// A probe accounts for everything its relay published before it.
TEST(ContinuityTest, ProbeCountsWhatItsRelayPublishedAndNeverArrived) {
  ContinuityChecker c;
  EXPECT_EQ(c.check_probe(kA, "5", "a1.3").kind, Continuity::kFirst);  // unknown stream: nothing to compare
  EXPECT_EQ(c.check_headers(kA, "1", nullptr, "0", "a1.0").kind, Continuity::kFirst);
  EXPECT_EQ(c.check_probe(kA, "1", "a1.1").kind, Continuity::kDuplicate);  // all arrived
  // Messages 1..3 (positions 2..7) were published and lost.
  const ContinuityResult r = c.check_probe(kA, "7", "a1.4");
  EXPECT_EQ(r.kind, Continuity::kGap);
  EXPECT_EQ(r.lost, 3u);
  // The next message follows the probe in order.
  EXPECT_EQ(c.check_headers(kA, "9", nullptr, "8", "a1.4").kind, Continuity::kInOrder);
  EXPECT_EQ(c.stats().lost, 3u);
  EXPECT_EQ(c.stats().duplicates, 0u);  // a probe is not a message
}

}  // namespace
}  // namespace ringcast::relay
