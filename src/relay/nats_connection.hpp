// NatsConnection: the relay's and the broker's connection to NATS through
// libnats (reconnecting, logging its state), shared by everything that talks
// to NATS in the process: the core NATS publisher (publish() here), the
// JetStream publisher, and the ingress's subscriptions and pull consumers
// (connection()).
//
// Thread safety
//  * publish() may be called from any number of reader threads at once:
//    natsConnection_Publish is thread-safe (it takes the connection's own
//    mutex for the append to its write buffer; no socket write happens on the
//    caller's thread, the libnats flusher thread writes).
//  * stats() and close() from any thread; close() is idempotent.
//  * libnats calls the connection callbacks on its own threads; they touch
//    only relaxed counters and mu_-guarded text.
//
// Buffering and reconnects are libnats': while disconnected, publishes go to
// its reconnect buffer (NatsConfig::reconnect_buffer_bytes); when that is
// full they fail with NATS_INSUFFICIENT_BUFFER and are counted as
// buffer_full. Delivery is at most once (docs/scale-out.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/relay/continuity.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

class NatsConnection {
 public:
  // Creates the connection. If no server answers yet, libnats keeps retrying in
  // the background (publishes are buffered meanwhile) and this still succeeds;
  // it fails only on bad options (e.g. a malformed URL).
  static tl::expected<std::unique_ptr<NatsConnection>, std::string> connect(const NatsConfig& config, LogFn log);
  NatsConnection(const NatsConnection&) = delete;
  NatsConnection& operator=(const NatsConnection&) = delete;
  ~NatsConnection();

  // Hot path. `subject` and `source` are NUL-terminated. Publishes `body` with
  // the headers Ringcast-Source: `source` and Ringcast-Seq: `seq`
  // (ringcast/relay/continuity.hpp). True when libnats accepted the message
  // (sent or buffered). Never blocks on the network, never throws. Costs
  // libnats' message object: one allocation for the message and a small one
  // per header, freed before returning.
  // With `count` > 0 the body is a batch of `count` ring messages starting at
  // `seq` (docs/scale-out.md, "Batches") and the header Ringcast-Count is added.
  // A `from` other than kFromSeq and `seq` adds Ringcast-From: `from` (a
  // message that accounts for ring positions from .. seq).
  // `tag`, when not null, adds the credit window's parts (docs/scale-out.md,
  // "Credit window"): the reply subject the ingress acknowledges to and the
  // header Ringcast-Msg: <run>.<msg> (the message's number in this run).
  struct Tag {
    const char* reply = nullptr;
    std::uint32_t run = 0;
    std::uint64_t msg = 0;
  };
  bool publish(const char* subject, std::string_view body, const char* source, std::uint64_t seq,
               std::uint64_t count = 0, std::uint64_t from = kFromSeq, const Tag* tag = nullptr) noexcept;
  // A probe (credit window): an empty message on `subject` with Ringcast-Source,
  // Ringcast-Seq: `seq` (the last position published), Ringcast-Msg: the next
  // message number, Ringcast-Probe: 1, replying to tag.reply. Not counted as
  // published.
  bool publish_probe(const char* subject, const char* source, std::uint64_t seq, const Tag& tag) noexcept;

  [[nodiscard]] NatsStats stats() const;
  // The libnats connection, for the ingress's subscriptions (nats_ingress.hpp)
  // and the JetStream publisher and consumers that share it; valid until this
  // object is destroyed. Stop every ingress before close().
  [[nodiscard]] natsConnection* connection() const noexcept { return conn_; }
  // Flushes what is buffered (bounded by `flush_timeout` when connected), then
  // closes the connection. Later publishes fail (counted).
  void close(std::chrono::milliseconds flush_timeout) noexcept;

 private:
  // State libnats' callback thread uses. libnats delivers callbacks
  // asynchronously, possibly after natsConnection_Close/Destroy return, so this
  // outlives this object: the closure handed to libnats is a heap shared_ptr that
  // on_closed (always the last callback) deletes.
  //  * mu guards closed, log use and last_error: close() sets closed under mu, so
  //    once it returns no callback is inside log (whose target may be gone).
  struct Callbacks {
    std::mutex mu;
    bool closed = false;
    LogFn log;
    std::string last_error;
    std::atomic<std::uint64_t> disconnects{0};
    std::atomic<std::uint64_t> reconnects{0};
    // Logs unless closed; callers hold no lock.
    void say(LogLevel level, const std::string& text);
  };
  using Holder = std::shared_ptr<Callbacks>;

  explicit NatsConnection(LogFn log);
  void count_failure(natsStatus s) noexcept;
  static Callbacks& state(void* closure) { return **static_cast<Holder*>(closure); }
  static void on_connected(natsConnection* nc, void* closure);
  static void on_disconnected(natsConnection* nc, void* closure);
  static void on_reconnected(natsConnection* nc, void* closure);
  static void on_closed(natsConnection* nc, void* closure);
  static void on_error(natsConnection* nc, natsSubscription* sub, natsStatus err, void* closure);

  Holder callbacks_;
  Holder* closure_ = nullptr;  // owned by libnats once a connection exists, else by us
  natsOptions* options_ = nullptr;
  natsConnection* conn_ = nullptr;
  std::atomic<bool> closed_{false};
  std::atomic<std::uint64_t> published_{0};
  std::atomic<std::uint64_t> buffer_full_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint32_t> last_failure_{NATS_OK};  // natsStatus of the latest refused publish
};

}  // namespace ringcast::relay
