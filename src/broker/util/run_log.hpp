// What the subscription index tells a log of published runs (the per-channel
// history, guarantees/channel_history.hpp) while it publishes: the core knows
// that a log exists, not what it keeps or where.
//
// Thread safety: both calls come from publishing threads, concurrently for
// different channels, and for one channel only under that channel's id stripe
// lock (subscription_index.hpp, invariant 4), so a channel's calls are ordered
// and the ids they carry only grow.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ringcast/broker/message.hpp"

namespace ringcast::broker {

class RunLog {
 public:
  virtual ~RunLog() = default;

  // The last id `channel` had before this broker started (0: none), for a
  // channel the index has not numbered yet: a persisted history continues
  // its offsets from here, so that an offset names one message forever.
  [[nodiscard]] virtual std::uint64_t last_id(std::string_view channel) noexcept = 0;

  // `run` was given ids first_id, first_id + 1, ... and is about to be queued
  // to its subscribers (plain PUBLISH channels only; SPUBLISH channels keep no
  // log). Called once per run, before any subscriber is offered it, while every
  // subscription change waits (the index lock is held shared): a subscriber
  // that joins later finds the run in the log, one that joined earlier gets it
  // live. Must not throw; a failure is the log's to count. Returns false iff
  // the channel is logged and the run could not be stored: a QoS 1 run is then
  // refused (puback means stored; subscription_index.hpp, invariant 5).
  [[nodiscard]] virtual bool append(std::string_view channel, std::uint64_t first_id, std::span<const Message> run,
                                    std::int64_t time_ms) noexcept = 0;
};

}  // namespace ringcast::broker
