// Messages of any size, deterministic and single-threaded: records spanning
// slots, paddings at block boundaries, claims (zero-copy writes) and views
// (zero-copy reads) and their lifetime rules, the head stamp, laps on rings of
// records, and max_message on create and open. The concurrent and
// cross-process cases are in concurrency_test (RecordTornReadTest) and
// cross_process_test.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "raw_slots.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "test_support.hpp"

namespace ringcast {
namespace {

using test::TempDir;

// `n` bytes that differ from position to position and from seed to seed.
std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((seed * 131 + i * 7 + (i >> 8)) & 0xFF);
  return v;
}

bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

class RecordTest : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string path(const char* name = "ring") const { return dir_.path() + "/" + name; }
};

TEST_F(RecordTest, DefaultMaxMessageIs64KiBWhereTheCapacityAllowsAndClampedBelow) {
  auto big = BroadcastRing::create(path("big"), 4096);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->max_message(), kDefaultMaxMessage);
  auto small = BroadcastRing::create(path("small"), 64);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->max_message(), layout::max_message_for(64));
  EXPECT_EQ(layout::max_message_for(64), 48U + 31 * 64);  // a block of half the ring
  auto inline_only = BroadcastRing::create(path("inline"), 64, {.max_message = 1});
  ASSERT_TRUE(inline_only);
  EXPECT_EQ(inline_only->max_message(), kMaxPayload);
}

TEST_F(RecordTest, MaxMessageLargerThanTheCapacityAllowsIsRefusedWithBothValues) {
  auto ring = BroadcastRing::create(path(), 64, {.max_message = 4096});
  ASSERT_FALSE(ring);
  EXPECT_EQ(ring.error().code, Errc::payload_too_large);
  EXPECT_EQ(ring.error().found, 4096U);
  EXPECT_EQ(ring.error().expected, layout::max_message_for(64));
  EXPECT_NE(ring.error().message().find("(4096 bytes, at most " + std::to_string(layout::max_message_for(64)) + ")"),
            std::string::npos)
      << ring.error().message();
}

TEST_F(RecordTest, SixteenMebibyteMessagesFitARingLargeEnough) {
  constexpr std::size_t kSize = 16 << 20;
  const std::uint64_t capacity = 2 * layout::record_slots(kSize);
  auto ring = BroadcastRing::create_anonymous(capacity, {.max_message = kSize});
  ASSERT_TRUE(ring) << ring.error().message();
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto msg = pattern(kSize, 16);
  ASSERT_EQ(ring->try_push(msg), Errc::ok);
  std::vector<std::byte> out(kSize);
  const RecvResult r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_TRUE(same(std::span(out).first(r.length), msg));
}

TEST_F(RecordTest, EverySizeFromZeroToMaxRoundTripsInOrder) {
  auto ring = BroadcastRing::create(path(), 256);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  std::vector<std::byte> out(ring->max_message());
  std::vector<std::size_t> sizes;
  for (std::size_t n = 0; n <= 200; ++n) sizes.push_back(n);
  sizes.push_back(ring->max_message());
  for (std::size_t n : sizes) {
    const auto msg = pattern(n, static_cast<unsigned>(n));
    ASSERT_EQ(ring->try_push(msg), Errc::ok) << n;
    const RecvResult r = ring->try_recv(*id, out);
    ASSERT_EQ(r.status, Errc::ok) << n;
    ASSERT_TRUE(same(std::span(out).first(r.length), msg)) << n;
  }
  EXPECT_TRUE(ring->is_fully_drained());
  const RingStatus s = ring->status();
  EXPECT_EQ(s.messages, sizes.size());
  std::uint64_t bytes = 0;
  for (std::size_t n : sizes) bytes += n;
  EXPECT_EQ(s.payload_bytes, bytes);
  EXPECT_EQ(s.max_message, ring->max_message());
}

