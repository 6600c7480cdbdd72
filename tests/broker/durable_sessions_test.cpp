// DurableSessions across the nodes of a cluster (durable_sessions.hpp,
// invariant 1): of two attaches on two nodes the one the shared store
// recorded later holds the session, whatever order this node hears of the
// records in. A store double stands for the cluster's: its hold() answers
// the revisions a test gives it, and the test plays the other node's records
// through the function DurableSessions gave watch_taken.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "broker/guarantees/durable_sessions.hpp"
#include "ringcast/broker/session_store.hpp"

namespace ringcast::broker {
namespace {

class SharedStoreDouble final : public SessionStore {
 public:
  std::optional<std::string> claim(std::string_view, std::string_view owner) override { return std::string(owner); }
  std::optional<std::uint64_t> floor(std::string_view, std::string_view) const override { return std::nullopt; }
  void put_floor(std::string_view, std::string_view, std::uint64_t) noexcept override {}
  void refresh(std::string_view) noexcept override {}
  std::vector<std::string> detached_clients() const override { return {}; }
  void expire(std::string_view) noexcept override {}

  // The next hold() answers `revision` (nullopt: the store cannot be
  // written), after running `during` (another node's record arriving while
  // this node's put is in flight).
  void answer(std::optional<std::uint64_t> revision, std::function<void()> during = {}) {
    answers_.push_back({revision, std::move(during)});
  }
  std::optional<std::uint64_t> hold(std::string_view) override {
    Answer a = std::move(answers_.front());
    answers_.pop_front();
    if (a.during) a.during();
    return a.revision;
  }

  // Another node recorded `client_id` at `revision`, heard on the store's thread.
  void record_elsewhere(std::string_view client_id, std::uint64_t revision) {
    std::lock_guard lock(mu_);
    if (taken_) taken_(client_id, revision);
  }
  void watch_taken(TakenFn taken) override {
    std::lock_guard lock(mu_);
    taken_ = std::move(taken);
  }
  [[nodiscard]] bool watched() {
    std::lock_guard lock(mu_);
    return static_cast<bool>(taken_);
  }

 private:
  struct Answer {
    std::optional<std::uint64_t> revision;
    std::function<void()> during;
  };
  std::deque<Answer> answers_;  // the test thread's
  std::mutex mu_;
  TakenFn taken_;  // guarded by mu_, held while it runs (as ClusterSessions)
};

std::unique_ptr<AckTracker> no_tracker() { return nullptr; }

class DurableSessionsTakenTest : public ::testing::Test {
 protected:
  std::shared_ptr<DurableSessions::Session> attach(std::optional<std::uint64_t> revision,
                                                   std::function<void()> during = {}) {
    store_.answer(revision, std::move(during));
    auto s = sessions_->attach("c1", "owner", no_tracker, [this] { wakes_.fetch_add(1); });
    return s ? *s : nullptr;
  }

  std::atomic<int> wakes_{0};  // the holders' wake-ups
  SharedStoreDouble store_;
  std::unique_ptr<DurableSessions> sessions_ = std::make_unique<DurableSessions>(&store_, std::chrono::milliseconds(0));
};

TEST_F(DurableSessionsTakenTest, ALaterRecordElsewhereTakesTheSessionAndAnEarlierOneDoesNot) {
  auto s = attach(5);
  ASSERT_NE(s, nullptr);
  store_.record_elsewhere("c1", 4);  // the other node's attach was before this one's
  EXPECT_FALSE(s->taken.load());
  store_.record_elsewhere("c2", 9);  // another session
  EXPECT_FALSE(s->taken.load());
  EXPECT_EQ(wakes_.load(), 0);
  store_.record_elsewhere("c1", 7);
  EXPECT_TRUE(s->taken.load());
  EXPECT_EQ(wakes_.load(), 1);
  EXPECT_EQ(sessions_->counts().taken, 1u);
  store_.record_elsewhere("c1", 8);  // taken once
  EXPECT_EQ(sessions_->counts().taken, 1u);
  EXPECT_EQ(wakes_.load(), 1);
}

// The other node's record can reach this node before its own hold() has
// answered: it is judged once the answer comes, so it is not lost.
TEST_F(DurableSessionsTakenTest, ARecordHeardWhileTheHoldIsInFlightIsJudgedWhenItAnswers) {
  auto later = attach(5, [&] { store_.record_elsewhere("c1", 6); });
  ASSERT_NE(later, nullptr);
  EXPECT_TRUE(later->taken.load()) << "revision 6 came after this attach's 5";
  EXPECT_EQ(wakes_.load(), 1);
  sessions_->detach(*later);

  auto earlier = attach(12, [&] { store_.record_elsewhere("c1", 11); });
  ASSERT_NE(earlier, nullptr);
  EXPECT_FALSE(earlier->taken.load()) << "revision 11 came before this attach's 12";
  EXPECT_EQ(sessions_->counts().taken, 1u);
}

// A record for a session no connection here holds changes nothing, and a
// later attach starts afresh: what happened before it does not take it.
TEST_F(DurableSessionsTakenTest, ARecordWhileDetachedDoesNotTakeTheNextAttach) {
  auto s = attach(5);
  ASSERT_NE(s, nullptr);
  sessions_->detach(*s);
  store_.record_elsewhere("c1", 20);
  auto again = attach(21);
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->taken.load());
  EXPECT_EQ(sessions_->counts().taken, 0u);
}

// A hold the store could not write refuses the attach, as a claim it cannot
// answer does, and leaves the session free for the next one.
TEST_F(DurableSessionsTakenTest, AHoldTheStoreCannotWriteRefusesTheAttach) {
  store_.answer(std::nullopt);
  const auto refused = sessions_->attach("c1", "owner", no_tracker, [] {});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), DurableSessions::Refusal::kNoStore);
  EXPECT_EQ(sessions_->counts().attached, 0u);
  EXPECT_NE(attach(3), nullptr);
}

TEST_F(DurableSessionsTakenTest, TheWatchEndsWithTheSessions) {
  EXPECT_TRUE(store_.watched());
  sessions_.reset();
  EXPECT_FALSE(store_.watched());
}

// The store's thread plays records while this one attaches and detaches
// (for TSan); a hold answered above every record is never taken.
TEST_F(DurableSessionsTakenTest, RecordsFromTheStoresThreadRaceAttachesSafely) {
  std::atomic<bool> stop{false};
  std::thread other([&] {
    for (std::uint64_t r = 1; !stop.load(); ++r) store_.record_elsewhere("c1", r % 1000);
  });
  std::uint64_t taken = 0;
  for (int i = 0; i < 2000; ++i) {
    auto s = attach(i % 2 == 0 ? 0 : 1000);  // below or above every record
    ASSERT_NE(s, nullptr);
    sessions_->detach(*s);  // nothing takes it after this
    if (i % 2 == 1) EXPECT_FALSE(s->taken.load()) << i;
    taken += s->taken.load() ? 1 : 0;
  }
  stop = true;
  other.join();
  EXPECT_EQ(sessions_->counts().taken, taken);
}

}  // namespace
}  // namespace ringcast::broker
