// What the tests that run a Relay in this process share: a log sink, the
// configurations they start from, and a fixture holding a ring in a fresh
// directory with a Relay reading it. (relay_test_support.hpp stays free of
// the relay library: the end-to-end test runs the binary.)
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "relay_test_support.hpp"
#include "ringcast/broadcast_ring.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay::testing {

// Collects log lines (the relay logs from several threads).
class LogSink {
 public:
  // The sink as RelayConfig::log; this object must outlive the relay.
  LogFn fn() {
    return [this](LogLevel, std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.emplace_back(line);
    };
  }
  [[nodiscard]] bool contains(std::string_view needle) const {
    std::lock_guard lock(mu_);
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  // Every line so far, each ending in '\n' (for failure messages).
  [[nodiscard]] std::string all() const {
    std::lock_guard lock(mu_);
    std::string s;
    for (const auto& l : lines_) s += l + "\n";
    return s;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// An embedded broker on a port the kernel picks, with one I/O thread.
inline broker::BrokerConfig loopback_broker() {
  broker::BrokerConfig b;
  b.port = 0;
  b.io_threads = 1;
  return b;
}

// A relay of `rings` that logs to `log` and, idle, looks for changes every
// 10 ms (so the tests' waits are short); it has no sink yet.
inline RelayConfig relay_config(std::vector<RingRoute> rings, LogSink& log) {
  RelayConfig c;
  c.rings = std::move(rings);
  c.poll_interval = std::chrono::milliseconds(10);
  c.log = log.fn();
  return c;
}

// relay_config() with the embedded broker as its sink.
inline RelayConfig broker_config(std::vector<RingRoute> rings, LogSink& log) {
  RelayConfig c = relay_config(std::move(rings), log);
  c.broker = loopback_broker();
  return c;
}

// A NATS sink publishing to the server at `url`, retrying a lost server every
// 50 ms.
inline NatsConfig nats_sink(const std::string& url) {
  NatsConfig n;
  n.url = url;
  n.reconnect_wait = std::chrono::milliseconds(50);
  return n;
}

inline std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// A ring in a fresh directory and a Relay reading it. The suites derive from
// this and say which sinks the relay has.
class RingRelayTest : public ::testing::Test {
 protected:
  // Creates dir_/`file` with `slots` slots as ring_ (its path in path_),
  // starts relay_ routing it to `name` (a prefix when `topic_in_payload`)
  // with the sinks `add_sinks` puts in its relay_config(), and returns once
  // the relay's reader is registered on the ring. Call through
  // ASSERT_NO_FATAL_FAILURE.
  void start_relay(std::string_view file, std::uint64_t slots, const std::string& name,
                   const std::function<void(RelayConfig&)>& add_sinks, bool topic_in_payload = false,
                   const CreateOptions& options = {}) {
    path_ = dir_.file(file);
    auto ring = BroadcastRing::create(path_, slots, options);
    ASSERT_TRUE(ring) << ring.error().message();
    ring_.emplace(std::move(*ring));
    RelayConfig config = relay_config({{path_, name, topic_in_payload}}, log_);
    add_sinks(config);
    auto relay = Relay::start(std::move(config));
    ASSERT_TRUE(relay) << relay.error().message();
    relay_ = std::move(*relay);
    ASSERT_TRUE(eventually([&] { return ring_->active_consumer_count() == 1; }));
  }

  TempDir dir_;
  LogSink log_;  // outlives relay_, which logs to it
  std::string path_;
  std::optional<BroadcastRing> ring_;
  std::unique_ptr<Relay> relay_;
};

}  // namespace ringcast::relay::testing
