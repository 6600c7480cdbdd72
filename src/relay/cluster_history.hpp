// ClusterHistory: a cluster's history of retained channels, kept by JetStream
// (docs/cluster.md, "History"), for NatsCluster's ClusterLink::open_history
// and store().
//
// One stream, `<PREFIX>_HISTORY` (the subject prefix with '.' as '_'), holds
// every retained channel's messages on `<prefix>.h.<token>`, replicated as
// --cluster-history-replicas says, limited per subject by the largest
// --history size and the longest TTL. A node publishes a retained channel's
// message into it and does not deliver it itself; every node, the publishing
// one too, reads the stream back through an ordered consumer and publishes
// each message to its subscribers with its stream sequence as its offset
// (Broker::publish_from_history), which also stores it in the node's copy of
// the history. What the stream held when the node started is loaded into the
// copy first (load()), delivered to nobody. So an offset names the same message on every node,
// and a subscriber that recovers `since` an offset on another node gets what
// it missed. The epoch is the stream's creation time: a stream deleted and
// made anew is another history.
//
// Thread safety
//  * store() and store_async() from any thread, concurrently. egress_mu_
//    orders the frames handed to libnats (one node's messages on one subject
//    keep their order); waits_mu_ guards waits_, the QoS 1 stores waiting for
//    their acks, and the receipt thread's state.
//  * The receipt thread (started by open(), joined by stop()) flushes what
//    store_async() handed over, as a waiting store() flushes on its own
//    thread; completes a store_async() whose ack has not come within
//    store_timeout as failed (counted as a timeout); and gives up the stores
//    in flight when no ack at all has come for two store timeouts
//    (invariant 1).
//  * on_ack() runs on libnats' delivery thread (the connection uses the one
//    global delivery worker, nats_cluster.hpp): it only counts and, for a
//    message someone waits for, records its outcome under waits_mu_.
//  * on_copy() runs on the same thread, in stream order: the copy's state is
//    that thread's. It publishes into the broker, which must not wait for
//    this thread: a store() that waits (QoS 1) must not be called from it.
//  * stop() once, before the connection closes; no on_copy() runs after it.
// Invariants
//  1. Every message handed to libnats is settled once: by on_ack() (its ack
//     or JetStream's refusal), or, when no ack of any store has come for two
//     store timeouts while some are in flight (their acks lost with a
//     server, or a stream without a leader), by the receipt thread, which
//     takes every pending one back from libnats (give_up_pending(): libnats
//     then drops a late ack). No per-message timer: a deadline per store in
//     libnats (jsPubOptions.MaxWait) cost the broker 20-35 % more CPU per
//     stored message, and timing stores out one by one would free their
//     slots while JetStream is merely slow (invariant 3). Settling a message
//     erases its waits_ entry, if any. A waiting store() registers each
//     message before handing it over, erases the entry of one it could not
//     hand over, and before it returns detaches (wait = nullptr) its entries
//     still there, so nothing touches a Wait that has gone. A store_async()
//     entry owns its `done`: whoever erases the entry (on_ack(), the receipt
//     thread at its deadline or when it gives up, stop() for what is left)
//     calls it, once, after releasing waits_mu_.
//  2. The copy sees each stream sequence at most once and in order (the
//     ordered consumer starts anew after the last sequence it delivered when
//     it misses one), so a node's copy of a channel has no hole the stream
//     does not have.
//  3. in_flight_ is the number of messages handed over and not yet settled:
//     counted up before js_PublishMsgAsync (down again if libnats did not
//     take the message), down in on_ack() and by give_up_pending(). hand_over() hands nothing over
//     once it reaches max_pending_stores: the publisher is held, never its
//     thread (StoreStatus::kBusy). libnats counts a message until on_ack()
//     has returned, and acks come on one thread, so its count is at most
//     in_flight_ + 1: its MaxPending, max_pending_stores + 1, is never
//     exceeded, and libnats never makes a hand-over wait for room.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nats/nats.h>
#include <tl/expected.hpp>

#include "delivery_gate.hpp"
#include "ringcast/broker/broker.hpp"
#include "ringcast/broker/cluster.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

struct ClusterHistoryStats {
  std::uint64_t stored = 0;          // messages JetStream acknowledged
  std::uint64_t store_failed = 0;    // refused here (too large, buffer full) or by JetStream
  std::uint64_t store_timeouts = 0;  // stores not confirmed within store_timeout (a QoS 1 publisher got an error)
  std::uint64_t stalls = 0;          // stores refused for now: max_pending_stores were in flight (kBusy)
  std::uint64_t pending = 0;         // now: stores handed over and not yet acknowledged (invariant 3)
  std::uint64_t loaded = 0;          // stream messages loaded into this node's copy at its start (load())
  std::uint64_t copied = 0;          // stream messages published here since
  std::uint64_t copy_refused = 0;    // ... that this node refused (stopping) or could not read
  std::uint64_t skipped = 0;         // stream messages dropped by its limits before this node read them
};

class ClusterHistory {
 public:
  // Makes the stream, or raises an existing one's limits to `limits`; an
  // error names the step (no JetStream, too few servers for the replicas).
  static tl::expected<std::unique_ptr<ClusterHistory>, std::string> open(natsConnection* conn,
                                                                         const ClusterConfig& config,
                                                                         std::uint64_t origin,
                                                                         const broker::ClusterHistoryLimits& limits,
                                                                         LogFn log);
  ClusterHistory(const ClusterHistory&) = delete;
  ClusterHistory& operator=(const ClusterHistory&) = delete;
  ~ClusterHistory();