TEST_F(RecordTest, ShortBufferIsReportedWithTheNeededSizeAndConsumesNothing) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto big = pattern(300, 1);
  const auto small = pattern(20, 2);
  ASSERT_EQ(ring->try_push(small), Errc::ok);
  ASSERT_EQ(ring->try_push(big), Errc::ok);
  std::vector<std::byte> tiny(10);
  RecvResult r = ring->try_recv(*id, tiny);
  EXPECT_EQ(r.status, Errc::buffer_too_small);
  EXPECT_EQ(r.length, 20U);
  std::vector<std::byte> out(kMaxPayload);
  r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_TRUE(same(std::span(out).first(r.length), small));
  r = ring->try_recv(*id, out);
  EXPECT_EQ(r.status, Errc::buffer_too_small);
  EXPECT_EQ(r.length, 300U);
  out.resize(300);
  r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_TRUE(same(std::span(out).first(r.length), big));
}

TEST_F(RecordTest, RecordThatWouldCrossABlockIsPaddedAndReadersSkipThePadding) {
  constexpr std::uint64_t kCapacity = 16;  // blocks of 8 slots: records of at most 496 bytes
  auto ring = BroadcastRing::create(path(), kCapacity);
  ASSERT_TRUE(ring);
  EXPECT_EQ(ring->max_message(), 48U + 7 * 64);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  // 3 inline messages take slots 0..2; a 6-slot record would cross the block
  // end at slot 8, so a padding fills slots 3..7 and the record takes 8..13.
  for (unsigned i = 0; i < 3; ++i) ASSERT_EQ(ring->try_push(pattern(10, i)), Errc::ok);
  const auto record = pattern(360, 9);
  ASSERT_EQ(layout::record_slots(record.size()), 6U);
  ASSERT_EQ(ring->try_push(record), Errc::ok);
  EXPECT_EQ(ring->producer_position(), 8U + 6);
  std::vector<std::byte> out(ring->max_message());
  std::vector<std::vector<std::byte>> got;
  ASSERT_EQ(ring->drain(
                    *id, [&](std::span<const std::byte> m) { got.emplace_back(m.begin(), m.end()); }, 16)
                .count,
            4U);
  ASSERT_EQ(got.size(), 4U);
  EXPECT_TRUE(same(got[3], record));
  EXPECT_EQ(ring->lag(*id), 0U);
}

TEST_F(RecordTest, BlockingProducerIsFullUntilTheRecordsSlotsAreFree) {
  auto ring = BroadcastRing::create(path(), 16);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto record = pattern(400, 3);  // 7 slots
  ASSERT_EQ(ring->try_push(record), Errc::ok);
  ASSERT_EQ(ring->try_push(record), Errc::ok);  // slots 8..14 (padding at 7)
  EXPECT_EQ(ring->try_push(record), Errc::full);
  EXPECT_EQ(ring->try_claim(record.size()).status(), Errc::full);
  std::vector<std::byte> out(ring->max_message());
  ASSERT_EQ(ring->try_recv(*id, out).status, Errc::ok);
  EXPECT_EQ(ring->try_push(record), Errc::ok);
}

TEST_F(RecordTest, ClaimWaitTimesOutOnAFullRingAndSucceedsOnceThereIsRoom) {
  auto ring = BroadcastRing::create(path(), 16);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto record = pattern(400, 3);  // 7 slots: two fill the ring
  ASSERT_EQ(ring->try_push(record), Errc::ok);
  ASSERT_EQ(ring->try_push(record), Errc::ok);
  ProducerClaim late = ring->claim_wait(400, std::chrono::milliseconds(20));
  EXPECT_FALSE(late);
  EXPECT_EQ(late.status(), Errc::timed_out);
  std::thread reader([&] {
    std::vector<std::byte> out(ring->max_message());
    while (ring->try_recv(*id, out).status != Errc::ok) std::this_thread::yield();
  });
  ProducerClaim claim = ring->claim_wait(400, std::chrono::seconds(20));
  reader.join();
  ASSERT_TRUE(claim);
  std::memcpy(claim.data().data(), record.data(), record.size());
  claim.commit();
  EXPECT_EQ(ring->status().messages, 3U);
}

