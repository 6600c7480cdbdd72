// One client connection's protocol state: parses its requests, executes the
// commands, and queues replies in order with the messages it receives.
//
// Thread safety:
//  * on_input(), detach() and the accessors are called by the connection's owning
//    thread only (one I/O thread, or the test).
//  * Publishers on other threads reach the session only through the Subscriber
//    base (its queue and on_queue_ready()).
//  * name and the atomic mirrors below are read by other sessions' CLIENT LIST
//    and INFO under the core's registry lock.
//
// Invariants:
//  1. Replies and messages leave in the order Redis would send them: pending
//     replies are flushed into the queue before any command that queues frames
//     itself (SUBSCRIBE family, PUBLISH), and (un)subscribe confirmations are
//     queued while the index lock is held.
//  2. Until authenticated (when BrokerConfig::requirepass or token_secret is
//     set), only AUTH, HELLO, PING, QUIT and RESET run.
//  3. PUBLISHes whose channel and payload together are at most 64 KiB, from a
//     connection with no subscription, are batched: consecutive ones in one
//     input buffer are executed together (one index lock, one queue push per
//     subscriber per run of one channel) when another command, the end of the
//     input or a size cap comes; their replies are appended then, before any
//     later reply. Nothing else can reach such a connection's queue, so no
//     client sees an order Redis would not produce.
//  4. Held (BrokerConfig::max_block > 0, a `block` subscriber refused a
//     PUBLISH): the refused PUBLISH and everything after it wait, in order, as
//     the batch remainder in pending_, the command being executed in
//     held_command_ and the unparsed input in held_input_; nothing else runs
//     until retry_held() gets the PUBLISH through or max_block has passed since
//     the first refusal (then it is answered with the REFUSED error).
//  5. CLIENT REPLY: a command's reply is what it appends to reply_ after
//     reply_mark_; with REPLY OFF, or SKIP sent just before, that part is cut
//     when the command ends (a batched PUBLISH records the choice in its entry).
//     (Un)subscribe confirmations and messages are pushes: they are flushed to
//     the queue as they are made, so they arrive whatever the reply mode, as in
//     Redis 7.0.
//  6. With a grant (AUTH <sub> <token>), SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE,
//     PUBLISH and SPUBLISH are checked against it before they have any effect:
//     one refused channel refuses the whole command with NOPERM, as Redis's ACL
//     does, and changes nothing. A password AUTH or RESET drops the grant.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "broker/core/broker_core.hpp"
#include "broker/resp/request_parser.hpp"
#include "broker/core/subscription_index.hpp"
#include "ringcast/broker/grant.hpp"

namespace ringcast::broker {

class Session : public Subscriber {
 public:
  enum class InputResult : std::uint8_t {
    kOk,
    kClose,  // stop reading; close once the queued replies are written
    kHeld,   // stop reading; call retry_held() later (invariant 4)
  };

  Session(BrokerCore& core, std::string peer);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Parses and executes every complete command in `bytes` (any split is fine).
  InputResult on_input(std::string_view bytes);
  // Tries the held PUBLISH again and, once it is through (or refused for good),
  // runs the held command and input. kHeld while still held.
  InputResult retry_held();

