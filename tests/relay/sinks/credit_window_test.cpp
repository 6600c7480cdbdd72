// CreditWindow (src/relay/sinks/credit_window.hpp) against a real nats-server: the
// acks an ingress sends to the window's inbox decide which ring positions the
// reader may publish. Each invariant of the header is one test here; the
// cross-host tests drive the same window through whole relays.
#include "relay/sinks/credit_window.hpp"

#include <nats/nats.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "relay_test_support.hpp"

namespace ringcast::relay {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::NatsServer;

class CreditWindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = NatsServer::start();
    ASSERT_TRUE(server_);
    ASSERT_EQ(natsConnection_ConnectTo(&reader_, server_->url().c_str()), NATS_OK);
    ASSERT_EQ(natsConnection_ConnectTo(&ingress_, server_->url().c_str()), NATS_OK);
  }
  void TearDown() override {
    window_.reset();
    for (natsConnection* c : {reader_, ingress_}) {
      if (c != nullptr) {
        natsConnection_Close(c);
        natsConnection_Destroy(c);
      }
    }
  }
  void start(CreditWindow::Config config) {
    auto w = CreditWindow::start(reader_, config, nullptr);
    ASSERT_TRUE(w) << w.error();
    window_ = std::move(*w);
    window_->reset(kRun);
  }
  // What an ingress sends: "<id hex> <run hex> <position>" (or "-": it left).
  void ack(std::uint64_t id, std::uint32_t run, const std::string& position) {
    const std::string body = fmt::format("{:x} {:x} {}", id, run, position);
    ASSERT_EQ(natsConnection_Publish(ingress_, window_->inbox(), body.data(), static_cast<int>(body.size())), NATS_OK);
    ASSERT_EQ(natsConnection_FlushTimeout(ingress_, 5000), NATS_OK);
  }
  // Waits until `acks` acks have been taken (they arrive on libnats' thread).
  bool acks_taken(std::uint64_t acks) {
    return eventually([&] { return window_->stats().acks + window_->stats().overflow >= acks; }, 10s);
  }

  static constexpr std::uint32_t kRun = 7;
  std::unique_ptr<NatsServer> server_;
  natsConnection* reader_ = nullptr;
  natsConnection* ingress_ = nullptr;
  std::unique_ptr<CreditWindow> window_;
};

TEST_F(CreditWindowTest, WithoutIngressesEveryPositionIsOpen) {
  start({.window = 10});
  EXPECT_TRUE(window_->open(0));
  EXPECT_TRUE(window_->open(1'000'000));
  EXPECT_EQ(window_->stats().ingresses, 0U);
}

// Invariant 1: the base is the lowest acknowledged position of the known
// ingresses, and a position opens while it is within base + window.
TEST_F(CreditWindowTest, TheSlowestIngressSetsTheBase) {
  start({.window = 10});
  window_->published(25);
  ack(1, kRun, "20");
  ack(2, kRun, "5");
  ASSERT_TRUE(acks_taken(2));
  EXPECT_EQ(window_->stats().ingresses, 2U);
  EXPECT_TRUE(window_->open(15));
  EXPECT_FALSE(window_->open(16)) << "5 + 10 is the last open position";
  EXPECT_EQ(window_->stats().in_flight, 20U);
  ack(2, kRun, "12");
  ASSERT_TRUE(acks_taken(3));
  EXPECT_TRUE(window_->open(22));
  EXPECT_FALSE(window_->open(23));
}

// Invariant 2: an ingress's position never moves back, and acks of another
// run (a ring reopened) are not counted.
TEST_F(CreditWindowTest, AcksNeverMoveBackAndOtherRunsAreIgnored) {
  start({.window = 10});
  window_->published(40);
  ack(1, kRun, "30");
  ack(1, kRun, "3");  // late, reordered
  ASSERT_TRUE(acks_taken(2));
  EXPECT_TRUE(window_->open(40));
  ack(2, kRun + 1, "0");  // another run's ingress
  ack(1, kRun, "31");     // in order behind it: once this is taken, so is the other
  ASSERT_TRUE(acks_taken(3));
  EXPECT_EQ(window_->stats().acks, 3U) << "the other run's ack is not counted";
  EXPECT_EQ(window_->stats().ingresses, 1U);
  EXPECT_TRUE(window_->open(41));
}