TEST_F(RecordTest, BatchesMixSizesAndPublishOnce) {
  auto ring = BroadcastRing::create(path(), 128);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const std::vector<std::vector<std::byte>> msgs = {pattern(5, 1), pattern(700, 2), pattern(52, 3), pattern(53, 4),
                                                    pattern(0, 5)};
  std::vector<std::span<const std::byte>> spans(msgs.begin(), msgs.end());
  const BatchResult pushed = ring->try_push_batch(spans);
  EXPECT_EQ(pushed.count, msgs.size());
  EXPECT_EQ(pushed.status, Errc::ok);
  std::vector<std::vector<std::byte>> got;
  const BatchResult drained = ring->drain(
      *id, [&](std::span<const std::byte> m) { got.emplace_back(m.begin(), m.end()); }, 100);
  EXPECT_EQ(drained.count, msgs.size());
  EXPECT_EQ(got, msgs);
}

TEST_F(RecordTest, ClaimWritesInPlaceAndNothingIsVisibleBeforeCommit) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto msg = pattern(1000, 7);
  ProducerClaim claim = ring->try_claim(msg.size());
  ASSERT_TRUE(claim);
  EXPECT_EQ(claim.status(), Errc::ok);
  ASSERT_EQ(claim.data().size(), msg.size());
  std::memcpy(claim.data().data(), msg.data(), msg.size());
  std::vector<std::byte> out(ring->max_message());
  EXPECT_EQ(ring->try_recv(*id, out).status, Errc::empty);
  claim.commit();
  EXPECT_FALSE(claim);
  const MessageView v = ring->try_view(*id);
  ASSERT_EQ(v.status, Errc::ok);
  EXPECT_TRUE(v.in_place);
  EXPECT_TRUE(same(v.data, msg));
  EXPECT_EQ(ring->release_view(*id), Errc::ok);
}

TEST_F(RecordTest, AbortedOrDroppedClaimPublishesNothingAndTheRoomIsReused) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  {
    ProducerClaim claim = ring->try_claim(900);
    ASSERT_TRUE(claim);
    std::memset(claim.data().data(), 0xAB, claim.data().size());
    claim.abort();
  }
  { ProducerClaim dropped = ring->try_claim(30); }  // destroyed open: aborted
  std::vector<std::byte> out(ring->max_message());
  EXPECT_EQ(ring->try_recv(*id, out).status, Errc::empty);
  const auto msg = pattern(200, 8);
  ASSERT_EQ(ring->try_push(msg), Errc::ok);
  const RecvResult r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_TRUE(same(std::span(out).first(r.length), msg));
  EXPECT_EQ(ring->status().messages, 1U);
}

TEST_F(RecordTest, ClaimCommittedShorterThanClaimedPublishesOnlyThatMuch) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  for (std::size_t committed : {1000U, 40U, 0U}) {
    ProducerClaim claim = ring->try_claim(1500);
    ASSERT_TRUE(claim);
    const auto msg = pattern(1500, static_cast<unsigned>(committed));
    std::memcpy(claim.data().data(), msg.data(), msg.size());
    claim.commit(committed);
    std::vector<std::byte> out(ring->max_message());
    const RecvResult r = ring->try_recv(*id, out);
    ASSERT_EQ(r.status, Errc::ok);
    EXPECT_TRUE(same(std::span(out).first(r.length), std::span(msg).first(committed)));
  }
  // A short claim is an inline message.
  ProducerClaim small = ring->try_claim(12);
  ASSERT_TRUE(small);
  std::memcpy(small.data().data(), "hello, claim", 12);
  small.commit();
  std::vector<std::byte> out(kMaxPayload);
  const RecvResult r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::ok);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), r.length), "hello, claim");
}

TEST_F(RecordTest, ClaimOnALossyRingIsStagedAndCopiedAtCommit) {
  auto ring = BroadcastRing::create(path(), 64, {.lossy = true});
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto msg = pattern(777, 4);
  ProducerClaim claim = ring->try_claim(msg.size());
  ASSERT_TRUE(claim);
  std::memcpy(claim.data().data(), msg.data(), msg.size());
  claim.commit();
  const MessageView v = ring->try_view(*id);
  ASSERT_EQ(v.status, Errc::ok);
  EXPECT_FALSE(v.in_place);  // a lapped reader could race with a view in place
  EXPECT_TRUE(same(v.data, msg));
  EXPECT_EQ(ring->release_view(*id), Errc::ok);
}