  // Removes the session from the index and the registry and closes its queue.
  // Idempotent; must run before destruction, on the owning thread.
  void detach() noexcept;

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] bool authenticated() const noexcept { return authenticated_; }
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  [[nodiscard]] std::chrono::steady_clock::time_point created() const noexcept { return created_; }
  // Mirrors for other threads' CLIENT LIST / INFO.
  [[nodiscard]] std::uint32_t sub_count() const noexcept { return nsub_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t psub_count() const noexcept { return npsub_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t ssub_count() const noexcept { return nssub_.load(std::memory_order_relaxed); }
  [[nodiscard]] int resp_version() const noexcept { return resp_mirror_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t sent_frames() const noexcept {
    return sent_frames_.load(std::memory_order_relaxed);
  }

 protected:
  ~Session() override;
  [[nodiscard]] BrokerCore& core() const noexcept { return core_; }
  // True if the input since the last call published something (owner thread):
  // the server pauses only publishing connections (docs/broker.md, pacing).
  [[nodiscard]] bool take_published() noexcept {
    const bool p = published_;
    published_ = false;
    return p;
  }
  // The writer handed `n` more frames to the socket (owner thread).
  void count_sent(std::uint64_t n) noexcept {
    // relaxed: a statistic; only the owner thread writes it.
    sent_frames_.store(sent_frames_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

 private:
  friend class BrokerCore;

  // Which subscriptions a (un)subscribe command acts on.
  enum class Space : std::uint8_t { kChannel, kPattern, kShard };

  // Runs one command with the CLIENT REPLY rules (invariant 5).
  void execute(std::span<const std::string> args);
  void dispatch(const std::string& name, std::span<const std::string> args);
  void flush_replies();
  // Executes the batched PUBLISHes and appends their replies (invariant 3).
  // may_hold: a refusal may hold the session (invariant 4) instead of answering.
  void flush_publishes(bool may_hold = true);
  // Invariant 4: starts the hold clock at the first refusal; true while it runs.
  bool keep_holding();
  void set_protocol(Resp r);
  void update_mirrors() noexcept;
  [[nodiscard]] bool subscribed() const noexcept { return subscription_count() > 0; }

  [[nodiscard]] const std::vector<std::string>& subscriptions(Space space) const noexcept;
  // The running count in a confirmation: shard channels alone, or channels plus patterns.
  [[nodiscard]] std::size_t confirmation_count(Space space) const noexcept;
  [[nodiscard]] static std::string_view confirmation_kind(Space space, bool subscribe) noexcept;
  // REQUIRES: the index update lock held.
  bool add_subscription(Space space, std::string_view name);
  bool remove_subscription(Space space, std::string_view name);

  void cmd_subscribe(std::span<const std::string> args, Space space);
  void cmd_unsubscribe(std::span<const std::string> args, Space space);
  void cmd_publish(std::span<const std::string> args);
  // The error reply of a PUBLISH refused by a `block` subscriber.
  void refused_reply(std::string_view channel);
  void cmd_spublish(std::span<const std::string> args);
  void cmd_ping(std::span<const std::string> args);
  void cmd_auth(std::span<const std::string> args);
  void cmd_hello(std::span<const std::string> args);
  void cmd_reset();
  void cmd_client(std::span<const std::string> args);
  void cmd_pubsub(std::span<const std::string> args);
  void cmd_info(std::span<const std::string> args);
  bool check_password(std::string_view user, std::string_view pass);

  // Tokens and permissions (invariant 6, docs/security.md "Tokens").
  enum class Access : std::uint8_t { kSubscribe, kSubscribePattern, kPublish };
  // Whether a fresh (or RESET) connection must authenticate first.
  [[nodiscard]] bool needs_auth() const noexcept;
  // AUTH / HELLO AUTH credentials: a token when a token secret is set (unless
  // the user is "default" and a password is set too), else the password.
  // Returns true when authenticated; else appends the WRONGPASS reply.
  bool authenticate(std::string_view user, std::string_view secret);
  bool authenticate_token(std::string_view user, std::string_view token);
  // True when no grant restricts the session, or the unexpired grant allows `name`.
  [[nodiscard]] bool permitted(Access access, std::string_view name) const noexcept;
  // REQUIRES: grant_.
  [[nodiscard]] bool grant_expired() const noexcept;
  // permitted(), or else appends the NOPERM reply, counts the denial and returns false.
  bool check_permission(Access access, std::string_view name);
  bool set_name(std::string_view name);

  BrokerCore& core_;
  const std::uint64_t id_;
  const std::string peer_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  RequestParser parser_;
  std::string reply_;  // replies not yet queued (invariant 1)
  std::size_t reply_mark_ = 0;  // where the running command's reply starts (invariant 5)
  bool reply_off_ = false;      // CLIENT REPLY OFF
  bool skip_next_ = false;      // CLIENT REPLY SKIP: the next command's reply is dropped
  bool skip_current_ = false;   // ... and this is that command
  // Batched PUBLISHes (invariant 3): channel and payload lengths, their bytes
  // back to back in pending_bytes_. Bounded by the caps below: a batch is flushed
  // once it reaches kMaxPendingBytes, so it never holds more than that plus one
  // entry of at most kMaxBatchedPayload, and the buffer's capacity (kept for the
  // next batch) stays under twice that.
  struct PendingPublish {
    std::uint32_t channel_len;
    std::uint32_t payload_len;
    bool reply;  // false: CLIENT REPLY OFF or SKIP (invariant 5)
  };
  static constexpr std::size_t kMaxPendingPublishes = 1024;
  static constexpr std::size_t kMaxBatchedPayload = 64u << 10;  // channel + payload; larger are not copied
  static constexpr std::size_t kMaxPendingBytes = 1u << 20;
  std::vector<PendingPublish> pending_;
  std::string pending_bytes_;
  std::string name_;   // written under the registry lock (BrokerCore::set_session_name)
  bool authenticated_;
  std::optional<Grant> grant_;  // invariant 6
  bool closing_ = false;
  bool detached_ = false;
  bool published_ = false;
  bool held_ = false;            // invariant 4
  bool hold_started_ = false;    // hold_until_ is set
  std::chrono::steady_clock::time_point hold_until_{};
  std::vector<std::string> held_command_;
  std::string held_input_;
  std::atomic<std::uint32_t> nsub_{0};
  std::atomic<std::uint32_t> npsub_{0};
  std::atomic<std::uint32_t> nssub_{0};
  std::atomic<int> resp_mirror_{2};
  std::atomic<std::uint64_t> sent_frames_{0};
};

}  // namespace ringcast::broker
