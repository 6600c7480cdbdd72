// JetStreamSink: a ring route's output into a JetStream stream (`--jetstream`,
// docs/scale-out.md "JetStream"): one JetStream message per ring message,
// through the process's JetStreamPublisher (relay/jetstream_publisher.hpp),
// which keeps each one until the stream acknowledges it.
//
// Invariant: every message put() is handed to the publisher (or counted
// failed) before put() returns, in ring order. put() may wait for acks (the
// publisher's invariant 3): the one place a reader waits for a network peer
// by choice of --jetstream.
#pragma once

#include <atomic>
#include <string>

#include "relay/sinks/sink.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class JetStreamPublisher;

class JetStreamSink final : public Sink {
 public:
  // `publisher` and `stop` (the relay's stop flag) must outlive this sink.
  JetStreamSink(const RingRoute& route, JetStreamPublisher& publisher, const std::atomic<bool>& stop);

  void open(const std::string& source) override { source_ = source; }
  void put(const Staged& m) noexcept override;
  void flush() noexcept override {}
  [[nodiscard]] bool needs_positions() const noexcept override { return true; }

 private:
  JetStreamPublisher& publisher_;
  const std::atomic<bool>& stop_;
  const bool topic_in_payload_;
  std::string source_;
};

}  // namespace ringcast::relay