TEST_F(RecordTest, ViewHoldsTheProducerOffItsSlotsUntilReleased) {
  auto ring = BroadcastRing::create(path(), 16);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  const auto first = pattern(400, 1);  // 7 slots
  ASSERT_EQ(ring->try_push(first), Errc::ok);
  const MessageView v = ring->try_view(*id);
  ASSERT_EQ(v.status, Errc::ok);
  ASSERT_TRUE(v.in_place);
  // Fill the rest of the ring; the next record would need the viewed slots.
  ASSERT_EQ(ring->try_push(pattern(400, 2)), Errc::ok);
  EXPECT_EQ(ring->try_push(pattern(400, 3)), Errc::full);
  EXPECT_TRUE(same(v.data, first));  // untouched while the view is open
  // A second try_view returns the same message; release consumes it.
  const MessageView again = ring->try_view(*id);
  ASSERT_EQ(again.status, Errc::ok);
  EXPECT_EQ(again.data.data(), v.data.data());
  EXPECT_EQ(ring->release_view(*id), Errc::ok);
  EXPECT_EQ(ring->release_view(*id), Errc::invalid_consumer);  // nothing open
  EXPECT_EQ(ring->try_push(pattern(400, 3)), Errc::ok);
}

TEST_F(RecordTest, ViewOfAnInlineMessageIsACopy) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(ring->try_push(pattern(30, 1)), Errc::ok);
  const MessageView v = ring->try_view(*id);
  ASSERT_EQ(v.status, Errc::ok);
  EXPECT_FALSE(v.in_place);
  EXPECT_TRUE(same(v.data, pattern(30, 1)));
  EXPECT_EQ(ring->release_view(*id), Errc::ok);
  EXPECT_EQ(ring->try_view(*id).status, Errc::empty);
  EXPECT_EQ(ring->try_view(99).status, Errc::invalid_consumer);
  EXPECT_EQ(ring->release_view(99), Errc::invalid_consumer);
}

// A consumer registered at the oldest message may read history the producer
// is about to overwrite: below its stable_from it gets validated copies, from
// there on the ring itself.
TEST_F(RecordTest, OldestJoinerReadsHistoryAsCopiesAndLiveRecordsInPlace) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  for (unsigned i = 0; i < 3; ++i) ASSERT_EQ(ring->try_push(pattern(300, i)), Errc::ok);
  auto id = ring->register_consumer(StartAt::kOldest);
  ASSERT_TRUE(id);
  ASSERT_EQ(ring->try_push(pattern(300, 3)), Errc::ok);
  for (unsigned i = 0; i < 4; ++i) {
    const MessageView v = ring->try_view(*id);
    ASSERT_EQ(v.status, Errc::ok) << i;
    EXPECT_TRUE(same(v.data, pattern(300, i))) << i;
    EXPECT_EQ(v.in_place, i == 3) << i;
    ASSERT_EQ(ring->release_view(*id), Errc::ok);
  }
}

TEST_F(RecordTest, LappedReaderOnALossyRingResumesAtABlockBoundaryWithWholeMessages) {
  constexpr std::uint64_t kCapacity = 32;  // blocks of 16 slots
  auto ring = BroadcastRing::create(path(), kCapacity, {.lossy = true});
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  std::vector<std::vector<std::byte>> sent;
  for (unsigned i = 0; i < 40; ++i) {
    sent.push_back(pattern(60 + 37 * (i % 9), i));  // 2 to 6 slots
    ASSERT_EQ(ring->try_push(sent.back()), Errc::ok);
  }
  std::vector<std::byte> out(ring->max_message());
  RecvResult r = ring->try_recv(*id, out);
  ASSERT_EQ(r.status, Errc::lapped);
  EXPECT_GT(r.missed, 0U);
  EXPECT_EQ(ring->position(*id) % 16, 0U);
  // Whatever follows is a suffix of what was sent, whole and in order.
  std::vector<std::vector<std::byte>> got;
  while ((r = ring->try_recv(*id, out)).status == Errc::ok) got.emplace_back(out.begin(), out.begin() + r.length);
  EXPECT_EQ(r.status, Errc::empty);
  ASSERT_FALSE(got.empty());
  ASSERT_LE(got.size(), sent.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), sent.end() - static_cast<std::ptrdiff_t>(got.size())));
}

