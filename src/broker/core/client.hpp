// One client connection as the core sees it, whatever its transport: the
// subscriber (queue and wire format), what CLIENT LIST and INFO show, and the
// input interface the server drives. The RESP session (resp/session.hpp) and
// the WebSocket session derive from it; the server (server/connection.hpp) holds any of
// them through a Client pointer and never knows which protocol it speaks.
//
// A session turns bytes into calls on the core (BrokerCore::update() for
// (un)subscribing, BrokerCore::publish() for publishing) and the core's results
// into bytes; its subscriptions live in the index (Subscriber), never in the
// session.
//
// Thread safety:
//  * on_input(), retry_held(), next_timer(), on_timer(), detach(),
//    take_published(), count_sent() and the protected members are called by the connection's owning thread only (its
//    I/O thread, or a test).
//  * Publishers on other threads reach the client only through the Subscriber
//    interface: its queue and on_queue_ready(), which calls the Waker.
//  * name() and the atomic mirrors are read by other threads (CLIENT LIST, INFO,
//    Broker::connection_stats) while the owner may change them.
//
// Invariants:
//  1. Registered with the core (BrokerCore::register_client) from construction
//     until detach(); detach() also cuts the remote wake, removes every
//     subscription and closes the queue, so neither a publisher nor another
//     thread's wake (remote_wake.hpp) reaches the client after it returns.
//  2. The mirrors (subscription counts, format) equal the index's view after
//     every SubscriptionUpdate has ended (its destructor refreshes them).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "broker/core/remote_wake.hpp"
#include "broker/core/subscription_index.hpp"
#include "broker/queue/wire_format.hpp"
#include "ringcast/broker/grant.hpp"
#include "ringcast/broker/token.hpp"

namespace ringcast::broker {

class BrokerCore;

// How a client asks its connection's writer to run: called by publishers (any
// thread, index lock held) and by the owner. Must not block or write to the
// socket (the server marks the connection ready on its I/O thread).
class Waker {
 public:
  virtual void wake() noexcept = 0;

 protected:
  ~Waker() = default;
};

class Client : public Subscriber {
 public:
  enum class InputResult : std::uint8_t {
    kOk,
    kClose,  // stop reading; close once the queued frames are written
    kHeld,   // stop reading; call retry_held() later (resp/session.hpp, invariant 4)
  };
  // What a token's grant controls, and its verdict (docs/security.md, "Tokens").
  enum class Access : std::uint8_t { kSubscribe, kSubscribePattern, kPublish };
  enum class Permission : std::uint8_t { kAllowed, kDenied, kExpired };

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  // Detaches if detach() was not called.
  ~Client() override;

  // Consumes `bytes` read from the connection (any split is fine).
  virtual InputResult on_input(std::string_view bytes) = 0;
  // After kHeld: tries again; kHeld while still held. The default never holds.
  virtual InputResult retry_held() { return InputResult::kOk; }

  // The session's own timer (QoS 1 redelivery, ws_session.hpp): when on_timer()
  // should next run, on the core's clock (steady_clock's epoch); nullopt: no
  // timer. The server asks after every write turn and after input, and arms
  // one timer per connection for the earliest answer; on_timer() may run early
  // or late, never concurrently with anything else of the client. kClose:
  // nothing more is read, and the connection closes once what is queued is
  // written (as after input); kHeld is not for a timer.
  [[nodiscard]] virtual std::optional<std::chrono::nanoseconds> next_timer() const { return std::nullopt; }
  virtual InputResult on_timer() { return InputResult::kOk; }

  // Removes the client from the index and the registry and closes its queue
  // (invariant 1). Idempotent; must run before destruction, on the owning thread.
  void detach() noexcept;

  void on_queue_ready() noexcept final { waker_.wake(); }

