// What a publisher does with a message the core refused (PublishOutcome::
// kRefused: a `block` subscriber of its channel had no room, seed 002 §5;
// kUnreachable: the cluster cannot be reached; kBacklogged: the cluster's
// history has its bound of stores in flight): the one policy every publisher
// follows, the RESP session, the WebSocket session and Broker::publish alike.
// Each only waits its own way (a paused connection, a blocked thread) and
// words the outcome.
//
//   refused -> hold it, retrying when a queue drains (or every few ms), until
//              its period has passed since the hold began -> refuse it
//              (counted here, once)
//
// The period is max_block; for kBacklogged, at least the cluster's bound on a
// store's wait (BrokerCore::backlog_hold) for a publisher that holds
// backlogs: a store backlog is JetStream catching up, which a publisher
// should wait out as it waits for TCP, whatever --max-block says of `block`
// subscribers. One that must answer at once (the WebSocket session,
// PublishWait::kNoWait) refuses it at once too.
//
// A hold spans what the publisher does in one go (a Broker::publish call, a
// RESP connection's batch of pipelined PUBLISHes, one large PUBLISH): once its
// max_block has passed, the rest of that go that is refused is refused at
// once, so a stuck subscriber costs one max_block per go, not per message.
// release() ends the go.
//
// max_block 0 refuses at once (the WebSocket session; --max-block 0). A
// publisher that must lose nothing (the relay) holds until accepted: every
// max_block of waiting counts one refusal and is reported, and it waits on.
//
// Thread safety: none; one per publisher, used by its thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/core/broker_core.hpp"

namespace ringcast::broker {

// Why a message was refused (kRefused, kUnreachable or kBacklogged), in the
// words every publisher sends after its protocol's prefix; `channel` is what
// the caller shows of the channel's name.
inline std::string refusal_reason(PublishOutcome::Status status, std::string_view channel) {
  if (status == PublishOutcome::Status::kUnreachable) {
    return "the cluster is unreachable: '" + std::string(channel) +
           "' was not published, on this node or any other; retry later";
  }
  if (status == PublishOutcome::Status::kBacklogged) {
    return "this node's stores into the cluster's history are at --cluster-max-pending-stores, awaiting "
           "JetStream's acknowledgement past --cluster-store-timeout: '" +
           std::string(channel) + "' was not published; retry later";
  }
  return "a subscriber of '" + std::string(channel) +
         "' with the block overflow policy has no room; nothing was delivered, retry later";
}

class RefusalHold {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Verdict : std::uint8_t {
    kWait,          // hold the message and try again by deadline()
    kRefuse,        // give up on it: the caller tells its publisher (counted)
    kWaitReported,  // until-accepted: another max_block passed (counted); wait on
  };

  // How a publisher holds: kAtOnce refuses everything at once (max_block is
  // then 0), kHold holds for the period above, kUntilAccepted holds on.
  enum class Mode : std::uint8_t { kAtOnce, kHold, kUntilAccepted };

  RefusalHold(BrokerCore& core, std::chrono::nanoseconds max_block, Mode mode) noexcept
      : core_(core), max_block_(max_block), mode_(mode) {}

  // A message was refused at `now`, for `status` (the one held, or a later
  // one of the go).
  Verdict on_refused(Clock::time_point now, PublishOutcome::Status status) noexcept {
    if (!holding_) {
      holding_ = true;
      const bool backlog = status == PublishOutcome::Status::kBacklogged && mode_ != Mode::kAtOnce;
      deadline_ = now + (backlog ? std::max(max_block_, core_.backlog_hold()) : max_block_);
    }
    if (now < deadline_) return Verdict::kWait;
    core_.count_refused(1);
    if (mode_ != Mode::kUntilAccepted) return Verdict::kRefuse;
    deadline_ = now + max_block_;
    return Verdict::kWaitReported;
  }
  // A message is refused without holding (the caller is cancelled, stopping or
  // closing): counted as any refusal.
  void refuse_now() noexcept { core_.count_refused(1); }
  // The go is over (its messages accepted or refused): the next refusal
  // starts a new hold.
  void release() noexcept { holding_ = false; }

  // When the current hold's period ends. REQUIRES: on_refused() said kWait or kWaitReported.
  [[nodiscard]] Clock::time_point deadline() const noexcept { return deadline_; }

 private:
  BrokerCore& core_;
  const std::chrono::nanoseconds max_block_;
  const Mode mode_;
  bool holding_ = false;
  Clock::time_point deadline_{};
};

}  // namespace ringcast::broker