// The head stamp: a record's inner slots hold payload bytes, which a reader
// waiting at that slot's position one lap later would otherwise read as the
// slot's version. A payload forged to hold exactly the version the next lap
// would commit there must not produce a message.
TEST_F(RecordTest, PayloadForgingTheNextLapsVersionIsNeverDelivered) {
  constexpr std::uint64_t kCapacity = 16;
  auto ring = BroadcastRing::create(path(), kCapacity);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  // A record at position 0 spanning slots 0..7: its payload byte at offset
  // 64*k - 16 is the first byte of slot k's version word.
  std::vector<std::byte> forged(ring->max_message());
  for (std::uint64_t k = 1; k < 8; ++k) {
    const std::uint64_t next_lap_version = 2 * (kCapacity + k) + 2;
    std::memcpy(forged.data() + 64 * k - 16, &next_lap_version, 8);
    std::uint64_t meta = 3 | (std::uint64_t{3} << 32);  // an inline message of 3 bytes, if believed
    std::memcpy(forged.data() + 64 * k - 8, &meta, 8);
  }
  ASSERT_EQ(ring->try_push(forged), Errc::ok);
  std::vector<std::byte> out(ring->max_message());
  ASSERT_EQ(ring->try_recv(*id, out).status, Errc::ok);
  // Walk the producer round to position 17 = slot 1 of the next lap.
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(ring->try_push(pattern(8, 1)), Errc::ok);
    ASSERT_EQ(ring->try_recv(*id, out).status, Errc::ok);
  }
  ASSERT_EQ(ring->position(*id), kCapacity + 1);
  EXPECT_EQ(ring->try_recv(*id, out).status, Errc::empty);
  EXPECT_EQ(ring->try_view(*id).status, Errc::empty);
  int calls = 0;
  EXPECT_EQ(ring->drain(
                    *id, [&](std::span<const std::byte>) { ++calls; }, 8)
                .count,
            0U);
  EXPECT_EQ(calls, 0);
  // A new producer resumes at the true head, not at a forged slot.
  ring->release_producer();
  auto successor = BroadcastRing::open(path());
  ASSERT_TRUE(successor);
  ASSERT_TRUE(successor->claim_producer());
  EXPECT_EQ(successor->producer_position(), kCapacity + 1);
}

// A loss marker sits in the stream where the producer learnt of the loss:
// every read path passes it without a message and counts it, so a consumer
// reading upstream_lost_seen before and after a receive learns how many were
// lost just before that message. Markers are not messages.
TEST_F(RecordTest, LossMarkersAreCountedJustBeforeTheNextMessageOnEveryReadPath) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto by_copy = ring->register_consumer();
  auto by_view = ring->register_consumer();
  auto by_drain = ring->register_consumer();
  ASSERT_TRUE(by_copy && by_view && by_drain);
  const auto small = pattern(20, 1);
  const auto large = pattern(300, 2);
  ASSERT_EQ(ring->try_push(small), Errc::ok);
  ASSERT_EQ(ring->mark_upstream_loss(5), Errc::ok);
  ASSERT_EQ(ring->try_push(large), Errc::ok);
  ASSERT_EQ(ring->mark_upstream_loss(7), Errc::ok);
  ASSERT_EQ(ring->mark_upstream_loss(1), Errc::ok);
  ASSERT_EQ(ring->try_push(small), Errc::ok);
  EXPECT_EQ(ring->status().messages, 3U);

  const std::uint64_t want[] = {0, 5, 13};
  std::vector<std::byte> out(ring->max_message());
  for (const std::uint64_t lost : want) {
    ASSERT_EQ(ring->try_recv(*by_copy, out).status, Errc::ok);
    EXPECT_EQ(ring->upstream_lost_seen(*by_copy), lost);
    const MessageView v = ring->try_view(*by_view);
    ASSERT_EQ(v.status, Errc::ok);
    EXPECT_EQ(ring->upstream_lost_seen(*by_view), lost);
    ASSERT_EQ(ring->release_view(*by_view), Errc::ok);
  }
  EXPECT_EQ(ring->try_recv(*by_copy, out).status, Errc::empty);
  std::vector<std::size_t> lengths;
  const BatchResult b = ring->drain(
      *by_drain, [&](std::span<const std::byte> m) { lengths.push_back(m.size()); }, 16);
  EXPECT_EQ(b.count, 3U);
  EXPECT_EQ(lengths, (std::vector<std::size_t>{20, 300, 20}));
  EXPECT_EQ(ring->upstream_lost_seen(*by_drain), 13U);
  // A marker at the head, its message not pushed yet: passed and counted.
  ASSERT_EQ(ring->mark_upstream_loss(2), Errc::ok);
  EXPECT_EQ(ring->try_recv(*by_copy, out).status, Errc::empty);
  EXPECT_EQ(ring->upstream_lost_seen(*by_copy), 15U);
  // A new registrant starts at zero; an id this handle does not own reads 0.
  EXPECT_EQ(ring->upstream_lost_seen(kMaxConsumers - 1), 0U);
}