TEST_F(CreditWindowTest, MalformedAcksAreDropped) {
  start({.window = 10});
  for (const char* bad : {"", "zz 7 1", "1 7", "1 7 x", "1 7 5 6", "1 7 -x"}) {
    ASSERT_EQ(natsConnection_PublishString(ingress_, window_->inbox(), bad), NATS_OK);
  }
  ack(1, kRun, "4");
  ASSERT_TRUE(acks_taken(1));
  EXPECT_EQ(window_->stats().acks, 1U);
  EXPECT_EQ(window_->stats().ingresses, 1U);
}

TEST_F(CreditWindowTest, AnIngressThatLeftIsNoLongerWaitedFor) {
  start({.window = 10});
  window_->published(50);
  ack(1, kRun, "40");
  ack(2, kRun, "0");
  ASSERT_TRUE(acks_taken(2));
  EXPECT_FALSE(window_->open(50));
  ack(2, kRun, "-");
  ASSERT_TRUE(eventually([&] { return window_->stats().left == 1; }, 10s));
  EXPECT_EQ(window_->stats().ingresses, 1U);
  EXPECT_TRUE(window_->open(50));
}

// Ingresses beyond kMaxIngresses are counted, not waited for.
TEST_F(CreditWindowTest, IngressesBeyondTheTableAreCountedAsOverflow) {
  start({.window = 10});
  window_->published(200);
  for (std::uint64_t id = 1; id <= CreditWindow::kMaxIngresses; ++id) ack(id, kRun, "100");
  ack(CreditWindow::kMaxIngresses + 1, kRun, "0");
  ASSERT_TRUE(acks_taken(CreditWindow::kMaxIngresses + 1));
  EXPECT_EQ(window_->stats().ingresses, CreditWindow::kMaxIngresses);
  EXPECT_EQ(window_->stats().overflow, 1U);
  EXPECT_TRUE(window_->open(110)) << "the 65th ingress at 0 does not hold the base";
}

// wait() returns once an ack opens the position, probing meanwhile.
TEST_F(CreditWindowTest, WaitProbesUntilAnAckOpensThePosition) {
  start({.window = 10, .probe_interval = 20ms, .ack_timeout = 60s});
  window_->published(10);
  ack(1, kRun, "0");
  ASSERT_TRUE(acks_taken(1));
  std::atomic<bool> stop{false};
  std::atomic<int> probes{0};
  std::thread acker([&] {
    // After a few probes, the ingress catches up.
    ASSERT_TRUE(eventually([&] { return probes.load() >= 2; }, 30s));
    ack(1, kRun, "5");
  });
  EXPECT_TRUE(window_->wait(15, stop, [&] { probes.fetch_add(1); }));
  acker.join();
  EXPECT_GE(window_->stats().probes, 2U);
  EXPECT_GE(window_->stats().waits, 1U);
}

// Invariant 3: an ingress silent for ack_timeout while the reader waits is
// forgotten, and the wait ends.
TEST_F(CreditWindowTest, ASilentIngressIsForgottenAfterTheAckTimeout) {
  start({.window = 10, .probe_interval = 1s, .ack_timeout = 200ms});
  window_->published(10);
  ack(1, kRun, "0");
  ASSERT_TRUE(acks_taken(1));
  std::atomic<bool> stop{false};
  EXPECT_TRUE(window_->wait(11, stop, [] {}));
  EXPECT_EQ(window_->stats().expired, 1U);
  EXPECT_EQ(window_->stats().ingresses, 0U);
}

TEST_F(CreditWindowTest, StopEndsAWait) {
  start({.window = 10, .probe_interval = 1s, .ack_timeout = 60s});
  window_->published(10);
  ack(1, kRun, "0");
  ASSERT_TRUE(acks_taken(1));
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    std::this_thread::sleep_for(50ms);
    stop.store(true);
  });
  EXPECT_FALSE(window_->wait(11, stop, [] {}));
  stopper.join();
}

TEST_F(CreditWindowTest, ResetForgetsEveryIngress) {
  start({.window = 10});
  window_->published(20);
  ack(1, kRun, "0");
  ASSERT_TRUE(acks_taken(1));
  EXPECT_FALSE(window_->open(11));
  window_->reset(kRun + 1);
  EXPECT_EQ(window_->stats().ingresses, 0U);
  EXPECT_TRUE(window_->open(11));
}

}  // namespace
}  // namespace ringcast::relay