  [[nodiscard]] const std::string& epoch() const noexcept { return epoch_; }
  // ClusterLink::load_history: reads the stream from its first message to
  // the last one it held at open(); the copy (start_copy) goes on after it.
  [[nodiscard]] tl::expected<void, std::string> load(const broker::HistoryLoad& load);
  // ClusterLink::store and store_async.
  [[nodiscard]] broker::StoreOutcome store(std::span<const broker::Message> msgs, bool wait,
                                           std::span<std::uint64_t> offsets) noexcept;
  [[nodiscard]] broker::StoreStatus store_async(const broker::Message& msg, broker::StoreDone done) noexcept;
  // Starts this node's copy: every message of the stream, from its first,
  // into `broker`. A failure is logged (the node then serves no history).
  void start_copy(broker::Broker& broker) noexcept;
  // Ends the copy (no on_copy() after it returns), waits briefly for the
  // acks of stores in flight and completes the store_async() calls still
  // waiting as failed.
  void stop() noexcept;
  [[nodiscard]] ClusterHistoryStats stats() const noexcept;

 private:
  ClusterHistory(natsConnection* conn, const ClusterConfig& config, std::uint64_t origin, LogFn log);
  struct Wait {
    std::span<std::uint64_t> offsets;
    std::size_t remaining = 0;
    bool failed = false;
  };
  using Deadline = std::chrono::steady_clock::time_point;
  // One message waited for: by a store() (`wait`, its index there) or by a
  // store_async() (`done`).
  struct Waiter {
    Wait* wait = nullptr;
    std::size_t index = 0;
    broker::StoreDone done;
  };
  // Frames message `m` as this node's next history message (seq_ counted
  // up) into frame_ and subject_, with its Nats-Msg-Id in `id`; and
  // natsMsg_Create's result, or null. REQUIRES: egress_mu_.
  natsMsg* make_msg(const broker::Message& m, fmt::memory_buffer& id);
  // js_PublishMsgAsync unless max_pending_stores are in flight (kBusy,
  // invariant 3); kFailed if libnats refused it. kTaken: `nm` is libnats'.
  // REQUIRES: egress_mu_.
  broker::StoreStatus hand_over(natsMsg*& nm) noexcept;
  // The receipt thread (thread safety above).
  void run_receipts() noexcept;
  // Takes every store still pending back from libnats and settles it as not
  // confirmed in time (invariant 1). The receipt thread's; not under waits_mu_.
  void give_up_pending() noexcept;
  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure);
  // Settles a store (invariant 1): `stored` (its ack) or refused by
  // JetStream, or `given_up`; destroys `msg`.
  void settle(natsMsg* msg, const jsPubAck* stored, bool given_up) noexcept;
  static void on_copy(natsConnection* nc, natsSubscription* sub, natsMsg* msg, void* closure);
  static void on_copy_complete(void* closure);
  void copy(natsMsg* msg) noexcept;

  natsConnection* const conn_;
  const ClusterConfig config_;
  const std::uint64_t origin_;
  const LogFn log_;
  jsCtx* js_ = nullptr;
  std::string stream_;
  std::string epoch_;
  std::uint64_t loaded_to_ = 0;  // the stream's last sequence at open(): load() reads up to it, the copy after it

  std::atomic<std::int64_t> in_flight_{0};  // invariant 3; relaxed: a bound, libnats' own count backs it
  std::mutex egress_mu_;
  std::uint64_t seq_ = 0;        // this node's history messages, numbered (their Nats-Msg-Id); guarded by egress_mu_
  std::string frame_, subject_;  // scratch, guarded by egress_mu_

  std::mutex waits_mu_;
  std::condition_variable waits_cv_;
  std::unordered_map<std::uint64_t, Waiter> waits_;  // by seq; invariant 1
  // The receipt thread's, guarded by waits_mu_: store_async()'s seqs with
  // their deadlines, oldest first (one store_timeout each, so in order),
  // whether a flush is wanted, and whether to stop.
  std::deque<std::pair<std::uint64_t, Deadline>> async_deadlines_;
  bool flush_wanted_ = false;
  bool receipts_stop_ = false;
  std::condition_variable receipts_cv_;
  std::thread receipts_;

  // The copy, publishing into the broker against stop().
  std::atomic<broker::Broker*> broker_{nullptr};
  DeliveryGate gate_;
  std::uint64_t copied_to_ = 0;  // the last sequence the copy saw; the delivery thread's (start_copy sets it first)
  natsSubscription* copy_sub_ = nullptr;
  std::mutex copy_mu_;
  std::condition_variable copy_done_cv_;
  bool copy_done_ = true;  // guarded by copy_mu_: no subscription, or it completed

  std::atomic<std::uint64_t> acks_{0};  // on_ack() calls: what the receipt thread watches (invariant 1)
  std::atomic<std::uint64_t> stored_{0}, store_failed_{0}, store_timeouts_{0}, stalls_{0}, loaded_{0}, copied_{0},
      copy_refused_{0}, skipped_{0};
};

}  // namespace ringcast::relay