// drain does not publish its cursor when the callback throws, and the
// markers it passed in that batch are then not counted either: the retry
// counts them once.
TEST_F(RecordTest, DrainThatThrowsCountsItsLossMarkersOnlyOnce) {
  auto ring = BroadcastRing::create(path(), 64);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  ASSERT_EQ(ring->mark_upstream_loss(4), Errc::ok);
  ASSERT_EQ(ring->try_push(pattern(10, 3)), Errc::ok);
  EXPECT_THROW((void)ring->drain(
                   *id, [](std::span<const std::byte>) { throw std::runtime_error("no"); }, 8),
               std::runtime_error);
  EXPECT_EQ(ring->upstream_lost_seen(*id), 0U);
  EXPECT_EQ(ring->drain(
                    *id, [](std::span<const std::byte>) {}, 8)
                .count,
            1U);
  EXPECT_EQ(ring->upstream_lost_seen(*id), 4U);
}

// A marker takes a slot: on a full blocking ring it is refused like a push
// and nothing is written; on a ring without records nothing is written at all.
TEST_F(RecordTest, LossMarkerNeedsRoomAndOnlyRingsWithRecordsCarryIt) {
  auto ring = BroadcastRing::create(path(), 16);
  ASSERT_TRUE(ring);
  auto id = ring->register_consumer();
  ASSERT_TRUE(id);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(ring->try_push(pattern(8, 4)), Errc::ok);
  EXPECT_EQ(ring->mark_upstream_loss(3), Errc::full);
  EXPECT_EQ(ring->producer_position(), 16U);

  auto plain = BroadcastRing::create(path("plain"), 16, {.max_message = kMaxPayload});
  ASSERT_TRUE(plain);
  auto pid = plain->register_consumer();
  ASSERT_TRUE(pid);
  EXPECT_EQ(plain->mark_upstream_loss(3), Errc::ok);
  EXPECT_EQ(plain->producer_position(), 0U);
  EXPECT_EQ(plain->upstream_lost_seen(*pid), 0U);
}

TEST_F(RecordTest, ReopenedRingKeepsItsMaxMessageAndMismatchedGeometryIsRefused) {
  {
    auto ring = BroadcastRing::create(path(), 128, {.max_message = 1000});
    ASSERT_TRUE(ring);
  }
  auto opened = BroadcastRing::open(path());
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(opened->max_message(), 1000U);
  // A header whose block size disagrees with its max_message is damage.
  auto fd = ::open(path().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  const std::uint32_t bad_block = 3;
  ASSERT_EQ(::pwrite(fd, &bad_block, 4, 60), 4);
  ::close(fd);
  auto damaged = BroadcastRing::open(path());
  ASSERT_FALSE(damaged);
  EXPECT_EQ(damaged.error().code, Errc::layout_mismatch);
  EXPECT_EQ(damaged.error().found, 3U);
}

}  // namespace
}  // namespace ringcast
