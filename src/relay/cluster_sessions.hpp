// ClusterSessions: durable QoS 1 sessions' owners and floors kept by
// JetStream (docs/cluster.md, "Durable sessions"), the SessionStore that
// NatsCluster's ClusterLink::open_sessions returns.
//
// One KV bucket, `<PREFIX>_SESSIONS` (the subject prefix with '.' as '_'),
// with the history stream's replicas, holds per session
//   o.<hex client id>                  its owner's identity
//   f.<hex client id>.<hex channel>    its floor on that channel, in decimal
//   h.<hex client id>                  the node that attached it last (its
//                                      origin, 16 hex digits)
// (hex: a KV key allows only [-/_=.a-zA-Z0-9]). Its TTL is --session-ttl and
// a half (none with 0), the same on every node; every node writes its
// attached sessions' keys again every ttl / 2 and at each detach
// (DurableSessions), so a key outlives its session's last connection by
// ttl to 1.5 ttl and is then dropped by JetStream. No node deletes a key: a
// session this node expires may be attached on another node.
//
// The owner is claimed with a KV create (only if the key is absent), so two
// nodes claiming a new client id at once agree on one owner. Floors are put
// without waiting (a publish on `$KV.<bucket>.<key>`, its ack counted by
// on_ack): one node's puts of a key are stored in the order they were made,
// but a late put of another node (a connection that died there unnoticed
// while its client resumed here) can lower a floor: duplicates, never loss.
//
// Holds (SessionStore::hold) are KV puts whose revision the attach keeps;
// one watcher thread per node reads every h. key's changes from the bucket
// and hands those of other nodes to watch_taken's function (under taken_mu_,
// so clearing it waits for a call in progress), which lets go of a session
// this node held at a lower revision. No node deletes an h. key: a later
// attach anywhere overwrites it, and JetStream expires it with the rest.
//
// This node keeps a copy of every session attached here since its claim (the
// owner and all its floors, read at the claim, raised by this node's puts):
// floor() reads it, refresh() writes it all again, so a channel the session
// does not use on this node does not expire while it is attached here.
//
// Thread safety: every SessionStore call from any thread. mu_ guards
// sessions_ and the scratch buffers, and is held while a put is handed to
// libnats (a buffer append; it waits up to kStallWait when 65,536 puts await
// their acks), so the last value handed over for a key is the copy's. on_ack
// runs on libnats' thread and only counts. watch_holds() runs on
// holds_thread_ and calls taken_ under taken_mu_ (never under mu_), so
// watch_taken() returning means the function it replaced has returned;
// hold() is a synchronous KV put and takes no lock of ours.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nats/nats.h>
#include <tl/expected.hpp>

#include "ringcast/broker/session_store.hpp"
#include "ringcast/relay/relay.hpp"

namespace ringcast::relay {

struct ClusterSessionsStats {
  std::uint64_t puts = 0;        // keys JetStream acknowledged
  std::uint64_t put_failed = 0;  // refused here (buffer full, key too long) or by JetStream, or not acked in time
};

class ClusterSessions final : public broker::SessionStore {
 public:
  // Binds to the bucket, or makes it; an error names the step (a bucket made
  // with another --session-ttl is refused: every node must use the same).
  // `origin` names this node in its holds (the link's origin).
  static tl::expected<std::unique_ptr<ClusterSessions>, std::string> open(natsConnection* conn,
                                                                          const ClusterConfig& config,
                                                                          std::chrono::milliseconds session_ttl,
                                                                          std::uint64_t origin, LogFn log);
  ClusterSessions(const ClusterSessions&) = delete;
  ClusterSessions& operator=(const ClusterSessions&) = delete;
  ~ClusterSessions() override;

  [[nodiscard]] std::optional<std::string> claim(std::string_view client_id, std::string_view owner) override;
  [[nodiscard]] std::optional<std::uint64_t> hold(std::string_view client_id) override;
  void watch_taken(TakenFn taken) override;
  [[nodiscard]] std::optional<std::uint64_t> floor(std::string_view client_id, std::string_view channel) const override;
  void put_floor(std::string_view client_id, std::string_view channel, std::uint64_t floor) noexcept override;
  void refresh(std::string_view client_id) noexcept override;
  [[nodiscard]] std::vector<std::string> detached_clients() const override { return {}; }
  void expire(std::string_view client_id) noexcept override;

  [[nodiscard]] ClusterSessionsStats stats() const noexcept;

 private:
  struct Session {
    std::string owner;
    std::unordered_map<std::string, std::uint64_t> floors;  // by channel
  };
  ClusterSessions(const ClusterConfig& config, std::uint64_t origin, LogFn log);
  // The watcher thread: every h. key's change, from the bucket.
  void watch_holds() noexcept;
  // The floors saved for `client_id`, read through a watcher; nullopt on error.
  std::optional<std::unordered_map<std::string, std::uint64_t>> read_floors(std::string_view client_id);
  // Hands a put of `key` (an "o." or "f." key) to libnats. REQUIRES: mu_.
  void put_locked(const std::string& key, std::string_view value) noexcept;
  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure);

  const ClusterConfig config_;
  const std::string token_;  // this node's origin as 16 hex digits: an h. key's value
  const LogFn log_;
  std::string bucket_;
  jsCtx* js_ = nullptr;
  jsPubOptions put_options_{};  // every put's: MaxWait (open())
  kvStore* kv_ = nullptr;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Session> sessions_;  // by client id; guarded by mu_
  std::string subject_;                                // scratch, guarded by mu_

  std::mutex taken_mu_;
  TakenFn taken_;  // guarded by taken_mu_, held while it runs
  kvWatcher* holds_ = nullptr;
  std::thread holds_thread_;  // runs watch_holds() until the destructor stops holds_

  std::atomic<std::uint64_t> puts_{0}, put_failed_{0};  // relaxed: statistics
};

}  // namespace ringcast::relay
