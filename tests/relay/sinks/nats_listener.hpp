// What the NATS sinks' tests share: a nats-server, the relay's connection to
// it, and a listener that receives every message the sink publishes (on
// ">", leaving out the server's and libnats' own subjects: $JS..., _INBOX...).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "relay/nats_connection.hpp"
#include "relay_test_support.hpp"
#include "sink_contract.hpp"

namespace ringcast::relay::testing {

// One received NATS message, with the headers the sinks set.
struct NatsReceived {
  std::string subject, body, reply;
  std::string header(const char* name) const { return headers_.count(name) != 0 ? headers_.at(name) : ""; }
  std::map<std::string, std::string> headers_;
};

class NatsListener {
 public:
  NatsListener() = default;
  NatsListener(const NatsListener&) = delete;
  NatsListener& operator=(const NatsListener&) = delete;
  ~NatsListener() {
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    if (conn_ != nullptr) {
      natsConnection_Close(conn_);
      natsConnection_Destroy(conn_);
    }
  }
  // Starts `server` (JetStream on when `jetstream_dir` is not empty), the
  // relay's connection and the listener. Call through ASSERT_NO_FATAL_FAILURE.
  void start(const std::string& jetstream_dir = {}) {
    server_ = NatsServer::start({.jetstream_dir = jetstream_dir});
    ASSERT_TRUE(server_);
    ASSERT_EQ(natsConnection_ConnectTo(&conn_, server_->url().c_str()), NATS_OK);
    ASSERT_EQ(natsConnection_SubscribeSync(&sub_, conn_, ">"), NATS_OK);
    ASSERT_EQ(natsConnection_FlushTimeout(conn_, 5000), NATS_OK);  // subscribed before anything is published
    NatsConfig config;
    config.url = server_->url();
    auto nats = NatsConnection::connect(config, [](LogLevel, std::string_view) {});
    ASSERT_TRUE(nats) << nats.error();
    nats_ = std::move(*nats);
  }
  // The next `n` messages on the sinks' subjects (fewer if they do not come within 10 s).
  std::vector<NatsReceived> next(std::size_t n) {
    std::vector<NatsReceived> out;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      natsMsg* msg = nullptr;
      if (left.count() <= 0 || natsSubscription_NextMsg(&msg, sub_, left.count()) != NATS_OK) break;
      const std::string_view subject = natsMsg_GetSubject(msg);
      if (!subject.starts_with("$") && !subject.starts_with("_INBOX")) {
        NatsReceived r;
        r.subject = subject;
        r.body.assign(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
        if (natsMsg_GetReply(msg) != nullptr) r.reply = natsMsg_GetReply(msg);
        const char** keys = nullptr;
        int count = 0;
        if (natsMsgHeader_Keys(msg, &keys, &count) == NATS_OK) {
          for (int i = 0; i < count; ++i) {
            const char* value = nullptr;
            if (natsMsgHeader_Get(msg, keys[i], &value) == NATS_OK) r.headers_[keys[i]] = value;
          }
          free(static_cast<void*>(keys));
        }
        out.push_back(std::move(r));
      }
      natsMsg_Destroy(msg);
    }
    return out;
  }
  // As the contract suite wants them.
  std::vector<Received> receive(std::size_t n) {
    std::vector<Received> out;
    for (const NatsReceived& r : next(n)) out.push_back({r.subject, r.body});
    return out;
  }
  // A message to `subject` from outside the relay (an ingress's ack).
  void publish(const std::string& subject, const std::string& body) {
    ASSERT_EQ(natsConnection_Publish(conn_, subject.c_str(), body.data(), static_cast<int>(body.size())), NATS_OK);
    ASSERT_EQ(natsConnection_FlushTimeout(conn_, 5000), NATS_OK);
  }

  std::unique_ptr<NatsServer> server_;
  natsConnection* conn_ = nullptr;  // the listener's own
  natsSubscription* sub_ = nullptr;
  std::unique_ptr<NatsConnection> nats_;  // the relay's
};

}  // namespace ringcast::relay::testing