  // True if the input since the last call published something: the server
  // pauses only publishing connections (docs/broker.md, "Publisher pacing").
  [[nodiscard]] bool take_published() noexcept {
    const bool p = published_;
    published_ = false;
    return p;
  }
  // The writer handed `n` more frames to the socket.
  void count_sent(std::uint64_t n) noexcept {
    // relaxed: a statistic; only the owner thread writes it.
    sent_frames_.store(sent_frames_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] bool authenticated() const noexcept { return authenticated_; }
  // Authenticated, and past the protocol's own handshake (the WebSocket
  // upgrade): until then the server closes the connection at auth_timeout and
  // counts it against max_unauthenticated (server/connection.hpp, A1-A3).
  [[nodiscard]] virtual bool admitted() const noexcept { return authenticated_; }
  // How long the server waits before it writes what the last input queued:
  // the sum of its refused authentications' delays (AuthStats::record_failure),
  // else zero.
  // Resets it. Owner thread.
  [[nodiscard]] std::chrono::milliseconds take_reply_delay() noexcept { return std::exchange(reply_delay_, {}); }
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  [[nodiscard]] std::chrono::steady_clock::time_point created() const noexcept { return created_; }
  // CLIENT SETNAME's name, or empty. Any thread.
  [[nodiscard]] std::string name() const;

  // Mirrors for other threads (relaxed loads; display only).
  [[nodiscard]] std::uint32_t sub_count() const noexcept { return nsub_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t psub_count() const noexcept { return npsub_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint32_t ssub_count() const noexcept { return nssub_.load(std::memory_order_relaxed); }
  [[nodiscard]] WireFormat format_mirror() const noexcept { return format_mirror_.load(std::memory_order_relaxed); }
  // "resp2", "resp3" or "ws" (wire_format.hpp).
  [[nodiscard]] std::string_view protocol() const noexcept { return protocol_label(format_mirror()); }
  [[nodiscard]] std::uint64_t sent_frames() const noexcept { return sent_frames_.load(std::memory_order_relaxed); }

  // Owner thread, after a change of subscriptions or format (SubscriptionUpdate
  // calls it; invariant 2).
  void refresh_mirrors() noexcept;

 protected:
  // Registers with `core`. `waker` must outlive the client.
  Client(BrokerCore& core, std::string peer, WireFormat format, Deliveries deliveries, Waker& waker,
         bool authenticated);

  [[nodiscard]] BrokerCore& core() const noexcept { return core_; }
  void set_authenticated(bool yes) noexcept { authenticated_ = yes; }
  // A password or a token secret is set: a new (or RESET) connection must
  // authenticate before anything else.
  [[nodiscard]] bool auth_required() const noexcept;
  // The one authentication path of every session (docs/security.md): with a
  // token secret set, `secret` must be a valid token, whose subject must be
  // `user` when the protocol names one (RESP's AUTH <user> <token>), unless
  // `user` is "default" and a password is set: then, as without a token
  // secret, `secret` must be the password (and `user`, if named, "default").
  // Accepted: the client is authenticated with the token's grant, or with
  // none (every channel) for the password. Counted in AuthStats either way;
  // the session words the refusal in its protocol. A refusal is also recorded
  // per address and logged (AuthStats::record_failure), sets the reply delay
  // (take_reply_delay), and at the connection's max_auth_failures-th sets
  // `close`: the session answers, then closes the connection.
  struct AuthOutcome {
    enum class Kind : std::uint8_t {
      kAccepted,
      kBadToken,       // `token_error` says why
      kWrongSubject,   // a valid token of another subject than `user`
      kWrongPassword,  // or a user other than "default"
    };
    Kind kind = Kind::kAccepted;
    TokenError token_error{};
    bool close = false;
  };
  AuthOutcome authenticate(std::optional<std::string_view> user, std::string_view secret);
  // The grant of the token the client authenticated with; nullopt (no token, or
  // a password) allows every channel.
  void set_grant(std::optional<Grant> grant) noexcept { grant_ = std::move(grant); }
  [[nodiscard]] const std::optional<Grant>& grant() const noexcept { return grant_; }
  // The grant's verdict on `access` to `name`; a grant ends with its token's
  // `exp` plus kTokenLeeway (subscriptions made before stay). The session
  // counts the refusals it answers (AuthStats::count_permission_denied).
  [[nodiscard]] Permission permission(Access access, std::string_view name) const noexcept;
  void set_name(std::string name);
  // The input being handled published something (see take_published()).
  void mark_published() noexcept { published_ = true; }
  // Queues `bytes` as one frame that no overflow policy drops (a reply, a
  // confirmation, an error) and wakes the writer. False if the queue is closed:
  // the connection is going away.
  bool push_reply(std::string_view bytes);
  // Queues message blocks (a replay of history, guarantees/replay.hpp) as a
  // publish would: droppable, under the queue's limits and policy, and wakes
  // the writer.
  void push_messages(std::span<const FrameRef> blocks) noexcept;
  // The client's wake-up for threads outside the broker (remote_wake.hpp),
  // made at the first call; detach() cuts it.
  [[nodiscard]] const std::shared_ptr<RemoteWake>& remote_wake();
  // Adds to the wait before what this input queued is written
  // (take_reply_delay): a refused credential outside AUTH (HTTP /metrics).
  void delay_reply(std::chrono::milliseconds d) noexcept { reply_delay_ += d; }

 private:
  // `pass` is the broker's password (BrokerConfig::requirepass), compared in
  // time that depends only on the lengths; true when no password is set
  // ("nopass", as Redis's default user).
  [[nodiscard]] bool password_matches(std::string_view pass) const noexcept;
  // authenticate()'s refusal `r` (described by `why`): counts, records and
  // delays it, and decides `close`.
  AuthOutcome refuse(AuthOutcome r, std::string_view why);

  BrokerCore& core_;
  Waker& waker_;
  const std::uint64_t id_;
  const std::string peer_;
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  bool authenticated_;
  std::uint32_t auth_failures_ = 0;  // refused authentications on this connection
  std::chrono::milliseconds reply_delay_{0};
  std::optional<Grant> grant_;
  bool detached_ = false;
  std::shared_ptr<RemoteWake> remote_wake_;  // null until remote_wake()
  bool published_ = false;
  mutable std::mutex name_mu_;  // a leaf lock: guards name_ only
  std::string name_;
  std::atomic<std::uint32_t> nsub_{0};
  std::atomic<std::uint32_t> npsub_{0};
  std::atomic<std::uint32_t> nssub_{0};
  std::atomic<WireFormat> format_mirror_;
  std::atomic<std::uint64_t> sent_frames_{0};
};

}  // namespace ringcast::broker
